//! Tasks in their own tables: creating and loading them, the field rules every writer
//! shares, and the one "touch" step (tick the clock, bump `updated_at`, enqueue the
//! outbox message) that follows every write.

use crate::JournalError;
use assent_domain::VectorClock;
use assent_journal::{
    ChecklistItem, TASK_PRIORITIES, TASK_STATUSES, TaskSnapshot, format_due_date,
    normalize_priority, normalize_status,
};
use assent_store::Connection;
use assent_store::{Backend, outbox, timefmt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::Row;
use time::{Date, OffsetDateTime};

/// Longest task or checklist item title, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 500;
/// Longest label, in characters.
pub(crate) const MAX_LABEL_CHARS: usize = 100;
/// Longest status reason, in characters.
pub(crate) const MAX_REASON_CHARS: usize = 2000;
/// The status of a task created without one.
const DEFAULT_STATUS: &str = "OPEN";

/// What a new task is made of; [`create_task`] validates it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NewTask {
    /// Title: not blank, at most 500 characters (trimmed).
    pub title: String,
    /// The category the policy allowlist is checked against (blank means none).
    pub category: Option<String>,
    /// One of [`assent_journal::TASK_STATUSES`] in any case; `OPEN` when absent.
    pub status: Option<String>,
    /// `P0`..`P3` in any case.
    pub priority: Option<String>,
    /// 1 to 1440.
    pub estimate_minutes: Option<u32>,
    /// Due date.
    pub due_date: Option<Date>,
    /// Labels; duplicates (ignoring case) are assigned once.
    pub labels: Vec<String>,
    /// Checklist item titles, in order, all unchecked.
    pub checklist: Vec<String>,
}

/// `text` trimmed, if it is not blank and at most `max` characters long.
pub(crate) fn clean_text(text: &str, max: usize) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("must not be blank".to_owned());
    }
    let chars = trimmed.chars().count();
    if chars > max {
        return Err(format!("must be at most {max} characters (got {chars})"));
    }
    Ok(trimmed.to_owned())
}

/// The normalized status, if it is one of [`TASK_STATUSES`].
pub(crate) fn valid_status(value: &str) -> Result<String, String> {
    let status = normalize_status(value);
    if TASK_STATUSES.contains(&status.as_str()) {
        Ok(status)
    } else {
        Err(format!(
            "must be one of {} (got {value:?})",
            TASK_STATUSES.join(", ")
        ))
    }
}

/// The normalized priority, if it is one of `P0`..`P3`.
pub(crate) fn valid_priority(value: &str) -> Result<String, String> {
    let priority = normalize_priority(value);
    if TASK_PRIORITIES.contains(&priority.as_str()) {
        Ok(priority)
    } else {
        Err(format!(
            "must be one of {} (got {value:?})",
            TASK_PRIORITIES.join(", ")
        ))
    }
}

/// `minutes`, if it is between 1 and 1440.
pub(crate) fn valid_estimate(minutes: u32) -> Result<u32, String> {
    if (1..=1440).contains(&minutes) {
        Ok(minutes)
    } else {
        Err(format!(
            "must be between 1 and 1440 minutes (got {minutes})"
        ))
    }
}

/// `YYYY-MM-DD` (surrounding blanks ignored) as a calendar date.
pub(crate) fn parse_due_date(text: &str) -> Result<Date, String> {
    assent_journal::parse_due_date(text)
        .map_err(|e| format!("must be a date as YYYY-MM-DD (got {text:?}: {e})"))
}

/// Creates task `id` from `new` in `conn`'s transaction: the task, its labels and
/// checklist items (fresh uuid v4 ids), its vector clock ticked once for `host_id`, and
/// the outbox `task` message. Returns the task as stored.
#[tracing::instrument(skip(conn, new), fields(title = %new.title))]
pub async fn create_task(
    conn: &mut Connection,
    id: &str,
    new: &NewTask,
    host_id: &str,
    now: OffsetDateTime,
) -> Result<TaskSnapshot, JournalError> {
    let invalid = |field: &'static str, reason: String| JournalError::invalid(field, reason);
    if id.trim().is_empty() {
        return Err(invalid("id", "must not be blank".to_owned()));
    }
    let title = clean_text(&new.title, MAX_TITLE_CHARS).map_err(|r| invalid("title", r))?;
    let status = match &new.status {
        Some(status) => valid_status(status).map_err(|r| invalid("status", r))?,
        None => DEFAULT_STATUS.to_owned(),
    };
    let priority = new
        .priority
        .as_deref()
        .map(valid_priority)
        .transpose()
        .map_err(|r| invalid("priority", r))?;
    let estimate = new
        .estimate_minutes
        .map(valid_estimate)
        .transpose()
        .map_err(|r| invalid("estimateMinutes", r))?;
    let category = new
        .category
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    let mut labels: Vec<String> = Vec::with_capacity(new.labels.len());
    for label in &new.labels {
        let label = clean_text(label, MAX_LABEL_CHARS).map_err(|r| invalid("labels", r))?;
        if !labels.iter().any(|l| same_label(l, &label)) {
            labels.push(label);
        }
    }
    let checklist = new
        .checklist
        .iter()
        .map(|t| clean_text(t, MAX_TITLE_CHARS))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|r| invalid("checklist", r))?;

    let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tasks WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    if exists.is_some() {
        return Err(JournalError::TaskExists(id.to_owned()));
    }
    let now_text = timefmt::format(now);
    sqlx::query(
        "INSERT INTO tasks (id, title, status, priority, estimate_minutes, due_date, category,
                            vector_clock, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, '{}', $8, $8)",
    )
    .bind(id)
    .bind(&title)
    .bind(&status)
    .bind(&priority)
    .bind(estimate.map(i64::from))
    .bind(new.due_date.map(format_due_date))
    .bind(&category)
    .bind(&now_text)
    .execute(&mut *conn)
    .await?;
    for label in &labels {
        sqlx::query("INSERT INTO task_labels (task_id, label) VALUES ($1, $2)")
            .bind(id)
            .bind(label)
            .execute(&mut *conn)
            .await?;
    }
    for (position, title) in checklist.iter().enumerate() {
        sqlx::query(
            "INSERT INTO checklist_items (id, task_id, position, title, is_checked)
             VALUES ($1, $2, $3, $4, 0)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(id)
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .bind(title)
        .execute(&mut *conn)
        .await?;
    }
    // The clock the row was inserted with, above.
    let (snapshot, _) = touch(conn, id, "{}", host_id, now).await?;
    tracing::debug!("task created");
    Ok(snapshot)
}

/// Whether two labels are the same label (labels ignore case).
pub(crate) fn same_label(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

/// Task `id` as it is now (labels sorted ignoring case, checklist in order);
/// `Ok(None)` when it does not exist.
pub async fn load_task(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<TaskSnapshot>, JournalError> {
    Ok(load_task_row(conn, id).await?.map(|row| row.snapshot))
}

/// A task's row as [`touch`] needs it: the snapshot, and its vector clock and status
/// reason read in the same statement.
pub(crate) struct TaskRow {
    pub(crate) snapshot: TaskSnapshot,
    pub(crate) vector_clock: String,
    status_reason: Option<String>,
}

/// A task's columns as [`TaskRow`] decodes them: its row, its labels and its checklist
/// in one statement (a `SELECT`'s or an `UPDATE`'s `RETURNING` list). On SQLite.
macro_rules! sqlite_task_columns {
    () => {
        "title, status, priority, estimate_minutes, due_date, language, category,
                vector_clock, status_reason,
                (SELECT json_group_array(label ORDER BY label)
                   FROM task_labels WHERE task_id = tasks.id) AS labels,
                (SELECT json_group_array(json_object('id', id, 'title', title,
                                                     'isChecked', json(iif(is_checked, 'true', 'false')))
                                         ORDER BY position, id)
                   FROM checklist_items WHERE task_id = tasks.id) AS checklist"
    };
}

/// [`sqlite_task_columns`] on PostgreSQL: the same JSON text (labels ordered ignoring
/// case as SQLite's NOCASE column does, `json_agg` of no rows is NULL, and the `Any`
/// driver reads JSON as text).
macro_rules! postgres_task_columns {
    () => {
        "title, status, priority, estimate_minutes, due_date, language, category,
                vector_clock, status_reason,
                (SELECT COALESCE(json_agg(label ORDER BY lower(label), label), '[]'::json)::text
                   FROM task_labels WHERE task_id = tasks.id) AS labels,
                (SELECT COALESCE(json_agg(json_build_object('id', id, 'title', title,
                                                            'isChecked', is_checked = 1)
                                          ORDER BY position, id), '[]'::json)::text
                   FROM checklist_items WHERE task_id = tasks.id) AS checklist"
    };
}

pub(crate) async fn load_task_row(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<TaskRow>, JournalError> {
    // One statement for the row, its labels and its checklist: every statement is a
    // round trip to the connection's worker thread (the benchmark's profile, `cargo
    // xtask bench`).
    let sql = match Backend::of(conn) {
        Backend::Sqlite => concat!(
            "SELECT ",
            sqlite_task_columns!(),
            " FROM tasks WHERE id = $1"
        ),
        Backend::Postgres => concat!(
            "SELECT ",
            postgres_task_columns!(),
            " FROM tasks WHERE id = $1"
        ),
    };
    let row = sqlx::query(sql).bind(id).fetch_optional(&mut *conn).await?;
    row.map(|row| decode_task_row(id, &row)).transpose()
}

/// A task's row as [`sqlite_task_columns`] or [`postgres_task_columns`] return it.
fn decode_task_row(id: &str, row: &sqlx::any::AnyRow) -> Result<TaskRow, JournalError> {
    let estimate: Option<i64> = row.try_get("estimate_minutes")?;
    let estimate_minutes = estimate
        .map(u32::try_from)
        .transpose()
        .map_err(|e| JournalError::corrupt("tasks", format!("task {id}: bad estimate: {e}")))?;
    let due: Option<String> = row.try_get("due_date")?;
    let due_date = due
        .as_deref()
        .map(parse_due_date)
        .transpose()
        .map_err(|e| JournalError::corrupt("tasks", format!("task {id}: due date {e}")))?;
    let labels: String = row.try_get("labels")?;
    let labels: Vec<String> = serde_json::from_str(&labels)
        .map_err(|e| JournalError::corrupt("task_labels", format!("task {id}: {e}")))?;
    let checklist: String = row.try_get("checklist")?;
    let checklist: Vec<ChecklistItem> = serde_json::from_str(&checklist)
        .map_err(|e| JournalError::corrupt("checklist_items", format!("task {id}: {e}")))?;
    let snapshot = TaskSnapshot {
        id: id.to_owned(),
        title: row.try_get("title")?,
        status: row.try_get("status")?,
        priority: row.try_get("priority")?,
        estimate_minutes,
        due_date,
        language: row.try_get("language")?,
        category: row.try_get("category")?,
        labels,
        checklist,
    };
    Ok(TaskRow {
        snapshot,
        vector_clock: row.try_get("vector_clock")?,
        status_reason: row.try_get("status_reason")?,
    })
}

/// Task `id`'s vector clock; `Ok(None)` when the task does not exist.
pub async fn task_vector_clock(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<VectorClock>, JournalError> {
    let text: Option<String> = sqlx::query_scalar("SELECT vector_clock FROM tasks WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    text.map(|text| parse_vector_clock(id, &text)).transpose()
}

fn parse_vector_clock(id: &str, text: &str) -> Result<VectorClock, JournalError> {
    serde_json::from_str::<VectorClock>(text).map_err(|e| {
        JournalError::corrupt(
            "tasks",
            format!("task {id}: bad vector clock {text:?}: {e}"),
        )
    })
}

/// Task `id`'s status reason (`None` also when the task does not exist).
pub(crate) async fn status_reason(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<String>, JournalError> {
    let reason: Option<Option<String>> =
        sqlx::query_scalar("SELECT status_reason FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(reason.flatten())
}

/// Follows every write to task `id`: ticks its vector clock for `host_id`, sets
/// `updated_at` to `now` and enqueues its new state for sync (replacing an unsent
/// message for the task). Returns the task as it is now.
///
/// `clock_before` is the task's vector clock as read before the write (its text in
/// the `tasks` row): no writer but this one changes it, so the clock's update returns
/// the task's new state itself (`RETURNING`), with no read of the task after the write.
pub(crate) async fn touch(
    conn: &mut Connection,
    id: &str,
    clock_before: &str,
    host_id: &str,
    now: OffsetDateTime,
) -> Result<(TaskSnapshot, VectorClock), JournalError> {
    let mut clock = parse_vector_clock(id, clock_before)?;
    clock.tick(host_id);
    let sql = match Backend::of(conn) {
        Backend::Sqlite => concat!(
            "UPDATE tasks SET vector_clock = $1, updated_at = $2 WHERE id = $3 RETURNING ",
            sqlite_task_columns!()
        ),
        Backend::Postgres => concat!(
            "UPDATE tasks SET vector_clock = $1, updated_at = $2 WHERE id = $3 RETURNING ",
            postgres_task_columns!()
        ),
    };
    let row = sqlx::query(sql)
        .bind(json!(clock).to_string())
        .bind(timefmt::format(now))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| JournalError::TaskNotFound(id.to_owned()))?;
    let TaskRow {
        snapshot,
        status_reason: reason,
        ..
    } = decode_task_row(id, &row)?;
    let payload = TaskPayload {
        snapshot: &snapshot,
        vector_clock: &clock,
        status_reason: reason.as_deref(),
    };
    outbox::enqueue(conn, crate::TASK_ENTITY, id, &payload, now).await?;
    Ok((snapshot, clock))
}

/// The outbox payload of a task: its snapshot, plus `vectorClock` and `statusReason`.
/// Serialized straight into the outbox row, like the decisions' and audit records'
/// payloads: no intermediate `Value` tree on every confirmed change.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskPayload<'a> {
    #[serde(flatten)]
    snapshot: &'a TaskSnapshot,
    vector_clock: &'a VectorClock,
    status_reason: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{NOW, TestDb};
    use time::macros::date;

    fn new_task(title: &str) -> NewTask {
        NewTask {
            title: title.to_owned(),
            ..NewTask::default()
        }
    }

    #[tokio::test]
    async fn create_and_load_round_trip() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let new = NewTask {
            title: "  Fix login bug ".to_owned(),
            category: Some("work".to_owned()),
            status: Some(" in progress".to_owned()),
            priority: Some("p1".to_owned()),
            estimate_minutes: Some(90),
            due_date: Some(date!(2026 - 03 - 15)),
            labels: vec!["frontend".into(), "Bug".into(), "bug".into()],
            checklist: vec!["Reproduce".into(), "Write test".into()],
        };
        let created = create_task(tx.connection(), "t1", &new, "h1", NOW)
            .await
            .expect("created");
        assert_eq!(created.title, "Fix login bug");
        assert_eq!(created.status, "IN PROGRESS");
        assert_eq!(created.priority.as_deref(), Some("P1"));
        assert_eq!(created.estimate_minutes, Some(90));
        assert_eq!(created.due_date, Some(date!(2026 - 03 - 15)));
        assert_eq!(created.category.as_deref(), Some("work"));
        assert_eq!(created.labels, ["Bug", "frontend"]);
        let titles: Vec<&str> = created.checklist.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, ["Reproduce", "Write test"]);
        assert!(created.checklist.iter().all(|i| !i.is_checked));
        assert!(uuid::Uuid::parse_str(&created.checklist[0].id).is_ok());

        let loaded = load_task(tx.connection(), "t1").await.expect("loads");
        assert_eq!(loaded.as_ref(), Some(&created));
        let due: String = sqlx::query_scalar("SELECT due_date FROM tasks WHERE id = 't1'")
            .fetch_one(tx.connection())
            .await
            .expect("due date");
        assert_eq!(due, "2026-03-15");
        let clock = task_vector_clock(tx.connection(), "t1")
            .await
            .expect("clock")
            .expect("exists");
        assert_eq!(clock.get("h1"), 1);

        let pending = outbox::undelivered(tx.connection(), 10)
            .await
            .expect("outbox");
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].entity_type, crate::TASK_ENTITY);
        assert_eq!(pending[0].entity_id, "t1");
        assert_eq!(pending[0].payload["title"], "Fix login bug");
        assert_eq!(pending[0].payload["vectorClock"], json!({"h1": 1}));
        assert_eq!(pending[0].payload["dueDate"], json!("2026-03-15"));
        let back: TaskSnapshot =
            serde_json::from_value(pending[0].payload.clone()).expect("snapshot");
        assert_eq!(back, created);

        assert_eq!(
            load_task(tx.connection(), "nope").await.expect("loads"),
            None
        );
        assert_eq!(
            task_vector_clock(tx.connection(), "nope")
                .await
                .expect("reads"),
            None
        );
    }

    #[tokio::test]
    async fn defaults() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let created = create_task(tx.connection(), "t1", &new_task("Plain"), "h1", NOW)
            .await
            .expect("created");
        assert_eq!(
            created,
            TaskSnapshot {
                id: "t1".into(),
                title: "Plain".into(),
                status: "OPEN".into(),
                ..TaskSnapshot::default()
            }
        );
    }

    #[tokio::test]
    async fn validation_errors_name_the_field() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let cases: Vec<(&str, NewTask)> = vec![
            ("title", new_task("   ")),
            ("title", new_task(&"x".repeat(501))),
            (
                "status",
                NewTask {
                    status: Some("DONE".into()),
                    ..new_task("t")
                },
            ),
            (
                "priority",
                NewTask {
                    priority: Some("P4".into()),
                    ..new_task("t")
                },
            ),
            (
                "estimateMinutes",
                NewTask {
                    estimate_minutes: Some(0),
                    ..new_task("t")
                },
            ),
            (
                "estimateMinutes",
                NewTask {
                    estimate_minutes: Some(1441),
                    ..new_task("t")
                },
            ),
            (
                "labels",
                NewTask {
                    labels: vec![" ".into()],
                    ..new_task("t")
                },
            ),
            (
                "checklist",
                NewTask {
                    checklist: vec![String::new()],
                    ..new_task("t")
                },
            ),
        ];
        for (field, new) in cases {
            match create_task(tx.connection(), "t1", &new, "h1", NOW).await {
                Err(JournalError::InvalidTask { field: f, .. }) => assert_eq!(f, field, "{new:?}"),
                other => panic!("{field}: expected InvalidTask, got {other:?}"),
            }
        }
        assert!(matches!(
            create_task(tx.connection(), " ", &new_task("t"), "h1", NOW).await,
            Err(JournalError::InvalidTask { field: "id", .. })
        ));
        // 500 characters is the limit, not beyond it.
        create_task(
            tx.connection(),
            "t1",
            &new_task(&"é".repeat(500)),
            "h1",
            NOW,
        )
        .await
        .expect("500 characters are fine");
        assert!(matches!(
            create_task(tx.connection(), "t1", &new_task("again"), "h1", NOW).await,
            Err(JournalError::TaskExists(id)) if id == "t1"
        ));
        let err = create_task(tx.connection(), "t2", &new_task(""), "h1", NOW)
            .await
            .expect_err("blank");
        assert_eq!(err.to_string(), "invalid new task: title must not be blank");
    }

    #[tokio::test]
    async fn rollback_leaves_no_task_and_no_outbox_row() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        create_task(tx.connection(), "t1", &new_task("Gone"), "h1", NOW)
            .await
            .expect("created");
        tx.rollback().await.expect("rolled back");

        let mut tx = db.store.begin_write().await.expect("tx");
        assert_eq!(load_task(tx.connection(), "t1").await.expect("loads"), None);
        assert_eq!(outbox::count(tx.connection()).await.expect("counts"), 0);
        let labels: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM checklist_items")
            .fetch_one(tx.connection())
            .await
            .expect("counts");
        assert_eq!(labels, 0);
    }
}
