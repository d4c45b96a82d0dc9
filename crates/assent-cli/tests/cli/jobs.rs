//! `assent jobs`: an item of another host's external tool, confirmed by the CLI (which
//! composes only the journal), becomes a job the CLI lists with exactly the contract's
//! fields; `resolve` settles one in doubt and refuses (exit 3) one that is not.

use super::{Cli, assert_fails, code};
use assent_confirm::{JobSettings, WakeRequest};
use assent_domain::{OffsetDateTime, Target};
use assent_store::{Store, agents, jobs};
use assent_tests::external::{self, CATEGORY, HttpHost, Receiver, TOOL};
use assent_tests::tool_calls;
use assent_tools::AgentPolicy;
use serde_json::{Value, json};
use time::Duration;

#[tokio::test]
async fn the_cli_confirms_an_external_item_lists_its_job_and_settles_it_in_doubt() {
    let cli = Cli::new();
    let now = OffsetDateTime::parse(super::NOW, &time::format_description::well_known::Rfc3339)
        .expect("now");
    let store = Store::open(&cli.db()).await.expect("store");
    let receiver = Receiver::start(false, std::time::Duration::ZERO);
    let engine = external::engine(
        store.clone(),
        HttpHost::new(&receiver.url, false, false),
        JobSettings::default(),
    )
    .await;
    let mut conn = store.read_connection().await.expect("conn");
    agents::upsert(&mut conn, "poster", &AgentPolicy::new([CATEGORY]), now)
        .await
        .expect("agent");
    drop(conn);
    let calls = tool_calls(&[(TOOL, json!({"text": "hi"}))]);
    let request = WakeRequest::new("poster", Target::new("endpoint", "e1"), "run-1", calls);
    let set = engine.wakes().wake(request, now).await.expect("wake");
    let set = set.change_set.expect("queued").id.to_string();

    assert_eq!(cli.json(&["jobs"], ""), json!([]));
    let confirmed = cli.run(&["confirm", &set, "0"]);
    assert_eq!(
        code(&confirmed),
        0,
        "{}",
        String::from_utf8_lossy(&confirmed.stderr)
    );
    let text = String::from_utf8_lossy(&confirmed.stdout);
    assert!(
        text.contains("Approved; it runs when an executor of http claims job"),
        "{text}"
    );
    let listed = cli.json(&["jobs"], "");
    let job = &listed[0];
    assert_eq!(assent_tests::sorted_keys(job), assent_tests::JOB_FIELDS);
    assert_eq!(job["status"], "approved");
    assert_eq!(job["toolName"], TOOL);
    assert_eq!(job["changeSetId"], Value::String(set.clone()));
    assert_eq!(job["args"], json!({"text": "hi"}));
    assert_eq!(job["lastError"], Value::Null);
    let pending = cli.json(&["pending"], "");
    assert_eq!(pending, json!([]), "a resolved set leaves the pending list");
    let id = job["id"].as_str().expect("id").to_owned();
    assert_fails(
        &cli.run(&["jobs", "resolve", &id, "--rerun"]),
        3,
        "not in doubt",
    );
    assert_eq!(
        code(&cli.run(&["jobs", "resolve", &id])),
        2,
        "an answer is required"
    );

    // An executor claims it and dies: the next one finds it in doubt.
    let mut tx = store.begin_claim().await.expect("claim");
    jobs::claim_next(tx.connection(), external::HOST, now, Duration::seconds(1))
        .await
        .expect("claims")
        .expect("a job");
    tx.commit().await.expect("commit");
    engine
        .run_due_jobs(now + Duration::minutes(5))
        .await
        .expect("runs");
    let listed = cli.json(&["jobs"], "");
    assert_eq!(listed[0]["status"], "inDoubt", "{listed}");
    assert_eq!(listed[0]["attempts"], 1);
    assert!(
        listed[0]["lastError"]
            .as_str()
            .expect("error")
            .contains("may have happened")
    );
    let table = String::from_utf8_lossy(&cli.run(&["jobs"]).stdout).into_owned();
    assert!(table.contains("in doubt"), "{table}");

    // A job is named by its first 8 hex digits as a change set is.
    let settled = cli.json(&["jobs", "resolve", &id[..8], "--happened"], "");
    assert_eq!(settled["status"], "applied");
    assert_eq!(settled["id"], id.as_str());
    assert_fails(&cli.run(&["jobs", "retract", &id[..8]]), 3, "not failed");
    assert_fails(
        &cli.run(&["jobs", "retract", "abc"]),
        2,
        "first 8 or more hex digits",
    );
    assert_fails(
        &cli.run(&["jobs", "retry", "ffffffff"]),
        1,
        "no job whose id starts with ffffffff",
    );
    assert_fails(&cli.run(&["jobs", "retract", &id]), 3, "not failed");
    assert_fails(
        &cli.run(&["jobs", "retry", "00000000-0000-0000-0000-000000000000"]),
        1,
        "no job 00000000-0000-0000-0000-000000000000",
    );
    assert_eq!(
        receiver.effects.lock().expect("lock").len(),
        0,
        "nothing ran twice, or at all"
    );
}
