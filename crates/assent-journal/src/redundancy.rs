//! The journal's redundancy rules (ADR 0009): a proposal that is already true of the
//! task is not shown to a person; the agent is told what the state already is. They
//! are the journal's, so they live here: the planner names no tool and only asks the
//! target's state ([`TargetState`]).

use crate::catalog::{
    normalize_priority, normalize_status, parse_due_date, parse_estimate_minutes, tool,
};
use crate::snapshot::TaskSnapshot;
use assent_tools::{Redundancy, TargetCategory, TargetState};
use serde_json::Value;

fn same_text(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

impl TargetState for TaskSnapshot {
    /// The task's category, read with the snapshot from the same row the journal's
    /// resolver reads it from.
    fn category(&self) -> Option<TargetCategory> {
        Some(match &self.category {
            Some(category) => TargetCategory::Known(category.clone()),
            None => TargetCategory::Missing,
        })
    }

    fn redundancy(&self, tool_name: &str, args: &Value) -> Redundancy {
        let task = self;
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let already = |detail: String| Redundancy::AlreadyTrue(detail);
        match tool_name {
            tool::UPDATE_TASK_ESTIMATE => match (
                args.get("minutes").and_then(parse_estimate_minutes),
                task.estimate_minutes,
            ) {
                (Some(new), Some(current)) if new == current => {
                    already(format!("estimate is already {current} minutes"))
                }
                _ => Redundancy::Keep,
            },
            tool::UPDATE_TASK_PRIORITY => match (text("priority"), task.priority.as_deref()) {
                (Some(new), Some(current)) if same_text(new, current) => already(format!(
                    "priority is already {}",
                    normalize_priority(current)
                )),
                _ => Redundancy::Keep,
            },
            tool::SET_TASK_STATUS => match text("status") {
                Some(new) if same_text(new, &task.status) => already(format!(
                    "status is already {}",
                    normalize_status(&task.status)
                )),
                _ => Redundancy::Keep,
            },
            tool::UPDATE_TASK_DUE_DATE => {
                match (
                    text("dueDate").and_then(|t| parse_due_date(t).ok()),
                    task.due_date,
                ) {
                    (Some(new), Some(current)) if new == current => {
                        already(format!("due date is already {current}"))
                    }
                    _ => Redundancy::Keep,
                }
            }
            tool::SET_TASK_TITLE => match text("title") {
                Some(new) if new.trim() == task.title.trim() => {
                    already(format!("title is already \"{}\"", task.title.trim()))
                }
                _ => Redundancy::Keep,
            },
            tool::ASSIGN_TASK_LABEL => match text("label") {
                Some(new) if task.labels.iter().any(|l| same_text(l, new)) => {
                    already(format!("label \"{}\" is already assigned", new.trim()))
                }
                _ => Redundancy::Keep,
            },
            tool::ADD_CHECKLIST_ITEM => match text("title") {
                Some(new) => match task.checklist.iter().find(|i| same_text(&i.title, new)) {
                    Some(existing) => already(format!(
                        "\"{}\" is already on the checklist",
                        existing.title
                    )),
                    None => Redundancy::Keep,
                },
                None => Redundancy::Keep,
            },
            tool::UPDATE_CHECKLIST_ITEM => {
                let Some(id) = text("id") else {
                    return Redundancy::Keep;
                };
                let Some(item) = task.checklist_item(id) else {
                    return Redundancy::InventedId(id.to_owned());
                };
                let checked = args.get("isChecked").and_then(Value::as_bool);
                let title_same = text("title").is_none_or(|t| t.trim() == item.title.trim());
                let checked_same = checked.is_none_or(|c| c == item.is_checked);
                if !(title_same && checked_same) {
                    return Redundancy::Keep;
                }
                match checked {
                    Some(true) => already(format!("\"{}\" is already checked", item.title)),
                    Some(false) => already(format!("\"{}\" is already unchecked", item.title)),
                    None => already(format!("\"{}\" already has that title", item.title)),
                }
            }
            _ => Redundancy::Keep,
        }
    }

    fn before(&self, tool_name: &str, args: &Value) -> Option<Value> {
        self.before_value(tool_name, args)
    }

    fn fingerprint(&self, tool_name: &str, args: &Value) -> Option<Value> {
        self.fingerprint_of(tool_name, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChecklistItem;
    use serde_json::json;
    use time::macros::date;

    fn task() -> TaskSnapshot {
        TaskSnapshot {
            id: "t1".into(),
            title: "Fix login bug".into(),
            status: "IN PROGRESS".into(),
            priority: Some("P1".into()),
            estimate_minutes: Some(120),
            due_date: Some(date!(2026 - 03 - 15)),
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

    fn check(tool: &str, args: Value) -> Redundancy {
        task().redundancy(tool, &args)
    }

    fn already(s: &str) -> Redundancy {
        Redundancy::AlreadyTrue(s.into())
    }

    #[test]
    fn metadata_already_true() {
        assert_eq!(
            check(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 120})),
            already("estimate is already 120 minutes")
        );
        assert_eq!(
            check(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": "120"})),
            already("estimate is already 120 minutes")
        );
        assert_eq!(
            check(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 90})),
            Redundancy::Keep
        );
        assert_eq!(
            check(tool::UPDATE_TASK_PRIORITY, json!({"priority": " p1 "})),
            already("priority is already P1")
        );
        assert_eq!(
            check(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P2"})),
            Redundancy::Keep
        );
        assert_eq!(
            check(tool::SET_TASK_STATUS, json!({"status": "in progress"})),
            already("status is already IN PROGRESS")
        );
        assert_eq!(
            check(tool::SET_TASK_STATUS, json!({"status": "BLOCKED"})),
            Redundancy::Keep
        );
        assert_eq!(
            check(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-03-15"})),
            already("due date is already 2026-03-15")
        );
        assert_eq!(
            check(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-03-16"})),
            Redundancy::Keep
        );
        assert_eq!(
            check(tool::SET_TASK_TITLE, json!({"title": "  Fix login bug "})),
            already("title is already \"Fix login bug\"")
        );
        assert_eq!(
            check(tool::SET_TASK_TITLE, json!({"title": "fix login bug"})),
            Redundancy::Keep,
            "title case matters"
        );
    }

    #[test]
    fn checklist_and_labels() {
        assert_eq!(
            check(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "c1", "isChecked": true})
            ),
            already("\"Buy groceries\" is already checked")
        );
        assert_eq!(
            check(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "c1", "isChecked": true, "title": "Buy groceries"})
            ),
            already("\"Buy groceries\" is already checked")
        );
        assert_eq!(
            check(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "c1", "isChecked": true, "title": "Buy food"})
            ),
            Redundancy::Keep
        );
        assert_eq!(
            check(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "c2", "isChecked": true})
            ),
            Redundancy::Keep
        );
        assert_eq!(
            check(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "nope", "isChecked": true})
            ),
            Redundancy::InventedId("nope".into())
        );
        assert_eq!(
            check(tool::ADD_CHECKLIST_ITEM, json!({"title": "walk DOG "})),
            already("\"Walk dog\" is already on the checklist")
        );
        assert_eq!(
            check(tool::ADD_CHECKLIST_ITEM, json!({"title": "Feed cat"})),
            Redundancy::Keep
        );
        assert_eq!(
            check(tool::ASSIGN_TASK_LABEL, json!({"label": "Bug"})),
            already("label \"Bug\" is already assigned")
        );
        assert_eq!(
            check(tool::ASSIGN_TASK_LABEL, json!({"label": "auth"})),
            Redundancy::Keep
        );
    }

    #[test]
    fn unset_fields_keep() {
        let empty = TaskSnapshot::default();
        assert_eq!(
            empty.redundancy(tool::UPDATE_TASK_ESTIMATE, &json!({"minutes": 120})),
            Redundancy::Keep
        );
        assert_eq!(
            empty.redundancy(tool::UPDATE_TASK_PRIORITY, &json!({"priority": "P1"})),
            Redundancy::Keep
        );
        assert_eq!(empty.redundancy("unknown", &json!({})), Redundancy::Keep);
    }
}
