//! Test support shared by Assent's integration scenarios: a fresh SQLite file (or, for
//! the conformance suite, a fresh PostgreSQL database) per test, an engine over the
//! reference journal, and hosts that misbehave on purpose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod book;
pub mod external;
pub mod pypi;
pub mod receiver;
pub mod smtp;

use assent_changeset::{ToolCall, parse_tool_calls};
use assent_confirm::{
    ConfirmationService, Engine, Host, LoadedState, LocalCall, WakeOutcome, WakeRequest,
};
use assent_domain::{OffsetDateTime, Uuid};
use assent_journal::TaskSnapshot;
use assent_journal_host::{JournalHost, NewTask, TaskEntities, create_task, task_target};
use assent_store::HostMigration;
use assent_store::sync::HostEntities;
use assent_store::sync::{self, ImportReport};
use assent_store::{Connection, Store, StoreError, StoreOptions};
use assent_sync::SyncBatch;
use assent_tools::{
    AgentPolicy, BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tempfile::TempDir;
use time::macros::datetime;

/// Every table of the database, engine and journal.
const TABLES: &[&str] = &[
    "agents",
    "change_sets",
    "change_items",
    "decisions",
    "audit_records",
    "applied_operations",
    "outbox",
    "tasks",
    "task_labels",
    "checklist_items",
    "agent_reports",
    "agent_observations",
    "grants",
    "delegations",
    "sync_conflicts",
    "sync_applied_batches",
    "sync_peers",
    // Not `sync_imports`: the log of imports, which every import writes (a replay and,
    // in its own transaction, a refusal too); it records the attempt, it is no state.
];

/// The fixed clock of the scenarios.
pub const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

/// How a [`TestHost`] misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The handler returns an error.
    Fail,
    /// The handler writes, then panics.
    Panic,
}

/// The journal host, except that the handler of one tool can be made to fail (after
/// writing, to prove the write is rolled back) while `failures_left` is non-zero.
pub struct TestHost {
    inner: JournalHost,
    faulty: FaultyHandler,
}

struct FaultyHandler {
    tool: String,
    fault: Fault,
    failures_left: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    inner: JournalHost,
}

impl ToolHandler<Connection> for FaultyHandler {
    fn execute<'a>(
        &'a self,
        ctx: &'a mut Connection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let handler = self
                .inner
                .handler(&invocation.tool_name)
                .expect("journal handles it");
            let outcome = handler.execute(ctx, invocation).await?;
            let fail = self
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                match self.fault {
                    Fault::Fail => {
                        return Err(ToolsError::handler_failed(
                            &invocation.tool_name,
                            "the journal is unavailable",
                        ));
                    }
                    Fault::Panic => panic!("handler bug"),
                }
            }
            Ok(outcome)
        })
    }
}

impl Host for TestHost {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn migrations(&self) -> &[HostMigration] {
        self.inner.migrations()
    }

    fn entities(&self) -> Option<&dyn HostEntities> {
        self.inner.entities()
    }

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        if tool_name == self.faulty.tool {
            Some(&self.faulty)
        } else {
            self.inner.handler(tool_name)
        }
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        self.inner.resolver()
    }

    fn snapshot<'a>(
        &'a self,
        conn: &'a mut Connection,
        target: &'a assent_domain::Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        self.inner.snapshot(conn, target)
    }

    fn handle_local<'a>(
        &'a self,
        conn: &'a mut Connection,
        call: LocalCall<'a>,
    ) -> BoxFuture<'a, Result<String, String>> {
        self.inner.handle_local(conn, call)
    }
}

/// OpenAI-style tool calls `(name, args)`, parsed, with ids `call_0`, `call_1`, ...
pub fn tool_calls(calls: &[(&str, Value)]) -> Vec<ToolCall> {
    let document = Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                serde_json::json!({"id": format!("call_{i}"), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect(),
    );
    parse_tool_calls(&document).unwrap()
}

/// The environment variable naming a PostgreSQL server for the conformance suite
/// (`postgres://user@host:port/database`; every test creates a database of its own).
pub const POSTGRES_URL_VAR: &str = "ASSENT_TEST_POSTGRES_URL";

/// A database server the conformance suite runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestBackend {
    /// A fresh SQLite file per test.
    Sqlite,
    /// A fresh database per test on the PostgreSQL server at this URL.
    Postgres(String),
}

impl TestBackend {
    /// A fresh, empty database on this backend: its URL, and the directory that holds
    /// it (SQLite) or nothing in it (PostgreSQL).
    pub async fn fresh_database(&self) -> (String, TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = match self {
            Self::Sqlite => format!("sqlite://{}/assent.db", dir.path().display()),
            Self::Postgres(server) => fresh_postgres_database(server).await,
        };
        (url, dir)
    }
}

/// The backends every conformance scenario runs on: SQLite always, PostgreSQL when
/// [`POSTGRES_URL_VAR`] is set. Without it the PostgreSQL half says it was skipped,
/// except under `CI=true`, where a missing server is a failure (`.ci/run` starts one).
#[allow(
    clippy::print_stderr,
    reason = "a skipped half must be visible in the test output"
)]
pub fn backends() -> Vec<TestBackend> {
    let mut backends = vec![TestBackend::Sqlite];
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => backends.push(TestBackend::Postgres(url)),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{POSTGRES_URL_VAR} is not set under CI=true: .ci/run starts a PostgreSQL server and sets it"
            )
        }
        _ => eprintln!("PostgreSQL half skipped: {POSTGRES_URL_VAR} is not set"),
    }
    backends
}

/// Creates a uniquely named database on the server at `server_url`; returns its URL.
pub async fn fresh_postgres_database(server_url: &str) -> String {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let name = format!("assent_test_{}", Uuid::new_v4().simple());
    let mut admin = sqlx::AnyConnection::connect(server_url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {server_url}: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    let (without_query, query) = server_url
        .split_once('?')
        .map_or((server_url, None), |(url, query)| (url, Some(query)));
    let server = without_query
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("://"))
        .map_or(without_query, |(server, _)| server);
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// A fresh database with an engine over it.
pub struct TestApp {
    /// Keeps the directory (and a SQLite database file) alive.
    pub dir: TempDir,
    /// The database's URL (to open a second store on it).
    pub url: String,
    /// The store.
    pub store: Store,
    /// The engine.
    pub engine: Engine,
    /// Failures still to inject (see [`TestApp::with_fault`]).
    pub failures_left: Arc<AtomicUsize>,
    /// How often the faulty tool's handler ran.
    pub faulty_calls: Arc<AtomicUsize>,
}

impl TestApp {
    /// A fresh app whose handlers all behave.
    pub async fn spawn() -> Self {
        Self::with_fault("no_such_tool", Fault::Fail, 0).await
    }

    /// A fresh app whose `tool` handler fails `times` times with `fault`.
    pub async fn with_fault(tool: &str, fault: Fault, times: usize) -> Self {
        Self::build("device-a", tool, fault, times).await
    }

    /// A fresh app on its own database whose host id is `host`: one of several
    /// devices of one person, for sync scenarios.
    pub async fn device(host: &str) -> Self {
        Self::build(host, "no_such_tool", Fault::Fail, 0).await
    }

    /// A fresh app whose handlers all behave, on `backend`.
    pub async fn on(backend: &TestBackend) -> Self {
        Self::device_on(backend, "device-a").await
    }

    /// A fresh device `host` on `backend`.
    pub async fn device_on(backend: &TestBackend, host: &str) -> Self {
        Self::build_on(backend, host, "no_such_tool", Fault::Fail, 0).await
    }

    async fn build(host_id: &str, tool: &str, fault: Fault, times: usize) -> Self {
        Self::build_on(&TestBackend::Sqlite, host_id, tool, fault, times).await
    }

    async fn build_on(
        backend: &TestBackend,
        host_id: &str,
        tool: &str,
        fault: Fault,
        times: usize,
    ) -> Self {
        let (url, dir) = backend.fresh_database().await;
        let store = Store::open_with({
            let mut options = StoreOptions::new(url.clone());
            options.device_id = host_id.into();
            options
        })
        .await
        .expect("store opens");
        let failures_left = Arc::new(AtomicUsize::new(times));
        let faulty_calls = Arc::new(AtomicUsize::new(0));
        let host = TestHost {
            inner: JournalHost::new(host_id),
            faulty: FaultyHandler {
                tool: tool.into(),
                fault,
                failures_left: failures_left.clone(),
                calls: faulty_calls.clone(),
                inner: JournalHost::new(host_id),
            },
        };
        let engine = Engine::open(
            store.clone(),
            Arc::new(assent_journal::catalog()),
            Arc::new(host),
        )
        .await
        .expect("the journal's tables");
        Self {
            dir,
            url,
            store,
            engine,
            failures_left,
            faulty_calls,
        }
    }

    /// The database URL (to open a second store on the same database).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The confirmation services of `count` engines, each with a one-connection pool of
    /// its own on this app's database, as `count` processes would be: the database's
    /// writer lock, not an in-process mutex, decides between them.
    pub async fn separate_confirmation_services(&self, count: usize) -> Vec<ConfirmationService> {
        let mut services = Vec::with_capacity(count);
        for i in 0..count {
            let store = Store::open_with({
                let mut options = StoreOptions::new(self.url());
                options.device_id = format!("device-{i}");
                options.max_connections = 1;
                options
            })
            .await
            .unwrap();
            let host = Arc::new(JournalHost::new(format!("device-{i}")));
            services.push(
                Engine::new(store, Arc::new(assent_journal::catalog()), host).confirmations(),
            );
        }
        services
    }

    /// The standard scene on this device (and its agent on `peer`), a wake proposing
    /// priority P0, and this device's state sent to `peer`: the task and the set.
    pub async fn propose_and_send_to(&self, peer: &TestApp) -> (String, Uuid) {
        let task = self.scene().await;
        peer.agent("agent-1", &["work"]).await;
        let set = self
            .wake(
                &task,
                &[(
                    "update_task_priority",
                    serde_json::json!({"priority": "P0"}),
                )],
            )
            .await
            .change_set
            .expect("a proposal")
            .id;
        self.send_to(peer).await;
        (task, set)
    }

    /// Creates or updates an agent allowed `categories`.
    pub async fn agent(&self, id: &str, categories: &[&str]) {
        let mut tx = self.store.begin_write().await.unwrap();
        assent_store::agents::upsert(
            tx.connection(),
            id,
            &AgentPolicy::new(categories.iter().copied()),
            NOW,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    /// Creates a task; returns its id.
    pub async fn task(&self, new: NewTask) -> String {
        let id = Uuid::new_v4().to_string();
        let mut tx = self.store.begin_write().await.unwrap();
        create_task(tx.connection(), &id, &new, self.store.device_id(), NOW)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        id
    }

    /// The standard scene: agent `agent-1` allowed `work`, and a `work` task "Fix login
    /// bug" (OPEN, P1, 120 minutes, label bug, checklist: "Buy groceries", "Walk dog").
    pub async fn scene(&self) -> String {
        self.agent("agent-1", &["work"]).await;
        self.task(NewTask {
            title: "Fix login bug".into(),
            category: Some("work".into()),
            priority: Some("P1".into()),
            estimate_minutes: Some(120),
            labels: vec!["bug".into()],
            checklist: vec!["Buy groceries".into(), "Walk dog".into()],
            ..NewTask::default()
        })
        .await
    }

    /// The task as stored now.
    pub async fn load(&self, task_id: &str) -> TaskSnapshot {
        let mut conn = self.store.read_connection().await.unwrap();
        assent_journal_host::load_task(&mut conn, task_id)
            .await
            .unwrap()
            .expect("task exists")
    }

    /// Runs a wake of `agent-1` on `task_id` with OpenAI-style calls `(name, args)`.
    pub async fn wake(&self, task_id: &str, calls: &[(&str, Value)]) -> WakeOutcome {
        self.wake_calls(task_id, tool_calls(calls)).await.unwrap()
    }

    /// Runs a wake with already parsed calls.
    pub async fn wake_calls(
        &self,
        task_id: &str,
        calls: Vec<ToolCall>,
    ) -> Result<WakeOutcome, assent_confirm::ConfirmError> {
        let run = Uuid::new_v4().to_string();
        self.engine
            .wakes()
            .wake(
                WakeRequest::new("agent-1", task_target(task_id), run, calls),
                NOW,
            )
            .await
    }

    /// Exports this device's state as a batch, through its JSON wire form.
    pub async fn export(&self) -> SyncBatch {
        let mut tx = self.store.begin_write().await.unwrap();
        let batch = sync::export(
            tx.connection(),
            self.store.device_id(),
            &TaskEntities,
            Uuid::new_v4(),
            NOW,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        let wire = serde_json::to_string(&batch).unwrap();
        serde_json::from_str(&wire).unwrap()
    }

    /// Merges `batch` into this device's state, in one write transaction.
    pub async fn import(&self, batch: &SyncBatch) -> Result<ImportReport, StoreError> {
        let mut tx = self.store.begin_write().await?;
        let report = sync::import(
            tx.connection(),
            self.store.device_id(),
            &TaskEntities,
            batch,
            NOW,
        )
        .await?;
        tx.commit().await?;
        Ok(report)
    }

    /// Sends this device's state to `peer`, which merges it.
    pub async fn send_to(&self, peer: &TestApp) -> ImportReport {
        peer.import(&self.export().await).await.unwrap()
    }

    /// The canonical form of this device's synced state (change sets, decisions in
    /// force and lost, audit trail, tasks), as text: equal on two devices exactly when
    /// they agree.
    pub async fn synced_state(&self) -> String {
        let mut conn = self.store.read_connection().await.unwrap();
        let state = sync::local_state(&mut conn, self.store.device_id(), &TaskEntities)
            .await
            .unwrap();
        serde_json::to_string_pretty(&state).unwrap()
    }

    /// A fingerprint of the whole database's content (every row of every table).
    pub async fn fingerprint(&self) -> String {
        let mut conn = self.store.read_connection().await.unwrap();
        let mut out = String::new();
        for table in TABLES {
            let columns: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT group_concat(name, ', ') FROM pragma_table_info('{table}')"
            )))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT json_array({columns}) FROM {table} ORDER BY 1"
            )))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            out.push_str(&format!("{table}:{}\n", rows.join("|")));
        }
        out
    }
}

/// The name of every SDK dialect, as the golden fixtures and `--format` spell them.
pub fn dialect_names() -> impl Iterator<Item = &'static str> {
    assent_changeset::Dialect::ALL
        .into_iter()
        .map(assent_changeset::Dialect::name)
}

/// The golden dialect fixture `name` of assent-changeset (`<dialect>.in.json`,
/// `.out.json`, `.unknown.json`, `.call-less.json`), as text.
pub fn dialect_fixture(name: &str) -> String {
    let path = format!(
        "{}/../crates/assent-changeset/fixtures/dialects/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fields of a job in `assent jobs --json` and `GET /api/jobs` (a contract others
/// script against), sorted.
pub const JOB_FIELDS: [&str; 8] = [
    "args",
    "attempts",
    "changeSetId",
    "id",
    "itemIndex",
    "lastError",
    "status",
    "toolName",
];

/// The keys of the JSON object `value`, sorted.
pub fn sorted_keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// A small deterministic generator of random delays for the crash tests (no
/// dependency for a few numbers; a seed gives the same kills every run).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number below `bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// Panics unless `assent audit verify`'s proof holds on `store` (issue 38): the
/// scenario left an intact chain, rows that match it, and consent for every effect.
pub async fn assert_proven(store: &Store, scenario: &str) {
    let mut conn = store.read_connection().await.expect("a connection");
    let report =
        assent_store::proof::verify(&mut conn, &assent_store::proof::VerifyOptions::default())
            .await
            .expect("the proof runs");
    let listed: Vec<String> = report
        .violations
        .iter()
        .map(|v| format!("{} [{}] {}", v.entry, v.rule.as_str(), v.expected))
        .collect();
    assert!(
        report.verified(),
        "{scenario}: the proof does not hold:\n{}",
        listed.join("\n")
    );
}
