//! A wake end to end: routing, persistence, immediate execution, redundancy.

use assent_domain::ChangeSetStatus;
use assent_store::{audit, change_sets};
use assent_tests::{NOW, TestApp};
use serde_json::json;

#[tokio::test]
async fn a_wake_queues_deferred_runs_immediate_and_answers_every_call() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let outcome = app
        .wake(
            &task,
            &[
                ("set_task_status", json!({"status": "GROOMED"})),
                ("set_task_language", json!({"languageCode": "en"})),
                ("update_report", json!({"markdown": "# Notes"})),
                (
                    "add_multiple_checklist_items",
                    json!({"items": [{"title": "Design mockup"}, {"title": 5}, "Write tests"]}),
                ),
                (
                    "update_checklist_items",
                    json!({"items": [{"id": "nope", "isChecked": true}]}),
                ),
                ("update_task_estimate", json!({"minutes": "120"})),
                ("frobnicate", json!({})),
            ],
        )
        .await;
    let replies: Vec<&str> = outcome
        .responses
        .iter()
        .map(|r| r.content.as_str())
        .collect();
    assert_eq!(replies[0], "Proposal queued for user review.");
    assert_eq!(replies[1], "Language set to en.");
    assert_eq!(replies[2], "Report updated.");
    assert_eq!(
        replies[3],
        "Proposal queued for user review (2 item(s) queued).\n1 malformed item(s) skipped."
    );
    assert!(
        replies[4].contains("do not exist: \"nope\""),
        "{}",
        replies[4]
    );
    assert_eq!(replies[5], "Skipped: estimate is already 120 minutes.");
    assert_eq!(
        replies[6],
        "Error: unknown tool \"frobnicate\". Nothing was queued."
    );
    let ids: Vec<&str> = outcome
        .responses
        .iter()
        .map(|r| r.tool_call_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "call_0", "call_1", "call_2", "call_3", "call_4", "call_5", "call_6"
        ]
    );

    let set = outcome.change_set.expect("a set was queued");
    assert_eq!(set.items.len(), 3);
    assert_eq!(set.items[0].before, Some(json!("OPEN")));
    let mut conn = app.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set.id).await.unwrap();
    assert_eq!(stored, set, "what the wake returned is what was stored");
    assert_eq!(stored.status, ChangeSetStatus::Pending);

    // The immediate call went through the audited executor.
    assert_eq!(app.load(&task).await.language.as_deref(), Some("en"));
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task.clone())),
        100,
    )
    .await
    .unwrap();
    let kinds: Vec<_> = trail
        .iter()
        .map(|r| (r.tool_name.as_str(), r.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("set_task_language", "action"),
            ("set_task_language", "result")
        ]
    );
    assert_eq!(trail[0].operation_id, trail[1].operation_id);
    assert!(
        trail[1].vector_clock.is_some(),
        "the mutated task's clock is captured"
    );
}

#[tokio::test]
async fn a_wake_with_nothing_deferred_stores_no_set_and_duplicates_are_dropped() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let none = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P1"}))],
        )
        .await;
    assert_eq!(none.change_set, None);
    assert_eq!(
        none.responses[0].content,
        "Skipped: priority is already P1."
    );

    let first = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P0"}))],
        )
        .await;
    assert!(first.change_set.is_some());
    let again = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P0"}))],
        )
        .await;
    assert_eq!(
        again.change_set, None,
        "identical to an item still pending in an earlier set"
    );
    assert_eq!(
        again.responses[0].content,
        assent_changeset::reply::DUPLICATE
    );
}

#[tokio::test]
async fn wake_refuses_unknown_agent_or_task_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let before = app.fingerprint().await;
    let err = app.wake_calls("no-such-task", vec![]).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown task \"no-such-task\"");
    app.agent("agent-2", &["work"]).await;
    let mut wake = app.engine.wakes();
    let _ = &mut wake;
    assert_eq!(
        app.fingerprint()
            .await
            .lines()
            .filter(|l| !l.starts_with("agents:"))
            .collect::<Vec<_>>(),
        before
            .lines()
            .filter(|l| !l.starts_with("agents:"))
            .collect::<Vec<_>>()
    );
    let mut tx = app.store.begin_write().await.unwrap();
    sqlx::query("DELETE FROM agents WHERE id = 'agent-1'")
        .execute(tx.connection())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let before = app.fingerprint().await;
    let err = app.wake_calls(&task, vec![]).await.unwrap_err();
    assert!(
        err.to_string().starts_with("unknown agent \"agent-1\""),
        "{err}"
    );
    assert_eq!(app.fingerprint().await, before);
    let _ = NOW;
}

#[tokio::test]
async fn a_denied_category_is_told_to_the_agent_and_nothing_is_queued() {
    let app = TestApp::spawn().await;
    app.agent("agent-1", &["work"]).await;
    let home = app
        .task(assent_journal_host::NewTask {
            title: "Water plants".into(),
            category: Some("home".into()),
            ..Default::default()
        })
        .await;
    let outcome = app
        .wake(
            &home,
            &[
                ("set_task_title", json!({"title": "x"})),
                ("set_task_language", json!({"languageCode": "de"})),
            ],
        )
        .await;
    assert_eq!(outcome.change_set, None);
    for response in &outcome.responses {
        assert_eq!(
            response.content,
            "Denied by policy: Category home not in allowed set. Nothing was queued or executed."
        );
    }
    assert_eq!(app.load(&home).await.language, None);
}

#[tokio::test]
async fn a_retried_wake_applies_nothing_twice() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let calls = assent_changeset::parse_tool_calls(&json!([
        {"type": "tool_use", "id": "t1", "name": "record_observations", "input": {"observations": ["User prefers P1"]}},
        {"type": "tool_use", "id": "t2", "name": "set_task_language", "input": {"languageCode": "de"}},
        {"type": "tool_use", "id": "t3", "name": "set_task_title", "input": {"title": "Login fix"}}
    ]))
    .unwrap();
    let wakes = app.engine.wakes();
    let wake = || {
        wakes.wake(
            assent_confirm::WakeRequest::new(
                "agent-1",
                assent_journal_host::task_target(&task),
                "run-fixed",
                calls.clone(),
            ),
            NOW,
        )
    };
    let first = wake().await.unwrap();
    let second = wake().await.unwrap();
    assert_eq!(first.responses[0].content, second.responses[0].content);
    assert_eq!(first.responses[1].content, second.responses[1].content);
    assert_eq!(
        second.responses[2].content,
        assent_changeset::reply::DUPLICATE
    );
    assert!(second.change_set.is_none());
    let mut conn = app.store.read_connection().await.unwrap();
    let observations: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agent_observations")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(observations, 1);
    let results: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_records WHERE kind = 'result' AND detail LIKE 'already applied:%'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        results, 1,
        "the immediate call was recognised by its operation id"
    );
}
