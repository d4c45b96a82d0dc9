//! The stale-target guard: a proposal is applied only to the target it was proposed
//! against. A change to the fields it touches, made between the proposal and its
//! confirmation (or its job's run), refuses it and refreshes the item for a new review;
//! an unrelated change of the same target does not. On SQLite and PostgreSQL.

use assent_confirm::ConfirmError;
use assent_confirm::ItemRef;
use assent_domain::ChangeItemStatus;
use assent_store::change_sets;
use assent_store::jobs::{self, JobStatus};
use assent_tests::{TestApp, backends, book};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Proposes priority `to` on the scene's task (P1): the set's id.
async fn propose_priority(app: &TestApp, task: &str, to: &str) -> Uuid {
    app.wake(task, &[("update_task_priority", json!({"priority": to}))])
        .await
        .change_set
        .expect("queued")
        .id
}

/// Changes the task's priority meanwhile, as another decision would.
async fn meanwhile_priority(app: &TestApp, task: &str, to: &str) {
    let other = propose_priority(app, task, to).await;
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(other, 0), now())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_target_changed_before_confirmation_refuses_it_and_a_second_confirmation_applies() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let set = propose_priority(&app, &task, "P0").await;
        meanwhile_priority(&app, &task, "P3").await;

        let error = app
            .engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ConfirmError::TargetChanged { .. }),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            "target changed since proposed: priority was P1, now P3; review and confirm again"
        );
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P3"),
            "nothing ran"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        let item = change_sets::require(&mut conn, set)
            .await
            .unwrap()
            .items
            .remove(0);
        drop(conn);
        assert_eq!(item.status, ChangeItemStatus::Pending);
        assert_eq!(
            item.before,
            Some(json!("P3")),
            "refreshed to what it is now"
        );
        assert!(
            item.stale_detail
                .as_deref()
                .unwrap()
                .contains("was P1, now P3")
        );

        app.engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now())
            .await
            .unwrap();
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P0"),
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn an_unrelated_change_of_the_same_target_is_not_stale() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = propose_priority(&app, &task, "P0").await;
    let title = app
        .wake(
            &task,
            &[("set_task_title", json!({"title": "Another title"}))],
        )
        .await
        .change_set
        .unwrap()
        .id;
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(title, 0), now())
        .await
        .unwrap();
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));
}

#[tokio::test]
async fn confirm_all_confirms_the_fresh_items_and_reports_the_stale_ones() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(
            &task,
            &[
                ("update_task_priority", json!({"priority": "P0"})),
                ("set_task_title", json!({"title": "Fresh title"})),
            ],
        )
        .await
        .change_set
        .unwrap()
        .id;
    meanwhile_priority(&app, &task, "P2").await;
    let all = app
        .engine
        .confirmations()
        .confirm_all(set, now())
        .await
        .unwrap();
    let stale = all
        .items
        .iter()
        .filter(|item| {
            matches!(
                item.result,
                assent_confirm::ItemResult::Failed(ConfirmError::TargetChanged { .. })
            )
        })
        .count();
    assert_eq!(stale, 1, "{all:?}");
    let task_now = app.load(&task).await;
    assert_eq!(task_now.title, "Fresh title");
    assert_eq!(task_now.priority.as_deref(), Some("P2"));
}

#[tokio::test]
async fn a_target_changed_before_the_job_runs_retracts_it_and_nothing_runs() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let set = propose_priority(&app, &task, "P0").await;
        // Confirmed in a process without the journal: a job for the journal's worker.
        let reviewer = book::elsewhere(app.store.clone()).await;
        reviewer
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now())
            .await
            .unwrap();
        meanwhile_priority(&app, &task, "P3").await;

        let run = app.engine.run_due_jobs(now()).await.unwrap();
        assert_eq!(run.stale, 1, "{backend:?}: {run:?}");
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P3"),
            "nothing ran"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        let job = jobs::for_change_set(&mut conn, set)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(job.status, JobStatus::Retracted);
        assert!(
            job.last_error
                .as_deref()
                .unwrap()
                .contains("priority was P1, now P3")
        );
        let item = change_sets::require(&mut conn, set)
            .await
            .unwrap()
            .items
            .remove(0);
        assert!(item.stale_detail.is_some());
        assert_eq!(item.before, Some(json!("P3")));
    }
}
