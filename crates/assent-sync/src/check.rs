//! What an incoming batch must satisfy before anything of it is merged: as much as the
//! local writes it stands for (a wake, a decision, a tool call) had to.
//!
//! A batch is another device's word about what happened there; nothing in it is taken
//! on trust that a local write could not have produced. Every check names where the
//! batch is wrong (a set id, an item index, a field), and a refused batch plans no
//! operation.

use crate::{EFFECTS, EntityVersion, JOB_STATUSES, SyncBatch, SyncError, SyncState};
use assent_domain::{MAX_ITEMS_PER_SET, MAX_REASON_CHARS, OffsetDateTime, VectorClock};
use assent_tools::AuditKind;
use std::collections::{BTreeMap, BTreeSet};
use time::Duration;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;

/// No time in a batch is earlier: Assent did not exist, and a decision dated long ago
/// would win every conflict (the earlier decision wins).
pub const EARLIEST_TIME: OffsetDateTime = datetime!(2000-01-01 00:00 UTC);

/// How far a time in a batch may be ahead of the receiving device's clock: devices'
/// clocks differ, but not by more than a day.
pub const MAX_CLOCK_SKEW: Duration = Duration::days(1);

/// The largest counter a vector clock entry may hold: one write a second for a hundred
/// years is about 2^32, so a larger one is invented (and would saturate a tick).
pub const MAX_CLOCK_COUNTER: u64 = 1 << 32;

/// Checks everything about `batch` that does not need the merged decisions: item
/// caps, the tasks of new sets, clocks, times and the audit records behind entity
/// writes.
pub(crate) fn check_batch(
    local: &SyncState,
    batch: &SyncBatch,
    local_host: &str,
    now: OffsetDateTime,
) -> Result<(), SyncError> {
    check_sets(local, &batch.state)?;
    check_reasons(&batch.state)?;
    check_times(batch, now)?;
    check_clocks(local, &batch.state, local_host)?;
    check_entity_writes(local, &batch.state)?;
    check_ledger(local, &batch.state, now)
}

/// Effects and jobs name an item that this device or the batch has, with the tool the
/// item proposes; their names are the ledger's own; a job's owner is named and its
/// last transition is not in the future (a copy dated ahead would never be replaced).
fn check_ledger(
    local: &SyncState,
    incoming: &SyncState,
    now: OffsetDateTime,
) -> Result<(), SyncError> {
    let sets: BTreeMap<_, _> = local
        .change_sets
        .iter()
        .chain(&incoming.change_sets)
        .map(|s| (s.id, s))
        .collect();
    let tool_of = |set_id, index: usize| -> Result<&str, String> {
        let set = sets
            .get(&set_id)
            .ok_or_else(|| format!("neither device has change set {set_id}"))?;
        set.items
            .get(index)
            .map(|item| item.tool_name.as_str())
            .ok_or_else(|| format!("change set {set_id} has only {} item(s)", set.items.len()))
    };
    let invalid = |what: String, problem: String| SyncError::InvalidLedgerRow { what, problem };
    let mut effects = BTreeSet::new();
    for e in &incoming.effects {
        let what = format!(
            "the effect of item {} of change set {}",
            e.item_index, e.change_set_id
        );
        tool_of(e.change_set_id, e.item_index).map_err(|p| invalid(what.clone(), p))?;
        if !EFFECTS.contains(&e.effect.as_str()) {
            return Err(invalid(what, format!("unknown effect {:?}", e.effect)));
        }
        if e.host.trim().is_empty() {
            return Err(invalid(what, "its host is blank".to_owned()));
        }
        if !effects.insert((e.change_set_id, e.item_index)) {
            return Err(SyncError::Duplicate { what });
        }
    }
    let mut jobs = BTreeSet::new();
    for job in &incoming.jobs {
        let what = format!("job {}", job.id);
        let tool =
            tool_of(job.change_set_id, job.item_index).map_err(|p| invalid(what.clone(), p))?;
        let problem = if tool != job.tool_name {
            Some(format!(
                "it runs {:?}, but its item proposes {tool:?}",
                job.tool_name
            ))
        } else if !JOB_STATUSES.contains(&job.status.as_str()) {
            Some(format!("unknown status {:?}", job.status))
        } else if job.owner_host.trim().is_empty() {
            Some("its owner is blank".to_owned())
        } else if job.updated_at > now + MAX_CLOCK_SKEW {
            Some(format!(
                "its last transition {} is in the future",
                job.updated_at
            ))
        } else if job.scheduled() && job.not_before.is_none() {
            // A held job with no end to its window would hold its item on every device
            // with nothing to show for how long.
            Some("it waits out a hold window but names no notBefore".to_owned())
        } else if job.not_before.is_some() && !job.held {
            Some("it names a notBefore but is not held".to_owned())
        } else if job.approved_by.iter().any(|by| by.trim().is_empty()) {
            Some("one of its approvedBy identities is blank".to_owned())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(invalid(what, problem));
        }
        if !jobs.insert(job.id) {
            return Err(SyncError::Duplicate { what });
        }
    }
    Ok(())
}

/// Caps (a wake's item cap) and references: a set new here about a kind of target
/// that some host syncs (a journal task) is about one this device or the batch has.
/// Targets of kinds nobody syncs (a remote service's) cannot be checked here.
fn check_sets(local: &SyncState, incoming: &SyncState) -> Result<(), SyncError> {
    let local_sets: BTreeSet<_> = local.change_sets.iter().map(|s| s.id).collect();
    let entities = || local.entities.iter().chain(&incoming.entities);
    let synced_kinds: BTreeSet<&str> = entities().map(|e| e.target_kind.as_str()).collect();
    let targets: BTreeSet<(&str, &str)> = entities()
        .map(|e| (e.target_kind.as_str(), e.target_id.as_str()))
        .collect();
    for set in &incoming.change_sets {
        if set.items.len() > MAX_ITEMS_PER_SET {
            return Err(SyncError::TooManyItems {
                change_set_id: set.id,
                items: set.items.len(),
                max: MAX_ITEMS_PER_SET,
            });
        }
        let target = (set.target_kind.as_str(), set.target_id.as_str());
        if !local_sets.contains(&set.id)
            && synced_kinds.contains(target.0)
            && !targets.contains(&target)
        {
            return Err(SyncError::UnknownTarget {
                change_set_id: set.id,
                target_kind: set.target_kind.clone(),
                target_id: set.target_id.clone(),
            });
        }
    }
    Ok(())
}

/// Reasons are bounded as a local decision's are ([`MAX_REASON_CHARS`]).
fn check_reasons(incoming: &SyncState) -> Result<(), SyncError> {
    for d in &incoming.decisions {
        let chars = d
            .decision
            .reason
            .as_deref()
            .map_or(0, |r| r.chars().count());
        if chars > MAX_REASON_CHARS {
            return Err(SyncError::ReasonTooLong {
                decision_id: d.decision.id,
                chars,
                max: MAX_REASON_CHARS,
            });
        }
    }
    Ok(())
}

/// Every time of the batch lies between [`EARLIEST_TIME`] and `now` plus
/// [`MAX_CLOCK_SKEW`].
fn check_times(batch: &SyncBatch, now: OffsetDateTime) -> Result<(), SyncError> {
    let latest = now + MAX_CLOCK_SKEW;
    let check = |what: &dyn Fn() -> String, field: &str, value: OffsetDateTime| {
        let problem = if value < EARLIEST_TIME {
            format!("it is before {}", rfc3339(EARLIEST_TIME))
        } else if value > latest {
            format!(
                "it is more than {MAX_CLOCK_SKEW} after this device's clock ({})",
                rfc3339(now)
            )
        } else {
            return Ok(());
        };
        Err(SyncError::ImplausibleTime {
            what: what(),
            field: field.to_owned(),
            value: rfc3339(value),
            problem,
        })
    };
    check(
        &|| "the batch header".to_owned(),
        "createdAt",
        batch.created_at,
    )?;
    let state = &batch.state;
    for set in &state.change_sets {
        let what = || format!("change set {}", set.id);
        check(&what, "createdAt", set.created_at)?;
        if let Some(at) = set.resolved_at {
            check(&what, "resolvedAt", at)?;
        }
    }
    for d in &state.decisions {
        check(
            &|| format!("decision {}", d.decision.id),
            "createdAt",
            d.decision.created_at,
        )?;
    }
    for a in &state.audit_records {
        check(
            &|| format!("audit record {} of host {:?}", a.origin_id, a.origin_host),
            "createdAt",
            a.record.created_at,
        )?;
    }
    for e in &state.entities {
        check(&|| entity_name(e), "updatedAt", e.updated_at)?;
    }
    Ok(())
}

fn rfc3339(time: OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap_or_else(|_| time.to_string())
}

fn entity_name(e: &EntityVersion) -> String {
    format!("{} {:?}", e.entity_type, e.entity_id)
}

/// The highest counter `host` has in any clock of `state`: how many writes of its own
/// a device has issued, read from its own state.
fn issued(state: &SyncState, host: &str) -> u64 {
    let sets = state.change_sets.iter().map(|s| &s.vector_clock);
    let decisions = state.decisions.iter().map(|d| &d.decision.vector_clock);
    let audits = state
        .audit_records
        .iter()
        .filter_map(|a| a.record.vector_clock.as_ref());
    let entities = state.entities.iter().map(|e| &e.vector_clock);
    sets.chain(decisions)
        .chain(audits)
        .chain(entities)
        .map(|clock| clock.get(host))
        .max()
        .unwrap_or(0)
}

/// No clock of the batch credits this device with more writes than it has issued, and
/// no counter is absurd.
fn check_clocks(
    local: &SyncState,
    incoming: &SyncState,
    local_host: &str,
) -> Result<(), SyncError> {
    let issued_here = issued(local, local_host);
    let check = |what: &dyn Fn() -> String, clock: &VectorClock| {
        for (host, counter) in clock.entries() {
            let problem = if host.trim().is_empty() {
                "a clock entry needs a host id".to_owned()
            } else if counter > MAX_CLOCK_COUNTER {
                format!("no device makes that many writes (at most {MAX_CLOCK_COUNTER})")
            } else if host == local_host && counter > issued_here {
                format!("that is this device, which has issued only {issued_here}")
            } else {
                continue;
            };
            return Err(SyncError::ImplausibleClock {
                what: what(),
                host: host.to_owned(),
                counter,
                problem,
            });
        }
        Ok(())
    };
    for set in &incoming.change_sets {
        check(&|| format!("change set {}", set.id), &set.vector_clock)?;
    }
    for d in &incoming.decisions {
        check(
            &|| format!("decision {}", d.decision.id),
            &d.decision.vector_clock,
        )?;
    }
    for a in &incoming.audit_records {
        if let Some(clock) = &a.record.vector_clock {
            check(
                &|| format!("audit record {} of host {:?}", a.origin_id, a.origin_host),
                clock,
            )?;
        }
    }
    for e in &incoming.entities {
        check(&|| entity_name(e), &e.vector_clock)?;
    }
    Ok(())
}

/// Every write an incoming entity version carries that this device has not seen is
/// accounted for by a successful tool call's audit record, from the host that made
/// it, about the entity's task, with that host's counter as the entity's clock had it
/// after the call. The one exception is the creation of an entity new to this device
/// (creating a task is no tool call): one write, the first of its host.
fn check_entity_writes(local: &SyncState, incoming: &SyncState) -> Result<(), SyncError> {
    let audited: BTreeSet<(&str, &str, &str, u64)> = local
        .audit_records
        .iter()
        .chain(&incoming.audit_records)
        .filter(|a| a.record.kind == AuditKind::Result && a.record.success == Some(true))
        .filter_map(|a| {
            let counter = a.record.vector_clock.as_ref()?.get(&a.origin_host);
            Some((
                a.origin_host.as_str(),
                a.record.target_kind.as_str(),
                a.record.target_id.as_str(),
                counter,
            ))
        })
        .collect();
    let local_entities: BTreeMap<(&str, &str), &EntityVersion> = local
        .entities
        .iter()
        .map(|e| ((e.entity_type.as_str(), e.entity_id.as_str()), e))
        .collect();
    for theirs in &incoming.entities {
        let ours = local_entities
            .get(&(theirs.entity_type.as_str(), theirs.entity_id.as_str()))
            .copied();
        let mut unaudited = theirs.vector_clock.entries().filter(|(host, counter)| {
            *counter > ours.map_or(0, |o| o.vector_clock.get(host))
                && !audited.contains(&(
                    *host,
                    theirs.target_kind.as_str(),
                    theirs.target_id.as_str(),
                    *counter,
                ))
        });
        let offending = match unaudited.next() {
            Some((_, 1)) if ours.is_none() => unaudited.next(),
            first => first,
        };
        if let Some((host, counter)) = offending {
            return Err(SyncError::UnauditedWrite {
                entity_type: theirs.entity_type.clone(),
                entity_id: theirs.entity_id.clone(),
                host: host.to_owned(),
                counter,
            });
        }
    }
    Ok(())
}
