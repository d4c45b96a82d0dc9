//! The doors agree (issue 43): the same rule, quorum and hold changes made over the
//! API (`PUT /api/agents/{id}/rules|holds/{tool}`) and on the command line (`assent
//! agent allow|ask|deny|hold`) leave the same settings and the same next wake, and a
//! rule set through either door after a shadow rule leaves no shadow rule behind.

use super::{Cli, Served, code, serve};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "doors-admin-token-0123456789";

/// `PUT /api/agents/{agent}/{what}/{tool}` with `body`, as the admin: must answer 200.
async fn put(served: &Served, agent: &str, what: &str, tool: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .put(format!("{}/api/agents/{agent}/{what}/{tool}", served.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("answered");
    let status = response.status();
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(status, 200, "PUT {what}/{tool} {body}: {answer}");
    answer
}

/// Runs a command that must succeed.
fn ok(cli: &Cli, args: &[&str]) {
    let out = cli.run(args);
    assert_eq!(
        code(&out),
        0,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Agent `agent`'s settings as `assent agent show --json` shows them, without its id
/// and times (the API's clock is the real one, the CLI's is `--now`).
fn settings(cli: &Cli, agent: &str) -> Value {
    let mut shown = cli.json(&["agent", "show", agent], "");
    let object = shown.as_object_mut().expect("an object");
    for key in ["id", "createdAt", "updatedAt"] {
        object.remove(key);
    }
    shown
}

/// One OpenAI-style call of `tool` with `arguments`.
fn call(tool: &str, arguments: Value) -> String {
    json!([{"id": "call_1", "type": "function",
        "function": {"name": tool, "arguments": arguments.to_string()}}])
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_the_cli_leave_the_same_settings_and_the_same_next_wake() {
    let cli = Cli::new();
    let (by_api, by_cli) = ("by-api", "by-cli");
    let mut tasks = Vec::new();
    for agent in [by_api, by_cli] {
        ok(
            &cli,
            &["agent", "create", "--id", agent, "--categories", "work"],
        );
        // A shadow rule, tried without effect (set on the command line: the API has
        // no door for it).
        ok(
            &cli,
            &["agent", "deny", agent, "set_task_language", "--shadow"],
        );
        let task = cli.json(
            &["task", "create", "--title", agent, "--category", "work"],
            "",
        );
        tasks.push(task["id"].as_str().expect("a task id").to_owned());
    }
    let served = serve(&cli, ADMIN_TOKEN);

    // The rule for the shadowed tool, through each door: the shadow rule is promoted,
    // whichever door set the rule.
    let answered = put(
        &served,
        by_api,
        "rules",
        "set_task_language",
        json!({"action": "allow"}),
    )
    .await;
    assert_eq!(
        answered["rules"],
        json!([{"tool": "set_task_language", "action": "allow"}])
    );
    assert_eq!(
        settings(&cli, by_api).get("shadowRules"),
        None,
        "no stray shadow rule"
    );
    ok(&cli, &["agent", "allow", by_cli, "set_task_language"]);

    // A quorum with an ask, and a hold.
    put(
        &served,
        by_api,
        "rules",
        "update_task_priority",
        json!({"action": "ask", "approvals": 2}),
    )
    .await;
    ok(
        &cli,
        &[
            "agent",
            "ask",
            by_cli,
            "update_task_priority",
            "--approvals",
            "2",
        ],
    );
    put(
        &served,
        by_api,
        "holds",
        "update_task_priority",
        json!({"seconds": 30}),
    )
    .await;
    ok(
        &cli,
        &["agent", "hold", by_cli, "update_task_priority", "30"],
    );

    // The other way round: a shadow rule, then the rule set through the other door.
    for agent in [by_api, by_cli] {
        ok(
            &cli,
            &["agent", "allow", agent, "set_task_status", "--shadow"],
        );
    }
    ok(&cli, &["agent", "deny", by_api, "set_task_status"]);
    put(
        &served,
        by_cli,
        "rules",
        "set_task_status",
        json!({"action": "deny"}),
    )
    .await;
    drop(served);

    let shown = settings(&cli, by_api);
    assert_eq!(shown, settings(&cli, by_cli), "the doors agree");
    assert_eq!(
        shown,
        json!({
            "categories": ["work"],
            "rules": [
                {"tool": "set_task_language", "action": "allow"},
                {"tool": "update_task_priority", "action": "ask"},
                {"tool": "set_task_status", "action": "deny"},
            ],
            "holds": [{"tool": "update_task_priority", "seconds": 30}],
            "quorums": [{"tool": "update_task_priority", "approvals": 2}],
        }),
        "no shadow rule is left"
    );

    // The next wake of each routes the same way.
    let replies = |agent: &str, task: &str| -> Vec<Value> {
        [
            ("set_task_language", json!({"languageCode": "en"})),
            ("set_task_status", json!({"status": "BLOCKED"})),
            ("update_task_priority", json!({"priority": "P0"})),
        ]
        .into_iter()
        .map(|(tool, arguments)| {
            let wake = cli.json(
                &["wake", "--agent", agent, "--task", task],
                &call(tool, arguments),
            );
            json!({
                // Who set the rule and when differ by door (issue 57 quotes them):
                // the words before that must agree.
                "reply": wake["responses"][0]["content"].as_str().map(|reply| {
                    reply.split_once(" Decided by rule ").map_or(reply, |(before, _)| before)
                }),
                "queued": wake["changeSetId"].is_string(),
            })
        })
        .collect()
    };
    let api_wake = replies(by_api, &tasks[0]);
    assert_eq!(api_wake, replies(by_cli, &tasks[1]));
    assert_eq!(
        api_wake[1]["reply"],
        "Denied by policy: Tool set_task_status is denied by policy. Nothing was queued or executed."
    );
    assert_eq!(
        api_wake[2],
        json!({"reply": "Proposal queued for user review.", "queued": true})
    );
    assert_eq!(api_wake[0]["queued"], false, "{api_wake:?}");
}
