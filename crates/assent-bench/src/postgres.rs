//! PostgreSQL writers side by side: confirmations per second with 1, 2, 4 and 8
//! concurrent writers, each confirming the items of its own change set on its own
//! target, and wakes per second with as many writers, each waking on its own target
//! with one immediate call, through a host whose handler takes a fixed 10 ms inside
//! the transaction (so the lock granularity shows even on 2 cores: writers that queue
//! behind one lock stay at one writer's rate, writers that lock only their target add
//! up).
//!
//! Runs on a fresh database created beside the one `ASSENT_TEST_POSTGRES_URL` names
//! (see `.ci/postgres.sh`) and dropped afterwards; skipped when the variable is unset.

use anyhow::{Context, ensure};
use assent_changeset::{ToolArguments, ToolCall};
use assent_confirm::{Engine, HostError, SimpleHost, WakeRequest};
use assent_domain::Target;
use assent_store::{Store, StoreOptions, agents};
use assent_tools::{AgentPolicy, BoxFuture, ToolInvocation, ToolMode, ToolRegistry, ToolSpec};
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

/// Wakes per second at one number of writers.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeWriters {
    pub writers: usize,
    pub wakes: usize,
    pub wakes_per_second: f64,
    /// `wakes_per_second` ÷ one writer's.
    pub ratio_to_one_writer: f64,
}

/// The PostgreSQL figures.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgresResult {
    pub handler_ms: u64,
    pub items_per_writer: usize,
    pub writers: Vec<Writers>,
    /// Concurrent wakes on distinct targets, each with one immediate call.
    pub wake_writers: Vec<WakeWriters>,
}

/// A host with two tools, `bump` (deferred) and `bump_now` (immediate), that take
/// [`HANDLER`] and then count on their target.
fn host() -> SimpleHost {
    const COUNTERS: &str = "CREATE TABLE counters (id TEXT PRIMARY KEY, n BIGINT NOT NULL)";
    SimpleHost::new("pgbench")
        .migration("counters", COUNTERS, COUNTERS)
        .handle("bump", bump)
        .handle("bump_now", bump)
        .category(|_, _| Box::pin(async { Ok(Some("bench".to_owned())) }))
}

/// Waits [`HANDLER`], then counts one more on the call's target.
fn bump<'a>(
    tx: &'a mut assent_store::Connection,
    call: &'a ToolInvocation,
) -> BoxFuture<'a, Result<&'static str, HostError>> {
    Box::pin(async move {
        tokio::time::sleep(HANDLER).await;
        sqlx::query("UPDATE counters SET n = n + 1 WHERE id = $1")
            .bind(&call.target.target.id)
            .execute(tx)
            .await?;
        Ok("Bumped.")
    })
}

/// Makes counter `id`, at zero.
async fn counter(conn: &mut assent_store::Connection, id: &str) -> anyhow::Result<()> {
    sqlx::query("INSERT INTO counters (id, n) VALUES ($1, 0)")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Sum of the counters whose id starts with `prefix`.
async fn counted(conn: &mut assent_store::Connection, prefix: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM counters WHERE id LIKE $1",
    )
    .bind(format!("{prefix}%"))
    .fetch_one(conn)
    .await?)
}

/// `writers` concurrent writers, each waking `wakes` times on its own counter with one
/// immediate `bump_now` call.
async fn wake_writers(
    engine: &Engine,
    conn: &mut assent_store::Connection,
    writers: usize,
    wakes: usize,
) -> anyhow::Result<(usize, std::time::Duration)> {
    let now = datetime!(2026-03-01 12:00 UTC);
    let prefix = format!("w-{writers}-");
    for w in 0..writers {
        counter(conn, &format!("{prefix}{w}")).await?;
    }
    let start = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for w in 0..writers {
        let service = engine.wakes();
        let target = Target::new("counter", format!("{prefix}{w}"));
        running.spawn(async move {
            for n in 0..wakes {
                let call = ToolCall::new(
                    format!("call_{n}"),
                    "bump_now",
                    ToolArguments::Text(json!({ "n": n }).to_string()),
                );
                let run = format!("wake-{w}-{n}");
                let request = WakeRequest::new(AGENT, target.clone(), run, vec![call]);
                service.wake(request, now).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    let elapsed = start.elapsed();
    let total = writers * wakes;
    let bumped = counted(conn, &prefix).await?;
    ensure!(
        bumped == total as i64,
        "{total} wakes bumped {bumped} times"
    );
    Ok((total, elapsed))
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
    let store = Store::open_with({
        let mut options = StoreOptions::new(url);
        options.device_id = "bench".into();
        options.max_connections = 24;
        options
    })
    .await?;
    let mut tools = ToolRegistry::new();
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    tools.register(ToolSpec::new(
        "bump",
        "Count one more.",
        ToolMode::Deferred,
        schema.clone(),
    ))?;
    tools.register(ToolSpec::new(
        "bump_now",
        "Count one more, at once.",
        ToolMode::Immediate,
        schema,
    ))?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host())).await?;
    let mut conn = store.read_connection().await?;
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new(["bench"]), now).await?;
    let mut results: Vec<Writers> = Vec::new();
    for writers in WRITERS {
        let mut sets = Vec::with_capacity(writers);
        for w in 0..writers {
            let id = format!("c-{writers}-{w}");
            counter(&mut conn, &id).await?;
            let calls = (0..items)
                .map(|n| {
                    ToolCall::new(
                        format!("call_{n}"),
                        "bump",
                        ToolArguments::Text(json!({ "n": n }).to_string()),
                    )
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
                    confirmations
                        .confirm_item(assent_confirm::ItemRef::new(set, index), now)
                        .await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = running.join_next().await {
            done??;
        }
        let elapsed = start.elapsed();
        let bumped = counted(&mut conn, &format!("c-{writers}-")).await?;
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
    let mut wakes: Vec<WakeWriters> = Vec::new();
    for writers in WRITERS {
        let (total, elapsed) = wake_writers(&engine, &mut conn, writers, items).await?;
        let per_second = total as f64 / elapsed.as_secs_f64();
        let one = wakes.first().map_or(per_second, |r| r.wakes_per_second);
        wakes.push(WakeWriters {
            writers,
            wakes: total,
            wakes_per_second: per_second,
            ratio_to_one_writer: per_second / one,
        });
    }
    drop(conn);
    store.close().await;
    Ok(PostgresResult {
        handler_ms: HANDLER.as_millis() as u64,
        items_per_writer: items,
        writers: results,
        wake_writers: wakes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement runs end to end (each round checks its counters) on the tests'
    /// server; skipped without one, like every PostgreSQL test.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_and_wakes_are_measured_on_postgres() {
        let Ok(url) = std::env::var(URL_VAR) else {
            eprintln!("{URL_VAR} is not set: skipped");
            return;
        };
        let result = writers(&url, 2).await.expect("measured");
        let counts = |w: &[usize]| w.to_vec();
        let confirmed: Vec<usize> = result.writers.iter().map(|w| w.writers).collect();
        let woke: Vec<usize> = result.wake_writers.iter().map(|w| w.writers).collect();
        assert_eq!(confirmed, counts(&WRITERS));
        assert_eq!(woke, counts(&WRITERS));
        assert!(result.wake_writers.iter().all(|w| w.wakes == w.writers * 2));
        assert!((result.wake_writers[0].ratio_to_one_writer - 1.0).abs() < f64::EPSILON);
    }
}
