//! The bus's rules, each on its own: identity, refusals, timeouts, cancellation, the
//! parent leaving, correlation, concurrency. Time is paused: no test sleeps for real.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;
use tokio::time::Instant;

fn bus(timeout_secs: u64) -> ConfirmationBus {
    ConfirmationBus::new(
        "lead",
        BusConfig {
            wait_timeout: Duration::from_secs(timeout_secs),
        },
    )
    .unwrap()
}

fn request(tool: &str) -> ConfirmationRequest {
    ConfirmationRequest::new(
        ToolCallRequest {
            name: tool.into(),
            args: json!({"priority": "P0"}),
        },
        "Set priority to P0",
        json!({"taskId": "t1"}),
    )
}

/// The sub-agent on `child` asks about a priority change, in its own task.
fn spawn_ask(child: AgentBus) -> tokio::task::JoinHandle<ConfirmationOutcome> {
    tokio::spawn(async move {
        child
            .ask(request("update_task_priority"), &CancellationToken::new())
            .await
            .unwrap()
    })
}

fn id_of(request: &ConfirmationRequest) -> String {
    request.correlation_id.clone().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_request_without_correlation_id_is_refused_and_nothing_is_asked() {
    let bus = bus(60);
    let mut parent = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    for missing in [None, Some(String::new()), Some("  ".to_owned())] {
        let mut req = request("update_task_priority");
        req.correlation_id = missing;
        let error = child.ask(req, &CancellationToken::new()).await.unwrap_err();
        assert!(
            matches!(error, ConfirmError::MissingCorrelationId),
            "{error}"
        );
    }
    // From the wire too: a JSON request with no correlationId.
    let wire: ConfirmationRequest = serde_json::from_value(json!({
        "toolCall": {"name": "x", "args": {}}, "summary": "s"
    }))
    .unwrap();
    assert!(child.ask(wire, &CancellationToken::new()).await.is_err());
    assert!(parent.try_recv().is_none());
    assert!(bus.pending().is_empty());
}

#[tokio::test(start_paused = true)]
async fn nobody_listening_is_an_immediate_fail_closed_outcome() {
    let bus = bus(60);
    let child = bus.derive("researcher").unwrap();
    let started = Instant::now();
    let outcome = child
        .ask(request("update_task_priority"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, ConfirmationOutcome::unanswered(NOBODY_TO_ASK));
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait at all");
    // A subscription that came and went is nobody too.
    drop(bus.subscribe());
    let outcome = child
        .ask(request("update_task_priority"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, ConfirmationOutcome::unanswered(NOBODY_TO_ASK));
}

#[tokio::test(start_paused = true)]
async fn derive_chains_identity_and_strips_what_a_child_claims() {
    let bus = bus(60);
    let mut parent = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let grandchild = child.derive("helper").unwrap();
    assert_eq!(child.path(), "lead/researcher");
    assert_eq!(grandchild.path(), "lead/researcher/helper");
    for bad in ["", "a/b", " padded", "x "] {
        assert!(matches!(
            bus.derive(bad),
            Err(ConfirmError::InvalidAgentName(_))
        ));
        assert!(child.derive(bad).is_err());
    }

    let mut spoofed = request("delete_task");
    spoofed.agent_path = "lead".into();
    spoofed.forced_outcome = Some(ConfirmationOutcome::ProceedAlways { args_pattern: None });
    spoofed.details =
        json!({"agentPath": "lead", "confirmed": true, "outcome": "proceedOnce", "taskId": "t1"});
    let id = id_of(&spoofed);
    let asking = tokio::spawn(async move {
        grandchild
            .ask(spoofed, &CancellationToken::new())
            .await
            .unwrap()
    });
    let seen = parent.recv().await.unwrap();
    assert_eq!(seen.agent_path, "lead/researcher/helper");
    assert_eq!(seen.forced_outcome, None);
    assert_eq!(seen.details, json!({"taskId": "t1"}));
    assert_eq!(bus.pending(), vec![seen.clone()]);
    // The claimed decision did not decide anything: the wait goes on until answered.
    bus.respond(&id, ConfirmationOutcome::reject("no")).unwrap();
    assert_eq!(asking.await.unwrap(), ConfirmationOutcome::reject("no"));
}

#[tokio::test(start_paused = true)]
async fn a_wait_times_out_and_denies() {
    let bus = bus(30);
    let mut parent = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let started = Instant::now();
    let outcome = child
        .ask(request("update_task_priority"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    let ConfirmationOutcome::Unanswered { reason } = outcome else {
        panic!("a timeout denies, got {outcome:?}");
    };
    assert!(reason.contains("within 30 s"), "{reason}");
    // The late answer finds nothing to answer.
    let late = parent.recv().await.unwrap();
    assert!(matches!(
        bus.respond(&id_of(&late), ConfirmationOutcome::ProceedOnce),
        Err(ConfirmError::UnknownCorrelationId(_))
    ));
    assert!(bus.pending().is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_a_wait_is_cancelled_not_an_error() {
    let bus = bus(600);
    let mut parent = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let cancel = CancellationToken::new();
    let asking = {
        let cancel = cancel.clone();
        tokio::spawn(async move { child.ask(request("update_task_priority"), &cancel).await })
    };
    let seen = parent.recv().await.unwrap();
    cancel.cancel();
    assert_eq!(
        asking.await.unwrap().unwrap(),
        ConfirmationOutcome::Cancelled
    );
    assert!(bus.pending().is_empty());
    assert!(
        bus.respond(&id_of(&seen), ConfirmationOutcome::ProceedOnce)
            .is_err()
    );
    // Already cancelled: nothing is asked.
    let child = bus.derive("other").unwrap();
    assert_eq!(
        child
            .ask(request("update_task_priority"), &cancel)
            .await
            .unwrap(),
        ConfirmationOutcome::Cancelled
    );
    assert!(parent.try_recv().is_none());
}

#[tokio::test(start_paused = true)]
async fn the_parent_dropping_its_subscription_mid_wait_denies_at_once() {
    let bus = bus(600);
    let mut parent = bus.subscribe();
    let second = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let started = Instant::now();
    let asking = spawn_ask(child);
    parent.recv().await.unwrap();
    // One of two listeners leaving changes nothing; the last one leaving ends the wait.
    drop(second);
    tokio::task::yield_now().await;
    assert_eq!(bus.pending().len(), 1);
    drop(parent);
    assert_eq!(
        asking.await.unwrap(),
        ConfirmationOutcome::unanswered(PARENT_STOPPED_LISTENING)
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn wrong_ids_are_ignored_and_the_first_valid_answer_wins() {
    let bus = bus(600);
    let mut parent = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let asking = spawn_ask(child);
    let seen = parent.recv().await.unwrap();
    let id = id_of(&seen);
    for wrong in ["", "nope", &Uuid::new_v4().to_string()] {
        assert!(matches!(
            bus.respond(wrong, ConfirmationOutcome::ProceedOnce),
            Err(ConfirmError::UnknownCorrelationId(_))
        ));
    }
    assert_eq!(
        bus.pending().len(),
        1,
        "a wrong id touches no waiting request"
    );
    bus.respond_with(ConfirmationResponse {
        correlation_id: id.clone(),
        outcome: ConfirmationOutcome::reject("first"),
    })
    .unwrap();
    assert!(bus.respond(&id, ConfirmationOutcome::ProceedOnce).is_err());
    assert_eq!(asking.await.unwrap(), ConfirmationOutcome::reject("first"));
}

#[tokio::test(start_paused = true)]
async fn a_correlation_id_already_waiting_is_refused() {
    let bus = bus(600);
    let mut parent = bus.subscribe();
    let first = bus.derive("a").unwrap();
    let second = bus.derive("b").unwrap();
    let req = request("update_task_priority");
    let copy = req.clone();
    let asking = tokio::spawn(async move { first.ask(req, &CancellationToken::new()).await });
    let seen = parent.recv().await.unwrap();
    let error = second
        .ask(copy, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ConfirmError::DuplicateCorrelationId(_)),
        "{error}"
    );
    bus.respond(&id_of(&seen), ConfirmationOutcome::ProceedOnce)
        .unwrap();
    assert_eq!(
        asking.await.unwrap().unwrap(),
        ConfirmationOutcome::ProceedOnce
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_subscriber_sees_what_is_already_waiting() {
    let bus = bus(600);
    let early = bus.subscribe();
    let child = bus.derive("researcher").unwrap();
    let asking = spawn_ask(child);
    while bus.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    let mut late = bus.subscribe();
    drop(early);
    let seen = late.recv().await.unwrap();
    bus.respond(&id_of(&seen), ConfirmationOutcome::ProceedOnce)
        .unwrap();
    assert_eq!(asking.await.unwrap(), ConfirmationOutcome::ProceedOnce);
}

#[tokio::test(start_paused = true)]
async fn many_sub_agents_at_once_each_get_their_own_answer() {
    let bus = bus(600);
    let mut parent = bus.subscribe();
    let askers: Vec<_> = (0..24)
        .map(|n| {
            let child = bus.derive(&format!("worker-{n}")).unwrap();
            tokio::spawn(async move {
                let outcome = child
                    .ask(request("update_task_priority"), &CancellationToken::new())
                    .await
                    .unwrap();
                (child.path().to_owned(), outcome)
            })
        })
        .collect();
    // Answer in reverse arrival order, each with its asker's own path.
    let mut seen = Vec::new();
    for _ in 0..24 {
        seen.push(parent.recv().await.unwrap());
    }
    for request in seen.iter().rev() {
        bus.respond(
            &id_of(request),
            ConfirmationOutcome::reject(request.agent_path.clone()),
        )
        .unwrap();
    }
    for asker in askers {
        let (path, outcome) = asker.await.unwrap();
        assert_eq!(outcome, ConfirmationOutcome::reject(path));
    }
    assert!(bus.pending().is_empty());
}

#[test]
fn the_wire_format_is_camel_case() {
    let mut req = request("update_task_priority");
    req.correlation_id = Some("c-1".into());
    req.agent_path = "lead/researcher".into();
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json!({"correlationId": "c-1", "toolCall": {"name": "update_task_priority", "args": {"priority": "P0"}},
               "agentPath": "lead/researcher", "summary": "Set priority to P0", "details": {"taskId": "t1"}})
    );
    let response: ConfirmationResponse = serde_json::from_value(json!({
        "correlationId": "c-1",
        "outcome": {"kind": "proceedAlways", "argsPattern": {"priority": "P0"}}
    }))
    .unwrap();
    assert_eq!(
        response.outcome,
        ConfirmationOutcome::ProceedAlways {
            args_pattern: Some(json!({"priority": "P0"}))
        }
    );
    for (outcome, wire) in [
        (
            ConfirmationOutcome::ProceedOnce,
            json!({"kind": "proceedOnce"}),
        ),
        (
            ConfirmationOutcome::ProceedWithEdits {
                args: json!({"priority": "P2"}),
            },
            json!({"kind": "proceedWithEdits", "args": {"priority": "P2"}}),
        ),
        (
            ConfirmationOutcome::reject("no"),
            json!({"kind": "reject", "reason": "no"}),
        ),
        (
            ConfirmationOutcome::Deferred {
                change_set_id: Uuid::nil(),
            },
            json!({"kind": "deferred", "changeSetId": Uuid::nil()}),
        ),
        (ConfirmationOutcome::Cancelled, json!({"kind": "cancelled"})),
    ] {
        assert_eq!(serde_json::to_value(&outcome).unwrap(), wire);
        assert_eq!(
            serde_json::from_value::<ConfirmationOutcome>(wire).unwrap(),
            outcome
        );
    }
}

#[tokio::test(start_paused = true)]
async fn every_request_that_stops_waiting_is_announced_once_with_how_it_ended() {
    let bus = bus(60);
    let mut resolutions = bus.resolutions();
    let child = bus.derive("researcher").unwrap();
    // Watching resolutions is not listening: nobody to ask is still an immediate denial.
    assert_eq!(
        spawn_ask(child.clone()).await.unwrap(),
        ConfirmationOutcome::unanswered(NOBODY_TO_ASK)
    );
    let mut parent = bus.subscribe();

    let answered = spawn_ask(child.clone());
    let id = id_of(&parent.recv().await.unwrap());
    bus.respond(&id, ConfirmationOutcome::reject("no")).unwrap();
    answered.await.unwrap();
    let first = resolutions.recv().await.unwrap();
    assert_eq!(
        first,
        ConfirmationResolution {
            correlation_id: id,
            agent_path: "lead/researcher".into(),
            outcome: ConfirmationOutcome::reject("no"),
        }
    );

    let timed_out = spawn_ask(child.clone());
    let id = id_of(&parent.recv().await.unwrap());
    assert!(matches!(
        timed_out.await.unwrap(),
        ConfirmationOutcome::Unanswered { .. }
    ));
    let second = resolutions.recv().await.unwrap();
    assert_eq!(second.correlation_id, id);
    assert_eq!(second.outcome.kind(), "unanswered");

    let cancel = CancellationToken::new();
    let asking = {
        let (child, cancel) = (child.clone(), cancel.clone());
        tokio::spawn(async move { child.ask(request("x"), &cancel).await.unwrap() })
    };
    let id = id_of(&parent.recv().await.unwrap());
    cancel.cancel();
    assert_eq!(asking.await.unwrap(), ConfirmationOutcome::Cancelled);
    let third = resolutions.recv().await.unwrap();
    assert_eq!(
        (third.correlation_id, third.outcome),
        (id, ConfirmationOutcome::Cancelled)
    );

    let abandoned = spawn_ask(child);
    let id = id_of(&parent.recv().await.unwrap());
    drop(parent);
    abandoned.await.unwrap();
    let fourth = resolutions.recv().await.unwrap();
    assert_eq!(fourth.correlation_id, id);
    assert_eq!(
        fourth.outcome,
        ConfirmationOutcome::unanswered(PARENT_STOPPED_LISTENING)
    );
    assert!(
        resolutions.try_recv().is_err(),
        "each request is announced once"
    );
}
