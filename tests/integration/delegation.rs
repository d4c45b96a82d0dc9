//! Delegated confirmation end to end: a sub-agent's wake, its parent answering over the
//! bus, the decision applied through the audited executor and attributed to the agent
//! path; grants; the fail-closed endings; many sub-agents at once.

use assent_confirm::{
    BusConfig, CallResult, CancellationToken, ConfirmError, ConfirmationBus, ConfirmationOutcome,
    ConfirmationRequest, NOBODY_TO_ASK, PARENT_STOPPED_LISTENING, ScheduledWake, Scheduler,
    Session, WakeRequest,
};
use assent_domain::{ChangeItemStatus, Uuid, Verdict};
use assent_journal_host::NewTask;
use assent_store::delegation::{self, GrantFilter, Revocation};
use assent_store::{audit, change_sets, decisions};
use assent_tests::{NOW, TestApp, tool_calls};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

fn parent_bus() -> ConfirmationBus {
    ConfirmationBus::new("lead", BusConfig::default()).unwrap()
}

/// The parent's session: answers the next `count` requests with `answer(request, n)`
/// and hands back what it saw. It subscribes before returning, so no request is missed.
fn parent_answers(
    bus: &ConfirmationBus,
    count: usize,
    answer: impl Fn(&ConfirmationRequest, usize) -> ConfirmationOutcome + Send + 'static,
) -> JoinHandle<Vec<ConfirmationRequest>> {
    let mut subscription = bus.subscribe();
    let bus = bus.clone();
    tokio::spawn(async move {
        let mut seen = Vec::new();
        for n in 0..count {
            let request = subscription.recv().await.unwrap();
            bus.respond(
                request.correlation_id.as_deref().unwrap(),
                answer(&request, n),
            )
            .unwrap();
            seen.push(request);
        }
        seen
    })
}

async fn sub_agent_wake(
    app: &TestApp,
    session: Session,
    task: &str,
    calls: &[(&str, Value)],
) -> ScheduledWake {
    sub_agent_wake_cancellable(app, session, task, calls, &CancellationToken::new()).await
}

/// A wake of the sub-agent `lead/researcher`, asking `bus`'s parent.
async fn researcher_wake(
    app: &TestApp,
    bus: &ConfirmationBus,
    task: &str,
    calls: &[(&str, Value)],
) -> ScheduledWake {
    let session = Session::Delegated(bus.derive("researcher").unwrap());
    sub_agent_wake(app, session, task, calls).await
}

async fn sub_agent_wake_cancellable(
    app: &TestApp,
    session: Session,
    task: &str,
    calls: &[(&str, Value)],
    cancel: &CancellationToken,
) -> ScheduledWake {
    let request = WakeRequest::new(
        "agent-1",
        assent_journal_host::task_target(task),
        Uuid::new_v4().to_string(),
        tool_calls(calls),
    );
    Scheduler::new(app.engine.clone(), session)
        .wake(request, cancel, NOW)
        .await
        .unwrap()
}

/// A grant for `lead/researcher` to run `tool` with any arguments.
async fn grant_researcher(app: &TestApp, tool: &str) {
    let mut tx = app.store.begin_write().await.unwrap();
    delegation::insert_grant(
        tx.connection(),
        &delegation::Grant {
            id: Uuid::new_v4(),
            agent_id: Some("agent-1".into()),
            agent_path: "lead/researcher".into(),
            tool_name: tool.into(),
            args_pattern: None,
            correlation_id: "c".into(),
            created_at: NOW,
            revoked_at: None,
            session_id: None,
            call_pattern: None,
        },
        NOW,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// A `work` task at priority P2.
async fn p2_work_task(app: &TestApp, title: &str) -> String {
    app.task(NewTask {
        title: title.into(),
        category: Some("work".into()),
        priority: Some("P2".into()),
        ..NewTask::default()
    })
    .await
}

fn priority(value: &str) -> [(&'static str, Value); 1] {
    [("update_task_priority", json!({"priority": value}))]
}

async fn item_status(app: &TestApp, set: Uuid) -> ChangeItemStatus {
    let mut conn = app.store.read_connection().await.unwrap();
    change_sets::require(&mut conn, set).await.unwrap().items[0].status
}

async fn delegations(app: &TestApp, set: Uuid) -> Vec<delegation::Delegation> {
    let mut conn = app.store.read_connection().await.unwrap();
    delegation::for_change_set(&mut conn, set).await.unwrap()
}

#[tokio::test]
async fn a_parent_confirms_and_the_decision_is_audited_and_attributed_to_the_agent_path() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let parent = parent_answers(&bus, 1, |_, _| ConfirmationOutcome::ProceedOnce);
    let session = Session::Delegated(bus.derive("researcher").unwrap());
    let scheduled = sub_agent_wake(&app, session, &task, &priority("P0")).await;

    let seen = parent.await.unwrap();
    assert_eq!(seen[0].agent_path, "lead/researcher");
    assert_eq!(seen[0].tool_call.name, "update_task_priority");
    assert_eq!(
        seen[0].summary,
        scheduled.wake.change_set.as_ref().unwrap().items[0].human_summary
    );
    let call = &scheduled.calls[0];
    assert_eq!(call.strategy, "delegated");
    assert!(
        matches!(call.result, CallResult::Applied(_)),
        "{:?}",
        call.result
    );
    assert_eq!(
        call.reply(),
        "Confirmed by the parent session. Priority set to P0."
    );
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P0"));

    let set = scheduled.wake.change_set.unwrap().id;
    let mut conn = app.store.read_connection().await.unwrap();
    let decided = decisions::for_change_set(&mut conn, set).await.unwrap();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].verdict, Verdict::Confirmed);
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
    drop(conn);
    let recorded = delegations(&app, set).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].agent_path, "lead/researcher");
    assert_eq!(recorded[0].correlation_id, call.correlation_ids[0]);
    assert_eq!(
        seen[0].correlation_id.as_deref(),
        Some(call.correlation_ids[0].as_str())
    );
    assert_eq!(recorded[0].outcome, "proceedOnce");
    assert_eq!(recorded[0].decision_id, Some(decided[0].id));
    assent_tests::assert_proven(&app.store, "a parent's confirmation").await;
}

#[tokio::test]
async fn a_parent_rejects_with_a_reason_fed_back_to_the_model() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let parent = parent_answers(&bus, 1, |_, _| {
        ConfirmationOutcome::reject("  P0 is for outages ")
    });
    let scheduled = researcher_wake(&app, &bus, &task, &priority("P0")).await;
    parent.await.unwrap();
    let call = &scheduled.calls[0];
    let CallResult::Rejected(decision) = &call.result else {
        panic!("rejected, got {:?}", call.result);
    };
    assert_eq!(decision.reason.as_deref(), Some("P0 is for outages"));
    assert_eq!(
        call.reply(),
        "Rejected by the parent session (reason: \"P0 is for outages\"). Do not propose it again."
    );
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P1"));
    let recorded = delegations(&app, decision.change_set_id).await;
    assert_eq!(recorded[0].outcome, "reject");
    assert_eq!(recorded[0].decision_id, Some(decision.id));
    assert_eq!(recorded[0].reason.as_deref(), Some("P0 is for outages"));
}

#[tokio::test]
async fn an_invalid_edit_is_asked_again_under_a_fresh_correlation_id() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let parent = parent_answers(&bus, 2, |_, n| ConfirmationOutcome::ProceedWithEdits {
        args: if n == 0 {
            json!({"priority": "urgent!"})
        } else {
            json!({"priority": "P2"})
        },
    });
    let scheduled = researcher_wake(&app, &bus, &task, &priority("P0")).await;
    let seen = parent.await.unwrap();
    let call = &scheduled.calls[0];
    assert!(
        matches!(call.result, CallResult::Applied(_)),
        "{:?}",
        call.result
    );
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P2"));
    assert_eq!(call.correlation_ids.len(), 2);
    assert_ne!(call.correlation_ids[0], call.correlation_ids[1]);
    assert_eq!(
        seen[1].correlation_id.as_deref(),
        Some(call.correlation_ids[1].as_str())
    );
    assert!(seen[0].details.get("note").is_none());
    let note = seen[1].details["note"].as_str().unwrap();
    assert!(
        note.starts_with("The edited arguments were invalid"),
        "{note}"
    );

    let set = scheduled.wake.change_set.unwrap().id;
    let recorded = delegations(&app, set).await;
    assert_eq!(
        recorded
            .iter()
            .map(|d| d.outcome.as_str())
            .collect::<Vec<_>>(),
        ["proceedWithEdits", "proceedWithEdits"]
    );
    assert_eq!(
        recorded.iter().filter(|d| d.decision_id.is_some()).count(),
        1
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let decided = decisions::for_change_set(&mut conn, set).await.unwrap();
    assert_eq!(decided[0].edited_args, Some(json!({"priority": "P2"})));
}

#[tokio::test]
async fn always_stores_a_grant_used_on_the_next_call_until_revoked() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let parent = parent_answers(&bus, 1, |_, _| ConfirmationOutcome::ProceedAlways {
        args_pattern: Some(json!({"priority": "P0"})),
    });
    let researcher = bus.derive("researcher").unwrap();
    let first = sub_agent_wake(
        &app,
        Session::Delegated(researcher.clone()),
        &task,
        &priority("P0"),
    )
    .await;
    parent.await.unwrap();
    assert!(matches!(first.calls[0].result, CallResult::Applied(_)));
    let mut conn = app.store.read_connection().await.unwrap();
    let grants = delegation::list_grants(&mut conn, &GrantFilter::default())
        .await
        .unwrap();
    drop(conn);
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].agent_path, "lead/researcher");
    assert_eq!(grants[0].tool_name, "update_task_priority");
    assert_eq!(grants[0].args_pattern, Some(json!({"priority": "P0"})));
    assert_eq!(grants[0].correlation_id, first.calls[0].correlation_ids[0]);

    // Nobody is listening now: only the grant can confirm the next matching call.
    let other = p2_work_task(&app, "Third").await;
    let granted = sub_agent_wake(
        &app,
        Session::Delegated(researcher.clone()),
        &other,
        &priority("P0"),
    )
    .await;
    let call = &granted.calls[0];
    assert_eq!(call.strategy, "autoApprove");
    assert_eq!(call.grant_id, Some(grants[0].id));
    assert!(
        matches!(call.result, CallResult::Applied(_)),
        "{:?}",
        call.result
    );
    assert_eq!(app.load(&other).await.priority.as_deref(), Some("P0"));
    let recorded = delegations(&app, granted.wake.change_set.unwrap().id).await;
    assert_eq!(recorded[0].outcome, "granted");
    assert_eq!(recorded[0].grant_id, Some(grants[0].id));
    assert!(recorded[0].decision_id.is_some());

    // Outside the pattern, or another agent: asked (and nobody answers).
    let outside = sub_agent_wake(
        &app,
        Session::Delegated(researcher.clone()),
        &other,
        &priority("P3"),
    )
    .await;
    assert_eq!(outside.calls[0].strategy, "delegated");
    let sibling = sub_agent_wake(
        &app,
        Session::Delegated(bus.derive("writer").unwrap()),
        &task,
        &priority("P2"),
    )
    .await;
    assert_eq!(sibling.calls[0].strategy, "delegated");

    let mut tx = app.store.begin_write().await.unwrap();
    assert!(matches!(
        delegation::revoke_grant(tx.connection(), grants[0].id, NOW)
            .await
            .unwrap(),
        Revocation::Revoked(_)
    ));
    assert!(matches!(
        delegation::revoke_grant(tx.connection(), grants[0].id, NOW)
            .await
            .unwrap(),
        Revocation::AlreadyRevoked(_)
    ));
    assert_eq!(
        delegation::revoke_grant(tx.connection(), Uuid::new_v4(), NOW)
            .await
            .unwrap(),
        Revocation::NotFound
    );
    tx.commit().await.unwrap();
    let fourth = p2_work_task(&app, "Fourth").await;
    let revoked = sub_agent_wake(
        &app,
        Session::Delegated(researcher),
        &fourth,
        &priority("P0"),
    )
    .await;
    assert_eq!(revoked.calls.len(), 1);
    assert!(
        revoked
            .calls
            .iter()
            .all(|c| c.strategy == "delegated" && c.grant_id.is_none())
    );
    assert_eq!(app.load(&fourth).await.priority.as_deref(), Some("P2"));
    assent_tests::assert_proven(&app.store, "grants used and revoked").await;
}
#[tokio::test]
async fn a_grant_never_widens_the_category_allowlist() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let researcher = bus.derive("researcher").unwrap();
    grant_researcher(&app, "update_task_priority").await;
    // Queue the call while the agent may touch `work`, then take that away.
    let set = app.wake(&task, &priority("P0")).await.change_set.unwrap();
    app.agent("agent-1", &["home"]).await;
    let call = Scheduler::new(app.engine.clone(), Session::Delegated(researcher))
        .confirm_item(&set, 0, &CancellationToken::new(), NOW)
        .await
        .unwrap();
    assert_eq!(call.strategy, "autoApprove");
    assert!(
        matches!(
            call.result,
            CallResult::Refused(ConfirmError::PolicyDenied { .. })
        ),
        "{:?}",
        call.result
    );
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P1"));
    assert_eq!(item_status(&app, set.id).await, ChangeItemStatus::Pending);
    let mut conn = app.store.read_connection().await.unwrap();
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task)),
        100,
    )
    .await
    .unwrap();
    assert_eq!(trail.last().unwrap().kind.as_str(), "policyDenied");
}

#[tokio::test]
async fn nobody_listening_leaves_the_item_pending_with_the_reason_recorded() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let scheduled = researcher_wake(&app, &bus, &task, &priority("P0")).await;
    let call = &scheduled.calls[0];
    assert_eq!(
        call.outcome,
        Some(ConfirmationOutcome::unanswered(NOBODY_TO_ASK))
    );
    assert_eq!(
        call.reply(),
        format!("Not run: {NOBODY_TO_ASK}. The proposal stays queued for user review.")
    );
    let set = scheduled.wake.change_set.unwrap().id;
    assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);
    let recorded = delegations(&app, set).await;
    assert_eq!(recorded[0].outcome, "unanswered");
    assert_eq!(recorded[0].reason.as_deref(), Some(NOBODY_TO_ASK));
    assert_eq!(recorded[0].decision_id, None);
    let mut conn = app.store.read_connection().await.unwrap();
    assert!(
        decisions::for_change_set(&mut conn, set)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_headless_session_refuses_and_an_interactive_one_defers() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let headless = sub_agent_wake(&app, Session::Headless, &task, &priority("P0")).await;
    let call = &headless.calls[0];
    assert_eq!(call.strategy, "nonInteractive");
    assert!(matches!(
        call.result,
        CallResult::Refused(ConfirmError::NoInteractiveSession)
    ));
    assert_eq!(
        call.reply(),
        "Not run: confirmation required but no interactive session or delegation available. The proposal stays queued for user review."
    );
    let set = headless.wake.change_set.unwrap().id;
    assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);

    let interactive = sub_agent_wake(&app, Session::Interactive, &task, &priority("P3")).await;
    let call = &interactive.calls[0];
    let set = interactive.wake.change_set.unwrap().id;
    assert_eq!(
        call.outcome,
        Some(ConfirmationOutcome::Deferred { change_set_id: set })
    );
    assert_eq!(call.reply(), "Proposal queued for user review.");
    assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);
    assert!(
        delegations(&app, set).await.is_empty(),
        "a person's own review is not a delegation"
    );
}

#[tokio::test]
async fn cancelling_a_wait_leaves_the_item_pending_and_is_not_an_error() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let mut parent = bus.subscribe();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let request = parent.recv().await.unwrap();
            cancel.cancel();
            (parent, request)
        })
    };
    let scheduled = sub_agent_wake_cancellable(
        &app,
        Session::Delegated(bus.derive("researcher").unwrap()),
        &task,
        &priority("P0"),
        &cancel,
    )
    .await;
    let (_parent, request) = canceller.await.unwrap();
    let call = &scheduled.calls[0];
    assert_eq!(call.outcome, Some(ConfirmationOutcome::Cancelled));
    assert!(matches!(call.result, CallResult::Waiting { reason: None }));
    assert!(
        bus.respond(
            request.correlation_id.as_deref().unwrap(),
            ConfirmationOutcome::ProceedOnce
        )
        .is_err()
    );
    let set = scheduled.wake.change_set.unwrap().id;
    assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);
    assert_eq!(delegations(&app, set).await[0].outcome, "cancelled");
    assert_eq!(app.load(&task).await.priority.as_deref(), Some("P1"));

    // Once cancelled, nothing more is decided in that wake, not even by a grant.
    grant_researcher(&app, "set_task_status").await;
    let after = sub_agent_wake_cancellable(
        &app,
        Session::Delegated(bus.derive("researcher").unwrap()),
        &task,
        &[("set_task_status", json!({"status": "BLOCKED"}))],
        &cancel,
    )
    .await;
    assert_eq!(after.calls[0].strategy, "autoApprove");
    assert_eq!(after.calls[0].outcome, Some(ConfirmationOutcome::Cancelled));
    assert_eq!(app.load(&task).await.status, "OPEN");
}

#[tokio::test]
async fn a_parent_dropping_its_subscription_mid_wait_denies_and_keeps_the_item() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let bus = parent_bus();
    let mut parent = bus.subscribe();
    let leaver = tokio::spawn(async move {
        parent.recv().await.unwrap();
        drop(parent);
    });
    let scheduled = researcher_wake(&app, &bus, &task, &priority("P0")).await;
    leaver.await.unwrap();
    let call = &scheduled.calls[0];
    assert_eq!(
        call.outcome,
        Some(ConfirmationOutcome::unanswered(PARENT_STOPPED_LISTENING))
    );
    let set = scheduled.wake.change_set.unwrap().id;
    assert_eq!(item_status(&app, set).await, ChangeItemStatus::Pending);
    assert_eq!(
        delegations(&app, set).await[0].reason.as_deref(),
        Some(PARENT_STOPPED_LISTENING)
    );
}

#[tokio::test]
async fn many_sub_agents_ask_at_once_and_each_gets_its_own_answer() {
    const AGENTS: usize = 8;
    let app = TestApp::spawn().await;
    app.scene().await;
    let mut tasks = Vec::new();
    for n in 0..AGENTS {
        tasks.push(p2_work_task(&app, &format!("Task {n}")).await);
    }
    let bus = parent_bus();
    // Even workers are confirmed; odd ones rejected with their own path as the reason.
    let parent = parent_answers(&bus, AGENTS, |request, _| {
        let n: usize = request
            .agent_path
            .rsplit('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if n.is_multiple_of(2) {
            ConfirmationOutcome::ProceedOnce
        } else {
            ConfirmationOutcome::reject(request.agent_path.clone())
        }
    });
    let mut workers = Vec::new();
    for (n, task) in tasks.iter().enumerate() {
        let app_engine = app.engine.clone();
        let session = Session::Delegated(bus.derive(&format!("worker-{n}")).unwrap());
        let task = task.clone();
        workers.push(tokio::spawn(async move {
            let request = WakeRequest::new(
                "agent-1",
                assent_journal_host::task_target(&task),
                Uuid::new_v4().to_string(),
                tool_calls(&priority("P0")),
            );
            Scheduler::new(app_engine, session)
                .wake(request, &CancellationToken::new(), NOW)
                .await
                .unwrap()
        }));
    }
    let mut results = Vec::new();
    for worker in workers {
        results.push(worker.await.unwrap());
    }
    assert_eq!(parent.await.unwrap().len(), AGENTS);
    for (n, (scheduled, task)) in results.iter().zip(&tasks).enumerate() {
        let call = &scheduled.calls[0];
        let set = scheduled.wake.change_set.as_ref().unwrap().id;
        let recorded = delegations(&app, set).await;
        assert_eq!(recorded[0].agent_path, format!("lead/worker-{n}"));
        if n.is_multiple_of(2) {
            assert!(
                matches!(call.result, CallResult::Applied(_)),
                "worker {n}: {:?}",
                call.result
            );
            assert_eq!(app.load(task).await.priority.as_deref(), Some("P0"));
        } else {
            let CallResult::Rejected(decision) = &call.result else {
                panic!("worker {n}: {:?}", call.result)
            };
            assert_eq!(
                decision.reason.as_deref(),
                Some(format!("lead/worker-{n}").as_str())
            );
            assert_eq!(app.load(task).await.priority.as_deref(), Some("P2"));
        }
    }
}
