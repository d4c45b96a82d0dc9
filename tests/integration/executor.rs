//! The audited executor on its own: audit failures never change an outcome.

use assent_confirm::Host;
use assent_confirm::{AuditedExecutor, ExecutionOutcome, ExecutionRequest};
use assent_domain::OperationId;
use assent_journal_host::JournalHost;
use assent_store::{Connection, WriteTx};
use assent_tests::{NOW, TestApp};
use assent_tools::{
    AgentPolicy, AuditRecord, AuditSink, BoxFuture, ExecutionTarget, ToolInvocation, ToolRegistry,
};
use serde_json::{Value, json};

/// An audit trail whose every write fails.
struct BrokenAudit;

impl AuditSink<Connection> for BrokenAudit {
    fn record<'a>(
        &'a self,
        _: &'a mut Connection,
        _: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("disk full".to_owned()) })
    }
}

/// The journal's tools run through an executor whose audit trail is broken.
struct Fixture {
    host: JournalHost,
    registry: ToolRegistry,
    task: String,
}

impl Fixture {
    /// Runs `tool` with `args` on the task, unconfirmed, under `policy`.
    async fn run(
        &self,
        tx: &mut WriteTx,
        policy: &AgentPolicy,
        tool: &str,
        args: Value,
    ) -> ExecutionOutcome {
        let executor = AuditedExecutor::new(self.host.resolver(), &BrokenAudit);
        let invocation = ToolInvocation::new(
            tool,
            args.clone(),
            "run-x",
            OperationId::derive("run-x", tool, &args, &[self.task.as_str()]),
            ExecutionTarget {
                agent_id: "agent-1".into(),
                target: assent_journal_host::task_target(&self.task),
            },
            NOW,
        );
        executor
            .execute(
                tx,
                ExecutionRequest {
                    policy,
                    spec: self.registry.get(tool).expect("a catalog tool"),
                    handler: self.host.handler(tool),
                    invocation,
                    confirmed_by_person: false,
                    already_true: None,
                    now: NOW,
                    allowed_by: None,
                },
            )
            .await
            .expect("no database failure")
    }
}

#[tokio::test]
async fn a_failing_audit_trail_changes_no_outcome() {
    let app = TestApp::spawn().await;
    let fixture = Fixture {
        host: JournalHost::new("device-a"),
        registry: assent_journal::catalog(),
        task: app.scene().await,
    };
    let mut tx = app.store.begin_write().await.unwrap();
    let work = AgentPolicy::new(["work"]);
    let applied = fixture
        .run(
            &mut tx,
            &work,
            "set_task_language",
            json!({"languageCode": "fr"}),
        )
        .await;
    assert!(
        matches!(applied, ExecutionOutcome::Applied { mutated: true, .. }),
        "{applied:?}"
    );
    let home = AgentPolicy::new(["home"]);
    let denied = fixture
        .run(
            &mut tx,
            &home,
            "set_task_language",
            json!({"languageCode": "de"}),
        )
        .await;
    assert_eq!(
        denied,
        ExecutionOutcome::Denied {
            reason: "Category work not in allowed set".into()
        }
    );
    // An `ask` tool may not run unconfirmed, whatever the caller claims to have planned.
    let unconfirmed = fixture
        .run(&mut tx, &work, "set_task_title", json!({"title": "Sneaky"}))
        .await;
    assert!(
        matches!(unconfirmed, ExecutionOutcome::Denied { .. }),
        "{unconfirmed:?}"
    );
    tx.commit().await.unwrap();

    let now = app.load(&fixture.task).await;
    assert_eq!(
        (now.language.as_deref(), now.title.as_str()),
        (Some("fr"), "Fix login bug")
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let audited: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_records")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        audited, 0,
        "nothing reached the broken trail, and nothing else broke"
    );
}
