//! Assent's engine services, the imperative shell around the pure core:
//!
//! - [`WakeService`]: one agent wake — plans its tool calls, runs the immediate and
//!   local ones through the audited executor, and persists the deferred ones as a
//!   change set, all in one write transaction.
//! - [`ConfirmationService`]: a person's decisions — confirm (exactly once, through the
//!   policy-enforcing executor, re-validated against the current state), edit and
//!   confirm, reject with a reason, defer, confirm all, dismiss, expire; and what
//!   became of a set ([`ConfirmationService::outcome`], [`SetOutcome`]), awaited by
//!   the agent with [`ConfirmationService::wait_outcome`], woken by the change feed.
//! - [`render_history`]: decisions rendered as the `## Recent User Decisions` section
//!   of the agent's next prompt.
//!
//! - [`Scheduler`]: where the [`ConfirmationStrategy`] of a queued call is chosen —
//!   defer to the change set (interactive), ask the parent over the
//!   [`ConfirmationBus`] (sub-agent), auto-approve (a standing grant), or refuse
//!   (headless) — and its outcome applied through the confirmation service.
//!
//! - The execution ledger ([`Engine::run_due_jobs`]): a confirmed item of a tool whose
//!   effect lies outside the database ([`Effect::External`]) becomes a job that an
//!   executor of its host claims, runs through the host's [`ExternalHandler`] with no
//!   lock held, and records: exactly once, or visibly in doubt.
//!
//! - [`AuditedExecutor`]: every path that runs a tool goes through it (policy again,
//!   audit before and after, the handler in a savepoint).
//!
//! - [`agents`]: an agent's settings (categories, rules, shadow rules, holds, quorums,
//!   idempotent tools, a suggestion applied) changed by [`Engine`] methods such as
//!   [`Engine::change_rule`], the same way and in one transaction whichever door (CLI,
//!   API, a demo) it came through; and the reads a door or host makes of them.
//!
//! - [`records`]: the sets and what became of them as every door reads them (a set with
//!   its decisions, jobs and quorum in one [`SetRecord`], the decision history, the
//!   ledger's jobs), through [`Engine`] methods such as [`Engine::set_records`].
//! - [`admin`]: the operator's settings and the device's exchanges (API tokens,
//!   webhook subscriptions and deliveries, the Slack app and its users, device sync,
//!   the sync outbox), through the operator's handle [`Engine::admin`] ([`Admin`]):
//!   [`Admin::issue_token`], [`Admin::import_sync_batch`] and the like, so no door
//!   writes or reads those tables itself.
//! - [`history`]: the audit trail, the consent chain's head, the proof (`assent audit
//!   verify`), read through [`Admin`] ([`Admin::verify_proof`]) the same way by every
//!   door, and the change feed ([`Engine::feed_since`]). [`grants`]: standing grants
//!   listed and revoked ([`Admin::revoke_grant`]). [`client_sessions`]: the MCP
//!   gateway's client sessions and the calls each made, one transaction each.
//!
//! A service plugs in through [`Host`]: its targets, tools, state and tables; a few
//! closures make one with [`SimpleHost`].
//!
//! A host with one immediate tool: the agent's call runs at once, audited, and the agent
//! reads its result.
//!
//! ```
//! use assent_changeset::parse_tool_calls;
//! use assent_confirm::{Engine, SimpleHost, WakeRequest};
//! use assent_domain::{OffsetDateTime, Target};
//! use assent_store::Store;
//! use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! async fn wake() -> Result<(), Box<dyn std::error::Error>> {
//!     let host = SimpleHost::new("ops")
//!         .handle("ping", |_tx, _call| Box::pin(async { Ok("pong") }))
//!         .category(|_tx, _target| Box::pin(async { Ok(Some("ops".to_owned())) }));
//!     let mut tools = ToolRegistry::new();
//!     let schema = json!({"type": "object"});
//!     tools.register(ToolSpec::new("ping", "Answer pong.", ToolMode::Immediate, schema))?;
//!     let store = Store::open("sqlite::memory:").await?;
//!     let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
//!     let now = OffsetDateTime::now_utc();
//!     engine.set_categories("ops-agent", &["ops".to_owned()], now).await?;
//!
//!     let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
//!         "name": "ping", "input": {}}]))?;
//!     let request = WakeRequest::new("ops-agent", Target::new("service", "api"), "run-1", calls);
//!     let wake = engine.wakes().wake(request, now).await?;
//!     assert_eq!(wake.responses[0].content, "pong");
//!     assert!(wake.change_set.is_none(), "nothing waits for a person");
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(wake())
//! }
//! ```

pub use admin::Admin;
pub use agents::{AgentSettings, RuleChange};
/// Re-exported from `assent-changeset`, where the prompt texts are worded.
pub use assent_changeset::{
    HISTORY_HEADING, MAX_HISTORY_ENTRIES, MAX_HISTORY_TOKENS, render_history,
};
/// Re-exported from `assent-domain`: what a decision names.
pub use assent_domain::ItemRef;
pub use bus::{
    AgentBus, BusConfig, ConfirmationBus, ConfirmationOutcome, ConfirmationRequest,
    ConfirmationResolution, ConfirmationResponse, DEFAULT_WAIT_TIMEOUT, NOBODY_TO_ASK,
    PARENT_STOPPED_LISTENING, Subscription, ToolCallRequest,
};
pub use cancel::CancellationToken;
pub use catalog::recorded_spec;
pub use confirmation::{
    ConfirmAllItem, ConfirmAllResult, ConfirmOutcome, ConfirmationService, DEFAULT_EXPIRY_TTL,
    ItemResult,
};
pub use error::{ConfirmError, ConflictKind};
pub use executor::{AuditedExecutor, ExecutionOutcome, ExecutionRequest};
pub use host::{
    Decided, Effect, ExternalCall, ExternalError, ExternalHandler, ForeignTargets, Host,
    LoadedState, LocalCall, Reconciliation,
};
pub use inputs::{Clock, FixedClock, IdSource, RandomIds, SequentialIds, SystemClock};
pub use ledger::{APPROVAL_CHANGED, HAPPENED_BY_PERSON, JobRun, JobSettings, Resolution};
pub use outcome::{
    CallState, DecisionOutcome, ItemOutcome, OUTCOME_POLL_INTERVAL, RunOutcome, SetOutcome,
};
pub use records::{RecentDecisions, SetDetail, SetRecord};
pub use scheduler::{
    CallResult, DEFAULT_EXECUTION_TIMEOUT, MAX_PROMPTS_PER_CALL, ScheduledCall, ScheduledWake,
    Scheduler, Session,
};
pub use session::{SESSION_THREAD_PREFIX, session_of, session_thread};
pub use simple::{HostError, IntoToolOutcome, SimpleHost};
pub use strategy::{
    AutoApprove, ConfirmationDetails, ConfirmationStrategy, DeferToChangeSet, Delegated,
    NonInteractive,
};
pub use wake::{PendingWake, ToolResponse, WakeOutcome, WakeRequest, WakeService};
pub use why::Why;
pub use worker::{DEFAULT_WORKER_POLL, Expiry, Worker};

use assent_store::{Store, host_tools};
use assent_tools::ToolRegistry;
use std::sync::Arc;

/// What both services share: the store, the tool catalog and the host.
#[derive(Clone)]
pub struct Engine {
    store: Store,
    registry: Arc<ToolRegistry>,
    host: Arc<dyn Host>,
    jobs: JobSettings,
    inputs: inputs::Inputs,
    /// What this process reads of other hosts' targets ([`ForeignTargets`]).
    foreign: Option<Arc<dyn ForeignTargets>>,
    /// What becomes of the sets nobody decides ([`Engine::with_expiry`]).
    expiry: Expiry,
}

impl Engine {
    /// An engine over `store` whose host's tables already exist (see [`Engine::open`]),
    /// with the tools of `registry` handled by `host`.
    pub fn new(store: Store, registry: Arc<ToolRegistry>, host: Arc<dyn Host>) -> Self {
        Self {
            store,
            registry,
            host,
            jobs: JobSettings::default(),
            inputs: inputs::Inputs::default(),
            foreign: None,
            expiry: Expiry::Never,
        }
    }

    /// This engine, reading the targets of hosts it does not run through `foreign`
    /// when a person confirms their items ([`ForeignTargets`]).
    #[must_use]
    pub fn with_foreign_targets(mut self, foreign: Arc<dyn ForeignTargets>) -> Self {
        self.foreign = Some(foreign);
        self
    }

    /// Applies the host's migrations to `store` (those it has not run yet), records the
    /// host's catalog in it (so that any process validates edits of the host's items
    /// and shows its tools), then builds the engine: what a service calls once at
    /// start.
    ///
    /// ```
    /// use assent::prelude::*;
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// const NOTES: &str = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)";
    /// let host = SimpleHost::new("notes")
    ///     .migration("notes", NOTES, NOTES)
    ///     .handle("set_body", |_tx, _call| Box::pin(async { Ok("Body set.") }));
    /// let mut tools = ToolRegistry::new();
    /// let schema = json!({"type": "object"});
    /// tools.register(ToolSpec::new("set_body", "Set a note's body.", ToolMode::Deferred, schema))?;
    /// let store = Store::open("sqlite::memory:").await?;
    /// let engine = Engine::open(store, Arc::new(tools), Arc::new(host)).await?;
    /// // The host's migration ran: its table is there, empty.
    /// let notes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM notes")
    ///     .fetch_one(&mut *engine.store().read_connection().await?)
    ///     .await?;
    /// assert_eq!(notes, 0);
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    pub async fn open(
        store: Store,
        registry: Arc<ToolRegistry>,
        host: Arc<dyn Host>,
    ) -> Result<Self, ConfirmError> {
        Self::builder(store, registry, host).open().await
    }

    /// [`Engine::open`] with its clock and id source given first, so that the catalog
    /// recorded at open already reads the given clock:
    /// `Engine::builder(store, tools, host).clock(…).ids(…).open().await`.
    pub fn builder(
        store: Store,
        registry: Arc<ToolRegistry>,
        host: Arc<dyn Host>,
    ) -> EngineBuilder {
        EngineBuilder {
            engine: Self::new(store, registry, host),
        }
    }

    /// The hash of `tool_name`'s definition as [`Engine::record_catalog`] stores it
    /// (what an approval digest binds), `None` for a tool this engine does not have or
    /// a host that records its catalog itself.
    pub fn definition_hash(&self, tool_name: &str) -> Option<String> {
        if !self.host.records_catalog_on_open() {
            return None;
        }
        let spec = self.registry.get(tool_name)?;
        let definition = catalog::definition(spec, self.host.effect(tool_name));
        Some(host_tools::definition_hash(&definition))
    }

    /// Writes the host's tools as `host_tools` rows: name, description, input schema,
    /// mode, effect and (through the row's hash) a definition hash. Only definitions
    /// that changed are rewritten: an engine that opens again only reads.
    #[tracing::instrument(skip(self), fields(host = self.host.name()))]
    pub async fn record_catalog(&self, now: time::OffsetDateTime) -> Result<(), ConfirmError> {
        let definitions: Vec<(&str, serde_json::Value)> = self
            .registry
            .iter()
            .map(|spec| {
                (
                    spec.name.as_str(),
                    catalog::definition(spec, self.host.effect(&spec.name)),
                )
            })
            .collect();
        let listed: Vec<host_tools::ListedTool<'_>> = definitions
            .iter()
            .map(|(name, definition)| host_tools::ListedTool {
                name,
                definition,
                input_schema: &definition["inputSchema"],
            })
            .collect();
        let recorded = {
            let mut conn = self.store.read_connection().await?;
            host_tools::for_host(&mut conn, self.host.name()).await?
        };
        let unchanged = |tool: &host_tools::ListedTool<'_>| {
            let hash = host_tools::definition_hash(tool.definition);
            recorded
                .iter()
                .any(|r| r.tool_name == tool.name && r.hash == hash && !r.changed())
        };
        if listed.iter().all(unchanged) {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        host_tools::record_own_catalog(tx.connection(), self.host.name(), &listed, now).await?;
        tx.commit().await?;
        tracing::info!(tools = listed.len(), "host catalog recorded");
        Ok(())
    }

    /// The host.
    pub fn host(&self) -> &dyn Host {
        self.host.as_ref()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The tool catalog.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The wake service of this engine.
    pub fn wakes(&self) -> WakeService {
        WakeService::new(self.clone())
    }

    /// The confirmation service of this engine.
    pub fn confirmations(&self) -> ConfirmationService {
        ConfirmationService::new(self.clone())
    }
}

/// An engine about to open: its clock and id source ([`Engine::builder`]).
#[must_use = "an engine builder does nothing until it opens"]
pub struct EngineBuilder {
    engine: Engine,
}

impl EngineBuilder {
    /// The engine reads the time from `clock` (the system's by default), from open on.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.engine.inputs.clock = clock;
        self
    }

    /// The engine mints its ids from `ids` (random by default).
    pub fn ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.engine.inputs.ids = ids;
        self
    }

    /// What becomes of change sets nobody decides ([`Expiry::Never`] unless chosen
    /// here): what the engine's [`Worker`] does.
    pub fn expiry(mut self, expiry: Expiry) -> Self {
        self.engine = self.engine.with_expiry(expiry);
        self
    }

    /// Checks the host's handlers against the registry, applies the host's migrations
    /// and records its catalog at the engine's clock: see [`Engine::open`].
    pub async fn open(self) -> Result<Engine, ConfirmError> {
        let engine = self.engine;
        check_handlers(&engine.registry, engine.host.as_ref())?;
        engine
            .store
            .migrate_host(engine.host.name(), engine.host.migrations())
            .await?;
        if engine.host.records_catalog_on_open() {
            engine.record_catalog(engine.now()).await?;
        }
        Ok(engine)
    }
}

/// Refuses a registry and a host that do not fit (see [`Host::handled_tools`]): a
/// transactional tool without a handler, a handler without a tool.
fn check_handlers(registry: &ToolRegistry, host: &dyn Host) -> Result<(), ConfirmError> {
    let Some(mut handlers) = host.handled_tools() else {
        return Ok(());
    };
    handlers.sort();
    let needs_handler = |spec: &&assent_tools::ToolSpec| {
        matches!(
            spec.mode,
            assent_tools::ToolMode::Deferred
                | assent_tools::ToolMode::Immediate
                | assent_tools::ToolMode::Review
        ) && spec.batch.is_none()
            && host.effect(&spec.name) == Effect::Transactional
    };
    if let Some(spec) = registry
        .iter()
        .filter(needs_handler)
        .find(|spec| !handlers.contains(&spec.name))
    {
        return Err(ConfirmError::MissingHandler {
            tool: spec.name.clone(),
            host: host.name().to_owned(),
            handlers,
        });
    }
    if let Some(handler) = handlers.iter().find(|h| registry.get(h).is_none()) {
        let mut tools: Vec<String> = registry.iter().map(|spec| spec.name.clone()).collect();
        tools.sort();
        return Err(ConfirmError::HandlerWithoutTool {
            handler: handler.clone(),
            host: host.name().to_owned(),
            tools,
        });
    }
    Ok(())
}

// Declared after `Engine` so that its own methods (open, wakes, confirmations) come
// first on its documentation page, which lists impl blocks in the order modules appear.
pub mod admin;
pub mod agents;
mod attribution;
mod bus;
mod cancel;
mod catalog;
pub mod client_sessions;
mod confirmation;
mod decide;
mod error;
mod executor;
pub mod grants;
pub mod history;
mod history_rules;
mod host;
mod inputs;
mod ledger;
mod outcome;
pub mod phone;
pub mod policy_file;
pub mod records;
pub mod rejections;
mod scheduler;
mod session;
mod simple;
mod strategy;
#[cfg(test)]
mod testing;
mod undo;
mod wake;
pub mod why;
mod worker;
