//! What the coding agents' hooks recorded, read back per coding-agent session (`assent
//! sessions`, `assent session show`): the audit records of hook calls (run keys
//! `hook:SESSION:CALL`) and the change sets of the calls they asked about (threads
//! `hook-session:SESSION`). Reads only; the caller groups and words them.

use crate::StoreError;
use assent_domain::ChangeSet;
use assent_tools::AuditRecord;
use sqlx::AnyConnection;
use uuid::Uuid;

/// The newest audit records (at most `limit`) whose run key starts with `prefix`, of
/// agent `agent` when given, oldest first. `prefix` is matched exactly here (SQL's
/// `LIKE` only narrows the read: it ignores ASCII case in SQLite), and must be one of
/// the fixed run-key prefixes, never a person's or an agent's input.
pub async fn audit_with_run_key_prefix(
    conn: &mut AnyConnection,
    prefix: &'static str,
    agent: Option<&str>,
    limit: u32,
) -> Result<Vec<AuditRecord>, StoreError> {
    let pattern = format!("{prefix}%");
    let limit = i64::from(limit);
    let rows =
        match agent {
            Some(agent) => sqlx::query(
                "SELECT * FROM (SELECT * FROM audit_records WHERE run_key LIKE $1 AND agent_id = $2
                 ORDER BY id DESC LIMIT $3) AS recent ORDER BY id",
            )
            .bind(pattern)
            .bind(agent)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?,
            None => {
                sqlx::query(
                    "SELECT * FROM (SELECT * FROM audit_records WHERE run_key LIKE $1
                 ORDER BY id DESC LIMIT $2) AS recent ORDER BY id",
                )
                .bind(pattern)
                .bind(limit)
                .fetch_all(&mut *conn)
                .await?
            }
        };
    let records = rows
        .iter()
        .map(crate::audit::decode)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(records
        .into_iter()
        .filter(|record| record.run_key.starts_with(prefix))
        .collect())
}

/// The newest change sets (at most `limit`, deleted ones left out) whose thread starts
/// with `prefix`, of agent `agent` when given, oldest first, with their items. `prefix`
/// is matched exactly, as in [`audit_with_run_key_prefix`].
pub async fn sets_with_thread_prefix(
    conn: &mut AnyConnection,
    prefix: &'static str,
    agent: Option<&str>,
    limit: u32,
) -> Result<Vec<ChangeSet>, StoreError> {
    let pattern = format!("{prefix}%");
    let limit = i64::from(limit);
    let ids: Vec<String> = match agent {
        Some(agent) => {
            sqlx::query_scalar(
                "SELECT id FROM change_sets WHERE thread_id LIKE $1 AND agent_id = $2
                 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $3",
            )
            .bind(pattern)
            .bind(agent)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT id FROM change_sets WHERE thread_id LIKE $1
                 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $2",
            )
            .bind(pattern)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    let mut sets = Vec::with_capacity(ids.len());
    for id in ids.iter().rev() {
        let id =
            Uuid::parse_str(id).map_err(|e| StoreError::corrupt("change_sets", e.to_string()))?;
        if let Some(set) = crate::change_sets::load(conn, id).await?
            && set.thread_id.starts_with(prefix)
        {
            sets.push(set);
        }
    }
    Ok(sets)
}
