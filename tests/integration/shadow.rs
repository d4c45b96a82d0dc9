//! A shadow rule records its verdict beside each decision it covers, and changes no
//! outcome; a decision names who made it, and grant suggestions count those people
//! (issue 29). On SQLite and PostgreSQL.

use assent_confirm::ItemRef;
use assent_domain::Verdict;
use assent_store::{agents, decisions};
use assent_tests::{TestApp, backends};
use assent_tools::{RuleAction, ToolRule};
use serde_json::json;
use time::{Duration, OffsetDateTime};

#[tokio::test]
async fn shadow_verdicts_are_recorded_per_decision_and_change_nothing() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let t0 = OffsetDateTime::now_utc();
        let allow = ToolRule::new("update_task_priority", RuleAction::Allow).unwrap();
        let mut conn = app.store.read_connection().await.unwrap();
        agents::set_shadow_rule(&mut conn, "agent-1", allow, t0)
            .await
            .unwrap()
            .expect("agent-1");
        drop(conn);

        // Each proposed after the last decision (the stale guard would refuse one
        // proposed before it); each still asked: a shadow rule changes nothing.
        let propose = |to: &'static str| {
            let app = &app;
            let task = &task;
            async move {
                let outcome = app
                    .wake(task, &[("update_task_priority", json!({"priority": to}))])
                    .await;
                outcome.change_set.expect("still asked").id
            }
        };
        let alice = app.engine.confirmations().by("alice");
        let confirmed = propose("P0").await;
        alice
            .confirm_item(ItemRef::new(confirmed, 0), t0)
            .await
            .unwrap();
        let edited = propose("P2").await;
        alice
            .edit_and_confirm(ItemRef::new(edited, 0), json!({"priority": "P1"}), t0)
            .await
            .unwrap();
        let rejected = propose("P3").await;
        app.engine
            .confirmations()
            .by("bob")
            .reject_item(ItemRef::new(rejected, 0), Some("not now".into()), t0)
            .await
            .unwrap();
        let sets = [confirmed, edited, rejected];

        let mut conn = app.store.read_connection().await.unwrap();
        let recent = decisions::recent(&mut conn, "agent-1", None, 10)
            .await
            .unwrap();
        let shadows = decisions::shadows_of(&mut conn, &recent).await.unwrap();
        let verdict_of = |set| {
            let decision = recent
                .iter()
                .find(|d| d.change_set_id == set)
                .expect("decided");
            let shadow = shadows.iter().find(|(id, _)| *id == decision.id);
            (decision.verdict, shadow.map(|(_, s)| s.clone()))
        };
        assert_eq!(
            verdict_of(sets[0]),
            (
                Verdict::Confirmed,
                Some(json!({"rule": "allow", "agreed": true}))
            )
        );
        assert_eq!(
            verdict_of(sets[1]),
            (
                Verdict::Confirmed,
                Some(json!({"rule": "allow", "agreed": false}))
            )
        );
        assert_eq!(
            verdict_of(sets[2]),
            (
                Verdict::Rejected,
                Some(json!({"rule": "allow", "agreed": false}))
            )
        );

        // The people who decided, not the device, are the reviewers.
        let calls = decisions::past_calls(&mut conn, Some("agent-1"), t0 - Duration::hours(1))
            .await
            .unwrap();
        let mut reviewers: Vec<_> = calls.iter().filter_map(|c| c.reviewer.clone()).collect();
        reviewers.sort();
        reviewers.dedup();
        assert_eq!(reviewers, ["alice", "bob"]);
    }
}
