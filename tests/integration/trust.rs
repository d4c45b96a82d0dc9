//! The decision history read back for grant suggestions (issue 29) on every backend:
//! unchanged confirmations of one tool suggest it; a rejection of another keeps that
//! one out; an undone change counts as undone.

use assent_confirm::ItemRef;
use assent_store::decisions;
use assent_tests::{NOW, TestApp, backends};
use assent_tools::{InForce, PastOutcome, SuggestOptions, suggest_grants};
use serde_json::json;
use time::Duration;

#[tokio::test]
async fn past_calls_feed_a_suggestion_for_the_tool_always_confirmed_unchanged() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let person = app.engine.confirmations();
        for i in 0..6 {
            let set = app
                .wake(
                    &task,
                    &[("add_checklist_item", json!({"title": format!("Step {i}")}))],
                )
                .await
                .change_set
                .expect("queued")
                .id;
            person
                .confirm_item(ItemRef::new(set, 0), NOW)
                .await
                .unwrap();
        }
        let title = app
            .wake(&task, &[("set_task_title", json!({"title": "Not this"}))])
            .await
            .change_set
            .expect("queued")
            .id;
        person
            .reject_item(ItemRef::new(title, 0), Some("keep the title".into()), NOW)
            .await
            .unwrap();

        let mut conn = app.store.read_connection().await.unwrap();
        let calls = decisions::past_calls(&mut conn, Some("agent-1"), NOW - Duration::days(30))
            .await
            .unwrap();
        assert_eq!(calls.len(), 7, "{backend:?}: {calls:?}");
        assert_eq!(
            calls
                .iter()
                .filter(|c| c.outcome == PastOutcome::Rejected)
                .count(),
            1
        );
        let suggestions = suggest_grants(
            &calls,
            &SuggestOptions {
                min_confirmed: 5,
                expiry: Duration::days(30),
                now: NOW,
            },
            |_, _| InForce::default(),
        );
        // A person decided each (no grant), and the journal's own definitions follow
        // its code: none is an earlier definition's (issue 37).
        assert!(
            calls.iter().all(|c| !c.automatic && c.definition.is_none()),
            "{calls:?}"
        );
        assert_eq!(suggestions.len(), 1, "{suggestions:?}");
        assert_eq!(suggestions[0].tool, "add_checklist_item");
        assert_eq!(suggestions[0].evidence.confirmed_unchanged, 6);
        assert_eq!(suggestions[0].evidence.automatic, 0);
    }
}
