//! Every decision explains itself (issue 57): `assent why SET IDX` and `why --audit ID`
//! name the rule that decided, where it came from, who set it and when, the rules it
//! outranked, the quorum and hold, the shadow verdict, or the tool's mode; the same over
//! `GET /api/change-sets/{id}/items/{i}/why`; an `audit` rule runs calls unasked,
//! marks their records and lists them in `assent audit digest`.

use super::{Cli, code, serve};
use serde_json::Value;

const ADMIN_TOKEN: &str = "why-admin-token-0123456789";

/// One call of `update_task_priority` (deferred: asked without a rule).
fn priority(to: &str) -> String {
    format!(
        r#"[{{"id":"call_1","type":"function","function":{{"name":"update_task_priority","arguments":"{{\"priority\":\"{to}\"}}"}}}}]"#
    )
}

/// One call of `set_task_language` (immediate: runs without a rule).
const LANGUAGE: &str = r#"[{"id":"call_1","type":"function","function":{"name":"set_task_language","arguments":"{\"languageCode\":\"en\"}"}}]"#;

fn wake(cli: &Cli, task: &str, calls: &str) -> Value {
    cli.json(&["wake", "--agent", "a", "--task", task], calls)
}

fn set_of(wake: &Value) -> String {
    wake["changeSetId"].as_str().expect("a set").to_owned()
}

fn ok(cli: &Cli, args: &[&str]) {
    let out = cli.run(args);
    assert_eq!(
        code(&out),
        0,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The operation id of the last record of `tool` in the task's audit trail.
fn operation_of(cli: &Cli, task: &str, tool: &str) -> String {
    let trail = cli.json(&["audit", "--task", task], "");
    trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["toolName"] == tool)
        .and_then(|r| r["operationId"].as_str())
        .unwrap_or_else(|| panic!("a record of {tool}: {trail}"))
        .to_owned()
}

#[test]
fn why_names_the_rule_its_origin_and_what_it_outranked_for_every_rule_kind() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let who = assent_whoami();

    // No rule: the tool's mode decided.
    let set = set_of(&wake(&cli, &task, &priority("P1")));
    let why = cli.json(&["why", &set, "0"], "");
    assert_eq!(why["decision"], "ask", "{why}");
    assert_eq!(why["decidedBy"]["mode"], "deferred", "{why}");
    let text = String::from_utf8_lossy(&cli.run(&["why", &set[..8], "0"]).stdout).into_owned();
    assert!(text.contains("the tool's mode decided"), "{text}");

    // An ask rule with a quorum and a hold, outranking an allow of a wider pattern.
    ok(&cli, &["agent", "allow", "a", "update_task_*"]);
    ok(
        &cli,
        &[
            "agent",
            "ask",
            "a",
            "update_task_priority",
            "--approvals",
            "2",
        ],
    );
    ok(&cli, &["agent", "hold", "a", "update_task_priority", "30"]);
    ok(
        &cli,
        &["agent", "deny", "a", "update_task_priority", "--shadow"],
    );
    let set = set_of(&wake(&cli, &task, &priority("P3")));
    let why = cli.json(&["why", &set, "0"], "");
    assert_eq!(why["decision"], "ask", "{why}");
    let rule = &why["decidedBy"]["rule"];
    assert_eq!(rule["pattern"], "update_task_priority", "{why}");
    assert_eq!(rule["action"], "ask");
    assert_eq!(rule["source"], "command");
    assert_eq!(rule["setBy"], who.as_str());
    assert_eq!(rule["setAt"], "2026-03-02T09:00:00Z");
    assert_eq!(why["approvalsNeeded"], 2, "{why}");
    assert_eq!(why["holdSeconds"], 30, "{why}");
    let outranked = why["outranked"].as_array().expect("outranked");
    assert_eq!(outranked.len(), 1, "{why}");
    assert_eq!(outranked[0]["pattern"], "update_task_*");
    assert!(
        outranked[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("ask is stricter than allow")),
        "{why}"
    );
    assert_eq!(why["shadow"][0]["action"], "deny", "{why}");
    assert_eq!(why["shadow"][0]["wouldHave"], "deny", "{why}");
    let text = String::from_utf8_lossy(&cli.run(&["why", &set, "0"]).stdout).into_owned();
    for needle in [
        "decided by rule ask update_task_priority",
        &format!("set by {who}"),
        "outranked: allow update_task_*",
        "approvals needed: 2",
        "hold: 30 s",
        "shadow: deny update_task_priority would have deny",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }

    // Unknown set or item: the same errors as `show`.
    let out = cli.run(&["why", &set, "9"]);
    assert_eq!(code(&out), code(&cli.run(&["show", &set, "9"])), "{out:?}");
    assert_ne!(code(&out), 0);
    let out = cli.run(&["why", "00000000-0000-0000-0000-000000000000", "0"]);
    assert_eq!(
        code(&out),
        code(&cli.run(&["show", "00000000-0000-0000-0000-000000000000"]))
    );
    assert_ne!(code(&out), 0);
}

/// The last `policyDenied` record of `tool` in the whole audit trail.
fn denied_record(cli: &Cli, tool: &str) -> Value {
    let trail = cli.json(&["audit", "--limit", "500"], "");
    trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["toolName"] == tool && r["kind"] == "policyDenied")
        .cloned()
        .unwrap_or_else(|| panic!("a refusal of {tool}: {trail}"))
}

/// `why --audit` of `record` names `rule` (`ACTION PATTERN`), set by a command of this
/// user, from what the record says decided.
fn names_the_rule(cli: &Cli, record: &Value, rule: &str) {
    let operation = record["operationId"].as_str().expect("an operation id");
    let why = cli.json(&["why", "--audit", operation], "");
    assert_eq!(why["decision"], "deny", "{why}");
    assert_eq!(why["decidedBy"], record["decidedBy"], "{why}");
    assert_eq!(why["recorded"]["decidedBy"], record["decidedBy"], "{why}");
    assert_eq!(why["decidedBy"]["rule"]["source"], "command", "{why}");
    let text =
        String::from_utf8_lossy(&cli.run(&["why", "--audit", operation]).stdout).into_owned();
    let needle = format!("decided by rule {rule} (a command, set by {}", who());
    assert!(text.contains(&needle), "{needle:?} in {text}");
}

fn who() -> String {
    assent_whoami()
}

/// `whoami` as the CLI names the person setting a rule (`USER`, else `local`).
fn assent_whoami() -> String {
    ["USER", "USERNAME"]
        .iter()
        .find_map(|key| std::env::var(key).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "local".to_owned())
}

#[test]
fn an_audit_rule_runs_unasked_marks_its_record_and_lists_it_in_the_digest() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    ok(&cli, &["agent", "audit", "a", "update_task_priority"]);
    let woke = wake(&cli, &task, &priority("P0"));
    assert!(woke["changeSetId"].is_null(), "ran unasked: {woke}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
    let trail = cli.json(&["audit", "--task", &task], "");
    let record = trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["toolName"] == "update_task_priority")
        .expect("a record");
    assert_eq!(record["allowedBy"]["audited"], true, "{record}");
    assert_eq!(record["allowedBy"]["rule"]["action"], "audit", "{record}");
    assert_eq!(record["allowedBy"]["rule"]["source"], "command", "{record}");

    let digest = cli.json(&["audit", "digest", "--since", "1d"], "");
    let calls = digest["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 1, "one call, once: {digest}");
    assert_eq!(calls[0]["toolName"], "update_task_priority");
    assert_eq!(calls[0]["rule"]["pattern"], "update_task_priority");
    let text = String::from_utf8_lossy(&cli.run(&["audit", "digest"]).stdout).into_owned();
    assert!(text.contains("1 audited call(s)"), "{text}");
    let history = cli.json(&["history", "--agent", "a"], "");
    assert_eq!(
        history["auditedCalls"][0]["toolName"], "update_task_priority",
        "{history}"
    );

    // `why --audit` says the same, from the record.
    let operation = operation_of(&cli, &task, "update_task_priority");
    let why = cli.json(&["why", "--audit", &operation], "");
    assert_eq!(why["decision"], "audit", "{why}");
    assert_eq!(why["recorded"]["allowedBy"]["audited"], true, "{why}");

    // An allow call does not show in the digest; the proof accepts both.
    ok(&cli, &["agent", "allow", "a", "set_task_language"]);
    wake(&cli, &task, LANGUAGE);
    let digest = cli.json(&["audit", "digest"], "");
    assert_eq!(
        digest["calls"].as_array().map(Vec::len),
        Some(1),
        "{digest}"
    );
    let out = cli.run(&["audit", "verify"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));

    // An audit rule never weakens a deny: deny still wins.
    ok(&cli, &["agent", "deny", "a", "update_task_*"]);
    let woke = wake(&cli, &task, &priority("P1"));
    let said = woke.to_string();
    assert!(said.contains("denied by policy"), "{woke}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
}

#[test]
fn why_of_an_audit_record_names_the_rule_and_a_denial_quotes_where_it_came_from() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    // The immediate tool with no rule: its mode let it run.
    wake(&cli, &task, LANGUAGE);
    let operation = operation_of(&cli, &task, "set_task_language");
    let why = cli.json(&["why", "--audit", &operation], "");
    assert_eq!(why["decision"], "allow", "{why}");
    assert_eq!(why["decidedBy"]["mode"], "immediate", "{why}");
    assert_eq!(why["recorded"]["allowedBy"]["mode"], "immediate", "{why}");

    // A deny rule: the agent's reply keeps its words and quotes the rule's origin.
    ok(&cli, &["agent", "deny", "a", "set_task_language"]);
    let woke = wake(&cli, &task, LANGUAGE);
    let said = woke["responses"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        said.starts_with(
            "Denied by policy: Tool set_task_language is denied by policy. Nothing was queued or executed."
        ),
        "{woke}"
    );
    assert!(
        said.contains("Decided by rule deny set_task_language (a command, set by"),
        "{said}"
    );
    // The refusal is on the record, with the rule and who set it (issue 57, point 2).
    let denied = denied_record(&cli, "set_task_language");
    assert_eq!(denied["detail"], said.as_str(), "{denied}");
    assert_eq!(denied["decidedBy"]["rule"]["action"], "deny", "{denied}");
    assert_eq!(denied["decidedBy"]["rule"]["setBy"], who(), "{denied}");
    names_the_rule(&cli, &denied, "deny set_task_language");

    let out = cli.run(&["why", "--audit", "no-such-operation"]);
    assert_eq!(code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no audit record"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_explains_an_item_as_the_command_line_does() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    ok(&cli, &["agent", "ask", "a", "update_task_priority"]);
    let set = set_of(&wake(&cli, &task, &priority("P3")));
    let served = serve(&cli, ADMIN_TOKEN);
    let get = |path: String| {
        let base = served.base.clone();
        async move {
            let response = reqwest::Client::new()
                .get(format!("{base}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .expect("answered");
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, why) = get(format!("/api/change-sets/{set}/items/0/why")).await;
    assert_eq!(status, 200, "{why}");
    assert_eq!(why, cli.json(&["why", &set, "0"], ""));
    assert_eq!(why["decidedBy"]["rule"]["pattern"], "update_task_priority");
    let (status, _) = get(format!("/api/change-sets/{set}/items/7/why")).await;
    assert_eq!(status, 404);
    let (status, digest) = get("/api/audit/digest".to_owned()).await;
    assert_eq!(status, 200, "{digest}");
    assert_eq!(digest["calls"], serde_json::json!([]));
}

#[test]
fn a_call_that_waited_names_the_rule_that_asked_on_its_record() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    ok(&cli, &["agent", "ask", "a", "update_task_priority"]);
    let set = set_of(&wake(&cli, &task, &priority("P3")));
    ok(&cli, &["confirm", &set, "0"]);
    let trail = cli.json(&["audit", "--task", &task], "");
    let action = trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["toolName"] == "update_task_priority" && r["kind"] == "action")
        .cloned()
        .unwrap_or_else(|| panic!("an action record: {trail}"));
    let rule = &action["decidedBy"]["rule"];
    assert_eq!(rule["pattern"], "update_task_priority", "{action}");
    assert_eq!(rule["decided"], "ask", "{action}");
    assert_eq!(rule["setBy"], who(), "{action}");
    assert_eq!(action.get("allowedBy"), None, "{action}");
    let operation = action["operationId"].as_str().expect("an operation id");
    let why = cli.json(&["why", "--audit", operation], "");
    assert_eq!(why["decision"], "ask", "{why}");
    assert_eq!(why["decidedBy"], action["decidedBy"], "{why}");
    let out = cli.run(&["audit", "verify"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn why_names_the_rule_of_a_hook_denial_from_its_record() {
    let cli = Cli::new().at_the_current_time();
    ok(
        &cli,
        &["agent", "create", "--id", "coder", "--categories", "code"],
    );
    ok(&cli, &["agent", "deny", "coder", "Bash"]);
    let event = std::fs::read_to_string(format!(
        "{}/tests/fixtures/hooks/claude-code.PreToolUse.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the fixture");
    let out = cli
        .hook("claude-code", "coder", &["--wait", "5"], &event)
        .wait_with_output()
        .expect("the hook ends");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let answer = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(answer.contains("\"deny\""), "{answer}");
    let denied = denied_record(&cli, "Bash");
    names_the_rule(&cli, &denied, "deny Bash");
    let out = cli.run(&["audit", "verify"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread")]
async fn why_names_the_rule_of_an_api_calls_refusal_from_its_record() {
    let cli = Cli::new();
    ok(
        &cli,
        &["agent", "create", "--id", "shop", "--categories", "client"],
    );
    ok(&cli, &["agent", "deny", "shop", "wipe"]);
    let token = cli.json(&["tokens", "add", "--role", "agent", "--agent", "shop"], "");
    let token = token["secret"].as_str().expect("a secret").to_owned();
    let served = serve(&cli, ADMIN_TOKEN);
    let response = reqwest::Client::new()
        .post(format!("{}/api/calls", served.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({"tool": "wipe", "args": {"all": true}, "toolCallId": "w1"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 200);
    let decision: Value = response.json().await.expect("a decision");
    assert_eq!(decision["decision"], "deny", "{decision}");
    let denied = denied_record(&cli, "wipe");
    assert_eq!(denied["runKey"], "client:shop:w1", "{denied}");
    names_the_rule(&cli, &denied, "deny wipe");
}
