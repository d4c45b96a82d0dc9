//! Every record of a call that was refused or waited says what decided (issue 57,
//! point 2): a `policyDenied` record of a wake carries `decidedBy` (the rule with who
//! set it, or the category), once however often the wake is retried; the action record
//! of a call a person confirmed names the rule that made it wait; `why --audit` reads
//! it; the proof covers it (an edit of it is caught, records without it still verify);
//! and it travels to another device in a sync batch.

use assent_confirm::history::AuditFilter;
use assent_confirm::{ItemRef, RuleChange, WakeRequest};
use assent_journal_host::{NewTask, task_target};
use assent_store::proof::{self, ProofRule, VerifyOptions};
use assent_store::{Connection, audit};
use assent_tests::{NOW, TestApp, assert_proven, backends, tool_calls};
use assent_tools::{AuditKind, AuditRecord, RuleAction};
use serde_json::{Value, json};

/// The records of run `run` on `app`.
async fn records_of_run(app: &TestApp, run: &str) -> Vec<AuditRecord> {
    let mut conn = app.store.read_connection().await.unwrap();
    audit::list(&mut conn, &AuditFilter::Run(run.to_owned()), 50)
        .await
        .unwrap()
}

/// A wake of `agent-1` on `task` under run key `run`.
async fn wake(app: &TestApp, task: &str, run: &str, calls: &[(&str, Value)]) -> Vec<String> {
    app.engine
        .wakes()
        .wake(
            WakeRequest::new("agent-1", task_target(task), run, tool_calls(calls)),
            NOW,
        )
        .await
        .unwrap()
        .responses
        .into_iter()
        .map(|r| r.content)
        .collect()
}

fn rule_by(tool: &str, action: RuleAction, by: &str) -> RuleChange {
    RuleChange {
        by: Some(by.to_owned()),
        ..RuleChange::new(tool, action)
    }
}

#[tokio::test]
async fn a_refusal_and_a_wait_are_recorded_with_what_decided_on_both_backends() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let rules = &app.engine;
        rules
            .change_rule(
                "agent-1",
                &rule_by("set_task_title", RuleAction::Deny, "alice"),
                NOW,
            )
            .await
            .unwrap();
        rules
            .change_rule(
                "agent-1",
                &rule_by("update_task_priority", RuleAction::Ask, "bob"),
                NOW,
            )
            .await
            .unwrap();

        // A deny rule at the wake: one policyDenied record naming the rule and who set
        // it, however often the same wake is retried.
        let title = [("set_task_title", json!({"title": "Renamed"}))];
        let said = wake(&app, &task, "run-deny", &title).await;
        assert!(
            said[0].starts_with("Denied by policy"),
            "{backend:?}: {said:?}"
        );
        wake(&app, &task, "run-deny", &title).await;
        let records = records_of_run(&app, "run-deny").await;
        assert_eq!(records.len(), 1, "{backend:?}: once: {records:?}");
        let denied = &records[0];
        assert_eq!(denied.kind, AuditKind::PolicyDenied);
        assert_eq!(denied.detail.as_deref(), Some(said[0].as_str()));
        let rule = &denied.decided_by.as_ref().expect("decidedBy")["rule"];
        assert_eq!(rule["pattern"], "set_task_title", "{backend:?}: {rule}");
        assert_eq!(rule["action"], "deny");
        assert_eq!(rule["decided"], "deny");
        assert_eq!(rule["source"], "command");
        assert_eq!(rule["setBy"], "alice");
        assert!(rule["setAt"].is_string(), "{rule}");
        assert_eq!(denied.allowed_by, None);

        // `why --audit` reads it from the record, as it was then.
        let why = app
            .engine
            .why_audit(denied.operation_id.as_str())
            .await
            .unwrap()
            .expect("a record");
        assert_eq!(why.decision, "deny");
        assert_eq!(why.decided_by["rule"]["setBy"], "alice", "{:?}", why);
        assert_eq!(
            why.recorded.as_ref().map(|r| r["decidedBy"].clone()),
            denied.decided_by
        );
        assert!(
            why.text()
                .contains("decided by rule deny set_task_title (a command, set by alice"),
            "{}",
            why.text()
        );

        // The category: no rule, the allowlist refused it.
        let home = app
            .task(NewTask {
                title: "Groceries".into(),
                category: Some("home".into()),
                ..NewTask::default()
            })
            .await;
        wake(
            &app,
            &home,
            "run-home",
            &[("set_task_language", json!({"languageCode": "en"}))],
        )
        .await;
        let records = records_of_run(&app, "run-home").await;
        assert_eq!(records.len(), 1, "{backend:?}: {records:?}");
        assert_eq!(records[0].kind, AuditKind::PolicyDenied);
        assert_eq!(
            records[0].decided_by,
            Some(json!({"category": "Category home not in allowed set"}))
        );

        // A call that waited: its action record names the ask rule and who set it; the
        // result record and an unasked call's records name nothing of the kind.
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P0"}))],
            )
            .await
            .change_set
            .expect("asked")
            .id;
        app.engine
            .confirmations()
            .by("carol")
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        let run_key = {
            let mut conn = app.store.read_connection().await.unwrap();
            assent_store::change_sets::require(&mut conn, set)
                .await
                .unwrap()
                .run_key
        };
        let records = records_of_run(&app, &run_key).await;
        let action = records
            .iter()
            .find(|r| r.kind == AuditKind::Action)
            .unwrap_or_else(|| panic!("{backend:?}: an action record: {records:?}"));
        let rule = &action.decided_by.as_ref().expect("decidedBy")["rule"];
        assert_eq!(rule["pattern"], "update_task_priority", "{rule}");
        assert_eq!(rule["decided"], "ask");
        assert_eq!(rule["setBy"], "bob");
        assert_eq!(action.allowed_by, None);
        let result = records.iter().find(|r| r.kind == AuditKind::Result);
        assert_eq!(result.map(|r| r.decided_by.clone()), Some(None));
        let why = app
            .engine
            .why_audit(action.operation_id.as_str())
            .await
            .unwrap()
            .expect("a record");
        assert_eq!(why.decision, "ask");
        assert_eq!(why.decided_by["rule"]["setBy"], "bob");

        wake(
            &app,
            &task,
            "run-unasked",
            &[("set_task_language", json!({"languageCode": "en"}))],
        )
        .await;
        for record in records_of_run(&app, "run-unasked").await {
            assert!(record.allowed_by.is_some(), "{record:?}");
            assert_eq!(record.decided_by, None, "{record:?}");
        }

        // The proof holds, and covers it: an edit of what decided is caught, as is one
        // given to a record written without it.
        assert_proven(&app.store, "decidedBy").await;
        for sql in [
            "UPDATE audit_records SET decided_by = '{\"mode\":\"deferred\"}' WHERE kind = 'policyDenied'",
            "UPDATE audit_records SET decided_by = '{\"mode\":\"immediate\"}' WHERE decided_by IS NULL",
        ] {
            let mut tx = app.store.begin_write().await.unwrap();
            let changed = sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(tx.connection())
                .await
                .unwrap()
                .rows_affected();
            assert!(changed > 0, "{sql}");
            let conn: &mut Connection = tx.connection();
            let report = proof::verify(conn, &VerifyOptions::default())
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == ProofRule::RowMatchesEntry),
                "{backend:?}: {sql} was not caught"
            );
        }
    }
}

#[tokio::test]
async fn what_decided_travels_in_a_sync_batch() {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let task = a.scene().await;
    b.agent("agent-1", &["work"]).await;
    a.engine
        .change_rule(
            "agent-1",
            &rule_by("set_task_title", RuleAction::Deny, "alice"),
            NOW,
        )
        .await
        .unwrap();
    wake(
        &a,
        &task,
        "run-deny",
        &[("set_task_title", json!({"title": "Renamed"}))],
    )
    .await;
    let sent = records_of_run(&a, "run-deny").await;
    assert!(sent[0].decided_by.is_some(), "{sent:?}");
    let batch = a.export().await;
    let report = b.import(&batch).await.unwrap();
    assert!(report.audit_records_inserted > 0, "{report:?}");
    assert_eq!(records_of_run(&b, "run-deny").await, sent);
    assert_proven(&b.store, "a synced decidedBy").await;
}
