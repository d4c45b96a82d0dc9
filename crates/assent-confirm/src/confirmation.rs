//! Applying a person's decisions, exactly once.
//!
//! Every decision runs in one write transaction (`BEGIN IMMEDIATE`; on PostgreSQL under
//! the lock of the set's target) that re-reads the set, so
//! of two concurrent confirmations of one item (on this device or through another
//! process) the second sees the first's result and is refused with a conflict. A
//! confirmation claims the item only while it is still `pending` (or `deferred`), runs
//! the policy and the handler through the audited executor, and writes the decision,
//! the item and set statuses, the audit records and their outbox messages before it
//! commits. A failing handler leaves no decision and the item pending. Confirm-all
//! decides a whole set in one commit, each item inside its own savepoint. An item of a
//! tool whose effect lies outside the database is confirmed into the execution ledger
//! instead: the decision and a job, committed together, run later by an executor of
//! the item's host (see `ledger`).

use crate::attribution::Attribution;
use crate::decide::{self, Count, NewApproval, Route};
use crate::executor::{AuditedExecutor, ExecutionOutcome, ExecutionRequest};
use crate::host::Decided;
use crate::{ConfirmError, ConflictKind, Engine};
use assent_changeset::reply;
use assent_domain::{
    ChangeDecision, ChangeItemStatus, ChangeSet, ItemRef, OperationId, Target, Verdict,
};
use assent_store::plan::{PlannedAudits, WritePlan};
use assent_store::{
    Backend, Connection, agents, approvals, change_sets, host_tools, jobs, mcp_sessions, waits,
};
use assent_tools::{
    AgentPolicy, ArgProblem, CallContext, Coverage, ExecutionTarget, PastOutcome, PolicyDecision,
    RuleAction, TargetFrom, ToolInvocation, ToolMode, ToolRegistry, ToolSpec, ToolsError,
};
use serde_json::Value;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// A write transaction of the store.
use assent_store::WriteTx;

/// How long after its wait ended a caller that withdraws its item then (a coding
/// agent's hook) is still given to do so, before a confirmation counts it as gone.
pub const WITHDRAW_GRACE: Duration = Duration::seconds(10);

/// The time to live of an open set that the CLI chooses (`assent expire`, `assent
/// serve`): seven days. A service chooses its own at open ([`crate::Expiry`]).
pub const DEFAULT_EXPIRY_TTL: Duration = Duration::days(7);

/// A successful confirmation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConfirmOutcome {
    /// The decision recorded.
    pub decision: ChangeDecision,
    /// What the executor did (applied, already true, already applied).
    pub execution: ExecutionOutcome,
}

impl ConfirmOutcome {
    /// The decision recorded and what the executor did.
    pub fn new(decision: ChangeDecision, execution: ExecutionOutcome) -> Self {
        Self {
            decision,
            execution,
        }
    }

    /// One line for a person: what happened.
    pub fn message(&self) -> String {
        match &self.execution {
            ExecutionOutcome::Applied { message, .. } => message.clone(),
            ExecutionOutcome::AlreadyTrue { detail } => reply::confirmed_unchanged(detail),
            ExecutionOutcome::AlreadyApplied { message } => {
                format!("Confirmed; it had already been applied: {message}")
            }
            ExecutionOutcome::Denied { reason } => format!("Denied: {reason}"),
            ExecutionOutcome::Failed { error } => format!("Failed: {error}"),
            // A coding agent's call is run by the agent, once its hook takes the answer,
            // or by the MCP gateway: how it went arrives later (`assent show`).
            ExecutionOutcome::Queued { job_id, .. }
                if self.decision.target_kind == crate::session::HOOK_TARGET_KIND =>
            {
                format!(
                    "Confirmed; the agent runs the call once its hook takes this answer (job {job_id}); `assent show` tells how it went."
                )
            }
            ExecutionOutcome::Queued { job_id, .. }
                if self.decision.target_kind == crate::session::MCP_TARGET_KIND =>
            {
                format!(
                    "Confirmed; the gateway runs the call on its MCP server (job {job_id}); `assent show` tells how it went."
                )
            }
            ExecutionOutcome::Queued { job_id, host } => {
                format!("Approved; it runs when an executor of {host} claims job {job_id}.")
            }
            ExecutionOutcome::AwaitingApprovals { approvals, needed } => {
                let left = (*needed as usize).saturating_sub(*approvals);
                let who = if left == 1 {
                    "1 more person approves".to_owned()
                } else {
                    format!("{left} more people approve")
                };
                format!("Approved: {approvals} of {needed} approvals; it runs once {who}.")
            }
            ExecutionOutcome::Scheduled {
                job_id, not_before, ..
            } => format!(
                "Confirmed and held until {}: it runs then unless cancelled (job {job_id}).",
                assent_store::timefmt::format(*not_before)
            ),
        }
    }
}

/// The result for one item of [`ConfirmationService::confirm_all`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ItemResult {
    /// Confirmed now.
    Confirmed(Box<ConfirmOutcome>),
    /// Not attempted: already decided, or deferred by a person.
    Skipped(String),
    /// Attempted and refused; the item is unchanged.
    Failed(ConfirmError),
}

/// The results of [`ConfirmationService::confirm_all`], one per item, in order.
#[derive(Debug)]
#[non_exhaustive]
pub struct ConfirmAllResult {
    /// The set.
    pub change_set_id: Uuid,
    /// One per item of the set, in order.
    pub items: Vec<ConfirmAllItem>,
}

/// One item's line of [`ConfirmAllResult`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ConfirmAllItem {
    /// The item's index in its set.
    pub index: usize,
    /// The item's human summary.
    pub summary: String,
    /// What became of it.
    pub result: ItemResult,
}

/// `{rule, agreed}` of the first of `shadows` covering `decision`'s tool (a conditional
/// one only where its condition held, judged on the agent's `runs` before the
/// decision, as its report counts it): what that rule would have done beside what the
/// person did, as it is decided.
fn shadow_verdict(
    shadows: &[agents::ShadowRule],
    decision: &ChangeDecision,
    runs: &[assent_tools::PastRun],
) -> Option<Value> {
    let call = CallContext {
        args: decision.edited_args.as_ref().unwrap_or(&decision.args),
        target_id: &decision.target_id,
        paths: None,
    };
    let shadow = shadows.iter().find(|s| {
        s.rule.covers(&decision.tool_name, Some(call)) == Coverage::Yes
            && assent_tools::applies_at(&s.rule, call, runs, decision.created_at)
    })?;
    let outcome = PastOutcome::of(decision.verdict, decision.edited_args.is_some())?;
    let action = shadow.rule.action();
    Some(serde_json::json!({
        "rule": action.as_str(),
        "agreed": assent_tools::shadow_agrees(action, outcome),
    }))
}

/// A confirmation that meets its item's quorum (or needs none): the arguments to run
/// and the approval to record once it succeeds ([`ConfirmationService::gather`]).
struct Met {
    edited_args: Option<Value>,
    approval: Option<NewApproval>,
}

/// A held tool's confirmation ([`ConfirmationService::schedule`]): its window, and the
/// item's revision as the decision read it (who approved it, named on the job).
struct Held {
    hold: Duration,
    revision: approvals::Revision,
}

/// What [`ConfirmationService::gather`] found of an item's quorum.
enum Gathered {
    /// Met (or none needed): go on and run it.
    Met(Met),
    /// Recorded as one approval short of it: the outcome to return.
    Waiting(Box<ConfirmOutcome>),
}

/// How an attempt to confirm an item inside a transaction ended. (An `Err` beside it
/// means nothing of the item may stay: roll back.)
enum Attempt {
    /// Decided, or an approval recorded short of the quorum: the set in memory holds
    /// the new statuses.
    Decided(Box<ConfirmOutcome>),
    /// The policy, the handler or a changed target refused: only the audit records
    /// (and a stale item's refresh) were written, and they stay.
    Refused(ConfirmError),
    /// The handler failed, and its writes are still in the attempt's scope, which
    /// wrote nothing else: roll the scope back (its transaction, or its savepoint in
    /// confirm-all), then apply the plan, whose audit records stay. The handler runs
    /// without a savepoint of its own, two statements fewer on every confirmation.
    Undone(ConfirmError),
}

/// What the decisions on one set in one transaction share: what was read with the set
/// (the agent's rules and who serves each item: [`change_sets::load_for_decision`]),
/// and, in confirm-all, the items decided so far, whose statuses are written once at
/// its end, not once per item.
struct Batch {
    /// The agent's rules, or `None` when this database has no such agent.
    rules: Option<agents::StoredRules>,
    /// Who serves each item of the set, in item order.
    served: Vec<jobs::ServedItem>,
    /// The items decided so far, whose statuses (and the set's) are written at the
    /// transaction's end; `None`: each decision writes its own.
    deferred_statuses: Option<Vec<usize>>,
    /// The calls run so far in this transaction (their audit records are applied at its
    /// end): a condition over the history judged for a later item counts them.
    ran: Vec<assent_tools::PastRun>,
    /// Which of the items' operations were applied, as read with the set.
    applied: change_sets::AppliedRead,
    /// Each item's current revision and its approvals, as read with the set: its
    /// quorum is counted, and a held call's approvers named, from them.
    revisions: Vec<approvals::Revision>,
}

impl Batch {
    /// The batch of one decision, on what was read with the set (`read`'s set is
    /// the caller's), and the plan of its writes, whose chain entries go after the
    /// chain's head as the read found it ([`WritePlan::after_head`]).
    fn one(read: change_sets::DecisionRead) -> (ChangeSet, Self, WritePlan) {
        let mut plan = WritePlan::default();
        plan.after_head(read.chain_head);
        let batch = Self {
            rules: read.rules,
            served: read.served,
            deferred_statuses: None,
            ran: Vec::new(),
            applied: read.applied,
            revisions: read.revisions,
        };
        (read.set, batch, plan)
    }

    /// [`Self::one`], its decisions leaving their statuses to its end
    /// ([`Self::deferred_statuses`]).
    fn deferring_statuses(read: change_sets::DecisionRead) -> (ChangeSet, Self, WritePlan) {
        let (set, batch, plan) = Self::one(read);
        let batch = Self {
            deferred_statuses: Some(Vec::new()),
            ..batch
        };
        (set, batch, plan)
    }

    /// Item `index`'s current revision as read with the set.
    fn revision(&self, index: usize) -> approvals::Revision {
        self.revisions.get(index).cloned().unwrap_or_default()
    }

    /// The policy of `agent` at `now` and its settings of `tool`. An agent this
    /// database lacks (its set came from another device) has no rules here to check:
    /// refused, saying so, before anything is written.
    fn rules_of(
        &self,
        agent: &str,
        tool: &str,
        now: OffsetDateTime,
    ) -> Result<(AgentPolicy, agents::ToolSettings), ConfirmError> {
        let rules = self
            .rules
            .as_ref()
            .ok_or_else(|| ConfirmError::AgentNotHere(agent.to_owned()))?;
        Ok(rules.at(tool, now))
    }
}

/// The operation item `index` of `set` runs as when confirmed with `edited_args` (or as
/// proposed), for the decision's read to look up with the set
/// ([`change_sets::load_for_decision_with`]).
fn operation_of(set: &ChangeSet, index: usize, edited_args: Option<&Value>) -> Vec<OperationId> {
    let Some(item) = set.items.get(index) else {
        return Vec::new();
    };
    vec![OperationId::for_proposal(
        &set.run_key,
        &item.tool_name,
        edited_args.unwrap_or(&item.args),
        &set.target_id,
        set.id,
        index,
    )]
}

/// The shadow rules among the agent's `rules` as read with its set (none for an agent
/// this database lacks).
fn shadow_rules_of(rules: Option<&agents::StoredRules>) -> Vec<agents::ShadowRule> {
    rules
        .map(|rules| rules.shadow_rules().to_vec())
        .unwrap_or_default()
}

impl NewApproval {
    /// Plans this approval of item `index` of set `change_set_id`, made at `at`: its
    /// row and chain entry are written with the decision (or the job) it counts
    /// toward ([`approvals::plan_record`]).
    fn plan(&self, plan: &mut WritePlan, change_set_id: Uuid, index: usize, at: OffsetDateTime) {
        let (revision, by, args) = (self.revision, &self.by, &self.args);
        approvals::plan_record(plan, change_set_id, index, revision, by, args, at);
    }
}

/// `decided` once its `plan` is applied on `conn` (in the decision's scope): the
/// decision's writes and the decision stand together, or the first error is returned
/// (and the plan dropped unapplied) for the caller to roll its scope back.
async fn applied<T>(
    decided: Result<T, ConfirmError>,
    plan: WritePlan,
    conn: &mut Connection,
    now: OffsetDateTime,
) -> Result<T, ConfirmError> {
    let decided = decided?;
    plan.apply(conn, now).await?;
    Ok(decided)
}

/// A person's reason, trimmed and bounded (see [`assent_domain::clean_reason`]).
fn clean_reason(reason: Option<String>) -> Result<Option<String>, ConfirmError> {
    Ok(assent_domain::clean_reason(reason)?)
}

/// A person's decisions on change sets.
#[derive(Clone)]
pub struct ConfirmationService {
    pub(crate) engine: Engine,
    /// Who decides (a token's id, `--as`, the OS user): needed for a tool whose items
    /// need more than one person's approval, and recorded with each approval.
    reviewer: Option<String>,
    /// Set when the decisions answer a sub-agent's question: each decision is then
    /// linked to the asking agent path in the same transaction.
    attribution: Option<Attribution>,
    /// The item revision the person was shown (`--revision N`, the API's `revision`):
    /// a confirmation is refused once the item moved past it.
    shown_revision: Option<u32>,
    /// The credential deciding, when it names no person (`token 3fa9…`): it decides
    /// what one person may, and counts toward no quorum.
    unnamed: Option<String>,
}

/// What a person decided, before it is written.
pub(crate) struct Verdicts {
    pub(crate) verdict: Verdict,
    pub(crate) reason: Option<String>,
    pub(crate) edited_args: Option<Value>,
    /// A confirmation's digest of the action it approved.
    pub(crate) approval_digest: Option<String>,
    /// The agent's shadow rules when the caller read them already (`None`: read them).
    pub(crate) shadows: Option<Vec<agents::ShadowRule>>,
    /// The host that serves the items, as recorded with them (`None`: never recorded,
    /// served here): the engine's host is told of decisions on its own items only
    /// ([`crate::Host::on_decided`]).
    pub(crate) served_by: Option<String>,
}

impl Verdicts {
    pub(crate) fn plain(verdict: Verdict, reason: Option<String>) -> Self {
        Self {
            verdict,
            reason,
            edited_args: None,
            approval_digest: None,
            shadows: None,
            served_by: None,
        }
    }

    /// These verdicts, on items that `served` says who serves.
    pub(crate) fn served(self, served: Option<&jobs::ServedItem>) -> Self {
        Self {
            served_by: served.and_then(|served| served.host.clone()),
            ..self
        }
    }
}

impl ConfirmationService {
    /// The service of `engine`.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            reviewer: None,
            attribution: None,
            shown_revision: None,
            unnamed: None,
        }
    }

    /// This service, confirming what the person was shown: revision `revision` of the
    /// item ([`assent_domain::ChangeItem::revision`]). A confirmation of an item whose
    /// revision moved since (another person's edit under a quorum, a stale-target
    /// refresh) is refused with a conflict and counts for nothing.
    #[must_use]
    pub fn shown_revision(mut self, revision: u32) -> Self {
        self.shown_revision = Some(revision);
        self
    }

    /// This service, deciding as `reviewer`: the identity a quorum counts (`assent
    /// agent ask … --approvals N` needs that many distinct ones).
    #[must_use]
    pub fn by(mut self, reviewer: impl Into<String>) -> Self {
        self.reviewer = Some(reviewer.into());
        self.unnamed = None;
        self
    }

    /// This service, deciding as `reviewer` through a credential that names no person
    /// (`what`, as messages name it: `token 3fa9c1d2e4b5`, a token made before tokens
    /// named their person): it decides what one person may, and a confirmation of an
    /// item needing more than one person is refused with a conflict saying how to make
    /// a token that names its person. A quorum counts people, and a credential naming
    /// nobody could be a second door of someone already counted.
    #[must_use]
    pub fn by_unnamed(mut self, reviewer: impl Into<String>, what: impl Into<String>) -> Self {
        self.reviewer = Some(reviewer.into());
        self.unnamed = Some(what.into());
        self
    }

    /// This service, recording every decision as the answer to a delegated question.
    pub(crate) fn attributed(mut self, attribution: Attribution) -> Self {
        self.attribution = Some(attribution);
        self
    }

    fn decision(
        &self,
        set: &ChangeSet,
        index: usize,
        v: &Verdicts,
        now: OffsetDateTime,
    ) -> ChangeDecision {
        let item = &set.items[index];
        ChangeDecision {
            id: self.engine.new_id(),
            change_set_id: set.id,
            item_index: index,
            agent_id: set.agent_id.clone(),
            target_kind: set.target_kind.clone(),
            target_id: set.target_id.clone(),
            tool_name: item.tool_name.clone(),
            verdict: v.verdict,
            reason: v.reason.clone(),
            edited_args: v.edited_args.clone(),
            human_summary: item.human_summary.clone(),
            args: item.args.clone(),
            created_at: now,
            vector_clock: set.vector_clock.clone(),
            decided_by: None,
        }
    }

    /// Applies verdicts to `indexes` of `set` (already checked), ticks its clock, and
    /// writes decisions, statuses and outbox messages.
    pub(crate) async fn record(
        &self,
        conn: &mut Connection,
        set: &mut ChangeSet,
        indexes: &[usize],
        verdicts: Verdicts,
        now: OffsetDateTime,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let mut plan = WritePlan::default();
        let decisions = self
            .record_into(conn, set, indexes, verdicts, now, &mut plan, None)
            .await?;
        plan.apply(conn, now).await?;
        Ok(decisions)
    }

    /// [`Self::record`] with the decisions' chain entries and outbox messages in
    /// `plan`, which the caller applies before it commits; with `deferred_statuses`,
    /// the items' and the set's statuses are left for the caller to write (it adds
    /// `indexes` there).
    #[allow(clippy::too_many_arguments)]
    async fn record_into(
        &self,
        conn: &mut Connection,
        set: &mut ChangeSet,
        indexes: &[usize],
        mut verdicts: Verdicts,
        now: OffsetDateTime,
        plan: &mut WritePlan,
        deferred_statuses: Option<&mut Vec<usize>>,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        for &index in indexes {
            set.apply_verdict(index, verdicts.verdict, now)?;
        }
        set.vector_clock.tick(self.engine.store.device_id());
        // What the agent's shadow rules would have done (a person's verdicts only).
        let shadows = match (verdicts.verdict, verdicts.shadows.take()) {
            (Verdict::Deferred | Verdict::Retracted, _) => Vec::new(),
            (_, Some(read)) => read,
            (_, None) => agents::shadow_rules(conn, &set.agent_id)
                .await?
                .unwrap_or_default(),
        };
        let runs = crate::history_rules::shadow_runs(conn, &shadows, &set.agent_id, now).await?;
        let mut written = Vec::with_capacity(indexes.len());
        let own_items = verdicts
            .served_by
            .as_deref()
            .is_none_or(|host| host == self.engine.host.name());
        let target = set.target();
        for &index in indexes {
            let decision = ChangeDecision {
                decided_by: self.reviewer.clone(),
                ..self.decision(set, index, &verdicts, now)
            };
            let shadow = shadow_verdict(&shadows, &decision, &runs);
            let facts = assent_store::decisions::LocalFacts {
                approval_digest: verdicts.approval_digest.as_deref(),
                decided_by: self.reviewer.as_deref(),
                shadow: shadow.as_ref(),
            };
            match &self.attribution {
                // Its delegation record names the decision: written now, not planned.
                Some(attribution) => {
                    assent_store::decisions::insert_decided_into(conn, &decision, &facts, plan)
                        .await?;
                    crate::attribution::record_attributed(conn, attribution, &decision, now)
                        .await?;
                }
                None => assent_store::decisions::plan_decided(&decision, &facts, plan)?,
            }
            if own_items {
                self.tell_host(conn, &decision, &target).await?;
            }
            written.push(decision);
        }
        match deferred_statuses {
            Some(deferred) => deferred.extend_from_slice(indexes),
            None => change_sets::update_status_into(conn, set, indexes, now, plan).await?,
        }
        Ok(written)
    }

    /// Tells the engine's host of `decision` on `target` in the decision's transaction
    /// (`conn`): its error aborts the decision.
    async fn tell_host(
        &self,
        conn: &mut Connection,
        decision: &ChangeDecision,
        target: &Target,
    ) -> Result<(), ConfirmError> {
        let host = &self.engine.host;
        let decided = Decided {
            item: ItemRef::new(decision.change_set_id, decision.item_index),
            decision_id: decision.id,
            agent_id: &decision.agent_id,
            target,
            tool_name: &decision.tool_name,
            verdict: decision.verdict,
            decided_by: decision.decided_by.as_deref(),
            reason: decision.reason.as_deref(),
            args: decision.edited_args.as_ref().unwrap_or(&decision.args),
            edited: decision.edited_args.is_some(),
            at: decision.created_at,
        };
        host.on_decided(conn, decided).await.map_err(|source| {
            tracing::info!(host = host.name(), %source, "the host refused the decision: rolled back");
            ConfirmError::DecisionHookFailed {
                host: host.name().to_owned(),
                source,
            }
        })
    }

    /// [`Self::confirm_item`] at the engine's clock ([`crate::Engine::builder`]). Each
    /// decision that takes `now` has such a `_now` twin.
    pub async fn confirm_item_now(&self, item: ItemRef) -> Result<ConfirmOutcome, ConfirmError> {
        self.confirm_item(item, self.engine.now()).await
    }

    /// [`Self::edit_and_confirm`] at the engine's clock.
    pub async fn edit_and_confirm_now(
        &self,
        item: ItemRef,
        new_args: Value,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        self.edit_and_confirm(item, new_args, self.engine.now())
            .await
    }

    /// [`Self::reject_item`] at the engine's clock.
    pub async fn reject_item_now(
        &self,
        item: ItemRef,
        reason: Option<String>,
    ) -> Result<ChangeDecision, ConfirmError> {
        self.reject_item(item, reason, self.engine.now()).await
    }

    /// [`Self::defer_item`] at the engine's clock.
    pub async fn defer_item_now(&self, item: ItemRef) -> Result<ChangeDecision, ConfirmError> {
        self.defer_item(item, self.engine.now()).await
    }

    /// [`Self::confirm_all`] at the engine's clock.
    pub async fn confirm_all_now(
        &self,
        change_set_id: Uuid,
    ) -> Result<ConfirmAllResult, ConfirmError> {
        self.confirm_all(change_set_id, self.engine.now()).await
    }

    /// [`Self::dismiss`] at the engine's clock.
    pub async fn dismiss_now(
        &self,
        change_set_id: Uuid,
        reason: Option<String>,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        self.dismiss(change_set_id, reason, self.engine.now()).await
    }

    /// Confirms item `index` of set `change_set_id` and applies it.
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
    /// # let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
    /// #     "name": "set_body", "input": {"body": "final"}}]))?;
    /// # let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
    /// # let set = engine.wakes().wake(request, now).await?.change_set.ok_or("nothing queued")?;
    /// // A person confirms the set's first item: the handler runs, in the decision's
    /// // transaction, and its answer comes back.
    /// let confirmed = engine.confirmations().confirm_item(ItemRef::new(set.id, 0), now).await?;
    /// assert_eq!(confirmed.message(), "Body set to final.");
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    #[tracing::instrument(skip(self), fields(change_set = %item))]
    pub async fn confirm_item(
        &self,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.confirm(change_set_id, index, None, now).await
    }

    /// Confirms item `index` with `new_args` instead of the proposal. The args are
    /// validated against the tool's schema; the decision keeps both.
    #[tracing::instrument(skip(self, new_args), fields(change_set = %item))]
    pub async fn edit_and_confirm(
        &self,
        item: ItemRef,
        new_args: Value,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.confirm(change_set_id, index, Some(new_args), now)
            .await
    }

    /// The write transaction for decisions on set `change_set_id`: on PostgreSQL it
    /// locks the set's target, not the database (see [`Store::begin_write_on`]), so
    /// decisions on other targets proceed side by side; exactly-once still holds,
    /// because the set is re-read under that lock and a second final decision of an
    /// item would break a unique index.
    ///
    /// [`Store::begin_write_on`]: assent_store::Store::begin_write_on
    pub(crate) async fn begin_on_set(&self, change_set_id: Uuid) -> Result<WriteTx, ConfirmError> {
        let store = &self.engine.store;
        if store.backend() == Backend::Sqlite {
            return Ok(store.begin_write().await?);
        }
        let mut conn = store.read_connection().await.map_err(ConfirmError::from)?;
        let target = change_sets::target_of(&mut conn, change_set_id).await?;
        drop(conn);
        Ok(match target {
            Some(target) => store.begin_write_on(&target).await?,
            // No such set: the caller's read under the lock reports it.
            None => store.begin_write().await?,
        })
    }

    /// [`Self::confirm_item_in`] on the caller's transaction `tx`, which already holds
    /// the set's target's lock (on PostgreSQL): its plan is the attempt's audit records,
    /// chain entries and outbox messages, for the caller to apply (see [`Attempt`]).
    async fn attempt_locked(
        &self,
        tx: &mut WriteTx,
        change_set_id: Uuid,
        index: usize,
        edited_args: Option<Value>,
        now: OffsetDateTime,
    ) -> Result<(Attempt, WritePlan), ConfirmError> {
        // The one read: the set, its items, who serves them, the agent's rules and
        // whether the item's operation was applied, under the transaction's lock.
        let edited = edited_args.as_ref();
        let read = change_sets::require_for_decision_with(tx.connection(), change_set_id, |set| {
            operation_of(set, index, edited)
        })
        .await?;
        let (mut set, mut batch, mut plan) = Batch::one(read);
        let attempt = self
            .attempt_in(tx, &mut set, index, &mut batch, edited_args, now, &mut plan)
            .await?;
        Ok((attempt, plan))
    }

    /// Takes, in the caller's transaction `tx`, the lock a decision on set
    /// `change_set_id` needs (on PostgreSQL its target's: [`Self::begin_on_set`]); a
    /// SQLite write transaction already excludes every other writer.
    async fn lock_set(&self, tx: &mut WriteTx, change_set_id: Uuid) -> Result<(), ConfirmError> {
        let conn = tx.connection();
        if Backend::of(conn) == Backend::Sqlite {
            return Ok(());
        }
        // No such set: the read under the lock reports it.
        if let Some(target) = change_sets::target_of(conn, change_set_id).await? {
            assent_store::Store::lock_target(conn, &target).await?;
        }
        Ok(())
    }

    /// [`Self::confirm_item`] in the caller's write transaction `tx` (from
    /// [`Store::begin_write`] or [`Store::begin_write_on`] the set's target): the
    /// handler runs on it, and the decision, its audit records and
    /// [`crate::Host::on_decided`] are written in it; nothing is committed. Write your
    /// own rows on `tx.connection()` before or after, then commit: the decision and
    /// your rows stand together; roll back, and nothing of the decision happened. A
    /// confirmed external tool only records its job here (an executor runs it after
    /// the commit): no foreign code runs while the transaction is open.
    ///
    /// An error leaves `tx` as it was before the call, except that a refusal's audit
    /// records (a policy denial, a failed handler, whose writes are undone) and a
    /// changed target's refresh of the item are written in it, as the plain method
    /// commits them: commit to keep them on record. Never call the plain method while
    /// holding a write transaction of the same store: it waits for the writer lock you
    /// hold, and ends in [`StoreError::WriterBusy`] after the busy timeout.
    ///
    /// [`Store::begin_write`]: assent_store::Store::begin_write
    /// [`Store::begin_write_on`]: assent_store::Store::begin_write_on
    /// [`StoreError::WriterBusy`]: assent_store::StoreError::WriterBusy
    #[tracing::instrument(skip(self, tx), fields(change_set = %item))]
    pub async fn confirm_item_in(
        &self,
        tx: &mut WriteTx,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        self.confirm_in_tx(tx, item, None, now).await
    }

    /// [`Self::edit_and_confirm`] in the caller's write transaction `tx`, as
    /// [`Self::confirm_item_in`] does it.
    #[tracing::instrument(skip(self, tx, new_args), fields(change_set = %item))]
    pub async fn edit_and_confirm_in(
        &self,
        tx: &mut WriteTx,
        item: ItemRef,
        new_args: Value,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        self.confirm_in_tx(tx, item, Some(new_args), now).await
    }

    /// A confirmation in the caller's transaction `tx`, inside a savepoint of its own,
    /// so that whatever fails leaves the caller's writes as they were.
    async fn confirm_in_tx(
        &self,
        tx: &mut WriteTx,
        item: ItemRef,
        edited_args: Option<Value>,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.lock_set(tx, change_set_id).await?;
        let mut scope = tx.savepoint().await?;
        let attempted = self
            .attempt_locked(&mut scope, change_set_id, index, edited_args, now)
            .await;
        let (attempt, plan) = match attempted {
            Ok(attempted) => attempted,
            Err(error) => {
                scope.rollback().await?;
                return Err(error);
            }
        };
        match attempt {
            // The failed handler's writes go with the savepoint; its audit records stay.
            Attempt::Undone(refusal) => {
                scope.rollback().await?;
                plan.apply(tx.connection(), now).await?;
                Err(refusal)
            }
            Attempt::Refused(refusal) => {
                scope.release().await?;
                plan.apply(tx.connection(), now).await?;
                Err(refusal)
            }
            Attempt::Decided(outcome) => {
                scope.release().await?;
                plan.apply(tx.connection(), now).await?;
                tracing::info!(index, "item confirmed in the caller's transaction");
                Ok(*outcome)
            }
        }
    }

    async fn confirm(
        &self,
        change_set_id: Uuid,
        index: usize,
        edited_args: Option<Value>,
        now: OffsetDateTime,
    ) -> Result<ConfirmOutcome, ConfirmError> {
        let mut tx = self.begin_on_set(change_set_id).await?;
        // Its own transaction holds nothing else: a failed handler is undone by rolling
        // it all back (two statements fewer than a savepoint on every confirmation).
        let (attempt, plan) = self
            .attempt_locked(&mut tx, change_set_id, index, edited_args, now)
            .await?;
        if let Attempt::Undone(refusal) = attempt {
            // The failed handler's writes go; its audit records are written in a
            // transaction of their own. The refusal is the answer either way: an audit
            // write that fails is logged, as the executor logs its own.
            tx.rollback().await?;
            if let Err(error) = self.apply_alone(change_set_id, plan, now).await {
                tracing::warn!(%error, "the failed handler's audit records were not written");
            }
            return Err(refusal);
        }
        // A refusal keeps its audit records (the denial, the failed handler's result).
        tx.commit_with(plan, now).await?;
        match attempt {
            Attempt::Decided(outcome) => {
                tracing::info!(index, "item confirmed");
                Ok(*outcome)
            }
            Attempt::Refused(refusal) | Attempt::Undone(refusal) => Err(refusal),
        }
    }

    /// Writes `plan` (a failed attempt's audit records) in a write transaction of its
    /// own on set `change_set_id`.
    async fn apply_alone(
        &self,
        change_set_id: Uuid,
        plan: WritePlan,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let tx = self.begin_on_set(change_set_id).await?;
        tx.commit_with(plan, now).await?;
        Ok(())
    }

    /// Confirms item `index` of `set` (read in `tx`, under its lock, with the rest of
    /// `batch`) inside that transaction, its audit records, chain entries and outbox
    /// messages in `plan`; the caller applies the plan and commits (see [`Attempt`]).
    /// `Err`: nothing of the item may stay, roll back and drop the plan.
    #[allow(clippy::too_many_arguments)]
    async fn attempt_in(
        &self,
        tx: &mut WriteTx,
        set: &mut ChangeSet,
        index: usize,
        batch: &mut Batch,
        edited_args: Option<Value>,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<Attempt, ConfirmError> {
        let engine = &self.engine;
        let route = decide::route(
            set,
            index,
            batch.served.get(index),
            self.shown_revision,
            engine.host.name(),
        )?;
        let item = set.items[index].clone();
        if let Route::Queued(queued) = route {
            return self
                .confirm_queued(
                    tx.connection(),
                    set,
                    index,
                    edited_args,
                    queued,
                    now,
                    plan,
                    batch,
                )
                .await;
        }
        let spec = engine
            .registry
            .get(&item.tool_name)
            .ok_or_else(|| ConfirmError::UnknownTool(item.tool_name.clone()))?;
        if let Some(args) = &edited_args {
            self.validate_edit(&spec.name, args)?;
            decide::check_edit_target(
                spec.target_from.as_ref(),
                &spec.name,
                &set.target(),
                &item.args,
                args,
            )?;
        }
        let args = edited_args.clone().unwrap_or_else(|| item.args.clone());
        // An agent this database lacks (its set came from another device) has no
        // rules here to check: refused, saying so, before anything is written.
        let (policy, settings) = batch.rules_of(&set.agent_id, &spec.name, now)?;
        let target = set.target();
        let recheck = crate::host::recheck(
            engine.host.as_ref(),
            tx.connection(),
            &target,
            &spec.name,
            &args,
            &item.args,
            item.fingerprint.as_ref(),
        )
        .await;
        if let Some(stale) = recheck.stale {
            return self.refresh_stale(tx.connection(), set, index, stale).await;
        }
        let needed = settings.approvals_needed.max(item.approvals_needed());
        let call = CallContext::new(&args, &target.id);
        let ran = policy
            .has_conditions()
            .then(|| crate::history_rules::ran_now(&spec.name, call, now));
        let needed = crate::history_rules::quorum_now(
            tx.connection(),
            &policy,
            set,
            &spec.name,
            call,
            &batch.ran,
            now,
        )
        .await?
        .map_or(needed, |quorum| needed.max(quorum));
        // The decision point answers before an approval is counted or a window starts,
        // so nothing is written or sent for a call the policy refuses; a plain
        // confirmation is refused by the executor, before it writes anything either.
        if needed > 1 || settings.hold.is_some() {
            let category = crate::host::category_of(
                engine.host.resolver(),
                tx.connection(),
                &target,
                recheck.category.clone(),
            )
            .await;
            let call = CallContext {
                args: &args,
                target_id: &target.id,
                paths: None,
            };
            if let PolicyDecision::Deny { reason } = policy.decide_call(spec, Some(call), &category)
            {
                let reason = reply::denial(&reason);
                tracing::info!(index, %reason, "policy refused the confirmation before it counted");
                return Ok(Attempt::Refused(ConfirmError::PolicyDenied {
                    tool: spec.name.clone(),
                    reason,
                }));
            }
        }
        let Met {
            edited_args,
            approval,
        } = match self
            .gather(
                tx.connection(),
                set,
                index,
                batch.revision(index),
                edited_args,
                needed,
                now,
                plan,
            )
            .await?
        {
            Gathered::Met(met) => met,
            Gathered::Waiting(waiting) => return Ok(Attempt::Decided(waiting)),
        };
        let args = edited_args.clone().unwrap_or_else(|| item.args.clone());
        if let Some(hold) = settings.hold {
            if let Some(approval) = &approval {
                approval.plan(plan, set.id, index, now);
            }
            let own = jobs::ExternalItem {
                host: engine.host.name().to_owned(),
                idempotent: false,
            };
            let revision = batch.revision(index);
            return self
                .schedule(
                    tx.connection(),
                    set,
                    index,
                    edited_args,
                    own,
                    Held { hold, revision },
                    now,
                    plan,
                )
                .await;
        }
        let already_true = recheck.already_true;
        let approval_digest = assent_domain::approval_digest(
            &spec.name,
            &args,
            set.items[index].fingerprint.as_ref(),
            engine.definition_hash(&spec.name).as_deref(),
        );
        let operation_id = OperationId::for_proposal(
            &set.run_key,
            &spec.name,
            &args,
            &set.target_id,
            set.id,
            index,
        );
        let invocation = ToolInvocation::new(
            spec.name.clone(),
            args,
            set.run_key.clone(),
            operation_id,
            ExecutionTarget {
                agent_id: set.agent_id.clone(),
                target,
            },
            now,
        );
        let resolver = engine.host.resolver();
        let audits = PlannedAudits::default();
        // The state the re-check read holds the category the policy is checked against
        // (when its host keeps it there): nothing ran in this scope since.
        // Whether the operation was applied came with the set; the applied operation
        // is planned, written with the decision.
        let executor = AuditedExecutor::new(resolver, &audits)
            .with_known_category(recheck.category.clone())
            .with_known_applied(batch.applied.known(&invocation.operation_id))
            .planning_applied(&audits);
        // Nothing of this attempt is written yet (a stale refresh, a hold, an approval
        // short of the quorum and a queued item all returned above; a met quorum's
        // approval is recorded below): a failed handler is undone with its scope.
        let (execution, own_error) = executor
            .execute_in_clean_scope(
                tx.connection(),
                ExecutionRequest {
                    policy: &policy,
                    spec,
                    handler: engine.host.handler(&spec.name),
                    invocation,
                    confirmed_by_person: true,
                    already_true,
                    now,
                    // A standing grant answered instead of a person: the trail says so.
                    allowed_by: self
                        .attribution
                        .as_ref()
                        .and_then(|a| a.grant_id)
                        .map(|grant| serde_json::json!({ "grant": grant })),
                },
            )
            .await?;
        audits.drain_into(plan)?;
        match execution {
            // Keep the audited denial; the item stays pending.
            ExecutionOutcome::Denied { reason } => {
                Ok(Attempt::Refused(ConfirmError::PolicyDenied {
                    tool: spec.name.clone(),
                    reason,
                }))
            }
            ExecutionOutcome::Failed { error } => {
                // No handler ran (none is registered): the text is all there is.
                let source = own_error.unwrap_or_else(|| error.clone().into());
                Ok(Attempt::Undone(ConfirmError::HandlerFailed {
                    tool: spec.name.clone(),
                    error,
                    source,
                }))
            }
            execution => {
                batch.ran.extend(ran);
                if let Some(approval) = approval {
                    approval.plan(plan, set.id, index, now);
                }
                let mut decisions = self
                    .record_into(
                        tx.connection(),
                        set,
                        &[index],
                        Verdicts {
                            verdict: Verdict::Confirmed,
                            reason: None,
                            edited_args,
                            approval_digest: Some(approval_digest),
                            shadows: Some(settings.shadow_rules),
                            // Run here: an item of this engine's host.
                            served_by: None,
                        },
                        now,
                        plan,
                        batch.deferred_statuses.as_mut(),
                    )
                    .await?;
                Ok(Attempt::Decided(Box::new(ConfirmOutcome::new(
                    decisions.remove(0),
                    execution,
                ))))
            }
        }
    }

    /// Refuses a confirmation of item `index` of `set` whose target changed since the
    /// proposal (`stale`), and refreshes the item (in `conn`'s transaction and in
    /// memory): a new confirmation applies to the target as it is now.
    async fn refresh_stale(
        &self,
        conn: &mut Connection,
        set: &mut ChangeSet,
        index: usize,
        stale: crate::host::Stale,
    ) -> Result<Attempt, ConfirmError> {
        change_sets::mark_stale(
            conn,
            set.id,
            index,
            &stale.detail,
            stale.before.as_ref(),
            stale.fingerprint.as_ref(),
        )
        .await?;
        let stored = &mut set.items[index];
        stored.before = stale.before;
        stored.fingerprint = stale.fingerprint;
        stored.stale_detail = Some(stale.detail.clone());
        stored.revision += 1;
        tracing::info!(index, detail = %stale.detail, "target changed since proposed: refused");
        Ok(Attempt::Refused(ConfirmError::TargetChanged {
            item: ItemRef::new(set.id, index),
            revision: stored.revision,
            detail: stale.detail,
        }))
    }

    /// Why nothing would ever run a confirmation of a queued call of tool `tool` in
    /// set `set` given at `now`, or `None`. The MCP gateway's session that made it
    /// ended (its client left, or its gateway was not seen for
    /// [`crate::client_sessions::SESSION_STALE`]) and the operator did not mark the tool
    /// run-after-disconnect: its gateway would refuse to run it in another session. Or
    /// the coding agent's hook that waited for it said it withdraws the call when its
    /// wait ends, and that moment passed ([`WITHDRAW_GRACE`] ago): it was killed before
    /// it could, and nothing else takes the answer.
    async fn nobody_will_run(
        &self,
        conn: &mut Connection,
        set: &ChangeSet,
        tool: &str,
        now: OffsetDateTime,
    ) -> Result<Option<String>, ConfirmError> {
        if let Some((_, seen_at, ended_at)) = mcp_sessions::of_change_set(conn, set.id).await?
            && let Some(ended) = crate::client_sessions::session_ended(seen_at, ended_at, now)
        {
            let marked = mcp_sessions::run_after_disconnect_tools(conn, &set.agent_id)
                .await?
                .iter()
                .any(|marked| assent_tools::name_matches(marked, tool));
            if !marked {
                return Ok(Some(format!(
                    "the session that asked for it has ended (its chat was last there at {}), so nothing would run the call or tell the agent; to let calls of {tool} run after their chat ended: assent agent run-after-disconnect {} {tool}",
                    assent_store::timefmt::format(ended),
                    set.agent_id
                )));
            }
        }
        if let Some(until) = waits::withdrawn_after(conn, set.id).await?
            && now > until + WITHDRAW_GRACE
        {
            return Ok(Some(format!(
                "the session that asked for it has ended (the agent's hook stopped waiting at {}), so nothing would take the answer",
                assent_store::timefmt::format(until)
            )));
        }
        Ok(None)
    }

    /// Counts this confirmation toward item `index`'s quorum, when its tool needs more
    /// than one person (`needed`, from `agents::tool_settings_for`). An edit starts a new revision
    /// (approvals of the old arguments no longer count; the edit is its editor's
    /// approval). Short of the quorum, the approval is recorded and `item.approved`
    /// queued: the outcome to return, as [`Gathered::Waiting`]. Meeting it: [`Met`] with the
    /// arguments to run (the revision's, an edit when they differ from the proposal)
    /// and the approval to record beside the decision once the confirmation succeeds.
    /// Runs in the deciding transaction, under the item's lock, on `revision` as its
    /// read found the item's, so of two approvals racing to meet a quorum the second
    /// finds the item decided. An approval short
    /// of the quorum is planned in `plan` (its row and its chain entry, written last).
    #[allow(clippy::too_many_arguments)]
    async fn gather(
        &self,
        conn: &mut Connection,
        set: &ChangeSet,
        index: usize,
        revision: approvals::Revision,
        edited_args: Option<Value>,
        needed: u32,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<Gathered, ConfirmError> {
        let item = &set.items[index];
        // Approvals count only for a tool that needs more than one person.
        let revision = if needed > 1 {
            revision
        } else {
            approvals::Revision::default()
        };
        if needed > 1
            && let Some(what) = &self.unnamed
        {
            return Err(ConfirmError::conflict(
                ConflictKind::ApproverNotNamed,
                format!(
                    "{what} names no person; re-issue it with `assent tokens add --role reviewer --person NAME` to approve items needing {needed} people ({} needs {needed})",
                    item.tool_name
                ),
            ));
        }
        let by = self.reviewer.as_deref();
        let (approval, new_revision, revision, count) = match decide::count_approval(
            revision,
            &item.args,
            &item.tool_name,
            index,
            by,
            edited_args,
            needed,
            now,
        )? {
            Count::Met {
                edited_args,
                approval,
            } => {
                return Ok(Gathered::Met(Met {
                    edited_args,
                    approval,
                }));
            }
            Count::Short {
                approval,
                new_revision,
                revision,
                count,
            } => (approval, new_revision, revision, count),
        };
        if let Some(number) = new_revision {
            change_sets::set_revision(conn, set.id, index, number).await?;
        }
        approval.plan(plan, set.id, index, now);
        assent_store::webhooks::enqueue_approval_event(conn, set, index, &revision, needed, now)
            .await?;
        tracing::info!(index, by = %approval.by, count, needed, "approval recorded, short of the quorum");
        let verdicts = Verdicts {
            edited_args: (approval.args != item.args).then(|| approval.args.clone()),
            ..Verdicts::plain(Verdict::Confirmed, None)
        };
        Ok(Gathered::Waiting(Box::new(ConfirmOutcome::new(
            self.decision(set, index, &verdicts, now),
            ExecutionOutcome::AwaitingApprovals {
                approvals: count,
                needed,
            },
        ))))
    }

    /// Checks a person's edited arguments against the tool's schema (a tool this
    /// process does not know cannot be edited here).
    fn validate_edit(&self, tool_name: &str, args: &Value) -> Result<(), ConfirmError> {
        self.engine
            .registry
            .validate_args(tool_name, args)
            .map_err(|e| match e {
                ToolsError::InvalidArgs { tool, problems } => {
                    ConfirmError::InvalidArgs { tool, problems }
                }
                ToolsError::UnknownTool { name } => ConfirmError::UnknownTool(name),
                other => ConfirmError::InvalidArgs {
                    tool: tool_name.to_owned(),
                    problems: vec![ArgProblem::general(other.to_string())],
                },
            })
    }

    /// Checks a person's edit of a queued item: against this process's registry when
    /// the item's host is this engine's, otherwise against the input schema its host
    /// recorded in the database (`host_tools`), so that another service's or an MCP
    /// gateway's item is edited, and an edit outside the tool's schema refused, from
    /// any process. Returns where the tool takes its target from in its arguments,
    /// when it does (`targetFrom` of its recorded definition).
    async fn validate_external_edit(
        &self,
        conn: &mut Connection,
        host: &str,
        tool_name: &str,
        args: &Value,
    ) -> Result<Option<TargetFrom>, ConfirmError> {
        if host == self.engine.host.name()
            && let Some(spec) = self.engine.registry.get(tool_name)
        {
            self.validate_edit(tool_name, args)?;
            return Ok(spec.target_from.clone());
        }
        let Some(tool) = host_tools::get(conn, host, tool_name).await? else {
            let why = if host_tools::registered(conn, host).await? {
                format!("host {host:?} has recorded no tool of that name in this database")
            } else {
                format!(
                    "host {host:?} has never registered its tools in this database (its engine has not opened here)"
                )
            };
            return Err(ConfirmError::InvalidArgs {
                tool: tool_name.to_owned(),
                problems: vec![ArgProblem::general(format!(
                    "{why}, so an edit cannot be checked; confirm it as proposed or reject it"
                ))],
            });
        };
        let mut registry = ToolRegistry::new();
        let spec = ToolSpec::new(tool_name, "", ToolMode::Deferred, tool.input_schema);
        let invalid = |problems: Vec<ArgProblem>| ConfirmError::InvalidArgs {
            tool: tool_name.to_owned(),
            problems,
        };
        registry.register(spec).map_err(|e| {
            invalid(vec![ArgProblem::general(format!(
                "the input schema {host} recorded for it does not compile: {e}"
            ))])
        })?;
        registry
            .validate_args(tool_name, args)
            .map_err(|e| match e {
                ToolsError::InvalidArgs { problems, .. } => invalid(problems),
                other => invalid(vec![ArgProblem::general(other.to_string())]),
            })?;
        Ok(crate::catalog::target_from(&tool.definition))
    }

    /// Confirms queued item `index` (an external one, see [`crate::Effect::External`],
    /// or one of another host) in `conn`'s transaction: the decision and its execution
    /// job, committed together by the caller; nothing runs here, so neither the host's
    /// handler nor its resolver is needed. The host's worker runs the job.
    #[allow(clippy::too_many_arguments)]
    async fn confirm_queued(
        &self,
        conn: &mut Connection,
        set: &mut ChangeSet,
        index: usize,
        edited_args: Option<Value>,
        external: jobs::ExternalItem,
        now: OffsetDateTime,
        plan: &mut WritePlan,
        batch: &mut Batch,
    ) -> Result<Attempt, ConfirmError> {
        if let Some(args) = &edited_args {
            let item = &set.items[index];
            let from = self
                .validate_external_edit(conn, &external.host, &item.tool_name, args)
                .await?;
            decide::check_edit_target(
                from.as_ref(),
                &item.tool_name,
                &set.target(),
                &item.args,
                args,
            )?;
        }
        let tool_name = set.items[index].tool_name.clone();
        let tool_name = &tool_name;
        // An agent this database lacks has no rules here to check: refused, saying so.
        let (policy, settings) = batch.rules_of(&set.agent_id, tool_name, now)?;
        let target = set.target();
        // What this process sees of the item's target (a coding agent's workspace on
        // this machine), when it can read that host's targets.
        let state = self
            .engine
            .foreign
            .as_ref()
            .and_then(|foreign| foreign.state(&external.host, &target));
        {
            let proposed = &set.items[index].args;
            let args = edited_args.as_ref().unwrap_or(proposed);
            // The rules answer first, with the arguments that would run (a person's
            // edit) and where their paths lead (the category is its host's to resolve,
            // at the claim): no approval, job, decision or webhook for a call they deny.
            let call = CallContext {
                args,
                target_id: &target.id,
                paths: state.as_deref().and_then(|state| state.paths()),
            };
            if policy.ruled_call(tool_name, Some(call)) == Some(RuleAction::Deny) {
                // The rule and the part it found, as the agent would be told.
                let reason = reply::denial(&policy.denial(tool_name, Some(call)));
                tracing::info!(index, %reason, "policy refused the confirmation before it counted");
                return Ok(Attempt::Refused(ConfirmError::PolicyDenied {
                    tool: tool_name.to_owned(),
                    reason,
                }));
            }
            // A target that changed since the proposal (a file edited meanwhile): the
            // item is refreshed with what it holds now, for a new review.
            if let Some(state) = &state {
                let item = &set.items[index];
                let recheck = crate::host::recheck_state(
                    state.as_ref(),
                    tool_name,
                    args,
                    proposed,
                    item.fingerprint.as_ref(),
                );
                if let Some(stale) = recheck.stale {
                    return self.refresh_stale(conn, set, index, stale).await;
                }
            }
        }
        // A call nothing would ever run (its session ended): refused, and withdrawn.
        if let Some(why) = self.nobody_will_run(conn, set, tool_name, now).await? {
            tracing::info!(index, %why, "nothing would run the confirmation: withdrawn");
            let withdrawer = Self {
                reviewer: None,
                attribution: None,
                ..self.clone()
            };
            withdrawer
                .record_into(
                    conn,
                    set,
                    &[index],
                    Verdicts {
                        served_by: Some(external.host.clone()),
                        ..Verdicts::plain(Verdict::Retracted, Some(why.clone()))
                    },
                    now,
                    plan,
                    batch.deferred_statuses.as_mut(),
                )
                .await?;
            return Ok(Attempt::Refused(ConfirmError::conflict(
                ConflictKind::SessionEnded,
                format!("{why}; the call is withdrawn"),
            )));
        }
        let needed = settings
            .approvals_needed
            .max(set.items[index].approvals_needed());
        let call_args = edited_args.as_ref().unwrap_or(&set.items[index].args);
        let call = CallContext::new(call_args, &target.id);
        let needed =
            crate::history_rules::quorum_now(conn, &policy, set, tool_name, call, &batch.ran, now)
                .await?
                .map_or(needed, |quorum| needed.max(quorum));
        let Met {
            edited_args,
            approval,
        } = match self
            .gather(
                conn,
                set,
                index,
                batch.revision(index),
                edited_args,
                needed,
                now,
                plan,
            )
            .await?
        {
            Gathered::Met(met) => met,
            Gathered::Waiting(waiting) => return Ok(Attempt::Decided(waiting)),
        };
        if let Some(approval) = &approval {
            approval.plan(plan, set.id, index, now);
        }
        if let Some(hold) = settings.hold {
            let revision = batch.revision(index);
            let held = Held { hold, revision };
            return self
                .schedule(conn, set, index, edited_args, external, held, now, plan)
                .await;
        }
        let (job, approval_digest) = self
            .queue_job(
                conn,
                set,
                index,
                edited_args.as_ref(),
                &external,
                None,
                now,
                plan,
            )
            .await?;
        let job_id = job.id;
        let verdicts = Verdicts {
            verdict: Verdict::Confirmed,
            reason: None,
            edited_args,
            approval_digest: Some(approval_digest),
            shadows: Some(settings.shadow_rules),
            served_by: Some(external.host.clone()),
        };
        let mut decisions = self
            .record_into(
                conn,
                set,
                &[index],
                verdicts,
                now,
                plan,
                batch.deferred_statuses.as_mut(),
            )
            .await?;
        tracing::info!(index, %job_id, host = %external.host, "item approved; its job is queued for its host");
        Ok(Attempt::Decided(Box::new(ConfirmOutcome::new(
            decisions.remove(0),
            ExecutionOutcome::Queued {
                job_id,
                host: external.host,
            },
        ))))
    }

    /// Confirms item `index` of a held tool (`assent agent hold`) in `conn`'s
    /// transaction: a held job of `served`'s host, due when the window `held.hold`
    /// ends, planned in `plan` with the approval meeting its quorum (if any).
    /// No decision is written: the claim at the window's end writes it, unless a
    /// person cancels the job first ([`Engine::cancel_job`]), and until then the item
    /// stays pending (no other decision is taken on it; see [`refuse_held`]). The
    /// outcome's decision is the one the claim will write.
    #[allow(clippy::too_many_arguments)]
    async fn schedule(
        &self,
        conn: &mut Connection,
        set: &ChangeSet,
        index: usize,
        edited_args: Option<Value>,
        served: jobs::ExternalItem,
        held: Held,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<Attempt, ConfirmError> {
        let (job, approval_digest) = self
            .queue_job(
                conn,
                set,
                index,
                edited_args.as_ref(),
                &served,
                Some(held),
                now,
                plan,
            )
            .await?;
        assent_store::webhooks::enqueue_hold_event(conn, &job, false, now).await?;
        let verdicts = Verdicts {
            edited_args,
            approval_digest: Some(approval_digest),
            ..Verdicts::plain(Verdict::Confirmed, None)
        };
        tracing::info!(index, job = %job.id, not_before = %job.due_at, "item confirmed; held until its window ends");
        Ok(Attempt::Decided(Box::new(ConfirmOutcome::new(
            self.decision(set, index, &verdicts, now),
            ExecutionOutcome::Scheduled {
                job_id: job.id,
                host: served.host,
                not_before: job.due_at,
            },
        ))))
    }

    /// Writes the execution job of queued item `index` (no handler runs here: an
    /// executor of the item's host claims it later), held until `now + hold` when the
    /// tool is held; returns it and the digest of the action approved.
    #[allow(clippy::too_many_arguments)]
    async fn queue_job(
        &self,
        conn: &mut Connection,
        set: &ChangeSet,
        index: usize,
        edited_args: Option<&Value>,
        external: &jobs::ExternalItem,
        held: Option<Held>,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<(jobs::Job, String), ConfirmError> {
        let item = &set.items[index];
        let args = edited_args.unwrap_or(&item.args).clone();
        // Who confirmed a held call travels with its job: the decision its window's end
        // writes names them (from the approvals the decision read, and this reviewer,
        // whose approval is planned beside the job).
        let reviewer = self.reviewer.as_deref();
        let approved_by = held.as_ref().map_or_else(Vec::new, |held| {
            approvals::approvers(&held.revision, &item.args, &args, reviewer)
        });
        let hold = held.map(|held| held.hold);
        // What the person approves, bound to the definition the item's host recorded.
        let definition = host_tools::get(conn, &external.host, &item.tool_name)
            .await?
            .map(|tool| tool.hash);
        let approval_digest = assent_domain::approval_digest(
            &item.tool_name,
            &args,
            item.fingerprint.as_ref(),
            definition.as_deref(),
        );
        let operation_id = OperationId::for_proposal(
            &set.run_key,
            &item.tool_name,
            &args,
            &set.target_id,
            set.id,
            index,
        );
        let mut job = jobs::Job::approved(
            self.engine.new_id(),
            set,
            index,
            &external.host,
            args,
            operation_id,
            now,
        );
        job.idempotent = external.idempotent;
        job.attempt_limit = self.engine.jobs.attempt_limit;
        job.due_at = now + hold.unwrap_or(Duration::ZERO);
        job.approval_digest = Some(approval_digest.clone());
        job.held = hold.is_some();
        job.approved_by = approved_by;
        job.id = jobs::plan_insert_or_revive(conn, &job, plan).await?;
        Ok((job, approval_digest))
    }

    async fn record_verdict(
        &self,
        change_set_id: Uuid,
        index: usize,
        verdict: Verdict,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let mut tx = self.begin_on_set(change_set_id).await?;
        let mut plan = WritePlan::default();
        let decision = self
            .verdict_locked(
                tx.connection(),
                change_set_id,
                index,
                verdict,
                reason,
                now,
                &mut plan,
            )
            .await?;
        // Read, decide, the host's hook, then the plan and the commit at once.
        tx.commit_with(plan, now).await?;
        tracing::info!(index, %verdict, "item decided");
        Ok(decision)
    }

    /// [`Self::record_verdict`] in the caller's transaction `tx`, inside a savepoint of
    /// its own: an error leaves `tx` as it was.
    async fn record_verdict_in(
        &self,
        tx: &mut WriteTx,
        change_set_id: Uuid,
        index: usize,
        verdict: Verdict,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        self.lock_set(tx, change_set_id).await?;
        let mut scope = tx.savepoint().await?;
        let mut plan = WritePlan::default();
        let decided = self
            .verdict_locked(
                scope.connection(),
                change_set_id,
                index,
                verdict,
                reason,
                now,
                &mut plan,
            )
            .await;
        let decided = applied(decided, plan, scope.connection(), now).await;
        match decided {
            Ok(decision) => {
                scope.release().await?;
                tracing::info!(index, %verdict, "item decided in the caller's transaction");
                Ok(decision)
            }
            Err(error) => {
                scope.rollback().await?;
                Err(error)
            }
        }
    }

    /// Records `verdict` (not a confirmation) on item `index` of set `change_set_id`
    /// in `conn`'s transaction, which holds the set's lock: its writes in `plan`, which
    /// the caller applies before it commits.
    #[allow(clippy::too_many_arguments)]
    async fn verdict_locked(
        &self,
        conn: &mut Connection,
        change_set_id: Uuid,
        index: usize,
        verdict: Verdict,
        reason: Option<String>,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<ChangeDecision, ConfirmError> {
        let read = change_sets::require_for_decision(conn, change_set_id).await?;
        plan.after_head(read.chain_head);
        let mut set = read.set;
        decide::check_plain(&set, index, verdict, read.served.get(index))?;
        let verdicts = Verdicts {
            shadows: Some(shadow_rules_of(read.rules.as_ref())),
            ..Verdicts::plain(verdict, reason)
        }
        .served(read.served.get(index));
        let mut decisions = self
            .record_into(conn, &mut set, &[index], verdicts, now, plan, None)
            .await?;
        Ok(decisions.remove(0))
    }

    /// Rejects item `index`, with the person's reason.
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
    /// # let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
    /// #     "name": "set_body", "input": {"body": "final"}}]))?;
    /// # let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
    /// # let set = engine.wakes().wake(request, now).await?.change_set.ok_or("nothing queued")?;
    /// let reason = Some("Keep the draft".to_owned());
    /// let decision = engine.confirmations().reject_item(ItemRef::new(set.id, 0), reason, now).await?;
    /// assert_eq!(decision.verdict, assent::domain::Verdict::Rejected);
    /// // The agent's next prompt carries the reason (`ConfirmationService::history`).
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    #[tracing::instrument(skip(self, reason), fields(change_set = %item))]
    pub async fn reject_item(
        &self,
        item: ItemRef,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        let reason = clean_reason(reason)?;
        self.record_verdict(change_set_id, index, Verdict::Rejected, reason, now)
            .await
    }

    /// [`Self::reject_item`] in the caller's write transaction `tx` (from
    /// [`Store::begin_write`] or [`Store::begin_write_on`] the set's target): the
    /// decision and [`crate::Host::on_decided`] are written in it, nothing is committed.
    /// Write your own rows on `tx.connection()` before or after, then commit: the
    /// rejection and your rows stand together; roll back, and the item is still open.
    /// An error leaves `tx` as it was before the call. Never call the plain method
    /// while holding a write transaction of the same store: it waits for the writer
    /// lock you hold, and ends in [`StoreError::WriterBusy`] after the busy timeout.
    ///
    /// ```
    /// # use assent_confirm::{ConfirmError, Engine, ItemRef};
    /// # use assent_domain::OffsetDateTime;
    /// # async fn refuse(engine: &Engine, item: ItemRef, now: OffsetDateTime) -> Result<(), ConfirmError> {
    /// let mut tx = engine.store().begin_write().await?;
    /// sqlx::query("UPDATE invoices SET disputed = 0 WHERE id = 'INV-1'")
    ///     .execute(tx.connection())
    ///     .await
    ///     .map_err(assent_store::StoreError::from)?;
    /// let reason = Some("not this customer".to_owned());
    /// engine.confirmations().reject_item_in(&mut tx, item, reason, now).await?;
    /// tx.commit().await?; // the rejection and the invoice's row, together
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`Store::begin_write`]: assent_store::Store::begin_write
    /// [`Store::begin_write_on`]: assent_store::Store::begin_write_on
    /// [`StoreError::WriterBusy`]: assent_store::StoreError::WriterBusy
    #[tracing::instrument(skip(self, tx, reason), fields(change_set = %item))]
    pub async fn reject_item_in(
        &self,
        tx: &mut WriteTx,
        item: ItemRef,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let reason = clean_reason(reason)?;
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.record_verdict_in(tx, change_set_id, index, Verdict::Rejected, reason, now)
            .await
    }

    /// [`Self::defer_item`] in the caller's write transaction `tx`, as
    /// [`Self::reject_item_in`] does it.
    #[tracing::instrument(skip(self, tx), fields(change_set = %item))]
    pub async fn defer_item_in(
        &self,
        tx: &mut WriteTx,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.record_verdict_in(tx, change_set_id, index, Verdict::Deferred, None, now)
            .await
    }

    /// Puts item `index` off; it stays open.
    #[tracing::instrument(skip(self), fields(change_set = %item))]
    pub async fn defer_item(
        &self,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.record_verdict(change_set_id, index, Verdict::Deferred, None, now)
            .await
    }

    /// Withdraws item `index` without applying it (e.g. the agent changed its mind).
    #[tracing::instrument(skip(self), fields(change_set = %item))]
    pub async fn retract_item(
        &self,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        self.record_verdict(change_set_id, index, Verdict::Retracted, None, now)
            .await
    }

    /// [`ConfirmationService::retract_item`], saying why in the decision's reason (the
    /// MCP client stopped waiting; a coding agent's hook handed the call to the agent's
    /// own prompt: "answered in the client"), so the audit trail tells it from a plain
    /// withdrawal.
    #[tracing::instrument(skip(self, reason), fields(change_set = %item))]
    pub async fn withdraw_item(
        &self,
        item: ItemRef,
        reason: impl Into<String>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        let reason = clean_reason(Some(reason.into()))?;
        self.record_verdict(change_set_id, index, Verdict::Retracted, reason, now)
            .await
    }

    /// Confirms every pending item, in order, in one transaction: one durable commit
    /// for the whole set (group commit) instead of one per item. Each item is atomic
    /// on its own inside it (a savepoint): a failing handler, a denial or any error
    /// rolls back that item's writes only (a refusal keeps its audit records), and the
    /// next handler sees what the previous ones wrote. Continues past failures; one
    /// result per item, returned only once the commit is durable (if the commit fails,
    /// nothing was decided and the error is returned). Deferred items are skipped: a
    /// person put them aside.
    #[tracing::instrument(skip(self), fields(change_set = %change_set_id))]
    pub async fn confirm_all(
        &self,
        change_set_id: Uuid,
        now: OffsetDateTime,
    ) -> Result<ConfirmAllResult, ConfirmError> {
        let mut tx = self.begin_on_set(change_set_id).await?;
        // The one read, for every item: whether each pending one was applied comes
        // with the set.
        let read = change_sets::require_for_decision_with(tx.connection(), change_set_id, |set| {
            let pending = set.items.iter().enumerate();
            pending
                .filter(|(_, item)| item.status == ChangeItemStatus::Pending)
                .flat_map(|(index, _)| operation_of(set, index, None))
                .collect()
        })
        .await?;
        // Every item's audit records, chain entries and outbox messages, written once
        // at the end: a failed item's go with its savepoint.
        let (mut set, mut batch, mut plan) = Batch::deferring_statuses(read);
        let mut items = Vec::with_capacity(set.items.len());
        for index in 0..set.items.len() {
            let item = &set.items[index];
            let summary = item.human_summary.clone();
            let result = match (item.status, batch.served[index].held) {
                (ChangeItemStatus::Pending, Some((_, until))) => ItemResult::Skipped(format!(
                    "confirmed already; held until {}",
                    assent_store::timefmt::format(until)
                )),
                (ChangeItemStatus::Pending, None) => {
                    self.confirm_one_of_all(&mut tx, &mut set, index, &mut batch, now, &mut plan)
                        .await?
                }
                (ChangeItemStatus::Deferred, _) => {
                    ItemResult::Skipped("deferred; confirm it on its own".to_owned())
                }
                (decided, _) => ItemResult::Skipped(format!("already {decided}")),
            };
            items.push(ConfirmAllItem {
                index,
                summary,
                result,
            });
        }
        let decided = batch.deferred_statuses.unwrap_or_default();
        if !decided.is_empty() {
            change_sets::update_status_into(tx.connection(), &set, &decided, now, &mut plan)
                .await?;
        }
        tx.commit_with(plan, now).await?;
        let confirmed = items
            .iter()
            .filter(|item| matches!(item.result, ItemResult::Confirmed(_)))
            .count();
        tracing::info!(confirmed, "items confirmed in one commit");
        Ok(ConfirmAllResult {
            change_set_id,
            items,
        })
    }

    /// One item of [`Self::confirm_all`], inside its own savepoint. `Err` only when
    /// the savepoint itself fails: the whole transaction is then lost.
    async fn confirm_one_of_all(
        &self,
        tx: &mut WriteTx,
        set: &mut ChangeSet,
        index: usize,
        batch: &mut Batch,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<ItemResult, ConfirmError> {
        let mut item = tx.savepoint().await?;
        let mut own = WritePlan::default();
        // What the item changes in memory goes with its writes when they are rolled back.
        let before = set.clone();
        let decided_before = batch.deferred_statuses.as_ref().map_or(0, Vec::len);
        match self
            .attempt_in(&mut item, set, index, batch, None, now, &mut own)
            .await
        {
            Ok(Attempt::Undone(refusal)) => {
                item.rollback().await?;
                plan.extend(own);
                Ok(ItemResult::Failed(refusal))
            }
            Ok(attempt) => {
                item.release().await?;
                plan.extend(own);
                Ok(match attempt {
                    Attempt::Decided(outcome) => ItemResult::Confirmed(outcome),
                    Attempt::Refused(refusal) | Attempt::Undone(refusal) => {
                        ItemResult::Failed(refusal)
                    }
                })
            }
            Err(error) => {
                item.rollback().await?;
                *set = before;
                if let Some(decided) = &mut batch.deferred_statuses {
                    decided.truncate(decided_before);
                }
                Ok(ItemResult::Failed(error))
            }
        }
    }

    /// Rejects every open item of the set with `reason`, in one transaction. An item
    /// confirmed and still in its hold window is left alone: it is taken back by
    /// cancelling its job ([`Engine::cancel_job`]).
    #[tracing::instrument(skip(self, reason), fields(change_set = %change_set_id))]
    pub async fn dismiss(
        &self,
        change_set_id: Uuid,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let reason = clean_reason(reason)?;
        let mut tx = self.begin_on_set(change_set_id).await?;
        let mut plan = WritePlan::default();
        let decisions = self
            .dismiss_locked(tx.connection(), change_set_id, reason, now, &mut plan)
            .await?;
        tx.commit_with(plan, now).await?;
        tracing::info!(rejected = decisions.len(), "change set dismissed");
        Ok(decisions)
    }

    /// [`Self::dismiss`] in the caller's write transaction `tx`, as
    /// [`Self::reject_item_in`] does it: [`crate::Host::on_decided`] is called once per
    /// item rejected, and an error leaves `tx` as it was before the call.
    #[tracing::instrument(skip(self, tx, reason), fields(change_set = %change_set_id))]
    pub async fn dismiss_in(
        &self,
        tx: &mut WriteTx,
        change_set_id: Uuid,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let reason = clean_reason(reason)?;
        self.lock_set(tx, change_set_id).await?;
        let mut scope = tx.savepoint().await?;
        let mut plan = WritePlan::default();
        let dismissed = self
            .dismiss_locked(scope.connection(), change_set_id, reason, now, &mut plan)
            .await;
        let dismissed = applied(dismissed, plan, scope.connection(), now).await;
        match dismissed {
            Ok(decisions) => {
                scope.release().await?;
                tracing::info!(
                    rejected = decisions.len(),
                    "change set dismissed in the caller's transaction"
                );
                Ok(decisions)
            }
            Err(error) => {
                scope.rollback().await?;
                Err(error)
            }
        }
    }

    /// Rejects every open item of set `change_set_id` that no hold window keeps, in
    /// `conn`'s transaction, which holds the set's lock: its writes in `plan`, which
    /// the caller applies before it commits.
    async fn dismiss_locked(
        &self,
        conn: &mut Connection,
        change_set_id: Uuid,
        reason: Option<String>,
        now: OffsetDateTime,
        plan: &mut WritePlan,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let read = change_sets::require_for_decision(conn, change_set_id).await?;
        plan.after_head(read.chain_head);
        let (mut set, served) = (read.set, read.served);
        let open: Vec<usize> = set
            .open_indexes()
            .filter(|&index| served[index].held.is_none())
            .collect();
        let Some(&first) = open.first() else {
            return Err(ConfirmError::conflict(
                ConflictKind::NothingOpen,
                format!("change set {change_set_id} has no open items"),
            ));
        };
        set.check_verdict(first, Verdict::Rejected)?;
        // One wake's set: every item is served by the host that queued it.
        let verdicts = Verdicts {
            shadows: Some(shadow_rules_of(read.rules.as_ref())),
            ..Verdicts::plain(Verdict::Rejected, reason)
        }
        .served(served.get(first));
        self.record_into(conn, &mut set, &open, verdicts, now, plan, None)
            .await
    }

    /// Expires open sets created more than `ttl` before `now`: they leave the pending
    /// view; their open items stay undecided. Returns the expired sets' ids.
    #[tracing::instrument(skip(self))]
    pub async fn expire(
        &self,
        now: OffsetDateTime,
        ttl: Duration,
    ) -> Result<Vec<Uuid>, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let ids = change_sets::open_created_before(tx.connection(), now - ttl).await?;
        for &id in &ids {
            let mut set = change_sets::require(tx.connection(), id).await?;
            if set.expire() {
                set.vector_clock.tick(self.engine.store.device_id());
                change_sets::update_status(tx.connection(), &set, &[], now).await?;
            }
        }
        tx.commit().await?;
        if ids.is_empty() {
            tracing::debug!("no stale change sets to expire");
        } else {
            tracing::info!(expired = ids.len(), "stale change sets expired");
        }
        Ok(ids)
    }

    /// The `## Recent User Decisions` section for the agent's next wake (about
    /// `target` when given), or `None` when there are no decisions.
    #[tracing::instrument(skip(self))]
    pub async fn history(
        &self,
        agent_id: &str,
        target: Option<&Target>,
        limit: u32,
    ) -> Result<Option<String>, ConfirmError> {
        let mut conn = self
            .engine
            .store
            .read_connection()
            .await
            .map_err(ConfirmError::from)?;
        let decisions = assent_store::decisions::recent(&mut conn, agent_id, target, limit).await?;
        // What became of the confirmed calls that ran outside the database: the model
        // learns that an approved refund failed, not only that it was approved.
        let runs = jobs::for_confirmations(&mut conn, &decisions).await?;
        let undone = change_sets::undone_for_agent(&mut conn, agent_id).await?;
        Ok(assent_changeset::render_history_with_runs(
            &decisions,
            |d| {
                use assent_changeset::RunStatus as Run;
                use jobs::JobStatus;
                let reversed = |u: &change_sets::Undoes| {
                    (u.change_set_id, u.item_index) == (d.change_set_id, d.item_index)
                };
                if d.verdict == Verdict::Confirmed && undone.iter().any(reversed) {
                    return Some(Run::Undone);
                }
                let job = runs
                    .iter()
                    .find(|j| (j.change_set_id, j.item_index) == (d.change_set_id, d.item_index))?;
                // Every status named: a new one has to choose its words here.
                Some(match job.status {
                    JobStatus::Approved => Run::NotRunYet,
                    JobStatus::Running => Run::Running,
                    JobStatus::Applied => Run::Ran,
                    JobStatus::Failed => Run::Failed(job.last_error.clone()),
                    JobStatus::InDoubt => Run::InDoubt,
                    JobStatus::Retracted => Run::Retracted,
                    // One not given words yet: said neither to have run nor not to have.
                    _ => Run::InDoubt,
                })
            },
        ))
    }
}
