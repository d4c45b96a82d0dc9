//! What devices exchange: a device's synced state, wrapped in a batch with a header.
//!
//! The wire format is camelCase JSON, the same in an exported file and in the body of
//! `POST /api/sync`, so a server hands a [`SyncBatch`] to the store unchanged.

use assent_domain::{ChangeDecision, ChangeSet, VectorClock};
use assent_tools::AuditRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// The batch format this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format still read: release 0.1.0's, whose rows name a `taskId` where
/// format 2 names a target (`targetKind`, `targetId`); its rows are all about tasks.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// A decision, with the device that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncedDecision {
    /// The host id of the device where a person decided.
    pub origin_host: String,
    /// The decision.
    pub decision: ChangeDecision,
}

impl SyncedDecision {
    /// The order that picks the winner of two final decisions on one item: the earlier
    /// by time, then by host id, then by decision id (so the order is total).
    pub fn precedence_key(&self) -> (OffsetDateTime, &str, Uuid) {
        (
            self.decision.created_at,
            self.origin_host.as_str(),
            self.decision.id,
        )
    }
}

/// An audit record, with the device that wrote it and its id there (audit ids are
/// per-device sequence numbers, so the pair is what identifies a record everywhere).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncedAuditRecord {
    /// The host id of the device that wrote it.
    pub origin_host: String,
    /// Its id on that device.
    pub origin_id: i64,
    /// The record.
    pub record: AuditRecord,
}

/// One version of a row that a host (such as the journal) owns and syncs through the
/// store, e.g. a journal task with its labels and checklist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntityVersion {
    /// The kind of row, e.g. `task`.
    pub entity_type: String,
    /// Its id.
    pub entity_id: String,
    /// The kind of target it belongs to (for a journal task, `task`).
    #[serde(default = "assent_domain::legacy_target_kind")]
    pub target_kind: String,
    /// The target it belongs to (for a task, its own id; `taskId` in format 1):
    /// decision conflicts on this target's items steer the merge of concurrent versions.
    #[serde(alias = "taskId")]
    pub target_id: String,
    /// Ticked on every local write.
    pub vector_clock: VectorClock,
    /// When it was last written.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// The row's content, as the host writes it back.
    pub state: Value,
}

/// An item whose effect lies outside the database (the execution ledger), as the wake
/// recorded it on the device that planned it: every device shows it as external.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncedEffect {
    /// The item's set.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// `external`, or `externalIdempotent` when the host declared the tool idempotent.
    pub effect: String,
    /// The host whose executors run the item's job.
    pub host: String,
}

/// The names [`SyncedEffect::effect`] may take.
pub const EFFECTS: &[&str] = &["external", "externalIdempotent"];

/// A job of the execution ledger, as its owner last wrote it. Jobs travel so that every
/// device shows how a confirmed external item's run stands; only the owner (the device
/// whose decision created it) ever runs or settles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncedJob {
    /// The device whose executor owns the job.
    pub owner_host: String,
    /// Its id.
    pub id: Uuid,
    /// The item's operation id (the idempotency key).
    pub operation_id: String,
    /// The item's set.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// The host whose executors run it.
    pub host: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments it runs with (a person's edit when there was one).
    pub args: Value,
    /// The agent that proposed it.
    pub agent_id: String,
    /// The kind of target.
    pub target_kind: String,
    /// The target.
    pub target_id: String,
    /// The run that proposed it.
    pub run_key: String,
    /// The host declared the tool idempotent.
    pub idempotent: bool,
    /// One of [`JOB_STATUSES`].
    pub status: String,
    /// Claims so far.
    pub attempts: u32,
    /// Retryable errors are retried while `attempts` is below this.
    pub attempt_limit: u32,
    /// How often a lease ran out with no outcome.
    pub doubts: u32,
    /// The last error, or why it is in doubt.
    pub last_error: Option<String>,
    /// The tool's result once applied.
    pub result: Option<String>,
    /// When the item was confirmed.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Its owner's last transition: a newer one replaces an older copy.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// The confirmation waits out its tool's hold window (or did): while the job is
    /// `approved` and never claimed it is no decision yet, and every device shows the
    /// item held and refuses to decide it; only its owner claims it at the window's
    /// end. Absent (false) in batches from before held jobs travelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// When the hold window ends, while the job waits it out.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub not_before: Option<OffsetDateTime>,
    /// Who confirmed a held job: the person, or under a quorum every approver of the
    /// revision that met it, the one who met it last (the decision at the window's
    /// end names that one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<String>,
}

impl SyncedJob {
    /// Whether it waits out a hold window now: held, approved and never claimed (its
    /// confirmation is not a decision yet).
    pub fn scheduled(&self) -> bool {
        self.held && self.status == "approved" && self.attempts == 0
    }
}

/// The statuses a [`SyncedJob`] may have (as the ledger names them).
pub const JOB_STATUSES: &[&str] = &[
    "approved",
    "running",
    "applied",
    "failed",
    "inDoubt",
    "retracted",
];

/// Everything one device syncs: its change sets, every decision it knows (including
/// those that lost a conflict), its audit trail and its host entities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncState {
    /// Change sets with their items.
    pub change_sets: Vec<ChangeSet>,
    /// Decisions, those in force and those recorded as losing a conflict.
    pub decisions: Vec<SyncedDecision>,
    /// Ids of the decisions in `decisions` that lost a conflict.
    pub conflict_losers: Vec<Uuid>,
    /// The audit trail.
    pub audit_records: Vec<SyncedAuditRecord>,
    /// Host entities (journal tasks).
    pub entities: Vec<EntityVersion>,
    /// Items with an external effect. Absent in batches of devices from before the
    /// execution ledger travelled, and left out when empty so that such devices read
    /// ours unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<SyncedEffect>,
    /// Jobs of the execution ledger, this device's own and copies of other devices'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<SyncedJob>,
}

impl SyncState {
    /// Sorts every list by its key, so that equal states are equal values and
    /// serialise to the same text (the canonical form exports and fingerprints use).
    pub fn sort(&mut self) {
        self.change_sets.sort_by_key(|s| s.id);
        self.decisions.sort_by_key(|d| d.decision.id);
        self.conflict_losers.sort();
        self.audit_records
            .sort_by(|a, b| (&a.origin_host, a.origin_id).cmp(&(&b.origin_host, b.origin_id)));
        self.entities
            .sort_by(|a, b| (&a.entity_type, &a.entity_id).cmp(&(&b.entity_type, &b.entity_id)));
        self.effects
            .sort_by_key(|e| (e.change_set_id, e.item_index));
        self.jobs.sort_by_key(|j| j.id);
    }
}

/// One message between devices: a device's synced state and who sent it when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncBatch {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// Unique per export; a replayed batch is recognised by it.
    pub batch_id: Uuid,
    /// The sending device's host id.
    pub from_host: String,
    /// When it was exported.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// The sender's state.
    #[serde(flatten)]
    pub state: SyncState,
}
