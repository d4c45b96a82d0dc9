//! Properties of the engine over random sequences of decisions, against SQLite.

use assent_confirm::ItemRef;
use assent_domain::{ChangeItemStatus, ChangeSetStatus, Verdict};
use assent_store::{change_sets, decisions};
use assent_tests::{NOW, TestApp};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Step {
    Confirm(usize),
    Reject(usize),
    Defer(usize),
    ConfirmAll,
    Dismiss,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..4).prop_map(Step::Confirm),
        (0usize..4).prop_map(Step::Reject),
        (0usize..4).prop_map(Step::Defer),
        Just(Step::ConfirmAll),
        Just(Step::Dismiss),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever a person does, in any order and however often: every item gets at most
    /// one final decision, every confirmed item was applied exactly once, and the set
    /// is resolved exactly when no item is open.
    #[test]
    fn decisions_are_idempotent_and_statuses_consistent(steps in prop::collection::vec(step(), 1..10)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = TestApp::spawn().await;
            let task = app.scene().await;
            let set = app
                .wake(&task, &[("add_multiple_checklist_items", json!({"items": ["A", "B", "C"]}))])
                .await
                .change_set
                .unwrap()
                .id;
            let service = app.engine.confirmations();
            for step in &steps {
                // Refusals (conflicts, out of range) are expected; panics and partial
                // writes are not.
                let _ = match step {
                    Step::Confirm(i) => service.confirm_item(ItemRef::new(set, *i), NOW).await.map(|_| ()),
                    Step::Reject(i) => service.reject_item(ItemRef::new(set, *i), None, NOW).await.map(|_| ()),
                    Step::Defer(i) => service.defer_item(ItemRef::new(set, *i), NOW).await.map(|_| ()),
                    Step::ConfirmAll => service.confirm_all(set, NOW).await.map(|_| ()),
                    Step::Dismiss => service.dismiss(set, None, NOW).await.map(|_| ()),
                };
            }
            let mut conn = app.store.read_connection().await.unwrap();
            let stored = change_sets::require(&mut conn, set).await.unwrap();
            let history = decisions::for_change_set(&mut conn, set).await.unwrap();
            for (index, item) in stored.items.iter().enumerate() {
                let finals: Vec<_> = history.iter().filter(|d| d.item_index == index && d.verdict != Verdict::Deferred).collect();
                assert!(finals.len() <= 1, "item {index} decided twice: {finals:?}");
                assert_eq!(finals.first().map(|d| d.verdict.item_status()), item.status.is_decided().then_some(item.status));
            }
            let confirmed = stored.items.iter().filter(|i| i.status == ChangeItemStatus::Confirmed).count();
            let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM applied_operations").fetch_one(&mut *conn).await.unwrap();
            assert_eq!(applied as usize, confirmed);
            let added: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM checklist_items WHERE title IN ('A', 'B', 'C')")
                .fetch_one(&mut *conn).await.unwrap();
            assert_eq!(added as usize, confirmed);
            let open = stored.items.iter().any(|i| i.status.is_open());
            assert_eq!(stored.status == ChangeSetStatus::Resolved, !open);
        });
    }
}
