//! The sync outbox: written with its rows, replaced while unsent, claimed and retried.

use assent_confirm::ItemRef;
use assent_domain::ChangeSet;
use assent_store::change_sets;
use assent_store::outbox::{self, FailureDisposition, entity};
use assent_tests::{NOW, TestApp};
use serde_json::json;
use time::Duration;

#[tokio::test]
async fn a_rollback_leaves_no_outbox_row_behind() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(&task, &[("set_task_title", json!({"title": "X"}))])
        .await
        .change_set
        .unwrap();
    let before = app.fingerprint().await;

    let mut tx = app.store.begin_write().await.unwrap();
    let copy = ChangeSet {
        id: assent_domain::Uuid::new_v4(),
        ..set.clone()
    };
    change_sets::insert(tx.connection(), &copy, NOW)
        .await
        .unwrap();
    outbox::enqueue(
        tx.connection(),
        assent_journal_host::TASK_ENTITY,
        &task,
        &json!({"x": 1}),
        NOW,
    )
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(app.fingerprint().await, before);

    // A transaction dropped without commit (an early `?` return) is rolled back too.
    let mut tx = app.store.begin_write().await.unwrap();
    change_sets::insert(tx.connection(), &copy, NOW)
        .await
        .unwrap();
    drop(tx); // dropped without commit: rolled back
    assert_eq!(app.fingerprint().await, before);
}

#[tokio::test]
async fn every_replicated_write_is_enqueued_and_unsent_messages_are_replaced() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(
            &task,
            &[
                ("set_task_title", json!({"title": "X"})),
                ("update_task_priority", json!({"priority": "P0"})),
            ],
        )
        .await
        .change_set
        .unwrap();
    let service = app.engine.confirmations();
    service
        .confirm_item(ItemRef::new(set.id, 0), NOW)
        .await
        .unwrap();
    service
        .reject_item(ItemRef::new(set.id, 1), Some("no".into()), NOW)
        .await
        .unwrap();

    let mut conn = app.store.read_connection().await.unwrap();
    let messages = outbox::undelivered(&mut conn, 1000).await.unwrap();
    let of = |kind: &str| messages.iter().filter(|m| m.entity_type == kind).count();
    assert_eq!(
        of(entity::CHANGE_SET),
        1,
        "one unsent message per set, the latest state"
    );
    assert_eq!(of(entity::CHANGE_ITEM), 2);
    assert_eq!(of(entity::DECISION), 2);
    assert_eq!(of(entity::AUDIT_RECORD), 2);
    assert_eq!(of(assent_journal_host::TASK_ENTITY), 1);
    let set_message = messages
        .iter()
        .find(|m| m.entity_type == entity::CHANGE_SET)
        .unwrap();
    assert_eq!(set_message.payload["status"], "resolved");
    assert_eq!(set_message.payload["items"][1]["status"], "rejected");
}

#[tokio::test]
async fn claim_send_fail_retry_and_dead_letters() {
    let app = TestApp::spawn().await;
    let mut tx = app.store.begin_write().await.unwrap();
    for i in 0..3 {
        outbox::enqueue(
            tx.connection(),
            assent_journal_host::TASK_ENTITY,
            &format!("t{i}"),
            &json!({"v": i}),
            NOW,
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = app.store.begin_write().await.unwrap();
    let batch = outbox::claim_batch(tx.connection(), 2, NOW, Duration::minutes(5))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        batch
            .iter()
            .map(|m| m.entity_id.as_str())
            .collect::<Vec<_>>(),
        ["t0", "t1"]
    );
    let mut tx = app.store.begin_write().await.unwrap();
    assert!(
        outbox::claim_batch(tx.connection(), 10, NOW, Duration::minutes(5))
            .await
            .unwrap()
            .len()
            == 1,
        "claimed ones are leased"
    );
    tx.commit().await.unwrap();

    let mut tx = app.store.begin_write().await.unwrap();
    assert_eq!(
        outbox::mark_sent(tx.connection(), &[batch[0].id], NOW)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        outbox::mark_failed(tx.connection(), batch[1].id, "timeout", 2, NOW)
            .await
            .unwrap(),
        FailureDisposition::WillRetry
    );
    tx.commit().await.unwrap();

    // A newer write while t1 waits for its retry replaces the unsent payload.
    let mut tx = app.store.begin_write().await.unwrap();
    outbox::enqueue(
        tx.connection(),
        assent_journal_host::TASK_ENTITY,
        "t1",
        &json!({"v": "newer"}),
        NOW,
    )
    .await
    .unwrap();
    let retry = outbox::claim_batch(tx.connection(), 10, NOW, Duration::minutes(5))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let t1 = retry.iter().find(|m| m.entity_id == "t1").unwrap();
    assert_eq!(
        (t1.attempts, t1.payload.clone()),
        (1, json!({"v": "newer"}))
    );

    let mut tx = app.store.begin_write().await.unwrap();
    assert_eq!(
        outbox::mark_failed(tx.connection(), t1.id, "timeout", 2, NOW)
            .await
            .unwrap(),
        FailureDisposition::Dead
    );
    let later = outbox::claim_batch(
        tx.connection(),
        10,
        NOW + Duration::minutes(10),
        Duration::minutes(5),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        later
            .iter()
            .map(|m| m.entity_id.as_str())
            .collect::<Vec<_>>(),
        ["t2"],
        "an expired lease is claimable again; dead ones are not"
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let dead: Vec<_> = outbox::undelivered(&mut conn, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.status == "dead")
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("timeout"));
}
