//! Plans one realistic agent wake and shows what a host would do with it.
//!
//! An agent looked at the task "Fix login bug" and answered with a batch of OpenAI-style
//! tool calls: some mutate the task (queued for a person), one is low-risk (run now),
//! one is the agent's own report (handled by the host), and some are redundant, unknown
//! or malformed (answered at once, nothing queued). Run it with
//! `cargo run -p assent --example plan_wake`.
//!
//! The planner is pure: the registry, the policy, the task snapshot, the ids and `now`
//! are all handed in here, by the host.

// An example talks to a person: printing is its job.
#![allow(clippy::print_stdout)]

use assent::changeset::{CallPlan, ChangeSetBuilder, PlannedCall, WakePlanner, parse_tool_calls};
use assent::domain::{ChangeItem, ChangeSet, OffsetDateTime, Uuid};
use assent::journal::{ChecklistItem, TaskSnapshot, catalog};
use assent::journal_host::task_target;
use assent::tools::{AgentPolicy, TargetCategory, TargetState};
use serde_json::{Value, json};

const AGENT_ID: &str = "agent-triage";
const TASK_ID: &str = "task-7f3a";
const THREAD_ID: &str = "thread-2026-03-01";
const RUN_KEY: &str = "wake-0042";

fn main() {
    let registry = catalog();
    let policy = AgentPolicy::new(["work"]);
    let snapshot = task_snapshot();
    let category = match &snapshot.category {
        Some(category) => TargetCategory::Known(category.clone()),
        None => TargetCategory::Missing,
    };

    let calls = parse_tool_calls(&model_tool_calls()).expect("the model sent a list of tool calls");

    let now = OffsetDateTime::now_utc();
    let mut builder = ChangeSetBuilder::new(AGENT_ID, task_target(TASK_ID), THREAD_ID, RUN_KEY);
    let planned = WakePlanner::new(&registry, &policy, category, now)
        .with_snapshot(Some(&snapshot as &dyn TargetState))
        .plan(&calls, &mut builder);
    let change_set = builder.build(Uuid::new_v4(), now);

    println!(
        "Wake {RUN_KEY} of {AGENT_ID} on \"{}\" ({} tool calls)",
        snapshot.title,
        calls.len()
    );
    println!();
    println!("== What the host does with each call ==");
    for call in &planned {
        print_call(call);
    }
    println!();
    match change_set {
        Some(set) => print_change_set(&set),
        None => println!("== Nothing queued for review =="),
    }
}

/// The task as the host loaded it just before the wake.
fn task_snapshot() -> TaskSnapshot {
    TaskSnapshot {
        id: TASK_ID.into(),
        title: "Fix login bug".into(),
        status: "OPEN".into(),
        priority: Some("P1".into()),
        estimate_minutes: Some(120),
        category: Some("work".into()),
        labels: vec!["bug".into()],
        checklist: vec![
            ChecklistItem {
                id: "chk-groceries".into(),
                title: "Buy groceries".into(),
                is_checked: true,
            },
            ChecklistItem {
                id: "chk-dog".into(),
                title: "Walk dog".into(),
                is_checked: false,
            },
        ],
        ..TaskSnapshot::default()
    }
}

/// One OpenAI `tool_calls` entry; `arguments` is the JSON text exactly as the model sent it.
fn openai_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// The assistant's tool calls for this wake.
fn model_tool_calls() -> Value {
    Value::Array(vec![
        // Deferred: a person confirms status changes.
        openai_call(
            "call_01",
            "set_task_status",
            r#"{"status": "GROOMED", "reason": "Steps to reproduce and scope are clear"}"#,
        ),
        // Immediate: low risk, runs at once.
        openai_call("call_02", "set_task_language", r#"{"languageCode": "en"}"#),
        // Local: the agent's own report, for the host to store.
        openai_call(
            "call_03",
            "update_report",
            r#"{"markdown": "Login fails when the session cookie expires mid-flow. Groomed; next: reproduce on staging."}"#,
        ),
        // Batch: exploded into one item per element; a string element becomes
        // {"title": ...}, and {"title": 5} does not match the singular tool's schema.
        openai_call(
            "call_04",
            "add_multiple_checklist_items",
            r#"{"items": [{"title": "Reproduce on staging"}, "Write a regression test", {"title": 5}]}"#,
        ),
        // Batch: "Buy groceries" is already checked, so only "Walk dog" is queued.
        openai_call(
            "call_05",
            "update_checklist_items",
            r#"{"items": [{"id": "chk-groceries", "isChecked": true}, {"id": "chk-dog", "isChecked": true}]}"#,
        ),
        // Redundant: the estimate is already 120 minutes.
        openai_call("call_06", "update_task_estimate", r#"{"minutes": "120"}"#),
        // Unknown: not in the catalog.
        openai_call("call_07", "delete_task", r#"{"taskId": "task-7f3a"}"#),
        // Not JSON at all.
        openai_call("call_08", "update_task_priority", "{priority: P0"),
    ])
}

fn print_call(call: &PlannedCall) {
    println!("{}  {}", call.tool_call_id, call.tool_name);
    match &call.plan {
        CallPlan::Reply(text) => {
            // One reply; a batch's reply has a line per outcome.
            let mut lines = text.lines();
            println!("    reply to agent: {}", lines.next().unwrap_or_default());
            for line in lines {
                println!("                    {line}");
            }
        }
        CallPlan::Execute { invocations, .. } => {
            for (tool, args) in invocations {
                println!("    execute now:    {tool} {args}");
            }
        }
        CallPlan::HandleLocally { args } => {
            println!("    host handles:   {args}");
        }
    }
}

fn print_change_set(set: &ChangeSet) {
    println!(
        "== Change set {} ({}, {} items) ==",
        set.id,
        set.status,
        set.items.len()
    );
    for (index, item) in set.items.iter().enumerate() {
        print_item(index, item);
    }
    println!();
    println!("== As stored and synced (JSON) ==");
    println!(
        "{}",
        serde_json::to_string_pretty(set).expect("a change set serialises")
    );
}

fn print_item(index: usize, item: &ChangeItem) {
    let before = item
        .before
        .as_ref()
        .map_or_else(|| "(new)".to_owned(), Value::to_string);
    println!("[{index}] {}  ({})", item.human_summary, item.status);
    println!("    {} {before} → {}", item.tool_name, item.args);
}
