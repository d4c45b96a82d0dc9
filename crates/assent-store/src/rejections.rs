//! Remembered rejections (migration 0030): a call a person rejected is refused without
//! asking anyone when the agent makes exactly that call again within the agent's window
//! (`assent agent set A --remember-rejections 7d|0`), unless a person told Assent to
//! forget it (`assent rejections forget ID|--all`). What is remembered lives in the
//! agent's row (`rejection_memory`, [`RejectionMemory`]), so changing it is a change of
//! the agent's rules, entered on the consent chain with who made it.

use crate::Connection;
use crate::{StoreError, chain, decisions, timefmt};
use assent_domain::ChangeDecision;
use time::{Duration, OffsetDateTime};

pub use crate::rejection_memory::{DEFAULT_WINDOW, RejectionMemory};

/// How many of the newest rejections a listing or a wake reads at most.
pub const LOOKBACK: u32 = 200;

/// Agent `agent_id`'s rejection memory, or `None` for an unknown agent.
pub async fn memory(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Option<RejectionMemory>, StoreError> {
    let text: Option<String> =
        sqlx::query_scalar("SELECT rejection_memory FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(conn)
            .await?;
    text.as_deref().map(RejectionMemory::parse).transpose()
}

/// Writes agent `agent_id`'s rejection memory, entered on the consent chain as a change
/// of its rules, naming `by` when known. `None` for an unknown agent, else whether it
/// changed (writing the memory it has writes nothing).
pub async fn set_memory(
    conn: &mut Connection,
    agent_id: &str,
    memory: &RejectionMemory,
    by: Option<&str>,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    let Some(old) = self::memory(conn, agent_id).await? else {
        return Ok(None);
    };
    if old == *memory {
        return Ok(Some(false));
    }
    sqlx::query("UPDATE agents SET rejection_memory = $1, updated_at = $2 WHERE id = $3")
        .bind(memory.to_json().to_string())
        .bind(timefmt::format(now))
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
    chain::append_rules_by(conn, agent_id, by, now).await?;
    Ok(Some(true))
}

/// Every agent's rejection memory (agents whose memory is the default included), by
/// agent id.
pub async fn memories(conn: &mut Connection) -> Result<Vec<(String, RejectionMemory)>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT id, rejection_memory FROM agents ORDER BY id")
            .fetch_all(conn)
            .await?;
    rows.into_iter()
        .map(|(id, text)| Ok((id, RejectionMemory::parse(&text)?)))
        .collect()
}

/// The rejections remembered at `now` (agent `agent_id`'s, or every agent's), newest
/// first, at most [`LOOKBACK`] per agent, each with its agent's memory.
pub async fn remembered(
    conn: &mut Connection,
    agent_id: Option<&str>,
    now: OffsetDateTime,
) -> Result<Vec<ChangeDecision>, StoreError> {
    let mut found = Vec::new();
    for (agent, memory) in memories(conn).await? {
        if agent_id.is_some_and(|wanted| wanted != agent) {
            continue;
        }
        if memory.window() <= Duration::ZERO {
            continue;
        }
        let since = now - memory.window();
        let rejected = decisions::rejected_since(conn, &agent, since, LOOKBACK).await?;
        found.extend(rejected.into_iter().filter(|d| memory.remembers(d, now)));
    }
    found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    Ok(found)
}

/// The records of calls refused again since `since` (a remembered rejection refused
/// them; `refused_by` set), agent `agent_id`'s or every agent's, newest first, at most
/// `limit`.
pub async fn refusals(
    conn: &mut Connection,
    agent_id: Option<&str>,
    since: OffsetDateTime,
    limit: u32,
) -> Result<Vec<assent_tools::AuditRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM audit_records WHERE refused_by IS NOT NULL AND created_at >= $1
           AND ($2 IS NULL OR agent_id = $2)
         ORDER BY id DESC LIMIT $3",
    )
    .bind(timefmt::format(since))
    .bind(agent_id)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter().map(crate::audit::decode).collect()
}
