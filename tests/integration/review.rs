//! A service's own review API on every backend (issue 54, point 12): the items waiting
//! for a person (`Engine::pending`) and the decisions followed with a cursor
//! (`Engine::decisions_since`, `Engine::decisions`).

use assent_confirm::ItemRef;
use assent_confirm::records::{DecisionCursor, ItemFilter};
use assent_domain::{Uuid, Verdict};
use assent_journal_host::task_target;
use assent_tests::{NOW, TestApp, TestBackend, backends, tool_calls};
use futures_util::StreamExt;
use serde_json::json;
use time::Duration;

/// A wake of `agent-1` on `task` at `at` with `calls`: its set's id.
async fn wake_at(
    app: &TestApp,
    task: &str,
    at: time::OffsetDateTime,
    calls: &[(&str, serde_json::Value)],
) -> Uuid {
    let request = assent_confirm::WakeRequest::new(
        "agent-1",
        task_target(task),
        Uuid::new_v4().to_string(),
        tool_calls(calls),
    );
    let wake = app.engine.wakes().wake(request, at).await.unwrap();
    wake.change_set.expect("a proposal").id
}

async fn pending_items_are_listed_filtered_and_ordered(backend: &TestBackend) {
    let app = TestApp::on(backend).await;
    let first_task = app.scene().await;
    let older = wake_at(
        &app,
        &first_task,
        NOW,
        &[
            ("set_task_title", json!({"title": "Fix the login bug"})),
            ("update_task_priority", json!({"priority": "P0"})),
        ],
    )
    .await;
    let second_task = app
        .task(assent_journal_host::NewTask {
            title: "Pay rent".into(),
            category: Some("work".into()),
            ..Default::default()
        })
        .await;
    let newer = wake_at(
        &app,
        &second_task,
        NOW + Duration::minutes(1),
        &[("update_task_priority", json!({"priority": "P2"}))],
    )
    .await;
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(older, 0), NOW)
        .await
        .unwrap();

    let all = app.engine.pending(&ItemFilter::new()).await.unwrap();
    let rows: Vec<(Uuid, usize, &str)> = all
        .iter()
        .map(|p| (p.item.change_set_id, p.item.index, p.tool_name.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            (newer, 0, "update_task_priority"),
            (older, 1, "update_task_priority")
        ],
        "{backend:?}: newest first, the confirmed item no longer waits"
    );
    let row = &all[1];
    assert_eq!(row.agent_id, "agent-1");
    assert_eq!(row.target, task_target(&first_task));
    assert_eq!(row.args, json!({"priority": "P0"}));
    assert_eq!(row.proposed_at, NOW);
    assert_eq!(row.revision, 0);
    assert!(!row.summary.is_empty());

    let oldest = app
        .engine
        .pending(&ItemFilter::new().oldest_first().limit(1))
        .await
        .unwrap();
    assert_eq!(oldest.len(), 1);
    assert_eq!(
        oldest[0].item,
        ItemRef::new(older, 1),
        "{backend:?}: oldest first"
    );

    let about_rent = ItemFilter::new().target(task_target(&second_task));
    let rent = app.engine.pending(&about_rent).await.unwrap();
    assert_eq!(rent.len(), 1);
    assert_eq!(rent[0].item.change_set_id, newer);
    let titles = ItemFilter::new().tool("set_task_title");
    assert!(app.engine.pending(&titles).await.unwrap().is_empty());
    let others = ItemFilter::new().agent("agent-2");
    assert!(app.engine.pending(&others).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_services_review_screen_lists_the_items_waiting_for_a_person() {
    for backend in backends() {
        pending_items_are_listed_filtered_and_ordered(&backend).await;
    }
}

async fn decisions_are_followed_with_a_cursor(backend: &TestBackend) {
    let app = TestApp::on(backend).await;
    let task = app.scene().await;
    let set = wake_at(
        &app,
        &task,
        NOW,
        &[
            ("set_task_title", json!({"title": "Fix the login bug"})),
            ("update_task_priority", json!({"priority": "P0"})),
            ("add_checklist_item", json!({"title": "Call the bank"})),
        ],
    )
    .await;
    let engine = &app.engine;
    let service = engine.confirmations().by("alice");
    service
        .edit_and_confirm(ItemRef::new(set, 1), json!({"priority": "P2"}), NOW)
        .await
        .unwrap();
    service
        .reject_item(ItemRef::new(set, 2), Some("not now".into()), NOW)
        .await
        .unwrap();

    let first = engine
        .decisions_since(DecisionCursor::start(), 1)
        .await
        .unwrap();
    assert_eq!(first.decisions.len(), 1, "{backend:?}: the limit holds");
    let edit = &first.decisions[0].decision;
    assert_eq!((edit.change_set_id, edit.item_index), (set, 1));
    assert_eq!(edit.verdict, Verdict::Confirmed);
    assert_eq!(edit.decided_by.as_deref(), Some("alice"));
    assert_eq!(edit.edited_args, Some(json!({"priority": "P2"})));
    assert_eq!(first.next, first.decisions[0].cursor);

    // A follower keeps its cursor as text and picks up where it stopped.
    let saved = first.next.to_string();
    let resumed: DecisionCursor = saved.parse().unwrap();
    let rest = engine.decisions_since(resumed, 100).await.unwrap();
    assert_eq!(rest.decisions.len(), 1);
    let rejection = &rest.decisions[0].decision;
    assert_eq!(rejection.item_index, 2);
    assert_eq!(rejection.verdict, Verdict::Rejected);
    assert_eq!(rejection.reason.as_deref(), Some("not now"));
    let idle = engine.decisions_since(rest.next, 100).await.unwrap();
    assert!(idle.decisions.is_empty());
    assert_eq!(
        idle.next, rest.next,
        "{backend:?}: nothing new, the cursor stays"
    );
    assert_eq!(engine.decision_cursor().await.unwrap(), rest.next);

    // The stream yields what is committed after its cursor, and nothing before.
    let mut stream = Box::pin(engine.decisions(engine.decision_cursor().await.unwrap()));
    service
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    let next = stream.next().await.expect("the stream goes on").unwrap();
    assert_eq!(
        (next.decision.item_index, next.decision.verdict),
        (0, Verdict::Confirmed),
        "{backend:?}"
    );
    assert!(next.cursor > rest.next);
}

#[tokio::test]
async fn a_service_follows_decisions_with_a_cursor_and_a_stream() {
    for backend in backends() {
        decisions_are_followed_with_a_cursor(&backend).await;
    }
}

#[test]
fn a_cursor_is_opaque_text_and_bad_text_is_refused() {
    for bad in ["", "dc-", "dc--1", "12", "dc-1x", "DC-1"] {
        let refused = bad.parse::<DecisionCursor>();
        assert!(refused.is_err(), "{bad:?} parsed");
    }
    let cursor: DecisionCursor = "dc-42".parse().unwrap();
    assert_eq!(serde_json::to_value(cursor).unwrap(), json!("dc-42"));
    let back: DecisionCursor = serde_json::from_value(json!("dc-42")).unwrap();
    assert_eq!(back, cursor);
    assert!(serde_json::from_value::<DecisionCursor>(json!(42)).is_err());
}
