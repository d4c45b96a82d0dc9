//! Two devices, each with its own SQLite file, syncing through batches: a proposal made
//! on one is confirmed on the other, decisions made while apart become one decision in
//! force and one recorded conflict, replays change nothing, and any interleaving of
//! local work and sync ends with both devices in the same state.

use assent_confirm::ItemRef;
use assent_domain::{ChangeItemStatus, ChangeSetStatus, OffsetDateTime, Uuid, Verdict};
use assent_store::sync::conflicts;
use assent_store::{StoreError, audit, change_sets, decisions};
use assent_tests::{NOW, TestApp};
use assent_tools::AuditKind;
use proptest::prelude::*;
use serde_json::json;
use time::Duration;

fn minutes(n: i64) -> OffsetDateTime {
    NOW + Duration::minutes(n)
}

/// Device A with the standard scene and a proposal to set the priority to P0; device
/// B with the same agent (agents are per-device configuration) and the proposal
/// synced to it. Returns the task and the set.
async fn two_devices_with_a_proposal() -> (TestApp, TestApp, String, Uuid) {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let (task, set) = a.propose_and_send_to(&b).await;
    (a, b, task, set)
}

/// A confirmation refused because the target changed refreshes the item's `before`:
/// the next exchange carries the refresh instead of refusing the set as divergent, and
/// both devices end with the same item (found by the interleaving property below).
#[tokio::test]
async fn a_stale_refresh_on_one_device_syncs_to_the_other() {
    let (a, b, task, set) = two_devices_with_a_proposal().await;
    let other = a
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P3"}))],
        )
        .await
        .change_set
        .expect("a second proposal")
        .id;
    let person = a.engine.confirmations();
    person
        .confirm_item(ItemRef::new(other, 0), minutes(1))
        .await
        .expect("P3 applies");
    let refused = person.confirm_item(ItemRef::new(set, 0), minutes(2)).await;
    assert!(refused.is_err(), "stale: {refused:?}");

    a.send_to(&b).await;
    b.send_to(&a).await;
    assert_eq!(a.synced_state().await, b.synced_state().await);
    let mut conn = b.store.read_connection().await.unwrap();
    let item = change_sets::require(&mut conn, set)
        .await
        .unwrap()
        .items
        .remove(0);
    assert!(item.stale_detail.is_some(), "{item:?}");
    assert_eq!(item.before, Some(json!("P3")));
}

#[tokio::test]
async fn propose_on_a_confirm_on_b_and_a_sees_it_after_one_round() {
    let (a, b, task, set) = two_devices_with_a_proposal().await;
    assert_eq!(b.load(&task).await.priority.as_deref(), Some("P1"));
    b.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(1))
        .await
        .expect("B confirms");

    let report = b.send_to(&a).await;
    assert!(report.conflicts.is_empty(), "{report:?}");

    let mut conn = a.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    assert_eq!(stored.items[0].status, ChangeItemStatus::Confirmed);
    assert_eq!(stored.status, ChangeSetStatus::Resolved);
    assert_eq!(stored.resolved_at, Some(minutes(1)));
    let history = decisions::for_change_set(&mut conn, set).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].verdict, Verdict::Confirmed);
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task.clone())),
        100,
    )
    .await
    .unwrap();
    assert!(
        trail
            .iter()
            .any(|r| r.kind == AuditKind::Result && r.success == Some(true)),
        "B's application is in A's audit trail: {trail:?}"
    );
    drop(conn);
    assert_eq!(a.load(&task).await.priority.as_deref(), Some("P0"));
    let prompt = a
        .engine
        .confirmations()
        .history(
            "agent-1",
            Some(&assent_journal_host::task_target(&task)),
            20,
        )
        .await
        .unwrap()
        .expect("a history");
    assert!(
        prompt.contains("Set priority to P0 — confirmed"),
        "{prompt}"
    );
    assert_eq!(a.synced_state().await, b.synced_state().await);
}

#[tokio::test]
async fn both_confirm_while_apart_one_application_and_one_conflict_on_each() {
    let (a, b, task, set) = two_devices_with_a_proposal().await;
    a.engine
        .confirmations()
        .edit_and_confirm(ItemRef::new(set, 0), json!({"priority": "P2"}), minutes(2))
        .await
        .expect("A confirms an edit");
    b.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(1))
        .await
        .expect("B confirms, earlier");

    assert_eq!(a.send_to(&b).await.conflicts.len(), 1);
    assert_eq!(b.send_to(&a).await.conflicts.len(), 1);

    for device in [&a, &b] {
        let mut conn = device.store.read_connection().await.unwrap();
        let in_force = decisions::for_change_set(&mut conn, set).await.unwrap();
        assert_eq!(in_force.len(), 1, "one decision in force");
        assert_eq!(in_force[0].edited_args, None, "B's, the earlier, wins");
        let recorded = conflicts(&mut conn).await.unwrap();
        assert_eq!(recorded.len(), 1);
        let conflict = &recorded[0].conflict;
        assert_eq!(conflict.winner_host, "device-b");
        assert_eq!(conflict.loser.origin_host, "device-a");
        assert_eq!(
            conflict.loser.decision.edited_args,
            Some(json!({"priority": "P2"}))
        );
        assert!(!recorded[0].loser_change_stays);
        // Each device ran its own handler once; sync moved state, it re-ran nothing.
        let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM applied_operations")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(applied, 1);
        drop(conn);
        assert_eq!(device.load(&task).await.priority.as_deref(), Some("P0"));
    }
    assert_eq!(a.synced_state().await, b.synced_state().await);
    // Another round changes nothing on either side.
    let before = (a.synced_state().await, b.synced_state().await);
    a.send_to(&b).await;
    b.send_to(&a).await;
    assert_eq!((a.synced_state().await, b.synced_state().await), before);
}

#[tokio::test]
async fn a_rejection_that_wins_over_an_applied_confirmation_is_flagged() {
    let (a, b, _task, set) = two_devices_with_a_proposal().await;
    a.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(2))
        .await
        .unwrap();
    b.engine
        .confirmations()
        .reject_item(ItemRef::new(set, 0), Some("not now".into()), minutes(1))
        .await
        .unwrap();
    a.send_to(&b).await;
    b.send_to(&a).await;
    let mut conn = a.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    assert_eq!(stored.items[0].status, ChangeItemStatus::Rejected);
    let recorded = conflicts(&mut conn).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert!(recorded[0].loser_change_stays, "{recorded:?}");
    drop(conn);
    assert_eq!(a.synced_state().await, b.synced_state().await);
}

#[tokio::test]
async fn replaying_a_batch_changes_nothing() {
    let (a, b, _task, set) = two_devices_with_a_proposal().await;
    a.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(1))
        .await
        .unwrap();
    let batch = a.export().await;
    b.import(&batch).await.unwrap();
    let before = b.fingerprint().await;
    let replay = b.import(&batch).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(b.fingerprint().await, before);

    // The same content under a new batch id merges to nothing either.
    let state = b.synced_state().await;
    let mut again = batch.clone();
    again.batch_id = Uuid::new_v4();
    let report = b.import(&again).await.unwrap();
    assert!(!report.replayed);
    assert_eq!(
        (
            report.change_sets_inserted + report.change_sets_updated,
            report.decisions_inserted + report.audit_records_inserted + report.entities_written,
            report.conflicts.len()
        ),
        (0, 0, 0)
    );
    assert_eq!(b.synced_state().await, state);

    let mut conn = b.store.read_connection().await.unwrap();
    let peers = assent_store::sync::peers(&mut conn).await.unwrap();
    assert_eq!(peers.len(), 1);
    assert_eq!(
        (
            peers[0].host_id.as_str(),
            peers[0].last_batch_id,
            peers[0].batches_merged
        ),
        ("device-a", again.batch_id, 3),
        "the proposal, the first batch and the new id; not the replay"
    );
}

#[tokio::test]
async fn a_bad_batch_is_refused_and_changes_nothing() {
    let (a, _b, _task, set) = two_devices_with_a_proposal().await;
    a.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(1))
        .await
        .unwrap();
    let fresh = TestApp::device("device-c").await;
    let before = fresh.fingerprint().await;

    // Fails in the planner: a decision about an item the set does not have.
    let mut dangling = a.export().await;
    dangling.state.decisions[0].decision.item_index = 5;
    let err = fresh.import(&dangling).await.unwrap_err();
    assert!(matches!(err, StoreError::Sync(_)), "{err}");
    assert!(err.to_string().contains("has only 1 item(s)"), "{err}");

    // Fails halfway through execution: the set is written before the task is refused.
    let mut invalid = a.export().await;
    invalid.state.entities[0].state["status"] = json!("NOPE");
    let err = fresh.import(&invalid).await.unwrap_err();
    assert!(matches!(err, StoreError::HostEntity(_)), "{err}");

    // From a device claiming this device's own host id.
    let mut mine = a.export().await;
    mine.from_host = "device-c".into();
    let err = fresh.import(&mine).await.unwrap_err();
    assert!(
        err.to_string().contains("this device's own host id"),
        "{err}"
    );

    assert_eq!(fresh.fingerprint().await, before);
}

#[derive(Debug, Clone)]
enum Step {
    /// A wake proposing a priority and an estimate on device B (or A).
    Propose { on_b: bool, priority: u8 },
    /// A person decides item `index` of the `set`-th proposal on device B (or A).
    Decide {
        on_b: bool,
        set: usize,
        index: usize,
        verdict: Verdict,
        minute: i64,
    },
    /// One direction of a sync round.
    Send { to_b: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (any::<bool>(), 0u8..4).prop_map(|(on_b, priority)| Step::Propose { on_b, priority }),
        2 => (
            any::<bool>(),
            0usize..3,
            0usize..2,
            prop::sample::select(vec![Verdict::Confirmed, Verdict::Rejected, Verdict::Deferred]),
            0i64..60
        )
            .prop_map(|(on_b, set, index, verdict, minute)| Step::Decide {
                on_b,
                set,
                index,
                verdict,
                minute
            }),
        2 => any::<bool>().prop_map(|to_b| Step::Send { to_b }),
    ]
}

async fn run_steps(steps: &[Step]) -> (TestApp, TestApp) {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let task = a.scene().await;
    b.agent("agent-1", &["work"]).await;
    a.send_to(&b).await;
    let mut sets = Vec::new();
    for step in steps {
        match *step {
            Step::Propose { on_b, priority } => {
                let device = if on_b { &b } else { &a };
                let calls = [
                    (
                        "update_task_priority",
                        json!({"priority": format!("P{priority}")}),
                    ),
                    (
                        "update_task_estimate",
                        json!({"minutes": 30 + u32::from(priority)}),
                    ),
                ];
                if let Some(set) = device.wake(&task, &calls).await.change_set {
                    sets.push(set.id);
                }
            }
            Step::Decide {
                on_b,
                set,
                index,
                verdict,
                minute,
            } => {
                let Some(&set) = sets.get(set) else { continue };
                let device = if on_b { &b } else { &a };
                let service = device.engine.confirmations();
                // Refusals (unknown set here, already decided) are expected.
                let _ = match verdict {
                    Verdict::Confirmed => service
                        .confirm_item(ItemRef::new(set, index), minutes(minute))
                        .await
                        .map(|_| ()),
                    Verdict::Rejected => service
                        .reject_item(ItemRef::new(set, index), None, minutes(minute))
                        .await
                        .map(|_| ()),
                    _ => service
                        .defer_item(ItemRef::new(set, index), minutes(minute))
                        .await
                        .map(|_| ()),
                };
            }
            Step::Send { to_b } => {
                if to_b {
                    a.send_to(&b).await;
                } else {
                    b.send_to(&a).await;
                }
            }
        }
    }
    (a, b)
}

/// Both devices agree on when a set was resolved even when its decisions were made out
/// of time order (clocks differ between devices and can step back): found by the
/// property below.
#[tokio::test]
async fn a_set_resolved_by_decisions_out_of_time_order_gets_one_resolution_time() {
    let decide = |index, minute| Step::Decide {
        on_b: true,
        set: 1,
        index,
        verdict: Verdict::Confirmed,
        minute,
    };
    let steps = [
        Step::Propose {
            on_b: false,
            priority: 0,
        },
        Step::Propose {
            on_b: true,
            priority: 2,
        },
        decide(0, 26),
        decide(1, 0),
    ];
    let (a, b) = run_steps(&steps).await;
    a.send_to(&b).await;
    b.send_to(&a).await;
    assert_eq!(a.synced_state().await, b.synced_state().await);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Whatever each device does locally and however sync rounds interleave with it:
    /// after one more round both devices hold the same change sets, decisions,
    /// conflicts, audit trail and task, and every decided item has one decision in force.
    #[test]
    fn any_interleaving_ends_identical_on_both_devices(steps in prop::collection::vec(step(), 1..14)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (a, b) = run_steps(&steps).await;
            a.send_to(&b).await;
            b.send_to(&a).await;
            assert_eq!(a.synced_state().await, b.synced_state().await);
            let mut conn = a.store.read_connection().await.unwrap();
            let in_force: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM decisions WHERE verdict IN ('confirmed', 'rejected', 'retracted')",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            let decided: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM change_items WHERE status IN ('confirmed', 'rejected', 'retracted')",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            assert_eq!(in_force, decided);
        });
    }
}

/// What a batch is refused for, as strictly as the local writes it stands for: each
/// case is an honest batch (device A confirmed its proposal) changed in one way. Every
/// refusal names what is wrong and where, and changes nothing on the receiver.
#[tokio::test]
async fn an_import_is_checked_as_strictly_as_the_local_writes_it_stands_for() {
    let (a, b, _task, set) = two_devices_with_a_proposal().await;
    let proposal = a.export().await;
    a.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), minutes(1))
        .await
        .expect("A confirms");
    let honest = a.export().await;
    type Change = fn(&mut assent_sync::SyncBatch);
    let cases: [(&str, Change, &str); 7] = [
        (
            "a 10,000-item set",
            |batch| {
                let mut set = batch.state.change_sets[0].clone();
                set.id = Uuid::from_u128(1);
                set.items = vec![set.items[0].clone(); 10_000];
                set.items[0].status = ChangeItemStatus::Pending;
                batch.state.change_sets.push(set);
            },
            "has 10000 items; a change set holds at most 25",
        ),
        (
            "a set on a task that does not exist",
            |batch| {
                let mut set = batch.state.change_sets[0].clone();
                set.id = Uuid::from_u128(2);
                set.target_id = "no-such-task".into();
                set.items[0].status = ChangeItemStatus::Pending;
                batch.state.change_sets.push(set);
            },
            "is about task \"no-such-task\", which neither this device nor the batch has",
        ),
        (
            "an item confirmed with no decision",
            |batch| batch.state.decisions.clear(),
            "item 0 of change set",
        ),
        (
            "a task whose title and category changed with no audit record",
            |batch| {
                let task = &mut batch.state.entities[0];
                task.state["title"] = json!("Pay the invoice to account 666");
                task.state["category"] = json!("finance");
                task.vector_clock.tick("device-a");
            },
            "which no audit record of that host accounts for",
        ),
        (
            "the same, with a forged audit record for the write",
            |batch| {
                let task = &mut batch.state.entities[0];
                task.state["category"] = json!("finance");
                task.vector_clock.tick("device-a");
                let clock = task.vector_clock.clone();
                let mut forged = batch.state.audit_records.last().cloned().expect("a record");
                forged.origin_id += 100;
                forged.record.kind = AuditKind::Result;
                forged.record.success = Some(true);
                forged.record.vector_clock = Some(clock);
                batch.state.audit_records.push(forged);
            },
            "a task's category never changes",
        ),
        (
            "a clock entry at u64::MAX for the receiving device",
            |batch| {
                batch.state.decisions[0].decision.vector_clock =
                    [("device-b".to_owned(), u64::MAX)].into_iter().collect();
            },
            "vector clock entry \"device-b\" = 18446744073709551615",
        ),
        (
            "a decision dated year 0001",
            |batch| {
                batch.state.decisions[0].decision.created_at =
                    time::macros::datetime!(0001-01-01 00:00 UTC);
            },
            "has createdAt 0001-01-01T00:00:00Z: it is before 2000-01-01T00:00:00Z",
        ),
    ];
    let mut accepted = Vec::new();
    for (case, change, expected) in cases {
        let mut batch = honest.clone();
        batch.batch_id = Uuid::new_v4();
        change(&mut batch);
        // Each case on a receiver of its own, so that one accepted batch cannot make
        // the next one fail for another reason.
        let receiver = TestApp::device("device-b").await;
        receiver.agent("agent-1", &["work"]).await;
        receiver
            .import(&proposal)
            .await
            .expect("the proposal merges");
        let before = receiver.fingerprint().await;
        match receiver.import(&batch).await {
            Ok(_) => accepted.push(case),
            Err(error) => {
                assert!(error.to_string().contains(expected), "{case}: {error}");
                assert_eq!(
                    receiver.fingerprint().await,
                    before,
                    "{case} changed nothing"
                );
            }
        }
    }
    assert_eq!(
        accepted,
        Vec::<&str>::new(),
        "batches that should be refused"
    );
    // The honest batch still merges, and every import is on record.
    b.import(&honest).await.expect("the honest batch merges");
    b.import(&honest).await.expect("and again, as a replay");
    let mut conn = b.store.read_connection().await.unwrap();
    let log = assent_store::sync::imports(&mut conn, 10).await.unwrap();
    let outcomes: Vec<_> = log.iter().map(|r| (r.batch_id, r.outcome)).collect();
    use assent_store::sync::ImportOutcome::{Merged, Replayed};
    assert_eq!(
        outcomes[..2],
        [(honest.batch_id, Replayed), (honest.batch_id, Merged)]
    );
    assert!(
        log.iter()
            .all(|r| r.from_host == "device-a" && r.imported_at == NOW)
    );
}

/// A refused batch leaves its refusal in the imports' log (written apart, after the
/// rollback), naming the batch, its sender and why.
#[tokio::test]
async fn a_refused_import_is_recorded_and_nothing_else() {
    let (a, b, _task, _set) = two_devices_with_a_proposal().await;
    let mut batch = a.export().await;
    batch.created_at = time::macros::datetime!(0001-01-01 00:00 UTC);
    let before = b.fingerprint().await;
    let error = b.import(&batch).await.expect_err("refused");
    assent_store::sync::record_refusal(&b.store, &batch, &error, NOW)
        .await
        .unwrap();
    assert_eq!(b.fingerprint().await, before);
    let mut conn = b.store.read_connection().await.unwrap();
    let log = assent_store::sync::imports(&mut conn, 10).await.unwrap();
    assert_eq!(log[0].batch_id, batch.batch_id);
    assert_eq!(log[0].outcome, assent_store::sync::ImportOutcome::Refused);
    assert!(
        log[0].detail.contains("the batch header has createdAt"),
        "{}",
        log[0].detail
    );
}

/// The sync format is a contract: a batch exported by the release before these checks
/// (`assent sync export` of 0.1.0 at commit 1823a0d: a task created, a wake of four
/// proposals confirmed, edited, rejected and deferred, a second wake pending) still
/// merges whole on a fresh device, and a second time as a replay.
#[tokio::test]
async fn a_batch_exported_by_the_previous_release_still_imports() {
    let text = include_str!("../fixtures/sync-batch-format1-release-0.1.0.json");
    let batch: assent_sync::SyncBatch = serde_json::from_str(text).expect("format 1 parses");
    let fresh = TestApp::device("device-fresh").await;
    let report = fresh.import(&batch).await.expect("it merges");
    assert_eq!(
        (
            report.change_sets_inserted,
            report.decisions_inserted,
            report.audit_records_inserted,
            report.entities_written,
            report.conflicts.len()
        ),
        (2, 4, 4, 1, 0),
        "{report:?}"
    );
    assert!(fresh.import(&batch).await.expect("a replay").replayed);
    let task = fresh.load("b9400a77-7c9a-4e09-b919-c23e92c45029").await;
    assert_eq!(task.title, "Q1 financial report");
    assert_eq!(task.priority.as_deref(), Some("P0"));
}
