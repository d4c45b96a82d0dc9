//! The merge of an incoming batch into local state, as a diff turned into operations.
//!
//! [`plan_merge`] reads both states and returns only the operations that change local
//! state, grouped by kind in the order the store must run them (sets before the
//! decisions that refer to them, a demoted decision before the one replacing it) and
//! sorted by key within a kind.

use crate::{
    EntityVersion, FORMAT_VERSION, OLDEST_FORMAT_VERSION, SyncBatch, SyncError, SyncState,
    SyncedAuditRecord, SyncedDecision, SyncedEffect, SyncedJob,
};
use assent_domain::{
    ChangeItemStatus, ChangeSet, ChangeSetStatus, ClockOrdering, OffsetDateTime, Uuid, Verdict,
    canonical_json,
};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Two different final decisions on one item: the loser stays on record, out of force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The set of the item.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// The kind of target the item would change.
    #[serde(default = "assent_domain::legacy_target_kind")]
    pub target_kind: String,
    /// The target the item would change.
    #[serde(alias = "taskId")]
    pub target_id: String,
    /// The decision in force.
    pub winner_id: Uuid,
    /// The device that made it.
    pub winner_host: String,
    /// What it decided.
    pub winner_verdict: Verdict,
    /// The decision that lost, kept as a record.
    pub loser: SyncedDecision,
}

impl Conflict {
    /// Whether the losing decision was a confirmation that a device applied while the
    /// winner does not apply it (a rejection or retraction won): the change the loser
    /// made stays in the task until a person undoes it, since tools declare no inverse.
    pub fn loser_change_stays(&self) -> bool {
        self.loser.decision.verdict == Verdict::Confirmed
            && self.winner_verdict != Verdict::Confirmed
    }
}

/// One step of a merge, executed by the store in the plan's order.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncOp {
    /// A change set this device did not have, with its merged item statuses.
    InsertChangeSet(ChangeSet),
    /// A local decision in force loses to an earlier one: take it out of force and
    /// keep it as a conflict.
    DemoteDecision(Conflict),
    /// A decision to put in force (a winner, or a deferral).
    InsertDecision(SyncedDecision),
    /// A losing decision this device did not know: keep it as a conflict only.
    RecordConflict(Conflict),
    /// New statuses (set and `changed_items`), resolution time and clock of a set.
    UpdateChangeSet {
        /// The merged set.
        set: ChangeSet,
        /// Indexes of the items whose status changed.
        changed_items: Vec<usize>,
    },
    /// An audit record from another device.
    InsertAuditRecord(SyncedAuditRecord),
    /// A host entity's merged version, to write over the local one.
    WriteEntity(EntityVersion),
    /// An item this device holds as transactional is external (it does not know yet).
    MarkExternal(SyncedEffect),
    /// Another device's job, new here or newer than the local copy: write the copy.
    /// This device never runs it.
    WriteJob(SyncedJob),
    /// This device's own job of a confirmation that a merge just demoted, or of one
    /// still held in its window whose item another device's decision just decided:
    /// one that has not run (approved, failed) never will (retracted); one that may
    /// have run is in doubt with `note`, for a person. Never left approved.
    StopDemotedJob {
        /// The job.
        job_id: Uuid,
        /// Why, for the job's last error and the audit trail.
        note: String,
    },
}

/// What a merge will do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncPlan {
    /// The operations, in execution order; empty when the batch brings nothing new.
    pub ops: Vec<SyncOp>,
}

impl SyncPlan {
    /// Whether the merge changes nothing (a replayed or already known batch).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The conflicts this merge records (demoted local decisions and incoming losers).
    pub fn conflicts(&self) -> impl Iterator<Item = &Conflict> {
        self.ops.iter().filter_map(|op| match op {
            SyncOp::DemoteDecision(c) | SyncOp::RecordConflict(c) => Some(c),
            _ => None,
        })
    }
}

fn is_final(verdict: Verdict) -> bool {
    verdict.item_status().is_decided()
}

/// Open states rank below decided ones, so a decided item beats a pending one; finals
/// compare by name only so that the order is total.
fn status_rank(status: ChangeItemStatus) -> (u8, &'static str) {
    match status {
        ChangeItemStatus::Pending => (0, ""),
        ChangeItemStatus::Deferred => (1, ""),
        decided => (2, decided.as_str()),
    }
}

fn check_header(batch: &SyncBatch, local_host: &str) -> Result<(), SyncError> {
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&batch.format_version) {
        return Err(SyncError::UnsupportedFormat {
            found: batch.format_version,
            oldest: OLDEST_FORMAT_VERSION,
            supported: FORMAT_VERSION,
        });
    }
    let blank = |what: String| SyncError::BlankHost {
        batch_id: batch.batch_id,
        what,
    };
    if batch.from_host.trim().is_empty() {
        return Err(blank("the header".to_owned()));
    }
    if batch.from_host == local_host {
        return Err(SyncError::FromThisHost {
            batch_id: batch.batch_id,
            host: batch.from_host.clone(),
        });
    }
    let state = &batch.state;
    if let Some(d) = state
        .decisions
        .iter()
        .find(|d| d.origin_host.trim().is_empty())
    {
        return Err(blank(format!("decision {}", d.decision.id)));
    }
    if let Some(a) = state
        .audit_records
        .iter()
        .find(|a| a.origin_host.trim().is_empty())
    {
        return Err(blank(format!("audit record {}", a.origin_id)));
    }
    let duplicate = |what: String| SyncError::Duplicate { what };
    let mut sets = BTreeSet::new();
    for set in &state.change_sets {
        if !sets.insert(set.id) {
            return Err(duplicate(format!("change set {}", set.id)));
        }
        if set.items.is_empty() {
            return Err(SyncError::InvalidEntity {
                entity_type: "changeSet".to_owned(),
                entity_id: set.id.to_string(),
                problem: "it has no items".to_owned(),
            });
        }
    }
    let mut decisions = BTreeSet::new();
    for d in &state.decisions {
        if !decisions.insert(d.decision.id) {
            return Err(duplicate(format!("decision {}", d.decision.id)));
        }
    }
    let mut audits = BTreeSet::new();
    for a in &state.audit_records {
        if !audits.insert((a.origin_host.as_str(), a.origin_id)) {
            return Err(duplicate(format!(
                "audit record {} of host {:?}",
                a.origin_id, a.origin_host
            )));
        }
    }
    let mut entities = BTreeSet::new();
    for e in &state.entities {
        if e.entity_type.trim().is_empty() || e.entity_id.trim().is_empty() {
            return Err(SyncError::InvalidEntity {
                entity_type: e.entity_type.clone(),
                entity_id: e.entity_id.clone(),
                problem: "its type and id must not be blank".to_owned(),
            });
        }
        if !entities.insert((e.entity_type.as_str(), e.entity_id.as_str())) {
            return Err(duplicate(format!("{} {:?}", e.entity_type, e.entity_id)));
        }
    }
    Ok(())
}

/// The first immutable field in which two versions of one set differ. A `before` of
/// JSON `null` and a missing one are the same: the wire format drops a null `before`.
/// An item refreshed by the stale-target guard (`staleDetail` on either side) may
/// differ in `before`.
fn divergent_field(local: &ChangeSet, incoming: &ChangeSet) -> Option<String> {
    let header = [
        ("agentId", local.agent_id == incoming.agent_id),
        ("targetKind", local.target_kind == incoming.target_kind),
        ("targetId", local.target_id == incoming.target_id),
        ("threadId", local.thread_id == incoming.thread_id),
        ("runKey", local.run_key == incoming.run_key),
        ("createdAt", local.created_at == incoming.created_at),
        ("items", local.items.len() == incoming.items.len()),
    ];
    if let Some((field, _)) = header.iter().find(|(_, same)| !same) {
        return Some((*field).to_owned());
    }
    local
        .items
        .iter()
        .zip(&incoming.items)
        .position(|(a, b)| {
            let refreshed = a.stale_detail.is_some() || b.stale_detail.is_some();
            a.tool_name != b.tool_name
                || a.args != b.args
                || a.human_summary != b.human_summary
                // A stale-target refusal refreshes `before` to the target as it was
                // found (see `merge_set`): only an item never refreshed keeps it fixed.
                || (!refreshed
                    && a.before.as_ref().filter(|v| !v.is_null())
                        != b.before.as_ref().filter(|v| !v.is_null()))
        })
        .map(|index| format!("item {index}"))
}

/// For every item with a final decision: the winner, and every final on it.
struct Finals<'a> {
    by_item: BTreeMap<(Uuid, usize), Vec<&'a SyncedDecision>>,
}

impl<'a> Finals<'a> {
    fn winner(&self, key: (Uuid, usize)) -> Option<&'a SyncedDecision> {
        self.by_item.get(&key).and_then(|all| all.first().copied())
    }

    /// Host ids of the winners of conflicts about each target.
    fn conflict_winner_hosts(&self) -> BTreeMap<(&'a str, &'a str), BTreeSet<&'a str>> {
        let mut hosts: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
        for all in self.by_item.values().filter(|all| all.len() > 1) {
            let winner = all[0];
            hosts
                .entry((
                    winner.decision.target_kind.as_str(),
                    winner.decision.target_id.as_str(),
                ))
                .or_default()
                .insert(winner.origin_host.as_str());
        }
        hosts
    }
}

/// Plans the merge of `batch` into `local` (this device's whole synced state) on the
/// device `local_host`. The rules:
///
/// - **Change sets**: a new set is inserted; for a known one, the proposals must match
///   (they never change) and each item takes the status of its winning final decision,
///   else the higher of the two statuses (pending < deferred < decided). A set whose
///   items are all decided is resolved (at its last winning decision), even if one side
///   had expired it; otherwise expired on either side stays expired. Clocks merge.
/// - **Decisions** are merged by union. Of several final decisions on one item, the
///   earlier by (time, host id, decision id) stays in force; each other one is a
///   [`Conflict`]: a local one is demoted, an incoming one only recorded.
/// - **Audit records** are merged by union, keyed by (host, id there).
/// - **Host entities**: incoming newer → take it; local newer or equal → keep (other
///   content under an equal clock is no write: every write ticks the clock).
///   Concurrent: the version that has seen more writes of the device whose decision won a conflict about the
///   entity's task (so the task ends with the winner's change, not the loser's); then
///   the later `updatedAt`; then the larger canonical content. The result carries the
///   merged clock, so it dominates both and the next exchange settles both devices.
pub fn plan_merge(
    local: &SyncState,
    batch: &SyncBatch,
    local_host: &str,
    now: OffsetDateTime,
) -> Result<SyncPlan, SyncError> {
    check_header(batch, local_host)?;
    crate::check::check_batch(local, batch, local_host, now)?;
    let incoming = &batch.state;

    let local_sets: BTreeMap<Uuid, &ChangeSet> =
        local.change_sets.iter().map(|s| (s.id, s)).collect();
    let incoming_sets: BTreeMap<Uuid, &ChangeSet> =
        incoming.change_sets.iter().map(|s| (s.id, s)).collect();
    for (id, theirs) in &incoming_sets {
        if let Some(field) = local_sets
            .get(id)
            .and_then(|ours| divergent_field(ours, theirs))
        {
            return Err(SyncError::DivergentChangeSet {
                change_set_id: *id,
                field,
            });
        }
    }

    let local_decisions: BTreeMap<Uuid, &SyncedDecision> =
        local.decisions.iter().map(|d| (d.decision.id, d)).collect();
    let local_losers: BTreeSet<Uuid> = local.conflict_losers.iter().copied().collect();
    let mut known = local_decisions.clone();
    for d in &incoming.decisions {
        let id = d.decision.id;
        if let Some(ours) = local_decisions.get(&id) {
            if *ours != d {
                return Err(SyncError::DivergentDecision { decision_id: id });
            }
            continue;
        }
        let set = local_sets
            .get(&d.decision.change_set_id)
            .or_else(|| incoming_sets.get(&d.decision.change_set_id));
        let problem = match set {
            None => Some("neither device has".to_owned()),
            Some(set) if d.decision.item_index >= set.items.len() => {
                Some(format!("has only {} item(s)", set.items.len()))
            }
            Some(set)
                if set.target_id != d.decision.target_id
                    || set.target_kind != d.decision.target_kind =>
            {
                Some(format!(
                    "is about {} {:?}, not {} {:?}",
                    set.target_kind, set.target_id, d.decision.target_kind, d.decision.target_id
                ))
            }
            Some(set) if set.items[d.decision.item_index].tool_name != d.decision.tool_name => {
                Some(format!(
                    "proposes {:?}, not {:?}",
                    set.items[d.decision.item_index].tool_name, d.decision.tool_name
                ))
            }
            Some(_) => None,
        };
        if let Some(problem) = problem {
            return Err(SyncError::DanglingDecision {
                decision_id: id,
                change_set_id: d.decision.change_set_id,
                item_index: d.decision.item_index,
                problem,
            });
        }
        known.insert(id, d);
    }

    let mut finals = Finals {
        by_item: BTreeMap::new(),
    };
    let mut deferred_items = BTreeSet::new();
    for d in known.values() {
        let key = (d.decision.change_set_id, d.decision.item_index);
        if is_final(d.decision.verdict) {
            finals.by_item.entry(key).or_default().push(*d);
        } else {
            deferred_items.insert(key);
        }
    }
    for all in finals.by_item.values_mut() {
        all.sort_by(|a, b| a.precedence_key().cmp(&b.precedence_key()));
    }
    for set in &incoming.change_sets {
        let undecided = set.items.iter().enumerate().find(|(index, item)| {
            item.status.is_decided() && !finals.by_item.contains_key(&(set.id, *index))
        });
        if let Some((item_index, item)) = undecided {
            return Err(SyncError::UndecidedItem {
                change_set_id: set.id,
                item_index,
                status: item.status.as_str().to_owned(),
            });
        }
    }

    let (demoted, inserted, recorded) =
        decision_ops(&finals, &local_decisions, &local_losers, incoming);

    let mut touched_sets: BTreeSet<Uuid> = incoming_sets.keys().copied().collect();
    touched_sets.extend(incoming.decisions.iter().map(|d| d.decision.change_set_id));
    let mut new_sets = Vec::new();
    let mut updated_sets = Vec::new();
    for id in touched_sets {
        let ours = local_sets.get(&id).copied();
        let theirs = incoming_sets.get(&id).copied();
        let Some(base) = ours.or(theirs) else {
            continue;
        };
        let merged = merge_set(base, ours, theirs, &finals, &deferred_items);
        match ours {
            None => new_sets.push(SyncOp::InsertChangeSet(merged)),
            Some(ours) if *ours != merged => {
                let changed_items = ours
                    .items
                    .iter()
                    .zip(&merged.items)
                    .enumerate()
                    .filter(|(_, (a, b))| {
                        a.status != b.status
                            || a.stale_detail != b.stale_detail
                            || a.before != b.before
                            || a.fingerprint != b.fingerprint
                    })
                    .map(|(i, _)| i)
                    .collect();
                updated_sets.push(SyncOp::UpdateChangeSet {
                    set: merged,
                    changed_items,
                });
            }
            Some(_) => {}
        }
    }

    let mut ops = new_sets;
    ops.extend(demoted.into_iter().map(SyncOp::DemoteDecision));
    ops.extend(inserted.into_iter().map(SyncOp::InsertDecision));
    ops.extend(recorded.into_iter().map(SyncOp::RecordConflict));
    ops.extend(updated_sets);
    ops.extend(new_audit_records(local, incoming, local_host));
    ops.extend(entity_writes(local, incoming, &finals));
    ops.extend(ledger_ops(local, incoming, local_host, &ops));
    Ok(SyncPlan { ops })
}

/// The execution ledger's part of a merge, after the decisions it follows from:
/// effects this device lacks, newer copies of other devices' jobs, and this device's
/// jobs whose confirmation `planned` demotes.
///
/// A job is only ever changed elsewhere by a copy from its owner that is newer (by
/// `updatedAt`), never by a copy of this device's own. A job whose item already has
/// another job here (both devices confirmed it) is not copied: each device's own
/// stands, and the operation id they share is the idempotency key of both.
fn ledger_ops(
    local: &SyncState,
    incoming: &SyncState,
    local_host: &str,
    planned: &[SyncOp],
) -> Vec<SyncOp> {
    let mut ops = Vec::new();
    let local_effects: BTreeSet<(Uuid, usize)> = local
        .effects
        .iter()
        .map(|e| (e.change_set_id, e.item_index))
        .collect();
    let mut effects: Vec<&SyncedEffect> = incoming
        .effects
        .iter()
        .filter(|e| !local_effects.contains(&(e.change_set_id, e.item_index)))
        .collect();
    effects.sort_by_key(|e| (e.change_set_id, e.item_index));
    ops.extend(effects.into_iter().cloned().map(SyncOp::MarkExternal));

    let local_jobs: BTreeMap<(Uuid, usize), &SyncedJob> = local
        .jobs
        .iter()
        .map(|j| ((j.change_set_id, j.item_index), j))
        .collect();
    let mut copies: Vec<&SyncedJob> = incoming
        .jobs
        .iter()
        .filter(|theirs| theirs.owner_host != local_host)
        .filter(
            |theirs| match local_jobs.get(&(theirs.change_set_id, theirs.item_index)) {
                None => true,
                Some(ours) => {
                    ours.id == theirs.id
                        && ours.owner_host == theirs.owner_host
                        && ours.updated_at < theirs.updated_at
                }
            },
        )
        .collect();
    copies.sort_by_key(|j| j.id);
    ops.extend(copies.into_iter().cloned().map(SyncOp::WriteJob));

    // A confirmation held here is no decision yet, so a final decision made on another
    // device while it waited (the devices were apart) is in force now; the held job
    // must never run after it, whatever its window says.
    for op in planned {
        let SyncOp::InsertDecision(d) = op else {
            continue;
        };
        let key = (d.decision.change_set_id, d.decision.item_index);
        let held_here = local_jobs
            .get(&key)
            .filter(|job| job.owner_host == local_host && job.scheduled());
        if let (true, Some(job)) = (is_final(d.decision.verdict), held_here) {
            ops.push(SyncOp::StopDemotedJob {
                job_id: job.id,
                note: format!(
                    "a {} made on device {} decided the item while this confirmation was held",
                    d.decision.verdict, d.origin_host
                ),
            });
        }
    }
    for op in planned {
        let SyncOp::DemoteDecision(conflict) = op else {
            continue;
        };
        if !conflict.loser_change_stays() {
            continue;
        }
        let own = local_jobs
            .get(&(conflict.change_set_id, conflict.item_index))
            .filter(|job| job.owner_host == local_host && job.status != "retracted");
        if let Some(job) = own {
            ops.push(SyncOp::StopDemotedJob {
                job_id: job.id,
                note: format!(
                    "a {} made on device {} before this confirmation won a sync conflict",
                    conflict.winner_verdict, conflict.winner_host
                ),
            });
        }
    }
    ops
}

/// What the union of decisions changes locally: local decisions in force that lose
/// (to demote), decisions to put in force, and losing decisions new to this device.
fn decision_ops(
    finals: &Finals<'_>,
    local_decisions: &BTreeMap<Uuid, &SyncedDecision>,
    local_losers: &BTreeSet<Uuid>,
    incoming: &SyncState,
) -> (Vec<Conflict>, Vec<SyncedDecision>, Vec<Conflict>) {
    let mut demoted = Vec::new();
    let mut inserted = Vec::new();
    let mut recorded = Vec::new();
    for (key, all) in &finals.by_item {
        let winner = all[0];
        let conflict = |loser: &SyncedDecision| Conflict {
            change_set_id: key.0,
            item_index: key.1,
            target_kind: loser.decision.target_kind.clone(),
            target_id: loser.decision.target_id.clone(),
            winner_id: winner.decision.id,
            winner_host: winner.origin_host.clone(),
            winner_verdict: winner.decision.verdict,
            loser: loser.clone(),
        };
        if !local_decisions.contains_key(&winner.decision.id) {
            inserted.push(winner.clone());
        }
        for loser in &all[1..] {
            let id = loser.decision.id;
            if !local_decisions.contains_key(&id) {
                recorded.push(conflict(loser));
            } else if !local_losers.contains(&id) {
                demoted.push(conflict(loser));
            }
        }
    }
    for d in &incoming.decisions {
        if !is_final(d.decision.verdict) && !local_decisions.contains_key(&d.decision.id) {
            inserted.push(d.clone());
        }
    }
    inserted.sort_by_key(|d| d.decision.id);
    (demoted, inserted, recorded)
}

/// Audit records this device lacks (its own, echoed back, it has by definition).
fn new_audit_records(local: &SyncState, incoming: &SyncState, local_host: &str) -> Vec<SyncOp> {
    let local_audits: BTreeSet<(&str, i64)> = local
        .audit_records
        .iter()
        .map(|a| (a.origin_host.as_str(), a.origin_id))
        .collect();
    let mut audits: Vec<&SyncedAuditRecord> = incoming
        .audit_records
        .iter()
        .filter(|a| {
            a.origin_host != local_host
                && !local_audits.contains(&(a.origin_host.as_str(), a.origin_id))
        })
        .collect();
    audits.sort_by(|a, b| (&a.origin_host, a.origin_id).cmp(&(&b.origin_host, b.origin_id)));
    audits
        .into_iter()
        .cloned()
        .map(SyncOp::InsertAuditRecord)
        .collect()
}

/// The merged versions of host entities that differ from the local ones.
fn entity_writes(local: &SyncState, incoming: &SyncState, finals: &Finals<'_>) -> Vec<SyncOp> {
    let winner_hosts = finals.conflict_winner_hosts();
    let no_hosts = BTreeSet::new();
    let local_entities: BTreeMap<(&str, &str), &EntityVersion> = local
        .entities
        .iter()
        .map(|e| ((e.entity_type.as_str(), e.entity_id.as_str()), e))
        .collect();
    let mut entities: Vec<EntityVersion> = incoming
        .entities
        .iter()
        .filter_map(|theirs| {
            let key = (theirs.entity_type.as_str(), theirs.entity_id.as_str());
            let hosts = winner_hosts
                .get(&(theirs.target_kind.as_str(), theirs.target_id.as_str()))
                .unwrap_or(&no_hosts);
            merge_entity(local_entities.get(&key).copied(), theirs, hosts)
        })
        .collect();
    entities.sort_by(|a, b| (&a.entity_type, &a.entity_id).cmp(&(&b.entity_type, &b.entity_id)));
    entities.into_iter().map(SyncOp::WriteEntity).collect()
}

fn merge_set(
    base: &ChangeSet,
    ours: Option<&ChangeSet>,
    theirs: Option<&ChangeSet>,
    finals: &Finals<'_>,
    deferred_items: &BTreeSet<(Uuid, usize)>,
) -> ChangeSet {
    let mut merged = base.clone();
    let mut last_decided: Option<OffsetDateTime> = None;
    for (index, item) in merged.items.iter_mut().enumerate() {
        let key = (base.id, index);
        // The stale-target guard's refresh (what the target was found to be when a
        // confirmation was refused): a refreshed item beats one never refreshed, and of
        // two refreshes the same one is kept on every device.
        let refresh = [ours, theirs]
            .into_iter()
            .flatten()
            .filter_map(|s| s.items.get(index))
            .filter(|i| i.stale_detail.is_some())
            .max_by_key(|i| {
                (
                    i.stale_detail.clone(),
                    i.fingerprint.as_ref().map(serde_json::Value::to_string),
                    i.before.as_ref().map(serde_json::Value::to_string),
                )
            });
        if let Some(refreshed) = refresh {
            item.before = refreshed.before.clone();
            item.fingerprint = refreshed.fingerprint.clone();
            item.stale_detail = refreshed.stale_detail.clone();
        }
        if let Some(winner) = finals.winner(key) {
            item.status = winner.decision.verdict.item_status();
            last_decided = last_decided.max(Some(winner.decision.created_at));
            continue;
        }
        let sides = [ours, theirs]
            .into_iter()
            .flatten()
            .filter_map(|s| s.items.get(index).map(|i| i.status));
        let deferred = deferred_items
            .contains(&key)
            .then_some(ChangeItemStatus::Deferred);
        item.status = sides
            .chain(deferred)
            .max_by_key(|s| status_rank(*s))
            .unwrap_or(ChangeItemStatus::Pending);
    }
    let all_decided = merged.items.iter().all(|i| i.status.is_decided());
    let decided = merged.items.iter().any(|i| i.status.is_decided());
    let expired = [ours, theirs]
        .into_iter()
        .flatten()
        .any(|s| s.status == ChangeSetStatus::Expired);
    // A device that resolved the set stamped it with its own clock at the deciding
    // action, which need not be the latest decision time (clocks differ between devices
    // and can step back). Keeping the earliest stamp any side already wrote, and deriving
    // one from the decisions only when no side has one, gives every device the same
    // answer whichever batch it merges first.
    let resolved_elsewhere = [ours, theirs]
        .into_iter()
        .flatten()
        .filter_map(|s| s.resolved_at)
        .min();
    (merged.status, merged.resolved_at) = if all_decided {
        let at = resolved_elsewhere
            .or(last_decided)
            .unwrap_or(merged.created_at);
        (ChangeSetStatus::Resolved, Some(at))
    } else if expired {
        (ChangeSetStatus::Expired, None)
    } else if decided {
        (ChangeSetStatus::PartiallyResolved, None)
    } else {
        (ChangeSetStatus::Pending, None)
    };
    merged.vector_clock = [ours, theirs].into_iter().flatten().fold(
        Default::default(),
        |clock: assent_domain::VectorClock, s| clock.merge(&s.vector_clock),
    );
    merged
}

/// The version to write for `theirs` over `ours`, or `None` to keep ours.
fn merge_entity(
    ours: Option<&EntityVersion>,
    theirs: &EntityVersion,
    winner_hosts: &BTreeSet<&str>,
) -> Option<EntityVersion> {
    let Some(ours) = ours else {
        return Some(theirs.clone());
    };
    match theirs.vector_clock.compare(&ours.vector_clock) {
        ClockOrdering::After => Some(theirs.clone()),
        // Equal clocks have seen the same writes: other content under them is no write
        // (every write ticks the clock), so it is never taken.
        ClockOrdering::Before | ClockOrdering::Equal => None,
        ClockOrdering::Concurrent => {
            let pick = match prefer(ours, theirs, winner_hosts) {
                Ordering::Less => theirs,
                _ => ours,
            };
            let merged = EntityVersion {
                vector_clock: ours.vector_clock.merge(&theirs.vector_clock),
                ..pick.clone()
            };
            (merged != *ours).then_some(merged)
        }
    }
}

/// The deterministic order of concurrent versions: `Greater` when `a` wins.
fn prefer(a: &EntityVersion, b: &EntityVersion, winner_hosts: &BTreeSet<&str>) -> Ordering {
    winner_hosts
        .iter()
        .map(|h| a.vector_clock.get(h).cmp(&b.vector_clock.get(h)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
        .then(a.updated_at.cmp(&b.updated_at))
        .then_with(|| canonical_json(&a.state).cmp(&canonical_json(&b.state)))
        .then_with(|| {
            let clock =
                |e: &EntityVersion| serde_json::to_string(&e.vector_clock).unwrap_or_default();
            clock(a).cmp(&clock(b))
        })
}

#[cfg(test)]
mod tests;
