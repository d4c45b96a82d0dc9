//! The reads `assent why --audit ID` and `assent audit digest` make of the audit
//! trail (issue 57): the records of one operation, and the calls an `audit` rule let
//! run (their `allowedBy.audited`).

use crate::audit::{AuditRow, decode};
use crate::{Connection, StoreError, timefmt};
use assent_tools::AuditKind;
use serde_json::Value;
use sqlx::Row;
use std::collections::HashSet;
use time::OffsetDateTime;

/// The audit rows of operation `operation_id` (its intent, its result, a refusal),
/// oldest first; empty when there is none.
pub async fn records_of_operation(
    conn: &mut Connection,
    operation_id: &str,
) -> Result<Vec<AuditRow>, StoreError> {
    let rows = sqlx::query("SELECT * FROM audit_records WHERE operation_id = $1 ORDER BY id")
        .bind(operation_id)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(row_of).collect()
}

/// How many operation ids one read of [`operations_with_record`] asks about.
const OPERATIONS_PER_READ: usize = 200;

/// Which of `operation_ids` already have an audit record of `kind`: one statement (per
/// 200 ids) for all of them. A wake asks it of the calls it refuses, so a retried wake
/// does not put a refusal on the record twice (issue 55: once per wake, not per call).
pub async fn operations_with_record(
    conn: &mut Connection,
    operation_ids: &[&str],
    kind: AuditKind,
) -> Result<HashSet<String>, StoreError> {
    let mut found = HashSet::new();
    for chunk in operation_ids.chunks(OPERATIONS_PER_READ) {
        let ids: Vec<String> = (2..chunk.len() + 2).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT DISTINCT operation_id FROM audit_records WHERE kind = $1 AND operation_id IN ({})",
            ids.join(", ")
        );
        let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kind.as_str());
        for id in chunk {
            query = query.bind(*id);
        }
        let ids: Vec<String> = query.fetch_all(&mut *conn).await?;
        found.extend(ids);
    }
    Ok(found)
}

/// The audit rows written at `since` or later of calls an `audit` rule let run
/// unasked (`allowedBy.audited` is true), of agent `agent` when given, oldest first,
/// at most `limit` (the newest): the record written before each ran, one per call.
pub async fn audited_since(
    conn: &mut Connection,
    since: OffsetDateTime,
    agent: Option<&str>,
    limit: u32,
) -> Result<Vec<AuditRow>, StoreError> {
    // `LIKE` only narrows the read (the digest is an operator's occasional read, not a
    // hot path); the flag itself is checked on the decoded JSON below, so a pattern or
    // an argument that happens to hold the words never counts.
    let rows = sqlx::query(
        "SELECT * FROM (SELECT * FROM audit_records WHERE created_at >= $1 AND allowed_by LIKE '%\"audited\":true%'
         ORDER BY id DESC LIMIT $2) AS recent ORDER BY id",
    )
    .bind(timefmt::format(since))
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?;
    let rows: Vec<AuditRow> = rows.iter().map(row_of).collect::<Result<_, _>>()?;
    Ok(rows
        .into_iter()
        .filter(|row| {
            row.record
                .allowed_by
                .as_ref()
                .is_some_and(|by| by.get("audited") == Some(&Value::Bool(true)))
        })
        .filter(|row| agent.is_none_or(|agent| row.record.agent_id == agent))
        // One row per call: the one written before it ran (its result repeats it).
        .filter(|row| row.record.kind == AuditKind::Action)
        .collect())
}

fn row_of(row: &sqlx::any::AnyRow) -> Result<AuditRow, StoreError> {
    let host: Option<String> = row.try_get("origin_host")?;
    let origin_id: Option<i64> = row.try_get("origin_id")?;
    Ok(AuditRow {
        id: row.try_get("id")?,
        record: decode(row)?,
        origin: host.zip(origin_id),
    })
}
