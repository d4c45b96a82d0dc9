//! What a person sets is what is enforced, on every backend and every device (issue
//! 37): a quorum on a pattern binds every tool it covers (SQLite and PostgreSQL); the
//! quorum an item was proposed with travels with it, so a device without the setting
//! still asks for it; one rule change (the engine's) has one effect, in one
//! transaction, whichever door it came through.

use assent_confirm::ItemRef;
use assent_confirm::{ConfirmError, ConflictKind, ExecutionOutcome, RuleChange};
use assent_store::{agents, change_sets};
use assent_tests::{NOW, TestApp, backends};
use assent_tools::RuleAction;
use serde_json::json;
use time::Duration;

fn minutes(n: i64) -> time::OffsetDateTime {
    NOW + Duration::minutes(n)
}

fn awaits(outcome: &ExecutionOutcome, approvals: usize) {
    assert_eq!(
        *outcome,
        ExecutionOutcome::AwaitingApprovals {
            approvals,
            needed: 2
        },
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_quorum_on_a_pattern_binds_every_tool_it_covers_on_every_backend() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let change = RuleChange {
            approvals: Some(2),
            ..RuleChange::new("update_task_*", RuleAction::Ask)
        };
        assert!(
            app.engine
                .change_rule("agent-1", &change, minutes(0))
                .await
                .unwrap()
        );
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P0"}))],
            )
            .await
            .change_set
            .expect("queued")
            .id;
        let alice = app.engine.confirmations().by("alice");
        let first = alice
            .confirm_item(ItemRef::new(set, 0), minutes(1))
            .await
            .unwrap();
        awaits(&first.execution, 1);
        assert_eq!(app.load(&task).await.priority.as_deref(), Some("P1"));
        let bob = app.engine.confirmations().by("bob");
        bob.confirm_item(ItemRef::new(set, 0), minutes(2))
            .await
            .unwrap();
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P0"),
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn the_quorum_an_item_was_proposed_with_travels_to_a_device_without_the_setting() {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let task = a.scene().await;
    b.agent("agent-1", &["work"]).await;
    let quorum = RuleChange {
        approvals: Some(2),
        ..RuleChange::new("update_task_priority", RuleAction::Ask)
    };
    a.engine
        .change_rule("agent-1", &quorum, minutes(0))
        .await
        .unwrap();
    let set = a
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P0"}))],
        )
        .await
        .change_set
        .expect("queued");
    assert_eq!(set.items[0].approvals_needed, Some(2));
    a.send_to(&b).await;

    // B has no quorum setting of its own; the item still needs two people there.
    let mut conn = b.store.read_connection().await.unwrap();
    let arrived = change_sets::require(&mut conn, set.id).await.unwrap();
    assert_eq!(arrived.items[0].approvals_needed, Some(2));
    assert!(
        agents::quorums(&mut conn, "agent-1")
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    let alice = b.engine.confirmations().by("alice");
    let first = alice
        .confirm_item(ItemRef::new(set.id, 0), minutes(1))
        .await
        .unwrap();
    awaits(&first.execution, 1);
    assert_eq!(b.load(&task).await.priority.as_deref(), Some("P1"));
    // Nobody named: a quorum cannot be counted, and nothing runs.
    let anonymous = b
        .engine
        .confirmations()
        .confirm_item(ItemRef::new(set.id, 0), minutes(2))
        .await;
    assert!(
        matches!(&anonymous, Err(e) if e.conflict_kind() == Some(ConflictKind::ApproverNotNamed)),
        "{anonymous:?}"
    );
    let bob = b.engine.confirmations().by("bob");
    bob.confirm_item(ItemRef::new(set.id, 0), minutes(3))
        .await
        .unwrap();
    assert_eq!(b.load(&task).await.priority.as_deref(), Some("P0"));
}

#[tokio::test]
async fn a_rule_change_writes_its_rule_quorum_and_shadow_removal_together_or_nothing() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        app.scene().await;
        let engine = &app.engine;
        let mut conn = app.store.read_connection().await.unwrap();
        let shadow =
            assent_tools::ToolRule::new("update_task_priority", RuleAction::Allow).unwrap();
        agents::set_shadow_rule(&mut conn, "agent-1", shadow, minutes(0))
            .await
            .unwrap();
        drop(conn);

        let refused = engine
            .change_rule(
                "agent-1",
                &RuleChange {
                    approvals: Some(2),
                    ..RuleChange::new("update_task_priority", RuleAction::Allow)
                },
                minutes(1),
            )
            .await;
        assert!(
            matches!(refused, Err(ConfirmError::InvalidRule(_))),
            "{refused:?}"
        );
        let unknown = engine
            .change_rule(
                "nobody",
                &RuleChange::new("x", RuleAction::Deny),
                minutes(1),
            )
            .await;
        assert!(
            matches!(unknown, Err(ConfirmError::UnknownAgent(_))),
            "{unknown:?}"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        assert_eq!(
            agents::shadow_rules(&mut conn, "agent-1")
                .await
                .unwrap()
                .map(|s| s.len()),
            Some(1),
            "a refused change wrote nothing"
        );
        drop(conn);

        let change = RuleChange {
            approvals: Some(3),
            ..RuleChange::new("update_task_priority", RuleAction::Ask)
        };
        assert!(
            engine
                .change_rule("agent-1", &change, minutes(2))
                .await
                .unwrap()
        );
        assert!(
            !engine
                .change_rule("agent-1", &change, minutes(3))
                .await
                .unwrap(),
            "the same change again changes nothing"
        );
        let mut conn = app.store.read_connection().await.unwrap();
        assert_eq!(
            agents::shadow_rules(&mut conn, "agent-1").await.unwrap(),
            Some(Vec::new()),
            "the rule set for real promoted the shadow rule"
        );
        assert_eq!(
            agents::quorums(&mut conn, "agent-1").await.unwrap(),
            vec![("update_task_priority".to_owned(), 3)]
        );
        let policy = agents::policy_at(&mut conn, "agent-1", NOW)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            policy.ruled("update_task_priority"),
            Some(RuleAction::Ask),
            "{backend:?}"
        );
    }
}

/// One person through every pair of doors (issue 52, THREATS.md shape 9): the command
/// line (`--as alice`), a reviewer token issued to alice (the page, the API, `review
/// --server`) and a Slack user mapped to alice are one approver, so the second door
/// is refused and the item stays pending; another person meets the quorum; a token
/// naming nobody counts toward no quorum and says how to fix it; the proof agrees.
#[tokio::test]
async fn one_person_through_every_pair_of_doors_is_one_approver() {
    let doors = [
        ("cli", "alice".to_owned()),
        (
            "token",
            assent_domain::token_reviewer("3fa9c1d2e4b5", Some("alice")),
        ),
        ("slack", assent_domain::slack_reviewer("U9", "alice")),
    ];
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let change = RuleChange {
            approvals: Some(2),
            ..RuleChange::new("update_task_priority", RuleAction::Ask)
        };
        app.engine
            .change_rule("agent-1", &change, minutes(0))
            .await
            .unwrap();
        let pairs = [(0, 1), (0, 2), (1, 2), (1, 0), (2, 0), (2, 1)];
        for (round, (first, second)) in pairs.into_iter().enumerate() {
            // Each round changes the priority, or the wake would have nothing to ask.
            let to = ["P0", "P3"][round % 2];
            let (first_door, first_by) = &doors[first];
            let (second_door, second_by) = &doors[second];
            let row = format!("{backend:?}: alice via {first_door}, then via {second_door}");
            let set = app
                .wake(&task, &[("update_task_priority", json!({"priority": to}))])
                .await
                .change_set
                .expect("queued")
                .id;
            let item = ItemRef::new(set, 0);
            let once = app
                .engine
                .confirmations()
                .by(first_by.clone())
                .confirm_item(item, minutes(1))
                .await
                .unwrap();
            awaits(&once.execution, 1);
            let twice = app
                .engine
                .confirmations()
                .by(second_by.clone())
                .confirm_item(item, minutes(2))
                .await;
            assert!(
                matches!(&twice, Err(e) if e.conflict_kind() == Some(ConflictKind::SamePersonTwice)
                    && e.to_string().contains("has approved item 0 already")),
                "{row}: {twice:?}"
            );
            let unnamed = app
                .engine
                .confirmations()
                .by_unnamed("0123456789ab", "token 0123456789ab")
                .confirm_item(item, minutes(3))
                .await;
            assert!(
                matches!(&unnamed, Err(e) if e.conflict_kind() == Some(ConflictKind::ApproverNotNamed)
                    && e.to_string().contains("token 0123456789ab names no person; re-issue it with `assent tokens add --role reviewer --person NAME` to approve items needing 2 people")),
                "{row}: {unnamed:?}"
            );
            let mut conn = app.store.read_connection().await.unwrap();
            let now = change_sets::require(&mut conn, set).await.unwrap();
            drop(conn);
            assert_eq!(
                now.items[0].status,
                assent_domain::ChangeItemStatus::Pending,
                "{row}: one person met a two-person rule"
            );
            app.engine
                .confirmations()
                .by(assent_domain::token_reviewer("bbbbbbbbbbbb", Some("bob")))
                .confirm_item(item, minutes(4))
                .await
                .unwrap();
            let mut conn = app.store.read_connection().await.unwrap();
            let done = change_sets::require(&mut conn, set).await.unwrap();
            drop(conn);
            assert_ne!(
                done.items[0].status,
                assent_domain::ChangeItemStatus::Pending,
                "{row}: alice and bob meet it"
            );
        }
        assent_tests::assert_proven(&app.store, "one person through every pair of doors").await;
    }
}
