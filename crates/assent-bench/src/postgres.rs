//! PostgreSQL writers side by side: confirmations per second with 1, 2, 4 and 8
//! concurrent writers, each confirming the items of its own change set on its own
//! target, through a host whose handler takes a fixed 10 ms (so the lock granularity
//! shows even on 2 cores: writers that queue behind one lock stay at one writer's
//! rate, writers that lock only their target add up).
//!
//! Runs on a fresh database created beside the one `ASSENT_TEST_POSTGRES_URL` names
//! (see `.ci/postgres.sh`) and dropped afterwards; skipped when the variable is unset.

use anyhow::{Context, ensure};
use assent_changeset::{ToolArguments, ToolCall};
use assent_confirm::{Engine, SimpleHost, WakeRequest};
use assent_domain::Target;
use assent_store::{Store, StoreOptions, agents};
use assent_tools::{AgentPolicy, ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use sqlx::Connection;
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::macros::datetime;

/// The variable naming the server (the tests' own).
pub const URL_VAR: &str = "ASSENT_TEST_POSTGRES_URL";
/// What the handler takes.
pub const HANDLER: Duration = Duration::from_millis(10);
const WRITERS: [usize; 4] = [1, 2, 4, 8];
const AGENT: &str = "bench-agent";

/// Confirmations per second at one number of writers.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Writers {
    pub writers: usize,
    pub confirmations: usize,
    pub confirmations_per_second: f64,
    /// `confirmations_per_second` ÷ one writer's.
    pub ratio_to_one_writer: f64,
}

/// The PostgreSQL figures.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgresResult {
    pub handler_ms: u64,
    pub items_per_writer: usize,
    pub writers: Vec<Writers>,
}

/// A host with one tool, `bump`, that takes [`HANDLER`] and then counts on its target.
fn host() -> SimpleHost {
    const COUNTERS: &str = "CREATE TABLE counters (id TEXT PRIMARY KEY, n BIGINT NOT NULL)";
    SimpleHost::new("pgbench")
        .migration("counters", COUNTERS, COUNTERS)
        .handle("bump", |tx, call| {
            Box::pin(async move {
                tokio::time::sleep(HANDLER).await;
                sqlx::query("UPDATE counters SET n = n + 1 WHERE id = $1")
                    .bind(&call.target.target.id)
                    .execute(tx)
                    .await?;
                Ok("Bumped.")
            })
        })
        .category(|_, _| Box::pin(async { Ok(Some("bench".to_owned())) }))
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> anyhow::Result<String> {
    let (server, rest) = url
        .rsplit_once('/')
        .context("a PostgreSQL URL names a database")?;
    let query = rest.split_once('?').map(|(_, q)| format!("?{q}"));
    Ok(format!("{server}/{database}{}", query.unwrap_or_default()))
}

/// Measures [`WRITERS`] writers with `items` confirmations each, on the server at `url`.
pub async fn writers(url: &str, items: usize) -> anyhow::Result<PostgresResult> {
    sqlx::any::install_default_drivers();
    let database = format!("assent_bench_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::AnyConnection::connect(url).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await?;
    let result = measure(&with_database(url, &database)?, items).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    result
}

async fn measure(url: &str, items: usize) -> anyhow::Result<PostgresResult> {
    let now = datetime!(2026-03-01 12:00 UTC);
    let store = Store::open_with(StoreOptions {
        device_id: "bench".into(),
        max_connections: 24,
        ..StoreOptions::new(url)
    })
    .await?;
    let mut tools = ToolRegistry::new();
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    tools.register(ToolSpec::new(
        "bump",
        "Count one more.",
        ToolMode::Deferred,
        schema,
    ))?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host())).await?;
    let mut conn = store.pool().acquire().await?;
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new(["bench"]), now).await?;
    let mut results: Vec<Writers> = Vec::new();
    for writers in WRITERS {
        let mut sets = Vec::with_capacity(writers);
        for w in 0..writers {
            let id = format!("c-{writers}-{w}");
            sqlx::query("INSERT INTO counters (id, n) VALUES ($1, 0)")
                .bind(&id)
                .execute(&mut *conn)
                .await?;
            let calls = (0..items)
                .map(|n| ToolCall {
                    id: format!("call_{n}"),
                    name: "bump".into(),
                    arguments: ToolArguments::Text(json!({ "n": n }).to_string()),
                })
                .collect();
            let request = WakeRequest::new(
                AGENT,
                Target::new("counter", id),
                format!("run-{writers}-{w}"),
                calls,
            );
            let wake = engine.wakes().wake(request, now).await?;
            let set = wake.change_set.context("the wake queued nothing")?;
            ensure!(
                set.items.len() == items,
                "the wake queued {} items",
                set.items.len()
            );
            sets.push(set.id);
        }
        let start = Instant::now();
        let mut running = tokio::task::JoinSet::new();
        for set in sets {
            let confirmations = engine.confirmations();
            running.spawn(async move {
                for index in 0..items {
                    confirmations.confirm_item(set, index, now).await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = running.join_next().await {
            done??;
        }
        let elapsed = start.elapsed();
        let bumped: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM counters WHERE id LIKE $1",
        )
        .bind(format!("c-{writers}-%"))
        .fetch_one(&mut *conn)
        .await?;
        let confirmations = writers * items;
        ensure!(
            bumped == confirmations as i64,
            "{confirmations} confirmations bumped {bumped} times"
        );
        let per_second = confirmations as f64 / elapsed.as_secs_f64();
        let one = results
            .first()
            .map_or(per_second, |r| r.confirmations_per_second);
        results.push(Writers {
            writers,
            confirmations,
            confirmations_per_second: per_second,
            ratio_to_one_writer: per_second / one,
        });
    }
    drop(conn);
    store.close().await;
    Ok(PostgresResult {
        handler_ms: HANDLER.as_millis() as u64,
        items_per_writer: items,
        writers: results,
    })
}
