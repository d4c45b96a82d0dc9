//! One agent wake: plan the tool calls, run what may run now, queue the rest.

use crate::executor::{
    Admission, AuditedExecutor, CatchUnwind, ExecutionOutcome, ExecutionRequest, Intent,
};
use crate::{ConfirmError, Effect, Engine, LocalCall};
use assent_changeset::{CallPlan, ChangeSetBuilder, PlannerConfig, ToolCall, WakePlanner, reply};
use assent_domain::{ChangeSet, OperationId, Target};
use assent_store::{
    AnyConnection, WriteTx, agents, change_sets, decisions, jobs, operations,
    plan::{PlannedAudits, WritePlan},
};
use assent_tools::{
    AgentPolicy, AuditKind, AuditRecord, CallContext, ExecutionTarget, PathFacts, TargetCategory,
    TargetState, ToolInvocation,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use time::OffsetDateTime;
use uuid::Uuid;

/// How many recent decisions are consulted for "recently rejected" proposals.
const REJECTION_LOOKBACK: u32 = assent_store::rejections::LOOKBACK;

/// The tool calls of one wake and who made them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WakeRequest {
    /// The agent.
    pub agent_id: String,
    /// What the wake is about: one target of the engine's host.
    pub target: Target,
    /// The conversation thread.
    pub thread_id: String,
    /// The run; part of every operation id of the wake.
    pub run_key: String,
    /// The calls, in the order the model made them.
    pub calls: Vec<ToolCall>,
    /// The id the change set gets if anything is queued; `None` (as
    /// [`WakeRequest::new`] leaves it) for the next id of the engine's [`crate::IdSource`].
    pub change_set_id: Option<Uuid>,
    /// Tunables of the planner (cap, rejection window, argument size).
    pub planner: PlannerConfig,
    /// Items per change set.
    pub max_items: usize,
}

impl WakeRequest {
    /// A request whose change set (if any) takes the engine's next id, the thread named
    /// after the run, and the default planner settings and cap.
    pub fn new(
        agent_id: impl Into<String>,
        target: Target,
        run_key: impl Into<String>,
        calls: Vec<ToolCall>,
    ) -> Self {
        let run_key = run_key.into();
        Self {
            agent_id: agent_id.into(),
            target,
            thread_id: run_key.clone(),
            run_key,
            calls,
            change_set_id: None,
            planner: PlannerConfig::default(),
            max_items: assent_changeset::DEFAULT_MAX_ITEMS_PER_SET,
        }
    }
}

/// The reply to one tool call, ready to hand back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolResponse {
    /// The model's id of the call.
    pub tool_call_id: String,
    /// The text for the model.
    pub content: String,
}

impl ToolResponse {
    /// The reply `content` to the call `tool_call_id`.
    pub fn new(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// What a wake produced.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WakeOutcome {
    /// The persisted change set, if anything was queued.
    pub change_set: Option<ChangeSet>,
    /// One reply per call, in order.
    pub responses: Vec<ToolResponse>,
}

impl WakeOutcome {
    /// A wake's outcome: the set it queued (if any) and one reply per call.
    pub fn new(change_set: Option<ChangeSet>, responses: Vec<ToolResponse>) -> Self {
        Self {
            change_set,
            responses,
        }
    }
}

/// Runs agent wakes.
#[derive(Clone)]
pub struct WakeService {
    engine: Engine,
}

impl WakeService {
    /// The service of `engine`.
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// [`Self::wake`] at the engine's clock ([`crate::Engine::builder`]).
    pub async fn wake_now(&self, request: WakeRequest) -> Result<WakeOutcome, ConfirmError> {
        self.wake(request, self.engine.now()).await
    }

    /// Plans and carries out one wake in a single write transaction: immediate calls
    /// run through the audited executor, local calls go to the host, deferred calls
    /// become one change set. Per-call problems (unknown tool, bad arguments, policy
    /// denial) are replies, not errors; an error means nothing was written.
    #[tracing::instrument(skip_all, fields(agent = %request.agent_id, target = %request.target, run = %request.run_key, calls = request.calls.len()))]
    pub async fn wake(
        &self,
        request: WakeRequest,
        now: OffsetDateTime,
    ) -> Result<WakeOutcome, ConfirmError> {
        let engine = &self.engine;
        // Everything a wake writes hangs off its target (its sets, their items, audit
        // and outbox rows, applied operations): on PostgreSQL it locks that target, so
        // wakes and decisions on other targets run side by side.
        let mut tx = engine.store.begin_write_on(&request.target).await?;
        let (policy, settings, memory) =
            agents::rules_and_rejection_memory_at(tx.connection(), &request.agent_id, now)
                .await?
                .ok_or_else(|| ConfirmError::UnknownAgent(request.agent_id.clone()))?;
        let snapshot = match engine.host.snapshot(tx.connection(), &request.target).await {
            Ok(Some(snapshot)) => Some(snapshot),
            Ok(None) => return Err(ConfirmError::UnknownTarget(request.target.clone())),
            Err(error) => {
                tracing::warn!(%error, "target state failed to load; proposals are kept unfiltered");
                None
            }
        };
        // Nothing ran in this transaction yet: the state, when it holds the category,
        // answers for the resolver.
        let category = crate::host::category_of(
            engine.host.resolver(),
            tx.connection(),
            &request.target,
            snapshot.as_deref().and_then(TargetState::category),
        )
        .await;
        let new_builder = || {
            ChangeSetBuilder::new(
                &request.agent_id,
                request.target.clone(),
                &request.thread_id,
                &request.run_key,
            )
            .with_max_items(request.max_items)
        };
        let planner = |decisions, config| {
            WakePlanner::new(&engine.registry, &policy, category.clone(), now)
                .with_snapshot(snapshot.as_deref())
                .with_decisions(decisions)
                .with_config(config)
        };
        // The open sets and recent decisions only ever stop a call from being queued
        // (a duplicate, a recent rejection): a wake that queues nothing without them
        // queues nothing with them, and is answered without reading them (the gateway's
        // and the hooks' allowed calls). Planning is pure and cheap; a wake that queues
        // plans again with both.
        let mut builder = new_builder();
        let mut plans = planner(&[], request.planner.clone()).plan(&request.calls, &mut builder);
        if !builder.is_empty() {
            // Duplicates are per agent: an identical call of another agent on the same
            // target is that agent's own proposal (its own rules, its own person), never
            // dropped as this one's.
            let pending = change_sets::pending(
                tx.connection(),
                &change_sets::PendingFilter::all()
                    .target(request.target.clone())
                    .agent(request.agent_id.clone()),
            )
            .await?;
            // Only the rejections the agent's memory keeps (its window, less what a
            // person told Assent to forget) refuse a call again.
            let recent = if memory.window() > time::Duration::ZERO {
                let mut recent = decisions::recent(
                    tx.connection(),
                    &request.agent_id,
                    Some(&request.target),
                    REJECTION_LOOKBACK,
                )
                .await?;
                recent.retain(|decision| memory.remembers(decision, now));
                recent
            } else {
                Vec::new()
            };
            let config = assent_changeset::PlannerConfig {
                rejection_window: memory.window(),
                ..request.planner.clone()
            };
            builder = new_builder().with_pending(pending.iter().flat_map(|s| s.items.iter()));
            plans = planner(&recent, config).plan(&request.calls, &mut builder);
        }

        let mut answers = Vec::with_capacity(plans.len());
        // The immediate calls' audit records, chain entries and outbox messages, written
        // once before the commit.
        let mut written = WritePlan::default();
        // How often each (tool, arguments) ran before in this run: a repeat is an
        // operation of its own ([`OperationId::for_call`]).
        let mut seen: HashMap<(String, String), usize> = HashMap::new();
        // The category read above answers for the resolver until any host code runs in
        // this transaction (a handler, a local tool).
        let mut known_category = Some(category.clone());
        for planned in plans {
            // A call refused because a person rejected exactly it before is on the
            // record, naming that rejection, never only in the agent's reply.
            for refused in &planned.refused_again {
                written.audit(refused_again_record(&request, refused, now))?;
            }
            let lines = match planned.plan {
                CallPlan::Reply(text) => vec![Line::Said(text)],
                CallPlan::Execute {
                    invocations,
                    malformed,
                } => {
                    let mut lines = self
                        .execute_now(
                            &mut tx,
                            &policy,
                            &request,
                            invocations,
                            &mut seen,
                            &mut known_category,
                            snapshot.as_deref().and_then(TargetState::paths),
                            now,
                            &mut written,
                        )
                        .await?;
                    if lines.is_empty() {
                        lines.push(Line::Said(reply::NOTHING_TO_EXECUTE.to_owned()));
                    }
                    if malformed > 0 {
                        lines.push(Line::Said(reply::malformed_skipped(malformed)));
                    }
                    lines
                }
                CallPlan::HandleLocally { args } => {
                    // The host's code runs in this transaction: the category may change.
                    known_category = None;
                    vec![Line::Said(
                        self.handle_local_once(&mut tx, &request, &planned.tool_name, &args, now)
                            .await?,
                    )]
                }
            };
            answers.push((planned.tool_call_id, lines));
        }
        let set_id = request.change_set_id.unwrap_or_else(|| engine.new_id());
        let mut change_set = builder.build(set_id, now);
        if let Some(set) = &mut change_set {
            // The quorum each item needs is fixed now and travels with it, so every
            // device enforces it (it only grows with the settings in force later).
            for item in &mut set.items {
                let needed = settings.requirements(&item.tool_name).approvals_needed;
                item.approvals_needed = (needed > 1).then_some(needed);
            }
            set.vector_clock.tick(self.engine.store.device_id());
            change_sets::insert_served(tx.connection(), set, Some(self.engine.host.name()), now)
                .await?;
            self.mark_external_items(tx.connection(), set).await?;
        }
        written.apply(tx.connection(), now).await?;
        tx.commit().await?;
        let mut responses = Vec::with_capacity(answers.len());
        for (tool_call_id, lines) in answers {
            let mut said = Vec::with_capacity(lines.len());
            for line in lines {
                said.push(match line {
                    Line::Said(text) => text,
                    Line::Outside(call) => self.run_outside(&policy, call, now).await?,
                });
            }
            responses.push(ToolResponse::new(tool_call_id, said.join("\n")));
        }
        tracing::info!(
            queued = change_set.as_ref().map_or(0, |s| s.items.len()),
            "wake planned"
        );
        Ok(WakeOutcome::new(change_set, responses))
    }

    /// Records on each queued item of an external tool which host serves it, so a
    /// process without that host can confirm it (into the execution ledger).
    async fn mark_external_items(
        &self,
        conn: &mut AnyConnection,
        set: &ChangeSet,
    ) -> Result<(), ConfirmError> {
        let host = &self.engine.host;
        for (index, item) in set.items.iter().enumerate() {
            if let Effect::External { idempotent } = host.effect(&item.tool_name) {
                let external = jobs::ExternalItem {
                    host: host.name().to_owned(),
                    idempotent,
                };
                jobs::mark_external(conn, set.id, index, &external).await?;
            }
        }
        Ok(())
    }

    /// Runs a local tool at most once per run (a retried wake with the same run key
    /// gets the first reply back instead of storing the agent's notes twice), inside a
    /// savepoint so a failing host leaves nothing half-written.
    async fn handle_local_once(
        &self,
        tx: &mut WriteTx,
        request: &WakeRequest,
        tool_name: &str,
        args: &Value,
        now: OffsetDateTime,
    ) -> Result<String, ConfirmError> {
        let target = &request.target;
        let operation_id =
            OperationId::derive(&request.run_key, tool_name, args, &[target.id.as_str()]);
        if let Some(reply) = operations::applied(tx.connection(), &operation_id).await? {
            return Ok(reply);
        }
        let call = LocalCall {
            agent_id: &request.agent_id,
            target,
            tool_name,
            args,
            now,
        };
        let mut local = tx.savepoint().await?;
        match self
            .engine
            .host
            .handle_local(local.connection(), call)
            .await
        {
            Ok(reply) => {
                local.release().await?;
                operations::record_applied(
                    tx.connection(),
                    &operation_id,
                    tool_name,
                    target,
                    &reply,
                    now,
                )
                .await?;
                Ok(reply)
            }
            Err(error) => {
                local.rollback().await?;
                Ok(reply::local_failed(tool_name, &error.to_string()))
            }
        }
    }

    /// Runs (or admits, for an external tool) the calls to execute now; their audit
    /// records go to `written`. `known_category` is the target's category as the wake
    /// read it, while no handler ran in its transaction since (a call that runs here
    /// takes it away: its handler may have changed the category).
    #[allow(clippy::too_many_arguments)]
    async fn execute_now(
        &self,
        tx: &mut WriteTx,
        policy: &AgentPolicy,
        request: &WakeRequest,
        invocations: Vec<(String, Value)>,
        seen: &mut HashMap<(String, String), usize>,
        known_category: &mut Option<TargetCategory>,
        paths: Option<&dyn PathFacts>,
        now: OffsetDateTime,
        written: &mut WritePlan,
    ) -> Result<Vec<Line>, ConfirmError> {
        let engine = &self.engine;
        let audits = PlannedAudits::default();
        let mut lines = Vec::with_capacity(invocations.len());
        for (tool_name, args) in invocations {
            let Some(spec) = engine.registry.get(&tool_name) else {
                lines.push(Line::Said(reply::unknown_tool(&tool_name)));
                continue;
            };
            let occurrence = seen
                .entry((tool_name.clone(), assent_domain::canonical_json(&args)))
                .or_insert(0);
            let operation_id = OperationId::for_call(
                &request.run_key,
                &tool_name,
                &args,
                &request.target.id,
                *occurrence,
            );
            *occurrence += 1;
            let invocation = ToolInvocation::new(
                tool_name.clone(),
                args,
                request.run_key.clone(),
                operation_id,
                ExecutionTarget {
                    agent_id: request.agent_id.clone(),
                    target: request.target.clone(),
                },
                now,
            );
            let allowed_by = policy.allowed_by_call(
                spec,
                Some(CallContext {
                    args: &invocation.args,
                    target_id: &request.target.id,
                    paths,
                }),
            );
            let execution = ExecutionRequest {
                policy,
                spec,
                handler: engine.host.handler(&tool_name),
                invocation,
                confirmed_by_person: false,
                already_true: None,
                now,
                allowed_by,
            };
            let executor = AuditedExecutor::new(engine.host.resolver(), &audits)
                .with_known_category(known_category.clone())
                .with_paths(paths);
            // A tool whose effect lies outside the database never runs inside this
            // transaction (it would hold the writer lock for as long as the call
            // takes): admitted and audited here, called after the commit.
            let outcome = if let Some(intent) = external_intent(engine.host.effect(&tool_name)) {
                match executor.admit(tx.connection(), &execution, intent).await? {
                    Admission::Settled(outcome) => outcome,
                    Admission::Run(_) => {
                        lines.push(Line::Outside(Box::new(execution.invocation)));
                        continue;
                    }
                }
            } else {
                *known_category = None;
                executor.execute(tx, execution).await?
            };
            lines.push(Line::Said(said(&tool_name, outcome)));
        }
        audits.drain_into(written)?;
        Ok(lines)
    }

    /// Runs an admitted call of an external tool after the wake's commit: on a pooled
    /// connection outside any transaction, so no lock is held while it runs, bounded by
    /// the engine's lease (a call that outlives it is reported as possibly done); its
    /// result is recorded in a short transaction of its own.
    #[tracing::instrument(skip_all, fields(tool = %invocation.tool_name, operation_id = %invocation.operation_id))]
    async fn run_outside(
        &self,
        policy: &AgentPolicy,
        invocation: Box<ToolInvocation>,
        now: OffsetDateTime,
    ) -> Result<String, ConfirmError> {
        let engine = &self.engine;
        let tool_name = invocation.tool_name.clone();
        let (Some(spec), Some(handler)) = (
            engine.registry.get(&tool_name),
            engine.host.handler(&tool_name),
        ) else {
            return Ok(reply::unknown_tool(&tool_name));
        };
        let limit = std::time::Duration::try_from(engine.jobs.lease).unwrap_or_default();
        let mut conn = engine.store.read_connection().await?;
        let called =
            tokio::time::timeout(limit, CatchUnwind(handler.execute(&mut conn, &invocation))).await;
        drop(conn);
        let result = match called {
            Ok(Ok(Ok(outcome))) => Ok(outcome),
            Ok(Ok(Err(error))) => Err(error.to_string()),
            Ok(Err(panic)) => Err(panic),
            Err(_) => Err(format!(
                "the call did not finish within {} s; it may have happened",
                limit.as_secs()
            )),
        };
        let allowed_by = policy.allowed_by_call(
            spec,
            Some(CallContext {
                args: &invocation.args,
                target_id: &invocation.target.target.id,
                paths: None,
            }),
        );
        let execution = ExecutionRequest {
            policy,
            spec,
            handler: Some(handler),
            invocation: *invocation,
            confirmed_by_person: false,
            already_true: None,
            now,
            allowed_by,
        };
        let audits = PlannedAudits::default();
        let executor = AuditedExecutor::new(engine.host.resolver(), &audits);
        let target = &execution.invocation.target.target;
        let mut tx = engine.store.begin_write_on(target).await?;
        let intent = external_intent(engine.host.effect(&tool_name)).unwrap_or(Intent::Before);
        let outcome = executor
            .conclude(tx.connection(), &execution, result, intent)
            .await?;
        let mut written = WritePlan::default();
        audits.drain_into(&mut written)?;
        written.apply(tx.connection(), now).await?;
        tx.commit().await?;
        Ok(said(&tool_name, outcome))
    }
}

/// The audit record of a proposal refused because a person rejected exactly it before:
/// a policy refusal (`policyDenied`) whose `refusedBy` names the rejection
/// (`{"rejectedBefore": DECISION_ID}`), with what the agent was told.
fn refused_again_record(
    request: &WakeRequest,
    refused: &assent_changeset::RefusedAgain,
    now: OffsetDateTime,
) -> AuditRecord {
    AuditRecord {
        operation_id: OperationId::for_call(
            &request.run_key,
            &refused.tool_name,
            &refused.args,
            &request.target.id,
            0,
        ),
        run_key: request.run_key.clone(),
        tool_name: refused.tool_name.clone(),
        agent_id: request.agent_id.clone(),
        target_kind: request.target.kind.clone(),
        target_id: request.target.id.clone(),
        kind: AuditKind::PolicyDenied,
        args: refused.args.clone(),
        success: None,
        detail: Some(refused.reply.clone()),
        vector_clock: None,
        created_at: now,
        allowed_by: None,
        refused_by: Some(crate::rejections::refused_by(refused.decision_id)),
    }
}

/// When the action record of a call with effect `effect` is written, for a tool
/// whose effect lies outside the database; `None` for one that runs in the wake's
/// transaction.
fn external_intent(effect: Effect) -> Option<Intent> {
    match effect {
        Effect::External { idempotent: true } => Some(Intent::WithOutcome),
        Effect::External { idempotent: false } => Some(Intent::Before),
        Effect::Transactional => None,
    }
}

/// One line of the answer to an executed call: said already, or an external tool's
/// call admitted in the wake's transaction and run after its commit.
enum Line {
    Said(String),
    Outside(Box<ToolInvocation>),
}

/// What the agent reads of an executed call.
fn said(tool_name: &str, outcome: ExecutionOutcome) -> String {
    match outcome {
        ExecutionOutcome::Applied { message, .. }
        | ExecutionOutcome::AlreadyApplied { message } => message,
        ExecutionOutcome::AlreadyTrue { detail } => reply::skipped(&detail),
        ExecutionOutcome::Denied { reason } => reply::denied(&reason),
        ExecutionOutcome::Failed { error } => reply::run_failed(tool_name, &error),
        ExecutionOutcome::Queued { job_id, .. } | ExecutionOutcome::Scheduled { job_id, .. } => {
            reply::queued_as_job(&job_id)
        }
        ExecutionOutcome::AwaitingApprovals { approvals, needed } => {
            reply::awaiting_approvals(approvals, needed)
        }
    }
}
