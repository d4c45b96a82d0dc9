//! The audited executor (ADR 0004), on every path that runs a tool: immediate calls of
//! a wake and confirmations alike.
//!
//! Inside the caller's write transaction it resolves the target's category and
//! enforces the policy before anything changes, audits an action record, runs the
//! handler inside a savepoint (so a failing or panicking handler leaves no partial
//! writes, while the audit records survive; a confirmation, whose scope has written
//! nothing before, runs it without one and rolls its own scope back instead), records
//! the operation id as applied, reads the mutated entity's vector clock and audits the
//! result. Audit write failures are logged and never change the outcome.

use assent_domain::{VectorClock, stored_result};
use assent_store::Connection;
use assent_store::plan::PlannedAudits;
use assent_store::{StoreError, WriteTx, operations};
use assent_tools::{
    AgentPolicy, AuditKind, AuditRecord, AuditSink, CallContext, CategoryResolver, RuleAction,
    TargetCategory, ToolHandler, ToolInvocation, ToolOutcome, ToolSpec,
};
use assent_tools::{HandlerError, ToolsError};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use time::OffsetDateTime;

/// One call to execute.
pub struct ExecutionRequest<'a> {
    /// The agent's policy.
    pub policy: &'a AgentPolicy,
    /// The tool.
    pub spec: &'a ToolSpec,
    /// Its handler, if the host has one.
    pub handler: Option<&'a dyn ToolHandler<Connection>>,
    /// The call, with its deterministic operation id.
    pub invocation: ToolInvocation,
    /// A person confirmed it (an `ask` rule is then satisfied).
    pub confirmed_by_person: bool,
    /// Set when a re-check against the current state found the change already true:
    /// nothing runs, and the detail is reported.
    pub already_true: Option<String>,
    /// The time of the audit records.
    pub now: OffsetDateTime,
    /// What lets it run without a person (a rule, the tool's mode, a grant), written
    /// on its audit records; `None` for a call a person confirmed.
    pub allowed_by: Option<serde_json::Value>,
}

/// When an external call's action record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Intent {
    /// Before the call, committed on its own: a crash during the call leaves a record
    /// that it may have run, so it is in doubt and never run again silently.
    Before,
    /// With its outcome, in one commit: for a call whose re-run is harmless (the host
    /// says it is idempotent, which a read is), nothing need be known of it before it
    /// runs, and the call costs one commit instead of two.
    WithOutcome,
}

/// What [`AuditedExecutor::admit`] found: the call settled without its handler, or
/// the handler to run it with.
pub(crate) enum Admission<'r> {
    Settled(ExecutionOutcome),
    Run(&'r dyn ToolHandler<Connection>),
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExecutionOutcome {
    /// The handler ran and succeeded.
    Applied {
        /// Its message.
        message: String,
        /// Whether it changed anything.
        mutated: bool,
        /// The target's clock afterwards.
        vector_clock: Option<VectorClock>,
    },
    /// The change was already true: the handler was not called.
    AlreadyTrue {
        /// E.g. `priority is already P1`.
        detail: String,
    },
    /// This operation id was applied before (a retry): the handler was not called.
    AlreadyApplied {
        /// The message recorded then.
        message: String,
    },
    /// The policy refused it: the handler was not called.
    Denied {
        /// Why.
        reason: String,
    },
    /// The handler failed or panicked; its writes were rolled back (by the executor
    /// in its savepoint, or by the caller of a clean-scope execution).
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The tool's effect is external: confirming recorded a job in the execution
    /// ledger, which an executor of `host` runs (policy, audit and call happen then).
    Queued {
        /// The job.
        job_id: uuid::Uuid,
        /// The host whose executors run it.
        host: String,
    },
    /// The tool is held (`assent agent hold`): confirming recorded a job that waits
    /// out the window, cancellable until `not_before`. The confirmation becomes a
    /// decision, and the call runs, when an executor of `host` claims it then.
    Scheduled {
        /// The job (`assent jobs cancel ID` takes the confirmation back).
        job_id: uuid::Uuid,
        /// The host whose executors run it.
        host: String,
        /// When the window ends.
        not_before: time::OffsetDateTime,
    },
    /// The tool needs more than one person (`assent agent ask … --approvals N`): this
    /// confirmation counted as one approval, short of the quorum. No decision was
    /// written and nothing ran; the item stays pending.
    AwaitingApprovals {
        /// Approvals of the item's current revision so far, this one included.
        approvals: usize,
        /// How many it needs.
        needed: u32,
    },
}

impl ExecutionOutcome {
    /// Whether the call counts as done (applied now, before, or already true).
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Self::Applied { .. } | Self::AlreadyTrue { .. } | Self::AlreadyApplied { .. }
        )
    }
}

/// Runs `handler` on `conn`, a panic or an error becoming the error's text.
async fn run_handler(
    handler: &dyn ToolHandler<Connection>,
    conn: &mut Connection,
    invocation: &ToolInvocation,
) -> Result<ToolOutcome, String> {
    run_handler_keeping_error(handler, conn, invocation)
        .await
        .map_err(|(text, _)| text)
}

/// [`run_handler`], keeping the handler's own error beside its text: the one its
/// [`ToolsError::HandlerFailed`] carries, else the handler's `ToolsError` itself (a
/// panic's text for a panic).
async fn run_handler_keeping_error(
    handler: &dyn ToolHandler<Connection>,
    conn: &mut Connection,
    invocation: &ToolInvocation,
) -> Result<ToolOutcome, (String, HandlerError)> {
    match CatchUnwind(handler.execute(conn, invocation)).await {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) => {
            let text = error.to_string();
            let own = match error {
                ToolsError::HandlerFailed { source, .. } => source,
                other => Box::new(other),
            };
            Err((text, own))
        }
        Err(panic) => Err((panic.clone(), panic.into())),
    }
}

/// Runs tools under policy, with an audit trail.
pub struct AuditedExecutor<'h> {
    resolver: &'h dyn CategoryResolver<Connection>,
    audit: &'h dyn AuditSink<Connection>,
    /// The target's category, when the caller's transaction read it and nothing ran
    /// there since ([`Self::with_known_category`]).
    known_category: Option<TargetCategory>,
    /// What the target's host says of its paths, for path rules
    /// ([`Self::with_paths`]).
    paths: Option<&'h dyn assent_tools::PathFacts>,
    /// Whether the call's operation was applied, when the caller's read under its
    /// transaction's lock answered it ([`Self::with_known_applied`]).
    known_applied: Option<Option<String>>,
    /// Where the applied operation is planned instead of written
    /// ([`Self::planning_applied`]).
    planned: Option<&'h PlannedAudits>,
}

/// Polls a future, turning a panic inside it into an error.
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *inner).poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                Poll::Ready(Err(format!("handler panicked: {message}")))
            }
        }
    }
}

impl<'h> AuditedExecutor<'h> {
    /// An executor resolving targets with `resolver` and auditing to `audit`.
    pub fn new(
        resolver: &'h dyn CategoryResolver<Connection>,
        audit: &'h dyn AuditSink<Connection>,
    ) -> Self {
        Self {
            resolver,
            audit,
            known_category: None,
            paths: None,
            known_applied: None,
            planned: None,
        }
    }

    /// This executor, taking whether the call's operation was applied (`Some(message)`:
    /// it was) from the caller's read in the same transaction, under its lock, instead
    /// of looking it up (issue 55: the decision's one read answers it).
    #[must_use]
    pub(crate) fn with_known_applied(mut self, applied: Option<Option<String>>) -> Self {
        self.known_applied = applied;
        self
    }

    /// This executor, planning the applied operation of a call that succeeds in
    /// `planned` (which the caller moves into its write plan) instead of writing it.
    #[must_use]
    pub(crate) fn planning_applied(mut self, planned: &'h PlannedAudits) -> Self {
        self.planned = Some(planned);
        self
    }

    /// This executor, reading path rules with what the target's host found of the
    /// call's paths ([`assent_tools::TargetState::paths`]), as the wake's planner did.
    #[must_use]
    pub(crate) fn with_paths(mut self, paths: Option<&'h dyn assent_tools::PathFacts>) -> Self {
        self.paths = paths;
        self
    }

    /// This executor, checking the policy against `category` (when given) instead of
    /// asking the resolver: the target's category as the caller's transaction read it
    /// (its host's [`assent_tools::TargetState::category`]), with no handler run in
    /// that transaction since, so the answer is the resolver's. For one call: a call
    /// that ran may have changed it.
    #[must_use]
    pub(crate) fn with_known_category(mut self, category: Option<TargetCategory>) -> Self {
        self.known_category = category;
        self
    }

    pub(crate) async fn write_audit(&self, conn: &mut Connection, record: AuditRecord) {
        if let Err(error) = self.audit.record(conn, &record).await {
            tracing::warn!(
                operation_id = %record.operation_id,
                kind = record.kind.as_str(),
                %error,
                "audit write failed; the outcome stands"
            );
        }
    }

    pub(crate) fn record(req: &ExecutionRequest<'_>, kind: AuditKind) -> AuditRecord {
        let inv = &req.invocation;
        // A call that waited for a person: its action record says what made it wait
        // (the ask rule with where it came from, or the tool's mode), so the record
        // tells who set the rule that asked.
        let decided_by =
            (kind == AuditKind::Action && req.confirmed_by_person && req.allowed_by.is_none())
                .then(|| {
                    let call = CallContext::new(&inv.args, &inv.target.target.id);
                    req.policy.decided_by_call(req.spec, Some(call))
                });
        AuditRecord {
            operation_id: inv.operation_id.clone(),
            run_key: inv.run_key.clone(),
            tool_name: inv.tool_name.clone(),
            agent_id: inv.target.agent_id.clone(),
            target_kind: inv.target.target.kind.clone(),
            target_id: inv.target.target.id.clone(),
            kind,
            args: inv.args.clone(),
            success: None,
            detail: None,
            vector_clock: None,
            created_at: req.now,
            allowed_by: req.allowed_by.clone(),
            refused_by: None,
            decided_by,
        }
    }

    pub(crate) fn result_record(
        req: &ExecutionRequest<'_>,
        success: bool,
        detail: String,
    ) -> AuditRecord {
        AuditRecord {
            success: Some(success),
            detail: Some(detail),
            ..Self::record(req, AuditKind::Result)
        }
    }

    /// Why the policy refuses the call now, with what decided so (the record's
    /// `decidedBy`: the category, the rule with where it came from, or the tool's
    /// mode); `None` when it may run.
    pub(crate) async fn policy_denial(
        &self,
        conn: &mut Connection,
        req: &ExecutionRequest<'_>,
    ) -> Option<(String, serde_json::Value)> {
        let target = &req.invocation.target.target;
        let category =
            crate::host::category_of(self.resolver, conn, target, self.known_category.clone())
                .await;
        if let Err(reason) = req.policy.check_category(&category) {
            let decided_by = serde_json::json!({ "category": reason });
            return Some((reason, decided_by));
        }
        let call = CallContext {
            args: &req.invocation.args,
            target_id: &target.id,
            paths: self.paths,
        };
        let reason = match req.policy.route_call(req.spec, Some(call)) {
            // The rule and the part of a chained command it found, as every door says it.
            RuleAction::Deny => {
                assent_changeset::reply::denial(&req.policy.denial(&req.spec.name, Some(call)))
            }
            RuleAction::Ask if !req.confirmed_by_person => {
                format!("Tool {} requires a person's confirmation", req.spec.name)
            }
            RuleAction::Ask | RuleAction::Allow | RuleAction::Audit => return None,
        };
        Some((reason, req.policy.decided_by_call(req.spec, Some(call))))
    }

    /// Executes one call in `tx`, its handler inside a savepoint (a failing handler's
    /// writes are undone, the audit records kept). `Err` only for database failures of
    /// the executor's own bookkeeping; the caller should then roll back.
    #[tracing::instrument(
        skip_all,
        fields(tool = %req.invocation.tool_name, operation_id = %req.invocation.operation_id, target = %req.invocation.target.target)
    )]
    pub async fn execute(
        &self,
        tx: &mut WriteTx,
        req: ExecutionRequest<'_>,
    ) -> Result<ExecutionOutcome, StoreError> {
        let handler = match self.admit(tx.connection(), &req, Intent::Before).await? {
            Admission::Settled(outcome) => return Ok(outcome),
            Admission::Run(handler) => handler,
        };
        // The handler's writes, undone alone when it fails; the audit records stay.
        let mut savepoint = tx.savepoint().await?;
        let result = run_handler(handler, savepoint.connection(), &req.invocation).await;
        if result.is_err() {
            tracing::warn!("handler failed; its writes are rolled back");
            savepoint.rollback().await?;
        } else {
            savepoint.release().await?;
        }
        self.conclude(tx.connection(), &req, result, Intent::Before)
            .await
    }

    /// [`Self::execute`] without a savepoint of its own, for a caller whose scope (its
    /// transaction, or its own savepoint) has written nothing before the call and
    /// whose executor plans its audit records instead of writing them
    /// ([`assent_store::plan::PlannedAudits`]): on [`ExecutionOutcome::Failed`] the
    /// handler's writes are still in `conn`, and the caller must roll its scope back
    /// (the planned records stay with the caller). A confirmation saves the two
    /// statements of a savepoint this way (`tests/statements.rs`).
    #[tracing::instrument(
        skip_all,
        fields(tool = %req.invocation.tool_name, operation_id = %req.invocation.operation_id, target = %req.invocation.target.target)
    )]
    ///
    /// On a failure the handler's own error comes back beside the outcome (`None` when
    /// no handler ran).
    pub(crate) async fn execute_in_clean_scope(
        &self,
        conn: &mut Connection,
        req: ExecutionRequest<'_>,
    ) -> Result<(ExecutionOutcome, Option<HandlerError>), StoreError> {
        let handler = match self.admit(conn, &req, Intent::Before).await? {
            Admission::Settled(outcome) => return Ok((outcome, None)),
            Admission::Run(handler) => handler,
        };
        let (result, own) = match run_handler_keeping_error(handler, conn, &req.invocation).await {
            Ok(outcome) => (Ok(outcome), None),
            Err((text, own)) => {
                tracing::warn!("handler failed; its caller rolls its writes back");
                (Err(text), Some(own))
            }
        };
        let outcome = self.conclude(conn, &req, result, Intent::Before).await?;
        Ok((outcome, own))
    }

    /// Everything before the call, in `conn`'s transaction: the policy (a denial is
    /// audited and settles the call), the action audit record (now, or with the
    /// outcome: see [`Intent`]), and the calls that need no handler (already true,
    /// already applied, no handler).
    pub(crate) async fn admit<'r>(
        &self,
        conn: &mut Connection,
        req: &ExecutionRequest<'r>,
        intent: Intent,
    ) -> Result<Admission<'r>, StoreError> {
        if let Some((reason, decided_by)) = self.policy_denial(conn, req).await {
            tracing::info!(%reason, "policy denied the call");
            let record = AuditRecord {
                detail: Some(reason.clone()),
                success: Some(false),
                decided_by: Some(decided_by),
                ..Self::record(req, AuditKind::PolicyDenied)
            };
            self.write_audit(conn, record).await;
            return Ok(Admission::Settled(ExecutionOutcome::Denied { reason }));
        }
        let settled = if let Some(detail) = req.already_true.clone() {
            let said = format!("already true: {detail}");
            Some((true, said, ExecutionOutcome::AlreadyTrue { detail }))
        } else if let Some(message) = match self.known_applied.clone() {
            Some(known) => known,
            None => operations::applied(conn, &req.invocation.operation_id).await?,
        } {
            let said = format!("already applied: {message}");
            Some((true, said, ExecutionOutcome::AlreadyApplied { message }))
        } else {
            None
        };
        let settled = match (settled, req.handler) {
            (Some(settled), _) => settled,
            (None, None) => {
                let error = format!("no handler is registered for {}", req.spec.name);
                (false, error.clone(), ExecutionOutcome::Failed { error })
            }
            (None, Some(handler)) => {
                if intent == Intent::Before {
                    self.write_audit(conn, Self::record(req, AuditKind::Action))
                        .await;
                }
                return Ok(Admission::Run(handler));
            }
        };
        let (success, said, outcome) = settled;
        self.write_audit(conn, Self::record(req, AuditKind::Action))
            .await;
        self.write_audit(conn, Self::result_record(req, success, said))
            .await;
        Ok(Admission::Settled(outcome))
    }

    /// Everything after the call, in `conn`'s transaction: a success is recorded as
    /// applied (once per operation id) with the target's clock in its result record; a
    /// failure (its writes already rolled back, or made outside any transaction) only
    /// in its result record.
    ///
    /// Both records keep the message as [`stored_result`] bounds it (a 10 MiB read is
    /// stored as its first 64 KiB and a marker with its size and hash); the outcome
    /// returned carries it whole, for the agent or client that called.
    pub(crate) async fn conclude(
        &self,
        conn: &mut Connection,
        req: &ExecutionRequest<'_>,
        result: Result<ToolOutcome, String>,
        intent: Intent,
    ) -> Result<ExecutionOutcome, StoreError> {
        if intent == Intent::WithOutcome {
            self.write_audit(conn, Self::record(req, AuditKind::Action))
                .await;
        }
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                let stored = stored_result(&error).into_owned();
                self.write_audit(conn, Self::result_record(req, false, stored))
                    .await;
                return Ok(ExecutionOutcome::Failed { error });
            }
        };
        let inv = &req.invocation;
        let stored = stored_result(&outcome.message);
        match self.planned {
            Some(planned) => planned.applied(
                &inv.operation_id,
                &inv.tool_name,
                &inv.target.target,
                &stored,
                req.now,
            ),
            None => {
                operations::record_applied(
                    conn,
                    &inv.operation_id,
                    &inv.tool_name,
                    &inv.target.target,
                    &stored,
                    req.now,
                )
                .await?;
            }
        }
        // The handler's own clock when it reported one; else the host is asked.
        let vector_clock = match outcome.vector_clock {
            Some(clock) => Some(clock),
            None => match self
                .resolver
                .vector_clock_of(conn, &inv.target.target)
                .await
            {
                Ok(clock) => clock,
                Err(error) => {
                    tracing::warn!(%error, "could not read the target's vector clock");
                    None
                }
            },
        };
        let record = AuditRecord {
            vector_clock: vector_clock.clone(),
            ..Self::result_record(req, true, stored.into_owned())
        };
        self.write_audit(conn, record).await;
        tracing::debug!(mutated = outcome.mutated, "tool applied");
        Ok(ExecutionOutcome::Applied {
            message: outcome.message,
            mutated: outcome.mutated,
            vector_clock,
        })
    }
}
