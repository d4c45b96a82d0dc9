//! An executor process for the execution ledger's crash tests: it runs the jobs of the
//! example HTTP host (`tests/external.rs`) until it is killed.
//!
//! `ledger-executor DATABASE_URL RECEIVER_URL IDEMPOTENT(0|1) RECONCILES(0|1) LEASE_MS`

use assent_confirm::JobSettings;
use assent_store::Store;
use assent_tests::external::{self, HttpHost};
use time::{Duration, OffsetDateTime};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
