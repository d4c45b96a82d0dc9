//! The journal's tasks in device sync: each task (with its labels and checklist) is one
//! synced entity of type `task`, exported and written back whole.
//!
//! A merged version replaces the local rows as they are: its clock and `updated_at`
//! come from the merge, not from this device, and nothing is enqueued in the outbox
//! (the state came from a peer). Before that it passes the field rules of a local
//! write, and a task this device has keeps its category and creation time (no tool
//! changes them; the category decides which agents may touch the task).

use crate::tasks::{
    MAX_LABEL_CHARS, MAX_REASON_CHARS, MAX_TITLE_CHARS, clean_text, parse_due_date, valid_estimate,
    valid_priority, valid_status,
};
use assent_store::sync::HostEntities;
use assent_store::{Backend, Connection};
use assent_sync::EntityVersion;
use assent_tools::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::Row;

/// The entity type of a journal task in sync batches.
pub const TASK_ENTITY: &str = "task";

/// The journal's tasks as synced entities (see [`HostEntities`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskEntities;

/// A task's content in a sync batch (everything but its id, clock and `updatedAt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskState {
    title: String,
    status: String,
    status_reason: Option<String>,
    priority: Option<String>,
    estimate_minutes: Option<i64>,
    due_date: Option<String>,
    language: Option<String>,
    category: Option<String>,
    created_at: String,
    labels: Vec<String>,
    checklist: Vec<ChecklistRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChecklistRow {
    id: String,
    position: i64,
    title: String,
    is_checked: i64,
}

/// One row per task: its clock, `updated_at` and its content as JSON, labels and
/// checklist in a fixed order so that equal tasks export equal text (`json(…)` keeps
/// the nested arrays JSON: a subquery's result loses its JSON subtype).
const EXPORT: &str = "SELECT id, vector_clock, updated_at, json_object(
        'title', title, 'status', status, 'statusReason', status_reason, 'priority', priority,
        'estimateMinutes', estimate_minutes, 'dueDate', due_date, 'language', language,
        'category', category, 'createdAt', created_at,
        'labels', json((SELECT json_group_array(label)
                   FROM (SELECT label FROM task_labels WHERE task_id = tasks.id ORDER BY label))),
        'checklist', json((SELECT json_group_array(json_object('id', id, 'position', position,
                                                          'title', title, 'isChecked', is_checked))
                      FROM (SELECT * FROM checklist_items WHERE task_id = tasks.id ORDER BY position, id)))
    ) AS state
    FROM tasks ORDER BY id";

/// [`EXPORT`] in PostgreSQL's JSON functions (the same content; `::text` because the
/// `Any` driver has no JSON type).
const EXPORT_POSTGRES: &str = "SELECT id, vector_clock, updated_at, json_build_object(
        'title', title, 'status', status, 'statusReason', status_reason, 'priority', priority,
        'estimateMinutes', estimate_minutes, 'dueDate', due_date, 'language', language,
        'category', category, 'createdAt', created_at,
        'labels', (SELECT COALESCE(json_agg(label ORDER BY lower(label), label), '[]'::json)
                   FROM task_labels WHERE task_id = tasks.id),
        'checklist', (SELECT COALESCE(json_agg(json_build_object('id', id, 'position', position,
                                                                 'title', title, 'isChecked', is_checked)
                                               ORDER BY position, id), '[]'::json)
                      FROM checklist_items WHERE task_id = tasks.id)
    )::text AS state
    FROM tasks ORDER BY id";

async fn export_tasks(conn: &mut Connection) -> Result<Vec<EntityVersion>, String> {
    let export = match Backend::of(conn) {
        Backend::Sqlite => EXPORT,
        Backend::Postgres => EXPORT_POSTGRES,
    };
    let rows = sqlx::query(export)
        .fetch_all(conn)
        .await
        .map_err(|e| format!("cannot read tasks: {e}"))?;
    rows.iter()
        .map(|row| {
            let get = |column: &str| -> Result<String, String> {
                row.try_get(column)
                    .map_err(|e| format!("cannot read column {column} of tasks: {e}"))
            };
            let id = get("id")?;
            let bad = |what: &str, e: &dyn std::fmt::Display| format!("task {id}: bad {what}: {e}");
            let updated_at = get("updated_at")?;
            Ok(EntityVersion {
                entity_type: TASK_ENTITY.to_owned(),
                target_kind: TASK_ENTITY.to_owned(),
                target_id: id.clone(),
                vector_clock: serde_json::from_str(&get("vector_clock")?)
                    .map_err(|e| bad("vector clock", &e))?,
                updated_at: assent_store::timefmt::parse("tasks", &updated_at)
                    .map_err(|e| bad("updated_at", &e))?,
                state: serde_json::from_str(&get("state")?).map_err(|e| bad("content", &e))?,
                entity_id: id,
            })
        })
        .collect()
}

async fn write_task(conn: &mut Connection, version: &EntityVersion) -> Result<(), String> {
    let id = &version.entity_id;
    if version.entity_type != TASK_ENTITY {
        return Err(format!(
            "entity {id:?} has type {:?}; the journal syncs only {TASK_ENTITY:?}",
            version.entity_type
        ));
    }
    let task: TaskState = serde_json::from_value(version.state.clone())
        .map_err(|e| format!("task {id}: invalid content: {e}"))?;
    check_content(&task).map_err(|(field, reason)| format!("task {id}: {field} {reason}"))?;
    let db = |e: sqlx::Error| format!("cannot write task {id}: {e}");
    let fixed: Option<(Option<String>, String)> =
        sqlx::query_as("SELECT category, created_at FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
    if let Some((category, created_at)) = fixed {
        // No tool changes these: the category decides which agents may touch the task,
        // so a batch that changes it would widen an agent's reach with no tool call.
        if category != task.category {
            return Err(format!(
                "task {id}: category is {category:?} here and {:?} in the batch; a task's category never changes",
                task.category
            ));
        }
        if created_at != task.created_at {
            return Err(format!(
                "task {id}: createdAt is {created_at:?} here and {:?} in the batch; it never changes",
                task.created_at
            ));
        }
    }
    sqlx::query(
        "INSERT INTO tasks (id, title, status, status_reason, priority, estimate_minutes, due_date, language,
                            category, vector_clock, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO UPDATE SET title = excluded.title, status = excluded.status,
             status_reason = excluded.status_reason, priority = excluded.priority,
             estimate_minutes = excluded.estimate_minutes, due_date = excluded.due_date,
             language = excluded.language, category = excluded.category,
             vector_clock = excluded.vector_clock, created_at = excluded.created_at,
             updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(&task.title)
    .bind(&task.status)
    .bind(&task.status_reason)
    .bind(&task.priority)
    .bind(task.estimate_minutes)
    .bind(&task.due_date)
    .bind(&task.language)
    .bind(&task.category)
    .bind(json!(version.vector_clock).to_string())
    .bind(&task.created_at)
    .bind(assent_store::timefmt::format(version.updated_at))
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    sqlx::query("DELETE FROM task_labels WHERE task_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    for label in &task.labels {
        sqlx::query("INSERT INTO task_labels (task_id, label) VALUES ($1, $2)")
            .bind(id)
            .bind(label)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    sqlx::query("DELETE FROM checklist_items WHERE task_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    for item in &task.checklist {
        sqlx::query(
            "INSERT INTO checklist_items (id, task_id, position, title, is_checked) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&item.id)
        .bind(id)
        .bind(item.position)
        .bind(&item.title)
        .bind(item.is_checked)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    Ok(())
}

/// The field rules of the local writes (`create_task` and the tools) for a task that
/// arrives in a sync batch: the field that breaks one, and how.
fn check_content(task: &TaskState) -> Result<(), (&'static str, String)> {
    clean_text(&task.title, MAX_TITLE_CHARS).map_err(|r| ("title", r))?;
    valid_status(&task.status).map_err(|r| ("status", r))?;
    if let Some(reason) = &task.status_reason {
        let chars = reason.chars().count();
        if chars > MAX_REASON_CHARS {
            return Err((
                "statusReason",
                format!("must be at most {MAX_REASON_CHARS} characters (got {chars})"),
            ));
        }
    }
    if let Some(priority) = &task.priority {
        valid_priority(priority).map_err(|r| ("priority", r))?;
    }
    if let Some(minutes) = task.estimate_minutes {
        u32::try_from(minutes)
            .map_err(|e| e.to_string())
            .and_then(valid_estimate)
            .map_err(|r| ("estimateMinutes", r))?;
    }
    if let Some(due) = &task.due_date {
        parse_due_date(due).map_err(|r| ("dueDate", r))?;
    }
    if task
        .category
        .as_deref()
        .is_some_and(|c| c.trim().is_empty())
    {
        return Err(("category", "must not be blank".to_owned()));
    }
    assent_store::timefmt::parse("tasks", &task.created_at)
        .map_err(|e| ("createdAt", e.to_string()))?;
    for label in &task.labels {
        clean_text(label, MAX_LABEL_CHARS).map_err(|r| ("labels", r))?;
    }
    for item in &task.checklist {
        clean_text(&item.title, MAX_TITLE_CHARS).map_err(|r| ("checklist", r))?;
        if !matches!(item.is_checked, 0 | 1) {
            return Err((
                "checklist",
                format!("isChecked must be 0 or 1 (got {})", item.is_checked),
            ));
        }
    }
    Ok(())
}

impl HostEntities for TaskEntities {
    fn export<'a>(
        &'a self,
        conn: &'a mut Connection,
    ) -> BoxFuture<'a, Result<Vec<EntityVersion>, String>> {
        Box::pin(export_tasks(conn))
    }

    fn write<'a>(
        &'a self,
        conn: &'a mut Connection,
        version: &'a EntityVersion,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(write_task(conn, version))
    }
}
