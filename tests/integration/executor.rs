//! The audited executor on its own: audit failures never change an outcome.

use assent_confirm::TaskHost;
use assent_domain::OperationId;
use assent_journal_host::JournalHost;
use assent_store::{AuditedExecutor, ExecutionOutcome, ExecutionRequest, SqliteConnection};
use assent_tests::{NOW, TestApp};
use assent_tools::{
    AgentPolicy, AuditRecord, AuditSink, BoxFuture, ExecutionTarget, ToolInvocation,
};
use serde_json::json;

/// An audit trail whose every write fails.
struct BrokenAudit;

impl AuditSink<SqliteConnection> for BrokenAudit {
    fn record<'a>(
        &'a self,
        _: &'a mut SqliteConnection,
        _: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("disk full".to_owned()) })
    }
}

fn invocation(task: &str, tool: &str, args: serde_json::Value) -> ToolInvocation {
    ToolInvocation {
        operation_id: OperationId::derive("run-x", tool, &args, &[task]),
        tool_name: tool.into(),
        args,
        run_key: "run-x".into(),
        target: ExecutionTarget {
            agent_id: "agent-1".into(),
            task_id: task.into(),
        },
        now: NOW,
    }
}

#[tokio::test]
async fn a_failing_audit_trail_changes_no_outcome() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let host = JournalHost::new("device-a");
    let registry = assent_journal::catalog();
    let executor = AuditedExecutor::new(host.resolver(), &BrokenAudit);
    let spec = registry.get("set_task_language").unwrap();

    let mut tx = app.store.begin_write().await.unwrap();
    let allowed = AgentPolicy::new(["work"]);
    let applied = executor
        .execute(
            &mut tx,
            ExecutionRequest {
                policy: &allowed,
                spec,
                handler: host.handler("set_task_language"),
                invocation: invocation(&task, "set_task_language", json!({"languageCode": "fr"})),
                confirmed_by_person: false,
                already_true: None,
                now: NOW,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(applied, ExecutionOutcome::Applied { mutated: true, .. }),
        "{applied:?}"
    );

    let denied_policy = AgentPolicy::new(["home"]);
    let denied = executor
        .execute(
            &mut tx,
            ExecutionRequest {
                policy: &denied_policy,
                spec,
                handler: host.handler("set_task_language"),
                invocation: invocation(&task, "set_task_language", json!({"languageCode": "de"})),
                confirmed_by_person: false,
                already_true: None,
                now: NOW,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        denied,
        ExecutionOutcome::Denied {
            reason: "Category work not in allowed set".into()
        }
    );

    // An `ask` tool may not run unconfirmed, whatever the caller claims to have planned.
    let title = registry.get("set_task_title").unwrap();
    let unconfirmed = executor
        .execute(
            &mut tx,
            ExecutionRequest {
                policy: &allowed,
                spec: title,
                handler: host.handler("set_task_title"),
                invocation: invocation(&task, "set_task_title", json!({"title": "Sneaky"})),
                confirmed_by_person: false,
                already_true: None,
                now: NOW,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(unconfirmed, ExecutionOutcome::Denied { .. }),
        "{unconfirmed:?}"
    );
    tx.commit().await.unwrap();

    let now = app.load(&task).await;
    assert_eq!(
        (now.language.as_deref(), now.title.as_str()),
        (Some("fr"), "Fix login bug")
    );
    let mut conn = app.store.pool().acquire().await.unwrap();
    let audited: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_records")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        audited, 0,
        "nothing reached the broken trail, and nothing else broke"
    );
}
