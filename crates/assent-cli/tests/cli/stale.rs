//! The stale-target guard from the command line (issue 28): a priority changed between
//! a proposal and its confirmation makes `assent confirm` exit 4 with one line and
//! change nothing; the item shows the target as it is now, and a second confirmation
//! applies. `assent undo` proposes an applied change's reversal for review.

use super::{Cli, assert_fails, code};

fn priority(to: &str) -> String {
    format!(
        r#"[{{"id":"call_1","type":"function","function":{{"name":"update_task_priority","arguments":"{{\"priority\":\"{to}\"}}"}}}}]"#
    )
}

#[test]
fn a_priority_changed_since_the_proposal_exits_4_and_a_second_confirm_applies() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    let other = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P3"));
    let other = other["changeSetId"].as_str().expect("a set").to_owned();
    assert_eq!(code(&cli.run(&["confirm", &other, "0"])), 0);

    assert_fails(
        &cli.run(&["confirm", &set, "0"]),
        4,
        "target changed since proposed: priority was P2, now P3; review and confirm again",
    );
    let shown = cli.json(&["task", "show", &task], "");
    assert_eq!(shown["priority"], "P3", "nothing changed");
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(item["stale"], true);
    assert_eq!(item["before"], "P3", "the item shows the task as it is now");
    assert!(
        item["staleDetail"]
            .as_str()
            .is_some_and(|d| d.contains("was P2, now P3")),
        "{item}"
    );

    let text = cli.run(&["show", &set, "0"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("    stale    target changed since proposed: priority was P2, now P3"),
        "{text}"
    );

    assert_eq!(code(&cli.run(&["confirm", &set, "0"])), 0);
    let shown = cli.json(&["task", "show", &task], "");
    assert_eq!(shown["priority"], "P0");
}

#[test]
fn assent_undo_proposes_the_old_priority_back_and_refuses_what_it_cannot_undo() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    assert_fails(
        &cli.run(&["undo", &set, "0"]),
        3,
        "is not applied (pending)",
    );
    assert_eq!(code(&cli.run(&["confirm", &set, "0"])), 0);

    let undo = cli.json(&["undo", &set, "0"], "");
    assert_eq!(undo["status"], "pending");
    assert_eq!(undo["undoes"]["changeSetId"], set.as_str());
    assert_eq!(undo["undoes"]["itemIndex"], 0);
    assert_eq!(undo["items"][0]["args"]["priority"], "P2");
    let undo = undo["id"].as_str().expect("an id").to_owned();
    assert_eq!(code(&cli.run(&["confirm", &undo, "0"])), 0);
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");

    let label = r#"[{"id":"c","type":"function","function":{"name":"add_checklist_item","arguments":"{\"title\":\"Call Bob\"}"}}]"#;
    let added = cli.json(&["wake", "--agent", "a", "--task", &task], label);
    let added = added["changeSetId"].as_str().expect("a set").to_owned();
    assert_eq!(code(&cli.run(&["confirm", &added, "0"])), 0);
    assert_fails(
        &cli.run(&["undo", &added, "0"]),
        1,
        "add_checklist_item declares no compensation",
    );
}

#[test]
fn a_held_confirmation_cancelled_in_its_window_never_runs_and_one_not_cancelled_runs_once() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let held = cli.json(&["agent", "hold", "a", "update_task_priority", "1"], "");
    assert_eq!(
        held["holds"],
        serde_json::json!([{"tool": "update_task_priority", "seconds": 1}])
    );
    let shown = cli.run(&["agent", "show", "a"]);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("hold        update_task_priority 1 s"),
        "{shown:?}"
    );

    // Cancelled within its window: the item ends rejected, nothing runs.
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    let confirmed = cli.json(&["confirm", &set, "0"], "");
    let job = confirmed["scheduled"]["jobId"]
        .as_str()
        .expect("a held job")
        .to_owned();
    assert!(
        confirmed["scheduled"]["notBefore"].is_string(),
        "{confirmed}"
    );
    let pending = String::from_utf8_lossy(&cli.run(&["pending"]).stdout).into_owned();
    assert!(pending.contains("run: scheduled until"), "{pending}");
    assert_fails(&cli.run(&["confirm", &set, "0"]), 3, "held until");
    assert_eq!(code(&cli.run(&["jobs", "cancel", &job])), 0);
    assert_fails(
        &cli.run(&["jobs", "cancel", &job]),
        3,
        "only a confirmation still in its hold window",
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(item["status"], "rejected");
    assert_eq!(item["reason"], "Cancelled during the hold window");
    cli.json(&["jobs", "run", "--wait"], "");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");

    // Not cancelled: it runs once when the window ends.
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P1"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    let confirmed = cli.json(&["confirm", &set, "0"], "");
    let job = confirmed["scheduled"]["jobId"]
        .as_str()
        .expect("a held job")
        .to_owned();
    let ran = cli.json(&["jobs", "run", "--wait"], "");
    assert_eq!(ran["applied"], 1, "{ran}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P1");
    assert_eq!(cli.json(&["show", &set, "0"], "")["status"], "confirmed");
    assert_fails(&cli.run(&["jobs", "cancel", &job]), 3, "applied");
    assert_eq!(cli.json(&["jobs", "run"], "")["applied"], 0, "it ran once");

    assert_eq!(
        cli.json(&["agent", "hold", "a", "update_task_priority", "0"], "")
            .get("holds"),
        None,
        "0 removes the hold"
    );
}

#[test]
fn a_quorum_of_two_counts_each_person_once_and_an_edit_starts_a_new_revision() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    assert_fails(
        &cli.run(&[
            "agent",
            "allow",
            "a",
            "update_task_priority",
            "--approvals",
            "2",
        ]),
        2,
        "--approvals goes with `assent agent ask`",
    );
    let agent = cli.json(
        &[
            "agent",
            "ask",
            "a",
            "update_task_priority",
            "--approvals",
            "2",
        ],
        "",
    );
    assert_eq!(
        agent["quorums"],
        serde_json::json!([{"tool": "update_task_priority", "approvals": 2}])
    );
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();

    let first = cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 of 2 approvals")),
        "{first}"
    );
    let pending = String::from_utf8_lossy(&cli.run(&["pending"]).stdout).into_owned();
    assert!(
        pending.contains("[0] 1 of 2 approvals (by alice)"),
        "{pending}"
    );
    assert_fails(
        &cli.run(&["confirm", &set, "0", "--as", "alice"]),
        3,
        "alice has approved item 0 already",
    );
    // Bob edits: a new revision, his approval of it; alice's no longer counts.
    let edited = cli.json(
        &[
            "edit",
            &set,
            "0",
            "--args",
            r#"{"priority":"P1"}"#,
            "--as",
            "bob",
        ],
        "",
    );
    assert!(
        edited["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 of 2 approvals")),
        "{edited}"
    );
    let item = cli.json(&["show", &set, "0"], "");
    assert_eq!(item["approvalsNeeded"], 2);
    assert_eq!(item["approvals"][0]["by"], "bob", "{item}");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P2");

    cli.json(&["confirm", &set, "0", "--as", "alice"], "");
    assert_eq!(
        cli.json(&["task", "show", &task], "")["priority"],
        "P1",
        "the revision's arguments run"
    );
    assert_eq!(cli.json(&["show", &set, "0"], "")["status"], "confirmed");
}
