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
