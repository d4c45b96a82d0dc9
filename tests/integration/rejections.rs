//! Remembered rejections on every backend (issue 53, points 5 and 6): a call refused
//! again is an audit record naming the rejection, listed, forgotten and read back
//! through the engine; the edited confirmations the audit trail's views name.

use assent_confirm::{ItemRef, WakeRequest};
use assent_tests::{NOW, TestApp, TestBackend, assert_proven, backends, tool_calls};
use serde_json::json;
use time::Duration;

async fn refused_again_until_forgotten(backend: &TestBackend) {
    let app = TestApp::on(backend).await;
    let task = app.scene().await;
    let call = [("update_task_priority", json!({"priority": "P0"}))];
    let set = app.wake(&task, &call).await.change_set.expect("queued");
    let rejected = app
        .engine
        .confirmations()
        .by("alice")
        .reject_item(ItemRef::new(set.id, 0), Some("no".into()), NOW)
        .await
        .expect("rejected");

    let again = app.wake(&task, &call).await;
    assert!(again.change_set.is_none(), "refused, not queued");
    assert!(
        again.responses[0]
            .content
            .contains("rejected this exact proposal recently"),
        "{:?}",
        again.responses
    );
    let remembered = app
        .engine
        .remembered_rejections(Some("agent-1"), NOW)
        .await
        .expect("listed");
    assert_eq!(remembered.len(), 1);
    assert_eq!(remembered[0].id, rejected.id);
    let refused = app
        .engine
        .refused_again(Some("agent-1"), NOW - Duration::days(1), 10)
        .await
        .expect("read");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        refused[0].record.refused_by,
        Some(json!({"rejectedBefore": rejected.id.to_string()}))
    );
    assert_eq!(
        refused[0].rejection.as_ref().map(|d| d.id),
        Some(rejected.id)
    );
    let nobody = app
        .engine
        .refused_again(Some("agent-2"), NOW - Duration::days(1), 10)
        .await
        .expect("read");
    assert!(nobody.is_empty());
    // A retried wake (the same run, so the same operation) puts the refusal on the
    // record once, as a policy refusal is.
    for _ in 0..2 {
        let request = WakeRequest::new(
            "agent-1",
            assent_journal_host::task_target(task.as_str()),
            "a-retried-run",
            tool_calls(&call),
        );
        let retried = app.engine.wakes().wake(request, NOW).await.expect("woke");
        assert!(retried.change_set.is_none(), "refused, not queued");
    }
    let refused = app
        .engine
        .refused_again(Some("agent-1"), NOW - Duration::days(1), 10)
        .await
        .expect("read");
    assert_eq!(
        refused.len(),
        2,
        "{backend:?}: once more, not twice: {refused:?}"
    );
    assert_proven(&app.store, "a call refused again").await;

    // Forgotten by its id prefix: asked again.
    let prefix = &rejected.id.to_string()[..8];
    let forgotten = app
        .engine
        .admin()
        .forget_rejection(prefix, Some("bob"), NOW)
        .await
        .expect("forgotten");
    assert_eq!(forgotten.id, rejected.id);
    assert!(
        app.engine
            .remembered_rejections(None, NOW)
            .await
            .expect("listed")
            .is_empty()
    );
    let asked = app
        .wake(&task, &call)
        .await
        .change_set
        .expect("asked again");

    // A confirmation with edited arguments is found for the audit trail's views.
    app.engine
        .confirmations()
        .by("alice")
        .edit_and_confirm(ItemRef::new(asked.id, 0), json!({"priority": "P1"}), NOW)
        .await
        .expect("confirmed with edits");
    let edited = app.engine.edited_confirmations().await.expect("read");
    assert_eq!(edited.len(), 1);
    assert_eq!(edited[0].0, asked.run_key);
    assert_eq!(edited[0].1.edited_args, Some(json!({"priority": "P1"})));

    // The window: zero forgets nothing but remembers nothing either.
    let changed = app
        .engine
        .admin()
        .set_rejection_window("agent-1", Duration::ZERO, Some("alice"), NOW)
        .await
        .expect("set");
    assert!(changed);
    assert_eq!(
        app.engine
            .rejection_memory("agent-1")
            .await
            .expect("read")
            .window(),
        Duration::ZERO
    );
    assert_proven(&app.store, "rejections forgotten and a window set").await;

    // A memory changed behind the engine's back (the window widened, the forgotten
    // rejection remembered again) no longer matches its entry: the proof says so.
    let mut tx = app.store.begin_write().await.expect("a transaction");
    sqlx::query("UPDATE agents SET rejection_memory = $1 WHERE id = $2")
        .bind(r#"{"windowSeconds": 31536000}"#)
        .bind("agent-1")
        .execute(&mut *tx.connection())
        .await
        .expect("tampered");
    tx.commit().await.expect("committed");
    let mut conn = app.store.read_connection().await.expect("a connection");
    let report =
        assent_store::proof::verify(&mut conn, &assent_store::proof::VerifyOptions::default())
            .await
            .expect("the proof runs");
    assert!(
        report.violations.iter().any(|v| {
            v.rule == assent_store::proof::ProofRule::RowMatchesEntry
                && v.expected.contains("agent-1's rules")
        }),
        "{backend:?}: {:?}",
        report.violations
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_again_is_recorded_and_forgotten_on_every_backend() {
    for backend in backends() {
        refused_again_until_forgotten(&backend).await;
    }
}
