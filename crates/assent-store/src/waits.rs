//! How long the caller of a queued set still waits (migration 0025): the moment until
//! which a door that holds its caller's request (the MCP gateway's `--wait`) keeps it,
//! so a reviewer is told "the agent waits 42 s more". Display data of this device
//! only: no decision reads it, and it does not travel with sync.

use crate::{AnyConnection, StoreError, timefmt};
use sqlx::Row;
use std::collections::HashMap;
use time::OffsetDateTime;
use uuid::Uuid;

const TABLE: &str = "change_set_waits";

/// Records that the caller of set `set_id` waits until `until` (a later wait on the
/// same set, a retry joining it, replaces the earlier one).
pub async fn record(
    conn: &mut AnyConnection,
    set_id: Uuid,
    until: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO change_set_waits (change_set_id, waits_until) VALUES ($1, $2)
         ON CONFLICT (change_set_id) DO UPDATE SET waits_until = excluded.waits_until",
    )
    .bind(set_id.to_string())
    .bind(timefmt::format(until))
    .execute(conn)
    .await?;
    Ok(())
}

/// Until when the callers of `sets` wait, for the sets whose caller said so.
pub async fn of(
    conn: &mut AnyConnection,
    sets: &[Uuid],
) -> Result<HashMap<Uuid, OffsetDateTime>, StoreError> {
    let mut waits = HashMap::with_capacity(sets.len());
    // One statement per chunk of sets (the `Any` driver binds no arrays; 500 stays
    // under every backend's limit of bound parameters).
    for chunk in sets.chunks(500) {
        let params: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT change_set_id, waits_until FROM change_set_waits WHERE change_set_id IN ({})",
            params.join(", ")
        );
        // Only placeholders are formatted in; every value is bound.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for set in chunk {
            query = query.bind(set.to_string());
        }
        for row in query.fetch_all(&mut *conn).await? {
            let set: String = row.try_get("change_set_id")?;
            let set = Uuid::parse_str(&set).map_err(|e| StoreError::corrupt(TABLE, e))?;
            let until: String = row.try_get("waits_until")?;
            waits.insert(set, timefmt::parse(TABLE, &until)?);
        }
    }
    Ok(waits)
}
