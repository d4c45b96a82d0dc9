//! Bounded stored results (issue 24): a tool's 10 MiB result reaches the agent whole,
//! while the audit trail, the applied operations and the job keep a bounded copy, so
//! that a device with many such results still syncs. On SQLite, and on PostgreSQL when
//! a server is given.

use assent_confirm::ItemRef;
use assent_confirm::{
    Engine, ExecutionOutcome, ExternalCall, ExternalError, ExternalHandler, SimpleHost,
    WakeOutcome, WakeRequest,
};
use assent_domain::{MAX_STORED_RESULT_BYTES, Target, stored_result};
use assent_store::{Store, agents, jobs};
use assent_tests::{NOW, TestApp, TestBackend, backends, tool_calls};
use assent_tools::{AgentPolicy, BoxFuture, ToolMode, ToolRegistry, ToolSpec};
use serde_json::{Value, json};
use std::sync::Arc;

const AGENT: &str = "reader";

/// Result `n` of the tools: 10 MiB of two-byte characters after `n`'s digits, so that
/// the cut falls inside a character for some `n`.
fn blob(n: &Value) -> String {
    format!("{n}{}", "ü".repeat(5 * 1024 * 1024))
}

/// Reads a blob outside the database: the job's result is the blob.
struct Fetcher;

impl ExternalHandler for Fetcher {
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        let text = blob(&call.args["n"]);
        Box::pin(async move { Ok(text) })
    }
}

/// An engine on `store` whose host `files` has an immediate `read_blob` and an external
/// `fetch_blob` (queued for a person), both answering 10 MiB; agent [`AGENT`] may use
/// them.
async fn files_engine(store: &Store) -> Engine {
    let schema = json!({"type": "object", "required": ["n"],
        "properties": {"n": {"type": "integer"}}});
    let mut tools = ToolRegistry::new();
    for (name, mode) in [
        ("read_blob", ToolMode::Immediate),
        ("fetch_blob", ToolMode::Deferred),
    ] {
        tools
            .register(ToolSpec::new(name, "Read a blob.", mode, schema.clone()))
            .unwrap();
    }
    let host = SimpleHost::new("files")
        .handle("read_blob", |_, call| {
            let text = blob(&call.args["n"]);
            Box::pin(async move { Ok(assent_tools::ToolOutcome::unchanged(text)) })
        })
        .external("fetch_blob", false, Fetcher)
        .category(|_, _| Box::pin(async { Ok(Some("files".to_owned())) }));
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
        .await
        .unwrap();
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new(["files"]), NOW)
        .await
        .unwrap();
    engine
}

async fn wake(engine: &Engine, run_key: &str, tool: &str, n: usize) -> WakeOutcome {
    let calls = tool_calls(&[(tool, json!({ "n": n }))]);
    let request = WakeRequest::new(AGENT, Target::new("file", "f1"), run_key, calls);
    engine.wakes().wake(request, NOW).await.unwrap()
}

/// The result details audited for `tool`, oldest first.
async fn audited(store: &Store, tool: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT detail FROM audit_records WHERE kind = 'result' AND tool_name = $1 ORDER BY id",
    )
    .bind(tool)
    .fetch_all(
        store
            .read_connection()
            .await
            .expect("a read connection")
            .connection(),
    )
    .await
    .unwrap()
}

async fn applied(store: &Store, tool: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT message FROM applied_operations WHERE tool_name = $1")
        .bind(tool)
        .fetch_all(
            store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await
        .unwrap()
}

/// `stored` is `whole` as stored: its head, then the marker naming the whole.
fn assert_stored_copy_of(stored: &str, whole: &str) {
    assert!(stored.len() <= MAX_STORED_RESULT_BYTES, "{}", stored.len());
    assert_eq!(stored, stored_result(whole));
    let marker = format!("…[result cut: {} bytes in all, sha256 ", whole.len());
    let (head, hash) = stored.rsplit_once(&marker).expect("a marker");
    assert!(
        whole.starts_with(head) && head.len() > 60_000,
        "{}",
        head.len()
    );
    assert_eq!(hash.len(), 65, "64 hex digits and `]`: {hash}");
}

#[tokio::test]
async fn an_immediate_tools_huge_result_is_stored_bounded_and_replied_whole() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        immediate_result_is_stored_bounded(&app).await;
    }
}

async fn immediate_result_is_stored_bounded(app: &TestApp) {
    let engine = files_engine(&app.store).await;
    let whole = blob(&json!(7));

    let outcome = wake(&engine, "run-1", "read_blob", 7).await;
    assert!(
        outcome.responses[0].content == whole,
        "the agent reads the whole result ({} bytes)",
        outcome.responses[0].content.len()
    );
    let [stored] = &applied(&app.store, "read_blob").await[..] else {
        panic!("one applied operation")
    };
    assert_stored_copy_of(stored, &whole);
    let [detail] = &audited(&app.store, "read_blob").await[..] else {
        panic!("one result record")
    };
    assert_stored_copy_of(detail, &whole);

    // A retried wake finds the call applied and answers with the stored copy: the whole
    // text is no longer kept anywhere.
    let retried = wake(&engine, "run-1", "read_blob", 7).await;
    assert_eq!(retried.responses[0].content, *stored);
}

#[tokio::test]
async fn an_external_jobs_huge_result_is_stored_bounded_in_the_job_and_its_audit_record() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        job_result_is_stored_bounded(&app).await;
    }
}

async fn job_result_is_stored_bounded(app: &TestApp) {
    let engine = files_engine(&app.store).await;
    let whole = blob(&json!(3));
    let set = wake(&engine, "run-1", "fetch_blob", 3)
        .await
        .change_set
        .expect("queued for a person")
        .id;
    let confirmed = engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    assert!(
        matches!(confirmed.execution, ExecutionOutcome::Queued { .. }),
        "{:?}",
        confirmed.execution
    );
    let run = engine.run_due_jobs(NOW).await.unwrap();
    assert_eq!((run.claimed, run.applied), (1, 1), "{run:?}");

    let mut conn = app.store.read_connection().await.unwrap();
    let job = jobs::for_item(&mut conn, set, 0)
        .await
        .unwrap()
        .expect("a job");
    drop(conn);
    assert_stored_copy_of(job.result.as_deref().expect("a result"), &whole);
    let [stored] = &applied(&app.store, "fetch_blob").await[..] else {
        panic!("one applied operation")
    };
    assert_stored_copy_of(stored, &whole);
    let [detail] = &audited(&app.store, "fetch_blob").await[..] else {
        panic!("one result record")
    };
    assert_stored_copy_of(detail, &whole);
}

#[tokio::test]
async fn a_device_with_many_huge_results_still_syncs() {
    for backend in backends() {
        many_huge_results_sync(&backend).await;
    }
}

async fn many_huge_results_sync(backend: &TestBackend) {
    const RESULTS: usize = 27;
    let device = TestApp::device_on(backend, "device-a").await;
    let engine = files_engine(&device.store).await;
    for n in 0..RESULTS {
        let outcome = wake(&engine, &format!("run-{n}"), "read_blob", n).await;
        assert!(outcome.responses[0].content.len() > 10 * 1024 * 1024);
    }

    let batch = device.export().await;
    let size = serde_json::to_string(&batch).unwrap().len();
    assert!(
        size < RESULTS * 80 * 1024,
        "{RESULTS} results of 10 MiB make a batch of {size} bytes"
    );
    let peer = TestApp::device_on(backend, "device-b").await;
    let report = peer.import(&batch).await.unwrap();
    assert_eq!(
        report.audit_records_inserted,
        2 * RESULTS,
        "every action and result record arrives: {report:?}"
    );
    assert_eq!(audited(&peer.store, "read_blob").await.len(), RESULTS);
}
