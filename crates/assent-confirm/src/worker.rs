//! A service's side of the engine in one call: [`Engine::worker`] runs what its host
//! owes the people deciding elsewhere, until the service stops.
//!
//! A person confirms an item of the service's host from the CLI, the review page, the
//! API, another device or a delegated answer, in a process that has none of the
//! host's code: the decision and a job are committed there, and the host's worker
//! runs the job here (a transactional tool's handler in the claim's own transaction,
//! an external tool's with no lock held; see the `ledger` module). The worker also
//! expires stale change sets and, with the `webhooks` feature, delivers webhook
//! events.

use crate::{ConfirmError, DEFAULT_EXPIRY_TTL, Engine, JobRun};
use std::future::Future;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// How often a worker looks for due jobs by default (one indexed read when idle).
pub const DEFAULT_WORKER_POLL: Duration = Duration::from_millis(200);

/// How often a worker expires stale change sets.
const EXPIRE_EVERY: Duration = Duration::from_secs(60);

/// After an error (the database away, say) a worker waits this long before it looks
/// again, so a lasting failure is logged every few seconds, not on every poll.
const AFTER_ERROR: Duration = Duration::from_secs(2);

/// Runs a host's jobs, expiry and (feature `webhooks`) webhook deliveries: see the
/// module documentation. Made by [`Engine::worker`].
#[derive(Clone)]
pub struct Worker {
    engine: Engine,
    poll_interval: Duration,
    expiry_ttl: Option<time::Duration>,
    #[cfg(feature = "webhooks")]
    webhooks: Option<assent_webhooks::SenderConfig>,
}

impl Engine {
    /// The worker of this engine's host: jobs every [`DEFAULT_WORKER_POLL`], change
    /// sets expired after [`DEFAULT_EXPIRY_TTL`], no webhooks.
    pub fn worker(&self) -> Worker {
        Worker {
            engine: self.clone(),
            poll_interval: DEFAULT_WORKER_POLL,
            expiry_ttl: Some(DEFAULT_EXPIRY_TTL),
            #[cfg(feature = "webhooks")]
            webhooks: None,
        }
    }
}

impl Worker {
    /// Looks for due jobs every `interval` (a decision made elsewhere is applied within
    /// about this long).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Expires open change sets older than `ttl`; `None` expires nothing (another
    /// process, such as `assent serve`, does it).
    pub fn expire_after(mut self, ttl: Option<time::Duration>) -> Self {
        self.expiry_ttl = ttl;
        self
    }

    /// Also delivers webhook events, with `config`.
    #[cfg(feature = "webhooks")]
    pub fn webhooks(mut self, config: assent_webhooks::SenderConfig) -> Self {
        self.webhooks = Some(config);
        self
    }

    /// One round: the host's due jobs, then (when `expire` and a ttl is set) expiry.
    pub async fn run_once(
        &self,
        now: OffsetDateTime,
        expire: bool,
    ) -> Result<JobRun, ConfirmError> {
        let run = self.engine.run_due_jobs(now).await?;
        if let (true, Some(ttl)) = (expire, self.expiry_ttl) {
            self.engine.confirmations().expire(now, ttl).await?;
        }
        Ok(run)
    }

    /// Runs until `shutdown` completes. Errors are logged and the worker goes on (a
    /// database that is briefly away does not stop the service's side); a job cut off
    /// by the shutdown is found again by the next worker (a transactional one was
    /// never committed, an external one is reconciled after its lease).
    ///
    /// ```
    /// # use assent::prelude::*;
    /// # use serde_json::json;
    /// # use std::sync::Arc;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// # let host = SimpleHost::new("notes")
    /// #     .handle("set_body", |_tx, call| Box::pin(async move {
    /// #         Ok(format!("Body set to {}.", call.args["body"].as_str().unwrap_or_default()))
    /// #     }))
    /// #     .category(|_tx, _note| Box::pin(async { Ok(Some("notes".to_owned())) }));
    /// # let mut tools = ToolRegistry::new();
    /// # let schema = json!({"type": "object"});
    /// # tools.register(ToolSpec::new("set_body", "Set a note's body.", ToolMode::Deferred, schema))?;
    /// # let store = Store::open("sqlite::memory:").await?;
    /// # let engine = Engine::open(store, Arc::new(tools), Arc::new(host)).await?;
    /// # let now = OffsetDateTime::now_utc();
    /// # engine.set_categories("scribe", &["notes".to_owned()], now).await?;
    /// // The service's side runs beside the agent until the service stops: it applies what
    /// // people confirm elsewhere (the CLI, the review page) and expires stale sets.
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let worker = tokio::spawn(engine.worker().run(async {
    ///     stopped.await.unwrap_or_default();
    /// }));
    /// // … the service serves …
    /// let _ = stop.send(());
    /// worker.await??;
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ConfirmError> {
        #[cfg(feature = "webhooks")]
        let sender = match &self.webhooks {
            Some(config) => Some(
                assent_webhooks::Sender::new(self.engine.store().clone(), config.clone())
                    .map_err(|e| ConfirmError::InvalidWorker(format!("webhook sender: {e}")))?,
            ),
            None => None,
        };
        let stop = crate::CancellationToken::new();
        let jobs = self.run_jobs(stop.clone());
        #[cfg(feature = "webhooks")]
        let webhooks = async {
            if let Some(sender) = sender {
                sender.run(stop.cancelled()).await;
            }
        };
        #[cfg(not(feature = "webhooks"))]
        let webhooks = async {};
        let stopper = async {
            shutdown.await;
            stop.cancel();
        };
        tokio::join!(stopper, jobs, webhooks);
        Ok(())
    }

    #[tracing::instrument(name = "worker", skip_all, fields(host = self.engine.host().name()))]
    async fn run_jobs(&self, stop: crate::CancellationToken) {
        tracing::info!(poll = ?self.poll_interval, "worker running");
        let mut expired_at: Option<Instant> = None;
        while !stop.is_cancelled() {
            let expire = expired_at.is_none_or(|at| at.elapsed() >= EXPIRE_EVERY);
            if expire {
                expired_at = Some(Instant::now());
            }
            let pause = match self.run_once(self.engine.now(), expire).await {
                Ok(run) => {
                    if run.claimed + run.in_doubt + run.rerun > 0 {
                        tracing::info!(?run, "worker round");
                    }
                    self.poll_interval
                }
                Err(error) => {
                    tracing::error!(%error, "worker round failed; trying again");
                    AFTER_ERROR
                }
            };
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        tracing::info!("worker stopped");
    }
}
