//! The MCP gateway's sessions and the calls each made (migration 0023), and the
//! operator's word that a tool's calls may run after their chat ended: what the
//! gateway needs to keep a call confirmed after its chat ended from running in
//! another session.

use crate::{Connection, StoreError, timefmt};
use sqlx::Row;
use std::collections::BTreeSet;
use time::OffsetDateTime;
use uuid::Uuid;

/// The session that made a call, as recorded, and when a person confirmed the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSession {
    /// The session's id.
    pub id: Uuid,
    /// When its gateway last said it runs.
    pub seen_at: OffsetDateTime,
    /// When its client left, if it did.
    pub ended_at: Option<OffsetDateTime>,
    /// When the call's execution job was created: its confirmation.
    pub confirmed_at: OffsetDateTime,
}

/// Records the start of session `id` of agent `agent_id`'s gateway of `server`.
pub async fn open(
    conn: &mut Connection,
    id: Uuid,
    agent_id: &str,
    server: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mcp_sessions (id, agent_id, server, started_at, seen_at) VALUES ($1, $2, $3, $4, $4)",
    )
    .bind(id.to_string())
    .bind(agent_id)
    .bind(server)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Session `id` still runs at `now`.
pub async fn seen(conn: &mut Connection, id: Uuid, now: OffsetDateTime) -> Result<(), StoreError> {
    sqlx::query("UPDATE mcp_sessions SET seen_at = $1 WHERE id = $2 AND ended_at IS NULL")
        .bind(timefmt::format(now))
        .bind(id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// Session `id`'s client left at `now`.
pub async fn end(conn: &mut Connection, id: Uuid, now: OffsetDateTime) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE mcp_sessions SET ended_at = $1, seen_at = $1 WHERE id = $2 AND ended_at IS NULL",
    )
    .bind(timefmt::format(now))
    .bind(id.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

/// Records that session `session_id` made the call of change set `change_set_id`.
pub async fn record_call(
    conn: &mut Connection,
    change_set_id: Uuid,
    session_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mcp_session_calls (change_set_id, session_id) VALUES ($1, $2)
         ON CONFLICT (change_set_id) DO NOTHING",
    )
    .bind(change_set_id.to_string())
    .bind(session_id.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

/// The session that made the call whose execution job runs under `operation_id`, if
/// one is recorded, with the job's creation (the confirmation).
pub async fn of_operation(
    conn: &mut Connection,
    operation_id: &str,
) -> Result<Option<CallSession>, StoreError> {
    let row = sqlx::query(
        "SELECT s.id, s.seen_at, s.ended_at, j.created_at FROM execution_jobs j
         JOIN mcp_session_calls c ON c.change_set_id = j.change_set_id
         JOIN mcp_sessions s ON s.id = c.session_id
         WHERE j.operation_id = $1",
    )
    .bind(operation_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let id: String = row.try_get("id")?;
    let seen_at: String = row.try_get("seen_at")?;
    let ended_at: Option<String> = row.try_get("ended_at")?;
    let confirmed_at: String = row.try_get("created_at")?;
    Ok(Some(CallSession {
        id: id
            .parse()
            .map_err(|e| StoreError::corrupt("mcp_sessions", e))?,
        seen_at: timefmt::parse("mcp_sessions", &seen_at)?,
        ended_at: ended_at
            .map(|at| timefmt::parse("mcp_sessions", &at))
            .transpose()?,
        confirmed_at: timefmt::parse("execution_jobs", &confirmed_at)?,
    }))
}

/// The session that made the call of change set `change_set_id`, if one is recorded:
/// its id, when its gateway last said it runs, and when its client left.
pub async fn of_change_set(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<Option<(Uuid, OffsetDateTime, Option<OffsetDateTime>)>, StoreError> {
    let row = sqlx::query(
        "SELECT s.id, s.seen_at, s.ended_at FROM mcp_session_calls c
         JOIN mcp_sessions s ON s.id = c.session_id
         WHERE c.change_set_id = $1",
    )
    .bind(change_set_id.to_string())
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let id: String = row.try_get("id")?;
    let seen_at: String = row.try_get("seen_at")?;
    let ended_at: Option<String> = row.try_get("ended_at")?;
    Ok(Some((
        id.parse()
            .map_err(|e| StoreError::corrupt("mcp_sessions", e))?,
        timefmt::parse("mcp_sessions", &seen_at)?,
        ended_at
            .map(|at| timefmt::parse("mcp_sessions", &at))
            .transpose()?,
    )))
}

/// Records (or, with `on` false, takes back) the operator's word that agent
/// `agent_id`'s calls of `tool_name` may run after their chat ended. Returns whether
/// anything changed.
pub async fn set_run_after_disconnect(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
    on: bool,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let changed = if on {
        sqlx::query(
            "INSERT INTO agent_run_after_disconnect_tools (agent_id, tool_name, created_at)
             VALUES ($1, $2, $3) ON CONFLICT (agent_id, tool_name) DO NOTHING",
        )
        .bind(agent_id)
        .bind(tool_name)
        .bind(timefmt::format(now))
        .execute(conn)
        .await?
    } else {
        sqlx::query(
            "DELETE FROM agent_run_after_disconnect_tools WHERE agent_id = $1 AND tool_name = $2",
        )
        .bind(agent_id)
        .bind(tool_name)
        .execute(conn)
        .await?
    };
    Ok(changed.rows_affected() > 0)
}

/// The tools whose calls may run after their chat ended, for agent `agent_id`.
pub async fn run_after_disconnect_tools(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<BTreeSet<String>, StoreError> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT tool_name FROM agent_run_after_disconnect_tools WHERE agent_id = $1 ORDER BY tool_name",
    )
    .bind(agent_id)
    .fetch_all(conn)
    .await?;
    Ok(names.into_iter().collect())
}
