//! What became of a change set, as the agent that proposed it sees it: each item's
//! status, the person's decision (verdict, reason, edited arguments), the run of a
//! confirmed external item, and the handler's result text when it is known.
//!
//! [`ConfirmationService::wait_outcome`] waits until the set is settled — every item
//! decided and every confirmed external item's job settled — woken by the change feed
//! (`assent_store::change_feed`), which every write path of every process fills: it
//! polls the feed cheaply and re-reads the set only when the feed names it.
//!
//! This is the one answer to "what became of set S": [`ItemOutcome::state`] says where
//! each call stands and [`ItemOutcome::waited_reply`] what a caller that waited for it
//! reads, in the words of `assent_changeset::reply`. The MCP gateway (its `--wait`,
//! its tasks, `assent_status`), the rig hook and the server's outcome route all tell
//! the agent from it, so they cannot disagree about a job in doubt or a rejection.

use crate::{ConfirmError, ConfirmationService};
use assent_changeset::reply;
use assent_domain::{
    ChangeDecision, ChangeItemStatus, ChangeSet, ChangeSetStatus, OperationId, Verdict,
};
use assent_store::jobs::{self, Job, JobStatus};
use assent_store::{Connection, change_feed, change_sets, decisions, operations};
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

/// How often [`ConfirmationService::wait_outcome`] looks at the change feed.
pub const OUTCOME_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Feed entries read per look; more are read on the next one.
const FEED_BATCH: i64 = 1_000;

/// What became of a change set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SetOutcome {
    /// The set.
    pub change_set_id: Uuid,
    /// Where the set stands as a whole.
    pub status: ChangeSetStatus,
    /// Every item is decided and every confirmed external item's job has settled
    /// (applied, failed, in doubt or retracted): nothing more will happen unasked.
    pub settled: bool,
    /// One per item, in order.
    pub items: Vec<ItemOutcome>,
}

/// What became of one item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ItemOutcome {
    /// Its index in the set.
    pub index: usize,
    /// The tool proposed.
    pub tool_name: String,
    /// The arguments proposed (not serialized: the set's own view shows them).
    #[serde(skip)]
    pub args: Value,
    /// Pending, confirmed, rejected, deferred or retracted.
    pub status: ChangeItemStatus,
    /// Where the call stands for the agent that proposed it ([`ItemOutcome::state`]).
    pub state: CallState,
    /// The latest decision about it, if any.
    pub decision: Option<DecisionOutcome>,
    /// The execution job of a confirmed external item.
    pub run: Option<RunOutcome>,
    /// The handler's result text, when known: for a confirmed transactional item the
    /// message recorded under its operation id, for an external one its job's result.
    pub result: Option<String>,
}

/// What a person (or the agent, for a retraction) decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DecisionOutcome {
    /// The verdict.
    pub verdict: Verdict,
    /// The person's reason, for a rejection.
    pub reason: Option<String>,
    /// The arguments a person confirmed instead of the proposal's.
    pub edited_args: Option<Value>,
}

/// How a confirmed external item's job stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RunOutcome {
    /// The job.
    pub job_id: Uuid,
    /// The operation the job runs (not serialized).
    #[serde(skip)]
    pub operation_id: OperationId,
    /// The host declared the tool idempotent: in doubt, it simply runs again (not
    /// serialized).
    #[serde(skip)]
    pub idempotent: bool,
    /// Approved, running, applied, failed, inDoubt or retracted.
    #[serde(serialize_with = "job_status")]
    pub status: JobStatus,
    /// Claims so far.
    pub attempts: u32,
    /// The tool's result text once applied.
    pub result: Option<String>,
    /// The last error, or why it is in doubt.
    pub last_error: Option<String>,
}

fn job_status<S: Serializer>(status: &JobStatus, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(status.as_str())
}

impl RunOutcome {
    fn of(job: &Job) -> Self {
        Self {
            job_id: job.id,
            operation_id: job.operation_id.clone(),
            idempotent: job.idempotent,
            status: job.status,
            attempts: job.attempts,
            result: job.result.clone(),
            last_error: job.last_error.clone(),
        }
    }

    /// Nothing more happens to the job unless a person acts. A job in doubt of an
    /// idempotent tool is not settled: the ledger runs it again.
    pub fn is_settled(&self) -> bool {
        match self.status {
            JobStatus::Approved | JobStatus::Running => false,
            JobStatus::InDoubt => !self.idempotent,
            JobStatus::Applied | JobStatus::Failed | JobStatus::Retracted => true,
            // A status this engine does not know: nothing here moves it on, so a wait
            // ends with it rather than running out.
            _ => true,
        }
    }
}

/// Where one call stands for the agent that proposed it, the same at every door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum CallState {
    /// Nobody decided it yet (pending or deferred).
    Pending,
    /// Confirmed; its run has not finished (approved, running, or in doubt for an
    /// idempotent tool, which runs again).
    Running,
    /// Confirmed and applied (or confirmed as already true).
    Applied,
    /// A person rejected it.
    Rejected,
    /// Withdrawn before a person decided it (the client stopped waiting, the agent
    /// retracted it).
    Withdrawn,
    /// Confirmed, but its run failed for good or was withdrawn.
    Failed,
    /// Confirmed, and whether it took effect is unknown until a person settles it.
    InDoubt,
}

impl CallState {
    /// `pending`, `running`, `applied`, `rejected`, `withdrawn`, `failed`, `inDoubt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Applied => "applied",
            Self::Rejected => "rejected",
            Self::Withdrawn => "withdrawn",
            Self::Failed => "failed",
            Self::InDoubt => "inDoubt",
        }
    }

    /// Nothing more happens to the call unless someone acts: a waiting caller answers.
    pub fn is_settled(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// The call did not (or may not have) taken effect: its answer is an error.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Self::Rejected | Self::Withdrawn | Self::Failed | Self::InDoubt
        )
    }

    fn of(status: ChangeItemStatus, run: Option<&RunOutcome>) -> Self {
        match status {
            ChangeItemStatus::Confirmed => match run {
                None => Self::Applied,
                Some(run) => match run.status {
                    JobStatus::Applied => Self::Applied,
                    JobStatus::Approved | JobStatus::Running => Self::Running,
                    JobStatus::InDoubt if run.idempotent => Self::Running,
                    JobStatus::Failed | JobStatus::Retracted => Self::Failed,
                    // In doubt, or a status this engine has no words for yet: never
                    // said to be done.
                    _ => Self::InDoubt,
                },
            },
            ChangeItemStatus::Rejected => Self::Rejected,
            ChangeItemStatus::Retracted => Self::Withdrawn,
            // Pending, deferred, or a status this engine does not know: still open.
            _ => Self::Pending,
        }
    }
}

impl ItemOutcome {
    /// The arguments a person confirmed instead of the proposal's, when they differ.
    pub fn edited_args(&self) -> Option<&Value> {
        self.decision
            .as_ref()
            .filter(|d| d.verdict == Verdict::Confirmed)
            .and_then(|d| d.edited_args.as_ref())
            .filter(|edited| **edited != self.args)
    }

    /// What a caller that waited for the call reads once it is settled (`None` while
    /// it is pending or running): the handler's result when applied, else the reply
    /// module's words for a rejection, a failure or a call in doubt. A withdrawn call
    /// reads as a rejection with the withdrawal's reason.
    pub fn waited_reply(&self) -> Option<String> {
        let reason = self.decision.as_ref().and_then(|d| d.reason.as_deref());
        let error = self.run.as_ref().and_then(|run| run.last_error.as_deref());
        Some(match self.state {
            CallState::Applied => self
                .result
                .clone()
                .unwrap_or_else(|| reply::WAITED_APPLIED.to_owned()),
            CallState::Rejected | CallState::Withdrawn => reply::waited_rejected(reason),
            CallState::Failed => reply::waited_failed(error),
            CallState::InDoubt => reply::waited_in_doubt(error),
            CallState::Pending | CallState::Running => return None,
        })
    }
}

impl ConfirmationService {
    /// What became of set `change_set_id` now.
    #[tracing::instrument(skip(self), fields(change_set = %change_set_id))]
    pub async fn outcome(&self, change_set_id: Uuid) -> Result<SetOutcome, ConfirmError> {
        let mut conn = self.connection().await?;
        read_outcome(&mut conn, change_set_id).await
    }

    /// Waits until set `change_set_id` is settled (see [`SetOutcome::settled`]) or
    /// `timeout` runs out, and returns its outcome then (`settled` says which). Woken
    /// by the change feed, so a decision or a job's run recorded by any process on the
    /// same database ends the wait within [`OUTCOME_POLL_INTERVAL`] or so; the set is
    /// re-read only when the feed names it. No connection is held between looks.
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
    /// use std::time::Duration;
    ///
    /// // The agent awaits the person, who answers meanwhile (here in a task; anywhere in
    /// // practice: the CLI, the review page, another process on the same database).
    /// let person = engine.confirmations();
    /// let answer = tokio::spawn(async move { person.confirm_item(ItemRef::new(set.id, 0), now).await });
    /// let outcome = engine.confirmations().wait_outcome(set.id, Duration::from_secs(60)).await?;
    /// answer.await??;
    /// assert!(outcome.settled);
    /// assert_eq!(outcome.items[0].waited_reply().as_deref(), Some("Body set to final."));
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    #[tracing::instrument(skip(self), fields(change_set = %change_set_id))]
    pub async fn wait_outcome(
        &self,
        change_set_id: Uuid,
        timeout: Duration,
    ) -> Result<SetOutcome, ConfirmError> {
        let deadline = Instant::now() + timeout;
        let (mut cursor, mut outcome) = {
            let mut conn = self.connection().await?;
            // The cursor first: a write after it is seen, whether or not the read has it.
            let cursor = change_feed::latest(&mut conn).await?;
            (cursor, read_outcome(&mut conn, change_set_id).await?)
        };
        while !outcome.settled {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(OUTCOME_POLL_INTERVAL.min(deadline - now)).await;
            let mut conn = self.connection().await?;
            let (sets, position) = change_feed::since(&mut conn, cursor, FEED_BATCH).await?;
            cursor = position;
            if sets.contains(&change_set_id) {
                outcome = read_outcome(&mut conn, change_set_id).await?;
            }
        }
        Ok(outcome)
    }

    async fn connection(&self) -> Result<assent_store::ReadConnection, ConfirmError> {
        self.engine
            .store()
            .read_connection()
            .await
            .map_err(ConfirmError::from)
    }
}

pub(crate) async fn read_outcome(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<SetOutcome, ConfirmError> {
    let set = change_sets::require(conn, change_set_id).await?;
    let decided = decisions::for_change_set(conn, change_set_id).await?;
    let ran = jobs::for_change_set(conn, change_set_id).await?;
    let mut items = Vec::with_capacity(set.items.len());
    for (index, item) in set.items.iter().enumerate() {
        // Oldest first: the last one about the item stands.
        let decision = decided.iter().rev().find(|d| d.item_index == index);
        let run = ran
            .iter()
            .find(|job| job.item_index == index)
            .map(RunOutcome::of);
        let result = match (&run, decision) {
            (Some(run), _) => run.result.clone(),
            (None, Some(decision)) if item.status == ChangeItemStatus::Confirmed => {
                operations::applied(conn, &operation_id(&set, decision)).await?
            }
            (None, _) => None,
        };
        items.push(ItemOutcome {
            index,
            tool_name: item.tool_name.clone(),
            args: item.args.clone(),
            status: item.status,
            state: CallState::of(item.status, run.as_ref()),
            decision: decision.map(|d| DecisionOutcome {
                verdict: d.verdict,
                reason: d.reason.clone(),
                edited_args: d.edited_args.clone(),
            }),
            run,
            result,
        });
    }
    let settled = items.iter().all(|item| item.state.is_settled());
    // The set's row and its items are read by two statements, outside a transaction:
    // a decision committed between them would leave a stored status older than the
    // items. The status derived from the items read is the one they agree with.
    let status = assent_domain::derive_set_status(
        set.status,
        items.iter().map(|item| item.status),
        set.resolved_at,
        set.created_at,
    )
    .status;
    Ok(SetOutcome {
        change_set_id,
        status,
        settled,
        items,
    })
}

/// The operation id the confirmation of `decision`'s item ran under (the person's
/// edit when there was one).
pub(crate) fn operation_id(set: &ChangeSet, decision: &ChangeDecision) -> OperationId {
    let item = &set.items[decision.item_index];
    OperationId::for_proposal(
        &set.run_key,
        &item.tool_name,
        decision.edited_args.as_ref().unwrap_or(&item.args),
        &set.target_id,
        set.id,
        decision.item_index,
    )
}
