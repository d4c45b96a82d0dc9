//! Undo as a reviewed change (issue 28): an applied item's compensation is proposed as
//! a new change set on the same target, pending for a person and run once through the
//! same path; an undo can be undone; the agent's history says "undone by the user". On
//! SQLite and PostgreSQL.

use assent_confirm::ItemRef;
use assent_confirm::{ConfirmError, ConflictKind};
use assent_store::change_sets;
use assent_tests::{TestApp, backends};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

async fn applied_priority(app: &TestApp, task: &str, to: &str) -> Uuid {
    let set = app
        .wake(task, &[("update_task_priority", json!({"priority": to}))])
        .await
        .change_set
        .expect("queued")
        .id;
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    set
}

#[tokio::test]
async fn an_applied_priority_is_undone_by_a_reviewed_set_and_the_undo_can_be_undone() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let person = app.engine.confirmations();
        let set = applied_priority(&app, &task, "P0").await;

        let undo = person.undo(ItemRef::new(set, 0), now()).await.unwrap();
        assert_eq!(undo.items.len(), 1);
        assert_eq!(undo.items[0].args, json!({"priority": "P1"}));
        assert_eq!(undo.items[0].human_summary, "Undo: Set priority to P1");
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P0"),
            "only proposed"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        let link = change_sets::undoes(&mut conn, undo.id)
            .await
            .unwrap()
            .unwrap();
        drop(conn);
        assert_eq!((link.change_set_id, link.item_index), (set, 0));

        person
            .confirm_item(ItemRef::new(undo.id, 0), now())
            .await
            .unwrap();
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P1"),
            "{backend:?}"
        );
        let history = person.history("agent-1", None, 10).await.unwrap().unwrap();
        assert!(
            history.contains("Set priority to P0 — confirmed, undone by the user"),
            "{history}"
        );

        // The undo of the undo puts P0 back, through a review again.
        let again = person.undo(ItemRef::new(undo.id, 0), now()).await.unwrap();
        assert_eq!(again.items[0].args, json!({"priority": "P0"}));
        person
            .confirm_item(ItemRef::new(again.id, 0), now())
            .await
            .unwrap();
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));
    }
}

#[tokio::test]
async fn only_an_applied_item_of_a_tool_with_a_compensation_is_undone() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let person = app.engine.confirmations();
    let pending = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P3"}))],
        )
        .await
        .change_set
        .unwrap()
        .id;
    let error = person
        .undo(ItemRef::new(pending, 0), now())
        .await
        .unwrap_err();
    assert_eq!(
        error.conflict_kind(),
        Some(ConflictKind::NotApplied),
        "{error}"
    );

    let added = app
        .wake(
            &task,
            &[("add_checklist_item", json!({"title": "Call Bob"}))],
        )
        .await
        .change_set
        .unwrap()
        .id;
    person
        .confirm_item(ItemRef::new(added, 0), now())
        .await
        .unwrap();
    let error = person
        .undo(ItemRef::new(added, 0), now())
        .await
        .unwrap_err();
    assert!(matches!(error, ConfirmError::NoCompensation(_)), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("add_checklist_item declares no compensation"),
        "{error}"
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::default())
        .await
        .unwrap();
    assert_eq!(open.len(), 1, "a refused undo proposes nothing: {open:?}");
}
