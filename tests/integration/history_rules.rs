//! Rules over the session's history (issue 57 point 3): a rate, a sequence and a
//! running total, each judged at the one decision point (the wake, which the hook, the
//! gateway and `/api/calls` all go through) on what the agent ran before, in the
//! decision's transaction; on SQLite and PostgreSQL. Their matrix rows: each condition
//! on the wake (below and at its bound, inside one wake and across wakes), on a
//! person's confirmation of what it queued, and two concurrent wakes counting one
//! window; the proof (`audit verify`) holds after each.

use assent_confirm::{ItemRef, RuleChange, WakeOutcome, WakeRequest};
use assent_domain::Uuid;
use assent_journal_host::{NewTask, task_target};
use assent_store::audit;
use assent_tests::{Fault, NOW, TestApp, assert_proven, backends, tool_calls};
use assent_tools::{AuditKind, RuleAction, When};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

async fn task(app: &TestApp) -> String {
    app.task(NewTask {
        title: "History".into(),
        category: Some("work".into()),
        priority: Some("P1".into()),
        ..NewTask::default()
    })
    .await
}

async fn wake_at(
    app: &TestApp,
    agent: &str,
    task: &str,
    calls: &[(&str, Value)],
    at: OffsetDateTime,
) -> WakeOutcome {
    let request = WakeRequest::new(
        agent,
        task_target(task),
        Uuid::new_v4().to_string(),
        tool_calls(calls),
    );
    app.engine.wakes().wake(request, at).await.unwrap()
}

async fn rule(app: &TestApp, agent: &str, change: RuleChange) {
    app.engine.change_rule(agent, &change, NOW).await.unwrap();
}

fn conditional(tool: &str, action: RuleAction, when: When) -> RuleChange {
    RuleChange {
        condition: Some(when),
        ..RuleChange::new(tool, action)
    }
}

/// The `allowedBy` of the newest result record of `task`.
async fn allowed_by(app: &TestApp, task: &str) -> Value {
    let mut conn = app.store.read_connection().await.unwrap();
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(task_target(task)),
        50,
    )
    .await
    .unwrap();
    trail
        .iter()
        .rev()
        .find(|r| r.kind == AuditKind::Result)
        .and_then(|r| r.allowed_by.clone())
        .expect("a result record with allowedBy")
}

#[tokio::test]
async fn a_rate_asks_from_the_nth_call_in_its_window_and_its_quorum_applies_then() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let t = task(&app).await;
        // Allowed, but asked (by two people) once two ran in the hour.
        rule(
            &app,
            "agent-1",
            RuleChange::new("update_task_priority", RuleAction::Allow),
        )
        .await;
        let rate = RuleChange {
            approvals: Some(2),
            ..conditional(
                "update_task_*",
                RuleAction::Ask,
                When::After {
                    count: 2,
                    window_seconds: 3_600,
                },
            )
        };
        rule(&app, "agent-1", rate).await;
        let priority = |p: &str| ("update_task_priority", json!({"priority": p}));
        // Inside one wake: the first two run, the third is asked, by two people.
        let wake = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P0"), priority("P2"), priority("P3")],
            NOW,
        )
        .await;
        let set = wake.change_set.expect("the third is asked");
        assert_eq!(set.items.len(), 1, "{:?}", wake.responses);
        assert_eq!(set.items[0].args, json!({"priority": "P3"}));
        assert_eq!(set.items[0].approvals_needed, Some(2));
        assert_eq!(app.load(&t).await.priority.as_deref(), Some("P2"));
        // Across wakes: still two in the window, asked.
        let later = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P0")],
            NOW + Duration::minutes(30),
        )
        .await;
        assert!(later.change_set.is_some(), "{:?}", later.responses);
        // An hour after the first two, the window holds none: allowed again.
        let after = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P0")],
            NOW + Duration::minutes(61),
        )
        .await;
        assert!(after.change_set.is_none(), "{:?}", after.responses);
        assert_eq!(app.load(&t).await.priority.as_deref(), Some("P0"));
        // Another agent's calls are its own.
        app.agent("agent-2", &["work"]).await;
        rule(
            &app,
            "agent-2",
            RuleChange::new("update_task_priority", RuleAction::Allow),
        )
        .await;
        let other = wake_at(
            &app,
            "agent-2",
            &t,
            &[priority("P3")],
            NOW + Duration::minutes(1),
        )
        .await;
        assert!(other.change_set.is_none(), "{:?}", other.responses);
        // Confirmed by two people, the asked call runs.
        let item = ItemRef::new(set.id, 0);
        let at = NOW + Duration::minutes(62);
        app.engine
            .confirmations()
            .by("alice")
            .confirm_item(item, at)
            .await
            .unwrap();
        let second = app
            .engine
            .confirmations()
            .by("bob")
            .confirm_item(item, at)
            .await
            .unwrap();
        assert!(second.execution.is_success(), "{:?}", second.execution);
        assert_proven(&app.store, "a rate").await;
    }
}

#[tokio::test]
async fn a_sequence_allows_only_after_the_call_before_ran_and_succeeded_in_its_window() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let t = task(&app).await;
        rule(
            &app,
            "agent-1",
            RuleChange::new("set_task_title", RuleAction::Allow),
        )
        .await;
        let only = conditional(
            "update_task_priority",
            RuleAction::Allow,
            When::OnlyAfter {
                pattern: "set_task_title".into(),
                within_seconds: 900,
                succeeded: true,
            },
        );
        rule(&app, "agent-1", only).await;
        let priority = |p: &str| ("update_task_priority", json!({"priority": p}));
        // Nothing ran before: the allow does not apply, the tool's mode asks.
        let first = wake_at(&app, "agent-1", &t, &[priority("P0")], NOW).await;
        assert!(first.change_set.is_some(), "{:?}", first.responses);
        // The title ran (and succeeded): the priority runs unasked, its record names the
        // rule and its condition.
        let title = ("set_task_title", json!({"title": "Renamed"}));
        let ran = wake_at(&app, "agent-1", &t, &[title], NOW + Duration::minutes(1)).await;
        assert!(ran.change_set.is_none(), "{:?}", ran.responses);
        let second = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P2")],
            NOW + Duration::minutes(2),
        )
        .await;
        assert!(second.change_set.is_none(), "{:?}", second.responses);
        assert_eq!(app.load(&t).await.priority.as_deref(), Some("P2"));
        let by = allowed_by(&app, &t).await;
        assert_eq!(by["rule"]["pattern"], "update_task_priority", "{by}");
        assert_eq!(by["rule"]["condition"]["when"]["kind"], "onlyAfter", "{by}");
        // Out of the window: asked again.
        let late = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P3")],
            NOW + Duration::minutes(17),
        )
        .await;
        assert!(late.change_set.is_some(), "{:?}", late.responses);
        assert_proven(&app.store, "a sequence").await;
    }
    // A call before that failed does not count with --succeeded.
    let app = TestApp::with_fault("set_task_title", Fault::Fail, 1).await;
    app.agent("agent-1", &["work"]).await;
    let t = task(&app).await;
    rule(
        &app,
        "agent-1",
        RuleChange::new("set_task_title", RuleAction::Allow),
    )
    .await;
    rule(
        &app,
        "agent-1",
        conditional(
            "update_task_priority",
            RuleAction::Allow,
            When::OnlyAfter {
                pattern: "set_task_title".into(),
                within_seconds: 900,
                succeeded: true,
            },
        ),
    )
    .await;
    let failed = wake_at(
        &app,
        "agent-1",
        &t,
        &[("set_task_title", json!({"title": "X"}))],
        NOW,
    )
    .await;
    assert!(
        failed.responses[0].content.contains("unavailable"),
        "{:?}",
        failed.responses
    );
    let asked = wake_at(
        &app,
        "agent-1",
        &t,
        &[("update_task_priority", json!({"priority": "P0"}))],
        NOW + Duration::minutes(1),
    )
    .await;
    assert!(asked.change_set.is_some(), "{:?}", asked.responses);
}

#[tokio::test]
async fn a_running_total_needs_two_people_once_over_its_bound() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let t = task(&app).await;
        let u = task(&app).await;
        rule(
            &app,
            "agent-1",
            RuleChange::new("update_task_estimate", RuleAction::Allow),
        )
        .await;
        let total = RuleChange {
            approvals: Some(2),
            ..conditional(
                "update_task_est*",
                RuleAction::Ask,
                When::Total {
                    pointer: "/minutes".into(),
                    over: 100,
                    per_seconds: 86_400,
                },
            )
        };
        rule(&app, "agent-1", total).await;
        let estimate = |m: Value| ("update_task_estimate", json!({"minutes": m}));
        // 60 runs; 60 + 40 = 100 is not over; 100 + "1" (a string the schema takes) is.
        let a = wake_at(&app, "agent-1", &t, &[estimate(json!(60))], NOW).await;
        assert!(a.change_set.is_none(), "{:?}", a.responses);
        let b = wake_at(
            &app,
            "agent-1",
            &u,
            &[estimate(json!(40))],
            NOW + Duration::minutes(1),
        )
        .await;
        assert!(b.change_set.is_none(), "{:?}", b.responses);
        let c = wake_at(
            &app,
            "agent-1",
            &t,
            &[estimate(json!("1"))],
            NOW + Duration::minutes(2),
        )
        .await;
        let set = c.change_set.expect("over the bound: asked");
        assert_eq!(set.items[0].approvals_needed, Some(2));
        // A day later the window is empty again.
        let d = wake_at(
            &app,
            "agent-1",
            &t,
            &[estimate(json!(90))],
            NOW + Duration::days(1) + Duration::minutes(1),
        )
        .await;
        assert!(d.change_set.is_none(), "{:?}", d.responses);
        assert_proven(&app.store, "a running total").await;
    }
}

/// Two wakes of one agent on two targets at once, under `--after 1/1h`: they count
/// the same window one after the other (SQLite's writer, PostgreSQL's lock on the
/// agent), so exactly one runs unasked and the other is asked.
#[tokio::test]
async fn two_concurrent_calls_under_after_one_exactly_one_runs_unasked() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        for round in 0..4 {
            let agent = format!("racer-{round}");
            app.agent(&agent, &["work"]).await;
            rule(
                &app,
                &agent,
                RuleChange::new("update_task_priority", RuleAction::Allow),
            )
            .await;
            rule(
                &app,
                &agent,
                conditional(
                    "update_task_*",
                    RuleAction::Ask,
                    When::After {
                        count: 1,
                        window_seconds: 3_600,
                    },
                ),
            )
            .await;
            let (t, u) = (task(&app).await, task(&app).await);
            let call = [("update_task_priority", json!({"priority": "P0"}))];
            let (one, two) = tokio::join!(
                wake_at(&app, &agent, &t, &call, NOW),
                wake_at(&app, &agent, &u, &call, NOW)
            );
            let asked = [&one, &two]
                .iter()
                .filter(|w| w.change_set.is_some())
                .count();
            assert_eq!(
                asked, 1,
                "round {round}: {:?} / {:?}",
                one.responses, two.responses
            );
        }
        assert_proven(&app.store, "concurrent rates").await;
    }
}

#[tokio::test]
async fn a_condition_is_refused_on_a_deny_and_with_a_bad_window_and_nothing_changes() {
    let app = TestApp::spawn().await;
    app.agent("agent-1", &["work"]).await;
    let before = app
        .engine
        .agent_settings("agent-1")
        .await
        .unwrap()
        .unwrap()
        .agent;
    let bad = [
        conditional(
            "update_task_priority",
            RuleAction::Deny,
            When::After {
                count: 1,
                window_seconds: 60,
            },
        ),
        conditional(
            "update_task_priority",
            RuleAction::Ask,
            When::After {
                count: 1,
                window_seconds: 0,
            },
        ),
        conditional(
            "update_task_priority",
            RuleAction::Ask,
            When::Total {
                pointer: "minutes".into(),
                over: 1,
                per_seconds: 60,
            },
        ),
        RuleChange {
            approvals: Some(2),
            ..conditional(
                "update_task_priority",
                RuleAction::Allow,
                When::After {
                    count: 1,
                    window_seconds: 60,
                },
            )
        },
    ];
    for change in bad {
        let error = app.engine.change_rule("agent-1", &change, NOW).await;
        assert!(error.is_err(), "{change:?}");
    }
    let after = app
        .engine
        .agent_settings("agent-1")
        .await
        .unwrap()
        .unwrap()
        .agent;
    assert_eq!(before.policy, after.policy);
}

/// The proof re-derives a conditional allow from the chain: a run recorded as let
/// through by `--only-after` with no such call before it on the chain (a forged
/// record, written with the store's own chaining) fails `audit verify`'s consent rule.
#[tokio::test]
async fn a_run_whose_condition_did_not_hold_fails_the_proof() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let t = task(&app).await;
        let only = conditional(
            "update_task_priority",
            RuleAction::Allow,
            When::OnlyAfter {
                pattern: "set_task_title".into(),
                within_seconds: 900,
                succeeded: false,
            },
        );
        rule(&app, "agent-1", only).await;
        assert_proven(&app.store, "before the forgery").await;
        let policy = app
            .engine
            .agent_settings("agent-1")
            .await
            .unwrap()
            .unwrap()
            .agent
            .policy;
        let condition = policy.rules()[0].condition().cloned().expect("a condition");
        let args = json!({"priority": "P0"});
        let allowed_by = json!({"rule": {"pattern": "update_task_priority", "action": "allow",
            "condition": condition}});
        let at = NOW + Duration::minutes(5);
        let record = |kind, success| assent_tools::AuditRecord {
            operation_id: assent_domain::OperationId::for_call(
                "forged",
                "update_task_priority",
                &args,
                &t,
                0,
            ),
            run_key: "forged".into(),
            tool_name: "update_task_priority".into(),
            agent_id: "agent-1".into(),
            target_kind: "task".into(),
            target_id: t.clone(),
            kind,
            args: args.clone(),
            success,
            detail: Some("forged".into()),
            vector_clock: None,
            created_at: at,
            allowed_by: Some(allowed_by.clone()),
            refused_by: None,
            decided_by: None,
        };
        let mut tx = app.store.begin_write().await.unwrap();
        audit::insert(tx.connection(), &record(AuditKind::Action, None))
            .await
            .unwrap();
        audit::insert(tx.connection(), &record(AuditKind::Result, Some(true)))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let mut conn = app.store.read_connection().await.unwrap();
        let report =
            assent_store::proof::verify(&mut conn, &assent_store::proof::VerifyOptions::default())
                .await
                .unwrap();
        assert!(!report.verified(), "a run its condition did not allow");
        assert!(
            report.violations.iter().any(
                |v| v.rule.as_str() == "consent" && v.expected.contains("update_task_priority")
            ),
            "{:?}",
            report.violations
        );
    }
}

/// A conditional rule tried as a shadow first changes nothing (every call is still
/// asked), and its report counts only the decisions at which its condition held.
#[tokio::test]
async fn a_conditional_shadow_rule_changes_nothing_and_reports_only_where_it_held() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let t = task(&app).await;
        rule(
            &app,
            "agent-1",
            RuleChange::new("set_task_title", RuleAction::Allow),
        )
        .await;
        let since = NOW - Duration::minutes(1);
        app.engine
            .set_shadow_rule_when(
                "agent-1",
                "update_task_priority",
                RuleAction::Allow,
                Some(When::OnlyAfter {
                    pattern: "set_task_title".into(),
                    within_seconds: 900,
                    succeeded: false,
                }),
                since,
            )
            .await
            .unwrap();
        let alice = app.engine.confirmations().by("alice");
        let priority = |p: &str| ("update_task_priority", json!({"priority": p}));
        // No title before it: the shadow rule would not have applied.
        let first = wake_at(&app, "agent-1", &t, &[priority("P0")], NOW).await;
        let first = first.change_set.expect("still asked");
        alice
            .confirm_item(ItemRef::new(first.id, 0), NOW + Duration::minutes(1))
            .await
            .unwrap();
        let title = ("set_task_title", json!({"title": "Renamed"}));
        let ran = wake_at(&app, "agent-1", &t, &[title], NOW + Duration::minutes(2)).await;
        assert!(ran.change_set.is_none(), "{:?}", ran.responses);
        // After the title: it would have, and it is still asked.
        let second = wake_at(
            &app,
            "agent-1",
            &t,
            &[priority("P2")],
            NOW + Duration::minutes(3),
        )
        .await;
        let second = second.change_set.expect("a shadow rule changes nothing");
        alice
            .confirm_item(ItemRef::new(second.id, 0), NOW + Duration::minutes(4))
            .await
            .unwrap();

        let settings = app.engine.agent_settings("agent-1").await.unwrap().unwrap();
        let shadow = &settings.shadow_rules[0];
        assert!(shadow.rule.condition().is_some(), "kept with its condition");
        let calls = app.engine.past_calls(Some("agent-1"), since).await.unwrap();
        assert_eq!(calls.len(), 2);
        let window = shadow.rule.condition().expect("a condition").window();
        let runs = app
            .engine
            .agent_runs("agent-1", since - window)
            .await
            .unwrap();
        let covered = assent_tools::calls_under_condition(&calls, &runs, &shadow.rule);
        let report = assent_tools::shadow_report(&covered, "agent-1", &shadow.rule, shadow.since);
        assert_eq!((report.decisions, report.agreed), (1, 1), "{report:?}");
        // The verdict recorded beside each decision says the same: none where the
        // condition did not hold, an agreeing allow where it did.
        let mut conn = app.store.read_connection().await.unwrap();
        let mut verdicts = Vec::new();
        for set in [first.id, second.id] {
            let decided = assent_store::decisions::for_change_set(&mut conn, set)
                .await
                .unwrap();
            let shadows = assent_store::decisions::shadows_of(&mut conn, &decided)
                .await
                .unwrap();
            verdicts.push(shadows.into_iter().map(|(_, v)| v).collect::<Vec<_>>());
        }
        drop(conn);
        assert_eq!(
            verdicts,
            [vec![], vec![json!({"rule": "allow", "agreed": true})]]
        );
        assert_proven(&app.store, "a conditional shadow rule").await;
    }
}

/// A person's confirmation is a decision too: a rate's quorum set after two calls were
/// queued is judged at each confirmation on what ran before it (in confirm-all, the
/// items it ran first included), as a quorum set meanwhile binds. The matrix's rows
/// (`matrix.rs`, `Kind::Rate` and `Kind::Total`) do the same on every path.
#[tokio::test]
async fn a_rate_set_after_the_proposals_binds_their_confirmations_from_the_nth_run() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.agent("agent-1", &["work"]).await;
        let (t, u) = (task(&app).await, task(&app).await);
        let estimate = |m: u32| ("update_task_estimate", json!({"minutes": m}));
        // Two items of one set, queued before any rule.
        let wake = wake_at(
            &app,
            "agent-1",
            &t,
            &[
                estimate(30),
                ("update_task_priority", json!({"priority": "P0"})),
            ],
            NOW,
        )
        .await;
        let set = wake.change_set.expect("queued");
        assert_eq!(set.items.len(), 2);
        let rate = RuleChange {
            approvals: Some(2),
            ..conditional(
                "update_task_*",
                RuleAction::Ask,
                When::After {
                    count: 1,
                    window_seconds: 3_600,
                },
            )
        };
        rule(&app, "agent-1", rate).await;
        let at = NOW + Duration::minutes(1);
        let all = app
            .engine
            .confirmations()
            .by("alice")
            .confirm_all(set.id, at)
            .await
            .unwrap();
        let results: Vec<String> = all
            .items
            .iter()
            .map(|item| match &item.result {
                assent_confirm::ItemResult::Confirmed(outcome) => match &outcome.execution {
                    assent_confirm::ExecutionOutcome::AwaitingApprovals { needed, .. } => {
                        format!("awaiting {needed}")
                    }
                    other if other.is_success() => "ran".to_owned(),
                    other => format!("{other:?}"),
                },
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(results, ["ran", "awaiting 2"]);
        let now = app.load(&t).await;
        assert_eq!(now.estimate_minutes, Some(30));
        assert_eq!(now.priority.as_deref(), Some("P1"));
        // A second person meets it.
        let second = app
            .engine
            .confirmations()
            .by("bob")
            .confirm_item(ItemRef::new(set.id, 1), at)
            .await
            .unwrap();
        assert!(second.execution.is_success(), "{:?}", second.execution);
        // An hour later the window is empty: one person confirms a call queued since.
        let later = wake_at(
            &app,
            "agent-1",
            &u,
            &[estimate(45)],
            NOW + Duration::minutes(61),
        )
        .await;
        let later = later.change_set.expect("queued");
        let alone = app
            .engine
            .confirmations()
            .by("alice")
            .confirm_item(ItemRef::new(later.id, 0), NOW + Duration::minutes(62))
            .await
            .unwrap();
        assert!(alone.execution.is_success(), "{:?}", alone.execution);
        assert_proven(&app.store, "a rate at the confirmation").await;
    }
}
