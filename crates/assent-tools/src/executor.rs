//! The contracts of the audited executor: what a host implements so that Assent can
//! check policy, call handlers and write the audit trail.
//!
//! Each trait is generic over `Ctx`, the host's execution context (for the SQLite host,
//! the open write transaction), so a handler's mutation commits or rolls back together
//! with the decision that caused it. Futures are boxed and `Send` but not tied to any
//! runtime.

use crate::{AuditRecord, ToolsError};
use assent_domain::{OperationId, Target, VectorClock};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future, as returned by the traits of this module.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The entity a call acts on and on whose behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionTarget {
    /// The agent.
    pub agent_id: String,
    /// The host's entity.
    pub target: Target,
}

/// One call, ready for a handler.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolInvocation {
    /// The tool.
    pub tool_name: String,
    /// Validated arguments.
    pub args: Value,
    /// The wake run.
    pub run_key: String,
    /// Deterministic id; handlers outside the database use it as an idempotency key.
    pub operation_id: OperationId,
    /// What it acts on.
    pub target: ExecutionTarget,
    /// The time of the call (handlers never read the clock themselves, so a fixed
    /// clock reproduces a run exactly).
    pub now: time::OffsetDateTime,
}

impl ToolInvocation {
    /// A call of `tool_name` with validated `args`, in run `run_key`, keyed by
    /// `operation_id`, acting on `target`, at `now`.
    pub fn new(
        tool_name: impl Into<String>,
        args: Value,
        run_key: impl Into<String>,
        operation_id: OperationId,
        target: ExecutionTarget,
        now: time::OffsetDateTime,
    ) -> Self {
        Self {
            tool_name: tool_name.into(),
            args,
            run_key: run_key.into(),
            operation_id,
            target,
            now,
        }
    }
}

/// What a handler reports after it ran: [`ToolOutcome::changed`] or
/// [`ToolOutcome::unchanged`], with the target's new clock when the handler has it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolOutcome {
    /// Reply for the agent / the person, e.g. `Priority set to P1.`
    pub message: String,
    /// Whether anything changed (false when the change was already true).
    pub mutated: bool,
    /// The target's vector clock after the call, when the handler knows it (it ticked
    /// it): the executor then records it without asking the host's
    /// [`CategoryResolver::vector_clock_of`] (one statement fewer per confirmation).
    pub vector_clock: Option<VectorClock>,
}

impl ToolOutcome {
    /// The call changed the target; `message` is the reply.
    pub fn changed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            mutated: true,
            vector_clock: None,
        }
    }

    /// The call changed nothing (what it asked for was already true).
    pub fn unchanged(message: impl Into<String>) -> Self {
        Self {
            mutated: false,
            ..Self::changed(message)
        }
    }

    /// The target's vector clock after the call (see [`ToolOutcome::vector_clock`]).
    #[must_use]
    pub fn with_vector_clock(mut self, clock: VectorClock) -> Self {
        self.vector_clock = Some(clock);
        self
    }
}

/// Runs one tool against the host's data.
pub trait ToolHandler<Ctx: ?Sized>: Send + Sync {
    /// Applies the call. Errors are reported to the person and audited; the caller
    /// rolls back whatever the handler wrote in `ctx`.
    fn execute<'a>(
        &'a self,
        ctx: &'a mut Ctx,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>>;
}

/// Facts about the target entity the executor needs before and after a call (the host
/// answers for every kind of target it serves).
pub trait CategoryResolver<Ctx: ?Sized>: Send + Sync {
    /// The entity's category: `Ok(None)` when it has none or does not exist.
    fn category_of<'a>(
        &'a self,
        ctx: &'a mut Ctx,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>>;

    /// The entity's vector clock, read after a successful mutation (`Ok(None)` for a
    /// target whose host keeps no clock, e.g. a remote service).
    fn vector_clock_of<'a>(
        &'a self,
        ctx: &'a mut Ctx,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>>;
}

/// Where audit records go. Failures are logged by the executor and never change the
/// outcome of the call.
pub trait AuditSink<Ctx: ?Sized>: Send + Sync {
    /// Persists one record.
    fn record<'a>(
        &'a self,
        ctx: &'a mut Ctx,
        record: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), String>>;
}
