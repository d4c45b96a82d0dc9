//! The hold window (issue 28): a confirmed call of a held tool waits out its window as a
//! `scheduled` job, cancellable until then; a cancel ends the item rejected and nothing
//! runs, an uncancelled one runs once after the window; of a cancel and the claim at
//! the window's end exactly one wins; a target changed during the window sends the item
//! back to pending, stale. On SQLite and PostgreSQL.

use assent_confirm::ItemRef;
use assent_confirm::{ConflictKind, ExecutionOutcome};
use assent_domain::{ChangeItemStatus, Verdict};
use assent_store::jobs::{self, Job, JobStatus};
use assent_store::{agents, change_sets, decisions};
use assent_tests::{TestApp, backends};
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const HOLD: Duration = Duration::seconds(30);

/// The scene with `update_task_priority` held for [`HOLD`], and a proposal of `to`.
async fn held_proposal(app: &TestApp, to: &str) -> (String, Uuid) {
    let task = app.scene().await;
    let mut conn = app.store.read_connection().await.unwrap();
    let seconds = HOLD.whole_seconds() as u32;
    let t0 = OffsetDateTime::now_utc();
    agents::set_hold(&mut conn, "agent-1", "update_task_priority", seconds, t0)
        .await
        .unwrap()
        .expect("agent-1 exists");
    drop(conn);
    let set = propose(app, &task, to).await;
    (task, set)
}

async fn propose(app: &TestApp, task: &str, to: &str) -> Uuid {
    app.wake(task, &[("update_task_priority", json!({"priority": to}))])
        .await
        .change_set
        .expect("queued")
        .id
}

/// Confirms item 0 of `set` at `at`: the held job's id.
async fn confirm_held(app: &TestApp, set: Uuid, at: OffsetDateTime) -> Uuid {
    let outcome = app
        .engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), at)
        .await
        .unwrap();
    match outcome.execution {
        ExecutionOutcome::Scheduled {
            job_id, not_before, ..
        } => {
            assert_eq!(not_before, at + HOLD);
            job_id
        }
        other => panic!("expected a held job, got {other:?}"),
    }
}

async fn job(app: &TestApp, id: Uuid) -> Job {
    let mut conn = app.store.read_connection().await.unwrap();
    jobs::load(&mut conn, id).await.unwrap().expect("job")
}

async fn item_status(app: &TestApp, set: Uuid) -> ChangeItemStatus {
    let mut conn = app.store.read_connection().await.unwrap();
    change_sets::require(&mut conn, set).await.unwrap().items[0].status
}

async fn final_decisions(app: &TestApp, set: Uuid) -> Vec<(Verdict, Option<String>)> {
    let mut conn = app.store.read_connection().await.unwrap();
    decisions::for_change_set(&mut conn, set)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.verdict, d.reason))
        .collect()
}

#[tokio::test]
async fn a_held_confirmation_cancelled_in_its_window_never_runs_and_ends_rejected() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let (task, set) = held_proposal(&app, "P0").await;
        let t0 = OffsetDateTime::now_utc();
        let job_id = confirm_held(&app, set, t0).await;

        let held = job(&app, job_id).await;
        assert!(held.scheduled(), "{held:?}");
        assert_eq!(held.to_json()["status"], "scheduled");
        assert!(held.to_json()["notBefore"].is_string());
        assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);
        assert!(
            final_decisions(&app, set).await.is_empty(),
            "no decision before the window ends"
        );
        // Nothing runs inside the window, and the item is not decided twice.
        let run = app.engine.run_due_jobs(t0 + Duration::seconds(5)).await;
        assert_eq!(run.unwrap().claimed, 0);
        let again = app
            .engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), t0)
            .await;
        assert!(
            matches!(&again, Err(e) if e.conflict_kind() == Some(ConflictKind::Held)),
            "{again:?}"
        );
        let reject = app
            .engine
            .confirmations()
            .reject_item(ItemRef::new(set, 0), Some("no".into()), t0)
            .await;
        assert!(
            matches!(&reject, Err(e) if e.conflict_kind() == Some(ConflictKind::Held)),
            "{reject:?}"
        );

        let cancelled = app
            .engine
            .cancel_job(job_id, t0 + Duration::seconds(10))
            .await
            .unwrap();
        assert_eq!(cancelled.status, JobStatus::Retracted);
        assert_eq!(item_status(&app, set).await, ChangeItemStatus::Rejected);
        assert_eq!(
            final_decisions(&app, set).await,
            [(Verdict::Rejected, Some(jobs::CANCELLED_IN_HOLD.to_owned()))]
        );
        let run = app.engine.run_due_jobs(t0 + HOLD * 2).await.unwrap();
        assert_eq!(run.claimed, 0, "a cancelled job never runs");
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P1"));
        let twice = app.engine.cancel_job(job_id, t0 + HOLD * 2).await;
        assert!(
            matches!(&twice, Err(e) if e.conflict_kind() == Some(ConflictKind::HoldEnded)),
            "{twice:?}"
        );
    }
}

#[tokio::test]
async fn a_held_confirmation_not_cancelled_runs_once_after_its_window() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let (task, set) = held_proposal(&app, "P0").await;
        let t0 = OffsetDateTime::now_utc();
        let job_id = confirm_held(&app, set, t0).await;

        let run = app.engine.run_due_jobs(t0 + HOLD + Duration::SECOND).await;
        assert_eq!(run.unwrap().applied, 1);
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));
        assert_eq!(item_status(&app, set).await, ChangeItemStatus::Confirmed);
        assert_eq!(
            final_decisions(&app, set).await,
            [(Verdict::Confirmed, None)]
        );
        assert_eq!(job(&app, job_id).await.status, JobStatus::Applied);

        let late = app.engine.cancel_job(job_id, t0 + HOLD * 2).await;
        assert!(
            matches!(&late, Err(e) if e.conflict_kind() == Some(ConflictKind::HoldEnded)),
            "{late:?}"
        );
        let run = app.engine.run_due_jobs(t0 + HOLD * 3).await.unwrap();
        assert_eq!(run.claimed, 0, "it ran once");
    }
}

#[tokio::test]
async fn of_a_cancel_and_the_end_of_the_window_exactly_one_wins() {
    for backend in backends() {
        for _ in 0..5 {
            let app = TestApp::on(&backend).await;
            let (task, set) = held_proposal(&app, "P0").await;
            let t0 = OffsetDateTime::now_utc();
            let job_id = confirm_held(&app, set, t0).await;
            let after = t0 + HOLD + Duration::SECOND;
            let (run, cancel) = tokio::join!(
                app.engine.run_due_jobs(after),
                app.engine.cancel_job(job_id, after)
            );
            let ran = run.unwrap().applied == 1;
            let cancelled = cancel.is_ok();
            assert!(ran != cancelled, "ran {ran}, cancelled {cancelled}");
            let priority = app.load(&task).await.priority;
            assert_eq!(priority.as_deref(), Some(if ran { "P0" } else { "P1" }));
            let decided = final_decisions(&app, set).await;
            assert_eq!(decided.len(), 1, "one final decision: {decided:?}");
            let expected = if ran {
                Verdict::Confirmed
            } else {
                Verdict::Rejected
            };
            assert_eq!(decided[0].0, expected);
        }
    }
}

#[tokio::test]
async fn a_target_changed_during_the_window_sends_the_item_back_to_pending() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let (task, set) = held_proposal(&app, "P0").await;
        let t0 = OffsetDateTime::now_utc();
        let job_id = confirm_held(&app, set, t0).await;
        // Meanwhile another change, itself held, lands on the same field.
        let other = propose(&app, &task, "P3").await;
        let other_job = confirm_held(&app, other, t0 - Duration::minutes(1)).await;
        let run = app
            .engine
            .run_due_jobs(t0 - Duration::minutes(1) + HOLD)
            .await;
        assert_eq!(run.unwrap().applied, 1);
        assert_eq!(job(&app, other_job).await.status, JobStatus::Applied);
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P3"));

        let run = app.engine.run_due_jobs(t0 + HOLD).await.unwrap();
        assert_eq!((run.applied, run.stale), (0, 1));
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P3"));
        assert_eq!(job(&app, job_id).await.status, JobStatus::Retracted);
        let mut conn = app.store.read_connection().await.unwrap();
        let item = change_sets::require(&mut conn, set)
            .await
            .unwrap()
            .items
            .remove(0);
        drop(conn);
        assert_eq!(item.status, ChangeItemStatus::Pending, "back for review");
        assert_eq!(item.before, Some(json!("P3")), "refreshed");
        assert!(final_decisions(&app, set).await.is_empty());

        // Confirmed again against the target as it is now: held again, then applied.
        let t1 = t0 + HOLD * 2;
        let again = confirm_held(&app, set, t1).await;
        assert_eq!(again, job_id, "the item's one job row is reused");
        let run = app.engine.run_due_jobs(t1 + HOLD).await.unwrap();
        assert_eq!(run.applied, 1);
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));
        assert_eq!(
            final_decisions(&app, set).await,
            [(Verdict::Confirmed, None)]
        );
    }
}
