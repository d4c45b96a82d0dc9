//! `assent agent allow|ask|deny|show|list`: an agent's rules by tool are set from the
//! command line, shown and listed, and its next wake routes by them.

use super::{Cli, assert_fails, code};
use serde_json::{Value, json};

/// One OpenAI-style call of `tool` with `arguments`.
fn call(tool: &str, arguments: Value) -> String {
    json!([{"id": "call_1", "type": "function",
        "function": {"name": tool, "arguments": arguments.to_string()}}])
    .to_string()
}

/// The reply to the wake's only call.
fn reply(wake: &Value) -> &str {
    wake["responses"][0]["content"].as_str().expect("a reply")
}

#[test]
fn rules_are_set_idempotently_and_shown() {
    let mut cli = Cli::new();
    assert_eq!(cli.json(&["agent", "list"], ""), json!([]));
    let listed = cli.run(&["agent", "list"]);
    assert_eq!(code(&listed), 0);
    assert!(String::from_utf8_lossy(&listed.stdout).starts_with("No agents"));

    let created = cli.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    assert_eq!(created["id"], "a");
    assert_eq!(created["categories"], json!(["work"]));
    assert_eq!(
        created["rules"],
        json!([]),
        "create answers with the new fields too"
    );

    let denied = cli.json(&["agent", "deny", "a", "set_task_status"], "");
    assert_eq!(
        denied["rules"],
        json!([{"tool": "set_task_status", "action": "deny"}])
    );
    assert_eq!(denied["updatedAt"], "2026-03-02T09:00:00Z");
    // The same rule again, later: exit 0 and nothing changes, not even the time.
    cli.now = "2026-03-02T10:00:00Z".to_owned();
    let again = cli.run(&["agent", "deny", "a", "set_task_status"]);
    assert_eq!(code(&again), 0);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing changed"));
    assert_eq!(cli.json(&["agent", "show", "a"], ""), denied);

    // A rule for a pattern is replaced in its place; other rules stay.
    cli.json(&["agent", "ask", "a", "update_task_*"], "");
    let shown = cli.json(&["agent", "allow", "a", "set_task_status"], "");
    assert_eq!(
        shown["rules"],
        json!([
            {"tool": "set_task_status", "action": "allow"},
            {"tool": "update_task_*", "action": "ask"},
        ])
    );
    assert_eq!(shown["createdAt"], "2026-03-02T09:00:00Z");
    assert_eq!(shown["updatedAt"], "2026-03-02T10:00:00Z");
    assert_eq!(cli.json(&["agent", "show", "a"], ""), shown);

    // Replacing the categories keeps the rules.
    let recategorized = cli.json(
        &["agent", "create", "--id", "a", "--categories", "work,home"],
        "",
    );
    assert_eq!(recategorized["rules"], shown["rules"]);

    cli.json(
        &["agent", "create", "--id", "b", "--categories", "home"],
        "",
    );
    let list = cli.json(&["agent", "list"], "");
    let ids: Vec<&str> = list
        .as_array()
        .expect("an array")
        .iter()
        .map(|a| a["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(list[0], cli.json(&["agent", "show", "a"], ""));

    let text = String::from_utf8_lossy(&cli.run(&["agent", "list"]).stdout).into_owned();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec!["ID", "CATEGORIES", "RULES"],
            vec!["a", "home,work", "2"],
            vec!["b", "home", "0"],
        ]
    );
    let text = String::from_utf8_lossy(&cli.run(&["agent", "show", "a"]).stdout).into_owned();
    assert!(text.starts_with("Agent a\n"), "{text}");
    assert!(text.contains("allow   set_task_status"), "{text}");
    assert!(text.contains("ask     update_task_*"), "{text}");
}

#[test]
fn unknown_agents_and_blank_tools_fail_and_change_nothing() {
    let cli = Cli::new();
    cli.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    for action in ["allow", "ask", "deny"] {
        assert_fails(
            &cli.run(&["agent", action, "ghost", "x"]),
            1,
            "no agent \"ghost\"",
        );
        assert_fails(
            &cli.run(&["agent", action, "a", "  "]),
            2,
            "a pattern must not be empty",
        );
    }
    assert_fails(
        &cli.run(&["agent", "show", "ghost"]),
        1,
        "no agent \"ghost\"",
    );
    assert_eq!(
        code(&cli.run(&["agent", "allow", "a"])),
        2,
        "TOOL is required"
    );
    assert_eq!(cli.json(&["agent", "show", "a"], "")["rules"], json!([]));
    assert_eq!(
        cli.json(&["agent", "list"], "").as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn the_next_wake_routes_by_the_rules() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = |tool: &str, arguments: Value| {
        cli.json(
            &["wake", "--agent", "a", "--task", &task],
            &call(tool, arguments),
        )
    };
    let language = || json!({"languageCode": "en"});

    // set_task_language runs at once by its mode; denied, it is refused.
    assert_eq!(
        code(&cli.run(&["agent", "deny", "a", "set_task_language"])),
        0
    );
    let refused = wake("set_task_language", language());
    // Its words as ever, then where the rule came from (issue 57).
    assert!(
        reply(&refused).starts_with(
            "Denied by policy: Tool set_task_language is denied by policy. Nothing was queued or executed. Decided by rule deny set_task_language (a command, set by "
        ),
        "{refused}"
    );
    assert!(refused["changeSetId"].is_null(), "{refused}");
    assert!(cli.json(&["task", "show", &task], "")["language"].is_null());

    // Asked, it waits for a person.
    assert_eq!(
        code(&cli.run(&["agent", "ask", "a", "set_task_language"])),
        0
    );
    let queued = wake("set_task_language", language());
    assert_eq!(reply(&queued), "Proposal queued for user review.");
    assert!(queued["changeSetId"].is_string(), "{queued}");
    assert!(cli.json(&["task", "show", &task], "")["language"].is_null());

    // update_task_priority waits for a person by its mode; allowed, it runs at once.
    let waits = wake("update_task_priority", json!({"priority": "P1"}));
    assert_eq!(reply(&waits), "Proposal queued for user review.");
    assert_eq!(
        code(&cli.run(&["agent", "allow", "a", "update_task_priority"])),
        0
    );
    let ran = wake("update_task_priority", json!({"priority": "P0"}));
    assert!(ran["changeSetId"].is_null(), "nothing queued: {ran}");
    assert!(!reply(&ran).contains("queued"), "{ran}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
}

/// Issue 53, point 10: a rule is removed through the one rule change (`agent unset`),
/// entered on the consent chain; removing one the agent lacks changes nothing.
#[test]
fn a_rule_is_removed_by_its_pattern_and_the_proof_holds() {
    let mut cli = Cli::new();
    cli.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    cli.json(&["agent", "deny", "a", "Bash(rm -rf *)"], "");
    cli.json(&["agent", "allow", "a", "set_task_status"], "");
    cli.now = "2026-03-02T10:00:00Z".to_owned();
    let unset = cli.json(&["agent", "unset", "a", "Bash(rm -rf *)"], "");
    assert_eq!(
        unset["rules"],
        json!([{"tool": "set_task_status", "action": "allow"}]),
        "only that rule went"
    );
    assert_eq!(unset["updatedAt"], "2026-03-02T10:00:00Z");

    let again = cli.run(&["agent", "unset", "a", "Bash(rm -rf *)"]);
    assert_eq!(code(&again), 0);
    assert!(
        String::from_utf8_lossy(&again.stdout)
            .contains("no rule for Bash(rm -rf *); nothing changed"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    assert_fails(&cli.run(&["agent", "unset", "nobody", "x"]), 1, "nobody");
    assert_fails(&cli.run(&["agent", "unset", "a", " "]), 2, "blank");

    // Its last rule goes too, and the consent chain still proves every change.
    let asked = cli.json(&["agent", "unset", "a", "set_task_status"], "");
    assert_eq!(asked["rules"], json!([]));
    let verified = cli.run(&["audit", "verify"]);
    assert_eq!(
        code(&verified),
        0,
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}

/// A condition over the history (issue 57): bad input is exit 2 naming the flag and its
/// value, and nothing changes; a good one is shown by `agent show` as its flags read.
#[test]
fn history_conditions_refuse_bad_input_naming_the_flag_and_show_as_set() {
    let cli = Cli::new();
    cli.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    let before = cli.json(&["agent", "show", "a"], "");
    for (args, named) in [
        (vec!["ask", "a", "refund", "--after", "5/1x"], "5/1x"),
        (vec!["ask", "a", "refund", "--after", "0/1h"], "0/1h"),
        (
            vec![
                "ask", "a", "refund", "--total", "cents", "--over", "5", "--per", "1d",
            ],
            "cents",
        ),
        (vec!["ask", "a", "refund", "--over", "5"], "--total"),
        (
            vec!["allow", "a", "refund", "--within", "15m"],
            "--only-after",
        ),
        (
            vec![
                "allow",
                "a",
                "refund",
                "--only-after",
                "check(",
                "--within",
                "15m",
            ],
            "check(",
        ),
        (vec!["deny", "a", "refund", "--after", "5/1h"], "deny"),
        (vec!["ask", "a", "refund", "--after", "5/400d"], "--after"),
        (
            vec![
                "ask",
                "a",
                "refund",
                "--after",
                "5/1h",
                "--only-after",
                "x",
                "--within",
                "1m",
            ],
            "--only-after",
        ),
    ] {
        let mut full = vec!["agent"];
        full.extend(&args);
        let out = cli.run(&full);
        assert_eq!(
            code(&out),
            2,
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    assert_eq!(
        cli.json(&["agent", "show", "a"], ""),
        before,
        "nothing changed"
    );

    cli.json(
        &[
            "agent",
            "ask",
            "a",
            "refund",
            "--total",
            "/cents",
            "--over",
            "50000",
            "--per",
            "1d",
            "--approvals",
            "2",
        ],
        "",
    );
    let shown = cli.json(&["agent", "show", "a"], "");
    let rule = &shown["rules"][0];
    assert_eq!(
        rule["when"], "--total /cents --over 50000 --per 1d --approvals 2",
        "{shown}"
    );
    assert_eq!(
        rule["condition"],
        json!({"when": {"kind": "total", "pointer": "/cents", "over": 50000, "perSeconds": 86400}, "approvals": 2})
    );
    assert!(
        shown.get("quorums").is_none_or(|q| q == &json!([])),
        "kept in the rule: {shown}"
    );
}
