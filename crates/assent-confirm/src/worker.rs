//! A service's side of the engine in one call: [`Engine::worker`] runs what its host
//! owes the people deciding elsewhere, until the service stops.
//!
//! A person confirms an item of the service's host from the CLI, the review page, the
//! API, another device or a delegated answer, in a process that has none of the
//! host's code: the decision and a job are committed there, and the host's worker
//! runs the job here (a transactional tool's handler in the claim's own transaction,
//! an external tool's with no lock held; see the `ledger` module). The worker also
//! expires stale change sets when the engine was opened with an [`Expiry`] that says
//! so and, with the `webhooks` feature, delivers webhook events.
//!
//! A worker is quiet: its rounds, an applied job and an expiry that found nothing are
//! logged at DEBUG; INFO is for what a person should see (sets expired, a job in
//! doubt, a failure).

use crate::{ConfirmError, Engine, JobRun};
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

/// What becomes of change sets nobody decides: a choice made when the engine is
/// opened ([`Engine::with_expiry`]), never a silent default. An engine expires
/// nothing unless told to; the CLI (`assent expire`, `assent serve`'s worker) chooses
/// `Expiry::After(DEFAULT_EXPIRY_TTL)`, seven days.
///
/// ```
/// use assent_confirm::{DEFAULT_EXPIRY_TTL, Expiry};
///
/// assert_eq!(Expiry::default(), Expiry::Never);
/// assert_eq!(Expiry::After(DEFAULT_EXPIRY_TTL).ttl(), Some(time::Duration::days(7)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expiry {
    /// Open sets stay open until a person decides them (the default).
    #[default]
    Never,
    /// The worker expires open sets created longer ago than this: they leave the
    /// pending view, their items undecided.
    After(time::Duration),
}

impl Expiry {
    /// How old an open set gets before it expires; `None` for [`Expiry::Never`].
    pub fn ttl(self) -> Option<time::Duration> {
        match self {
            Self::Never => None,
            Self::After(ttl) => Some(ttl),
        }
    }
}

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
    /// This engine, expiring (or not) the change sets nobody decides as `expiry` says
    /// ([`Expiry::Never`] by default): what its [`Worker`] does.
    #[must_use]
    pub fn with_expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    /// What becomes of change sets nobody decides ([`Engine::with_expiry`]).
    pub fn expiry(&self) -> Expiry {
        self.expiry
    }

    /// The worker of this engine's host: jobs every [`DEFAULT_WORKER_POLL`], change
    /// sets expired as the engine's [`Expiry`] says (never, unless chosen), no
    /// webhooks.
    pub fn worker(&self) -> Worker {
        Worker {
            engine: self.clone(),
            poll_interval: DEFAULT_WORKER_POLL,
            expiry_ttl: self.expiry.ttl(),
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
    /// process, such as `assent serve`, does it). Overrides the engine's [`Expiry`]
    /// for this worker.
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
        tracing::info!(poll = ?self.poll_interval, expire_after = ?self.expiry_ttl, "worker running");
        let mut expired_at: Option<Instant> = None;
        while !stop.is_cancelled() {
            let expire = expired_at.is_none_or(|at| at.elapsed() >= EXPIRE_EVERY);
            if expire {
                expired_at = Some(Instant::now());
            }
            let pause = match self.run_once(self.engine.now(), expire).await {
                Ok(run) => {
                    if run.claimed + run.in_doubt + run.rerun > 0 {
                        tracing::debug!(?run, "worker round");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FixedClock;
    use crate::testing::{queue_sends, send_engine_with_agent};
    use assent_domain::ChangeSetStatus;
    use std::sync::Arc;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    /// The status of set `id` after a worker round of `engine` on its clock.
    async fn after_a_round(engine: &Engine, id: uuid::Uuid) -> ChangeSetStatus {
        engine
            .worker()
            .run_once(engine.now(), true)
            .await
            .expect("a round");
        engine
            .change_set(id)
            .await
            .expect("read")
            .expect("a set")
            .status
    }

    #[tokio::test]
    async fn an_engine_expires_nothing_unless_its_expiry_says_so() {
        let engine = send_engine_with_agent(T0).await;
        assert_eq!(engine.expiry(), Expiry::Never, "never, unless chosen");
        let id = queue_sends(&engine, "api", "run-1", 1, T0).await;
        let month_later = engine
            .clone()
            .with_clock(Arc::new(FixedClock(T0 + time::Duration::days(30))));
        assert_eq!(
            after_a_round(&month_later, id).await,
            ChangeSetStatus::Pending,
            "Expiry::Never keeps a set past seven days"
        );

        let week = month_later.with_expiry(Expiry::After(crate::DEFAULT_EXPIRY_TTL));
        assert_eq!(after_a_round(&week, id).await, ChangeSetStatus::Expired);
    }

    #[tokio::test]
    async fn a_set_younger_than_the_chosen_ttl_stays_open() {
        let engine = send_engine_with_agent(T0)
            .await
            .with_expiry(Expiry::After(time::Duration::days(2)))
            .with_clock(Arc::new(FixedClock(T0 + time::Duration::days(1))));
        let id = queue_sends(&engine, "api", "run-1", 1, T0).await;
        assert_eq!(after_a_round(&engine, id).await, ChangeSetStatus::Pending);
        let worker = engine.worker().expire_after(None);
        let later = T0 + time::Duration::days(3);
        worker.run_once(later, true).await.expect("a round");
        let status = engine
            .change_set(id)
            .await
            .expect("read")
            .expect("a set")
            .status;
        assert_eq!(
            status,
            ChangeSetStatus::Pending,
            "the worker's own override wins"
        );
    }
}
