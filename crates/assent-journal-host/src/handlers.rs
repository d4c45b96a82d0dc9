//! The handlers of the journal's singular tools: each checks the task exists, checks
//! its arguments again (the schema was checked before, but a handler never trusts its
//! caller), writes on the caller's connection and, when something changed, touches the
//! task (clock, `updated_at`, outbox).
//!
//! Batch tools have no handler: the engine explodes them into singular calls before
//! anything runs.

use crate::JournalError;
use crate::tasks::{
    MAX_LABEL_CHARS, MAX_REASON_CHARS, MAX_TITLE_CHARS, TaskRow, clean_text, load_task_row,
    parse_due_date, same_label, status_reason, touch, valid_estimate, valid_priority, valid_status,
};
use assent_journal::{TaskSnapshot, format_due_date, parse_estimate_minutes, tool};
use assent_store::Connection;
use assent_store::StoreError;
use assent_tools::{BoxFuture, ToolHandler, ToolInvocation, ToolOutcome, ToolsError};
use serde_json::Value;

/// The tools that have a handler: every singular, non-local tool of the catalog.
pub(crate) const HANDLED_TOOLS: &[&str] = &[
    tool::SET_TASK_TITLE,
    tool::UPDATE_TASK_ESTIMATE,
    tool::UPDATE_TASK_DUE_DATE,
    tool::UPDATE_TASK_PRIORITY,
    tool::SET_TASK_STATUS,
    tool::ASSIGN_TASK_LABEL,
    tool::ADD_CHECKLIST_ITEM,
    tool::UPDATE_CHECKLIST_ITEM,
    tool::SET_TASK_LANGUAGE,
];

/// The handler of one journal tool.
#[derive(Debug, Clone)]
pub(crate) struct JournalToolHandler {
    /// One of [`HANDLED_TOOLS`].
    pub(crate) tool: &'static str,
    /// This device's id in vector clocks.
    pub(crate) host_id: String,
}

/// Why a handler failed: the message of [`ToolsError::HandlerFailed`].
struct Failure(String);

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<JournalError> for Failure {
    fn from(error: JournalError) -> Self {
        Self(error.to_string())
    }
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Self {
        Self(error.to_string())
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Self(error.to_string())
    }
}

/// What a tool did to the task.
enum Change {
    /// It changed; the task must be touched. The message is the reply.
    Applied(String),
    /// It was already so; nothing was written.
    Unchanged(String),
}

impl ToolHandler<Connection> for JournalToolHandler {
    fn execute<'a>(
        &'a self,
        ctx: &'a mut Connection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        Box::pin(async move {
            self.run(ctx, invocation)
                .await
                .map_err(|Failure(message)| ToolsError::handler_failed(self.tool, message))
        })
    }
}

impl JournalToolHandler {
    async fn run(
        &self,
        conn: &mut Connection,
        inv: &ToolInvocation,
    ) -> Result<ToolOutcome, Failure> {
        if inv.tool_name != self.tool {
            return Err(format!(
                "the handler of {} was called for {}",
                self.tool, inv.tool_name
            )
            .into());
        }
        let task_id = inv.target.target.id.as_str();
        if inv.target.target.kind != crate::TASK_KIND {
            return Err(JournalError::TaskNotFound(task_id.to_owned()).into());
        }
        let TaskRow {
            snapshot: task,
            vector_clock: clock_before,
            ..
        } = load_task_row(conn, task_id)
            .await?
            .ok_or_else(|| JournalError::TaskNotFound(task_id.to_owned()))?;
        let args = &inv.args;
        let change = match self.tool {
            tool::SET_TASK_TITLE => set_title(conn, &task, args).await?,
            tool::UPDATE_TASK_ESTIMATE => set_estimate(conn, &task, args).await?,
            tool::UPDATE_TASK_DUE_DATE => set_due_date(conn, &task, args).await?,
            tool::UPDATE_TASK_PRIORITY => set_priority(conn, &task, args).await?,
            tool::SET_TASK_STATUS => set_status(conn, &task, args).await?,
            tool::ASSIGN_TASK_LABEL => assign_label(conn, &task, args).await?,
            tool::ADD_CHECKLIST_ITEM => add_checklist_item(conn, &task, args).await?,
            tool::UPDATE_CHECKLIST_ITEM => update_checklist_item(conn, &task, args).await?,
            tool::SET_TASK_LANGUAGE => set_language(conn, &task, args).await?,
            other => return Err(format!("the journal has no handler for {other}").into()),
        };
        Ok(match change {
            Change::Applied(message) => {
                let (_, clock) =
                    touch(conn, task_id, &clock_before, &self.host_id, inv.now).await?;
                tracing::debug!(tool = self.tool, task = task_id, "task changed");
                ToolOutcome::changed(message).with_vector_clock(clock)
            }
            Change::Unchanged(message) => ToolOutcome::unchanged(message),
        })
    }
}

/// The string argument `key`.
fn str_arg<'v>(args: &'v Value, key: &str) -> Result<&'v str, Failure> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("argument `{key}` must be a string (got {other})").into()),
        None => Err(format!("missing argument `{key}`").into()),
    }
}

/// The optional string argument `key` (`null` counts as absent).
fn opt_str_arg<'v>(args: &'v Value, key: &str) -> Result<Option<&'v str>, Failure> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => str_arg(args, key).map(Some),
    }
}

/// Argument `key` as a title-like text: trimmed, not blank, at most `max` characters.
fn text_arg(args: &Value, key: &str, max: usize) -> Result<String, Failure> {
    clean_text(str_arg(args, key)?, max)
        .map_err(|reason| format!("argument `{key}` {reason}").into())
}

/// Updates one column of the task.
async fn set_column(
    conn: &mut Connection,
    task_id: &str,
    sql: &'static str,
    value: Option<&str>,
) -> Result<(), Failure> {
    sqlx::query(sql)
        .bind(value)
        .bind(task_id)
        .execute(conn)
        .await?;
    Ok(())
}

async fn set_title(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let title = text_arg(args, "title", MAX_TITLE_CHARS)?;
    if task.title == title {
        return Ok(Change::Unchanged(format!("Title is already \"{title}\".")));
    }
    set_column(
        conn,
        &task.id,
        "UPDATE tasks SET title = $1 WHERE id = $2",
        Some(&title),
    )
    .await?;
    Ok(Change::Applied(format!("Title set to \"{title}\".")))
}

async fn set_estimate(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let raw = args
        .get("minutes")
        .ok_or_else(|| Failure("missing argument `minutes`".to_owned()))?;
    let minutes = parse_estimate_minutes(raw).ok_or_else(|| {
        format!("argument `minutes` must be a whole number of minutes, as 60 or \"60\" (got {raw})")
    })?;
    let minutes =
        valid_estimate(minutes).map_err(|reason| format!("argument `minutes` {reason}"))?;
    if task.estimate_minutes == Some(minutes) {
        return Ok(Change::Unchanged(format!(
            "Estimate is already {minutes} minutes."
        )));
    }
    sqlx::query("UPDATE tasks SET estimate_minutes = $1 WHERE id = $2")
        .bind(i64::from(minutes))
        .bind(&task.id)
        .execute(conn)
        .await?;
    Ok(Change::Applied(format!(
        "Estimate set to {minutes} minutes."
    )))
}

async fn set_due_date(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let date = parse_due_date(str_arg(args, "dueDate")?)
        .map_err(|reason| format!("argument `dueDate` {reason}"))?;
    let text = format_due_date(date);
    if task.due_date == Some(date) {
        return Ok(Change::Unchanged(format!("Due date is already {text}.")));
    }
    set_column(
        conn,
        &task.id,
        "UPDATE tasks SET due_date = $1 WHERE id = $2",
        Some(&text),
    )
    .await?;
    Ok(Change::Applied(format!("Due date set to {text}.")))
}

async fn set_priority(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let priority = valid_priority(str_arg(args, "priority")?)
        .map_err(|reason| format!("argument `priority` {reason}"))?;
    if task.priority.as_deref() == Some(priority.as_str()) {
        return Ok(Change::Unchanged(format!(
            "Priority is already {priority}."
        )));
    }
    set_column(
        conn,
        &task.id,
        "UPDATE tasks SET priority = $1 WHERE id = $2",
        Some(&priority),
    )
    .await?;
    Ok(Change::Applied(format!("Priority set to {priority}.")))
}

async fn set_status(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let status = valid_status(str_arg(args, "status")?)
        .map_err(|reason| format!("argument `status` {reason}"))?;
    let reason = match opt_str_arg(args, "reason")?
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        Some(reason) => {
            let chars = reason.chars().count();
            if chars > MAX_REASON_CHARS {
                return Err(format!(
                    "argument `reason` must be at most {MAX_REASON_CHARS} characters (got {chars})"
                )
                .into());
            }
            Some(reason)
        }
        None => None,
    };
    if task.status == status && status_reason(conn, &task.id).await?.as_deref() == reason {
        return Ok(Change::Unchanged(format!("Status is already {status}.")));
    }
    sqlx::query("UPDATE tasks SET status = $1, status_reason = $2 WHERE id = $3")
        .bind(&status)
        .bind(reason)
        .bind(&task.id)
        .execute(conn)
        .await?;
    Ok(Change::Applied(format!("Status set to {status}.")))
}

async fn assign_label(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let label = text_arg(args, "label", MAX_LABEL_CHARS)?;
    let already =
        |label: &str| Change::Unchanged(format!("Label \"{label}\" is already assigned."));
    if let Some(existing) = task.labels.iter().find(|l| same_label(l, &label)) {
        return Ok(already(existing));
    }
    let inserted = sqlx::query(
        "INSERT INTO task_labels (task_id, label) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(&task.id)
    .bind(&label)
    .execute(conn)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Ok(already(&label));
    }
    Ok(Change::Applied(format!("Label \"{label}\" assigned.")))
}

async fn add_checklist_item(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    // Redundancy (an item with the same title) is the engine's check, made before a
    // person confirms; a confirmed addition is always added.
    let title = text_arg(args, "title", MAX_TITLE_CHARS)?;
    // The next position in the insert itself: one round trip, not a read and a write
    // (the writer lock keeps another insert from taking the same position).
    sqlx::query(
        "INSERT INTO checklist_items (id, task_id, position, title, is_checked)
         SELECT $1, $2, COALESCE(MAX(position) + 1, 0), $3, 0 FROM checklist_items WHERE task_id = $2",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&task.id)
    .bind(&title)
    .execute(conn)
    .await?;
    Ok(Change::Applied(format!(
        "Checklist item \"{title}\" added."
    )))
}

async fn update_checklist_item(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let id = str_arg(args, "id")?;
    let checked = match args.get("isChecked") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(format!("argument `isChecked` must be true or false (got {other})").into());
        }
    };
    let title = match opt_str_arg(args, "title")? {
        Some(_) => Some(text_arg(args, "title", MAX_TITLE_CHARS)?),
        None => None,
    };
    if checked.is_none() && title.is_none() {
        return Err("nothing to update: give `isChecked`, `title` or both"
            .to_owned()
            .into());
    }
    let item = task
        .checklist_item(id)
        .ok_or_else(|| format!("checklist item {id} does not exist on task {}", task.id))?;
    let new_title = title.filter(|t| *t != item.title);
    let new_checked = checked.filter(|c| *c != item.is_checked);
    let state = |c: bool| if c { "checked" } else { "unchecked" };
    let message = match (&new_title, new_checked) {
        (None, None) => {
            let detail = match checked {
                Some(c) => format!("is already {}", state(c)),
                None => "already has that title".to_owned(),
            };
            return Ok(Change::Unchanged(format!(
                "Checklist item \"{}\" {detail}.",
                item.title
            )));
        }
        (Some(t), None) => format!("Checklist item \"{}\" renamed to \"{t}\".", item.title),
        (None, Some(c)) => format!("Checklist item \"{}\" {}.", item.title, state(c)),
        (Some(t), Some(c)) => format!(
            "Checklist item \"{}\" renamed to \"{t}\" and {}.",
            item.title,
            state(c)
        ),
    };
    sqlx::query(
        "UPDATE checklist_items SET title = $1, is_checked = $2 WHERE id = $3 AND task_id = $4",
    )
    .bind(new_title.as_deref().unwrap_or(&item.title))
    // An integer column (0/1) in both dialects: the `Any` driver would send a bool as
    // PostgreSQL's BOOLEAN.
    .bind(i64::from(new_checked.unwrap_or(item.is_checked)))
    .bind(id)
    .bind(&task.id)
    .execute(conn)
    .await?;
    Ok(Change::Applied(message))
}

/// Whether `code` looks like an ISO 639 code with an optional subtag (`de`, `pt-BR`),
/// as the catalog's schema says: `^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$`.
fn is_language_code(code: &str) -> bool {
    let (primary, subtag) = match code.split_once('-') {
        Some((primary, subtag)) => (primary, Some(subtag)),
        None => (code, None),
    };
    (2..=3).contains(&primary.len())
        && primary.bytes().all(|b| b.is_ascii_lowercase())
        && subtag.is_none_or(|s| {
            (2..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

async fn set_language(
    conn: &mut Connection,
    task: &TaskSnapshot,
    args: &Value,
) -> Result<Change, Failure> {
    let code = str_arg(args, "languageCode")?.trim();
    if !is_language_code(code) {
        return Err(format!(
            "argument `languageCode` must be an ISO 639 code such as de or pt-BR (got {code:?})"
        )
        .into());
    }
    if task.language.as_deref() == Some(code) {
        return Ok(Change::Unchanged(format!("Language is already {code}.")));
    }
    set_column(
        conn,
        &task.id,
        "UPDATE tasks SET language = $1 WHERE id = $2",
        Some(code),
    )
    .await?;
    Ok(Change::Applied(format!("Language set to {code}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_codes() {
        for ok in ["de", "eng", "pt-BR", "zh-Hant", "en-001"] {
            assert!(is_language_code(ok), "{ok}");
        }
        for bad in [
            "",
            "d",
            "German",
            "DE",
            "de-",
            "de-x",
            "de-abcdefghi",
            "de-B R",
            "de_BR",
        ] {
            assert!(!is_language_code(bad), "{bad}");
        }
    }
}
