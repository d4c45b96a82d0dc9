//! Tests of wake planning: routing, explosion, redundancy, duplicates, rejections, cap.

use super::*;
use crate::parse_tool_calls;
use assent_domain::Uuid;
use assent_journal::{ChecklistItem, TaskSnapshot, catalog};
use assent_tools::{RuleAction, ToolRule};
use proptest::prelude::*;
use serde_json::json;
use time::macros::{date, datetime};

const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

fn snapshot() -> TaskSnapshot {
    TaskSnapshot {
        id: "task-1".into(),
        title: "Fix login bug".into(),
        status: "OPEN".into(),
        priority: Some("P1".into()),
        estimate_minutes: Some(120),
        due_date: Some(date!(2026 - 03 - 15)),
        category: Some("work".into()),
        labels: vec!["bug".into()],
        checklist: vec![
            ChecklistItem {
                id: "c1".into(),
                title: "Buy groceries".into(),
                is_checked: true,
            },
            ChecklistItem {
                id: "c2".into(),
                title: "Walk dog".into(),
                is_checked: false,
            },
        ],
        ..TaskSnapshot::default()
    }
}

fn openai(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, ToolArguments::Text(args.into()))
}

fn builder() -> ChangeSetBuilder {
    ChangeSetBuilder::new(
        "agent-1",
        Target::new("task", "task-1"),
        "thread-1",
        "run-1",
    )
}

struct Fixture {
    registry: ToolRegistry,
    policy: AgentPolicy,
    snapshot: TaskSnapshot,
}

impl Fixture {
    fn new() -> Self {
        Self {
            registry: catalog(),
            policy: AgentPolicy::new(["work"]),
            snapshot: snapshot(),
        }
    }

    fn planner(&self) -> WakePlanner<'_> {
        WakePlanner::new(
            &self.registry,
            &self.policy,
            TargetCategory::Known("work".into()),
            NOW,
        )
        .with_snapshot(Some(&self.snapshot as &dyn TargetState))
    }

    fn reply(&self, b: &mut ChangeSetBuilder, name: &str, args: &str) -> String {
        match self
            .planner()
            .plan(&[openai("c", name, args)], b)
            .remove(0)
            .plan
        {
            CallPlan::Reply(text) => text,
            other => panic!("expected a reply, got {other:?}"),
        }
    }
}

#[test]
fn deferred_call_is_queued_with_summary_and_before() {
    let f = Fixture::new();
    let mut b = builder();
    assert_eq!(
        f.reply(&mut b, "set_task_status", r#"{"status":"GROOMED"}"#),
        "Proposal queued for user review."
    );
    let item = &b.items()[0];
    assert_eq!(item.tool_name, "set_task_status");
    assert_eq!(item.human_summary, "Set status to GROOMED");
    assert_eq!(item.before, Some(json!("OPEN")));
    let set = b.build(Uuid::nil(), NOW).expect("one item");
    assert_eq!(set.agent_id, "agent-1");
    assert_eq!(set.run_key, "run-1");
}

#[test]
fn invalid_calls_get_an_error_and_queue_nothing() {
    let f = Fixture::new();
    let mut b = builder();
    let unknown = f.reply(&mut b, "delete_everything", "{}");
    assert_eq!(
        unknown,
        "Error: unknown tool \"delete_everything\". Nothing was queued."
    );
    let not_json = f.reply(&mut b, "set_task_title", "{title: oops");
    assert!(
        not_json.starts_with(
            "Error: invalid arguments for set_task_title: arguments are not valid JSON"
        ),
        "{not_json}"
    );
    let not_object = f.reply(&mut b, "set_task_title", "[1]");
    assert!(not_object.contains("must be a JSON object"), "{not_object}");
    let wrong_type = f.reply(&mut b, "update_task_estimate", r#"{"minutes": true}"#);
    assert!(
        wrong_type.starts_with("Error: invalid arguments for update_task_estimate: /minutes"),
        "{wrong_type}"
    );
    let huge = format!(r#"{{"title":"{}"}}"#, "x".repeat(1 << 20));
    let huge_reply = f.reply(&mut b, "set_task_title", &huge);
    assert!(huge_reply.contains("the limit is 65536"), "{huge_reply}");
    assert!(b.is_empty());
}

#[test]
fn local_immediate_and_denied_calls() {
    let f = Fixture::new();
    let mut b = builder();
    let calls = [
        openai("1", "update_report", r##"{"markdown":"# Report"}"##),
        openai("2", "set_task_language", r#"{"languageCode":"en"}"#),
        openai("3", "set_task_title", r#"{"title":"New"}"#),
    ];
    let plans = f.planner().plan(&calls, &mut b);
    assert_eq!(
        plans[0].plan,
        CallPlan::HandleLocally {
            args: json!({"markdown": "# Report"})
        }
    );
    assert_eq!(
        plans[1].plan,
        CallPlan::Execute {
            invocations: vec![("set_task_language".into(), json!({"languageCode": "en"}))],
            malformed: 0
        }
    );
    assert_eq!(plans[2].plan, CallPlan::Reply(reply::QUEUED.into()));
    assert_eq!(
        plans
            .iter()
            .map(|p| p.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["1", "2", "3"]
    );

    let home = WakePlanner::new(
        &f.registry,
        &f.policy,
        TargetCategory::Known("home".into()),
        NOW,
    );
    let mut b2 = builder();
    let denied = home.plan(&calls[2..], &mut b2);
    assert_eq!(
        denied[0].plan,
        CallPlan::Reply(
            "Denied by policy: Category home not in allowed set. Nothing was queued or executed."
                .into()
        )
    );
    let missing = WakePlanner::new(&f.registry, &f.policy, TargetCategory::Missing, NOW)
        .plan(&calls[1..2], &mut b2);
    assert!(
        matches!(&missing[0].plan, CallPlan::Reply(t) if t.contains("Target entity has no category"))
    );
    assert!(b2.is_empty());
}

#[test]
fn policy_rules_reroute() {
    let mut f = Fixture::new();
    f.policy = AgentPolicy::new(["work"])
        .with_rule(ToolRule::new("set_task_language", RuleAction::Ask).expect("rule"))
        .with_rule(ToolRule::new("update_task_*", RuleAction::Deny).expect("rule"));
    let mut b = builder();
    assert_eq!(
        f.reply(&mut b, "set_task_language", r#"{"languageCode":"en"}"#),
        reply::QUEUED
    );
    assert!(
        f.reply(&mut b, "update_task_priority", r#"{"priority":"P0"}"#)
            .starts_with("Denied by policy: Tool update_task_priority is denied")
    );
    assert_eq!(b.len(), 1);
}

#[test]
fn batch_is_exploded_and_malformed_elements_counted() {
    let f = Fixture::new();
    let mut b = builder();
    let text = f.reply(
        &mut b,
        "add_multiple_checklist_items",
        r#"{"items":[{"title":"Design mockup"},{"title":5},"Write tests",{"nope":1}]}"#,
    );
    assert_eq!(
        text,
        "Proposal queued for user review (2 item(s) queued).\n2 malformed item(s) skipped."
    );
    let summaries: Vec<_> = b
        .items()
        .iter()
        .map(|i| (i.tool_name.as_str(), i.human_summary.as_str()))
        .collect();
    assert_eq!(
        summaries,
        [
            ("add_checklist_item", "Add: \"Design mockup\""),
            ("add_checklist_item", "Add: \"Write tests\"")
        ]
    );
    let mut allowing = Fixture::new();
    allowing.policy =
        AgentPolicy::new(["work"]).with_rule(ToolRule::new("*", RuleAction::Allow).expect("rule"));
    let plans = allowing.planner().plan(
        &[openai(
            "x",
            "assign_task_labels",
            r#"{"labels":["ops", 7, {"x": 1}]}"#,
        )],
        &mut builder(),
    );
    assert_eq!(
        plans[0].plan,
        CallPlan::Execute {
            invocations: vec![("assign_task_label".into(), json!({"label": "ops"}))],
            malformed: 2
        },
        "an allowed batch runs its valid elements and still counts the malformed ones"
    );
    let labels = f.reply(&mut b, "assign_task_labels", r#"{"labels":["bug","auth"]}"#);
    assert_eq!(
        labels,
        "Proposal queued for user review (1 item(s) queued).\nSkipped 1 redundant update(s): label \"bug\" is already assigned."
    );
    assert_eq!(b.items()[2].human_summary, "Assign label: \"auth\"");
}

#[test]
fn batch_redundancy_and_invented_ids() {
    let f = Fixture::new();
    let mut b = builder();
    let text = f.reply(
        &mut b,
        "update_checklist_items",
        r#"{"items":[{"id":"c1","isChecked":true},{"id":"c2","isChecked":true},{"id":"zz-invented","isChecked":true}]}"#,
    );
    assert_eq!(
        text,
        "Proposal queued for user review (1 item(s) queued).\n\
         Skipped 1 redundant update(s): \"Buy groceries\" is already checked.\n\
         Rejected 1 update(s) for checklist item id(s) that do not exist: \"zz-invented\". Do not propose these again."
    );
    assert_eq!(b.items()[0].human_summary, "Check off: \"Walk dog\"");
    assert_eq!(
        b.items()[0].before,
        Some(json!({"title": "Walk dog", "isChecked": false}))
    );
}

#[test]
fn single_redundant_replies_are_exact() {
    let mut f = Fixture::new();
    f.snapshot.status = "in progress".into();
    let mut b = builder();
    let cases = [
        (
            "update_task_estimate",
            r#"{"minutes":"120"}"#,
            "Skipped: estimate is already 120 minutes.",
        ),
        (
            "update_task_priority",
            r#"{"priority":"p1"}"#,
            "Skipped: priority is already P1.",
        ),
        (
            "update_task_due_date",
            r#"{"dueDate":"2026-03-15"}"#,
            "Skipped: due date is already 2026-03-15.",
        ),
        (
            "set_task_status",
            r#"{"status":"IN PROGRESS"}"#,
            "Skipped: status is already IN PROGRESS.",
        ),
        (
            "set_task_title",
            r#"{"title":"Fix login bug "}"#,
            "Skipped: title is already \"Fix login bug\".",
        ),
    ];
    for (tool, args, expected) in cases {
        assert_eq!(f.reply(&mut b, tool, args), expected, "{tool}");
    }
    assert!(b.is_empty());
}

#[test]
fn missing_snapshot_keeps_proposals() {
    let f = Fixture::new();
    let mut b = builder();
    let plans = WakePlanner::new(
        &f.registry,
        &f.policy,
        TargetCategory::Known("work".into()),
        NOW,
    )
    .with_snapshot(None)
    .plan(
        &[openai("1", "update_task_estimate", r#"{"minutes":120}"#)],
        &mut b,
    );
    assert_eq!(plans[0].plan, CallPlan::Reply(reply::QUEUED.into()));
    assert_eq!(b.items()[0].before, None);
}

#[test]
fn duplicates_in_the_wake_and_in_earlier_sets() {
    let f = Fixture::new();
    let earlier = ChangeItem::new(
        "update_task_priority",
        json!({"priority": "P0"}),
        "Set priority to P0",
    );
    let mut b = builder().with_pending([&earlier]);
    assert_eq!(
        f.reply(&mut b, "update_task_priority", r#"{"priority":"P0"}"#),
        reply::DUPLICATE
    );
    assert_eq!(
        f.reply(&mut b, "set_task_title", r#"{"title":"A"}"#),
        reply::QUEUED
    );
    assert_eq!(
        f.reply(&mut b, "set_task_title", r#"{ "title" : "A" }"#),
        reply::DUPLICATE
    );
    assert_eq!(b.len(), 1);
}

fn rejection(args: Value, reason: Option<&str>, at: OffsetDateTime) -> ChangeDecision {
    ChangeDecision {
        id: Uuid::from_u128(1),
        change_set_id: Uuid::from_u128(2),
        item_index: 0,
        agent_id: "agent-1".into(),
        target_kind: "task".into(),
        target_id: "task-1".into(),
        tool_name: "update_task_priority".into(),
        verdict: Verdict::Rejected,
        reason: reason.map(str::to_owned),
        edited_args: None,
        human_summary: "Set priority to P0".into(),
        args,
        created_at: at,
        vector_clock: Default::default(),
        decided_by: None,
    }
}

#[test]
fn recently_rejected_proposals_are_skipped_with_the_reason() {
    let f = Fixture::new();
    let decisions = [rejection(
        json!({"priority": "P0"}),
        Some("I know better"),
        NOW - Duration::days(1),
    )];
    let planner = f.planner().with_decisions(&decisions);
    let mut b = builder();
    let plans = planner.plan(
        &[openai("1", "update_task_priority", r#"{"priority":"P0"}"#)],
        &mut b,
    );
    assert_eq!(
        plans[0].plan,
        CallPlan::Reply(
            "Skipped: the user rejected this exact proposal recently (reason: \"I know better\"). Do not propose it again.".into()
        )
    );
    let old = [rejection(
        json!({"priority": "P0"}),
        None,
        NOW - Duration::days(30),
    )];
    let plans = f.planner().with_decisions(&old).plan(
        &[openai("1", "update_task_priority", r#"{"priority":"P0"}"#)],
        &mut b,
    );
    assert_eq!(
        plans[0].plan,
        CallPlan::Reply(reply::QUEUED.into()),
        "outside the window"
    );
}

#[test]
fn a_refusal_for_a_remembered_rejection_names_the_rejection() {
    let f = Fixture::new();
    let decisions = [rejection(
        json!({"priority": "P0"}),
        Some("no"),
        NOW - Duration::days(1),
    )];
    let mut b = builder();
    let plans = f.planner().with_decisions(&decisions).plan(
        &[openai("1", "update_task_priority", r#"{"priority":"P0"}"#)],
        &mut b,
    );
    assert_eq!(
        plans[0].refused_again,
        [crate::RefusedAgain {
            decision_id: decisions[0].id,
            tool_name: "update_task_priority".into(),
            args: json!({"priority": "P0"}),
            reply: reply::recently_rejected(Some("no")),
        }]
    );
    let plans = f.planner().with_decisions(&decisions).plan(
        &[openai("2", "update_task_priority", r#"{"priority":"P1"}"#)],
        &mut b,
    );
    assert!(plans[0].refused_again.is_empty(), "{plans:?}");
}

#[test]
fn cap_refuses_and_never_executes() {
    let f = Fixture::new();
    let mut b = builder().with_max_items(2);
    assert_eq!(
        f.reply(&mut b, "set_task_title", r#"{"title":"A"}"#),
        reply::QUEUED
    );
    assert_eq!(
        f.reply(&mut b, "set_task_title", r#"{"title":"B"}"#),
        reply::QUEUED
    );
    let refused = f.reply(&mut b, "set_task_title", r#"{"title":"C"}"#);
    assert!(
        refused.starts_with("Not queued: this wake's change set already holds 2 proposal(s)"),
        "{refused}"
    );
    let batch = f.reply(
        &mut b,
        "add_multiple_checklist_items",
        r#"{"items":["X","Y"]}"#,
    );
    assert!(
        batch.starts_with("Nothing queued for user review.\nNot queued:"),
        "{batch}"
    );
    assert!(batch.contains("2 proposal(s) refused"), "{batch}");
    assert_eq!(b.len(), 2);
}

#[test]
fn anthropic_input_is_planned_the_same_way() {
    let f = Fixture::new();
    let calls = parse_tool_calls(&json!([
        {"type": "tool_use", "id": "toolu_1", "name": "update_task_priority", "input": {"priority": "P0"}},
        {"type": "tool_use", "id": "toolu_2", "name": "update_task_priority", "input": "P0"}
    ]))
    .expect("parses");
    let mut b = builder();
    let plans = f.planner().plan(&calls, &mut b);
    assert_eq!(plans[0].plan, CallPlan::Reply(reply::QUEUED.into()));
    assert!(matches!(&plans[1].plan, CallPlan::Reply(t) if t.contains("must be a JSON object")));
}

proptest! {
    /// N valid elements → N items, in order, each under the singular tool.
    #[test]
    fn explosion_keeps_count_and_order(titles in prop::collection::btree_set("[a-z]{1,12}", 1..20)) {
        let f = Fixture { snapshot: TaskSnapshot::default(), ..Fixture::new() };
        let titles: Vec<String> = titles.into_iter().map(|t| format!("new {t}")).collect();
        let args = json!({"items": titles.iter().map(|t| json!({"title": t})).collect::<Vec<_>>()});
        let mut b = builder();
        let text = f.reply(&mut b, "add_multiple_checklist_items", &args.to_string());
        prop_assert_eq!(text, format!("Proposal queued for user review ({} item(s) queued).", titles.len()));
        prop_assert_eq!(b.len(), titles.len());
        for (item, title) in b.items().iter().zip(&titles) {
            prop_assert_eq!(&item.tool_name, "add_checklist_item");
            prop_assert_eq!(&item.args, &json!({"title": title}));
        }
    }

    /// What a wake relies on to skip reading open sets and recent decisions
    /// (`WakeService::wake`): they only ever stop a call from being queued, so a plan
    /// that queues nothing without them is exactly the plan with them.
    #[test]
    fn a_plan_that_queues_nothing_is_the_same_with_open_sets_and_rejections(
        calls in prop::collection::vec((
            prop::sample::select(vec![
                "update_task_priority", "set_task_title", "set_task_language", "update_report", "nope",
            ]),
            prop::sample::select(vec![
                r#"{"priority":"P0"}"#, r#"{"title":"A"}"#, r#"{"languageCode":"en"}"#,
                r##"{"markdown":"# R"}"##, "{}", "not json",
            ]),
        ), 0..6),
        earlier in prop::collection::vec((
            prop::sample::select(vec!["update_task_priority", "set_task_title", "set_task_language"]),
            prop::sample::select(vec![r#"{"priority":"P0"}"#, r#"{"title":"A"}"#, r#"{"languageCode":"en"}"#]),
        ), 0..4),
    ) {
        let f = Fixture::new();
        let calls: Vec<ToolCall> = calls.iter().enumerate().map(|(i, (n, a))| openai(&i.to_string(), n, a)).collect();
        let pending: Vec<ChangeItem> = earlier.iter()
            .map(|(n, a)| ChangeItem::new(*n, serde_json::from_str(a).expect("json"), "earlier"))
            .collect();
        let decisions: Vec<ChangeDecision> = earlier.iter()
            .map(|(n, a)| ChangeDecision {
                tool_name: (*n).to_owned(),
                ..rejection(serde_json::from_str(a).expect("json"), None, NOW - Duration::hours(1))
            })
            .collect();
        let mut bare = builder();
        let without = f.planner().plan(&calls, &mut bare);
        let mut full = builder().with_pending(pending.iter());
        let with = f.planner().with_decisions(&decisions).plan(&calls, &mut full);
        if bare.is_empty() {
            prop_assert!(full.is_empty());
            prop_assert_eq!(without, with);
        }
    }

    /// Planning never panics and answers every call exactly once, whatever the input.
    #[test]
    fn every_call_gets_exactly_one_plan(
        names in prop::collection::vec(prop::sample::select(vec![
            "set_task_title", "update_task_estimate", "update_checklist_items", "nope", "update_report"
        ]), 0..8),
        args in prop::collection::vec(".{0,40}", 8),
    ) {
        let f = Fixture::new();
        let calls: Vec<ToolCall> = names.iter().enumerate().map(|(i, n)| openai(&i.to_string(), n, &args[i])).collect();
        let mut b = builder();
        let plans = f.planner().plan(&calls, &mut b);
        prop_assert_eq!(plans.len(), calls.len());
    }
}
