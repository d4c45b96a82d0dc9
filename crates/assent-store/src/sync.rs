//! Device sync on SQLite: export this device's synced state as a batch, and merge a
//! batch from another device by executing the plan of [`assent_sync::plan_merge`].
//!
//! Both take the caller's connection (for an import, a write transaction from
//! [`crate::Store::begin_write`]), so an HTTP handler can call them as the CLI does. An
//! import runs every operation of its plan in that transaction: a refused batch, or a
//! failure halfway, leaves nothing behind. A batch already merged is recognised by its
//! id and changes nothing; merging its content again would plan nothing anyway. Every
//! import is itself recorded (`sync_imports`: which batch, from which device, when,
//! merged, replayed or refused), the refusals by [`record_refusal`] after the rollback.

use crate::Connection;
use crate::jobs::{self, Job};
use crate::outbox;
use crate::{StoreError, audit, change_sets, decisions, timefmt};
use assent_domain::{OperationId, Target};
use assent_sync::{
    Conflict, EntityVersion, FORMAT_VERSION, SyncBatch, SyncOp, SyncState, SyncedAuditRecord,
    SyncedDecision, SyncedEffect, SyncedJob, plan_merge,
};
use assent_tools::BoxFuture;
use assent_tools::{AuditKind, AuditRecord};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const CONFLICTS: &str = "sync_conflicts";

/// The rows a host (such as the journal) owns in the same database and syncs through
/// the store: it exports them as versions and writes merged versions back. Writes
/// happen on the import's connection, so they commit or roll back with it, and must
/// not enqueue outbox messages (what came from a peer need not go back to it).
pub trait HostEntities: Send + Sync {
    /// Every synced row of the host.
    fn export<'a>(
        &'a self,
        conn: &'a mut Connection,
    ) -> BoxFuture<'a, Result<Vec<EntityVersion>, String>>;

    /// Writes `version` over the local row (creating it when missing).
    fn write<'a>(
        &'a self,
        conn: &'a mut Connection,
        version: &'a EntityVersion,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// The entities of a host that syncs none (a remote service's targets live elsewhere):
/// it exports nothing and refuses to write an incoming entity, so a batch carrying one
/// is refused rather than silently dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEntities;

impl HostEntities for NoEntities {
    fn export<'a>(
        &'a self,
        _conn: &'a mut Connection,
    ) -> BoxFuture<'a, Result<Vec<EntityVersion>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn write<'a>(
        &'a self,
        _conn: &'a mut Connection,
        version: &'a EntityVersion,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            Err(format!(
                "this device's host syncs no entities, not {} {:?}",
                version.entity_type, version.entity_id
            ))
        })
    }
}

/// What an import did (also on the wire: `POST /api/sync` answers with it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The batch.
    pub batch_id: Uuid,
    /// Its sender.
    pub from_host: String,
    /// The batch had been merged before; nothing changed.
    pub replayed: bool,
    /// Change sets new to this device.
    pub change_sets_inserted: usize,
    /// Known change sets whose statuses changed.
    pub change_sets_updated: usize,
    /// Decisions put in force.
    pub decisions_inserted: usize,
    /// Decisions recorded as losing a conflict (local ones demoted, incoming ones).
    pub conflicts: Vec<Conflict>,
    /// Audit records new to this device.
    pub audit_records_inserted: usize,
    /// Host entities (tasks) written.
    pub entities_written: usize,
    /// Copies of other devices' jobs written (new, or a newer status).
    #[serde(default)]
    pub jobs_written: usize,
    /// This device's jobs stopped because a merge demoted their confirmation (retracted,
    /// or in doubt when the effect may have happened).
    #[serde(default)]
    pub jobs_stopped: usize,
}

/// A recorded conflict, as `assent conflicts` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConflictRecord {
    /// The conflict.
    #[serde(flatten)]
    pub conflict: Conflict,
    /// The losing confirmation's change stays in the task (a rejection or retraction
    /// won after it had been applied): a person must undo it.
    pub loser_change_stays: bool,
    /// When this device recorded it.
    #[serde(with = "time::serde::rfc3339")]
    pub recorded_at: OffsetDateTime,
}

/// How many outbox messages one claim takes while an export drains the queue.
const DRAIN_BATCH: u32 = 500;

/// This device's synced state, sorted (the canonical form: two devices that agree
/// have equal states).
#[tracing::instrument(skip(conn, host))]
pub async fn local_state(
    conn: &mut Connection,
    host_id: &str,
    host: &dyn HostEntities,
) -> Result<SyncState, StoreError> {
    let set_ids: Vec<String> =
        sqlx::query_scalar("SELECT id FROM change_sets WHERE deleted_at IS NULL ORDER BY id")
            .fetch_all(&mut *conn)
            .await?;
    let mut state = SyncState::default();
    for id in set_ids {
        let id = Uuid::parse_str(&id).map_err(|e| StoreError::corrupt("change_sets", e))?;
        state
            .change_sets
            .push(change_sets::require(conn, id).await?);
    }
    let rows = sqlx::query("SELECT * FROM decisions")
        .fetch_all(&mut *conn)
        .await?;
    for row in &rows {
        let origin: Option<String> = row.try_get("origin_host")?;
        state.decisions.push(SyncedDecision {
            origin_host: origin.unwrap_or_else(|| host_id.to_owned()),
            decision: decisions::decode(row)?,
        });
    }
    for record in conflicts(conn).await? {
        state
            .conflict_losers
            .push(record.conflict.loser.decision.id);
        state.decisions.push(record.conflict.loser);
    }
    let rows = sqlx::query("SELECT * FROM audit_records")
        .fetch_all(&mut *conn)
        .await?;
    for row in &rows {
        let origin_host: Option<String> = row.try_get("origin_host")?;
        let origin_id: Option<i64> = row.try_get("origin_id")?;
        let id: i64 = row.try_get("id")?;
        state.audit_records.push(SyncedAuditRecord {
            origin_host: origin_host.unwrap_or_else(|| host_id.to_owned()),
            origin_id: origin_id.unwrap_or(id),
            record: audit::decode(row)?,
        });
    }
    state.entities = host.export(conn).await.map_err(StoreError::HostEntity)?;
    let rows = sqlx::query(
        "SELECT i.change_set_id, i.item_index, i.effect, i.host FROM change_items i
         JOIN change_sets s ON s.id = i.change_set_id
         WHERE s.deleted_at IS NULL AND i.effect IS NOT NULL AND i.host IS NOT NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    for row in &rows {
        let set: String = row.try_get("change_set_id")?;
        let index: i64 = row.try_get("item_index")?;
        state.effects.push(SyncedEffect {
            change_set_id: Uuid::parse_str(&set)
                .map_err(|e| StoreError::corrupt("change_items", e))?,
            item_index: usize::try_from(index)
                .map_err(|e| StoreError::corrupt("change_items", e))?,
            effect: row.try_get("effect")?,
            host: row.try_get("host")?,
        });
    }
    state.jobs = jobs::all(conn)
        .await?
        .into_iter()
        .map(|job| synced_job(job, host_id))
        .collect();
    state.sort();
    Ok(state)
}

/// A job as it travels: owned by this device unless it is a copy of another's.
fn synced_job(job: Job, host_id: &str) -> SyncedJob {
    let not_before = job.scheduled().then_some(job.due_at);
    SyncedJob {
        owner_host: job.owner_device.unwrap_or_else(|| host_id.to_owned()),
        id: job.id,
        operation_id: job.operation_id.as_str().to_owned(),
        change_set_id: job.change_set_id,
        item_index: job.item_index,
        host: job.host,
        tool_name: job.tool_name,
        args: job.args,
        agent_id: job.agent_id,
        target_kind: job.target.kind,
        target_id: job.target.id,
        run_key: job.run_key,
        idempotent: job.idempotent,
        status: job.status.as_str().to_owned(),
        attempts: job.attempts,
        attempt_limit: job.attempt_limit,
        doubts: job.doubts,
        last_error: job.last_error,
        result: job.result,
        created_at: job.created_at,
        updated_at: job.updated_at,
        held: job.held,
        not_before,
        approved_by: job.approved_by,
    }
}

/// The local copy of another device's job (checked by the plan: its status is one of
/// the ledger's). A held one waiting out its window shows its item held here too, so
/// no person decides it here; its owner alone claims it.
fn job_copy(job: &SyncedJob) -> Result<Job, StoreError> {
    Ok(Job {
        id: job.id,
        operation_id: OperationId::from_stored(job.operation_id.clone()),
        change_set_id: job.change_set_id,
        item_index: job.item_index,
        host: job.host.clone(),
        tool_name: job.tool_name.clone(),
        args: job.args.clone(),
        agent_id: job.agent_id.clone(),
        target: Target::new(job.target_kind.clone(), job.target_id.clone()),
        run_key: job.run_key.clone(),
        idempotent: job.idempotent,
        status: job
            .status
            .parse()
            .map_err(|e| StoreError::corrupt("execution_jobs", e))?,
        attempts: job.attempts,
        attempt_limit: job.attempt_limit,
        doubts: job.doubts,
        last_error: job.last_error.clone(),
        result: job.result.clone(),
        // A held copy is due when its window ends: what every view shows as
        // `notBefore`. Copies are never claimed here, whatever their due time.
        due_at: job.not_before.unwrap_or(job.updated_at),
        started_at: None,
        lease_until: None,
        created_at: job.created_at,
        updated_at: job.updated_at,
        owner_device: Some(job.owner_host.clone()),
        approval_digest: None,
        held: job.held,
        approved_by: job.approved_by.clone(),
    })
}

/// Stops this device's job of a demoted confirmation and audits why (a result record
/// that did not succeed, with the note), in the import's transaction.
async fn stop_demoted_job(
    conn: &mut Connection,
    job_id: Uuid,
    note: &str,
    now: OffsetDateTime,
) -> Result<Option<Job>, StoreError> {
    let Some(job) = jobs::stop_demoted(conn, job_id, note, now).await? else {
        return Ok(None);
    };
    let detail = match job.status {
        jobs::JobStatus::Retracted => format!("not run: {note}"),
        _ => format!("in doubt: {note}; the effect may have happened"),
    };
    tracing::warn!(job = %job.id, status = %job.status, %detail, "a demoted confirmation's job was stopped");
    if job.status == jobs::JobStatus::InDoubt {
        // Subscribers hear of it as of any other job gone in doubt.
        crate::webhooks::enqueue_job_event(conn, &job, job.status, note, now).await?;
    }
    let record = AuditRecord {
        success: Some(false),
        detail: Some(detail),
        ..job.audit_record(AuditKind::Result, now)
    };
    audit::insert_row(conn, &record, None).await?;
    Ok(Some(job))
}

/// Exports this device's state as batch `batch_id`, and drains the outbox: everything
/// it queued is in the batch. Run it in a write transaction.
#[tracing::instrument(skip(conn, host))]
pub async fn export(
    conn: &mut Connection,
    host_id: &str,
    host: &dyn HostEntities,
    batch_id: Uuid,
    now: OffsetDateTime,
) -> Result<SyncBatch, StoreError> {
    let export = export_claiming(conn, host_id, host, batch_id, now, Duration::ZERO).await?;
    mark_exported(conn, &export, now).await?;
    Ok(export.batch)
}

/// A batch whose outbox messages are claimed (in flight) but not yet marked sent: what
/// `assent sync --peer` holds while the batch is on the network, outside any
/// transaction. [`mark_exported`] marks them sent once the peer has the batch,
/// [`release_export`] puts them back when it does not; after a crash in between their
/// lease runs out and the next export claims them again.
#[derive(Debug, Clone)]
pub struct ClaimedExport {
    /// The batch.
    pub batch: SyncBatch,
    /// The outbox messages it covers.
    claimed: Vec<i64>,
}

/// Exports this device's state as batch `batch_id` and claims every deliverable outbox
/// message for `lease` (all of them are in the batch, since both happen in the
/// caller's transaction). A write made after the caller commits queues a new message
/// rather than changing a claimed one, so marking the claimed ones sent later loses
/// nothing.
#[tracing::instrument(skip(conn, host))]
pub async fn export_claiming(
    conn: &mut Connection,
    host_id: &str,
    host: &dyn HostEntities,
    batch_id: Uuid,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<ClaimedExport, StoreError> {
    let state = local_state(conn, host_id, host).await?;
    let mut claimed = Vec::new();
    loop {
        let batch = outbox::claim_batch(conn, DRAIN_BATCH, now, lease).await?;
        if batch.is_empty() {
            break;
        }
        claimed.extend(batch.iter().map(|m| m.id));
    }
    tracing::info!(
        change_sets = state.change_sets.len(),
        decisions = state.decisions.len(),
        entities = state.entities.len(),
        claimed = claimed.len(),
        "sync batch exported"
    );
    Ok(ClaimedExport {
        batch: SyncBatch {
            format_version: FORMAT_VERSION,
            batch_id,
            from_host: host_id.to_owned(),
            created_at: now,
            state,
        },
        claimed,
    })
}

/// Puts the outbox messages of `export` back in the queue: the batch never reached its
/// receiver. A message whose entity was written again meanwhile (a newer message is
/// queued) is superseded instead, so the queue keeps one unsent message per entity.
pub async fn release_export(
    conn: &mut Connection,
    export: &ClaimedExport,
) -> Result<(), StoreError> {
    for id in &export.claimed {
        sqlx::query(
            "UPDATE outbox SET status = CASE WHEN EXISTS (
                     SELECT 1 FROM outbox AS newer WHERE newer.entity_type = outbox.entity_type
                         AND newer.entity_id = outbox.entity_id AND newer.status = 'pending')
                 THEN 'sent' ELSE 'pending' END,
                 claimed_until = NULL
             WHERE id = $1 AND status = 'inFlight'",
        )
        .bind(id)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Marks the outbox messages of `export` sent: the batch reached its receiver. Returns
/// how many were still in flight (a message whose lease ran out and that another
/// export claimed is that export's to mark).
pub async fn mark_exported(
    conn: &mut Connection,
    export: &ClaimedExport,
    now: OffsetDateTime,
) -> Result<u64, StoreError> {
    let drained = outbox::mark_sent(conn, &export.claimed, now).await?;
    tracing::debug!(drained, "outbox drained by a sync export");
    Ok(drained)
}

/// Merges `batch` into this device's state, in the caller's write transaction. A
/// batch that cannot be merged is refused ([`StoreError::Sync`]) before anything is
/// written; a batch merged before changes nothing.
#[tracing::instrument(skip(conn, host, batch), fields(batch = %batch.batch_id, from = %batch.from_host))]
pub async fn import(
    conn: &mut Connection,
    host_id: &str,
    host: &dyn HostEntities,
    batch: &SyncBatch,
    now: OffsetDateTime,
) -> Result<ImportReport, StoreError> {
    let mut report = ImportReport {
        batch_id: batch.batch_id,
        from_host: batch.from_host.clone(),
        ..ImportReport::default()
    };
    let seen: Option<String> =
        sqlx::query_scalar("SELECT batch_id FROM sync_applied_batches WHERE batch_id = $1")
            .bind(batch.batch_id.to_string())
            .fetch_optional(&mut *conn)
            .await?;
    if seen.is_some() {
        tracing::info!("sync batch already merged");
        report.replayed = true;
        record_import(
            conn,
            batch,
            ImportOutcome::Replayed,
            &report_json(&report)?,
            now,
        )
        .await?;
        return Ok(report);
    }
    let local = local_state(conn, host_id, host).await?;
    let plan = plan_merge(&local, batch, host_id, now)?;
    for op in &plan.ops {
        match op {
            SyncOp::InsertChangeSet(set) => {
                change_sets::insert_rows(conn, set, None, now).await?;
                report.change_sets_inserted += 1;
            }
            SyncOp::DemoteDecision(conflict) => {
                sqlx::query("DELETE FROM decisions WHERE id = $1")
                    .bind(conflict.loser.decision.id.to_string())
                    .execute(&mut *conn)
                    .await?;
                record_conflict(conn, conflict, now).await?;
                report.conflicts.push(conflict.clone());
            }
            SyncOp::InsertDecision(d) => {
                decisions::insert_row(conn, &d.decision, Some(&d.origin_host), &Default::default())
                    .await?;
                report.decisions_inserted += 1;
            }
            SyncOp::RecordConflict(conflict) => {
                record_conflict(conn, conflict, now).await?;
                report.conflicts.push(conflict.clone());
            }
            SyncOp::UpdateChangeSet { set, changed_items } => {
                change_sets::write_status(conn, set, changed_items).await?;
                report.change_sets_updated += 1;
            }
            SyncOp::InsertAuditRecord(a) => {
                audit::insert_row(conn, &a.record, Some((&a.origin_host, a.origin_id))).await?;
                report.audit_records_inserted += 1;
            }
            SyncOp::WriteEntity(version) => {
                host.write(conn, version)
                    .await
                    .map_err(StoreError::HostEntity)?;
                report.entities_written += 1;
            }
            SyncOp::MarkExternal(effect) => {
                sqlx::query(
                    "UPDATE change_items SET effect = $1, host = $2
                     WHERE change_set_id = $3 AND item_index = $4 AND effect IS NULL",
                )
                .bind(&effect.effect)
                .bind(&effect.host)
                .bind(effect.change_set_id.to_string())
                .bind(effect.item_index as i64)
                .execute(&mut *conn)
                .await?;
            }
            SyncOp::WriteJob(copy) => {
                jobs::write_copy(conn, &job_copy(copy)?).await?;
                report.jobs_written += 1;
            }
            SyncOp::StopDemotedJob { job_id, note } => {
                if stop_demoted_job(conn, *job_id, note, now).await?.is_some() {
                    report.jobs_stopped += 1;
                }
            }
        }
    }
    let now_text = timefmt::format(now);
    sqlx::query(
        "INSERT INTO sync_applied_batches (batch_id, from_host, applied_at) VALUES ($1, $2, $3)",
    )
    .bind(batch.batch_id.to_string())
    .bind(&batch.from_host)
    .bind(&now_text)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO sync_peers (host_id, last_batch_id, last_merged_at, batches_merged) VALUES ($1, $2, $3, 1)
         ON CONFLICT (host_id) DO UPDATE SET last_batch_id = excluded.last_batch_id,
             last_merged_at = excluded.last_merged_at, batches_merged = sync_peers.batches_merged + 1",
    )
    .bind(&batch.from_host)
    .bind(batch.batch_id.to_string())
    .bind(&now_text)
    .execute(&mut *conn)
    .await?;
    for conflict in &report.conflicts {
        // Expected when devices decide while apart, and listed by `conflicts`: not a
        // warning about this import.
        tracing::info!(
            change_set = %conflict.change_set_id,
            item = conflict.item_index,
            winner = %conflict.winner_id,
            loser = %conflict.loser.decision.id,
            "conflicting decisions on one item: the earlier stays in force"
        );
    }
    record_import(
        conn,
        batch,
        ImportOutcome::Merged,
        &report_json(&report)?,
        now,
    )
    .await?;
    tracing::info!(operations = plan.ops.len(), "sync batch merged");
    Ok(report)
}

fn report_json(report: &ImportReport) -> Result<String, StoreError> {
    serde_json::to_string(report).map_err(|e| StoreError::corrupt(IMPORTS, e))
}

const IMPORTS: &str = "sync_imports";

/// What came of an import, as [`ImportRecord::outcome`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImportOutcome {
    /// The batch was merged.
    Merged,
    /// The batch had been merged before; nothing changed.
    Replayed,
    /// The batch was refused; nothing changed.
    Refused,
}

impl ImportOutcome {
    /// The name stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Merged => "merged",
            Self::Replayed => "replayed",
            Self::Refused => "refused",
        }
    }
}

/// One import this device was asked to make: which batch, from which device, when,
/// and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRecord {
    /// The batch.
    pub batch_id: Uuid,
    /// The device it claims to come from.
    pub from_host: String,
    /// When that device says it exported it.
    #[serde(with = "time::serde::rfc3339")]
    pub batch_created_at: OffsetDateTime,
    /// When this device was asked to merge it.
    #[serde(with = "time::serde::rfc3339")]
    pub imported_at: OffsetDateTime,
    /// What came of it.
    pub outcome: ImportOutcome,
    /// A merge's report (JSON text), or why the batch was refused.
    pub detail: String,
}

async fn record_import(
    conn: &mut Connection,
    batch: &SyncBatch,
    outcome: ImportOutcome,
    detail: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO sync_imports (batch_id, from_host, batch_created_at, imported_at, outcome, detail)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(batch.batch_id.to_string())
    .bind(&batch.from_host)
    .bind(timefmt::format(batch.created_at))
    .bind(timefmt::format(now))
    .bind(outcome.as_str())
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records that `batch` was refused with `error`, in a write transaction of its own:
/// run it after the import's transaction rolled back (which took its own record with
/// it). The refused batch's content is not kept, only who sent which batch when.
pub async fn record_refusal(
    store: &crate::Store,
    batch: &SyncBatch,
    error: &StoreError,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let mut tx = store.begin_write().await?;
    record_import(
        tx.connection(),
        batch,
        ImportOutcome::Refused,
        &error.to_string(),
        now,
    )
    .await?;
    tx.commit().await?;
    // The caller reports the refusal itself (the CLI's one error line, a 400).
    tracing::info!(batch = %batch.batch_id, from = %batch.from_host, %error, "sync batch refused");
    Ok(())
}

/// The imports this device was asked to make, newest first (at most `limit`).
pub async fn imports(conn: &mut Connection, limit: u32) -> Result<Vec<ImportRecord>, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(IMPORTS, e);
    let rows = sqlx::query("SELECT * FROM sync_imports ORDER BY id DESC LIMIT $1")
        .bind(i64::from(limit))
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            let batch: String = row.try_get("batch_id")?;
            let created: String = row.try_get("batch_created_at")?;
            let imported: String = row.try_get("imported_at")?;
            let outcome: String = row.try_get("outcome")?;
            Ok(ImportRecord {
                batch_id: Uuid::parse_str(&batch).map_err(|e| corrupt(e.to_string()))?,
                from_host: row.try_get("from_host")?,
                batch_created_at: timefmt::parse(IMPORTS, &created)?,
                imported_at: timefmt::parse(IMPORTS, &imported)?,
                outcome: match outcome.as_str() {
                    "merged" => ImportOutcome::Merged,
                    "replayed" => ImportOutcome::Replayed,
                    "refused" => ImportOutcome::Refused,
                    other => return Err(corrupt(format!("unknown outcome {other:?}"))),
                },
                detail: row.try_get("detail")?,
            })
        })
        .collect()
}

async fn record_conflict(
    conn: &mut Connection,
    conflict: &Conflict,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let loser = &conflict.loser;
    let decision =
        serde_json::to_string(&loser.decision).map_err(|e| StoreError::corrupt(CONFLICTS, e))?;
    sqlx::query(
        "INSERT INTO sync_conflicts (decision_id, change_set_id, item_index, target_kind, target_id, origin_host, decision,
                                     winner_decision_id, winner_host, winner_verdict, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(loser.decision.id.to_string())
    .bind(conflict.change_set_id.to_string())
    .bind(conflict.item_index as i64)
    .bind(&conflict.target_kind)
    .bind(&conflict.target_id)
    .bind(&loser.origin_host)
    .bind(decision)
    .bind(conflict.winner_id.to_string())
    .bind(&conflict.winner_host)
    .bind(conflict.winner_verdict.as_str())
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Every recorded conflict, oldest item first.
pub async fn conflicts(conn: &mut Connection) -> Result<Vec<ConflictRecord>, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(CONFLICTS, e);
    let rows =
        sqlx::query("SELECT * FROM sync_conflicts ORDER BY change_set_id, item_index, decision_id")
            .fetch_all(conn)
            .await?;
    rows.iter()
        .map(|row| {
            let set: String = row.try_get("change_set_id")?;
            let index: i64 = row.try_get("item_index")?;
            let decision: String = row.try_get("decision")?;
            let winner: String = row.try_get("winner_decision_id")?;
            let verdict: String = row.try_get("winner_verdict")?;
            let recorded_at: String = row.try_get("recorded_at")?;
            let conflict = Conflict {
                change_set_id: Uuid::parse_str(&set).map_err(|e| corrupt(e.to_string()))?,
                item_index: usize::try_from(index).map_err(|e| corrupt(e.to_string()))?,
                target_kind: row.try_get("target_kind")?,
                target_id: row.try_get("target_id")?,
                winner_id: Uuid::parse_str(&winner).map_err(|e| corrupt(e.to_string()))?,
                winner_host: row.try_get("winner_host")?,
                winner_verdict: verdict
                    .parse::<assent_domain::Verdict>()
                    .map_err(|e| corrupt(e.to_string()))?,
                loser: SyncedDecision {
                    origin_host: row.try_get("origin_host")?,
                    decision: serde_json::from_str(&decision)
                        .map_err(|e| corrupt(e.to_string()))?,
                },
            };
            Ok(ConflictRecord {
                loser_change_stays: conflict.loser_change_stays(),
                conflict,
                recorded_at: timefmt::parse(CONFLICTS, &recorded_at)?,
            })
        })
        .collect()
}

/// A device this one has merged batches from: its watermark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    /// The peer's host id.
    pub host_id: String,
    /// The last batch merged from it.
    pub last_batch_id: Uuid,
    /// When this device merged it.
    #[serde(with = "time::serde::rfc3339")]
    pub last_merged_at: OffsetDateTime,
    /// How many batches from it this device merged (replays not counted).
    pub batches_merged: i64,
}

/// The devices this one has merged batches from, by host id.
pub async fn peers(conn: &mut Connection) -> Result<Vec<Peer>, StoreError> {
    const PEERS: &str = "sync_peers";
    let rows = sqlx::query("SELECT * FROM sync_peers ORDER BY host_id")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            let batch: String = row.try_get("last_batch_id")?;
            let merged_at: String = row.try_get("last_merged_at")?;
            Ok(Peer {
                host_id: row.try_get("host_id")?,
                last_batch_id: Uuid::parse_str(&batch)
                    .map_err(|e| StoreError::corrupt(PEERS, e))?,
                last_merged_at: timefmt::parse(PEERS, &merged_at)?,
                batches_merged: row.try_get("batches_merged")?,
            })
        })
        .collect()
}
