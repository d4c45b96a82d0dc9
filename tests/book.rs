//! A service of our own with a transactional tool, for the scenarios where its items
//! are decided in another process: the "book" host writes one row per booked entry in
//! its own table, in the transaction that marks the job applied.
//!
//! The handler can note on disk, before it writes, that it started (`started_log`):
//! the crash tests then know that a kill landed between a handler's start and its
//! commit, which the database alone cannot show (that transaction left nothing).

use assent_confirm::{Engine, JobSettings, SimpleHost, WakeRequest};
use assent_domain::{OffsetDateTime, Target};
use assent_store::{Store, agents};
use assent_tools::{AgentPolicy, ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// The host's name.
pub const HOST: &str = "book";
/// Its tool.
pub const TOOL: &str = "book_entry";
/// The category of its ledgers.
pub const CATEGORY: &str = "books";
/// The agent that proposes entries.
pub const AGENT: &str = "bookkeeper";

const ENTRIES: &str = "CREATE TABLE book_entries (operation_id TEXT NOT NULL, \
    ledger TEXT NOT NULL, cents BIGINT NOT NULL)";

/// The "book" host: `book_entry {cents}` inserts a row, after `pause` (so a kill can
/// land inside the transaction), noting its start in `started_log` when given.
pub fn host(pause: Duration, started_log: Option<PathBuf>) -> SimpleHost {
    SimpleHost::new(HOST)
        .migration("book_entries", ENTRIES, ENTRIES)
        .handle(TOOL, move |tx, call| {
            let log = started_log.clone();
            Box::pin(async move {
                if let Some(log) = log {
                    let mut file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(log)?;
                    writeln!(file, "{}", call.operation_id)?;
                }
                tokio::time::sleep(pause).await;
                let cents = call.args["cents"].as_i64().ok_or("no cents")?;
                sqlx::query(
                    "INSERT INTO book_entries (operation_id, ledger, cents) VALUES ($1, $2, $3)",
                )
                .bind(call.operation_id.as_str())
                .bind(&call.target.target.id)
                .bind(cents)
                .execute(tx)
                .await?;
                Ok(format!("Booked {cents} cents."))
            })
        })
        .category(|_, _| Box::pin(async { Ok(Some(CATEGORY.to_owned())) }))
}

/// The host's tools: `book_entry` with a positive integer `cents`.
pub fn registry() -> ToolRegistry {
    let schema = json!({"type": "object", "required": ["cents"], "additionalProperties": false,
        "properties": {"cents": {"type": "integer", "minimum": 1}}});
    let mut tools = ToolRegistry::new();
    tools
        .register(
            ToolSpec::new(TOOL, "Book an entry.", ToolMode::Deferred, schema)
                .with_summary(|args, _| format!("Book {} cents", args["cents"])),
        )
        .expect("registers");
    tools
}

/// The book host's engine on `store` (its migration run, its catalog recorded), with
/// its agent allowed.
pub async fn engine(store: Store, host: SimpleHost, settings: JobSettings) -> Engine {
    let engine = Engine::open(store.clone(), Arc::new(registry()), Arc::new(host))
        .await
        .expect("the book engine opens")
        .with_job_settings(settings);
    let mut conn = store.read_connection().await.expect("a connection");
    agents::upsert(
        &mut conn,
        AGENT,
        &AgentPolicy::new([CATEGORY]),
        OffsetDateTime::now_utc(),
    )
    .await
    .expect("the agent");
    engine
}

/// An engine of a process that has none of the book's code (a reviewer's): no tools,
/// another host.
pub async fn elsewhere(store: Store) -> Engine {
    Engine::open(
        store,
        Arc::new(ToolRegistry::new()),
        Arc::new(SimpleHost::new("reviewer")),
    )
    .await
    .expect("the reviewer's engine opens")
}

/// A wake of the bookkeeper proposing one entry per amount on ledger `ledger`; the
/// set's id.
pub async fn propose(engine: &Engine, ledger: &str, run_key: &str, amounts: &[i64]) -> Uuid {
    let calls = amounts
        .iter()
        .map(|cents| (TOOL, json!({ "cents": cents })))
        .collect::<Vec<_>>();
    let request = WakeRequest::new(
        AGENT,
        Target::new("ledger", ledger),
        run_key,
        crate::tool_calls(&calls),
    );
    let outcome = engine
        .wakes()
        .wake(request, OffsetDateTime::now_utc())
        .await
        .expect("the wake");
    outcome.change_set.expect("queued").id
}

/// The entries booked for each operation id: `(operation_id, count)`.
pub async fn booked(store: &Store) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT operation_id, COUNT(*) FROM book_entries GROUP BY operation_id ORDER BY operation_id",
    )
    .fetch_all(store.read_connection().await.expect("a read connection").connection())
    .await
    .expect("the entries")
}
