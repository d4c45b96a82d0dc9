//! An executor process for the execution ledger's crash tests: it runs the jobs of the
//! example HTTP host (`tests/external.rs`) until it is killed, or, with `transactional`,
//! the worker of the book host (`tests/book.rs`), whose handler runs in the claim's
//! transaction.
//!
//! With `confirm`, it is a reviewer instead: one task per pending set of the book host
//! confirms the set's items one by one, all at once (on SQLite they share commits), and
//! appends `SET INDEX` to CONFIRMED_LOG once a confirmation was answered.
//!
//! `ledger-executor DATABASE_URL RECEIVER_URL IDEMPOTENT(0|1) RECONCILES(0|1) LEASE_MS`
//! `ledger-executor transactional DATABASE_URL STARTED_LOG PAUSE_MS`
//! `ledger-executor confirm DATABASE_URL CONFIRMED_LOG`

use assent_confirm::ItemRef;
use assent_confirm::JobSettings;
use assent_store::Store;
use assent_tests::book;
use assent_tests::external::{self, HttpHost};
use time::{Duration, OffsetDateTime};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, url, confirmed_log] = args.as_slice()
        && mode == "confirm"
    {
        return confirm_concurrently(url, confirmed_log.into()).await;
    }
    if let [mode, url, started_log, pause_ms] = args.as_slice()
        && mode == "transactional"
    {
        let pause_ms: u64 = pause_ms.parse().map_err(|e| format!("PAUSE_MS: {e}"))?;
        let store = Store::open(url).await.map_err(|e| e.to_string())?;
        let host = book::host(
            std::time::Duration::from_millis(pause_ms),
            Some(started_log.into()),
        );
        let engine = book::engine(store, host, JobSettings::default()).await;
        return engine
            .worker()
            .poll_interval(std::time::Duration::from_millis(5))
            .run(std::future::pending())
            .await
            .map_err(|e| e.to_string());
    }
    let [url, receiver, idempotent, reconciles, lease_ms] = args.as_slice() else {
        return Err(
            "usage: ledger-executor DATABASE_URL RECEIVER_URL IDEMPOTENT RECONCILES LEASE_MS"
                .to_owned(),
        );
    };
    let lease_ms: i64 = lease_ms.parse().map_err(|e| format!("LEASE_MS: {e}"))?;
    let store = Store::open(url).await.map_err(|e| e.to_string())?;
    let settings = JobSettings {
        lease: Duration::milliseconds(lease_ms),
        attempt_limit: 100,
        backoff: Duration::milliseconds(10),
        max_backoff: Duration::milliseconds(50),
    };
    let host = HttpHost::new(receiver, idempotent == "1", reconciles == "1");
    let engine = external::engine(store, host, settings).await;
    loop {
        engine
            .run_due_jobs(OffsetDateTime::now_utc())
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn confirm_concurrently(url: &str, confirmed_log: std::path::PathBuf) -> Result<(), String> {
    use std::io::Write;
    let store = Store::open(url).await.map_err(|e| e.to_string())?;
    let reviewer = book::elsewhere(store.clone()).await;
    let mut conn = store.read_connection().await.map_err(|e| e.to_string())?;
    let sets = assent_store::change_sets::pending(&mut conn, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    drop(conn);
    let log = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&confirmed_log)
            .map_err(|e| e.to_string())?,
    ));
    let tasks: Vec<_> = sets
        .into_iter()
        .map(|set| {
            let (reviewer, log) = (reviewer.clone(), log.clone());
            tokio::spawn(async move {
                for (index, item) in set.items.iter().enumerate() {
                    if item.status != assent_domain::ChangeItemStatus::Pending {
                        continue;
                    }
                    reviewer
                        .confirmations()
                        .by("reviewer")
                        .confirm_item(ItemRef::new(set.id, index), OffsetDateTime::now_utc())
                        .await
                        .map_err(|e| e.to_string())?;
                    let mut log = log.lock().map_err(|e| e.to_string())?;
                    writeln!(log, "{} {index}", set.id).map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}
