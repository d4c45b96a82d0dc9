//! The change feed: which change sets were written, by any process, in order. Triggers
//! fill it (migration 0005; a job's status change in the execution ledger too, 0009),
//! so every write path, sync imports included, is seen; the
//! review server reads it to tell open pages about writes made by a CLI run or another
//! server.

use crate::Connection;
use crate::StoreError;
use sqlx::Row;
use uuid::Uuid;

/// How many entries the feed keeps behind its newest; older ones are pruned.
pub const KEPT_ENTRIES: i64 = 10_000;

/// The newest position in the feed (0 when empty): where a new reader starts.
pub async fn latest(conn: &mut Connection) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(seq), 0) FROM change_feed")
            .fetch_one(conn)
            .await?,
    )
}

/// The sets written after position `after` (each once, in the order of their first
/// write), at most `limit` feed entries, and the position to read on from.
pub async fn since(
    conn: &mut Connection,
    after: i64,
    limit: i64,
) -> Result<(Vec<Uuid>, i64), StoreError> {
    let rows = sqlx::query(
        "SELECT seq, change_set_id FROM change_feed WHERE seq > $1 ORDER BY seq LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    let mut position = after;
    let mut sets: Vec<Uuid> = Vec::new();
    for row in rows {
        position = row.try_get("seq")?;
        let id: String = row.try_get("change_set_id")?;
        let id = Uuid::parse_str(&id).map_err(|e| StoreError::corrupt("change_feed", e))?;
        if !sets.contains(&id) {
            sets.push(id);
        }
    }
    Ok((sets, position))
}

/// Drops all but the newest [`KEPT_ENTRIES`] entries.
pub async fn prune(conn: &mut Connection) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM change_feed WHERE seq <= (SELECT COALESCE(MAX(seq), 0) FROM change_feed) - $1",
    )
    .bind(KEPT_ENTRIES)
    .execute(conn)
    .await?
    .rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[tokio::test]
    async fn every_write_to_a_set_or_its_items_is_in_the_feed() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let start = latest(&mut conn).await.expect("latest");
        let id = Uuid::from_u128(7);
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "INSERT INTO change_sets (id, agent_id, target_id, thread_id, run_key, status, created_at)
             VALUES ('{id}', 'a', 't', 'th', 'r', 'pending', '2026-11-23T10:00:00.000000Z');
             INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status)
             VALUES ('{id}', 0, 'tool', '{{}}', 's', 'pending');
             UPDATE change_items SET status = 'confirmed' WHERE change_set_id = '{id}';
             UPDATE change_sets SET status = 'resolved' WHERE id = '{id}';"
        )))
        .execute(&mut *conn)
        .await
        .expect("writes");
        let (sets, position) = since(&mut conn, start, 100).await.expect("read");
        assert_eq!(sets, vec![id]);
        assert_eq!(position - start, 3, "insert, item update, set update");
        let (none, same) = since(&mut conn, position, 100).await.expect("read");
        assert!(none.is_empty());
        assert_eq!(same, position);
        assert_eq!(
            prune(&mut conn).await.expect("prune"),
            0,
            "few entries are kept"
        );
    }
}
