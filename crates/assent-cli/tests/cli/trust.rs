//! Policy that grows with trust (issue 29): rules that expire (`--for`), grant
//! suggestions from a generated history with known answers (`assent grants suggest`,
//! `--apply`, an edit or an undo spoiling one), and a rule replayed against it
//! (`assent agent backtest`). On the real clock, in whole seconds: the engine checks a
//! rule's expiry against the system clock.

use super::{Cli, assert_fails, code};
use assent_domain::Uuid;
use assent_store::delegation::{self, Delegation, Grant};
use assent_store::{Store, decisions};
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// A `Cli` whose commands run at the current time, to the second.
fn at_the_current_second() -> (Cli, OffsetDateTime) {
    let mut cli = Cli::new();
    let now = OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("a whole second");
    cli.now = rfc3339(now);
    (cli, now)
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).expect("RFC 3339")
}

/// One OpenAI-style call of `tool` with `arguments`.
fn call(tool: &str, arguments: Value) -> String {
    json!([{"id": "call_1", "type": "function",
        "function": {"name": tool, "arguments": arguments.to_string()}}])
    .to_string()
}

/// Agent `a` proposes `tool(arguments)` for `task`; the wake's answer.
fn wake(cli: &Cli, task: &str, tool: &str, arguments: Value) -> Value {
    cli.json(
        &["wake", "--agent", "a", "--task", task],
        &call(tool, arguments),
    )
}

/// The same, for a call that waits for a person: the set's id.
fn propose(cli: &Cli, task: &str, tool: &str, arguments: Value) -> String {
    let answer = wake(cli, task, tool, arguments);
    answer["changeSetId"]
        .as_str()
        .unwrap_or_else(|| panic!("queued: {answer}"))
        .to_owned()
}

/// Runs a command that must exit 0.
fn ok(cli: &Cli, args: &[&str]) {
    let out = cli.run(args);
    assert_eq!(
        code(&out),
        0,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `n` titles of `task` confirmed unchanged, from `Title {first}` on.
fn confirm_titles(cli: &Cli, task: &str, first: usize, n: usize) {
    for k in first..first + n {
        let set = propose(
            cli,
            task,
            "set_task_title",
            json!({"title": format!("Title {k}")}),
        );
        ok(cli, &["confirm", &set, "0"]);
    }
}

#[test]
fn six_unchanged_confirmations_suggest_an_allow_that_runs_the_next_call_at_once() {
    let (cli, now) = at_the_current_second();
    let task = cli.agent_and_task();
    confirm_titles(&cli, &task, 0, 6);
    let set = propose(
        &cli,
        &task,
        "update_task_priority",
        json!({"priority": "P1"}),
    );
    ok(&cli, &["reject", &set, "0", "--reason", "not now"]);

    let suggested = cli.json(&["grants", "suggest"], "");
    let list = suggested.as_array().expect("an array");
    assert_eq!(list.len(), 1, "only the tool never rejected: {suggested}");
    let s = &list[0];
    assert_eq!(s["agent"], "a");
    assert_eq!(s["tool"], "set_task_title");
    assert_eq!(s["rule"], "allow");
    assert_eq!(s["expiresAt"], rfc3339(now + Duration::days(30)));
    assert_eq!(
        s["evidence"],
        json!({"confirmedUnchanged": 6, "edited": 0, "rejected": 0, "undone": 0,
            "reviewers": 1, "automatic": 0, "beforeDefinition": 0,
            "firstAt": rfc3339(now), "lastAt": rfc3339(now)})
    );
    // Nothing is in force for the tool (its mode decides): it replaces nothing.
    assert_eq!(
        (&s["replaces"], &s["refused"]),
        (&Value::Null, &Value::Null)
    );
    let id = s["id"].as_str().expect("an id");
    assert!(id.starts_with("sg_"), "{id}");
    // The id is the same in every run; a higher bar, another agent, none.
    assert_eq!(cli.json(&["grants", "suggest"], ""), suggested);
    assert_eq!(
        cli.json(&["grants", "suggest", "--min", "7"], ""),
        json!([])
    );
    assert_eq!(
        cli.json(&["grants", "suggest", "--agent", "b"], ""),
        json!([])
    );
    let text = String::from_utf8_lossy(&cli.run(&["grants", "suggest"]).stdout).into_owned();
    assert!(
        text.contains(id) && text.contains("set_task_title"),
        "{text}"
    );

    // The rejection a proposed allow would have let through.
    let replay = cli.json(
        &["agent", "backtest", "a", "update_task_priority", "allow"],
        "",
    );
    assert_eq!(
        (&replay["calls"], &replay["wouldRunUnasked"]),
        (&json!(1), &json!(1))
    );
    let through = &replay["letThrough"][0];
    assert_eq!(through["outcome"], "rejected");
    assert_eq!(through["personReason"], "not now");
    assert_eq!(through["changeSetId"], set.as_str());
    let text = String::from_utf8_lossy(
        &cli.run(&["agent", "backtest", "a", "update_task_priority", "allow"])
            .stdout,
    )
    .into_owned();
    assert!(
        text.contains("a person rejected it") && text.contains("not now"),
        "{text}"
    );
    let replay = cli.json(&["agent", "backtest", "a", "set_task_*", "allow"], "");
    assert_eq!(replay["wouldRunUnasked"], 6);
    assert_eq!(replay["letThrough"], json!([]));
    let replay = cli.json(&["agent", "backtest", "a", "set_task_title", "deny"], "");
    assert_eq!(
        (&replay["wouldRefuse"], &replay["confirmedButRefused"]),
        (&json!(6), &json!(6))
    );

    // Applied: the rule with its expiry, and the next call runs at once.
    let applied = cli.json(&["grants", "suggest", "--apply", id], "");
    assert_eq!(applied["applied"]["id"], id);
    assert_eq!(
        applied["agent"]["rules"],
        json!([{"tool": "set_task_title", "action": "allow",
            "expiresAt": s["expiresAt"], "expired": false}])
    );
    let ran = wake(&cli, &task, "set_task_title", json!({"title": "Ran"}));
    assert!(ran["changeSetId"].is_null(), "nothing queued: {ran}");
    assert_eq!(cli.json(&["task", "show", &task], "")["title"], "Ran");
    // Allowed now, so no longer suggested, and its id no longer applies.
    assert_eq!(cli.json(&["grants", "suggest"], ""), json!([]));
    assert_fails(
        &cli.run(&["grants", "suggest", "--apply", id]),
        1,
        "no grant suggestion",
    );
}

#[test]
fn an_edit_spoils_a_suggestion_and_the_backtest_lists_it() {
    let (cli, _) = at_the_current_second();
    let task = cli.agent_and_task();
    confirm_titles(&cli, &task, 0, 5);
    let set = propose(&cli, &task, "set_task_title", json!({"title": "Draft"}));
    ok(
        &cli,
        &["edit", &set, "0", "--args", r#"{"title": "Better"}"#],
    );
    let history = cli.json(&["show", &set], "");
    if history["items"][0]["status"] != "confirmed" {
        // An edit that leaves the item open: the person confirms the edited call.
        ok(&cli, &["confirm", &set, "0"]);
    }
    assert_eq!(cli.json(&["grants", "suggest"], ""), json!([]));
    let replay = cli.json(&["agent", "backtest", "a", "set_task_title", "allow"], "");
    assert_eq!(replay["calls"], 6);
    let through = replay["letThrough"].as_array().expect("an array");
    assert_eq!(through.len(), 1, "{replay}");
    assert_eq!(through[0]["outcome"], "edited");
    // Outside the window, nothing was decided.
    let mut later = cli;
    later.now = rfc3339(OffsetDateTime::now_utc() + Duration::days(40));
    let replay = later.json(&["agent", "backtest", "a", "set_task_title", "allow"], "");
    assert_eq!(replay["calls"], 0);
    assert_fails(
        &later.run(&["agent", "backtest", "ghost", "set_task_title", "allow"]),
        1,
        "no agent \"ghost\"",
    );
    assert_eq!(
        code(&later.run(&["agent", "backtest", "a", "set_task_title", "maybe"])),
        2
    );
}

#[test]
fn a_rule_for_a_span_expires_and_the_tool_mode_decides_again() {
    let (mut cli, now) = at_the_current_second();
    let task = cli.agent_and_task();
    // Set two days ago for one day: expired by now.
    cli.now = rfc3339(now - Duration::days(2));
    let set = cli.json(
        &["agent", "allow", "a", "update_task_priority", "--for", "1d"],
        "",
    );
    let expiry = rfc3339(now - Duration::days(1));
    assert_eq!(
        set["rules"],
        json!([{"tool": "update_task_priority", "action": "allow",
            "expiresAt": expiry, "expired": false}])
    );
    cli.now = rfc3339(now);
    let shown = cli.json(&["agent", "show", "a"], "");
    assert_eq!(shown["rules"][0]["expired"], true);
    assert_eq!(cli.json(&["agent", "list"], "")[0], shown);
    let text = String::from_utf8_lossy(&cli.run(&["agent", "show", "a"]).stdout).into_owned();
    assert!(
        text.contains("EXPIRES") && text.contains("expired"),
        "{text}"
    );
    // Expired: the tool's mode (deferred) decides, a person is asked.
    propose(
        &cli,
        &task,
        "update_task_priority",
        json!({"priority": "P1"}),
    );

    // For 30 minutes from now: it runs at once.
    ok(
        &cli,
        &[
            "agent",
            "allow",
            "a",
            "update_task_priority",
            "--for",
            "30m",
        ],
    );
    let shown = cli.json(&["agent", "show", "a"], "");
    assert_eq!(
        shown["rules"][0]["expiresAt"],
        rfc3339(now + Duration::minutes(30))
    );
    let ran = wake(
        &cli,
        &task,
        "update_task_priority",
        json!({"priority": "P0"}),
    );
    assert!(ran["changeSetId"].is_null(), "nothing queued: {ran}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P0");

    // The same rule without --for replaces it for good; bad spans are usage errors.
    let permanent = cli.json(&["agent", "allow", "a", "update_task_priority"], "");
    assert_eq!(
        permanent["rules"],
        json!([{"tool": "update_task_priority", "action": "allow"}])
    );
    for bad in ["0d", "3w", "soon"] {
        assert_eq!(
            code(&cli.run(&["agent", "deny", "a", "x", "--for", bad])),
            2,
            "{bad}"
        );
    }
    assert_fails(
        &cli.run(&["agent", "deny", "ghost", "x", "--for", "1d"]),
        1,
        "no agent \"ghost\"",
    );
    assert_fails(
        &cli.run(&["agent", "deny", "a", " ", "--for", "1d"]),
        2,
        "a pattern must not be empty",
    );
}

#[test]
fn an_undone_call_spoils_a_suggestion_and_the_undo_itself_is_not_the_agents_call() {
    let (cli, _) = at_the_current_second();
    let task = cli.agent_and_task();
    confirm_titles(&cli, &task, 0, 6);
    let suggested = cli.json(&["grants", "suggest"], "");
    assert_eq!(suggested[0]["evidence"]["confirmedUnchanged"], 6);
    let first = cli.json(&["agent", "backtest", "a", "set_task_title", "allow"], "");
    assert_eq!(first["letThrough"], json!([]));

    // A person undoes the last title (a reviewed set of its own) and confirms the undo.
    let last_set = propose(&cli, &task, "set_task_title", json!({"title": "Last"}));
    ok(&cli, &["confirm", &last_set, "0"]);
    let undo = cli.json(&["undo", &last_set, "0"], "");
    let undo_set = undo["id"].as_str().expect("the undo set's id");
    ok(&cli, &["confirm", undo_set, "0"]);

    assert_eq!(cli.json(&["grants", "suggest"], ""), json!([]));
    let replay = cli.json(&["agent", "backtest", "a", "set_task_title", "allow"], "");
    assert_eq!(
        replay["calls"], 7,
        "the undo's own decision is not counted: {replay}"
    );
    let through = replay["letThrough"].as_array().expect("an array");
    assert_eq!(through.len(), 1, "{replay}");
    assert_eq!(through[0]["outcome"], "undone");
    assert_eq!(through[0]["changeSetId"], last_set.as_str());
}

#[test]
fn a_shadow_rule_changes_nothing_reports_its_agreement_and_is_promoted() {
    let (cli, now) = at_the_current_second();
    let task = cli.agent_and_task();
    let shadowed = cli.json(&["agent", "allow", "a", "set_task_title", "--shadow"], "");
    assert_eq!(shadowed["rules"], json!([]), "no rule in force");
    assert_eq!(
        shadowed["shadowRules"],
        json!([{"tool": "set_task_title", "action": "allow", "since": rfc3339(now)}])
    );
    assert_eq!(
        cli.json(&["agent", "shadow-report", "a"], "")[0]["decisions"],
        0
    );
    // Still asked: every call waits for a person.
    confirm_titles(&cli, &task, 0, 3);
    let set = propose(&cli, &task, "set_task_title", json!({"title": "Wrong"}));
    ok(&cli, &["reject", &set, "0", "--reason", "typo"]);

    let report = cli.json(&["agent", "shadow-report", "a"], "");
    let r = &report[0];
    assert_eq!(
        (&r["tool"], &r["rule"]),
        (&json!("set_task_title"), &json!("allow"))
    );
    assert_eq!((&r["decisions"], &r["agreed"]), (&json!(4), &json!(3)));
    assert_eq!(r["agreementRate"], 0.75);
    assert_eq!(r["disagreements"][0]["outcome"], "rejected");
    assert_eq!(r["disagreements"][0]["personReason"], "typo");
    let text =
        String::from_utf8_lossy(&cli.run(&["agent", "shadow-report", "a"]).stdout).into_owned();
    assert!(
        text.contains("3 of 4 decisions agreed (75% agreement)"),
        "{text}"
    );

    // Promoted by the same command without --shadow: now it routes.
    let promoted = cli.json(&["agent", "allow", "a", "set_task_title"], "");
    assert_eq!(
        promoted["rules"],
        json!([{"tool": "set_task_title", "action": "allow"}])
    );
    assert!(promoted.get("shadowRules").is_none(), "{promoted}");
    let ran = wake(&cli, &task, "set_task_title", json!({"title": "Ran"}));
    assert!(ran["changeSetId"].is_null(), "nothing queued: {ran}");
    assert_eq!(cli.json(&["agent", "shadow-report", "a"], ""), json!([]));
    assert_fails(
        &cli.run(&["agent", "shadow-report", "ghost"]),
        1,
        "no agent \"ghost\"",
    );
    assert_eq!(
        code(&cli.run(&["agent", "allow", "a", "x", "--shadow", "--for", "1d"])),
        2
    );
}

/// The suggestions `grants suggest --min MIN` lists, as JSON.
fn suggestions(cli: &Cli, min: &str) -> Vec<Value> {
    let listed = cli.json(&["grants", "suggest", "--min", min], "");
    listed.as_array().expect("an array").clone()
}

#[test]
fn a_suggestion_never_weakens_a_quorum_hold_or_deny_and_says_what_it_would_replace() {
    let (cli, _) = at_the_current_second();
    let task = cli.agent_and_task();
    confirm_titles(&cli, &task, 0, 1);
    // A quorum of 2, set after the one confirmation (issue 37's new user).
    ok(
        &cli,
        &["agent", "ask", "a", "set_task_title", "--approvals", "2"],
    );
    let before = cli.json(&["agent", "show", "a"], "");
    let listed = suggestions(&cli, "1");
    assert_eq!(listed.len(), 1, "{listed:?}");
    let s = &listed[0];
    assert_eq!(
        s["replaces"],
        json!({"rule": "ask", "pattern": "set_task_title", "approvals": 2})
    );
    let id = s["id"].as_str().expect("an id");
    let why = s["refused"].as_str().expect("refused");
    assert!(why.contains("needs 2 approvals"), "{why}");
    let text =
        String::from_utf8_lossy(&cli.run(&["grants", "suggest", "--min", "1"]).stdout).into_owned();
    assert!(
        text.contains("REPLACES") && text.contains("2 approvals (refused)"),
        "{text}"
    );
    assert_fails(
        &cli.run(&["grants", "suggest", "--min", "1", "--apply", id]),
        3,
        "needs 2 approvals; a suggestion never weakens a quorum",
    );
    // Nothing written: the quorum stands and the next call waits for a person.
    assert_eq!(cli.json(&["agent", "show", "a"], ""), before);
    propose(&cli, &task, "set_task_title", json!({"title": "Waits"}));

    // A hold: named and refused the same way.
    ok(
        &cli,
        &["agent", "ask", "a", "set_task_title", "--approvals", "1"],
    );
    ok(&cli, &["agent", "hold", "a", "set_task_title", "30"]);
    let s = &suggestions(&cli, "1")[0];
    assert_eq!(s["replaces"]["holdSeconds"], 30, "{s}");
    assert_fails(
        &cli.run(&["grants", "suggest", "--min", "1", "--apply", id]),
        3,
        "is held 30 s",
    );
    ok(&cli, &["agent", "hold", "a", "set_task_title", "0"]);

    // A deny by pattern: an exact allow would not even take effect, and is refused.
    ok(&cli, &["agent", "deny", "a", "set_task_*"]);
    let s = &suggestions(&cli, "1")[0];
    assert_eq!(
        s["replaces"],
        json!({"rule": "deny", "pattern": "set_task_*"})
    );
    assert_fails(
        &cli.run(&["grants", "suggest", "--min", "1", "--apply", id]),
        3,
        "deny rule for set_task_*",
    );
    let shown = cli.json(&["agent", "show", "a"], "");
    assert!(
        shown["rules"]
            .as_array()
            .is_some_and(|rules| rules.iter().all(|r| r["action"] != "allow")),
        "no allow was written: {shown}"
    );

    // An ask of another pattern would still decide: refused as changing nothing.
    ok(&cli, &["agent", "ask", "a", "set_task_*"]);
    assert_fails(
        &cli.run(&["grants", "suggest", "--min", "1", "--apply", id]),
        3,
        "changes nothing",
    );
    // A plain ask of the tool alone is what a suggestion replaces, and says so.
    ok(&cli, &["agent", "allow", "a", "set_task_*"]);
    let s = &suggestions(&cli, "1")[0];
    assert_eq!(s["refused"], Value::Null, "{s}");
    let applied = cli.json(&["grants", "suggest", "--min", "1", "--apply", id], "");
    assert_eq!(
        applied["applied"]["replaces"],
        json!({"rule": "ask", "pattern": "set_task_title"})
    );
    let ran = wake(&cli, &task, "set_task_title", json!({"title": "Ran"}));
    assert!(ran["changeSetId"].is_null(), "nothing queued: {ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_approvals_are_reported_apart_and_never_counted_as_a_persons() {
    let (cli, now) = at_the_current_second();
    let task = tokio::task::block_in_place(|| cli.agent_and_task());
    tokio::task::block_in_place(|| confirm_titles(&cli, &task, 0, 8));
    // Two narrow "always" answers by a person, then six calls their grant approved:
    // linked as the scheduler links a grant's decisions (a delegation record naming
    // the grant), with no person on them.
    let store = Store::open(&cli.db()).await.expect("the database");
    let mut conn = store.read_connection().await.expect("a connection");
    let calls = decisions::past_calls(&mut conn, Some("a"), now - Duration::days(1))
        .await
        .expect("the history");
    assert_eq!(calls.len(), 8);
    let grant = Grant {
        id: Uuid::new_v4(),
        agent_id: Some("a".into()),
        agent_path: "a".into(),
        tool_name: "set_task_title".into(),
        args_pattern: Some(json!({"title": "Title 1"})),
        correlation_id: "answer-1".into(),
        created_at: now,
        revoked_at: None,
        session_id: None,
        call_pattern: None,
    };
    delegation::insert_grant(&mut conn, &grant, now)
        .await
        .expect("the grant");
    for call in &calls[2..] {
        let decision = Uuid::parse_str(&call.decision_id).expect("a decision id");
        let record = Delegation {
            correlation_id: format!("granted-{decision}"),
            agent_path: "a".into(),
            change_set_id: Uuid::parse_str(&call.change_set_id).expect("a set id"),
            item_index: call.item_index,
            tool_name: call.tool_name.clone(),
            outcome: "granted".into(),
            reason: None,
            decision_id: Some(decision),
            grant_id: Some(grant.id),
            created_at: now,
        };
        delegation::record(&mut conn, &record, now)
            .await
            .expect("the delegation");
    }
    drop(conn);
    store.close().await;

    let listed = tokio::task::block_in_place(|| suggestions(&cli, "3"));
    assert!(
        listed.is_empty(),
        "two of a person's, not eight: {listed:?}"
    );
    let listed = tokio::task::block_in_place(|| suggestions(&cli, "2"));
    let evidence = &listed[0]["evidence"];
    assert_eq!(
        (&evidence["confirmedUnchanged"], &evidence["automatic"]),
        (&json!(2), &json!(6)),
        "{evidence}"
    );
    let text = tokio::task::block_in_place(|| {
        String::from_utf8_lossy(&cli.run(&["grants", "suggest", "--min", "2"]).stdout).into_owned()
    });
    assert!(text.contains("AUTOMATIC"), "{text}");
}

#[test]
fn a_backtested_allow_lists_an_edit_made_under_a_quorum() {
    let (cli, _) = at_the_current_second();
    let task = cli.agent_and_task();
    ok(
        &cli,
        &["agent", "ask", "a", "set_task_title", "--approvals", "2"],
    );
    let set = propose(&cli, &task, "set_task_title", json!({"title": "Draft"}));
    ok(
        &cli,
        &[
            "edit",
            &set,
            "0",
            "--args",
            r#"{"title": "Better"}"#,
            "--as",
            "alice",
        ],
    );
    let item = cli.json(&["show", &set, "0"], "");
    if item["status"] != "confirmed" {
        ok(&cli, &["confirm", &set, "0", "--as", "bob"]);
    }
    assert_eq!(cli.json(&["show", &set, "0"], "")["status"], "confirmed");
    let replay = cli.json(&["agent", "backtest", "a", "set_task_title", "allow"], "");
    let through = replay["letThrough"].as_array().expect("an array");
    assert_eq!(through.len(), 1, "{replay}");
    assert_eq!(through[0]["outcome"], "edited");
    assert!(
        through[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("it would have run as the agent proposed it")),
        "{replay}"
    );
}
