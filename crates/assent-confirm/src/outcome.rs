//! What became of a change set, as the agent that proposed it sees it: each item's
//! status, the person's decision (verdict, reason, edited arguments), the run of a
//! confirmed external item, and the handler's result text when it is known.
//!
//! [`ConfirmationService::wait_outcome`] waits until the set is settled — every item
//! decided and every confirmed external item's job settled — woken by the change feed
//! (`assent_store::change_feed`), which every write path of every process fills: it
//! polls the feed cheaply and re-reads the set only when the feed names it.

use crate::{ConfirmError, ConfirmationService};
use assent_domain::{
    ChangeDecision, ChangeItemStatus, ChangeSet, ChangeSetStatus, OperationId, Verdict,
};
use assent_store::jobs::{self, Job, JobStatus};
use assent_store::{AnyConnection, change_feed, change_sets, decisions, operations};
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
pub struct ItemOutcome {
    /// Its index in the set.
    pub index: usize,
    /// The tool proposed.
    pub tool_name: String,
    /// Pending, confirmed, rejected, deferred or retracted.
    pub status: ChangeItemStatus,
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
pub struct RunOutcome {
    /// The job.
    pub job_id: Uuid,
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
            status: job.status,
            attempts: job.attempts,
            result: job.result.clone(),
            last_error: job.last_error.clone(),
        }
    }

    /// Nothing more happens to the job unless a person acts.
    pub fn is_settled(&self) -> bool {
        match self.status {
            JobStatus::Approved | JobStatus::Running => false,
            JobStatus::Applied | JobStatus::Failed | JobStatus::InDoubt | JobStatus::Retracted => {
                true
            }
            // A status this engine does not know: nothing here moves it on, so a wait
            // ends with it rather than running out.
            _ => true,
        }
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
    conn: &mut AnyConnection,
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
            status: item.status,
            decision: decision.map(|d| DecisionOutcome {
                verdict: d.verdict,
                reason: d.reason.clone(),
                edited_args: d.edited_args.clone(),
            }),
            run,
            result,
        });
    }
    let settled = items.iter().all(|item| {
        item.status.is_decided() && item.run.as_ref().is_none_or(RunOutcome::is_settled)
    });
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
