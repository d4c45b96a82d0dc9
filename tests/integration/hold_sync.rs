//! A held confirmation across devices, and who confirmed it (issue 37, defects 3 and
//! 17). Device A confirms an item of a held tool; the held job travels in sync, so
//! device B shows the item held and refuses to decide it; a cancel on A reaches B as
//! the cancel's rejection; the window's end runs it once, on A only; a decision made
//! on B while apart stops A's held job when it arrives; the decision written at the
//! window's end names who confirmed (every approver under a quorum travels with the
//! job). On SQLite and PostgreSQL.

use assent_confirm::ItemRef;
use assent_confirm::{ConflictKind, ExecutionOutcome};
use assent_domain::{ChangeItemStatus, Verdict};
use assent_store::jobs::{self, Job, JobStatus};
use assent_store::{agents, change_sets, decisions};
use assent_tests::{NOW, TestApp, backends};
use sqlx::Row;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const HOLD: Duration = Duration::seconds(30);

/// When A's person confirms: after the proposal (made at `NOW`).
fn t0() -> OffsetDateTime {
    NOW + Duration::minutes(1)
}

/// Devices A and B on `backend`, A's agent holding `update_task_priority` for
/// [`HOLD`] (B has no such rule: the job, not B's settings, must hold it there), and
/// A's proposal of P0 synced to B. Returns both, the task and the set.
async fn two_devices_with_a_held_tool(
    backend: &assent_tests::TestBackend,
) -> (TestApp, TestApp, String, Uuid) {
    let a = TestApp::device_on(backend, "device-a").await;
    let b = TestApp::device_on(backend, "device-b").await;
    a.scene().await;
    let mut conn = a.store.read_connection().await.unwrap();
    let seconds = HOLD.whole_seconds() as u32;
    agents::set_hold(&mut conn, "agent-1", "update_task_priority", seconds, NOW)
        .await
        .unwrap()
        .expect("agent-1 exists");
    drop(conn);
    let (task, set) = a.propose_and_send_to(&b).await;
    (a, b, task, set)
}

/// `who` confirms item 0 of `set` on `device` at `at`: the held job's id.
async fn confirm_held(device: &TestApp, set: Uuid, who: &str, at: OffsetDateTime) -> Uuid {
    let outcome = device
        .engine
        .confirmations()
        .by(who)
        .confirm_item(ItemRef::new(set, 0), at)
        .await
        .unwrap();
    match outcome.execution {
        ExecutionOutcome::Scheduled { job_id, .. } => job_id,
        other => panic!("expected a held job, got {other:?}"),
    }
}

async fn job(device: &TestApp, id: Uuid) -> Job {
    let mut conn = device.store.read_connection().await.unwrap();
    jobs::load(&mut conn, id).await.unwrap().expect("job")
}

async fn item_status(device: &TestApp, set: Uuid) -> ChangeItemStatus {
    let mut conn = device.store.read_connection().await.unwrap();
    change_sets::require(&mut conn, set).await.unwrap().items[0].status
}

/// The final decisions on `set` as `(verdict, reason, decided_by)`.
async fn decided(device: &TestApp, set: Uuid) -> Vec<(Verdict, Option<String>, Option<String>)> {
    let mut conn = device.store.read_connection().await.unwrap();
    let all = decisions::for_change_set(&mut conn, set).await.unwrap();
    let mut out = Vec::new();
    for d in all {
        let by: Option<String> = sqlx::query("SELECT decided_by FROM decisions WHERE id = $1")
            .bind(d.id.to_string())
            .fetch_one(&mut *conn)
            .await
            .unwrap()
            .try_get("decided_by")
            .unwrap();
        out.push((d.verdict, d.reason, by));
    }
    out
}

/// B's person tries to confirm and to reject item 0 of `set`: both refused as held.
async fn b_is_refused_as_held(b: &TestApp, set: Uuid, at: OffsetDateTime) {
    let person = b.engine.confirmations().by("bob");
    let confirm = person.confirm_item(ItemRef::new(set, 0), at).await;
    assert!(
        matches!(&confirm, Err(e) if e.conflict_kind() == Some(ConflictKind::Held)),
        "{confirm:?}"
    );
    let reject = person
        .reject_item(ItemRef::new(set, 0), Some("no".into()), at)
        .await;
    assert!(
        matches!(&reject, Err(e) if e.conflict_kind() == Some(ConflictKind::Held)),
        "{reject:?}"
    );
    let all = person.confirm_all(set, at).await.unwrap();
    assert!(
        all.items
            .iter()
            .all(|item| matches!(item.result, assent_confirm::ItemResult::Skipped(_))),
        "confirm-all skips a held item: {:?}",
        all.items
    );
    assert_eq!(item_status(b, set).await, ChangeItemStatus::Pending);
}

#[tokio::test]
async fn a_held_confirmation_travels_b_refuses_it_and_only_a_runs_it_once() {
    for backend in backends() {
        let (a, b, task, set) = two_devices_with_a_held_tool(&backend).await;
        let job_id = confirm_held(&a, set, "alice", t0()).await;
        a.send_to(&b).await;

        // B shows the item held, with the window and who confirmed, as A's job.
        let copy = job(&b, job_id).await;
        assert!(copy.scheduled(), "{copy:?}");
        assert_eq!(copy.due_at, t0() + HOLD);
        assert_eq!(copy.owner_device.as_deref(), Some("device-a"));
        assert_eq!(copy.approved_by, ["alice"]);
        let shown = copy.execution_json();
        assert_eq!(shown["status"], "scheduled", "{shown}");
        assert_eq!(shown["ownerDevice"], "device-a", "{shown}");
        assert_eq!(shown["approvedBy"], serde_json::json!(["alice"]), "{shown}");
        b_is_refused_as_held(&b, set, t0() + Duration::seconds(5)).await;
        // B cannot cancel A's job (A runs it); it says where.
        let cancel = b.engine.cancel_job(job_id, t0()).await;
        assert!(
            matches!(&cancel, Err(e) if e.conflict_kind() == Some(ConflictKind::RunByOtherDevice)
                && e.to_string().contains("device-a")),
            "{cancel:?}"
        );
        // Nothing runs on B, not even after the window.
        let run = b.engine.run_due_jobs(t0() + HOLD * 2).await.unwrap();
        assert_eq!(run.claimed, 0, "B never claims A's job");
        assert_eq!(b.load(&task).await.priority.as_deref(), Some("P1"));

        // The window ends on A: it runs once there, and the decision names alice.
        let run = a.engine.run_due_jobs(t0() + HOLD + Duration::SECOND).await;
        assert_eq!(run.unwrap().applied, 1);
        assert_eq!(a.load(&task).await.priority.as_deref(), Some("P0"));
        assert_eq!(
            decided(&a, set).await,
            [(Verdict::Confirmed, None, Some("alice".to_owned()))]
        );

        // B learns it was decided and ran; B still runs nothing.
        let report = a.send_to(&b).await;
        assert!(report.conflicts.is_empty(), "{report:?}");
        assert_eq!(item_status(&b, set).await, ChangeItemStatus::Confirmed);
        assert_eq!(job(&b, job_id).await.status, JobStatus::Applied);
        let run = b.engine.run_due_jobs(t0() + HOLD * 3).await.unwrap();
        assert_eq!(run.claimed, 0, "B never runs it");
        assert_eq!(b.load(&task).await.priority.as_deref(), Some("P0"));
        let on_b = decided(&b, set).await;
        assert_eq!(on_b.len(), 1, "{on_b:?}");
        assert_eq!(on_b[0].0, Verdict::Confirmed);
        let again = b
            .engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), t0())
            .await;
        assert!(again.is_err(), "decided: {again:?}");

        // A round back changes nothing on A, and both agree.
        b.send_to(&a).await;
        assert_eq!(a.synced_state().await, b.synced_state().await);
        let run = a.engine.run_due_jobs(t0() + HOLD * 4).await.unwrap();
        assert_eq!(run.claimed, 0, "it ran once");
    }
}

#[tokio::test]
async fn a_cancel_on_the_confirming_device_travels_and_releases_the_item_everywhere() {
    for backend in backends() {
        let (a, b, task, set) = two_devices_with_a_held_tool(&backend).await;
        let job_id = confirm_held(&a, set, "alice", t0()).await;
        a.send_to(&b).await;
        b_is_refused_as_held(&b, set, t0() + Duration::seconds(5)).await;

        a.engine
            .cancel_job(job_id, t0() + Duration::seconds(10))
            .await
            .unwrap();
        a.send_to(&b).await;

        // The cancel arrives as what it is on A: the job retracted, and the item ended
        // rejected with the cancel's reason (no longer held anywhere).
        let copy = job(&b, job_id).await;
        assert_eq!(copy.status, JobStatus::Retracted);
        assert!(!copy.scheduled(), "{copy:?}");
        assert_eq!(item_status(&b, set).await, ChangeItemStatus::Rejected);
        let on_b = decided(&b, set).await;
        assert_eq!(on_b.len(), 1, "{on_b:?}");
        assert_eq!(
            (on_b[0].0, on_b[0].1.as_deref()),
            (Verdict::Rejected, Some(jobs::CANCELLED_IN_HOLD))
        );
        let confirm = b
            .engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), t0())
            .await;
        assert!(
            matches!(&confirm, Err(e) if e.conflict_kind() == Some(ConflictKind::AlreadyDecided)),
            "decided by the cancel, not held: {confirm:?}"
        );

        // Nothing runs on either device once the window has passed.
        for device in [&a, &b] {
            let run = device.engine.run_due_jobs(t0() + HOLD * 2).await.unwrap();
            assert_eq!(run.claimed, 0);
            assert_eq!(device.load(&task).await.priority.as_deref(), Some("P1"));
        }
    }
}

#[tokio::test]
async fn a_rejection_made_on_another_device_while_apart_stops_the_held_job_on_arrival() {
    for backend in backends() {
        let (a, b, task, set) = two_devices_with_a_held_tool(&backend).await;
        let job_id = confirm_held(&a, set, "alice", t0()).await;
        // B has not heard of the held confirmation: the item is plainly pending there.
        b.engine
            .confirmations()
            .reject_item(
                ItemRef::new(set, 0),
                Some("not now".into()),
                t0() + Duration::seconds(2),
            )
            .await
            .unwrap();

        let report = b.send_to(&a).await;
        assert_eq!(report.jobs_stopped, 1, "{report:?}");
        let stopped = job(&a, job_id).await;
        assert_eq!(stopped.status, JobStatus::Retracted, "{stopped:?}");
        assert!(
            stopped
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("while this confirmation was held")),
            "{stopped:?}"
        );
        assert_eq!(item_status(&a, set).await, ChangeItemStatus::Rejected);
        let run = a.engine.run_due_jobs(t0() + HOLD * 2).await.unwrap();
        assert_eq!(run.claimed, 0, "it never runs after the rejection");
        assert_eq!(a.load(&task).await.priority.as_deref(), Some("P1"));

        a.send_to(&b).await;
        assert_eq!(job(&b, job_id).await.status, JobStatus::Retracted);
        assert_eq!(a.synced_state().await, b.synced_state().await);
    }
}

#[tokio::test]
async fn every_approver_of_a_held_quorum_travels_with_its_job_and_the_last_decides() {
    for backend in backends() {
        let (a, b, _task, set) = two_devices_with_a_held_tool(&backend).await;
        let mut conn = a.store.read_connection().await.unwrap();
        agents::set_approvals_needed(&mut conn, "agent-1", "update_task_priority", 2, NOW)
            .await
            .unwrap()
            .expect("agent-1 exists");
        drop(conn);
        let first = a
            .engine
            .confirmations()
            .by("alice")
            .confirm_item(ItemRef::new(set, 0), t0())
            .await
            .unwrap();
        assert!(
            matches!(first.execution, ExecutionOutcome::AwaitingApprovals { .. }),
            "{first:?}"
        );
        let job_id = confirm_held(&a, set, "bob", t0() + Duration::seconds(1)).await;
        assert_eq!(job(&a, job_id).await.approved_by, ["alice", "bob"]);

        a.send_to(&b).await;
        assert_eq!(job(&b, job_id).await.approved_by, ["alice", "bob"]);
        b_is_refused_as_held(&b, set, t0() + Duration::seconds(5)).await;

        let end = t0() + Duration::seconds(1) + HOLD + Duration::SECOND;
        assert_eq!(a.engine.run_due_jobs(end).await.unwrap().applied, 1);
        assert_eq!(
            decided(&a, set).await,
            [(Verdict::Confirmed, None, Some("bob".to_owned()))]
        );
        a.send_to(&b).await;
        assert_eq!(job(&b, job_id).await.approved_by, ["alice", "bob"]);
    }
}
