//! The agent awaits the person: a set's outcome, and a wait for it that a decision or a
//! job's run made by another process ends within a second, woken by the change feed.

use assent_confirm::ItemRef;
use assent_confirm::{ItemOutcome, JobSettings, SetOutcome};
use assent_domain::{ChangeItemStatus, ChangeSetStatus, Target, Uuid, Verdict};
use assent_store::jobs::JobStatus;
use assent_store::{Store, agents};
use assent_tests::external::{self, CATEGORY, HttpHost, Receiver, TOOL};
use assent_tests::{NOW, TestApp, backends, tool_calls};
use assent_tools::AgentPolicy;
use serde_json::json;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// Longer than any test waits for a decision: a wait that ends sooner was woken.
const LONG: Duration = Duration::from_secs(20);

fn item(outcome: &SetOutcome, index: usize) -> &ItemOutcome {
    &outcome.items[index]
}

/// Waits for `set`'s outcome while `act` decides or runs it elsewhere; the wait must end
/// within a second of the moment `act` reports (a test of the wake-up, not a benchmark).
async fn wait_then_check(
    app: &TestApp,
    set: Uuid,
    act: tokio::task::JoinHandle<Instant>,
) -> SetOutcome {
    let outcome = app
        .engine
        .confirmations()
        .wait_outcome(set, LONG)
        .await
        .unwrap();
    let returned = Instant::now();
    let acted = act.await.unwrap();
    assert!(
        returned.duration_since(acted) < Duration::from_secs(1),
        "returned {:?} after the decision or run",
        returned.duration_since(acted)
    );
    outcome
}

#[tokio::test]
async fn a_wait_ends_within_a_second_of_a_decision_made_by_another_process() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P0"}))],
            )
            .await
            .change_set
            .expect("a proposal")
            .id;
        let other = app.separate_confirmation_services(1).await.remove(0);
        let decider = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            other.confirm_item(ItemRef::new(set, 0), NOW).await.unwrap();
            Instant::now()
        });
        let outcome = wait_then_check(&app, set, decider).await;
        assert!(outcome.settled, "{outcome:?}");
        assert_eq!(outcome.status, ChangeSetStatus::Resolved);
        let only = item(&outcome, 0);
        assert_eq!(only.status, ChangeItemStatus::Confirmed);
        assert_eq!(only.tool_name, "update_task_priority");
        let decision = only.decision.as_ref().expect("decided");
        assert_eq!(decision.verdict, Verdict::Confirmed);
        assert_eq!(only.run, None, "a transactional item has no job");
        let result = only.result.as_deref().expect("the handler's text is kept");
        assert!(result.contains("P0"), "{result}");
        assert_eq!(
            app.engine.confirmations().outcome(set).await.unwrap(),
            outcome
        );
    }
}

#[tokio::test]
async fn nobody_decides_and_the_wait_returns_unsettled_at_its_timeout() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P0"}))],
        )
        .await
        .change_set
        .expect("a proposal")
        .id;
    let started = Instant::now();
    let outcome = app
        .engine
        .confirmations()
        .wait_outcome(set, Duration::from_millis(300))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert!(!outcome.settled);
    assert_eq!(outcome.status, ChangeSetStatus::Pending);
    assert_eq!(item(&outcome, 0).status, ChangeItemStatus::Pending);
    assert_eq!(item(&outcome, 0).decision, None);
    assert_eq!(item(&outcome, 0).result, None);

    let unknown = app
        .engine
        .confirmations()
        .outcome(uuid::Uuid::new_v4())
        .await;
    assert!(
        matches!(
            unknown,
            Err(assent_confirm::ConfirmError::ChangeSetNotFound(_))
        ),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn a_rejections_reason_and_an_edits_args_are_in_the_outcome_and_deferral_is_not_settled() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(
            &task,
            &[
                ("update_task_priority", json!({"priority": "P0"})),
                ("update_task_estimate", json!({"minutes": 60})),
            ],
        )
        .await
        .change_set
        .expect("a proposal")
        .id;
    let service = app.engine.confirmations();
    service
        .reject_item(ItemRef::new(set, 0), Some("P1 is right".into()), NOW)
        .await
        .unwrap();
    service.defer_item(ItemRef::new(set, 1), NOW).await.unwrap();
    let deferred = service
        .wait_outcome(set, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(!deferred.settled, "a deferred item is still open");
    assert_eq!(item(&deferred, 1).status, ChangeItemStatus::Deferred);
    assert_eq!(
        item(&deferred, 1).decision.as_ref().map(|d| d.verdict),
        Some(Verdict::Deferred)
    );

    service
        .edit_and_confirm(ItemRef::new(set, 1), json!({"minutes": 90}), NOW)
        .await
        .unwrap();
    let outcome = service.wait_outcome(set, LONG).await.unwrap();
    assert!(outcome.settled);
    let rejected = item(&outcome, 0);
    assert_eq!(rejected.status, ChangeItemStatus::Rejected);
    let decision = rejected.decision.as_ref().unwrap();
    assert_eq!(decision.verdict, Verdict::Rejected);
    assert_eq!(decision.reason.as_deref(), Some("P1 is right"));
    assert_eq!(rejected.result, None);
    let edited = item(&outcome, 1);
    assert_eq!(edited.status, ChangeItemStatus::Confirmed);
    let decision = edited.decision.as_ref().unwrap();
    assert_eq!(decision.verdict, Verdict::Confirmed, "the latest decision");
    assert_eq!(decision.edited_args, Some(json!({"minutes": 90})));
    assert!(edited.result.is_some(), "{edited:?}");

    let wire = serde_json::to_value(&outcome).unwrap();
    assert_eq!(wire["changeSetId"], set.to_string());
    assert_eq!(wire["status"], "resolved");
    assert_eq!(wire["settled"], true);
    assert_eq!(wire["items"][0]["toolName"], "update_task_priority");
    assert_eq!(wire["items"][0]["decision"]["reason"], "P1 is right");
    assert_eq!(
        wire["items"][1]["decision"]["editedArgs"],
        json!({"minutes": 90})
    );
}

#[tokio::test]
async fn an_external_items_wait_ends_when_its_job_is_applied() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::start(false, Duration::ZERO);
    let http = external::engine(
        app.store.clone(),
        HttpHost::new(&receiver.url, false, false),
        JobSettings::default(),
    )
    .await;
    allow(&app.store).await;
    let now = OffsetDateTime::now_utc();
    let request = assent_confirm::WakeRequest::new(
        "poster",
        Target::new("endpoint", "e1"),
        "run-1",
        tool_calls(&[(TOOL, json!({"text": "hello"}))]),
    );
    let set = http
        .wakes()
        .wake(request, now)
        .await
        .unwrap()
        .change_set
        .expect("queued")
        .id;
    // The journal's engine, which knows neither the tool nor the host, confirms.
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now)
        .await
        .unwrap();
    let confirmed = app
        .engine
        .confirmations()
        .wait_outcome(set, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(!confirmed.settled, "decided, but its job has not run");
    let run = item(&confirmed, 0).run.as_ref().expect("a job");
    assert_eq!(run.status, JobStatus::Approved);

    let executor = http.clone();
    let ran = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let run = executor.run_due_jobs(now).await.unwrap();
        assert_eq!(run.applied, 1, "{run:?}");
        Instant::now()
    });
    let outcome = wait_then_check(&app, set, ran).await;
    assert!(outcome.settled, "{outcome:?}");
    let only = item(&outcome, 0);
    let run = only.run.as_ref().expect("a job");
    assert_eq!(run.status, JobStatus::Applied);
    assert_eq!(run.result.as_deref(), Some("receiver said posted"));
    assert_eq!(only.result.as_deref(), Some("receiver said posted"));
    let wire = serde_json::to_value(&outcome).unwrap();
    assert_eq!(wire["items"][0]["run"]["status"], "applied");
    assert_eq!(wire["items"][0]["run"]["lastError"], json!(null));
}

async fn allow(store: &Store) {
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(
        &mut conn,
        "poster",
        &AgentPolicy::new([CATEGORY]),
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
}
