//! The execution ledger: one job per confirmed item whose tool's effect lies outside
//! the database (an HTTP call, an e-mail, an MCP server's tool).
//!
//! A job moves `approved` → `running` (claimed with a lease, committed before the
//! call) → `applied` or, on an error, back to `approved` (a retry, later) or `failed`.
//! A `running` job whose lease ran out with no outcome is `inDoubt`: the effect may or
//! may not have happened, and nothing runs it again until the host reconciles it or a
//! person settles it. Every transition is a conditional `UPDATE` on the status it
//! leaves (and, for outcomes, on the attempt that claimed it), so two executors, a
//! late outcome and a person's answer can race without a job running twice at once or
//! an outcome landing on the wrong attempt. None of them needs the writer lock: run
//! them in [`crate::Store::begin_claim`]'s transaction.

use crate::Connection;
use crate::plan::WritePlan;
use crate::row::Statement;
use crate::{Backend, StoreError, chain, timefmt};
use assent_domain::{ChangeDecision, ChangeSet, OperationId, Target, Verdict};
use assent_tools::{AuditKind, AuditRecord, ExecutionTarget, ToolInvocation};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;
use std::fmt;
use std::str::FromStr;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const TABLE: &str = "execution_jobs";

/// The target kind of a coding agent's hook calls (`assent_hook::TARGET_KIND`): the
/// agent runs such a job's call itself once its hook claims the job
/// ([`Job::agent_outcome`]).
pub const AGENT_RUNS_KIND: &str = "workspace";

/// The status a held job shows until its window ends ([`Job::status_name`]).
pub const SCHEDULED: &str = "scheduled";

/// Why a held confirmation that a person cancelled ended rejected: the agent reads it.
pub const CANCELLED_IN_HOLD: &str = "Cancelled during the hold window";

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobStatus {
    /// Confirmed, waiting for an executor of its host.
    Approved,
    /// Claimed: an executor holds its lease and may be calling the tool now.
    Running,
    /// The effect happened; the result is recorded.
    Applied,
    /// It failed for good (a permanent error, or retries used up); a person may retry
    /// or retract it.
    Failed,
    /// A lease ran out with no outcome: the effect may have happened.
    InDoubt,
    /// A person withdrew a failed job; it never runs.
    Retracted,
}

impl JobStatus {
    /// The name in the database and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Running => "running",
            Self::Applied => "applied",
            Self::Failed => "failed",
            Self::InDoubt => "inDoubt",
            Self::Retracted => "retracted",
        }
    }

    /// Words for a person (`in doubt`).
    pub fn label(self) -> &'static str {
        match self {
            Self::InDoubt => "in doubt",
            other => other.as_str(),
        }
    }
}

/// What happens to a job. Its moves are one pure state machine
/// ([`JobStatus::after`]); each write is a conditional `UPDATE` on exactly the
/// statuses the event may leave ([`JobEvent::leaves`]), so racing writers settle on
/// one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobEvent {
    /// An executor claims an approved job to run it.
    Claim,
    /// The claimed attempt took effect, or a late outcome settles its doubt.
    Applied,
    /// The claimed attempt failed and is due again later.
    FailedWillRetry,
    /// The claimed attempt failed for good.
    Failed,
    /// The claimed attempt got no answer (its call outlived its lease, or its
    /// executor stopped): the effect may have happened.
    NoAnswer,
    /// A job in doubt may run again: it is safe (or idempotent), or a person says so.
    DueAgain,
    /// A person retries a failed job.
    Retry,
    /// A person gives up on a failed job.
    GiveUp,
    /// A claimed held job was found stale or undecidable at the end of its window.
    EndedInHold,
    /// A person cancels a held job while it waits out its window.
    CancelHold,
    /// A sync merge demoted its confirmation: what never ran is retracted, what may
    /// have run goes in doubt.
    Demoted,
}

impl JobEvent {
    /// Every event.
    pub const ALL: [JobEvent; 11] = [
        Self::Claim,
        Self::Applied,
        Self::FailedWillRetry,
        Self::Failed,
        Self::NoAnswer,
        Self::DueAgain,
        Self::Retry,
        Self::GiveUp,
        Self::EndedInHold,
        Self::CancelHold,
        Self::Demoted,
    ];

    /// The statuses this event moves a job out of (where [`JobStatus::after`] has a
    /// next status).
    pub fn leaves(self) -> Vec<JobStatus> {
        JobStatus::ALL
            .into_iter()
            .filter(|status| status.after(self).is_some())
            .collect()
    }

    /// `CASE status WHEN '…' THEN '…' … END`: the next status of each status this
    /// event leaves, for the conditional `UPDATE`'s `SET status = …`.
    fn next_status(self) -> String {
        let mut case = String::from("CASE status");
        for status in self.leaves() {
            if let Some(next) = status.after(self) {
                case.push_str(&format!(
                    " WHEN '{}' THEN '{}'",
                    status.as_str(),
                    next.as_str()
                ));
            }
        }
        case.push_str(" END");
        case
    }

    /// `status IN ('…', …)` over [`Self::leaves`], for the conditional `UPDATE`.
    fn status_in(self) -> String {
        let names: Vec<String> = self
            .leaves()
            .iter()
            .map(|status| format!("'{}'", status.as_str()))
            .collect();
        format!("status IN ({})", names.join(", "))
    }
}

impl JobStatus {
    /// Every status.
    pub const ALL: [JobStatus; 6] = [
        Self::Approved,
        Self::Running,
        Self::Applied,
        Self::Failed,
        Self::InDoubt,
        Self::Retracted,
    ];

    /// The status a job in this one moves to on `event`, or `None` when the event
    /// does not apply here (the write then changes nothing and says so).
    pub fn after(self, event: JobEvent) -> Option<JobStatus> {
        use JobEvent as E;
        use JobStatus as S;
        Some(match (self, event) {
            (S::Approved, E::Claim) => S::Running,
            (S::Running | S::InDoubt, E::Applied) => S::Applied,
            (S::Running, E::FailedWillRetry) => S::Approved,
            (S::Running, E::Failed) => S::Failed,
            (S::Running, E::NoAnswer) => S::InDoubt,
            (S::InDoubt, E::DueAgain) => S::Approved,
            (S::Failed, E::Retry) => S::Approved,
            (S::Failed, E::GiveUp) => S::Retracted,
            (S::Running, E::EndedInHold) => S::Retracted,
            (S::Approved, E::CancelHold) => S::Retracted,
            (S::Approved | S::Failed, E::Demoted) => S::Retracted,
            (S::Running | S::Applied | S::InDoubt, E::Demoted) => S::InDoubt,
            _ => return None,
        })
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "approved" => Self::Approved,
            "running" => Self::Running,
            "applied" => Self::Applied,
            "failed" => Self::Failed,
            "inDoubt" => Self::InDoubt,
            "retracted" => Self::Retracted,
            other => return Err(format!("unknown job status {other:?}")),
        })
    }
}

/// One job of the ledger.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Job {
    /// Its id.
    pub id: Uuid,
    /// The item's operation id: the idempotency key handed to the tool.
    pub operation_id: OperationId,
    /// The confirmed item's set.
    pub change_set_id: Uuid,
    /// The item's index in its set.
    pub item_index: usize,
    /// The host whose executors run it ([`Host::name`](../../assent_confirm)).
    pub host: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments to run it with (a person's edit when there was one).
    pub args: Value,
    /// The agent that proposed it.
    pub agent_id: String,
    /// What it is about.
    pub target: Target,
    /// The run that proposed it.
    pub run_key: String,
    /// The host declared the tool idempotent: a job in doubt is simply retried.
    pub idempotent: bool,
    /// Where it stands.
    pub status: JobStatus,
    /// Claims so far (the number of the current or last attempt).
    pub attempts: u32,
    /// Retryable errors are retried while `attempts` is below this.
    pub attempt_limit: u32,
    /// How often a lease ran out on it with no outcome.
    pub doubts: u32,
    /// The last error, or why it is in doubt.
    pub last_error: Option<String>,
    /// The tool's result text once applied.
    pub result: Option<String>,
    /// When it may be claimed (next attempt).
    pub due_at: OffsetDateTime,
    /// When the last attempt started.
    pub started_at: Option<OffsetDateTime>,
    /// Until when the last claim holds.
    pub lease_until: Option<OffsetDateTime>,
    /// When the item was confirmed.
    pub created_at: OffsetDateTime,
    /// The last transition.
    pub updated_at: OffsetDateTime,
    /// The device whose executor runs it, for a copy synced from another device;
    /// `None` for this device's own. Only the owner runs or settles a job.
    pub owner_device: Option<String>,
    /// What the person approved, bound to the exact action
    /// ([`assent_domain::approval_digest`]); the executor recomputes it before the run.
    /// `None` for jobs from before migration 0015 and copies from other devices.
    pub approval_digest: Option<String>,
    /// The confirmation waits out its tool's hold window (`assent agent hold`): until
    /// the job is first claimed at `due_at`, no decision exists and a person may
    /// cancel it ([`cancel_held`]). Stays true once the window has ended.
    pub held: bool,
    /// Who confirmed a held job (migration 0020): the person, or under a quorum every
    /// approver of the revision that met it, the one who met it last. The claim at
    /// the window's end writes the decision naming the last one. Empty for a job that
    /// is not held, or a confirmation that named nobody.
    pub approved_by: Vec<String>,
}

impl Job {
    /// A new job `id` for item `index` of `set`, confirmed at `now`, to run on `host`
    /// with `args` under `operation_id`: approved and due at once, never claimed, one
    /// attempt, not idempotent, not held, this device's own. What differs (`due_at`,
    /// `attempt_limit`, `idempotent`, `held`, …) is set on the value before
    /// [`insert_or_revive`].
    ///
    /// # Panics
    ///
    /// When `index` names no item of `set`.
    pub fn approved(
        id: Uuid,
        set: &ChangeSet,
        index: usize,
        host: impl Into<String>,
        args: Value,
        operation_id: OperationId,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            operation_id,
            change_set_id: set.id,
            item_index: index,
            host: host.into(),
            tool_name: set.items[index].tool_name.clone(),
            args,
            agent_id: set.agent_id.clone(),
            target: set.target(),
            run_key: set.run_key.clone(),
            idempotent: false,
            status: JobStatus::Approved,
            attempts: 0,
            attempt_limit: 1,
            doubts: 0,
            last_error: None,
            result: None,
            due_at: now,
            started_at: None,
            lease_until: None,
            created_at: now,
            updated_at: now,
            owner_device: None,
            approval_digest: None,
            held: false,
            approved_by: Vec::new(),
        }
    }

    /// Whether the job waits out a hold window now: held, and not claimed yet (its
    /// confirmation is not a decision yet, and a person may still cancel it).
    pub fn scheduled(&self) -> bool {
        self.held && self.status == JobStatus::Approved && self.attempts == 0
    }

    /// Its status as JSON and people see it: `scheduled` while it waits out a hold
    /// window (stored as `approved`), else [`JobStatus::as_str`].
    pub fn status_name(&self) -> &'static str {
        if self.scheduled() {
            SCHEDULED
        } else {
            self.status.as_str()
        }
    }

    /// How a coding agent's call stands, in the words of a call, for a job of a hook
    /// (its target a workspace, [`AGENT_RUNS_KIND`]): the agent runs such a call itself
    /// once its hook takes the answer (claims the job), so "applied" means handed to the
    /// agent, and what ran is what the agent reported (`reported`: its hook's after
    /// event, when one arrived). `None` for any other job.
    pub fn agent_outcome(&self, reported: Option<&str>) -> Option<String> {
        if self.target.kind != AGENT_RUNS_KIND || self.scheduled() {
            return None;
        }
        let why = || self.last_error.as_deref().unwrap_or("no reason recorded");
        Some(match self.status {
            JobStatus::Approved | JobStatus::Running => {
                "confirmed; the agent's hook has not taken the answer yet".to_owned()
            }
            JobStatus::Applied => match reported {
                Some(reported) => reported.to_owned(),
                None => "handed to the agent, which runs the call; it has not reported how it went"
                    .to_owned(),
            },
            JobStatus::InDoubt => format!("unknown whether the agent got it: {}", why()),
            _ => format!("not run: {}", why()),
        })
    }

    /// Adds `notBefore` to a scheduled job's JSON (when its hold window ends),
    /// `approvedBy` to a held one's (who confirmed it), and `ownerDevice` to a copy of
    /// another device's job (where it runs, and where it is cancelled or settled).
    fn with_hold(&self, mut json: Value) -> Value {
        if self.scheduled() {
            json["notBefore"] = Value::String(timefmt::format(self.due_at));
        }
        if !self.approved_by.is_empty() {
            json["approvedBy"] = serde_json::json!(self.approved_by);
        }
        if let Some(owner) = &self.owner_device {
            json["ownerDevice"] = Value::String(owner.clone());
        }
        json
    }

    /// The job as `assent jobs --json` and the API list it: `id`, `changeSetId`,
    /// `itemIndex`, `toolName`, `args`, `status`, `attempts`, `lastError`, and
    /// `notBefore` while it is `scheduled`.
    pub fn to_json(&self) -> Value {
        self.with_hold(serde_json::json!({
            "id": self.id,
            "changeSetId": self.change_set_id,
            "itemIndex": self.item_index,
            "toolName": self.tool_name,
            "args": self.args,
            "status": self.status_name(),
            "attempts": self.attempts,
            "lastError": self.last_error,
        }))
    }

    /// An audit record of `kind` about this job's call, written at `now` (its success
    /// and detail left for the caller to fill in).
    pub fn audit_record(&self, kind: AuditKind, now: OffsetDateTime) -> AuditRecord {
        AuditRecord {
            operation_id: self.operation_id.clone(),
            run_key: self.run_key.clone(),
            tool_name: self.tool_name.clone(),
            agent_id: self.agent_id.clone(),
            target_kind: self.target.kind.clone(),
            target_id: self.target.id.clone(),
            kind,
            args: self.args.clone(),
            success: None,
            detail: None,
            vector_clock: None,
            created_at: now,
            allowed_by: None,
            refused_by: None,
            decided_by: None,
        }
    }

    /// The call this job runs, as the audited executor takes it.
    pub fn invocation(&self, now: OffsetDateTime) -> ToolInvocation {
        ToolInvocation::new(
            self.tool_name.clone(),
            self.args.clone(),
            self.run_key.clone(),
            self.operation_id.clone(),
            ExecutionTarget {
                agent_id: self.agent_id.clone(),
                target: self.target.clone(),
            },
            now,
        )
    }

    /// How its item's execution stands, as item views show it beside the item's own
    /// status: `jobId`, `status`, `attempts`, `lastError`, `result`, and `notBefore`
    /// while it is `scheduled`.
    pub fn execution_json(&self) -> Value {
        let mut json = self.with_hold(serde_json::json!({
            "jobId": self.id,
            "status": self.status_name(),
            "attempts": self.attempts,
            "lastError": self.last_error,
            "result": self.result,
        }));
        // A coding agent's call: how it stands in the words of a call.
        if let Some(outcome) = self.agent_outcome(None) {
            json["outcome"] = Value::String(outcome);
        }
        json
    }
}

/// How an item's effect lands, as the wake recorded it (see [`mark_external`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalItem {
    /// The host that serves it.
    pub host: String,
    /// The host declared the tool idempotent.
    pub idempotent: bool,
}

/// Records that item `index` of set `change_set_id` has an external effect served by
/// `host` (the wake does, in its transaction). Items never marked are transactional.
pub async fn mark_external(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
    item: &ExternalItem,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE change_items SET effect = $1, host = $2 WHERE change_set_id = $3 AND item_index = $4",
    )
    .bind(if item.idempotent {
        "externalIdempotent"
    } else {
        "external"
    })
    .bind(&item.host)
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .execute(conn)
    .await?;
    Ok(())
}

/// Which host serves an item and where its effect lands, as the wake recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServedItem {
    /// The host whose wake queued it; `None` for an item written before hosts were
    /// recorded on every item, or synced from another device.
    pub host: Option<String>,
    /// `Some(idempotent)` when its effect lies outside the database; `None` when the
    /// host's handler writes it in a transaction.
    pub external: Option<bool>,
    /// Its confirmation waiting out a hold window, when it has one: the job's id and
    /// when the window ends ([`Job::scheduled`]).
    pub held: Option<(Uuid, OffsetDateTime)>,
}

impl ServedItem {
    /// An item served by `host`, with `external`'s effect, held by `held`'s job until
    /// its time (for tests and callers that read these elsewhere).
    pub fn new(
        host: Option<String>,
        external: Option<bool>,
        held: Option<(Uuid, OffsetDateTime)>,
    ) -> Self {
        Self {
            host,
            external,
            held,
        }
    }
}

/// Who serves item `index` of set `change_set_id`, or `None` when there is no such item.
pub async fn served_item(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
) -> Result<Option<ServedItem>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT i.effect, i.host, j.id AS held_job, j.due_at AS held_until
         FROM change_items i LEFT JOIN execution_jobs j ON ",
        held_job_of_item!(),
        " WHERE i.change_set_id = $1 AND i.item_index = $2"
    ))
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode_served).transpose()
}

/// The [`ServedItem`] of a row holding an item's `effect` and `host` and its held job's
/// `held_job` and `held_until` (NULL when it has none).
pub(crate) fn decode_served(row: &impl crate::row::StoreRow) -> Result<ServedItem, StoreError> {
    let effect: Option<String> = row.value("effect")?;
    let held_job: Option<String> = row.value("held_job")?;
    let held_until: Option<String> = row.value("held_until")?;
    let held = match (held_job, held_until) {
        (Some(id), Some(until)) => Some((
            Uuid::parse_str(&id).map_err(|e| StoreError::corrupt(TABLE, e))?,
            timefmt::parse(TABLE, &until)?,
        )),
        _ => None,
    };
    Ok(ServedItem {
        host: row.value("host")?,
        external: effect.map(|effect| effect == "externalIdempotent"),
        held,
    })
}

/// The external effect of an item, or `None` when it is transactional.
pub async fn external_item(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
) -> Result<Option<ExternalItem>, StoreError> {
    Ok(match served_item(conn, change_set_id, index).await? {
        Some(ServedItem {
            host: Some(host),
            external: Some(idempotent),
            ..
        }) => Some(ExternalItem { host, idempotent }),
        _ => None,
    })
}

/// The fingerprint stored with the item whose job runs operation `operation_id` (what
/// its host read when it was proposed, or last refreshed), or `None` when it has none.
/// A host that checks its target itself just before an external call compares with it.
pub async fn item_fingerprint(
    conn: &mut Connection,
    operation_id: &str,
) -> Result<Option<Value>, StoreError> {
    let text: Option<Option<String>> = sqlx::query_scalar(
        "SELECT i.fingerprint FROM execution_jobs j JOIN change_items i
           ON i.change_set_id = j.change_set_id AND i.item_index = j.item_index
         WHERE j.operation_id = $1 LIMIT 1",
    )
    .bind(operation_id)
    .fetch_optional(conn)
    .await?;
    text.flatten()
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| StoreError::corrupt("change_items", format!("fingerprint: {e}")))
        })
        .transpose()
}

/// Inserts a new job (the confirming transaction does, beside the decision).
#[tracing::instrument(skip_all, fields(job = %job.id, operation_id = %job.operation_id))]
pub async fn insert(conn: &mut Connection, job: &Job) -> Result<(), StoreError> {
    insert_statement(job).query().execute(&mut *conn).await?;
    chain::append(conn, vec![written_entry(job)], job.updated_at).await
}

/// The insert of `job`'s row.
fn insert_statement(job: &Job) -> Statement {
    Statement::new(
        "INSERT INTO execution_jobs (id, operation_id, change_set_id, item_index, host, tool_name, args,
             agent_id, target_kind, target_id, run_key, idempotent, status, attempts, attempt_limit,
             doubts, last_error, result, due_at, started_at, lease_until, created_at, updated_at, owner_device,
             approval_digest, held, approved_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)"
            .to_owned(),
    )
    .bind(job.id.to_string())
    .bind(job.operation_id.as_str())
    .bind(job.change_set_id.to_string())
    .bind(job.item_index as i64)
    .bind(job.host.as_str())
    .bind(job.tool_name.as_str())
    .bind(job.args.to_string())
    .bind(job.agent_id.as_str())
    .bind(job.target.kind.as_str())
    .bind(job.target.id.as_str())
    .bind(job.run_key.as_str())
    .bind(i64::from(job.idempotent))
    .bind(job.status.as_str())
    .bind(i64::from(job.attempts))
    .bind(i64::from(job.attempt_limit))
    .bind(i64::from(job.doubts))
    .bind(job.last_error.as_deref())
    .bind(job.result.as_deref())
    .bind(timefmt::format(job.due_at))
    .bind(job.started_at.map(timefmt::format))
    .bind(job.lease_until.map(timefmt::format))
    .bind(timefmt::format(job.created_at))
    .bind(timefmt::format(job.updated_at))
    .bind(job.owner_device.as_deref())
    .bind(job.approval_digest.as_deref())
    .bind(i64::from(job.held))
    .bind(approved_by_text(&job.approved_by))
}

/// The consent chain's entry for `job` as written whole (a new job, or another
/// device's copy written over): what a proof compares with the row.
fn written_entry(job: &Job) -> chain::Entry {
    let mut content = chain_content(job);
    content["status"] = Value::String(job.status.as_str().to_owned());
    content["dueAt"] = Value::String(timefmt::format(job.due_at));
    chain::Entry {
        kind: chain::EntryKind::Job,
        subject: job.id.to_string(),
        content,
    }
}

/// What a job's chain entry binds and its row keeps for good: the action, who
/// approved it and under which digest (not its status, attempts, times or host,
/// which move on; the status has entries of its own).
pub fn chain_content(job: &Job) -> Value {
    serde_json::json!({
        "job": job.id,
        "operationId": job.operation_id.as_str(),
        "changeSetId": job.change_set_id,
        "itemIndex": job.item_index,
        "toolName": job.tool_name,
        "args": job.args,
        "agentId": job.agent_id,
        "targetKind": job.target.kind,
        "targetId": job.target.id,
        "approvalDigest": job.approval_digest,
        "approvedBy": job.approved_by,
        "held": job.held,
        "ownerDevice": job.owner_device,
    })
}

/// Appends job `id`'s move to `status` to the consent chain.
async fn chain_status(
    conn: &mut Connection,
    id: &str,
    status: JobStatus,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let entry = chain::Entry {
        kind: chain::EntryKind::Job,
        subject: id.to_owned(),
        content: serde_json::json!({"job": id, "status": status.as_str(), "at": timefmt::format(now)}),
    };
    chain::append(conn, vec![entry], now).await
}

/// `approved_by` as stored: a JSON array, NULL when nobody is named.
fn approved_by_text(approved_by: &[String]) -> Option<String> {
    (!approved_by.is_empty()).then(|| serde_json::json!(approved_by).to_string())
}

fn count(row: &AnyRow, column: &str) -> Result<u32, StoreError> {
    let value: i64 = row.try_get(column)?;
    u32::try_from(value).map_err(|e| StoreError::corrupt(TABLE, format!("{column}: {e}")))
}

pub(crate) fn decode(row: &AnyRow) -> Result<Job, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(TABLE, e);
    let uuid = |column: &str| -> Result<Uuid, StoreError> {
        let text: String = row.try_get(column)?;
        Uuid::parse_str(&text).map_err(|e| corrupt(e.to_string()))
    };
    let time = |column: &str| -> Result<Option<OffsetDateTime>, StoreError> {
        let text: Option<String> = row.try_get(column)?;
        text.map(|t| timefmt::parse(TABLE, &t)).transpose()
    };
    let required = |column: &str| -> Result<OffsetDateTime, StoreError> {
        time(column)?.ok_or_else(|| corrupt(format!("{column} is empty")))
    };
    let args: String = row.try_get("args")?;
    let status: String = row.try_get("status")?;
    let index: i64 = row.try_get("item_index")?;
    let idempotent: i64 = row.try_get("idempotent")?;
    Ok(Job {
        id: uuid("id")?,
        operation_id: OperationId::from_stored(row.try_get("operation_id")?),
        change_set_id: uuid("change_set_id")?,
        item_index: usize::try_from(index).map_err(|e| corrupt(e.to_string()))?,
        host: row.try_get("host")?,
        tool_name: row.try_get("tool_name")?,
        args: serde_json::from_str(&args).map_err(|e| corrupt(e.to_string()))?,
        agent_id: row.try_get("agent_id")?,
        target: Target::new(
            row.try_get::<String, _>("target_kind")?,
            row.try_get::<String, _>("target_id")?,
        ),
        run_key: row.try_get("run_key")?,
        idempotent: idempotent != 0,
        status: status.parse().map_err(corrupt)?,
        attempts: count(row, "attempts")?,
        attempt_limit: count(row, "attempt_limit")?,
        doubts: count(row, "doubts")?,
        last_error: row.try_get("last_error")?,
        result: row.try_get("result")?,
        due_at: required("due_at")?,
        started_at: time("started_at")?,
        lease_until: time("lease_until")?,
        created_at: required("created_at")?,
        updated_at: required("updated_at")?,
        owner_device: row.try_get("owner_device")?,
        approval_digest: row.try_get("approval_digest")?,
        held: row.try_get::<i64, _>("held")? != 0,
        approved_by: match row.try_get::<Option<String>, _>("approved_by")? {
            Some(text) => serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?,
            None => Vec::new(),
        },
    })
}

/// Every job, this device's own and copies of other devices', for a sync export. A
/// job still in its hold window travels too, though it is no decision yet: every
/// device must show its item held and refuse to decide it (its owner alone runs it).
pub(crate) async fn all(conn: &mut Connection) -> Result<Vec<Job>, StoreError> {
    let rows = sqlx::query("SELECT * FROM execution_jobs ORDER BY id")
        .fetch_all(conn)
        .await?;
    rows.iter().map(decode).collect()
}

/// Writes `copy`, another device's job as its owner last wrote it, over the local copy
/// (or as a new row). This device's own jobs are never written over. The arguments,
/// the hold and who confirmed are written too: the owner may have written a new
/// confirmation over a retracted job's row ([`insert_or_revive`] keeps its id).
pub(crate) async fn write_copy(conn: &mut Connection, copy: &Job) -> Result<(), StoreError> {
    let changed = sqlx::query(
        "UPDATE execution_jobs SET status = $1, attempts = $2, attempt_limit = $3, doubts = $4,
             last_error = $5, result = $6, updated_at = $7, due_at = $10, lease_until = NULL,
             args = $11, held = $12, approved_by = $13, created_at = $14
         WHERE id = $8 AND owner_device = $9",
    )
    .bind(copy.status.as_str())
    .bind(i64::from(copy.attempts))
    .bind(i64::from(copy.attempt_limit))
    .bind(i64::from(copy.doubts))
    .bind(copy.last_error.as_deref())
    .bind(copy.result.as_deref())
    .bind(timefmt::format(copy.updated_at))
    .bind(copy.id.to_string())
    .bind(copy.owner_device.as_deref())
    .bind(timefmt::format(copy.due_at))
    .bind(copy.args.to_string())
    .bind(i64::from(copy.held))
    .bind(approved_by_text(&copy.approved_by))
    .bind(timefmt::format(copy.created_at))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        return insert(conn, copy).await;
    }
    chain::append(conn, vec![written_entry(copy)], copy.updated_at).await
}

/// Stops this device's job `id`, whose confirmation a sync merge demoted: a job that
/// never ran (approved) or failed is retracted; one running or applied, whose effect
/// may have happened, goes in doubt. Either way `note` says why. Returns the job as it
/// now stands, or `None` when it was already retracted or is not this device's.
pub(crate) async fn stop_demoted(
    conn: &mut Connection,
    id: Uuid,
    note: &str,
    now: OffsetDateTime,
) -> Result<Option<Job>, StoreError> {
    let now_text = timefmt::format(now);
    let event = JobEvent::Demoted;
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET
             status = {next},
             doubts = doubts + CASE WHEN status IN ('running', 'applied') THEN 1 ELSE 0 END,
             last_error = $1, updated_at = $2, due_at = $2
         WHERE id = $3 AND owner_device IS NULL AND {leaves}",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(note)
    .bind(&now_text)
    .bind(id.to_string())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        return Ok(None);
    }
    let job = load(conn, id).await?;
    if let Some(job) = &job {
        chain_status(conn, &id.to_string(), job.status, now).await?;
    }
    Ok(job)
}

/// Whether job `job`'s item is still confirmed: a merge may have put an earlier
/// rejection in force, after which nothing may run it again.
pub async fn item_confirmed(conn: &mut Connection, job: &Job) -> Result<bool, StoreError> {
    let status: Option<String> = sqlx::query_scalar(
        "SELECT status FROM change_items WHERE change_set_id = $1 AND item_index = $2",
    )
    .bind(job.change_set_id.to_string())
    .bind(job.item_index as i64)
    .fetch_optional(conn)
    .await?;
    Ok(status.as_deref() == Some("confirmed"))
}

/// The job with `id`.
pub async fn load(conn: &mut Connection, id: Uuid) -> Result<Option<Job>, StoreError> {
    let row = sqlx::query("SELECT * FROM execution_jobs WHERE id = $1")
        .bind(id.to_string())
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(decode).transpose()
}

/// The jobs of one set's items, by item index.
pub async fn for_change_set(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<Vec<Job>, StoreError> {
    let rows =
        sqlx::query("SELECT * FROM execution_jobs WHERE change_set_id = $1 ORDER BY item_index")
            .bind(change_set_id.to_string())
            .fetch_all(conn)
            .await?;
    rows.iter().map(decode).collect()
}

/// The jobs of the items that `decisions` confirmed, in one query (an item without a
/// job, a transactional one, has none in the answer): what decision lists and the
/// decision history show beside a confirmed external call.
pub async fn for_confirmations(
    conn: &mut Connection,
    decisions: &[ChangeDecision],
) -> Result<Vec<Job>, StoreError> {
    let items: Vec<(Uuid, usize)> = decisions
        .iter()
        .filter(|d| d.verdict == Verdict::Confirmed)
        .map(|d| (d.change_set_id, d.item_index))
        .collect();
    let mut sets: Vec<String> = items.iter().map(|(set, _)| set.to_string()).collect();
    sets.sort_unstable();
    sets.dedup();
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders: Vec<String> = (1..=sets.len()).map(|n| format!("${n}")).collect();
    let sql = format!(
        "SELECT * FROM execution_jobs WHERE change_set_id IN ({})",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for set in &sets {
        query = query.bind(set.as_str());
    }
    let mut found = Vec::new();
    for row in query.fetch_all(conn).await? {
        let job = decode(&row)?;
        if items.contains(&(job.change_set_id, job.item_index)) {
            found.push(job);
        }
    }
    Ok(found)
}

/// The job of item `index` of set `change_set_id`, if it has one.
pub async fn for_item(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
) -> Result<Option<Job>, StoreError> {
    let row =
        sqlx::query("SELECT * FROM execution_jobs WHERE change_set_id = $1 AND item_index = $2")
            .bind(change_set_id.to_string())
            .bind(index as i64)
            .fetch_optional(conn)
            .await?;
    row.as_ref().map(decode).transpose()
}

/// The approved jobs (confirmed, not yet run) of `host` for `agent_id` on `target`,
/// oldest first: what a coding agent's hook may hand to a retried call.
pub async fn approved_of(
    conn: &mut Connection,
    host: &str,
    agent_id: &str,
    target: &Target,
) -> Result<Vec<Job>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM execution_jobs WHERE host = $1 AND agent_id = $2 AND target_kind = $3
             AND target_id = $4 AND status = 'approved' ORDER BY created_at, id",
    )
    .bind(host)
    .bind(agent_id)
    .bind(target.kind.as_str())
    .bind(target.id.as_str())
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// Every job (retracted ones only when `include_retracted`), oldest first, at most
/// `limit`.
pub async fn list(
    conn: &mut Connection,
    include_retracted: bool,
    limit: u32,
) -> Result<Vec<Job>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM execution_jobs WHERE ($1 = 1 OR status <> 'retracted')
         ORDER BY created_at, id LIMIT $2",
    )
    .bind(i64::from(include_retracted))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// The condition under which this device's executor touches a job: its own (not a
/// copy from another device), and its item still confirmed (a sync merge may have put
/// an earlier rejection in force; such a job waits for a person, whatever its host
/// reconciles).
/// A held job not claimed yet has a pending item (its confirmation becomes a decision
/// when it is claimed, which checks the item first).
macro_rules! own_confirmed {
    () => {
        " AND owner_device IS NULL AND ((held = 1 AND attempts = 0) OR NOT EXISTS (SELECT 1 FROM change_items i
           WHERE i.change_set_id = execution_jobs.change_set_id AND i.item_index = execution_jobs.item_index
             AND i.status <> 'confirmed'))"
    };
}
macro_rules! lease_ran_out {
    () => {
        "SELECT id FROM execution_jobs WHERE host = $1 AND status = 'running' AND lease_until < $2 AND owner_device IS NULL ORDER BY lease_until"
    };
}
macro_rules! next_due {
    () => {
        concat!("SELECT id FROM execution_jobs WHERE host = $1 AND status = 'approved' AND due_at <= $2", own_confirmed!(), " ORDER BY due_at, id LIMIT 1")
    };
}
const LEASE_RAN_OUT: &str = lease_ran_out!();
/// [`LEASE_RAN_OUT`] on a shared PostgreSQL: concurrent executors skip each other's rows.
const LEASE_RAN_OUT_SKIP_LOCKED: &str = concat!(lease_ran_out!(), " FOR UPDATE SKIP LOCKED");
const NEXT_DUE: &str = next_due!();
/// [`NEXT_DUE`] for one job only (`$3`): see [`claim_due`].
const THIS_DUE: &str = concat!(
    "SELECT id FROM execution_jobs WHERE host = $1 AND status = 'approved' AND due_at <= $2 AND id = $3",
    own_confirmed!()
);
/// [`THIS_DUE`] on a shared PostgreSQL.
const THIS_DUE_SKIP_LOCKED: &str = concat!(
    "SELECT id FROM execution_jobs WHERE host = $1 AND status = 'approved' AND due_at <= $2 AND id = $3",
    own_confirmed!(),
    " FOR UPDATE SKIP LOCKED"
);
/// [`NEXT_DUE`] on a shared PostgreSQL.
const NEXT_DUE_SKIP_LOCKED: &str = concat!(next_due!(), " FOR UPDATE SKIP LOCKED");

/// Marks the running jobs of `host` whose lease ran out before `now` as in doubt and
/// returns them. An executor calls it before claiming.
#[tracing::instrument(skip(conn))]
pub async fn expire_leases(
    conn: &mut Connection,
    host: &str,
    now: OffsetDateTime,
) -> Result<Vec<Job>, StoreError> {
    let now_text = timefmt::format(now);
    let ids: Vec<String> = sqlx::query_scalar(match Backend::of(conn) {
        Backend::Sqlite => LEASE_RAN_OUT,
        Backend::Postgres => LEASE_RAN_OUT_SKIP_LOCKED,
    })
    .bind(host)
    .bind(&now_text)
    .fetch_all(&mut *conn)
    .await?;
    let mut expired = Vec::with_capacity(ids.len());
    for id in ids {
        let event = JobEvent::NoAnswer;
        let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE execution_jobs SET status = {next}, doubts = doubts + 1, updated_at = $1, due_at = $1,
                 last_error = 'the executor stopped before recording an outcome: the effect may have happened'
             WHERE id = $2 AND {leaves} AND lease_until < $1",
            next = event.next_status(),
            leaves = event.status_in(),
        )))
        .bind(&now_text)
        .bind(&id)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if changed == 1 {
            chain_status(conn, &id, JobStatus::InDoubt, now).await?;
            let id = Uuid::parse_str(&id).map_err(|e| StoreError::corrupt(TABLE, e))?;
            if let Some(job) = load(conn, id).await? {
                expired.push(job);
            }
        }
    }
    Ok(expired)
}

/// Claims the next due approved job of `host`: `running`, one more attempt, leased
/// until `now + lease`. On PostgreSQL concurrent claimers skip each other's rows.
#[tracing::instrument(skip(conn))]
pub async fn claim_next(
    conn: &mut Connection,
    host: &str,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<Option<Job>, StoreError> {
    let now_text = timefmt::format(now);
    let id: Option<String> = sqlx::query_scalar(match Backend::of(conn) {
        Backend::Sqlite => NEXT_DUE,
        Backend::Postgres => NEXT_DUE_SKIP_LOCKED,
    })
    .bind(host)
    .bind(&now_text)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    claim_found(conn, &id, now, lease).await
}

/// [`claim_next`] for job `id` only: claimed when it is an approved job of `host` that
/// is due, this device's own and its item confirmed; `None` otherwise (another claimer
/// took it first, or it is not due). The caller that gets it is the only one.
#[tracing::instrument(skip(conn))]
pub async fn claim_due(
    conn: &mut Connection,
    host: &str,
    id: Uuid,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<Option<Job>, StoreError> {
    let now_text = timefmt::format(now);
    let id: Option<String> = sqlx::query_scalar(match Backend::of(conn) {
        Backend::Sqlite => THIS_DUE,
        Backend::Postgres => THIS_DUE_SKIP_LOCKED,
    })
    .bind(host)
    .bind(&now_text)
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    claim_found(conn, &id, now, lease).await
}

/// Job `id`, found due, set `running` with one more attempt and a lease until
/// `now + lease`, unless another claimer changed it first.
async fn claim_found(
    conn: &mut Connection,
    id: &str,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<Option<Job>, StoreError> {
    let now_text = timefmt::format(now);
    let event = JobEvent::Claim;
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, attempts = attempts + 1, started_at = $1,
             lease_until = $2, updated_at = $1
         WHERE id = $3 AND {leaves}",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(&now_text)
    .bind(timefmt::format(now + lease))
    .bind(id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        return Ok(None);
    }
    chain_status(conn, id, JobStatus::Running, now).await?;
    let id = Uuid::parse_str(id).map_err(|e| StoreError::corrupt(TABLE, e))?;
    load(conn, id).await
}

/// Records that attempt `attempt` of job `id` took effect with `result`. Lands while
/// that attempt is running or in doubt (a late outcome settles the doubt); returns
/// false otherwise (a person settled it meanwhile, or a later attempt owns it).
pub async fn record_applied(
    conn: &mut Connection,
    id: Uuid,
    attempt: u32,
    result: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let event = JobEvent::Applied;
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, result = $1, lease_until = NULL, updated_at = $2
         WHERE id = $3 AND attempts = $4 AND {leaves}",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(result)
    .bind(timefmt::format(now))
    .bind(id.to_string())
    .bind(i64::from(attempt))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 1 {
        chain_status(conn, &id.to_string(), JobStatus::Applied, now).await?;
    }
    Ok(changed == 1)
}

/// Records that attempt `attempt` of running job `id` failed with `error`: due again at
/// `retry_at` when given, otherwise failed. Returns false when that attempt no longer
/// owns the job.
pub async fn record_error(
    conn: &mut Connection,
    id: Uuid,
    attempt: u32,
    error: &str,
    retry_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let now_text = timefmt::format(now);
    let event = if retry_at.is_some() {
        JobEvent::FailedWillRetry
    } else {
        JobEvent::Failed
    };
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, last_error = $1, due_at = $2, lease_until = NULL, updated_at = $3
         WHERE id = $4 AND attempts = $5 AND {leaves}",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(error)
    .bind(retry_at.map_or_else(|| now_text.clone(), timefmt::format))
    .bind(&now_text)
    .bind(id.to_string())
    .bind(i64::from(attempt))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 1 {
        let next = JobStatus::Running.after(event).ok_or_else(|| {
            StoreError::corrupt(TABLE, format!("{event:?} does not leave a running job"))
        })?;
        chain_status(conn, &id.to_string(), next, now).await?;
    }
    Ok(changed == 1)
}

/// Marks attempt `attempt` of running job `id` in doubt at once (its call outlived the
/// lease, so nobody knows whether it happened).
pub async fn record_in_doubt(
    conn: &mut Connection,
    id: Uuid,
    attempt: u32,
    why: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let event = JobEvent::NoAnswer;
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, doubts = doubts + 1, last_error = $1, updated_at = $2, due_at = $2
         WHERE id = $3 AND attempts = $4 AND {leaves}",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(why)
    .bind(timefmt::format(now))
    .bind(id.to_string())
    .bind(i64::from(attempt))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 1 {
        chain_status(conn, &id.to_string(), JobStatus::InDoubt, now).await?;
    }
    Ok(changed == 1)
}

/// Moves job `id` on `event` (see [`JobStatus::after`]): due at `now` (an approved one
/// runs again then); `result` is kept when given; `extra_attempts` raises the retry
/// budget. Returns the status it moved to, or `None` when the event did not apply to
/// the job as it stood (or there is no such job).
pub async fn transition(
    conn: &mut Connection,
    id: Uuid,
    event: JobEvent,
    result: Option<&str>,
    extra_attempts: u32,
    now: OffsetDateTime,
) -> Result<Option<JobStatus>, StoreError> {
    let now_text = timefmt::format(now);
    let moved: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, result = COALESCE($1, result), due_at = $2, updated_at = $2,
             attempt_limit = CASE WHEN attempts + $3 > attempt_limit THEN attempts + $3 ELSE attempt_limit END,
             lease_until = NULL
         WHERE id = $4 AND {leaves} RETURNING status",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(result)
    .bind(&now_text)
    .bind(i64::from(extra_attempts))
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(moved) = moved else {
        return Ok(None);
    };
    let to: JobStatus = moved.parse().map_err(|e| StoreError::corrupt(TABLE, e))?;
    chain_status(conn, &id.to_string(), to, now).await?;
    Ok(Some(to))
}

/// Cancels held job `id` while it waits out its hold window: retracted, with
/// [`CANCELLED_IN_HOLD`] as its note. Returns false when it is not waiting (claimed
/// when its window ended, or settled): of a cancel and the claim at the window's end,
/// exactly one wins, whichever updates the row first.
pub async fn cancel_held(
    conn: &mut Connection,
    id: Uuid,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let now_text = timefmt::format(now);
    let event = JobEvent::CancelHold;
    let changed = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE execution_jobs SET status = {next}, last_error = $1, updated_at = $2
         WHERE id = $3 AND {leaves} AND held = 1 AND attempts = 0",
        next = event.next_status(),
        leaves = event.status_in(),
    )))
    .bind(CANCELLED_IN_HOLD)
    .bind(&now_text)
    .bind(id.to_string())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 1 {
        chain_status(conn, &id.to_string(), JobStatus::Retracted, now).await?;
    }
    Ok(changed == 1)
}

/// Writes `job` as item `job.item_index`'s job: a new row, or over the item's retracted
/// one, which never ran (a held job found stale at the end of its window leaves its
/// item pending, and one item has one job row). Keeps the retracted row's id, so
/// copies on other devices are written over, not doubled; returns the id in force.
pub async fn insert_or_revive(conn: &mut Connection, job: &Job) -> Result<Uuid, StoreError> {
    let mut plan = WritePlan::default();
    let id = plan_insert_or_revive(conn, job, &mut plan).await?;
    plan.apply(conn, job.updated_at).await?;
    Ok(id)
}

/// [`insert_or_revive`] in a decision's `plan`: the retracted job to revive is looked
/// up (and removed) now, the row and its chain entry are planned, written with the
/// decision (its chain entry in the plan's order). Nothing in the deciding transaction
/// reads the job before the plan is applied; its id is returned.
pub async fn plan_insert_or_revive(
    conn: &mut Connection,
    job: &Job,
    plan: &mut WritePlan,
) -> Result<Uuid, StoreError> {
    let existing: Option<String> = sqlx::query_scalar(
        "SELECT id FROM execution_jobs WHERE change_set_id = $1 AND item_index = $2 AND status = 'retracted'",
    )
    .bind(job.change_set_id.to_string())
    .bind(job.item_index as i64)
    .fetch_optional(&mut *conn)
    .await?;
    let job = match existing {
        None => job.clone(),
        Some(existing) => {
            let id = Uuid::parse_str(&existing).map_err(|e| StoreError::corrupt(TABLE, e))?;
            sqlx::query("DELETE FROM execution_jobs WHERE id = $1")
                .bind(&existing)
                .execute(&mut *conn)
                .await?;
            Job { id, ..job.clone() }
        }
    };
    plan.statement(insert_statement(&job));
    plan.entry(written_entry(&job));
    Ok(job.id)
}

/// Writes `note` as job `id`'s last error (why it stopped: a retraction's reason).
pub async fn record_note(conn: &mut Connection, id: Uuid, note: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE execution_jobs SET last_error = $1 WHERE id = $2")
        .bind(note)
        .bind(id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// The in-doubt jobs of `host` due for a reconciliation (one just gone in doubt, or
/// one whose host could not tell a while ago: see [`postpone`]).
pub async fn in_doubt_due(
    conn: &mut Connection,
    host: &str,
    now: OffsetDateTime,
) -> Result<Vec<Job>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT * FROM execution_jobs WHERE host = $1 AND status = 'inDoubt' AND due_at <= $2",
        own_confirmed!(),
        " ORDER BY due_at, id"
    ))
    .bind(host)
    .bind(timefmt::format(now))
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// Asks again about in-doubt job `id` no sooner than `until`.
pub async fn postpone(
    conn: &mut Connection,
    id: Uuid,
    until: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE execution_jobs SET due_at = $1 WHERE id = $2 AND status = 'inDoubt'")
        .bind(timefmt::format(until))
        .bind(id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether any job of `host` is due or its lease ran out: a read, so an idle executor
/// polling every second never takes a lock.
pub async fn any_due(
    conn: &mut Connection,
    host: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let found: Option<String> = sqlx::query_scalar(
        concat!(
            "SELECT id FROM execution_jobs WHERE host = $1
           AND ((status IN ('approved', 'inDoubt') AND due_at <= $2) OR (status = 'running' AND lease_until < $2))",
            own_confirmed!(),
            " LIMIT 1"
        ),
    )
    .bind(host)
    .bind(timefmt::format(now))
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

#[cfg(test)]
mod tests {
    use super::{JobEvent, JobStatus};

    /// Every (status, event) pair: the domain is small enough to check whole.
    fn moves() -> impl Iterator<Item = (JobStatus, JobEvent, Option<JobStatus>)> {
        JobStatus::ALL.into_iter().flat_map(|status| {
            JobEvent::ALL
                .into_iter()
                .map(move |event| (status, event, status.after(event)))
        })
    }

    #[test]
    fn a_retracted_job_never_moves_again() {
        for event in JobEvent::ALL {
            assert_eq!(JobStatus::Retracted.after(event), None, "{event:?}");
        }
    }

    #[test]
    fn only_a_claim_starts_a_run_and_a_claim_only_starts_approved_jobs() {
        for (status, event, next) in moves() {
            if next == Some(JobStatus::Running) {
                assert_eq!((status, event), (JobStatus::Approved, JobEvent::Claim));
            }
        }
        assert_eq!(JobEvent::Claim.leaves(), [JobStatus::Approved]);
    }

    #[test]
    fn what_may_have_happened_never_becomes_runnable_without_doubt_first() {
        // A running or applied job's effect may have happened: no event makes it
        // approved (runnable) or retracted-as-unrun except its own attempt's outcome
        // (failed, will retry) or a hold's end before its call.
        for (status, event, next) in moves() {
            if status == JobStatus::Applied {
                assert!(
                    next.is_none() || next == Some(JobStatus::InDoubt),
                    "{event:?} moves an applied job to {next:?}"
                );
            }
            if status == JobStatus::InDoubt && next == Some(JobStatus::Approved) {
                assert_eq!(event, JobEvent::DueAgain);
            }
        }
    }

    #[test]
    fn each_event_leaves_some_status_and_its_sql_names_exactly_those() {
        for event in JobEvent::ALL {
            let leaves = event.leaves();
            assert!(!leaves.is_empty(), "{event:?} applies nowhere");
            let status_in = event.status_in();
            let case = event.next_status();
            for status in JobStatus::ALL {
                let named = format!("'{}'", status.as_str());
                assert_eq!(
                    status_in.contains(&named),
                    leaves.contains(&status),
                    "{event:?}: {status_in}"
                );
                let when = format!("WHEN '{}' THEN", status.as_str());
                assert_eq!(case.contains(&when), leaves.contains(&status), "{case}");
            }
        }
    }

    #[test]
    fn the_documented_moves_hold() {
        use JobEvent as E;
        use JobStatus as S;
        for (status, event, next) in [
            (S::Approved, E::Claim, S::Running),
            (S::Running, E::Applied, S::Applied),
            (S::InDoubt, E::Applied, S::Applied),
            (S::Running, E::FailedWillRetry, S::Approved),
            (S::Running, E::Failed, S::Failed),
            (S::Running, E::NoAnswer, S::InDoubt),
            (S::InDoubt, E::DueAgain, S::Approved),
            (S::Failed, E::Retry, S::Approved),
            (S::Failed, E::GiveUp, S::Retracted),
            (S::Running, E::EndedInHold, S::Retracted),
            (S::Approved, E::CancelHold, S::Retracted),
            (S::Failed, E::Demoted, S::Retracted),
            (S::Applied, E::Demoted, S::InDoubt),
        ] {
            assert_eq!(status.after(event), Some(next), "{status:?} on {event:?}");
        }
        assert_eq!(
            S::Running.after(E::GiveUp),
            None,
            "a person gives up only on failed jobs"
        );
        assert_eq!(S::Applied.after(E::Applied), None, "an outcome lands once");
    }
}
