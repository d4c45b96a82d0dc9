//! A task as it is now: what proposals are compared against.

use crate::catalog::{normalize_priority, normalize_status, tool};
use assent_tools::SummaryContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::Date;

/// One checklist item of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChecklistItem {
    /// Stable id.
    pub id: String,
    /// Its text.
    pub title: String,
    /// Whether it is done.
    pub is_checked: bool,
}

/// The current state of a task, as loaded by the host.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSnapshot {
    /// Task id.
    pub id: String,
    /// Title.
    pub title: String,
    /// One of [`crate::TASK_STATUSES`].
    pub status: String,
    /// `P0`..`P3`, if set.
    pub priority: Option<String>,
    /// Estimate in minutes, if set.
    pub estimate_minutes: Option<u32>,
    /// Due date, if set.
    pub due_date: Option<Date>,
    /// Language code, if detected.
    pub language: Option<String>,
    /// The category the policy allowlist is checked against.
    pub category: Option<String>,
    /// Assigned labels.
    pub labels: Vec<String>,
    /// Checklist items, in order.
    pub checklist: Vec<ChecklistItem>,
}

impl TaskSnapshot {
    /// The checklist item with `id`.
    pub fn checklist_item(&self, id: &str) -> Option<&ChecklistItem> {
        self.checklist.iter().find(|i| i.id == id)
    }

    /// The value a proposal of `tool_name` would replace, for a reviewer's
    /// `before → after`; `None` for additions and unknown tools.
    pub fn before_value(&self, tool_name: &str, args: &Value) -> Option<Value> {
        match tool_name {
            tool::SET_TASK_TITLE => Some(json!(self.title)),
            tool::UPDATE_TASK_ESTIMATE => Some(json!(self.estimate_minutes)),
            tool::UPDATE_TASK_DUE_DATE => Some(json!(self.due_date.map(|d| d.to_string()))),
            tool::UPDATE_TASK_PRIORITY => {
                Some(json!(self.priority.as_deref().map(normalize_priority)))
            }
            tool::SET_TASK_STATUS => Some(json!(normalize_status(&self.status))),
            tool::SET_TASK_LANGUAGE => Some(json!(self.language)),
            tool::UPDATE_CHECKLIST_ITEM => {
                let id = args.get("id")?.as_str()?;
                let item = self.checklist_item(id)?;
                Some(json!({"title": item.title, "isChecked": item.is_checked}))
            }
            _ => None,
        }
    }
}

impl TaskSnapshot {
    /// The fields `tool_name(args)` would touch, by name (the stale-target guard's
    /// fingerprint): the value a setter replaces under its field's name, a checklist
    /// item's title and check mark. Tools that only add (a label, a checklist item) or
    /// remove touch nothing that could have changed under them: `None`.
    pub fn fingerprint_of(&self, tool_name: &str, args: &Value) -> Option<Value> {
        let field = match tool_name {
            tool::SET_TASK_TITLE => "title",
            tool::UPDATE_TASK_ESTIMATE => "estimateMinutes",
            tool::UPDATE_TASK_DUE_DATE => "dueDate",
            tool::UPDATE_TASK_PRIORITY => "priority",
            tool::SET_TASK_STATUS => "status",
            tool::SET_TASK_LANGUAGE => "language",
            // Already an object of field names.
            tool::UPDATE_CHECKLIST_ITEM => return self.before_value(tool_name, args),
            _ => return None,
        };
        Some(json!({ field: self.before_value(tool_name, args)? }))
    }
}

impl SummaryContext for TaskSnapshot {
    fn title_of(&self, entity_id: &str) -> Option<String> {
        self.checklist_item(entity_id).map(|i| i.title.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_values() {
        let snap = TaskSnapshot {
            id: "t".into(),
            title: "Old".into(),
            status: "open".into(),
            priority: Some("p2".into()),
            estimate_minutes: Some(30),
            checklist: vec![ChecklistItem {
                id: "c1".into(),
                title: "Buy".into(),
                is_checked: false,
            }],
            ..TaskSnapshot::default()
        };
        assert_eq!(
            snap.before_value("set_task_status", &json!({})),
            Some(json!("OPEN"))
        );
        assert_eq!(
            snap.before_value("update_task_priority", &json!({})),
            Some(json!("P2"))
        );
        assert_eq!(
            snap.before_value("update_task_estimate", &json!({})),
            Some(json!(30))
        );
        assert_eq!(
            snap.before_value("update_task_due_date", &json!({})),
            Some(Value::Null)
        );
        assert_eq!(
            snap.before_value("update_checklist_item", &json!({"id": "c1"})),
            Some(json!({"title": "Buy", "isChecked": false}))
        );
        assert_eq!(snap.before_value("add_checklist_item", &json!({})), None);
        assert_eq!(snap.title_of("c1").as_deref(), Some("Buy"));
    }
}
