//! One realistic wake of 50 tool calls for the pure planner: deferred proposals, an
//! immediate tool, the agent's local output, a batch of 10, redundant proposals, a
//! recently rejected one, a duplicate, and invalid calls of every kind.

use assent_changeset::{CallPlan, ChangeSetBuilder, ChangesetError, WakePlanner, parse_tool_calls};
use assent_domain::{ChangeDecision, ChangeSet, OffsetDateTime, Uuid, VectorClock, Verdict};
use assent_journal::{ChecklistItem, TaskSnapshot, tool};
use assent_tools::{AgentPolicy, TargetCategory, ToolRegistry};
use serde_json::{Value, json};
use time::macros::datetime;

/// Tool calls in the fixture's wake.
pub const WAKE_CALLS: usize = 50;

const AGENT: &str = "agent-triage";
const TASK: &str = "task-7f3a";
const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

/// Everything one wake is planned against, built once: the catalog, the agent's
/// policy, the task's snapshot, its decision history and the model's answer.
pub struct PlanningFixture {
    registry: ToolRegistry,
    policy: AgentPolicy,
    snapshot: TaskSnapshot,
    decisions: Vec<ChangeDecision>,
    /// The model's `tool_calls`, as JSON (parsing them is part of planning).
    document: Value,
}

/// What planning the fixture's wake produced, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedWake {
    /// Planned calls (one per call).
    pub calls: usize,
    /// Items queued in the change set.
    pub queued: usize,
    /// Calls to execute now.
    pub executed: usize,
    /// Calls for the host's local handling.
    pub local: usize,
    /// Calls answered with a text only (queued singles, skipped, refused, invalid).
    pub replies: usize,
}

impl Default for PlanningFixture {
    fn default() -> Self {
        Self::new()
    }
}

impl PlanningFixture {
    /// The fixture.
    pub fn new() -> Self {
        Self {
            registry: assent_journal::catalog(),
            policy: AgentPolicy::new(["work"]),
            snapshot: snapshot(),
            decisions: history(),
            document: Value::Array(calls()),
        }
    }

    /// Plans the wake: parses the calls, routes, validates, explodes and checks each
    /// for redundancy, and builds the change set.
    pub fn plan(
        &self,
    ) -> Result<(Vec<assent_changeset::PlannedCall>, Option<ChangeSet>), ChangesetError> {
        let calls = parse_tool_calls(&self.document)?;
        let mut builder = ChangeSetBuilder::new(
            AGENT,
            assent_journal_host::task_target(TASK),
            "thread-1",
            "wake-0042",
        );
        let planned = WakePlanner::new(
            &self.registry,
            &self.policy,
            TargetCategory::Known("work".to_owned()),
            NOW,
        )
        .with_snapshot(Some(&self.snapshot as &dyn assent_changeset::TargetState))
        .with_decisions(&self.decisions)
        .plan(&calls, &mut builder);
        Ok((planned, builder.build(Uuid::nil(), NOW)))
    }

    /// Plans the wake and counts what came out.
    pub fn plan_counted(&self) -> Result<PlannedWake, ChangesetError> {
        let (planned, set) = self.plan()?;
        let count = |f: fn(&CallPlan) -> bool| planned.iter().filter(|p| f(&p.plan)).count();
        Ok(PlannedWake {
            calls: planned.len(),
            queued: set.map_or(0, |s| s.items.len()),
            executed: count(|p| matches!(p, CallPlan::Execute { .. })),
            local: count(|p| matches!(p, CallPlan::HandleLocally { .. })),
            replies: count(|p| matches!(p, CallPlan::Reply(_))),
        })
    }
}

fn snapshot() -> TaskSnapshot {
    TaskSnapshot {
        id: TASK.into(),
        title: "Fix login bug".into(),
        status: "OPEN".into(),
        priority: Some("P1".into()),
        estimate_minutes: Some(120),
        category: Some("work".into()),
        labels: vec!["bug".into(), "auth".into()],
        checklist: (0..12)
            .map(|i| ChecklistItem {
                id: format!("chk-{i}"),
                title: format!("Existing step {i}"),
                is_checked: i % 3 == 0,
            })
            .collect(),
        ..TaskSnapshot::default()
    }
}

/// Forty earlier decisions of the agent on the task, one of them a rejection the wake
/// proposes again.
fn history() -> Vec<ChangeDecision> {
    (0..40)
        .map(|i| {
            let (tool, args, verdict) = if i == 0 {
                let args = json!({"title": "Rewrite the login flow in Rust"});
                (tool::ADD_CHECKLIST_ITEM, args, Verdict::Rejected)
            } else {
                let args = json!({"title": format!("Earlier step {i}")});
                (tool::ADD_CHECKLIST_ITEM, args, Verdict::Confirmed)
            };
            ChangeDecision {
                id: Uuid::from_u128(i),
                change_set_id: Uuid::from_u128(1000 + i / 5),
                item_index: (i % 5) as usize,
                agent_id: AGENT.into(),
                target_kind: "task".into(),
                target_id: TASK.into(),
                tool_name: tool.into(),
                verdict,
                reason: (verdict == Verdict::Rejected).then(|| "Out of scope".to_owned()),
                edited_args: None,
                human_summary: format!("Add checklist item {i}"),
                args,
                created_at: NOW - time::Duration::hours(i64::try_from(i).unwrap_or(0) + 1),
                vector_clock: VectorClock::default(),
                decided_by: None,
            }
        })
        .collect()
}

fn call(n: usize, name: &str, arguments: impl Into<String>) -> Value {
    json!({"id": format!("call_{n:02}"), "type": "function",
           "function": {"name": name, "arguments": arguments.into()}})
}

/// The model's 50 calls; the comments count what each group contributes.
fn calls() -> Vec<Value> {
    let mut calls: Vec<(String, String)> = Vec::with_capacity(WAKE_CALLS);
    let mut push = |name: &str, args: Value| calls.push((name.to_owned(), args.to_string()));
    // 14 deferred singles, queued.
    for i in 0..8 {
        push(
            tool::ADD_CHECKLIST_ITEM,
            json!({"title": format!("New step {i}")}),
        );
    }
    push(
        tool::SET_TASK_STATUS,
        json!({"status": "GROOMED", "reason": "Scope is clear"}),
    );
    push(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P0"}));
    push(
        tool::SET_TASK_TITLE,
        json!({"title": "Fix login on expired sessions"}),
    );
    push(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-03-20"}));
    push(tool::ASSIGN_TASK_LABEL, json!({"label": "security"}));
    push(
        tool::UPDATE_CHECKLIST_ITEM,
        json!({"id": "chk-1", "isChecked": true}),
    );
    // 1 batch of 10, exploded into 10 queued items.
    let batch: Vec<Value> = (0..10)
        .map(|i| json!({"title": format!("Batch step {i}")}))
        .collect();
    push(tool::ADD_MULTIPLE_CHECKLIST_ITEMS, json!({"items": batch}));
    // 6 immediate calls, executed now.
    for code in ["en", "de", "fr", "es", "it", "nl"] {
        push(tool::SET_TASK_LANGUAGE, json!({"languageCode": code}));
    }
    // 2 local calls, for the host.
    push(
        tool::UPDATE_REPORT,
        json!({"markdown": "Groomed; next: reproduce on staging."}),
    );
    push(
        tool::RECORD_OBSERVATIONS,
        json!({"observations": ["Cookie expiry mid-flow"]}),
    );
    // 15 redundant, recently rejected or duplicate proposals, skipped.
    for _ in 0..3 {
        push(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": "120"}));
        push(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P1"}));
        push(tool::SET_TASK_STATUS, json!({"status": "open"}));
        push(
            tool::UPDATE_CHECKLIST_ITEM,
            json!({"id": "chk-0", "isChecked": true}),
        );
    }
    push(tool::ASSIGN_TASK_LABEL, json!({"label": "bug"}));
    push(
        tool::ADD_CHECKLIST_ITEM,
        json!({"title": "Rewrite the login flow in Rust"}),
    );
    push(tool::ADD_CHECKLIST_ITEM, json!({"title": "New step 0"}));
    // 12 invalid calls, refused: unknown tools, schema violations, an invented id.
    for _ in 0..2 {
        push("delete_task", json!({"taskId": TASK}));
        push(tool::UPDATE_TASK_PRIORITY, json!({"priority": "urgent"}));
        push(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 5000}));
        push(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "tomorrow"}));
        push(tool::ADD_CHECKLIST_ITEM, json!({"title": ""}));
        push(
            tool::UPDATE_CHECKLIST_ITEM,
            json!({"id": "chk-invented", "isChecked": true}),
        );
    }
    let mut document: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(n, (name, args))| call(n, name, args.clone()))
        .collect();
    // And one that is not JSON at all, in place of the last invented id.
    if let Some(last) = document.last_mut() {
        *last = call(WAKE_CALLS - 1, tool::UPDATE_TASK_PRIORITY, "{priority: P0");
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wake_has_fifty_calls_of_every_kind() {
        let planned = PlanningFixture::new().plan_counted().expect("calls parse");
        assert_eq!(
            planned,
            PlannedWake {
                calls: WAKE_CALLS,
                queued: 24,
                executed: 6,
                local: 2,
                replies: 42,
            }
        );
    }

    #[test]
    fn redundant_rejected_duplicate_and_invalid_calls_are_refused_with_a_reason() {
        let (planned, _) = PlanningFixture::new().plan().expect("calls parse");
        let replies: Vec<&str> = planned
            .iter()
            .filter_map(|p| match &p.plan {
                CallPlan::Reply(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let queued = replies
            .iter()
            .filter(|r| r.starts_with("Proposal queued"))
            .count();
        // 14 singles queued; the batch's reply counts its items.
        assert_eq!(queued, 15, "{replies:#?}");
        assert!(
            replies.iter().any(|r| r.starts_with("Skipped: priority")),
            "{replies:#?}"
        );
        assert!(
            replies.iter().any(|r| r.contains("delete_task")),
            "{replies:#?}"
        );
    }
}
