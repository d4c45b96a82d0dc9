//! A set is named by its whole id or by the first 8 or more hex digits of it (issue 25):
//! a unique prefix works wherever a set id is taken, a shorter one is an invalid id
//! (a usage error, exit 2), one no set has is `no change set` (exit 1), one several
//! sets share is a usage error (exit 2) saying how many.

use super::{Cli, assert_fails, code};
use assent_domain::{
    ChangeItem, ChangeSet, LEGACY_TARGET_KIND, NewChangeSet, OffsetDateTime, Target, Uuid,
};
use assent_store::{Store, change_sets};
use serde_json::json;

/// Two pending sets on `task` whose ids share their first 20 hex digits.
async fn two_sets_sharing_a_prefix(cli: &Cli, task: &str) -> [Uuid; 2] {
    let store = Store::open(&cli.db).await.expect("the database opens");
    let mut conn = store.read_connection().await.expect("a connection");
    let ids = [
        "0000000a-0000-4000-8000-000000000001",
        "0000000a-0000-4000-8000-100000000002",
    ]
    .map(|id| Uuid::parse_str(id).expect("a UUID"));
    for id in ids {
        let set = ChangeSet::new(NewChangeSet {
            id,
            agent_id: "a".to_owned(),
            target: Target::new(LEGACY_TARGET_KIND, task),
            thread_id: "t".to_owned(),
            run_key: "r".to_owned(),
            items: vec![ChangeItem::new(
                "update_task_priority",
                json!({"priority": "P1"}),
                "Priority: P1",
            )],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        change_sets::insert(&mut conn, &set, OffsetDateTime::UNIX_EPOCH)
            .await
            .expect("inserted");
    }
    ids
}

/// Two proposals that wait for a person.
const CALLS: &str = r#"[{"id":"call_1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}},
  {"id":"call_2","type":"function","function":{"name":"add_checklist_item","arguments":"{\"title\":\"Write a test\"}"}}]"#;

#[test]
fn a_set_is_confirmed_by_the_first_eight_digits_of_its_id() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], CALLS);
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();

    let shown = cli.json(&["show", &set[..8].to_uppercase()], "");
    assert_eq!(shown["id"], set.as_str(), "any case");
    let confirmed = cli.json(&["confirm", &set[..8], "0"], "");
    assert_eq!(confirmed["decision"]["verdict"], "confirmed");
    assert_eq!(confirmed["decision"]["changeSetId"], set.as_str());
    let deferred = cli.json(&["defer", &set[..13], "1"], "");
    assert_eq!(deferred["verdict"], "deferred", "with its dash: {deferred}");
    let dashless: String = set.chars().filter(|c| *c != '-').take(16).collect();
    let item = cli.json(&["show", &dashless, "1"], "");
    assert_eq!(item["status"], "deferred", "without its dashes: {item}");

    // Too short, or not hex: a usage error (exit 2) on every command taking a set id
    // (issue 37), and nothing is decided.
    let short = &set[..7];
    for command in [
        vec!["confirm", short, "1"],
        vec!["confirm", short, "--all"],
        vec!["reject", short, "1"],
        vec!["edit", short, "1", "--args", "{}"],
        vec!["defer", short, "1"],
        vec!["undo", short, "0"],
        vec!["dismiss", short],
        vec!["show", short],
    ] {
        assert_fails(&cli.run(&command), 2, "invalid change set id");
    }
    assert_fails(
        &cli.run(&["confirm", &format!("{}%", &set[..8]), "1"]),
        2,
        "invalid change set id",
    );
    assert_eq!(cli.json(&["show", &set, "1"], "")["status"], "deferred");
    let other = if set.starts_with('f') { "e" } else { "f" };
    assert_fails(
        &cli.run(&["reject", &format!("{other}{}", &set[1..8]), "1"]),
        1,
        "no change set",
    );
    assert_fails(
        &cli.run(&["confirm", &set[..8], "0"]),
        3,
        "already confirmed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_several_sets_share_is_a_usage_error_naming_how_many() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let [first, second] = two_sets_sharing_a_prefix(&cli, &task).await;

    for command in [
        vec!["confirm", "0000000a", "0"],
        vec!["confirm", "0000000A-0000", "--all"],
        vec!["reject", "0000000a-0000-4000", "0"],
        vec!["dismiss", "0000000a"],
        vec!["show", "0000000a"],
    ] {
        let out = tokio::task::block_in_place(|| cli.run(&command));
        assert_fails(&out, 2, "2 change sets have ids starting with 0000000a");
    }
    let out = tokio::task::block_in_place(|| cli.run(&["show", "0000000a-0000-4000-8000-"]));
    assert_fails(&out, 2, "2 change sets");

    let unique = &second.to_string()[..25];
    let shown = tokio::task::block_in_place(|| cli.json(&["show", unique], ""));
    assert_eq!(shown["id"], second.to_string());
    let whole = first.to_string();
    let out = tokio::task::block_in_place(|| cli.run(&["confirm", &whole, "0"]));
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
}
