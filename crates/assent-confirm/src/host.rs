//! The host contract: what a service implements so the engine can gate its tools.
//!
//! A host owns some kinds of targets (the journal: `task`; a billing service:
//! `invoice`; the MCP gateway: `mcp`) and, for each, answers what the engine asks:
//! the target's category (for the agent's allowlist) and vector clock, its current
//! state (for redundancy rules and the reviewer's "before"), a handler per tool,
//! local tools, the entities it syncs between devices, and its own tables as
//! migrations applied after the engine's. Everything runs on the caller's connection,
//! inside the engine's transaction, so a confirmed change and its decision commit
//! together; [`Host::on_decided`] gives every other verdict the same footing.

use assent_domain::{ItemRef, OperationId, Target, Verdict};
use assent_store::sync::HostEntities;
use assent_store::{Connection, HostMigration};
use assent_tools::{
    BoxFuture, CategoryResolver, Redundancy, Stateless, TargetCategory, TargetState, ToolHandler,
};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// Where a tool's effect lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// In the engine's database: the handler runs in the confirming transaction, so
    /// the change and its decision commit together.
    Transactional,
    /// Outside it (HTTP, e-mail, an MCP server's tool): confirming records a job in the
    /// execution ledger, and an executor of the host runs it through its
    /// [`ExternalHandler`], exactly once or visibly in doubt.
    External {
        /// Running it twice with the same idempotency key has the effect of running it
        /// once: a job in doubt is then simply retried.
        idempotent: bool,
    },
}

/// One run of an external tool.
#[derive(Debug, Clone, Copy)]
pub struct ExternalCall<'a> {
    /// The item's operation id: the idempotency key to hand to the remote side.
    pub operation_id: &'a OperationId,
    /// The tool.
    pub tool_name: &'a str,
    /// The arguments (a person's edit when there was one).
    pub args: &'a Value,
    /// What it is about.
    pub target: &'a Target,
    /// The agent that proposed it.
    pub agent_id: &'a str,
    /// 1 for the first attempt; a reconciliation sees the last attempt's number.
    pub attempt: u32,
}

/// Why an external call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExternalError {
    /// Worth trying again later (a timeout, a 503): retried with backoff up to a limit.
    Retryable(String),
    /// Trying again will not help (a 400, a refusal): the job fails at once.
    Permanent(String),
    /// The request went out and no answer came (the connection broke after it was
    /// sent, a timeout): the effect may have happened, so the job goes in doubt for a
    /// person, unless the tool is idempotent (then it is retried like
    /// [`ExternalError::Retryable`]).
    InDoubt(String),
    /// Nothing was sent: the host looked at the target just before the call and it
    /// changed since the proposal (an MCP gateway's file, read again through its
    /// upstream). The job is retracted and the item refreshed with what the host sees
    /// now, as a transactional job's stale claim is.
    Stale {
        /// The line a person reads (`target changed since proposed: …`).
        detail: String,
        /// The item's `before` as the target is now.
        before: Option<Value>,
        /// Its fingerprint now.
        fingerprint: Option<Value>,
    },
}

impl std::fmt::Display for ExternalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Retryable(e) | Self::Permanent(e) | Self::InDoubt(e) => f.write_str(e),
            Self::Stale { detail, .. } => f.write_str(detail),
        }
    }
}

/// The answer to "did operation X happen?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciliation {
    /// It did; the text is its result.
    Happened(String),
    /// It did not: safe to run again.
    DidNotHappen,
    /// Nobody can tell: the job stays in doubt until a person settles it.
    Unknown,
}

/// Runs one external tool of a host.
pub trait ExternalHandler: Send + Sync {
    /// Runs the effect; the text is the result shown with the decision. No database
    /// lock is held while it runs.
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>>;

    /// "Did operation `call.operation_id` happen?", asked when a lease ran out with no
    /// outcome. The default cannot tell.
    fn reconcile<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Reconciliation> {
        let _ = call;
        Box::pin(async { Reconciliation::Unknown })
    }
}

/// A call of a local tool (the agent's own output, e.g. its report).
#[derive(Debug, Clone, Copy)]
pub struct LocalCall<'a> {
    /// The agent.
    pub agent_id: &'a str,
    /// What the wake is about.
    pub target: &'a Target,
    /// The tool.
    pub tool_name: &'a str,
    /// Validated arguments.
    pub args: &'a Value,
    /// The time of the call.
    pub now: OffsetDateTime,
}

/// A decision the engine is recording on an item of its host, as
/// [`Host::on_decided`] is told of it, inside the decision's transaction.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Decided<'a> {
    /// The item decided.
    pub item: ItemRef,
    /// The decision's id (its row is written with the transaction's other records,
    /// at its end: read what you need here, not from Assent's tables).
    pub decision_id: Uuid,
    /// The agent that proposed the call.
    pub agent_id: &'a str,
    /// What the call is about.
    pub target: &'a Target,
    /// The tool.
    pub tool_name: &'a str,
    /// What was decided: confirmed (edited or not), rejected (one item, or a whole set
    /// dismissed), deferred, retracted.
    pub verdict: Verdict,
    /// Who decided, when the door named them.
    pub decided_by: Option<&'a str>,
    /// The person's reason (a rejection's, a withdrawal's).
    pub reason: Option<&'a str>,
    /// The arguments as they ran, or would have: a person's edit when there was one,
    /// else the proposal's.
    pub args: &'a Value,
    /// Whether a person edited the arguments before confirming.
    pub edited: bool,
    /// When it was decided.
    pub at: OffsetDateTime,
}

/// A target's state as a host loads it; `None` when the target does not exist.
pub type LoadedState = Option<Box<dyn TargetState>>;

/// The engine's view of one service: see the module documentation.
pub trait Host: Send + Sync {
    /// The host's name: ASCII letters, digits and underscores (it names the table that
    /// records which of its migrations a database ran).
    fn name(&self) -> &str;

    /// Its own tables, applied in order after the engine's by [`crate::Engine::open`].
    fn migrations(&self) -> &[HostMigration] {
        &[]
    }

    /// The handler of a (singular) tool, if the host has one.
    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>>;

    /// The tools [`Host::handler`] answers for, when the host's set is fixed: then
    /// [`crate::Engine::open`] refuses a transactional tool of the registry with no
    /// handler, and a handler no tool of the registry names (a misspelt name caught at
    /// start, not when a person's confirmation fails). Default `None`: the host cannot
    /// tell (its tools come and go, as an MCP server's), and nothing is checked.
    fn handled_tools(&self) -> Option<Vec<String>> {
        None
    }

    /// Category and vector clock of targets.
    fn resolver(&self) -> &dyn CategoryResolver<Connection>;

    /// The target's current state: `Ok(None)` when it does not exist (a wake on it is
    /// refused), an error when it failed to load (nothing is suppressed as redundant
    /// then). The default has no state to compare with: every proposal is kept.
    fn snapshot<'a>(
        &'a self,
        conn: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        let _ = (conn, target);
        Box::pin(async { Ok(Some(Box::new(Stateless) as Box<dyn TargetState>)) })
    }

    /// Handles a local tool; the text is the reply to the agent. The default has none.
    fn handle_local<'a>(
        &'a self,
        conn: &'a mut Connection,
        call: LocalCall<'a>,
    ) -> BoxFuture<'a, Result<String, String>> {
        let _ = conn;
        let tool = call.tool_name.to_owned();
        Box::pin(async move { Err(format!("this host has no local tool {tool:?}")) })
    }

    /// The entities it syncs between devices, if any.
    fn entities(&self) -> Option<&dyn HostEntities> {
        None
    }

    /// Where `tool_name`'s effect lands; the wake records it on the item, so whoever
    /// confirms it later needs no host. Default: in the database.
    fn effect(&self, tool_name: &str) -> Effect {
        let _ = tool_name;
        Effect::Transactional
    }

    /// Whether [`crate::Engine::open`] writes this host's tools (its registry) to the
    /// database, where any process reads them to show the host's items and check
    /// edits of them. A host that records its own catalog, pinning definitions it
    /// does not trust (the MCP gateway), answers false. Default: true.
    fn records_catalog_on_open(&self) -> bool {
        true
    }

    /// The handler of an external tool (see [`Effect::External`]), if the host has one.
    fn external(&self, tool_name: &str) -> Option<&dyn ExternalHandler> {
        let _ = tool_name;
        None
    }

    /// Called for every decision this engine records on an item of this host (one it
    /// queued, or one whose host was never recorded), in the decision's transaction on
    /// `conn`, after a confirmed handler ran: confirmed (edited or not; an external
    /// tool's confirmation before its job runs), rejected, dismissed (once per item),
    /// deferred, retracted; a held confirmation when its window ends or its job is
    /// cancelled. What it writes commits with the decision; an error rolls the
    /// decision back (and what the handler wrote), and the caller gets
    /// [`crate::ConfirmError::DecisionHookFailed`] naming this host. Not called for an
    /// approval short of its quorum, a confirmation entering its hold window, an
    /// expired set (expiry decides nothing: the items stay undecided), or a decision
    /// another process records (the CLI, a page served elsewhere, a sync import):
    /// follow those through the decision history. The default does nothing.
    fn on_decided<'a>(
        &'a self,
        conn: &'a mut Connection,
        decided: Decided<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
        let _ = (conn, decided);
        Box::pin(async { Ok(()) })
    }
}

/// What this process can read of the targets of hosts it does not run: a coding agent's
/// workspace on this machine, whose calls a hook process serves. A confirmation of such
/// a host's item (one an executor of that host runs later) reads it, so the rules are
/// asked with the call's paths, and a target that changed since the proposal is found,
/// before anything is recorded, on every door. The composition root (the CLI) plugs one
/// in with [`crate::Engine::with_foreign_targets`]; without one, those checks wait for
/// the executor's claim.
pub trait ForeignTargets: Send + Sync {
    /// The state of `target` of host `host` as this process sees it now, or `None` when
    /// it cannot read that host's targets (then nothing is checked here).
    fn state(&self, host: &str, target: &Target) -> Option<Box<dyn TargetState>>;
}

/// The category of `target`: `known`, when a state read in the caller's transaction
/// held it and nothing ran there since, else `resolver`'s answer (a failed lookup is
/// [`TargetCategory::LookupFailed`], which the policy refuses).
pub(crate) async fn category_of(
    resolver: &dyn CategoryResolver<Connection>,
    conn: &mut Connection,
    target: &Target,
    known: Option<TargetCategory>,
) -> TargetCategory {
    if let Some(known) = known {
        return known;
    }
    match resolver.category_of(conn, target).await {
        Ok(Some(category)) => TargetCategory::Known(category),
        Ok(None) => TargetCategory::Missing,
        Err(error) => TargetCategory::LookupFailed(error),
    }
}

/// What the target's state says about a confirmed call just before it runs.
#[derive(Debug, Default)]
pub(crate) struct Recheck {
    /// The change is already true (nothing is to run): why.
    pub already_true: Option<String>,
    /// The fields the call touches changed since it was proposed.
    pub stale: Option<Stale>,
    /// The target's category, when its state holds it ([`TargetState::category`]).
    pub category: Option<TargetCategory>,
}

/// A target that changed under a proposal: the line a person reads, and what to
/// refresh the item with.
#[derive(Debug)]
pub(crate) struct Stale {
    pub detail: String,
    pub before: Option<Value>,
    pub fingerprint: Option<Value>,
}

/// The re-check before a confirmed call runs, on one snapshot of `target`: is the
/// change already true (for `args`, the effective arguments), and did the fields the
/// proposal touches (fingerprinted with `proposed`, the arguments it was proposed with)
/// change since `fingerprint` was taken. A snapshot that fails to load finds neither:
/// nothing is suppressed, and the guard is skipped with a warning.
pub(crate) async fn recheck(
    host: &dyn Host,
    conn: &mut Connection,
    target: &Target,
    tool_name: &str,
    args: &Value,
    proposed: &Value,
    fingerprint: Option<&Value>,
) -> Recheck {
    let snapshot = match host.snapshot(conn, target).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(%error, "snapshot failed to load; running without the redundancy and stale-target checks");
            None
        }
    };
    let Some(state) = snapshot else {
        return Recheck::default();
    };
    recheck_state(state.as_ref(), tool_name, args, proposed, fingerprint)
}

/// [`recheck`] on a state already loaded (`state`).
pub(crate) fn recheck_state(
    state: &dyn TargetState,
    tool_name: &str,
    args: &Value,
    proposed: &Value,
    fingerprint: Option<&Value>,
) -> Recheck {
    let already_true = match state.redundancy(tool_name, args) {
        Redundancy::AlreadyTrue(detail) => Some(detail),
        Redundancy::Keep | Redundancy::InventedId(_) => None,
    };
    // A change that is already true changes nothing, whatever happened meanwhile.
    let stale = fingerprint
        .filter(|_| already_true.is_none() && state.observed(tool_name, proposed))
        .and_then(|then| {
            let now = state.fingerprint(tool_name, proposed);
            (now.as_ref() != Some(then)).then(|| Stale {
                detail: assent_domain::stale_detail(then, now.as_ref().unwrap_or(&Value::Null)),
                before: state.before(tool_name, proposed),
                fingerprint: now,
            })
        });
    Recheck {
        already_true,
        stale,
        category: state.category(),
    }
}
