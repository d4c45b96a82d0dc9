//! Exactly once under concurrency: many confirmations of one item, one effect.

use assent_confirm::ItemRef;
use assent_confirm::{ConfirmError, ConfirmationService, ConflictKind};
use assent_domain::Uuid;
use assent_store::decisions;
use assent_tests::{NOW, TestApp};
use serde_json::json;
use std::sync::Arc;

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    let mut conn = app.store.read_connection().await.unwrap();
    sqlx::query_scalar(sql).fetch_one(&mut *conn).await.unwrap()
}

pub(crate) async fn assert_applied_once(
    app: &TestApp,
    set: Uuid,
    results: Vec<Result<(), ConfirmError>>,
) {
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "exactly one confirmation wins: {results:?}");
    for err in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(
                err.conflict_kind(),
                Some(ConflictKind::AlreadyDecided | ConflictKind::ChangedConcurrently)
            ),
            "the others find it decided, got: {err}"
        );
    }
    let mut conn = app.store.read_connection().await.unwrap();
    assert_eq!(
        decisions::for_change_set(&mut conn, set)
            .await
            .unwrap()
            .len(),
        1
    );
    drop(conn);
    assert_eq!(
        count(app, "SELECT COUNT(*) FROM applied_operations").await,
        1
    );
    assert_eq!(
        count(
            app,
            "SELECT COUNT(*) FROM checklist_items WHERE title = 'Call the bank'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            app,
            "SELECT COUNT(*) FROM audit_records WHERE kind = 'result'"
        )
        .await,
        1
    );
}

/// A set with one checklist addition waiting.
pub(crate) async fn one_item_set(app: &TestApp) -> Uuid {
    let task = app.scene().await;
    app.wake(
        &task,
        &[("add_checklist_item", json!({"title": "Call the bank"}))],
    )
    .await
    .change_set
    .unwrap()
    .id
}

/// Every service confirms item 0 of `set` at the same moment.
pub(crate) async fn race(
    services: Vec<ConfirmationService>,
    set: Uuid,
) -> Vec<Result<(), ConfirmError>> {
    let barrier = Arc::new(tokio::sync::Barrier::new(services.len()));
    let handles: Vec<_> = services
        .into_iter()
        .map(|service| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                service
                    .confirm_item(ItemRef::new(set, 0), NOW)
                    .await
                    .map(|_| ())
            })
        })
        .collect();
    let mut results = Vec::new();
    for handle in handles {
        results.push(handle.await.expect("no panic"));
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_confirmations_of_one_item_apply_it_once() {
    let app = TestApp::spawn().await;
    let set = one_item_set(&app).await;
    let service = app.engine.confirmations();
    let results = race(vec![service; 16], set).await;
    assert_applied_once(&app, set, results).await;
}

/// Sixteen engines with their own connection pools on one file behave like sixteen
/// processes: SQLite's write lock, not an in-process mutex, decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_separate_stores_on_one_file_apply_it_once() {
    let app = TestApp::spawn().await;
    let set = one_item_set(&app).await;
    let services = app.separate_confirmation_services(16).await;
    let results = race(services, set).await;
    assert_applied_once(&app, set, results).await;
}
