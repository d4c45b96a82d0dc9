//! How long the caller of a queued set still waits (migration 0025): the moment until
//! which a door that holds its caller's request (the MCP gateway's `--wait`) keeps it,
//! so a reviewer is told "the agent waits 42 s more". Data of this device only: it does
//! not travel with sync. A confirmation reads one fact of it (migration 0031): that the
//! caller withdraws its item when its wait ends, so nothing claims a confirmation given
//! later ([`withdrawn_after`]); it can only refuse a confirmation, never let one run.

use crate::{Connection, StoreError, timefmt};
use sqlx::Row;
use std::collections::HashMap;
use time::OffsetDateTime;
use uuid::Uuid;

const TABLE: &str = "change_set_waits";

/// Records that the caller of set `set_id` waits until `until` (a later wait on the
/// same set, a retry joining it, replaces the earlier one).
pub async fn record(
    conn: &mut Connection,
    set_id: Uuid,
    until: OffsetDateTime,
) -> Result<(), StoreError> {
    record_ending(conn, set_id, until, false).await
}

/// [`record`], saying whether the caller withdraws the set's item when its wait ends
/// (`withdrawn_at_end`: a coding agent's hook handing the call to the agent's own
/// prompt), so nothing claims a confirmation given after `until`.
pub async fn record_ending(
    conn: &mut Connection,
    set_id: Uuid,
    until: OffsetDateTime,
    withdrawn_at_end: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO change_set_waits (change_set_id, waits_until, withdrawn_at_end) VALUES ($1, $2, $3)
         ON CONFLICT (change_set_id) DO UPDATE SET waits_until = excluded.waits_until,
             withdrawn_at_end = excluded.withdrawn_at_end",
    )
    .bind(set_id.to_string())
    .bind(timefmt::format(until))
    .bind(i32::from(withdrawn_at_end))
    .execute(conn)
    .await?;
    Ok(())
}

/// When the caller of set `set_id` stops waiting and withdraws its item, when it said
/// it would ([`record_ending`]); `None` when it said no such thing (the item then stays
/// for whoever claims it later).
pub async fn withdrawn_after(
    conn: &mut Connection,
    set_id: Uuid,
) -> Result<Option<OffsetDateTime>, StoreError> {
    let row = sqlx::query(
        "SELECT waits_until FROM change_set_waits WHERE change_set_id = $1 AND withdrawn_at_end <> 0",
    )
    .bind(set_id.to_string())
    .fetch_optional(conn)
    .await?;
    row.map(|row| {
        let until: String = row.try_get("waits_until")?;
        timefmt::parse(TABLE, &until)
    })
    .transpose()
}

/// Until when the callers of `sets` wait, for the sets whose caller said so.
pub async fn of(
    conn: &mut Connection,
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
