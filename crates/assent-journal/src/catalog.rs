//! The journal's tools (plan, section 4): schemas the model sees, modes, and the
//! summaries a person reads.

use assent_tools::{BatchSpec, SummaryContext, ToolMode, ToolRegistry, ToolSpec, ToolsError};
use serde_json::{Value, json};

/// Tool names, as the model calls them.
pub mod tool {
    /// Rename the task.
    pub const SET_TASK_TITLE: &str = "set_task_title";
    /// Set the estimate in minutes.
    pub const UPDATE_TASK_ESTIMATE: &str = "update_task_estimate";
    /// Set the due date.
    pub const UPDATE_TASK_DUE_DATE: &str = "update_task_due_date";
    /// Set the priority.
    pub const UPDATE_TASK_PRIORITY: &str = "update_task_priority";
    /// Move the task to another status.
    pub const SET_TASK_STATUS: &str = "set_task_status";
    /// Batch: assign labels (exploded per label).
    pub const ASSIGN_TASK_LABELS: &str = "assign_task_labels";
    /// Assign one label.
    pub const ASSIGN_TASK_LABEL: &str = "assign_task_label";
    /// Batch: add checklist items.
    pub const ADD_MULTIPLE_CHECKLIST_ITEMS: &str = "add_multiple_checklist_items";
    /// Add one checklist item.
    pub const ADD_CHECKLIST_ITEM: &str = "add_checklist_item";
    /// Batch: update checklist items.
    pub const UPDATE_CHECKLIST_ITEMS: &str = "update_checklist_items";
    /// Update one checklist item.
    pub const UPDATE_CHECKLIST_ITEM: &str = "update_checklist_item";
    /// Record the detected language (immediate).
    pub const SET_TASK_LANGUAGE: &str = "set_task_language";
    /// The agent's report (local).
    pub const UPDATE_REPORT: &str = "update_report";
    /// The agent's private notes (local).
    pub const RECORD_OBSERVATIONS: &str = "record_observations";
}

/// The statuses a task can have.
pub const TASK_STATUSES: &[&str] = &["OPEN", "IN PROGRESS", "GROOMED", "BLOCKED", "ON HOLD"];

/// The priorities a task can have, highest first.
pub const TASK_PRIORITIES: &[&str] = &["P0", "P1", "P2", "P3"];

/// A due date as the tools write it, `YYYY-MM-DD` (surrounding blanks ignored).
pub fn parse_due_date(text: &str) -> Result<time::Date, time::error::Parse> {
    time::Date::parse(
        text.trim(),
        time::macros::format_description!("[year]-[month]-[day]"),
    )
}

/// A due date as the tools write it: `YYYY-MM-DD`.
pub fn format_due_date(date: time::Date) -> String {
    date.format(time::macros::format_description!("[year]-[month]-[day]"))
        .unwrap_or_else(|_| date.to_string())
}

/// `" p1 "` → `"P1"`.
pub fn normalize_priority(value: &str) -> String {
    value.trim().to_uppercase()
}

/// `" in progress "` → `"IN PROGRESS"`.
pub fn normalize_status(value: &str) -> String {
    value.trim().to_uppercase()
}

/// Minutes from `60` or `"60"`; `None` for anything else.
pub fn parse_estimate_minutes(value: &Value) -> Option<u32> {
    match value {
        Value::Number(n) => n.as_u64().and_then(|m| u32::try_from(m).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn summarize_title(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!("Set title to \"{}\"", str_arg(args, "title").trim())
}

fn summarize_estimate(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    match args.get("minutes").and_then(parse_estimate_minutes) {
        Some(m) => format!("Set estimate to {m} minutes"),
        None => "Set estimate".to_owned(),
    }
}

fn summarize_due_date(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!("Set due date to {}", str_arg(args, "dueDate").trim())
}

fn summarize_priority(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!(
        "Set priority to {}",
        normalize_priority(str_arg(args, "priority"))
    )
}

fn summarize_status(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!(
        "Set status to {}",
        normalize_status(str_arg(args, "status"))
    )
}

fn summarize_label(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!("Assign label: \"{}\"", str_arg(args, "label").trim())
}

fn summarize_add_checklist(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!("Add: \"{}\"", str_arg(args, "title").trim())
}

fn summarize_update_checklist(args: &Value, context: Option<&dyn SummaryContext>) -> String {
    let checked = args.get("isChecked").and_then(Value::as_bool);
    if let Some(title) = args.get("title").and_then(Value::as_str) {
        return match checked {
            Some(true) => format!("Check: \"{title}\""),
            Some(false) => format!("Uncheck: \"{title}\""),
            None => format!("Update: \"{title}\""),
        };
    }
    let id = str_arg(args, "id");
    let verb = if checked == Some(false) {
        "Uncheck"
    } else {
        "Check off"
    };
    match context.and_then(|c| c.title_of(id)) {
        Some(title) => format!("{verb}: \"{title}\""),
        None => {
            let short: String = id.chars().take(8).collect();
            format!("{verb} item {short}…")
        }
    }
}

fn summarize_language(args: &Value, _: Option<&dyn SummaryContext>) -> String {
    format!("Set language to {}", str_arg(args, "languageCode"))
}

fn spec(
    name: &str,
    description: &str,
    mode: ToolMode,
    args_schema: Value,
    summary: Option<assent_tools::SummaryFn>,
) -> ToolSpec {
    let mut spec = ToolSpec::new(name, description, mode, args_schema);
    spec.summary = summary;
    spec
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn batch(
    mut spec: ToolSpec,
    array_key: &str,
    singular: &str,
    element_key: Option<&str>,
) -> ToolSpec {
    spec.batch = Some(BatchSpec {
        array_key: array_key.to_owned(),
        singular_tool: singular.to_owned(),
        element_key: element_key.map(str::to_owned),
    });
    spec
}

/// Adds the journal's tools to `registry` (singular tools before their batches).
pub fn register_catalog(registry: &mut ToolRegistry) -> Result<(), ToolsError> {
    use ToolMode::{Deferred, Immediate, Local};
    let title = json!({"type": "string", "minLength": 1, "maxLength": 500, "pattern": "\\S"});
    let checklist_title =
        json!({"type": "string", "minLength": 1, "maxLength": 500, "pattern": "\\S"});
    let specs = [
        spec(
            tool::SET_TASK_TITLE,
            "Rename the task.",
            Deferred,
            object(json!({"title": title}), &["title"]),
            Some(summarize_title),
        ),
        spec(
            tool::UPDATE_TASK_ESTIMATE,
            "Set the time estimate, in minutes (1 to 1440).",
            Deferred,
            object(
                json!({"minutes": {"anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 1440},
                    {"type": "string", "pattern": "^\\s*(1440|14[0-3][0-9]|1[0-3][0-9]{2}|[1-9][0-9]{0,2})\\s*$"}
                ]}}),
                &["minutes"],
            ),
            Some(summarize_estimate),
        ),
        spec(
            tool::UPDATE_TASK_DUE_DATE,
            "Set the due date (YYYY-MM-DD).",
            Deferred,
            object(
                json!({"dueDate": {"type": "string", "format": "date", "pattern": "^\\s*\\d{4}-\\d{2}-\\d{2}\\s*$"}}),
                &["dueDate"],
            ),
            Some(summarize_due_date),
        ),
        spec(
            tool::UPDATE_TASK_PRIORITY,
            "Set the priority: one of P0 (highest), P1, P2, P3.",
            Deferred,
            object(
                json!({"priority": {"type": "string", "pattern": "^\\s*[Pp][0-3]\\s*$"}}),
                &["priority"],
            ),
            Some(summarize_priority),
        ),
        spec(
            tool::SET_TASK_STATUS,
            "Move the task to a status: OPEN, IN PROGRESS, GROOMED, BLOCKED or ON HOLD, with an optional reason.",
            Deferred,
            object(
                json!({
                    "status": {"type": "string", "pattern": "^\\s*(?i:open|in progress|groomed|blocked|on hold)\\s*$"},
                    "reason": {"type": "string", "maxLength": 2000}
                }),
                &["status"],
            ),
            Some(summarize_status),
        ),
        spec(
            tool::ASSIGN_TASK_LABEL,
            "Assign one label to the task.",
            Deferred,
            object(
                json!({"label": {"type": "string", "minLength": 1, "maxLength": 100, "pattern": "\\S"}}),
                &["label"],
            ),
            Some(summarize_label),
        ),
        batch(
            spec(
                tool::ASSIGN_TASK_LABELS,
                "Assign labels to the task; each is confirmed on its own.",
                Deferred,
                object(
                    json!({"labels": {"type": "array", "minItems": 1}}),
                    &["labels"],
                ),
                None,
            ),
            "labels",
            tool::ASSIGN_TASK_LABEL,
            Some("label"),
        ),
        spec(
            tool::ADD_CHECKLIST_ITEM,
            "Add one checklist item.",
            Deferred,
            object(json!({"title": checklist_title}), &["title"]),
            Some(summarize_add_checklist),
        ),
        batch(
            spec(
                tool::ADD_MULTIPLE_CHECKLIST_ITEMS,
                "Add checklist items: {\"items\": [{\"title\": ...}]}; each is confirmed on its own.",
                Deferred,
                object(
                    json!({"items": {"type": "array", "minItems": 1}}),
                    &["items"],
                ),
                None,
            ),
            "items",
            tool::ADD_CHECKLIST_ITEM,
            Some("title"),
        ),
        spec(
            tool::UPDATE_CHECKLIST_ITEM,
            "Check, uncheck or rename one checklist item by id.",
            Deferred,
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "isChecked": {"type": "boolean"},
                    "title": checklist_title
                },
                "required": ["id"],
                "anyOf": [{"required": ["isChecked"]}, {"required": ["title"]}],
                "additionalProperties": false
            }),
            Some(summarize_update_checklist),
        ),
        batch(
            spec(
                tool::UPDATE_CHECKLIST_ITEMS,
                "Update checklist items: {\"items\": [{\"id\", \"isChecked\"?, \"title\"?}]}; each is confirmed on its own.",
                Deferred,
                object(
                    json!({"items": {"type": "array", "minItems": 1}}),
                    &["items"],
                ),
                None,
            ),
            "items",
            tool::UPDATE_CHECKLIST_ITEM,
            None,
        ),
        spec(
            tool::SET_TASK_LANGUAGE,
            "Record the language the task is written in (ISO 639 code).",
            Immediate,
            object(
                json!({"languageCode": {"type": "string", "pattern": "^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$"}}),
                &["languageCode"],
            ),
            Some(summarize_language),
        ),
        spec(
            tool::UPDATE_REPORT,
            "Replace your report on this task (markdown).",
            Local,
            object(json!({"markdown": {"type": "string"}}), &["markdown"]),
            None,
        ),
        spec(
            tool::RECORD_OBSERVATIONS,
            "Record private observations for your future wakes.",
            Local,
            object(
                json!({"observations": {"type": "array", "items": {"type": "string"}}}),
                &["observations"],
            ),
            None,
        ),
    ];
    for spec in specs {
        let spec = match compensation(&spec.name) {
            Some(compensation) => spec.with_compensation(compensation),
            None => spec,
        };
        registry.register(spec)?;
    }
    Ok(())
}

/// How each setter is undone (`assent undo`): the same tool, back to the value it
/// replaced (`before`, recorded with the item and refreshed if the task changed before
/// it was applied). Nothing before (no due date, no estimate) cannot be set back with
/// these tools, so there is no compensation then; tools that add have none (their
/// reverse is another tool the journal does not offer).
fn compensation(tool_name: &str) -> Option<assent_tools::CompensationFn> {
    fn back_to(tool: &str, field: &str, before: Option<&Value>) -> Option<(String, Value)> {
        let before = before.filter(|value| !value.is_null())?;
        Some((tool.to_owned(), json!({ field: before })))
    }
    Some(match tool_name {
        tool::SET_TASK_TITLE => |_, before, _| back_to(tool::SET_TASK_TITLE, "title", before),
        tool::UPDATE_TASK_ESTIMATE => {
            |_, before, _| back_to(tool::UPDATE_TASK_ESTIMATE, "minutes", before)
        }
        tool::UPDATE_TASK_DUE_DATE => {
            |_, before, _| back_to(tool::UPDATE_TASK_DUE_DATE, "dueDate", before)
        }
        tool::UPDATE_TASK_PRIORITY => {
            |_, before, _| back_to(tool::UPDATE_TASK_PRIORITY, "priority", before)
        }
        tool::SET_TASK_STATUS => |_, before, _| back_to(tool::SET_TASK_STATUS, "status", before),
        tool::UPDATE_CHECKLIST_ITEM => |args, before, _| {
            let before = before?;
            Some((
                tool::UPDATE_CHECKLIST_ITEM.to_owned(),
                json!({"id": args.get("id")?, "title": before.get("title")?,
                       "isChecked": before.get("isChecked")?}),
            ))
        },
        _ => return None,
    })
}

/// A registry holding exactly the journal's tools.
pub fn catalog() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    // The catalog is constant and covered by `catalog_registers`; failing here is a
    // programming error in this file, not bad input.
    #[allow(clippy::expect_used)]
    register_catalog(&mut registry).expect("the journal catalog is valid");
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChecklistItem, TaskSnapshot};

    fn summary(tool: &str, args: Value) -> String {
        catalog().summarize(tool, &args, None)
    }

    #[test]
    fn setters_are_undone_back_to_the_value_they_replaced() {
        let c = catalog();
        let undo = |tool: &str, args: Value, before: Option<Value>| {
            c.require(tool)
                .expect("present")
                .compensate(&args, before.as_ref(), "")
        };
        assert_eq!(
            undo(
                tool::UPDATE_TASK_PRIORITY,
                json!({"priority": "P0"}),
                Some(json!("P2"))
            ),
            Some((
                tool::UPDATE_TASK_PRIORITY.to_owned(),
                json!({"priority": "P2"})
            ))
        );
        assert_eq!(
            undo(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "c1", "isChecked": true}),
                Some(json!({"title": "Buy", "isChecked": false}))
            ),
            Some((
                tool::UPDATE_CHECKLIST_ITEM.to_owned(),
                json!({"id": "c1", "title": "Buy", "isChecked": false})
            ))
        );
        assert_eq!(
            undo(
                tool::UPDATE_TASK_DUE_DATE,
                json!({"dueDate": "2026-01-01"}),
                Some(Value::Null)
            ),
            None
        );
        assert_eq!(
            undo(tool::ADD_CHECKLIST_ITEM, json!({"title": "x"}), None),
            None
        );
        // The undo of an undo is the same tool again.
        let (tool, args) = undo(
            tool::SET_TASK_TITLE,
            json!({"title": "B"}),
            Some(json!("A")),
        )
        .unwrap();
        assert_eq!(
            undo(&tool, args, Some(json!("B"))),
            Some((tool::SET_TASK_TITLE.to_owned(), json!({"title": "B"})))
        );
    }

    #[test]
    fn catalog_registers_with_modes() {
        let c = catalog();
        assert_eq!(c.iter().count(), 14);
        assert_eq!(
            c.require(tool::SET_TASK_LANGUAGE).expect("present").mode,
            ToolMode::Immediate
        );
        assert_eq!(
            c.require(tool::UPDATE_REPORT).expect("present").mode,
            ToolMode::Local
        );
        assert_eq!(
            c.require(tool::RECORD_OBSERVATIONS).expect("present").mode,
            ToolMode::Local
        );
        for t in [
            tool::SET_TASK_TITLE,
            tool::UPDATE_TASK_ESTIMATE,
            tool::SET_TASK_STATUS,
            tool::ASSIGN_TASK_LABELS,
        ] {
            assert_eq!(
                c.require(t).expect("present").mode,
                ToolMode::Deferred,
                "{t}"
            );
        }
        let b = c
            .require(tool::UPDATE_CHECKLIST_ITEMS)
            .expect("present")
            .batch
            .clone()
            .expect("batch");
        assert_eq!(b.singular_tool, tool::UPDATE_CHECKLIST_ITEM);
    }

    #[test]
    fn due_dates_round_trip() {
        let date = parse_due_date(" 2026-03-15 ").expect("a date");
        assert_eq!(format_due_date(date), "2026-03-15");
        assert!(parse_due_date("2026-02-30").is_err());
        assert!(parse_due_date("15.03.2026").is_err());
    }

    #[test]
    fn summaries() {
        assert_eq!(
            summary(tool::SET_TASK_TITLE, json!({"title": "Fix login bug"})),
            "Set title to \"Fix login bug\""
        );
        assert_eq!(
            summary(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 60})),
            "Set estimate to 60 minutes"
        );
        assert_eq!(
            summary(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": "60"})),
            "Set estimate to 60 minutes"
        );
        assert_eq!(
            summary(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-03-15"})),
            "Set due date to 2026-03-15"
        );
        assert_eq!(
            summary(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P2"})),
            "Set priority to P2"
        );
        assert_eq!(
            summary(tool::SET_TASK_STATUS, json!({"status": "BLOCKED"})),
            "Set status to BLOCKED"
        );
        assert_eq!(
            summary(tool::ASSIGN_TASK_LABEL, json!({"label": "bug"})),
            "Assign label: \"bug\""
        );
        assert_eq!(
            summary(tool::ADD_CHECKLIST_ITEM, json!({"title": "Design mockup"})),
            "Add: \"Design mockup\""
        );
        assert_eq!(
            summary(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "x", "isChecked": true, "title": "T"})
            ),
            "Check: \"T\""
        );
        assert_eq!(
            summary(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "x", "isChecked": false, "title": "T"})
            ),
            "Uncheck: \"T\""
        );
        assert_eq!(
            summary(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "x", "title": "T"})
            ),
            "Update: \"T\""
        );
        assert_eq!(
            summary(
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "0123456789abcdef", "isChecked": true})
            ),
            "Check off item 01234567…"
        );
        let snap = TaskSnapshot {
            checklist: vec![ChecklistItem {
                id: "c1".into(),
                title: "Buy milk".into(),
                is_checked: false,
            }],
            ..TaskSnapshot::default()
        };
        assert_eq!(
            catalog().summarize(
                tool::UPDATE_CHECKLIST_ITEM,
                &json!({"id": "c1", "isChecked": true}),
                Some(&snap)
            ),
            "Check off: \"Buy milk\""
        );
        assert_eq!(
            summary("mystery_tool", json!({"z": 1, "a": 2})),
            "mystery_tool(a, z)"
        );
    }

    #[test]
    fn schemas_accept_and_refuse() {
        let c = catalog();
        let ok = |t: &str, v: Value| assert!(c.validate_args(t, &v).is_ok(), "{t} {v}");
        let bad = |t: &str, v: Value| assert!(c.validate_args(t, &v).is_err(), "{t} {v}");
        ok(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 1}));
        ok(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 1440}));
        ok(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": "120"}));
        bad(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 0}));
        bad(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 1441}));
        bad(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": "1441"}));
        bad(tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 1.5}));
        ok(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-03-15"}));
        bad(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "2026-02-30"}));
        bad(tool::UPDATE_TASK_DUE_DATE, json!({"dueDate": "15.03.2026"}));
        ok(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P0"}));
        ok(tool::UPDATE_TASK_PRIORITY, json!({"priority": " p3 "}));
        bad(tool::UPDATE_TASK_PRIORITY, json!({"priority": "P4"}));
        ok(
            tool::SET_TASK_STATUS,
            json!({"status": "IN PROGRESS", "reason": "started"}),
        );
        ok(tool::SET_TASK_STATUS, json!({"status": "on hold"}));
        bad(tool::SET_TASK_STATUS, json!({"status": "DONE"}));
        bad(tool::SET_TASK_TITLE, json!({"title": "   "}));
        bad(tool::SET_TASK_TITLE, json!({"title": "x", "extra": true}));
        ok(
            tool::UPDATE_CHECKLIST_ITEM,
            json!({"id": "a", "isChecked": true}),
        );
        bad(tool::UPDATE_CHECKLIST_ITEM, json!({"id": "a"}));
        bad(tool::UPDATE_CHECKLIST_ITEM, json!({"isChecked": true}));
        ok(tool::SET_TASK_LANGUAGE, json!({"languageCode": "de"}));
        bad(tool::SET_TASK_LANGUAGE, json!({"languageCode": "German"}));
    }
}
