//! A person's decisions: confirm, edit, reject, defer, confirm all, dismiss, expire,
//! history; failures and policy at confirmation time.

use assent_confirm::ExecutionOutcome;
use assent_confirm::ItemRef;
use assent_confirm::{ConfirmError, ConflictKind, Engine, ItemResult, SimpleHost, WakeRequest};
use assent_domain::{ChangeItemStatus, ChangeSetStatus, Target, Uuid, Verdict};
use assent_store::{agents, audit, change_sets, decisions, operations};
use assent_tests::{Fault, NOW, TestApp, tool_calls};
use assent_tools::{AgentPolicy, ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use time::Duration;

async fn queued(app: &TestApp, task: &str, calls: &[(&str, serde_json::Value)]) -> Uuid {
    app.wake(task, calls).await.change_set.expect("queued").id
}

#[tokio::test]
async fn confirm_applies_once_and_records_everything() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[
            ("update_task_priority", json!({"priority": "P0"})),
            ("set_task_status", json!({"status": "BLOCKED"})),
        ],
    )
    .await;
    let service = app.engine.confirmations();
    let outcome = service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    assert_eq!(outcome.message(), "Priority set to P0.");
    assert_eq!(outcome.decision.verdict, Verdict::Confirmed);
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));

    let mut conn = app.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    assert_eq!(stored.items[0].status, ChangeItemStatus::Confirmed);
    assert_eq!(stored.status, ChangeSetStatus::PartiallyResolved);
    // Ticked once by the wake that created it and once by the confirmation.
    assert_eq!(stored.vector_clock.get("device-a"), 2);
    let recorded = decisions::for_change_set(&mut conn, set).await.unwrap();
    assert_eq!(recorded.len(), 1);
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task.clone())),
        100,
    )
    .await
    .unwrap();
    assert_eq!(
        trail.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
        ["action", "result"]
    );
    assert!(
        operations::applied(&mut conn, &trail[0].operation_id)
            .await
            .unwrap()
            .is_some()
    );
    drop(conn);

    let again = service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap_err();
    assert_eq!(
        again.conflict_kind(),
        Some(ConflictKind::AlreadyDecided),
        "{again}"
    );
    assert!(again.to_string().contains("already confirmed"), "{again}");

    service
        .confirm_item(ItemRef::new(set, 1), NOW)
        .await
        .unwrap();
    let mut conn = app.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    assert_eq!(stored.status, ChangeSetStatus::Resolved);
    assert_eq!(stored.resolved_at, Some(NOW));
    assert!(
        change_sets::pending(&mut conn, &Default::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_change_already_true_at_confirmation_is_confirmed_without_a_mutation() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[("update_task_priority", json!({"priority": "P0"}))],
    )
    .await;
    let other = queued(
        &app,
        &task,
        &[("update_task_priority", json!({"priority": "p0 "}))],
    )
    .await;
    let service = app.engine.confirmations();
    service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    let clock_before = app.load(&task).await;
    let outcome = service
        .confirm_item(ItemRef::new(other, 0), NOW)
        .await
        .unwrap();
    assert_eq!(
        outcome.execution,
        ExecutionOutcome::AlreadyTrue {
            detail: "priority is already P0".into()
        }
    );
    assert_eq!(
        outcome.message(),
        "Confirmed without a change: priority is already P0."
    );
    assert_eq!(app.load(&task).await, clock_before);
}

#[tokio::test]
async fn a_failing_handler_leaves_no_decision_and_the_item_pending_and_a_retry_works() {
    for fault in [Fault::Fail, Fault::Panic] {
        let app = TestApp::with_fault("update_task_priority", fault, 1).await;
        let task = app.scene().await;
        let set = queued(
            &app,
            &task,
            &[("update_task_priority", json!({"priority": "P3"}))],
        )
        .await;
        let service = app.engine.confirmations();
        let err = service
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConfirmError::HandlerFailed { .. }),
            "{fault:?}: {err}"
        );
        assert!(
            err.to_string().ends_with("the item is still pending"),
            "{err}"
        );
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P1"),
            "the handler's write was rolled back"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        assert!(
            decisions::for_change_set(&mut conn, set)
                .await
                .unwrap()
                .is_empty()
        );
        let stored = change_sets::require(&mut conn, set).await.unwrap();
        assert_eq!(stored.items[0].status, ChangeItemStatus::Pending);
        let trail = audit::list(
            &mut conn,
            &audit::AuditFilter::Target(assent_journal_host::task_target(task.clone())),
            100,
        )
        .await
        .unwrap();
        assert_eq!(
            trail.last().unwrap().success,
            Some(false),
            "the failure is audited"
        );
        drop(conn);

        let retried = service
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        assert_eq!(retried.message(), "Priority set to P3.");
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P3"));
        assert_eq!(app.faulty_calls.load(Ordering::SeqCst), 2);
    }
}

#[tokio::test]
async fn an_operation_already_applied_is_not_applied_again() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[("add_checklist_item", json!({"title": "Call the bank"}))],
    )
    .await;
    // Simulate a crash after an outside handler applied the operation but before the
    // decision was written: the id is recorded, the item is still pending.
    let mut conn = app.store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    let op = assent_domain::OperationId::for_proposal(
        &stored.run_key,
        "add_checklist_item",
        &stored.items[0].args,
        &task,
        set,
        0,
    );
    drop(conn);
    let mut tx = app.store.begin_write().await.unwrap();
    operations::record_applied(
        tx.connection(),
        &op,
        "add_checklist_item",
        &assent_journal_host::task_target(&task),
        "Checklist item added.",
        NOW,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let outcome = app
        .engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    assert!(
        matches!(outcome.execution, ExecutionOutcome::AlreadyApplied { .. }),
        "{:?}",
        outcome.execution
    );
    assert_eq!(
        app.load(&task).await.checklist.len(),
        2,
        "not added a second time"
    );
}

#[tokio::test]
async fn a_reused_run_key_still_applies_every_confirmed_proposal() {
    // BLOCKED → OPEN → BLOCKED under one run key: the third proposal equals the first
    // in run key, tool, arguments and task, and must still be applied.
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let run = "reused-run-key";
    for status in ["BLOCKED", "OPEN", "BLOCKED"] {
        let calls = tool_calls(&[("set_task_status", json!({"status": status}))]);
        let wake = app
            .engine
            .wakes()
            .wake(
                WakeRequest::new(
                    "agent-1",
                    assent_journal_host::task_target(&task),
                    run,
                    calls,
                ),
                NOW,
            )
            .await
            .unwrap();
        let set = wake.change_set.expect("queued").id;
        let outcome = app
            .engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        assert!(
            matches!(outcome.execution, ExecutionOutcome::Applied { .. }),
            "{status}: {:?}",
            outcome.execution
        );
        assert_eq!(app.load(&task).await.status, status);
    }
}

#[tokio::test]
async fn edit_validates_and_keeps_both_args() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[("update_task_estimate", json!({"minutes": 60}))],
    )
    .await;
    let service = app.engine.confirmations();
    let before = app.fingerprint().await;
    let bad = service
        .edit_and_confirm(ItemRef::new(set, 0), json!({"minutes": 5000}), NOW)
        .await
        .unwrap_err();
    assert!(matches!(bad, ConfirmError::InvalidArgs { .. }), "{bad}");
    assert!(
        bad.to_string()
            .starts_with("invalid arguments for update_task_estimate: /minutes"),
        "{bad}"
    );
    assert_eq!(
        app.fingerprint().await,
        before,
        "a refused edit changes nothing"
    );

    let outcome = service
        .edit_and_confirm(ItemRef::new(set, 0), json!({"minutes": 90}), NOW)
        .await
        .unwrap();
    assert_eq!(outcome.decision.args, json!({"minutes": 60}));
    assert_eq!(outcome.decision.edited_args, Some(json!({"minutes": 90})));
    assert_eq!(app.load(&task).await.estimate_minutes, Some(90));
    let history = service
        .history(
            "agent-1",
            Some(&assent_journal_host::task_target(&task)),
            20,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(history.contains("✎ update_task_estimate: Set estimate to 60 minutes — confirmed with edits: {\"minutes\":90}"), "{history}");
}

#[tokio::test]
async fn reject_defer_dismiss_and_history() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[
            ("update_task_priority", json!({"priority": "P0"})),
            ("set_task_status", json!({"status": "BLOCKED"})),
            ("set_task_title", json!({"title": "Login fix"})),
            ("update_task_estimate", json!({"minutes": 30})),
        ],
    )
    .await;
    let service = app.engine.confirmations();
    let rejected = service
        .reject_item(ItemRef::new(set, 0), Some("  I know better ".into()), NOW)
        .await
        .unwrap();
    assert_eq!(rejected.reason.as_deref(), Some("I know better"));
    let deferred = service.defer_item(ItemRef::new(set, 1), NOW).await.unwrap();
    assert_eq!(deferred.verdict, Verdict::Deferred);
    assert_eq!(
        service
            .defer_item(ItemRef::new(set, 1), NOW)
            .await
            .unwrap_err()
            .conflict_kind(),
        Some(ConflictKind::AlreadyDeferred)
    );
    assert!(matches!(
        service
            .reject_item(ItemRef::new(set, 9), None, NOW)
            .await
            .unwrap_err(),
        ConfirmError::ItemNotFound {
            index: 9,
            len: 4,
            ..
        }
    ));
    assert!(matches!(
        service
            .reject_item(ItemRef::new(Uuid::nil(), 0), None, NOW)
            .await
            .unwrap_err(),
        ConfirmError::ChangeSetNotFound(_)
    ));

    let later = NOW + Duration::minutes(1);
    let dismissed = service
        .dismiss(set, Some("not now".into()), later)
        .await
        .unwrap();
    assert_eq!(
        dismissed.iter().map(|d| d.item_index).collect::<Vec<_>>(),
        [1, 2, 3],
        "deferred items are open too"
    );
    assert_eq!(
        service
            .dismiss(set, None, later)
            .await
            .unwrap_err()
            .conflict_kind(),
        Some(ConflictKind::NothingOpen)
    );
    let mut conn = app.store.read_connection().await.unwrap();
    assert_eq!(
        change_sets::require(&mut conn, set).await.unwrap().status,
        ChangeSetStatus::Resolved
    );
    drop(conn);
    assert_eq!(
        app.load(&task).await.priority.as_deref(),
        Some("P1"),
        "nothing rejected was applied"
    );

    let history = service
        .history(
            "agent-1",
            Some(&assent_journal_host::task_target(&task)),
            20,
        )
        .await
        .unwrap()
        .unwrap();
    let lines: Vec<&str> = history.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines[4].starts_with(
            "- ✗ update_task_priority: Set priority to P0 — rejected (reason: \"I know better\")"
        ),
        "{history}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("- ⏸ set_task_status")),
        "{history}"
    );
    assert!(
        lines[..3]
            .iter()
            .all(|l| l.contains("(reason: \"not now\")")),
        "newest first: {history}"
    );
    assert_eq!(service.history("agent-2", None, 20).await.unwrap(), None);
}

#[tokio::test]
async fn confirm_all_runs_in_order_and_continues_past_a_failure() {
    let app = TestApp::with_fault("set_task_status", Fault::Fail, 1).await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[
            ("set_task_title", json!({"title": "Login fix"})),
            ("set_task_status", json!({"status": "BLOCKED"})),
            ("update_task_estimate", json!({"minutes": 45})),
            ("update_task_due_date", json!({"dueDate": "2026-04-01"})),
        ],
    )
    .await;
    let service = app.engine.confirmations();
    service.defer_item(ItemRef::new(set, 3), NOW).await.unwrap();
    let result = service.confirm_all(set, NOW).await.unwrap();
    let shapes: Vec<&str> = result
        .items
        .iter()
        .map(|item| match item.result {
            ItemResult::Confirmed(_) => "confirmed",
            ItemResult::Failed(_) => "failed",
            ItemResult::Skipped(_) => "skipped",
            _ => "unknown",
        })
        .collect();
    assert_eq!(shapes, ["confirmed", "failed", "confirmed", "skipped"]);
    let now = app.load(&task).await;
    assert_eq!(
        (
            now.title.as_str(),
            now.status.as_str(),
            now.estimate_minutes
        ),
        ("Login fix", "OPEN", Some(45))
    );
    let again = service.confirm_all(set, NOW).await.unwrap();
    assert!(
        matches!(again.items[1].result, ItemResult::Confirmed(_)),
        "the failed item is retried"
    );
    assert!(matches!(&again.items[0].result, ItemResult::Skipped(s) if s == "already confirmed"));
}

#[tokio::test]
async fn policy_is_enforced_again_at_confirmation_time() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[("set_task_title", json!({"title": "Renamed"}))],
    )
    .await;
    app.agent("agent-1", &["home"]).await; // the agent lost access to "work"
    let service = app.engine.confirmations();
    let err = service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "denied by policy: Category work not in allowed set"
    );
    assert_eq!(
        app.load(&task).await.title,
        "Fix login bug",
        "the handler never ran"
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task.clone())),
        100,
    )
    .await
    .unwrap();
    assert_eq!(trail.last().unwrap().kind.as_str(), "policyDenied");
    assert_eq!(
        trail.last().unwrap().detail.as_deref(),
        Some("Category work not in allowed set")
    );
    assert_eq!(
        change_sets::require(&mut conn, set).await.unwrap().items[0].status,
        ChangeItemStatus::Pending
    );
}

#[tokio::test]
async fn expiry_hides_stale_sets_from_the_pending_view() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = queued(
        &app,
        &task,
        &[("set_task_title", json!({"title": "Old idea"}))],
    )
    .await;
    let service = app.engine.confirmations();
    assert!(
        service
            .expire(NOW + Duration::days(7), Duration::days(7))
            .await
            .unwrap()
            .is_empty(),
        "not older than the TTL yet"
    );
    let expired = service
        .expire(NOW + Duration::days(8), assent_confirm::DEFAULT_EXPIRY_TTL)
        .await
        .unwrap();
    assert_eq!(expired, [set]);
    let mut conn = app.store.read_connection().await.unwrap();
    assert!(
        change_sets::pending(&mut conn, &Default::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        change_sets::require(&mut conn, set).await.unwrap().status,
        ChangeSetStatus::Expired
    );
    drop(conn);
    let err = service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap_err();
    assert_eq!(err.conflict_kind(), Some(ConflictKind::Expired), "{err}");
}

/// A host whose `note` tool writes a row and then fails when its arguments ask for it;
/// every call first records how many decisions a connection other than the writer's
/// can see (what has been committed so far).
fn noting_host(store: assent_store::Store, seen: Arc<Mutex<Vec<i64>>>) -> SimpleHost {
    const NOTES: &str = "CREATE TABLE notes (text TEXT NOT NULL)";
    SimpleHost::new("notes")
        .migration("notes", NOTES, NOTES)
        .handle("note", move |tx, call| {
            let (store, seen) = (store.clone(), seen.clone());
            Box::pin(async move {
                let committed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM decisions")
                    .fetch_one(
                        store
                            .read_connection()
                            .await
                            .expect("a read connection")
                            .connection(),
                    )
                    .await?;
                seen.lock().expect("lock").push(committed);
                let text = call.args["text"].as_str().unwrap_or_default().to_owned();
                sqlx::query("INSERT INTO notes (text) VALUES ($1)")
                    .bind(&text)
                    .execute(tx)
                    .await?;
                if call.args["fail"] == json!(true) {
                    return Err("the notebook is full".into());
                }
                Ok(format!("Noted {text}."))
            })
        })
        .category(|_, _| Box::pin(async { Ok(Some("notes".to_owned())) }))
}

#[tokio::test]
async fn confirm_all_is_one_commit_and_each_item_is_atomic_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/notes.db", dir.path().display());
    let store = assent_store::Store::open(&url).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut tools = ToolRegistry::new();
    let schema = json!({"type": "object", "required": ["text"],
        "properties": {"text": {"type": "string"}, "fail": {"type": "boolean"}}});
    tools
        .register(ToolSpec::new(
            "note",
            "Write a note.",
            ToolMode::Deferred,
            schema,
        ))
        .unwrap();
    let host = noting_host(store.clone(), seen.clone());
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
        .await
        .unwrap();
    let policy = AgentPolicy::new(["notes"]);
    agents::upsert(
        &mut store.read_connection().await.unwrap(),
        "scribe",
        &policy,
        NOW,
    )
    .await
    .unwrap();
    let calls = assent_changeset::parse_tool_calls(&json!([
        {"type": "tool_use", "id": "c1", "name": "note", "input": {"text": "a"}},
        {"type": "tool_use", "id": "c2", "name": "note", "input": {"text": "b", "fail": true}},
        {"type": "tool_use", "id": "c3", "name": "note", "input": {"text": "c"}},
    ]))
    .unwrap();
    let target = Target::new("notebook", "n-1");
    let wake = engine
        .wakes()
        .wake(WakeRequest::new("scribe", target, "run-1", calls), NOW)
        .await
        .unwrap();
    let set = wake.change_set.expect("queued").id;

    let result = engine.confirmations().confirm_all(set, NOW).await.unwrap();
    let shapes: Vec<&str> = result
        .items
        .iter()
        .map(|item| match item.result {
            ItemResult::Confirmed(_) => "confirmed",
            ItemResult::Failed(_) => "failed",
            ItemResult::Skipped(_) => "skipped",
            _ => "unknown",
        })
        .collect();
    assert_eq!(shapes, ["confirmed", "failed", "confirmed"]);
    assert_eq!(
        *seen.lock().unwrap(),
        [0, 0, 0],
        "no decision was committed while the set was confirmed: one commit at the end"
    );
    let notes: Vec<String> = sqlx::query_scalar("SELECT text FROM notes ORDER BY text")
        .fetch_all(
            store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await
        .unwrap();
    assert_eq!(
        notes,
        ["a", "c"],
        "the failed item's write was rolled back alone"
    );
    let mut conn = store.read_connection().await.unwrap();
    let now = change_sets::require(&mut conn, set).await.unwrap();
    let statuses: Vec<ChangeItemStatus> = now.items.iter().map(|i| i.status).collect();
    assert_eq!(
        statuses,
        [
            ChangeItemStatus::Confirmed,
            ChangeItemStatus::Pending,
            ChangeItemStatus::Confirmed
        ]
    );
    assert_eq!(now.status, ChangeSetStatus::PartiallyResolved);
    let decided: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM decisions")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(decided, 2);
    let failed: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT detail FROM audit_records WHERE kind = 'result' AND success = 0",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        failed,
        [Some("note failed: the notebook is full".to_owned())],
        "the failed item's audit record stays"
    );
}
