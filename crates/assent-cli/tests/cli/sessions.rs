//! `assent sessions` and `assent session show ID` (issue 53, point 15): what a coding
//! agent's session did, call by call, from what the hook recorded — ran unasked (which
//! rule), refused (which rule), edited (by whom, what changed), rejected (by whom, why),
//! and what the agent reported after the run.

use super::{Cli, code};
use serde_json::{Value, json};
use std::process::Child;
use std::time::{Duration, Instant};

const AGENT: &str = "coder";

/// Claude Code's `event` (`PreToolUse` or `PostToolUse`) of `command` in `session`, as
/// call `call`.
fn claude(event: &str, session: &str, call: &str, command: &str) -> String {
    let mut value = json!({
        "session_id": session,
        "transcript_path": "/home/user/.claude/projects/proj/t.jsonl",
        "cwd": "/home/user/proj",
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Run it"},
        "tool_use_id": call,
    });
    if event == "PostToolUse" {
        value["tool_response"] = json!({"stdout": "", "stderr": "", "interrupted": false});
    }
    value.to_string()
}

/// `assent hook claude-code` for the agent, with `event` on stdin.
fn hook(cli: &Cli, event: &str) -> Child {
    cli.hook("claude-code", AGENT, &["--wait", "30"], event)
}

/// The hook's answer, once it ended (exit 0).
fn answered(child: Child) -> Value {
    let out = child.wait_with_output().expect("the hook ends");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    if out.stdout.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The one waiting set of the agent, once the hook queued it.
fn waiting_set(cli: &Cli) -> String {
    let started = Instant::now();
    loop {
        let pending = cli.json(&["pending"], "");
        if let Some(id) = pending[0]["id"].as_str() {
            return id.to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing queued"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_session_shows_every_call_with_how_it_ended_and_who_decided() {
    let cli = Cli::new().at_the_current_time();
    let ok = |out: std::process::Output| {
        assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
        out
    };
    ok(cli.run(&["agent", "create", "--id", AGENT, "--categories", "code"]));
    ok(cli.run(&["agent", "allow", AGENT, "Bash(echo *)"]));
    ok(cli.run(&["agent", "deny", AGENT, "Bash(rm *)"]));

    // Allowed by a rule, and the agent reports it ran.
    answered(hook(
        &cli,
        &claude("PreToolUse", "sess-a1", "t1", "echo hi"),
    ));
    answered(hook(
        &cli,
        &claude("PostToolUse", "sess-a1", "t1", "echo hi"),
    ));
    // Refused by a rule.
    answered(hook(
        &cli,
        &claude("PreToolUse", "sess-a1", "t2", "rm -rf build"),
    ));
    // Asked: alice edits it, and the agent reports the edited call failed.
    let asked = hook(&cli, &claude("PreToolUse", "sess-a1", "t3", "touch a"));
    let edited_set = waiting_set(&cli);
    ok(cli.run(&[
        "edit",
        &edited_set,
        "0",
        "--args",
        r#"{"command":"touch b","description":"Run it"}"#,
        "--as",
        "alice",
    ]));
    answered(asked);
    let mut failed: Value =
        serde_json::from_str(&claude("PostToolUse", "sess-a1", "t3", "touch b")).expect("JSON");
    failed["tool_response"] = json!({"is_error": true, "error": "touch: permission denied"});
    answered(hook(&cli, &failed.to_string()));
    // Asked: bob rejects it.
    let asked = hook(&cli, &claude("PreToolUse", "sess-a1", "t4", "touch c"));
    let rejected_set = waiting_set(&cli);
    ok(cli.run(&[
        "reject",
        &rejected_set,
        "0",
        "--reason",
        "not here",
        "--as",
        "bob",
    ]));
    answered(asked);
    // Another session of the same agent.
    answered(hook(
        &cli,
        &claude("PreToolUse", "sess-b2", "t1", "echo other"),
    ));

    let sessions = cli.json(&["sessions"], "");
    let listed: Vec<(&str, u64, u64, u64, u64, u64)> = sessions
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| {
            let n = |key: &str| s[key].as_u64().expect("a count");
            (
                s["session"].as_str().expect("a session"),
                n("calls"),
                n("asked"),
                n("edited"),
                n("refused"),
                n("failed"),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("sess-b2", 1, 0, 0, 0, 0), ("sess-a1", 4, 2, 1, 2, 1)],
        "{sessions}"
    );

    let shown = cli.json(&["session", "show", "sess-a1"], "");
    let calls = shown["calls"].as_array().expect("calls");
    let endings: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["ending"].as_str().expect("an ending"),
                c["summary"].as_str().expect("a summary"),
            )
        })
        .collect();
    assert_eq!(
        endings,
        [
            ("ranUnasked", "echo hi"),
            ("refused", "rm -rf build"),
            ("edited", "touch a"),
            ("rejected", "touch c"),
        ],
        "{shown}"
    );
    assert_eq!(calls[0]["decidedBy"], "rule allow Bash(echo *)");
    assert_eq!(calls[0]["failed"], false);
    assert!(
        calls[1]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Bash")),
        "the refusal says why: {}",
        calls[1]
    );
    assert_eq!(calls[2]["decidedBy"], "alice");
    assert_eq!(calls[2]["changeSetId"], edited_set.as_str());
    assert_eq!(calls[2]["diff"], r#"command: "touch a" → "touch b""#);
    assert_eq!(calls[2]["failed"], true);
    assert!(calls[2]["answeredAfterSecs"].is_u64(), "{}", calls[2]);
    assert_eq!(calls[3]["decidedBy"], "bob");
    assert_eq!(calls[3]["reason"], "not here");

    // The same on one screen of text, by a prefix of the id.
    let text = cli.run(&["session", "show", "sess-a"]);
    let text = String::from_utf8_lossy(&ok(text).stdout).into_owned();
    for line in [
        "Session sess-a1 of agent coder in /home/user/proj (4 calls)",
        "ran unasked: rule allow Bash(echo *)",
        "edited by alice after",
        "; the agent reports it failed",
        r#"command: "touch a" → "touch b""#,
        "rejected by bob after",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }

    // A prefix of two sessions is a usage error naming them; an unknown one exit 1;
    // another agent's view holds none of these.
    let both = cli.run(&["session", "show", "sess-"]);
    assert_eq!(code(&both), 2, "{}", String::from_utf8_lossy(&both.stderr));
    assert!(String::from_utf8_lossy(&both.stderr).contains("sess-a1, sess-b2"));
    assert_eq!(code(&cli.run(&["session", "show", "nope"])), 1);
    assert_eq!(
        cli.json(&["sessions", "--agent", "someone-else"], ""),
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_reads_a_session_and_an_agent_token_reads_its_own_agents_alone() {
    let cli = Cli::new().at_the_current_time();
    for agent in [AGENT, "other"] {
        let out = cli.run(&["agent", "create", "--id", agent, "--categories", "code"]);
        assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = cli.run(&["agent", "deny", AGENT, "Bash(rm *)"]);
    assert_eq!(code(&out), 0);
    tokio::task::block_in_place(|| {
        answered(hook(
            &cli,
            &claude("PreToolUse", "sess-p", "t1", "rm -rf build"),
        ));
    });
    let token = |agent: &str| {
        let token = cli.json(&["tokens", "add", "--role", "agent", "--agent", agent], "");
        token["secret"].as_str().expect("a secret").to_owned()
    };
    let (own, other) = (token(AGENT), token("other"));
    let admin = "sessions-admin-token-0123456789";
    let served = super::serve(&cli, admin);
    let client = reqwest::Client::new();
    let get = |path: &str, bearer: &str| {
        client
            .get(format!("{}/api/{path}", served.base))
            .bearer_auth(bearer)
            .send()
    };

    let listed: Value = get("hook-sessions", admin)
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    assert_eq!(listed[0]["session"], "sess-p", "{listed}");
    assert_eq!(listed[0]["refused"], 1);
    let shown = get("hook-sessions/sess-p", &own).await.expect("answered");
    assert_eq!(shown.status(), 200);
    let shown: Value = shown.json().await.expect("JSON");
    assert_eq!(shown["calls"][0]["ending"], "refused", "{shown}");
    // Another agent's token sees none of it, and may not ask for it.
    let theirs: Value = get("hook-sessions", &other)
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    assert_eq!(theirs, json!([]));
    let refused = get("hook-sessions/sess-p", &other).await.expect("answered");
    assert_eq!(refused.status(), 404);
    let refused = get(&format!("hook-sessions?agent={AGENT}"), &other)
        .await
        .expect("answered");
    assert_eq!(refused.status(), 403);
}
