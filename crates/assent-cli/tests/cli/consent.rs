//! What a person is shown and sets is what is enforced (issue 37): an edit under a
//! quorum is shown to the next approver, and a confirmation names the revision it saw;
//! quorums and holds on a pattern bind every tool the pattern covers; a stale refresh
//! starts a new revision; the policy answers before an approval or a hold is written;
//! one rule change has one effect on every door; one person through the command line
//! and through their token is one approver (issue 52).

use super::{Cli, assert_fails, code, serve};

fn priority(to: &str) -> String {
    format!(
        r#"[{{"id":"call_1","type":"function","function":{{"name":"update_task_priority","arguments":"{{\"priority\":\"{to}\"}}"}}}}]"#
    )
}

/// Wakes agent `a` on `task` with one priority change; returns the set's id.
fn propose(cli: &Cli, task: &str, to: &str) -> String {
    let wake = cli.json(&["wake", "--agent", "a", "--task", task], &priority(to));
    wake["changeSetId"].as_str().expect("a set").to_owned()
}

/// Puts `tool` (a name or pattern) of agent `a` under a quorum of `approvals`.
fn quorum(cli: &Cli, tool: &str, approvals: &str) {
    cli.json(&["agent", "ask", "a", tool, "--approvals", approvals], "");
}

/// Asserts a confirmation's JSON says it counted as one approval short of two.
fn awaits_second(confirmed: &serde_json::Value) {
    assert!(
        confirmed["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 of 2 approvals")),
        "{confirmed}"
    );
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_edit_under_a_quorum_is_what_the_next_approver_sees_and_an_older_revision_counts_for_nothing()
{
    let cli = Cli::new();
    let task = cli.agent_and_task();
    quorum(&cli, "update_task_priority", "2");
    let set = propose(&cli, &task, "P0");
    let fresh = cli.json(&["show", &set, "0"], "");
    assert_eq!(fresh["revision"], 0);
    assert_eq!(fresh["args"], serde_json::json!({"priority": "P0"}));

    // Alice edits (1 of 2): every surface shows what a confirmation now runs.
    cli.json(
        &[
            "edit",
            &set,
            "0",
            "--args",
            r#"{"priority":"P1"}"#,
            "--as",
            "alice",
        ],
        "",
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(
        item["args"],
        serde_json::json!({"priority": "P1"}),
        "{item}"
    );
    assert_eq!(item["proposedArgs"], serde_json::json!({"priority": "P0"}));
    assert_eq!(item["editedBy"], "alice");
    assert_eq!(item["revision"], 1);
    let listed = cli.json(&["pending"], "");
    assert_eq!(listed[0]["items"][0]["args"]["priority"], "P1", "{listed}");
    let pending = stdout(&cli.run(&["pending"]));
    assert!(pending.contains("priority: P1"), "{pending}");
    assert!(!pending.contains("priority: P0"), "{pending}");
    assert!(pending.contains("edited by alice"), "{pending}");
    let shown = stdout(&cli.run(&["show", &set, "0"]));
    assert!(shown.contains("edited   by alice"), "{shown}");
    assert!(shown.contains("--revision 1"), "{shown}");

    // Bob confirms what he was shown before the edit: refused, and nothing counts.
    assert_fails(
        &cli.run(&["confirm", &set, "0", "--as", "bob", "--revision", "0"]),
        3,
        "item 0 changed since it was shown (revision 0, now 1",
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(
        item["approvals"].as_array().map(Vec::len),
        Some(1),
        "{item}"
    );
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");

    // On the revision he now sees, his approval meets the quorum and the edit runs.
    assert_eq!(
        code(&cli.run(&["confirm", &set, "0", "--as", "bob", "--revision", "1"])),
        0
    );
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P1");
}

#[test]
fn a_quorum_on_a_pattern_binds_every_tool_it_covers() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let agent = cli.json(
        &["agent", "ask", "a", "update_task_*", "--approvals", "2"],
        "",
    );
    assert_eq!(
        agent["quorums"],
        serde_json::json!([{"tool": "update_task_*", "approvals": 2}])
    );
    let set = propose(&cli, &task, "P0");
    assert_eq!(cli.json(&["show", &set, "0"], "")["approvalsNeeded"], 2);
    let first = cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    awaits_second(&first);
    assert_eq!(
        cli.json(&["task", "show", &task], "")["priority"],
        "P2",
        "one person's confirmation does not apply it"
    );
    cli.json(&["confirm", &set, "0", "--as", "bob"], "");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
}

#[test]
fn a_hold_on_a_pattern_holds_every_tool_it_covers() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    cli.json(&["agent", "hold", "a", "update_task_*", "30"], "");
    let set = propose(&cli, &task, "P0");
    let held = cli.json(&["confirm", &set, "0"], "");
    assert!(
        held["message"]
            .as_str()
            .is_some_and(|m| m.contains("held until")),
        "{held}"
    );
    assert_eq!(
        cli.json(&["task", "show", &task], "")["priority"],
        "P2",
        "nothing runs before the window ends"
    );
}

#[test]
fn a_quorum_set_after_the_proposal_still_applies_and_one_fixed_at_proposal_stays() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    quorum(&cli, "update_task_priority", "2");
    let set = propose(&cli, &task, "P0");
    // Lowering the setting afterwards does not lower what the item was proposed with.
    quorum(&cli, "update_task_priority", "1");
    let first = cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    awaits_second(&first);
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");
}

#[test]
fn a_stale_refresh_starts_a_new_revision_and_earlier_approvals_no_longer_count() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    quorum(&cli, "update_task_priority", "2");
    let set = propose(&cli, &task, "P0");
    cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    // Meanwhile the task becomes P3 (two other people apply another proposal).
    let other = propose(&cli, &task, "P3");
    cli.json(&["confirm", &other, "0", "--as", "carol"], "");
    cli.json(&["confirm", &other, "0", "--as", "dave"], "");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P3");

    assert_fails(
        &cli.run(&["confirm", &set, "0", "--as", "bob"]),
        4,
        "target changed since proposed",
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(item["revision"], 1, "the refresh started a new revision");
    assert_eq!(
        item["approvals"].as_array().map(Vec::len),
        Some(0),
        "alice approved P2 → P0, not P3 → P0: {item}"
    );
    let again = cli.json(&["confirm", &set, "0", "--as", "bob"], "");
    awaits_second(&again);
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P3");
    cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
}

#[test]
fn the_policy_answers_before_an_approval_or_a_hold_is_written() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    cli.json(&["agent", "hold", "a", "update_task_priority", "30"], "");
    let held = propose(&cli, &task, "P0");
    quorum(&cli, "update_task_estimate", "2");
    let status = cli.json(
        &["wake", "--agent", "a", "--task", &task],
        r#"[{"id":"call_1","type":"function","function":{"name":"update_task_estimate","arguments":"{\"minutes\":90}"}}]"#,
    );
    let quorum = status["changeSetId"].as_str().expect("a set").to_owned();
    // The person then denies both tools: neither confirmation may count or schedule.
    cli.json(&["agent", "deny", "a", "update_task_*"], "");
    let refused = cli.run(&["confirm", &held, "0"]);
    assert_ne!(code(&refused), 0);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("denied by policy"), "{said}");
    assert!(!said.contains("held until"), "{said}");
    assert_eq!(
        cli.json(&["jobs"], "").as_array().map(Vec::len),
        Some(0),
        "no held job was written"
    );
    let refused = cli.run(&["confirm", &quorum, "0", "--as", "alice"]);
    assert_ne!(code(&refused), 0);
    let item = cli.json(&["show", &quorum, "0"], "");
    assert_eq!(
        item["approvals"].as_array().map(Vec::len),
        Some(0),
        "no approval was recorded: {item}"
    );
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");
}

#[test]
fn a_rule_change_is_one_operation_on_every_door() {
    let cli = Cli::new();
    cli.agent_and_task();
    cli.json(
        &["agent", "allow", "a", "update_task_priority", "--shadow"],
        "",
    );
    // A rule set for real promotes the shadow rule, on the CLI as on the API and for a
    // suggestion applied (all go through the engine's one operation).
    let agent = cli.json(
        &["agent", "ask", "a", "update_task_priority", "--for", "1d"],
        "",
    );
    assert_eq!(agent.get("shadowRules"), None, "{agent}");
    assert_fails(
        &cli.run(&["agent", "ask", "a", " ", "--approvals", "2"]),
        2,
        "a pattern must not be empty",
    );
    assert_eq!(
        cli.json(&["agent", "show", "a"], "").get("quorums"),
        None,
        "a refused change writes nothing"
    );
}

#[test]
fn an_unasked_run_names_what_let_it_run_and_a_confirmed_one_names_nobody_instead() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    cli.json(
        &["agent", "allow", "a", "update_task_*", "--for", "30d"],
        "",
    );
    cli.json(
        &["wake", "--agent", "a", "--task", &task],
        r#"[{"id":"call_1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}},
            {"id":"call_2","type":"function","function":{"name":"set_task_language","arguments":"{\"languageCode\":\"en\"}"}}]"#,
    );
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
    let trail = cli.json(&["audit", "--task", &task], "");
    let results: Vec<&serde_json::Value> = trail
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["kind"] == "result")
        .collect();
    let by_tool = |tool: &str| {
        results
            .iter()
            .find(|r| r["toolName"] == tool)
            .map(|r| r["allowedBy"].clone())
            .unwrap_or_else(|| panic!("a result of {tool}: {trail}"))
    };
    let rule = by_tool("update_task_priority");
    assert_eq!(rule["rule"]["pattern"], "update_task_*", "{rule}");
    assert_eq!(rule["rule"]["action"], "allow");
    assert_eq!(rule["rule"]["expiresAt"], "2026-04-01T09:00:00Z");
    assert_eq!(
        by_tool("set_task_language"),
        serde_json::json!({"mode": "immediate"})
    );

    // A call a person confirms carries no allowedBy: the decision names who.
    cli.json(&["agent", "ask", "a", "update_task_*"], "");
    let set = propose(&cli, &task, "P3");
    cli.json(&["confirm", &set, "0"], "");
    let trail = cli.json(&["audit", "--task", &task], "");
    let confirmed = trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["kind"] == "result")
        .expect("the confirmed call's result");
    assert_eq!(confirmed.get("allowedBy"), None, "{confirmed}");
}

#[test]
fn confirm_all_exits_4_when_every_item_it_could_not_confirm_was_stale() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let set = propose(&cli, &task, "P0");
    let other = propose(&cli, &task, "P3");
    cli.json(&["confirm", &other, "0"], "");
    let out = cli.run(&["confirm", &set, "--all"]);
    assert_eq!(code(&out), 4);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("1 of 1 item(s) could not be confirmed: the target changed since proposed"),
        "{said}"
    );
    assert_eq!(code(&cli.run(&["confirm", &set, "--all"])), 0, "refreshed");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
}

#[test]
fn every_json_view_of_a_decision_names_who_decided_and_show_gives_the_shadow_verdict() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    cli.json(
        &["agent", "allow", "a", "update_task_priority", "--shadow"],
        "",
    );
    let set = propose(&cli, &task, "P0");
    let rejected = cli.json(
        &["reject", &set, "0", "--reason", "not now", "--as", "bob"],
        "",
    );
    assert_eq!(rejected["decidedBy"], "bob", "{rejected}");
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(item["decidedBy"], "bob", "{item}");
    assert_eq!(
        item["shadow"],
        serde_json::json!({"rule": "allow", "agreed": false}),
        "{item}"
    );
    let other = propose(&cli, &task, "P3");
    let confirmed = cli.json(&["confirm", &other, "0", "--as", "carol"], "");
    assert_eq!(confirmed["decision"]["decidedBy"], "carol", "{confirmed}");
}

/// `POST /api/change-sets/{set}/items/0/confirm` with token `secret`: status and body.
async fn confirm_over_the_api(base: &str, secret: &str, set: &str) -> (u16, serde_json::Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/change-sets/{set}/items/0/confirm"))
        .bearer_auth(secret)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_person_through_the_command_line_and_their_token_is_one_approver() {
    const ADMIN: &str = "consent-admin-token-0123456789";
    // The server's clock is the real one: sets made at the fixed test time would have
    // expired there long ago.
    let cli = Cli::new().at_the_current_time();
    let task = cli.agent_and_task();
    quorum(&cli, "update_task_priority", "2");
    let alice = cli.json(
        &["tokens", "add", "--role", "reviewer", "--person", "alice"],
        "",
    );
    assert_eq!(alice["person"], "alice", "{alice}");
    let alice = alice["secret"].as_str().expect("a secret").to_owned();
    let nobody = cli.json(&["tokens", "add", "--role", "reviewer"], "");
    assert_eq!(nobody["person"], serde_json::Value::Null);
    let (nobody_id, nobody) = (
        nobody["id"].as_str().expect("an id").to_owned(),
        nobody["secret"].as_str().expect("a secret").to_owned(),
    );
    let listed = stdout(&cli.run(&["tokens"]));
    assert!(
        listed.contains("PERSON") && listed.contains("alice"),
        "{listed}"
    );
    assert_fails(
        &cli.run(&[
            "tokens", "add", "--role", "reviewer", "--person", "slack:U1",
        ]),
        1,
        "reads as a door's record",
    );
    let set = propose(&cli, &task, "P0");
    let served = serve(&cli, ADMIN);

    // Alice through her token (1 of 2), then alice on the command line: one person.
    let (status, body) = confirm_over_the_api(&served.base, &alice, &set).await;
    assert_eq!(status, 200, "{body}");
    assert_fails(
        &cli.run(&["confirm", &set, "0", "--as", "alice"]),
        3,
        "alice has approved item 0 already",
    );
    // A token naming nobody counts toward no quorum, and says how to fix it.
    let (status, body) = confirm_over_the_api(&served.base, &nobody, &set).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains(&format!(
            "token {nobody_id} names no person; re-issue it with `assent tokens add --role reviewer --person NAME` to approve items needing 2 people"
        )),
        "{body}"
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(
        item["status"], "pending",
        "one person met a two-person rule"
    );
    assert_eq!(
        item["approvals"].as_array().map(Vec::len),
        Some(1),
        "{item}"
    );
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");

    // Bob on the command line is the second person.
    assert_eq!(code(&cli.run(&["confirm", &set, "0", "--as", "bob"])), 0);
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");
    drop(served);
    let proof = cli.run(&["audit", "verify", "--strict"]);
    assert_eq!(code(&proof), 0, "{}", stdout(&proof));
}
