//! The planner's rules on small states, and properties over two simulated devices.

use super::*;
use assent_domain::{ChangeDecision, ChangeItem, NewChangeSet, VectorClock};
use proptest::prelude::*;
use serde_json::json;
use time::Duration;
use time::macros::datetime;

const T0: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);
/// The receiving device's clock when it merges.
const NOW: OffsetDateTime = datetime!(2026-03-02 12:00 UTC);
const SET: Uuid = Uuid::from_u128(0x5e7);
const TASK: &str = "task-1";

/// A simulated device: its synced state, applied exactly as the store applies a plan.
#[derive(Debug, Clone)]
struct Device {
    host: String,
    state: SyncState,
    exports: u128,
    decisions_made: u128,
}

impl Device {
    fn new(host: &str, shared: &SyncState) -> Self {
        Self {
            host: host.to_owned(),
            state: shared.clone(),
            exports: 0,
            decisions_made: 0,
        }
    }

    fn export(&mut self) -> SyncBatch {
        self.exports += 1;
        let mut state = self.state.clone();
        state.sort();
        SyncBatch {
            format_version: FORMAT_VERSION,
            batch_id: Uuid::from_u128(self.exports),
            from_host: self.host.clone(),
            created_at: T0,
            state,
        }
    }

    fn import(&mut self, batch: &SyncBatch) -> SyncPlan {
        let plan = plan_merge(&self.state, batch, &self.host, NOW).expect("batch merges");
        apply(&mut self.state, &plan);
        plan
    }

    fn set(&mut self) -> &mut ChangeSet {
        self.state
            .change_sets
            .iter_mut()
            .find(|s| s.id == SET)
            .expect("the shared set")
    }

    fn task(&mut self) -> &mut EntityVersion {
        self.state
            .entities
            .iter_mut()
            .find(|e| e.entity_id == TASK)
            .expect("the shared task")
    }

    /// A person decides item `index` here, as the confirmation service does; a
    /// confirmation writes `value` into the task.
    fn decide(&mut self, index: usize, verdict: Verdict, value: u8, at: OffsetDateTime) {
        let host = self.host.clone();
        self.decisions_made += 1;
        let id = Uuid::from_u128(u128::from(host.as_bytes()[0]) << 64 | self.decisions_made);
        let set = self.set();
        if set.apply_verdict(index, verdict, at).is_err() {
            return;
        }
        set.vector_clock.tick(&host);
        let decision = ChangeDecision {
            id,
            change_set_id: SET,
            item_index: index,
            agent_id: "agent".into(),
            target_kind: "task".into(),
            target_id: TASK.into(),
            tool_name: "set_value".into(),
            verdict,
            reason: None,
            edited_args: (verdict == Verdict::Confirmed).then(|| json!({"value": value})),
            human_summary: "Set value".into(),
            args: json!({"value": 0}),
            created_at: at,
            vector_clock: set.vector_clock.clone(),
            decided_by: None,
        };
        self.state.decisions.push(SyncedDecision {
            origin_host: host,
            decision,
        });
        if verdict == Verdict::Confirmed {
            self.edit_task(value, at);
        }
    }

    /// A tool call writes `value` into the task, as the audited executor runs it: the
    /// task's clock ticks and a result audit record carries the clock after it.
    fn edit_task(&mut self, value: u8, at: OffsetDateTime) {
        let host = self.host.clone();
        let task = self.task();
        task.state = json!({"value": value});
        task.vector_clock.tick(&host);
        task.updated_at = at;
        let clock = task.vector_clock.clone();
        let written_here = self
            .state
            .audit_records
            .iter()
            .filter(|a| a.origin_host == host)
            .count();
        let origin_id = i64::try_from(written_here).expect("few records") + 1;
        self.state.audit_records.push(SyncedAuditRecord {
            origin_host: host,
            origin_id,
            record: assent_tools::AuditRecord {
                operation_id: assent_domain::OperationId::from_stored(format!("op-{origin_id}")),
                run_key: "run".into(),
                tool_name: "set_value".into(),
                agent_id: "agent".into(),
                target_kind: "task".into(),
                target_id: TASK.into(),
                kind: assent_tools::AuditKind::Result,
                args: json!({"value": value}),
                success: Some(true),
                detail: None,
                vector_clock: Some(clock),
                created_at: at,
                allowed_by: None,
                refused_by: None,
                decided_by: None,
            },
        });
    }
}

/// What the store does with a plan, on the model.
fn apply(state: &mut SyncState, plan: &SyncPlan) {
    for op in &plan.ops {
        match op {
            SyncOp::InsertChangeSet(set) => state.change_sets.push(set.clone()),
            SyncOp::DemoteDecision(conflict) => {
                state.conflict_losers.push(conflict.loser.decision.id);
            }
            SyncOp::InsertDecision(d) => state.decisions.push(d.clone()),
            SyncOp::RecordConflict(conflict) => {
                state.decisions.push(conflict.loser.clone());
                state.conflict_losers.push(conflict.loser.decision.id);
            }
            SyncOp::UpdateChangeSet { set, .. } => {
                let slot = state
                    .change_sets
                    .iter_mut()
                    .find(|s| s.id == set.id)
                    .expect("updates a known set");
                *slot = set.clone();
            }
            SyncOp::InsertAuditRecord(a) => state.audit_records.push(a.clone()),
            SyncOp::WriteEntity(e) => {
                state
                    .entities
                    .retain(|x| (&x.entity_type, &x.entity_id) != (&e.entity_type, &e.entity_id));
                state.entities.push(e.clone());
            }
            SyncOp::MarkExternal(effect) => state.effects.push(effect.clone()),
            SyncOp::WriteJob(copy) => {
                state.jobs.retain(|j| j.id != copy.id);
                state.jobs.push(copy.clone());
            }
            SyncOp::StopDemotedJob { job_id, note } => {
                let job = state
                    .jobs
                    .iter_mut()
                    .find(|j| j.id == *job_id)
                    .expect("stops a known job");
                job.status = if matches!(job.status.as_str(), "approved" | "failed") {
                    "retracted".to_owned()
                } else {
                    "inDoubt".to_owned()
                };
                job.last_error = Some(note.clone());
                job.updated_at = NOW;
            }
        }
    }
    state.sort();
}

impl Device {
    /// Item `index` is external here, and this device's confirmation of it created a
    /// job with `status`, last changed at `at`.
    fn job(&mut self, index: usize, status: &str, at: OffsetDateTime) -> Uuid {
        let id = Uuid::from_u128(0x70b0 + index as u128);
        self.state.effects.push(SyncedEffect {
            change_set_id: SET,
            item_index: index,
            effect: "external".into(),
            host: "mail".into(),
        });
        self.state.jobs.push(SyncedJob {
            owner_host: self.host.clone(),
            id,
            operation_id: format!("op-{index}"),
            change_set_id: SET,
            item_index: index,
            host: "mail".into(),
            tool_name: "set_value".into(),
            args: json!({"value": index}),
            agent_id: "agent".into(),
            target_kind: "task".into(),
            target_id: TASK.into(),
            run_key: "run".into(),
            idempotent: false,
            status: status.into(),
            attempts: 0,
            attempt_limit: 5,
            doubts: 0,
            last_error: None,
            result: None,
            created_at: at,
            updated_at: at,
            held: false,
            not_before: None,
            approved_by: Vec::new(),
        });
        self.state.sort();
        id
    }

    /// This device's person confirmed item `index` of a held tool at `at`: no decision,
    /// a held job waiting out its window until `until` (as `ConfirmationService::schedule`
    /// writes it).
    fn hold(&mut self, index: usize, at: OffsetDateTime, until: OffsetDateTime) -> Uuid {
        let id = self.job(index, "approved", at);
        let job = self
            .state
            .jobs
            .iter_mut()
            .find(|j| j.id == id)
            .expect("job");
        job.held = true;
        job.not_before = Some(until);
        job.approved_by = vec!["alice".into()];
        id
    }

    fn job_status(&self, id: Uuid) -> &str {
        &self
            .state
            .jobs
            .iter()
            .find(|j| j.id == id)
            .expect("the job")
            .status
    }
}

#[test]
fn a_demoted_confirmation_stops_its_own_job_never_leaving_it_approved() {
    for (status, stopped) in [
        ("approved", "retracted"),
        ("failed", "retracted"),
        ("running", "inDoubt"),
        ("applied", "inDoubt"),
    ] {
        let mut a = Device::new("A", &shared());
        let mut b = Device::new("B", &shared());
        // B rejected first; A confirmed later, and its job stands at `status`.
        b.decide(0, Verdict::Rejected, 0, T0 + Duration::minutes(1));
        a.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(2));
        let job = a.job(0, status, T0 + Duration::minutes(2));
        let plan = a.import(&b.export());
        assert!(
            plan.ops.iter().any(|op| matches!(op,
                SyncOp::StopDemotedJob { job_id, note } if *job_id == job && note.contains("rejected"))),
            "{status}: {plan:?}"
        );
        assert_eq!(a.job_status(job), stopped, "{status}");
        assert_eq!(a.set().items[0].status, ChangeItemStatus::Rejected);

        // B learns of the job and how it stands; it never owns or stops it.
        let plan = b.import(&a.export());
        assert!(
            !plan
                .ops
                .iter()
                .any(|op| matches!(op, SyncOp::StopDemotedJob { .. })),
            "{plan:?}"
        );
        assert_eq!(b.job_status(job), stopped);
        assert_eq!(b.state.effects, a.state.effects);
        assert!(b.import(&a.export()).is_empty(), "a replay changes nothing");
    }
}

#[test]
fn a_later_rejection_that_loses_leaves_the_job_alone() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(1));
    let job = a.job(0, "approved", T0 + Duration::minutes(1));
    b.decide(0, Verdict::Rejected, 0, T0 + Duration::minutes(2));
    let plan = a.import(&b.export());
    assert!(
        !plan
            .ops
            .iter()
            .any(|op| matches!(op, SyncOp::StopDemotedJob { .. })),
        "{plan:?}"
    );
    assert_eq!(a.job_status(job), "approved");
}

#[test]
fn only_the_owners_newer_copy_of_a_job_replaces_another_devices() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(1));
    let job = a.job(0, "approved", T0 + Duration::minutes(1));
    b.import(&a.export());
    assert_eq!(b.job_status(job), "approved");

    // The owner ran it: the newer copy replaces B's.
    let ran = a.state.jobs.iter_mut().find(|j| j.id == job).expect("job");
    ran.status = "applied".into();
    ran.updated_at = T0 + Duration::minutes(3);
    b.import(&a.export());
    assert_eq!(b.job_status(job), "applied");

    // A copy that B sends back, even altered and dated later, never changes A's own.
    let echoed = b.state.jobs.iter_mut().find(|j| j.id == job).expect("job");
    echoed.status = "retracted".into();
    echoed.updated_at = T0 + Duration::minutes(5);
    let plan = a.import(&b.export());
    assert!(
        !plan.ops.iter().any(|op| matches!(op, SyncOp::WriteJob(_))),
        "{plan:?}"
    );
    assert_eq!(a.job_status(job), "applied");
}

#[test]
fn a_held_confirmation_travels_and_a_decision_made_elsewhere_meanwhile_stops_it() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    let until = T0 + Duration::minutes(5);
    let job = a.hold(0, T0 + Duration::minutes(1), until);

    // B learns of the held job as it is: held, with its window and who confirmed.
    b.import(&a.export());
    let copy = b.state.jobs.iter().find(|j| j.id == job).expect("copied");
    assert!(copy.scheduled(), "{copy:?}");
    assert_eq!(copy.not_before, Some(until));
    assert_eq!(copy.approved_by, ["alice"]);
    assert_eq!(copy.owner_host, "A");

    // C rejected the item while apart from A: the held job must never run after it.
    let mut c = Device::new("C", &shared());
    c.decide(0, Verdict::Rejected, 0, T0 + Duration::minutes(2));
    let plan = a.import(&c.export());
    assert!(
        plan.ops.iter().any(|op| matches!(op,
            SyncOp::StopDemotedJob { job_id, note } if *job_id == job && note.contains("while this confirmation was held"))),
        "{plan:?}"
    );
    assert_eq!(a.job_status(job), "retracted");
    assert_eq!(a.set().items[0].status, ChangeItemStatus::Rejected);

    // B's copy is never stopped by B (A owns it); A's retraction reaches it.
    let plan = b.import(&c.export());
    assert!(
        !plan
            .ops
            .iter()
            .any(|op| matches!(op, SyncOp::StopDemotedJob { .. })),
        "{plan:?}"
    );
    b.import(&a.export());
    assert_eq!(b.job_status(job), "retracted");
}

#[test]
fn a_held_job_without_its_window_or_with_a_blank_approver_is_refused() {
    let mut a = Device::new("A", &shared());
    a.hold(0, T0 + Duration::minutes(1), T0 + Duration::minutes(5));
    let mut batch = a.export();
    batch.state.jobs[0].not_before = None;
    let refused = plan_merge(&shared(), &batch, "B", NOW).expect_err("refused");
    assert!(
        refused.to_string().contains("names no notBefore"),
        "{refused}"
    );
    let mut batch = a.export();
    batch.state.jobs[0].approved_by = vec![" ".into()];
    let refused = plan_merge(&shared(), &batch, "B", NOW).expect_err("refused");
    assert!(refused.to_string().contains("approvedBy"), "{refused}");
    // A batch from before held jobs travelled has none of the new fields: it reads.
    let mut batch = serde_json::to_value(a.export()).expect("json");
    for field in ["held", "notBefore", "approvedBy"] {
        batch["jobs"][0].as_object_mut().expect("job").remove(field);
    }
    let old: SyncBatch = serde_json::from_value(batch).expect("reads");
    assert!(!old.state.jobs[0].held);
    plan_merge(&shared(), &old, "B", NOW).expect("merges");
}

#[test]
fn a_job_for_an_item_nobody_has_or_with_an_unknown_status_is_refused() {
    let mut a = Device::new("A", &shared());
    a.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(1));
    a.job(0, "approved", T0 + Duration::minutes(1));
    let mut batch = a.export();
    batch.state.jobs[0].status = "sleeping".into();
    let refused = plan_merge(&shared(), &batch, "B", NOW).expect_err("refused");
    assert!(refused.to_string().contains("unknown status"), "{refused}");
    let mut batch = a.export();
    batch.state.jobs[0].item_index = 9;
    let refused = plan_merge(&shared(), &batch, "B", NOW).expect_err("refused");
    assert!(refused.to_string().contains("only 3 item(s)"), "{refused}");
    let mut batch = a.export();
    batch.state.effects[0].effect = "magic".into();
    let refused = plan_merge(&shared(), &batch, "B", NOW).expect_err("refused");
    assert!(refused.to_string().contains("unknown effect"), "{refused}");
}

/// One set of three items about one task, both devices start from it.
fn shared() -> SyncState {
    let set = ChangeSet::new(NewChangeSet {
        id: SET,
        agent_id: "agent".into(),
        target: assent_domain::Target::new("task", TASK),

        thread_id: "thread".into(),
        run_key: "run".into(),
        items: (0..3)
            .map(|i| ChangeItem::new("set_value", json!({"value": i}), format!("Set value {i}")))
            .collect(),
        created_at: T0,
    })
    .expect("a set");
    let mut state = SyncState {
        change_sets: vec![set],
        entities: vec![EntityVersion {
            entity_type: "task".into(),
            entity_id: TASK.into(),
            target_kind: "task".into(),
            target_id: TASK.into(),
            vector_clock: VectorClock::default(),
            updated_at: T0,
            state: json!({"value": 0}),
        }],
        ..SyncState::default()
    };
    state.sort();
    state
}

/// Exchanges until both sides agree: each direction once, then once more.
fn sync_both(a: &mut Device, b: &mut Device) {
    let batch = a.export();
    b.import(&batch);
    let batch = b.export();
    a.import(&batch);
}

#[test]
fn a_new_set_is_inserted_and_a_replay_plans_nothing() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &SyncState::default());
    let batch = a.export();
    let plan = b.import(&batch);
    assert!(
        matches!(plan.ops[0], SyncOp::InsertChangeSet(_)),
        "{plan:?}"
    );
    assert!(b.import(&batch).is_empty(), "a replay changes nothing");
    assert_eq!(b.state, a.state);
}

#[test]
fn a_confirmation_on_one_device_reaches_the_other_with_its_change() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    b.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(1));
    let batch = b.export();
    let plan = a.import(&batch);
    assert!(plan.conflicts().next().is_none());
    assert_eq!(a.set().items[0].status, ChangeItemStatus::Confirmed);
    assert_eq!(a.set().status, ChangeSetStatus::PartiallyResolved);
    assert_eq!(a.task().state, json!({"value": 7}));
    assert_eq!(a.state, b.state);
}

#[test]
fn the_earlier_of_two_decisions_wins_and_the_other_is_a_conflict_on_both_sides() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.decide(1, Verdict::Confirmed, 5, T0 + Duration::minutes(2));
    b.decide(1, Verdict::Confirmed, 9, T0 + Duration::minutes(1));
    let batch = a.export();
    let plan = b.import(&batch);
    let conflicts: Vec<_> = plan.conflicts().collect();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].winner_host, "B");
    assert!(matches!(plan.ops[0], SyncOp::RecordConflict(_)), "{plan:?}");
    let batch = b.export();
    let plan = a.import(&batch);
    assert!(matches!(plan.ops[0], SyncOp::DemoteDecision(_)), "{plan:?}");
    assert_eq!(a.state, b.state);
    assert_eq!(a.task().state, json!({"value": 9}), "the winner's change");
    assert_eq!(a.state.conflict_losers.len(), 1);
}

#[test]
fn a_tie_in_time_is_broken_by_host_id() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    let at = T0 + Duration::minutes(1);
    a.decide(0, Verdict::Rejected, 1, at);
    b.decide(0, Verdict::Confirmed, 2, at);
    sync_both(&mut a, &mut b);
    assert_eq!(a.set().items[0].status, ChangeItemStatus::Rejected);
    let conflict = a.state.conflict_losers.clone();
    assert_eq!(conflict.len(), 1);
    assert_eq!(a.state, b.state);
}

#[test]
fn a_decided_item_beats_a_pending_or_deferred_one() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.decide(2, Verdict::Deferred, 0, T0 + Duration::minutes(3));
    b.decide(2, Verdict::Rejected, 0, T0 + Duration::minutes(1));
    sync_both(&mut a, &mut b);
    assert_eq!(a.set().items[2].status, ChangeItemStatus::Rejected);
    assert!(
        a.state.conflict_losers.is_empty(),
        "a deferral is no conflict"
    );
    assert_eq!(a.state.decisions.len(), 2);
}

#[test]
fn an_expired_set_stays_expired_unless_every_item_was_decided() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.set().expire();
    b.decide(0, Verdict::Confirmed, 3, T0);
    sync_both(&mut a, &mut b);
    assert_eq!(b.set().status, ChangeSetStatus::Expired);
    for index in 1..3 {
        b.set().status = ChangeSetStatus::PartiallyResolved;
        b.decide(index, Verdict::Rejected, 0, T0 + Duration::minutes(5));
    }
    sync_both(&mut a, &mut b);
    assert_eq!(a.set().status, ChangeSetStatus::Resolved);
    assert_eq!(a.set().resolved_at, Some(T0 + Duration::minutes(5)));
}

#[test]
fn bad_batches_are_refused_with_the_reason() {
    let mut a = Device::new("A", &shared());
    let local = shared();
    let mut batch = a.export();
    assert!(matches!(
        plan_merge(&local, &batch, "A", NOW),
        Err(SyncError::FromThisHost { .. })
    ));
    batch.format_version = 99;
    let err = plan_merge(&local, &batch, "B", NOW).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sync batch format 99 is not supported (this build reads formats 1 to 2)"
    );
    let mut batch = a.export();
    batch.state.change_sets[0].items[1].args = json!({"value": 42});
    assert_eq!(
        plan_merge(&local, &batch, "B", NOW)
            .unwrap_err()
            .to_string(),
        format!("change set {SET} differs from the local one in item 1")
    );
    a.decide(0, Verdict::Confirmed, 1, T0);
    let mut batch = a.export();
    batch.state.decisions[0].decision.item_index = 9;
    assert!(matches!(
        plan_merge(&local, &batch, "B", NOW),
        Err(SyncError::DanglingDecision { item_index: 9, .. })
    ));
    let mut batch = a.export();
    let twice = batch.state.entities[0].clone();
    batch.state.entities.push(twice);
    assert_eq!(
        plan_merge(&local, &batch, "B", NOW)
            .unwrap_err()
            .to_string(),
        "sync batch lists task \"task-1\" twice"
    );
}

#[test]
fn concurrent_task_edits_settle_on_one_version_with_both_histories() {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    a.edit_task(1, T0 + Duration::minutes(2));
    b.edit_task(2, T0 + Duration::minutes(1));
    sync_both(&mut a, &mut b);
    assert_eq!(a.task().state, json!({"value": 1}), "the later edit");
    assert_eq!(a.task().vector_clock.get("A"), 1);
    assert_eq!(a.task().vector_clock.get("B"), 1);
    assert_eq!(a.state, b.state);
}

#[derive(Debug, Clone)]
enum Step {
    Decide {
        on_b: bool,
        index: usize,
        verdict: Verdict,
        value: u8,
        minute: i64,
    },
    Edit {
        on_b: bool,
        value: u8,
        minute: i64,
    },
    Send {
        to_b: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            any::<bool>(),
            0usize..3,
            prop::sample::select(Verdict::ALL),
            1u8..20,
            0i64..30
        )
            .prop_map(|(on_b, index, verdict, value, minute)| Step::Decide {
                on_b,
                index,
                verdict,
                value,
                minute
            }),
        (any::<bool>(), 1u8..20, 0i64..30).prop_map(|(on_b, value, minute)| Step::Edit {
            on_b,
            value,
            minute
        }),
        any::<bool>().prop_map(|to_b| Step::Send { to_b }),
    ]
}

fn run(steps: &[Step]) -> (Device, Device) {
    let mut a = Device::new("A", &shared());
    let mut b = Device::new("B", &shared());
    for step in steps {
        match *step {
            Step::Decide {
                on_b,
                index,
                verdict,
                value,
                minute,
            } => {
                let device = if on_b { &mut b } else { &mut a };
                device.decide(index, verdict, value, T0 + Duration::minutes(minute));
            }
            Step::Edit {
                on_b,
                value,
                minute,
            } => {
                let device = if on_b { &mut b } else { &mut a };
                device.edit_task(value, T0 + Duration::minutes(minute));
            }
            Step::Send { to_b } => {
                if to_b {
                    let batch = a.export();
                    b.import(&batch);
                } else {
                    let batch = b.export();
                    a.import(&batch);
                }
            }
        }
    }
    (a, b)
}

proptest! {
    #[test]
    fn any_interleaving_ends_identical_after_a_full_exchange(steps in prop::collection::vec(step(), 0..24)) {
        let (mut a, mut b) = run(&steps);
        sync_both(&mut a, &mut b);
        sync_both(&mut a, &mut b);
        prop_assert_eq!(&a.state, &b.state);
        // One decision in force per decided item, and every other final is a conflict.
        let set = a.set().clone();
        for (index, item) in set.items.iter().enumerate() {
            let finals: Vec<_> = a.state.decisions.iter()
                .filter(|d| d.decision.item_index == index && d.decision.verdict.item_status().is_decided())
                .collect();
            let in_force = finals.iter().filter(|d| !a.state.conflict_losers.contains(&d.decision.id)).count();
            prop_assert_eq!(in_force, usize::from(item.status.is_decided()));
        }
    }

    #[test]
    fn replaying_any_batch_plans_nothing(steps in prop::collection::vec(step(), 0..24)) {
        let (mut a, mut b) = run(&steps);
        let batch = a.export();
        b.import(&batch);
        let replay = plan_merge(&b.state, &batch, "B", NOW).expect("merges");
        prop_assert!(replay.is_empty(), "{:?}", replay);
    }

    #[test]
    fn the_merged_state_does_not_depend_on_who_imports_first(steps in prop::collection::vec(step(), 0..24)) {
        let (a, b) = run(&steps);
        let (mut a1, mut b1) = (a.clone(), b.clone());
        let from_a = a1.export();
        let from_b = b1.export();
        b1.import(&from_a);
        a1.import(&from_b);
        prop_assert_eq!(&a1.state.change_sets, &b1.state.change_sets);
        prop_assert_eq!(&a1.state.decisions, &b1.state.decisions);
        prop_assert_eq!(&a1.state.conflict_losers, &b1.state.conflict_losers);
        prop_assert_eq!(&a1.state.entities, &b1.state.entities);
    }
}

/// Device A's export after a person confirmed item 0 there (so it carries a decision,
/// a task write and its audit record), and device B's state before it.
fn a_confirmed_batch() -> (SyncBatch, SyncState) {
    let mut a = Device::new("A", &shared());
    a.decide(0, Verdict::Confirmed, 7, T0 + Duration::minutes(1));
    (a.export(), shared())
}

fn refusal(local: &SyncState, batch: &SyncBatch) -> String {
    match plan_merge(local, batch, "B", NOW) {
        Ok(plan) => panic!("the batch merges: {plan:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn an_honest_batch_passes_every_check() {
    let (batch, local) = a_confirmed_batch();
    let plan = plan_merge(&local, &batch, "B", NOW).expect("merges");
    assert!(!plan.is_empty());
    // And a fresh device takes it whole, the task's creation included.
    let plan = plan_merge(&SyncState::default(), &batch, "B", NOW).expect("merges");
    assert!(!plan.is_empty());
}

#[test]
fn a_set_larger_than_a_wake_may_propose_is_refused() {
    let (mut batch, local) = a_confirmed_batch();
    let mut set = batch.state.change_sets[0].clone();
    set.id = Uuid::from_u128(0xb16);
    let item = set.items[0].clone();
    set.items = vec![item; 10_000];
    set.items
        .iter_mut()
        .for_each(|i| i.status = ChangeItemStatus::Pending);
    batch.state.change_sets.push(set);
    assert_eq!(
        refusal(&local, &batch),
        "change set 00000000-0000-0000-0000-000000000b16 has 10000 items; a change set holds at most 25"
    );
}

#[test]
fn a_set_on_a_target_of_a_kind_nobody_syncs_is_taken() {
    // A remote service's targets (an MCP server, an invoice elsewhere) are no synced
    // entity, so no device can vouch for them; the set itself still merges.
    let (mut batch, local) = a_confirmed_batch();
    let mut set = batch.state.change_sets[0].clone();
    set.id = Uuid::from_u128(0x1e55);
    set.target_kind = "invoice".into();
    set.target_id = "INV-1".into();
    set.items
        .iter_mut()
        .for_each(|i| i.status = ChangeItemStatus::Pending);
    batch.state.change_sets.push(set);
    let plan = plan_merge(&local, &batch, "B", NOW).expect("merges");
    assert!(
        plan.ops
            .iter()
            .any(|op| matches!(op, SyncOp::InsertChangeSet(s) if s.id == Uuid::from_u128(0x1e55))),
        "{plan:?}"
    );
}

#[test]
fn a_set_on_a_task_nobody_has_is_refused() {
    let (mut batch, local) = a_confirmed_batch();
    let mut set = batch.state.change_sets[0].clone();
    set.id = Uuid::from_u128(0x6057);
    set.target_id = "ghost".into();
    set.items
        .iter_mut()
        .for_each(|i| i.status = ChangeItemStatus::Pending);
    batch.state.change_sets.push(set);
    assert_eq!(
        refusal(&local, &batch),
        "change set 00000000-0000-0000-0000-000000006057 is about task \"ghost\", which neither this device nor the batch has"
    );
    // A decision about a set of another task is refused too.
    let (mut batch, local) = a_confirmed_batch();
    batch.state.decisions[0].decision.target_id = "other".into();
    assert!(
        refusal(&local, &batch).contains("which is about task \"task-1\", not task \"other\""),
        "{}",
        refusal(&local, &batch)
    );
}

#[test]
fn a_decided_item_without_a_decision_is_refused() {
    let (mut batch, local) = a_confirmed_batch();
    batch.state.change_sets[0].items[2].status = ChangeItemStatus::Confirmed;
    assert_eq!(
        refusal(&local, &batch),
        format!(
            "item 2 of change set {SET} is confirmed, but neither this device nor the batch has a decision on it"
        )
    );
}

#[test]
fn a_task_changed_without_its_audit_record_is_refused() {
    let (mut batch, local) = a_confirmed_batch();
    batch.state.audit_records.clear();
    assert_eq!(
        refusal(&local, &batch),
        "task \"task-1\" carries write 1 of host \"A\", which no audit record of that host accounts for"
    );
    // A second, unaudited write on top of the audited one.
    let (mut batch, local) = a_confirmed_batch();
    let task = &mut batch.state.entities[0];
    task.state = json!({"value": 99, "category": "finance"});
    task.vector_clock.tick("A");
    assert!(refusal(&local, &batch).contains("carries write 2 of host \"A\""));
    // Content changed under the same clock: not a write, so the local version stays.
    let (mut batch, mut local) = a_confirmed_batch();
    let mut b = Device::new("B", &local);
    b.import(&batch);
    local = b.state.clone();
    batch.state.entities[0].state = json!({"value": 99});
    batch.state.entities[0].updated_at = T0 + Duration::hours(2);
    batch.batch_id = Uuid::from_u128(0xfeed);
    let plan = plan_merge(&local, &batch, "B", NOW).expect("merges");
    assert!(
        !plan
            .ops
            .iter()
            .any(|op| matches!(op, SyncOp::WriteEntity(_))),
        "{plan:?}"
    );
}

#[test]
fn implausible_clocks_are_refused() {
    let (mut batch, local) = a_confirmed_batch();
    batch.state.decisions[0].decision.vector_clock =
        [("B".to_owned(), u64::MAX)].into_iter().collect();
    let decision = batch.state.decisions[0].decision.id;
    assert_eq!(
        refusal(&local, &batch),
        format!(
            "decision {decision} has vector clock entry \"B\" = {}: no device makes that many writes (at most 4294967296)",
            u64::MAX
        )
    );
    let (mut batch, local) = a_confirmed_batch();
    batch.state.change_sets[0].vector_clock.tick("B");
    assert_eq!(
        refusal(&local, &batch),
        format!(
            "change set {SET} has vector clock entry \"B\" = 1: that is this device, which has issued only 0"
        )
    );
}

#[test]
fn implausible_times_are_refused() {
    let (mut batch, local) = a_confirmed_batch();
    batch.state.decisions[0].decision.created_at = datetime!(0001-01-01 00:00 UTC);
    let decision = batch.state.decisions[0].decision.id;
    assert_eq!(
        refusal(&local, &batch),
        format!(
            "decision {decision} has createdAt 0001-01-01T00:00:00Z: it is before 2000-01-01T00:00:00Z"
        )
    );
    let (mut batch, local) = a_confirmed_batch();
    batch.state.change_sets[0].created_at = NOW + Duration::days(2);
    assert_eq!(
        refusal(&local, &batch),
        format!(
            "change set {SET} has createdAt 2026-03-04T12:00:00Z: it is more than 1d after this device's clock (2026-03-02T12:00:00Z)"
        )
    );
}
