//! One agent wake: plan the tool calls, run what may run now, queue the rest.

use crate::executor::{
    Admission, AuditedExecutor, CatchUnwind, ExecutionOutcome, ExecutionRequest, Intent,
};
use crate::{ConfirmError, Effect, Engine, LocalCall};
use assent_changeset::{CallPlan, ChangeSetBuilder, PlannerConfig, ToolCall, WakePlanner, reply};
use assent_domain::{ChangeSet, OperationId, Target};
use assent_store::decisions::wake as wake_read;
use assent_store::{
    WriteTx, change_sets, decisions, operations,
    plan::{PlannedAudits, WritePlan},
    webhooks,
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
    /// The persisted change set, if anything was queued: the one with the request's
    /// id, else the first of [`WakeOutcome::change_sets`].
    pub change_set: Option<ChangeSet>,
    /// Every change set the wake queued, one per target (more than one only when
    /// tools take their target from their arguments).
    pub change_sets: Vec<ChangeSet>,
    /// One reply per call, in order.
    pub responses: Vec<ToolResponse>,
}

/// A wake carried out in the caller's transaction ([`WakeService::wake_in`]), before
/// the caller commits: the change set it queued, and what is left to do once the
/// transaction has committed. Calls of tools whose effect lies outside the database
/// ([`crate::Effect::External`]) that may run at once were admitted and audited in
/// the transaction, but never run inside it (no foreign code under a database lock):
/// [`PendingWake::after_commit`] runs them and gives the agent's replies. Roll the
/// transaction back and drop this: nothing of the wake happened, and nothing runs.
#[must_use = "after the commit, `after_commit` runs the admitted external calls and gives the replies"]
pub struct PendingWake {
    service: WakeService,
    /// Per target: the positions of its calls in the wake, and what was planned.
    planned: Vec<(Vec<usize>, Planned)>,
    /// Replies already known (calls refused before planning), by position.
    replies: Vec<(usize, ToolResponse)>,
    request_set_id: Uuid,
    now: OffsetDateTime,
}

impl std::fmt::Debug for PendingWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWake")
            .field("change_set", &self.change_set().map(|set| set.id))
            .field("to_run_after_commit", &self.to_run_after_commit())
            .finish_non_exhaustive()
    }
}

impl PendingWake {
    /// The change set the wake queued with the request's id (else the first it
    /// queued), written in the caller's transaction: its id is known before the
    /// commit, for the caller's own rows.
    pub fn change_set(&self) -> Option<&ChangeSet> {
        let mut sets = self.change_sets();
        let first = self.change_sets().next();
        sets.find(|set| set.id == self.request_set_id).or(first)
    }

    /// Every change set the wake queued, one per target.
    pub fn change_sets(&self) -> impl Iterator<Item = &ChangeSet> {
        self.planned
            .iter()
            .filter_map(|(_, plan)| plan.change_set.as_ref())
    }

    /// How many admitted calls of external tools [`PendingWake::after_commit`] runs.
    pub fn to_run_after_commit(&self) -> usize {
        self.planned
            .iter()
            .flat_map(|(_, plan)| &plan.answers)
            .flat_map(|(_, lines)| lines)
            .filter(|line| matches!(line, Line::Outside(_)))
            .count()
    }

    /// Call once the caller's transaction has committed: runs the admitted calls of
    /// external tools (each bounded by the engine's lease, its result recorded in a
    /// short transaction of its own) and returns the wake's outcome, one reply per
    /// call. Never call it while holding a write transaction of the engine's store: a
    /// result's record waits for the writer lock you hold.
    pub async fn after_commit(self) -> Result<WakeOutcome, ConfirmError> {
        let mut replies = self.replies;
        let mut change_sets = Vec::new();
        for (positions, plan) in self.planned {
            for (position, (tool_call_id, lines)) in positions.into_iter().zip(plan.answers) {
                let mut said = Vec::with_capacity(lines.len());
                for line in lines {
                    said.push(match line {
                        Line::Said(text) => text,
                        Line::Outside(call) => {
                            let (call, given) = *call;
                            self.service
                                .run_outside(&given, Box::new(call), self.now)
                                .await?
                        }
                    });
                }
                replies.push((
                    position,
                    ToolResponse {
                        tool_call_id,
                        content: said.join("\n"),
                    },
                ));
            }
            change_sets.extend(plan.change_set);
        }
        replies.sort_by_key(|(position, _)| *position);
        let responses = replies.into_iter().map(|(_, response)| response).collect();
        let change_set = change_sets
            .iter()
            .find(|set| set.id == self.request_set_id)
            .or(change_sets.first())
            .cloned();
        Ok(WakeOutcome {
            change_set,
            change_sets,
            responses,
        })
    }
}

impl WakeOutcome {
    /// A wake's outcome: the set it queued (if any) and one reply per call.
    pub fn new(change_set: Option<ChangeSet>, responses: Vec<ToolResponse>) -> Self {
        Self {
            change_sets: change_set.iter().cloned().collect(),
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
    /// become one change set per target. Per-call problems (unknown tool, bad arguments,
    /// policy denial, a tool that takes its target from its arguments and finds none
    /// there) are replies, not errors; an error means nothing was written.
    ///
    /// A call of a tool that takes its target from its arguments
    /// ([`assent_tools::ToolSpec::target_from`]) is planned for that target, with its
    /// rules, state and category, and queued in that target's change set; the other
    /// calls act on the request's target. [`WakeOutcome::change_set`] is then the set
    /// with the request's id (else the first), [`WakeOutcome::change_sets`] all of them.
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
    /// let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
    ///     "name": "set_body", "input": {"body": "final"}}]))?;
    /// let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
    /// let wake = engine.wakes().wake(request, now).await?;
    /// // The call waits for a person: the agent reads that it was queued.
    /// assert_eq!(wake.responses[0].content, "Proposal queued for user review.");
    /// let set = wake.change_set.ok_or("nothing queued")?;
    /// assert_eq!(set.items[0].tool_name, "set_body");
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    #[tracing::instrument(skip_all, fields(agent = %request.agent_id, target = %request.target, run = %request.run_key, calls = request.calls.len()))]
    pub async fn wake(
        &self,
        request: WakeRequest,
        now: OffsetDateTime,
    ) -> Result<WakeOutcome, ConfirmError> {
        let routed = route_calls(&self.engine.registry, &request);
        // Everything a wake writes hangs off its targets (their sets, items, audit and
        // outbox rows, applied operations): on PostgreSQL a wake of one target locks
        // that target, so wakes and decisions on other targets run side by side; one
        // that routes calls to several targets takes the writer lock.
        let store = &self.engine.store;
        let mut tx = match routed.groups.as_slice() {
            [] => store.begin_write_on(&request.target).await?,
            [only] => store.begin_write_on(&only.target).await?,
            _ => store.begin_write().await?,
        };
        let (pending, writes) = self.wake_locked(&mut tx, request, routed, now).await?;
        // The wake's writes and its `COMMIT` enter the store once (on SQLite under one
        // lock of the connection).
        if writes.is_empty() {
            tx.commit().await?;
        } else {
            tx.commit_with(writes, now).await?;
        }
        pending.after_commit().await
    }

    /// [`WakeService::wake`] in the caller's write transaction `tx` (from
    /// [`Store::begin_write`] or [`Store::begin_write_on`] the request's target): the
    /// immediate and local calls run on it and the change sets are written in it;
    /// nothing is committed. Write your own rows on `tx.connection()` before or after
    /// (the queued set's id is [`PendingWake::change_set`]), commit, then call
    /// [`PendingWake::after_commit`] for the replies; roll back and drop it, and
    /// nothing of the wake happened. An error leaves `tx` as it was before the call.
    /// Never call the plain method while holding a write transaction of the same
    /// store: it waits for the writer lock you hold, and ends in
    /// [`StoreError::WriterBusy`] after the busy timeout.
    ///
    /// [`Store::begin_write`]: assent_store::Store::begin_write
    /// [`Store::begin_write_on`]: assent_store::Store::begin_write_on
    /// [`StoreError::WriterBusy`]: assent_store::StoreError::WriterBusy
    #[tracing::instrument(skip_all, fields(agent = %request.agent_id, target = %request.target, run = %request.run_key, calls = request.calls.len()))]
    pub async fn wake_in(
        &self,
        tx: &mut WriteTx,
        request: WakeRequest,
        now: OffsetDateTime,
    ) -> Result<PendingWake, ConfirmError> {
        let routed = route_calls(&self.engine.registry, &request);
        // Each target the wake writes, locked in one order (two such wakes never wait
        // on each other crosswise).
        let mut targets: Vec<&Target> = routed.groups.iter().map(|g| &g.target).collect();
        targets.push(&request.target);
        targets.sort_by(|a, b| (&a.kind, &a.id).cmp(&(&b.kind, &b.id)));
        targets.dedup();
        for target in targets {
            assent_store::Store::lock_target(tx.connection(), target).await?;
        }
        let mut scope = tx.savepoint().await?;
        let woken = match self.wake_locked(&mut scope, request, routed, now).await {
            // Written before the caller's own rows may name the set.
            Ok((pending, writes)) => writes
                .apply(scope.connection(), now)
                .await
                .map(|()| pending)
                .map_err(ConfirmError::from),
            Err(error) => Err(error),
        };
        match woken {
            Ok(pending) => {
                scope.release().await?;
                Ok(pending)
            }
            Err(error) => {
                scope.rollback().await?;
                Err(error)
            }
        }
    }

    /// The wake of `request`, routed to its targets, in `tx`, which holds their locks:
    /// what is left after the commit, and the writes to apply before it.
    async fn wake_locked(
        &self,
        tx: &mut WriteTx,
        request: WakeRequest,
        routed: Routed,
        now: OffsetDateTime,
    ) -> Result<(PendingWake, WritePlan), ConfirmError> {
        let engine = &self.engine;
        // The request's own set id, drawn from the engine's ids when it names none.
        let request_set_id = request.change_set_id.unwrap_or_else(|| engine.new_id());
        let mut id_taken = false;
        let mut planned = Vec::with_capacity(routed.groups.len());
        let mut replies = routed.refused;
        let mut writes = WritePlan::default();
        for group in routed.groups {
            let own_id =
                !id_taken && (group.target == request.target || !routed.has_request_target);
            id_taken |= own_id;
            let sub = WakeRequest {
                target: group.target.clone(),
                calls: group.calls.iter().map(|(_, call)| call.clone()).collect(),
                change_set_id: Some(if own_id {
                    request_set_id
                } else {
                    engine.new_id()
                }),
                ..request.clone()
            };
            match self.plan_in(tx, &sub, now).await {
                Ok(mut plan) => {
                    writes.extend(std::mem::take(&mut plan.writes));
                    planned.push((group, plan));
                }
                // A target named by a call's arguments that the host does not have: the
                // agent is told, for those calls alone (nothing of them was written).
                Err(ConfirmError::UnknownTarget(target)) if group.target != request.target => {
                    for (position, call) in group.calls {
                        replies.push((
                            position,
                            ToolResponse {
                                tool_call_id: call.id,
                                content: reply::no_such_target(&target.kind, &target.id),
                            },
                        ));
                    }
                }
                Err(error) => return Err(error),
            }
        }
        let queued: usize = planned
            .iter()
            .filter_map(|(_, plan)| plan.change_set.as_ref())
            .map(|set| set.items.len())
            .sum();
        // A wake that queued something waits for a person: worth an INFO line; one
        // that only ran or refused calls is routine.
        if queued > 0 {
            tracing::info!(queued, sets = planned.len(), "wake planned");
        } else {
            tracing::debug!(queued, "wake planned");
        }
        let pending = PendingWake {
            service: self.clone(),
            planned: planned
                .into_iter()
                .map(|(group, plan)| {
                    let positions = group.calls.iter().map(|(position, _)| *position).collect();
                    (positions, plan)
                })
                .collect(),
            replies,
            request_set_id,
            now,
        };
        Ok((pending, writes))
    }

    /// Plans the calls of `request` (all about its target) inside `tx`: runs what may
    /// run now, queues the rest as one change set; returns the lines of each call's
    /// answer (in order) for after the commit.
    async fn plan_in(
        &self,
        tx: &mut WriteTx,
        request: &WakeRequest,
        now: OffsetDateTime,
    ) -> Result<Planned, ConfirmError> {
        let engine = &self.engine;
        // The host is asked first (its state of the target, the category), then the
        // engine's tables are read once (issue 55): the agent's rules and, only for a
        // wake that queues, its open sets and recent decisions; whether it queues is
        // planned inside that read from the rules and the host's answers.
        let loaded = engine.host.snapshot(tx.connection(), &request.target).await;
        let unknown_target = matches!(loaded, Ok(None));
        let snapshot = match loaded {
            Ok(snapshot) => snapshot,
            Err(error) => {
                tracing::warn!(%error, "target state failed to load; proposals are kept unfiltered");
                None
            }
        };
        // Nothing ran in this transaction yet: the state, when it holds the category,
        // answers for the resolver.
        let category = if unknown_target {
            TargetCategory::Missing
        } else {
            crate::host::category_of(
                engine.host.resolver(),
                tx.connection(),
                &request.target,
                snapshot.as_deref().and_then(TargetState::category),
            )
            .await
        };
        let new_builder = || {
            ChangeSetBuilder::new(
                &request.agent_id,
                request.target.clone(),
                &request.thread_id,
                &request.run_key,
            )
            .with_max_items(request.max_items)
        };
        // Which operations the wake may run at once, planned as if every call were
        // allowed: whether each was applied (a retried wake's) is read with the rules,
        // before they are known. More than run is harmless; one it misses (a batch's
        // element numbered otherwise) the executor asks about itself.
        let candidates = if unknown_target {
            Vec::new()
        } else {
            let mut builder = new_builder();
            let plans = WakePlanner::new(
                &engine.registry,
                &allow_all(&category),
                category.clone(),
                now,
            )
            .with_snapshot(snapshot.as_deref())
            .with_config(request.planner.clone())
            .plan(&request.calls, &mut builder);
            run_now(&engine.registry, request, &plans)
        };
        // The open sets and recent decisions only ever stop a call from being queued
        // (a duplicate, a recent rejection): a wake that queues nothing without them
        // queues nothing with them, and is answered without reading them (the gateway's
        // and the hooks' allowed calls). Planning is pure and cheap: the read plans once
        // without them to know; a policy whose rules look at the history (read below)
        // is taken to queue.
        let queues = |rules: &wake_read::WakeRules| {
            if unknown_target {
                return false;
            }
            if rules.policy.history_window().is_some() {
                return true;
            }
            let mut builder = new_builder();
            WakePlanner::new(&engine.registry, &rules.policy, category.clone(), now)
                .with_snapshot(snapshot.as_deref())
                .with_config(request.planner.clone())
                .plan(&request.calls, &mut builder);
            !builder.is_empty()
        };
        let read = wake_read::read(
            tx.connection(),
            &request.agent_id,
            &request.target,
            REJECTION_LOOKBACK,
            now,
            &candidates,
            queues,
        )
        .await?
        .ok_or_else(|| ConfirmError::UnknownAgent(request.agent_id.clone()))?;
        if unknown_target {
            return Err(ConfirmError::UnknownTarget(request.target.clone()));
        }
        let wake_read::WakeRead {
            rules:
                wake_read::WakeRules {
                    policy,
                    settings,
                    memory,
                    ..
                },
            queuing,
            open_sets,
            recent,
            webhooks,
            applied,
            ..
        } = read;
        let applied: HashMap<OperationId, Option<String>> = applied.into_iter().collect();
        let mut runs = crate::history_rules::runs_for(
            tx.connection(),
            &policy,
            &request.agent_id,
            &request.thread_id,
            now,
        )
        .await?;
        let planner = |decisions, config| {
            WakePlanner::new(&engine.registry, &policy, category.clone(), now)
                .with_snapshot(snapshot.as_deref())
                .with_decisions(decisions)
                .with_config(config)
                .with_runs(&runs)
        };
        let mut builder = new_builder();
        let mut plans = planner(&[], request.planner.clone()).plan(&request.calls, &mut builder);
        if !builder.is_empty() {
            // Read with the rules when the wake was seen to queue (always, but for a
            // planner that would disagree with itself): duplicates are per agent (an
            // identical call of another agent on the same target is that agent's own
            // proposal, never dropped as this one's), and only the rejections the
            // agent's memory keeps refuse a call again.
            let (pending, recent) = if queuing {
                (open_sets, recent)
            } else {
                self.queuing_reads(tx, request, &memory, now).await?
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
        // The refusals of this wake (a call a person rejected before, a call the policy
        // refused): each on the record once per operation, so a retried wake does not
        // write them twice; whether one is there already is read once for all of them.
        let mut refusals = Vec::new();
        for planned in plans {
            // A call refused because a person rejected exactly it before is on the
            // record, naming that rejection, never only in the agent's reply.
            for refused in &planned.refused_again {
                refusals.push(refused_again_record(request, refused, now));
            }
            // A call the policy refused is on the record with what decided so (the rule
            // and who set it, the mode, the category): once per operation, so a
            // retried wake does not write it twice.
            if let (Some(denied), CallPlan::Reply(said)) = (&planned.policy_denied, &planned.plan) {
                let occurrence = seen
                    .entry((
                        planned.tool_name.clone(),
                        assent_domain::canonical_json(&denied.args),
                    ))
                    .or_insert(0);
                refusals.push(denied_record(
                    request,
                    &planned.tool_name,
                    denied,
                    said,
                    *occurrence,
                    now,
                ));
                *occurrence += 1;
            }
            let lines = match planned.plan {
                CallPlan::Reply(text) => vec![Line::Said(text)],
                CallPlan::Execute {
                    invocations,
                    malformed,
                } => {
                    let mut lines = self
                        .execute_now(
                            tx,
                            (&policy, &mut runs),
                            request,
                            invocations,
                            &mut seen,
                            &mut known_category,
                            &applied,
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
                        self.handle_local_once(tx, request, &planned.tool_name, &args, now)
                            .await?,
                    )]
                }
            };
            answers.push((planned.tool_call_id, lines));
        }
        if !refusals.is_empty() {
            let ids: Vec<&str> = refusals
                .iter()
                .map(|record: &AuditRecord| record.operation_id.as_str())
                .collect();
            let recorded = assent_store::why::operations_with_record(
                tx.connection(),
                &ids,
                AuditKind::PolicyDenied,
            )
            .await?;
            for record in refusals {
                if !recorded.contains(record.operation_id.as_str()) {
                    written.audit(record)?;
                }
            }
        }
        let set_id = request.change_set_id.unwrap_or_else(|| engine.new_id());
        let mut change_set = builder.build(set_id, now);
        if let Some(set) = &mut change_set {
            // The quorum each item needs is fixed now and travels with it, so every
            // device enforces it (it only grows with the settings in force later).
            for item in &mut set.items {
                let call = CallContext::new(&item.args, &request.target.id);
                let needed = settings.requirements(&item.tool_name).approvals_needed.max(
                    crate::history_rules::policy_for(&policy, &runs, call, now)
                        .condition_approvals(&item.tool_name, Some(call))
                        .unwrap_or(1),
                );
                item.approvals_needed = (needed > 1).then_some(needed);
            }
            set.vector_clock.tick(self.engine.store.device_id());
            // Each item of an external tool records which host serves it, so a process
            // without that host can confirm it (into the execution ledger).
            let host = &self.engine.host;
            let effects: Vec<Option<bool>> = set
                .items
                .iter()
                .map(|item| match host.effect(&item.tool_name) {
                    Effect::External { idempotent } => Some(idempotent),
                    Effect::Transactional => None,
                })
                .collect();
            change_sets::plan_insert_served(
                &mut written,
                assent_store::Backend::of(tx.connection()),
                set,
                Some(host.name()),
                &effects,
            )?;
            if webhooks {
                webhooks::enqueue_set_event(
                    tx.connection(),
                    webhooks::event::CHANGE_SET_CREATED,
                    set,
                    now,
                )
                .await?;
            }
        }
        Ok(Planned {
            answers,
            change_set,
            writes: written,
        })
    }

    /// The agent's open sets on the wake's target and the rejections its memory keeps
    /// there: what [`wake_read::read`] reads for a wake that queues, read on their own.
    async fn queuing_reads(
        &self,
        tx: &mut WriteTx,
        request: &WakeRequest,
        memory: &assent_store::rejections::RejectionMemory,
        now: OffsetDateTime,
    ) -> Result<(Vec<ChangeSet>, Vec<assent_domain::ChangeDecision>), ConfirmError> {
        let pending = change_sets::pending(
            tx.connection(),
            &change_sets::PendingFilter::all()
                .target(request.target.clone())
                .agent(request.agent_id.clone()),
        )
        .await?;
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
        Ok((pending, recent))
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
        (policy, runs): (&AgentPolicy, &mut Vec<assent_tools::PastRun>),
        request: &WakeRequest,
        invocations: Vec<(String, Value)>,
        seen: &mut HashMap<(String, String), usize>,
        known_category: &mut Option<TargetCategory>,
        applied: &HashMap<OperationId, Option<String>>,
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
            let call = CallContext {
                args: &invocation.args,
                target_id: &request.target.id,
                paths,
            };
            // The rules' conditions judged for this call, on what ran before it.
            let given = crate::history_rules::policy_for(policy, runs, call, now);
            let allowed_by = given.allowed_by_call(spec, Some(call));
            if policy.has_conditions() {
                runs.push(crate::history_rules::ran_now(&tool_name, call, now));
            }
            let execution = ExecutionRequest {
                policy: &given,
                spec,
                handler: engine.host.handler(&tool_name),
                invocation,
                confirmed_by_person: false,
                already_true: None,
                now,
                allowed_by,
            };
            // Whether the operation was applied, as the wake's read found (when it asked).
            let known_applied = applied.get(&execution.invocation.operation_id).cloned();
            let executor = AuditedExecutor::new(engine.host.resolver(), &audits)
                .with_known_category(known_category.clone())
                .with_known_applied(known_applied)
                .with_paths(paths);
            // A tool whose effect lies outside the database never runs inside this
            // transaction (it would hold the writer lock for as long as the call
            // takes): admitted and audited here, called after the commit.
            let outcome = if let Some(intent) = external_intent(engine.host.effect(&tool_name)) {
                match executor.admit(tx.connection(), &execution, intent).await? {
                    Admission::Settled(outcome) => outcome,
                    Admission::Run(_) => {
                        lines.push(Line::Outside(Box::new((execution.invocation, given))));
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
        // Its records and its applied operation are planned, and written with the
        // `COMMIT` (on SQLite under one lock of the connection): after the call, the
        // store is entered once to write.
        let executor =
            AuditedExecutor::new(engine.host.resolver(), &audits).planning_applied(&audits);
        let target = &execution.invocation.target.target;
        let mut tx = engine.store.begin_write_on(target).await?;
        let intent = external_intent(engine.host.effect(&tool_name)).unwrap_or(Intent::Before);
        let outcome = executor
            .conclude(tx.connection(), &execution, result, intent)
            .await?;
        let mut written = WritePlan::default();
        audits.drain_into(&mut written)?;
        tx.commit_with(written, now).await?;
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
        decided_by: None,
    }
}

/// The audit record of a call the policy refused in the wake (a rule, the category):
/// a `policyDenied` record whose `decidedBy` names what decided (the rule with where
/// it came from, the tool's mode, the category), with what the agent was told. Its
/// operation id is the call's, as a call that ran would have had (`occurrence`: how
/// often the same call came before in this wake).
fn denied_record(
    request: &WakeRequest,
    tool_name: &str,
    denied: &assent_changeset::PolicyDenied,
    said: &str,
    occurrence: usize,
    now: OffsetDateTime,
) -> AuditRecord {
    AuditRecord {
        operation_id: OperationId::for_call(
            &request.run_key,
            tool_name,
            &denied.args,
            &request.target.id,
            occurrence,
        ),
        run_key: request.run_key.clone(),
        tool_name: tool_name.to_owned(),
        agent_id: request.agent_id.clone(),
        target_kind: request.target.kind.clone(),
        target_id: request.target.id.clone(),
        kind: AuditKind::PolicyDenied,
        args: denied.args.clone(),
        success: Some(false),
        detail: Some(said.to_owned()),
        vector_clock: None,
        created_at: now,
        allowed_by: None,
        refused_by: None,
        decided_by: Some(denied.decided_by.clone()),
    }
}

/// A policy that lets every call on a target of `category` run: what a wake plans
/// with to know which operations it may run at once, before the agent's rules are read.
fn allow_all(category: &TargetCategory) -> AgentPolicy {
    let categories = match category {
        TargetCategory::Known(category) => vec![category.clone()],
        _ => Vec::new(),
    };
    let policy = AgentPolicy::new(categories);
    match assent_tools::ToolRule::new("*", assent_tools::RuleAction::Allow) {
        Ok(rule) => policy.with_rule(rule),
        Err(_) => policy,
    }
}

/// The operations of the calls `plans` runs at once, as [`WakeService::plan_in`] numbers
/// them: a call repeated in one run is an operation of its own, counted over the
/// calls the policy refused and those that run ([`OperationId::for_call`]).
fn run_now(
    registry: &assent_tools::ToolRegistry,
    request: &WakeRequest,
    plans: &[assent_changeset::PlannedCall],
) -> Vec<OperationId> {
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut operations = Vec::new();
    for planned in plans {
        if let (Some(denied), CallPlan::Reply(_)) = (&planned.policy_denied, &planned.plan) {
            *seen
                .entry((
                    planned.tool_name.clone(),
                    assent_domain::canonical_json(&denied.args),
                ))
                .or_insert(0) += 1;
        }
        if let CallPlan::Execute { invocations, .. } = &planned.plan {
            for (tool_name, args) in invocations {
                if registry.get(tool_name).is_none() {
                    continue;
                }
                let occurrence = seen
                    .entry((tool_name.clone(), assent_domain::canonical_json(args)))
                    .or_insert(0);
                operations.push(OperationId::for_call(
                    &request.run_key,
                    tool_name,
                    args,
                    &request.target.id,
                    *occurrence,
                ));
                *occurrence += 1;
            }
        }
    }
    operations
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

/// What [`WakeService::plan_in`] planned for one target: each call's answer (an
/// outside call with the policy it was admitted under), and the set it queued.
struct Planned {
    answers: Vec<(String, Vec<Line>)>,
    change_set: Option<ChangeSet>,
    /// What the wake writes for this target (its set, the immediate calls' audit
    /// records), applied once with the wake's commit.
    writes: WritePlan,
}

/// The calls of a wake about one target, each with its position in the wake.
struct Group {
    target: Target,
    calls: Vec<(usize, ToolCall)>,
}

/// A wake's calls by target: the groups (the request's target first when it has
/// calls, then in the order calls first name them), the replies of calls refused
/// because their arguments name no target, and whether the request's target has a
/// group.
struct Routed {
    groups: Vec<Group>,
    refused: Vec<(usize, ToolResponse)>,
    has_request_target: bool,
}

/// Routes each call of `request` to its target: the one its arguments name when its
/// tool takes it from them ([`assent_tools::ToolSpec::target_from`]), else the
/// request's. A wake without calls keeps one empty group for its target (its agent
/// and target are still checked). Arguments that cannot be read stay with the
/// request's target, where the planner refuses them.
fn route_calls(registry: &assent_tools::ToolRegistry, request: &WakeRequest) -> Routed {
    let mut groups: Vec<Group> = vec![Group {
        target: request.target.clone(),
        calls: Vec::new(),
    }];
    let mut refused = Vec::new();
    for (position, call) in request.calls.iter().enumerate() {
        let from = registry
            .get(&call.name)
            .and_then(|spec| spec.target_from.as_ref());
        let args = match (&call.arguments, from) {
            (_, None) => None,
            (assent_changeset::ToolArguments::Value(args), Some(_)) => Some(args.clone()),
            (assent_changeset::ToolArguments::Text(text), Some(_)) => {
                serde_json::from_str::<Value>(text).ok()
            }
            // A shape of arguments this release does not know: left with the request's
            // target, where the planner refuses what it cannot read.
            (_, Some(_)) => None,
        };
        let target = match (from, args) {
            (Some(from), Some(args)) => match from.target_in(&args) {
                Some(target) => target,
                None => {
                    refused.push((
                        position,
                        ToolResponse {
                            tool_call_id: call.id.clone(),
                            content: reply::no_target_in_args(
                                &call.name,
                                &from.kind,
                                &from.pointer,
                            ),
                        },
                    ));
                    continue;
                }
            },
            _ => request.target.clone(),
        };
        match groups.iter_mut().find(|group| group.target == target) {
            Some(group) => group.calls.push((position, call.clone())),
            None => groups.push(Group {
                target,
                calls: vec![(position, call.clone())],
            }),
        }
    }
    let has_request_target = !groups[0].calls.is_empty() || request.calls.is_empty();
    if !has_request_target {
        groups.remove(0);
    }
    Routed {
        groups,
        refused,
        has_request_target,
    }
}

/// One line of the answer to an executed call: said already, or an external tool's
/// call admitted in the wake's transaction and run after its commit.
enum Line {
    Said(String),
    /// With the policy the call was admitted under (its conditions judged).
    Outside(Box<(ToolInvocation, AgentPolicy)>),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ItemRef, SimpleHost};
    use assent_changeset::parse_tool_calls;
    use assent_store::Store;
    use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
    use serde_json::json;
    use std::sync::Arc;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    /// A billing engine: `issue_refund {order_id, cents}` acts on the order its
    /// arguments name; `note {text}` on the wake's target. Agent `a` may use both.
    async fn billing() -> Engine {
        let mut tools = ToolRegistry::new();
        let schema = json!({"type": "object", "required": ["order_id", "cents"],
            "properties": {"order_id": {"type": ["string", "integer"]}, "cents": {"type": "integer"}}});
        let refund = ToolSpec::new("issue_refund", "Refund.", ToolMode::Deferred, schema)
            .target_from("order", "/order_id");
        tools.register(refund).expect("registered");
        let note = ToolSpec::new(
            "note",
            "Note.",
            ToolMode::Deferred,
            json!({"type": "object"}),
        );
        tools.register(note).expect("registered");
        let host = SimpleHost::new("billing")
            .handle("issue_refund", |_, call| {
                let order = call.target.target.id.clone();
                Box::pin(async move { Ok(format!("refunded {order}")) })
            })
            .handle("note", |_, _| Box::pin(async { Ok("noted") }))
            // The agent may act on `billing` targets only; order o-vip is `vip`.
            .category(|_, target| {
                let category = if target.id == "o-vip" {
                    "vip"
                } else {
                    "billing"
                };
                Box::pin(async move { Ok(Some(category.to_owned())) })
            });
        let store = Store::open("sqlite::memory:").await.expect("a store");
        let engine = Engine::open(store, Arc::new(tools), Arc::new(host))
            .await
            .expect("an engine");
        engine
            .set_categories("a", &["billing".to_owned()], T0)
            .await
            .expect("an agent");
        engine
    }

    fn calls(document: Value) -> Vec<ToolCall> {
        parse_tool_calls(&document).expect("calls")
    }

    #[tokio::test]
    async fn calls_that_name_their_order_are_queued_per_order() {
        let engine = billing().await;
        let request = WakeRequest::new(
            "a",
            Target::new("customer", "c-1"),
            "run-1",
            calls(json!([
                {"type": "tool_use", "id": "r7", "name": "issue_refund", "input": {"order_id": "o-7", "cents": 500}},
                {"type": "tool_use", "id": "n1", "name": "note", "input": {"text": "asked twice"}},
                {"type": "tool_use", "id": "r8", "name": "issue_refund", "input": {"order_id": "o-8", "cents": 200}},
                {"type": "tool_use", "id": "bad", "name": "issue_refund", "input": {"order_id": ["o-9"], "cents": 1}},
                {"type": "tool_use", "id": "r7b", "name": "issue_refund", "input": {"order_id": "o-7", "cents": 100}},
                {"type": "tool_use", "id": "vip", "name": "issue_refund", "input": {"order_id": "o-vip", "cents": 100}},
            ])),
        );
        let own_id = request.change_set_id;
        let wake = engine.wakes().wake(request, T0).await.expect("a wake");

        let sets: Vec<(String, usize)> = wake
            .change_sets
            .iter()
            .map(|set| (set.target().to_string(), set.items.len()))
            .collect();
        assert_eq!(
            sets,
            [
                ("customer c-1".to_owned(), 1),
                ("order o-7".to_owned(), 2),
                ("order o-8".to_owned(), 1)
            ],
            "one set per target, the wake's own first"
        );
        let own = wake.change_set.as_ref().expect("the wake's set");
        // The request named no id: the engine drew the wake's own set's.
        assert!(own_id.is_none_or(|id| id == own.id));
        assert_eq!(own.target().to_string(), "customer c-1");
        assert_eq!(own.items[0].tool_name, "note");
        let ids: Vec<&str> = wake
            .responses
            .iter()
            .map(|r| r.tool_call_id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["r7", "n1", "r8", "bad", "r7b", "vip"],
            "answers in the calls' order"
        );
        // The order's own category decides, not the wake's target's: an order the
        // agent may not touch is refused, and nothing is queued for it.
        assert!(
            wake.responses[5].content.starts_with("Denied by policy"),
            "{}",
            wake.responses[5].content
        );
        assert_eq!(
            wake.responses[3].content,
            reply::no_target_in_args("issue_refund", "order", "/order_id")
        );
        for queued in [0, 1, 2, 4] {
            assert_eq!(wake.responses[queued].content, reply::QUEUED, "{queued}");
        }
        let listed = engine
            .pending(&crate::records::ItemFilter::new().target(Target::new("order", "o-8")))
            .await
            .expect("listed");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].args["cents"], 200);
    }

    #[tokio::test]
    async fn an_edit_cannot_move_a_call_to_another_order() {
        let engine = billing().await;
        let request = WakeRequest::new(
            "a",
            Target::new("customer", "c-1"),
            "run-1",
            calls(
                json!([{"type": "tool_use", "id": "r7", "name": "issue_refund",
                "input": {"order_id": "o-7", "cents": 500}}]),
            ),
        );
        let wake = engine.wakes().wake(request, T0).await.expect("a wake");
        let set = wake.change_set.expect("queued");
        assert_eq!(set.target(), Target::new("order", "o-7"));
        let item = ItemRef::new(set.id, 0);
        let service = engine.confirmations();
        let moved = service
            .edit_and_confirm(item, json!({"order_id": "o-8", "cents": 500}), T0)
            .await;
        let Err(error) = moved else {
            panic!("the edit moved the refund: {moved:?}");
        };
        assert!(
            matches!(error, ConfirmError::EditMovesTarget { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("an edit cannot move the call to another target"),
            "{error}"
        );
        let still = engine
            .change_set(set.id)
            .await
            .expect("read")
            .expect("a set");
        assert_eq!(
            still.items[0].status,
            assent_domain::ChangeItemStatus::Pending
        );

        let confirmed = service
            .edit_and_confirm(item, json!({"order_id": "o-7", "cents": 300}), T0)
            .await
            .expect("an edit on the same order runs");
        assert_eq!(
            confirmed.decision.edited_args,
            Some(json!({"order_id": "o-7", "cents": 300}))
        );
        let crate::ExecutionOutcome::Applied { message, .. } = confirmed.execution else {
            panic!("not applied: {:?}", confirmed.execution);
        };
        assert_eq!(message, "refunded o-7", "the handler acts on the order");
    }
}
