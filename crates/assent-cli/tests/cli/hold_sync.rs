//! A held confirmation across two devices, through `assent sync export|import` (issue
//! 37, defects 3 and 17): the device that did not confirm shows the item held on the
//! confirming device and refuses to decide it (exit 3); only the confirming device runs
//! it when the window ends; who confirmed travels with the job. On every backend of the
//! conformance suite. Also: a device without the item's agent says so and decides
//! nothing; a rejection answers confirm's fields beside its own (issue 41, item 11).

use super::{Cli, assert_fails};
use serde_json::Value;

fn priority(to: &str) -> String {
    format!(
        r#"[{{"id":"call_1","type":"function","function":{{"name":"update_task_priority","arguments":"{{\"priority\":\"{to}\"}}"}}}}]"#
    )
}

/// `from`'s whole state, exported to a file and imported by `to`.
fn sync(from: &Cli, to: &Cli, name: &str) {
    let file = from.dir.path().join(name).display().to_string();
    from.json(&["sync", "export", &file], "");
    to.json(&["sync", "import", &file], "");
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn held_on_a_refused_on_b(backend: &assent_tests::TestBackend) {
    let a = Cli::on(backend).await;
    let b = Cli::on(backend).await;
    let task = a.agent_and_task();
    a.json(&["agent", "hold", "a", "update_task_priority", "1"], "");
    let wake = a.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    let confirmed = a.json(&["confirm", &set, "0", "--as", "alice"], "");
    let job = confirmed["scheduled"]["jobId"]
        .as_str()
        .expect("a held job")
        .to_owned();
    sync(&a, &b, "held.json");

    // B has no hold rule of its own: A's job holds the item there.
    assert_fails(&b.run(&["confirm", &set, "0"]), 3, "held until");
    assert_fails(&b.run(&["reject", &set, "0"]), 3, "held until");
    assert_fails(&b.run(&["defer", &set, "0"]), 3, "held until");
    let pending = stdout(&b.run(&["pending"]));
    assert!(
        pending.contains("run: scheduled until") && pending.contains("confirmed on device"),
        "{pending}"
    );
    let item = b.json(&["show", &set, "0"], "");
    assert_eq!(item["status"], "pending", "{item}");
    let execution: &Value = &item["execution"];
    assert_eq!(execution["status"], "scheduled", "{item}");
    assert!(execution["notBefore"].is_string(), "{item}");
    assert_eq!(
        execution["approvedBy"],
        serde_json::json!(["alice"]),
        "{item}"
    );
    assert!(execution["ownerDevice"].is_string(), "{item}");
    assert_fails(&b.run(&["jobs", "cancel", &job]), 3, "settle it there");

    // The window ends on A: it runs there once.
    let ran = a.json(&["jobs", "run", "--wait"], "");
    assert_eq!(ran["applied"], 1, "{ran}");
    assert_eq!(a.json(&["task", "show", &task], "")["priority"], "P0");
    let jobs = a.json(&["jobs"], "");
    assert_eq!(
        jobs[0]["approvedBy"],
        serde_json::json!(["alice"]),
        "{jobs}"
    );

    // B learns it was decided and ran, and runs nothing itself.
    sync(&a, &b, "ran.json");
    assert_eq!(b.json(&["show", &set, "0"], "")["status"], "confirmed");
    let ran = b.json(&["jobs", "run"], "");
    assert_eq!(ran["claimed"], 0, "{ran}");
    assert_eq!(b.json(&["task", "show", &task], "")["priority"], "P0");
}

#[tokio::test]
async fn a_held_confirmation_synced_to_another_device_is_held_there_and_runs_only_where_confirmed()
{
    for backend in assent_tests::backends() {
        held_on_a_refused_on_b(&backend).await;
    }
}

/// `assent audit verify` holds on `cli`'s database.
fn proven(cli: &Cli) {
    let out = cli.run(&["audit", "verify"]);
    let shown = stdout(&out);
    assert!(
        out.status.code() == Some(0) && shown.starts_with("verified: "),
        "{shown}"
    );
}

async fn no_agent_on_b(backend: &assent_tests::TestBackend) {
    let a = Cli::on(backend).await;
    let b = Cli::on(backend).await;
    let task = a.agent_and_task();
    let wake = a.json(&["wake", "--agent", "a", "--task", &task], &priority("P0"));
    let set = wake["changeSetId"].as_str().expect("a set").to_owned();
    sync(&a, &b, "proposed.json");

    // B never had agent `a`: it says so, not that a category is not allowed, and
    // decides nothing.
    for refused in [
        b.run(&["confirm", &set, "0", "--as", "bob"]),
        b.run(&["edit", &set, "0", "--args", r#"{"priority":"P1"}"#]),
    ] {
        assert_fails(&refused, 1, r#"no agent "a" on this database"#);
    }
    let all = b.run(&["confirm", &set, "--all"]);
    assert!(
        stdout(&all).contains(r#"no agent "a" on this database"#),
        "{}",
        stdout(&all)
    );
    assert_eq!(b.json(&["show", &set, "0"], "")["status"], "pending");
    assert_eq!(b.json(&["jobs"], ""), serde_json::json!([]));
    proven(&b);

    // A rejection needs no rules, and answers confirm's fields beside its own.
    let rejected = b.json(&["reject", &set, "0", "--reason", "not here"], "");
    assert_eq!(rejected["verdict"], "rejected", "{rejected}");
    assert_eq!(rejected["reason"], "not here", "{rejected}");
    assert_eq!(rejected["decision"]["verdict"], "rejected", "{rejected}");
    assert_eq!(rejected["decision"]["id"], rejected["id"], "{rejected}");
    assert_eq!(
        rejected["message"], "Rejected; it will not run (reason: \"not here\").",
        "{rejected}"
    );
    proven(&b);
}

#[tokio::test]
async fn confirming_on_a_device_without_the_items_agent_names_the_agent() {
    for backend in assent_tests::backends() {
        no_agent_on_b(&backend).await;
    }
}

#[test]
fn reject_answers_every_field_confirm_answers() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let queue = |to: &str| {
        let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &priority(to));
        wake["changeSetId"].as_str().expect("a set").to_owned()
    };
    let confirmed = cli.json(&["confirm", &queue("P0"), "0"], "");
    let rejected = cli.json(&["reject", &queue("P1"), "0"], "");
    let confirm_keys = confirmed.as_object().expect("an object");
    let reject_keys = rejected.as_object().expect("an object");
    for key in confirm_keys.keys() {
        assert!(reject_keys.contains_key(key), "{key} missing: {rejected}");
    }
    assert_eq!(rejected["message"], "Rejected; it will not run.");
    // What reject answered before stays: the decision's own fields at the top.
    for key in [
        "id",
        "changeSetId",
        "itemIndex",
        "verdict",
        "toolName",
        "args",
    ] {
        assert!(reject_keys.contains_key(key), "{key} missing: {rejected}");
    }
    proven(&cli);
}
