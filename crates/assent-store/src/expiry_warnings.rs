//! Warnings that an open change set is about to expire: each set is announced once, as
//! a `changeSet.expiring` webhook event, by the sender (assent-webhooks) polling
//! [`expiring_due`] and then [`warn_expiring`]. It reads whole sets (`change_sets`) and
//! writes events (`webhooks`); it lives apart from both because `change_sets` already
//! enqueues events through `webhooks`, and `webhooks` must not read sets back.

use crate::Connection;
use crate::webhooks::{NewEvent, change_set_data, enqueue_event, event};
use crate::{StoreError, change_sets, timefmt};
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// Open sets created before `$1` and not yet announced as expiring.
const UNWARNED: &str =
    "status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL AND created_at < $1
     AND id NOT IN (SELECT change_set_id FROM webhook_expiry_warnings)";

/// Whether [`warn_expiring`] has anything to do: a read, so that a sender polling every
/// second takes the writer lock only when there is something to write.
pub async fn expiring_due(
    conn: &mut Connection,
    ttl: Duration,
    warn_before: Duration,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let found: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM change_sets WHERE {UNWARNED} LIMIT 1"
    )))
    .bind(timefmt::format(now - ttl + warn_before))
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// Open sets within `warn_before` of their TTL (`created_at + ttl`) that were not yet
/// warned about: each is marked warned and gets a `changeSet.expiring` event (for the
/// subscriptions that want one), so a set is warned about once. Run it in a write
/// transaction. Returns the sets warned about.
pub async fn warn_expiring(
    conn: &mut Connection,
    ttl: Duration,
    warn_before: Duration,
    now: OffsetDateTime,
) -> Result<Vec<Uuid>, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM change_sets WHERE {UNWARNED} ORDER BY created_at"
    )))
    .bind(timefmt::format(now - ttl + warn_before))
    .fetch_all(&mut *conn)
    .await?;
    let mut warned = Vec::with_capacity(ids.len());
    for id in ids {
        let id = Uuid::parse_str(&id).map_err(|e| StoreError::corrupt("change_sets", e))?;
        let set = change_sets::require(conn, id).await?;
        sqlx::query(
            "INSERT INTO webhook_expiry_warnings (change_set_id, warned_at) VALUES ($1, $2)",
        )
        .bind(id.to_string())
        .bind(timefmt::format(now))
        .execute(&mut *conn)
        .await?;
        let mut data = change_set_data(&set);
        data["expiresAt"] = json!(timefmt::format(set.created_at + ttl));
        let new = NewEvent {
            event_type: event::CHANGE_SET_EXPIRING,
            agent_id: Some(&set.agent_id),
            change_set_id: Some(set.id),
            data,
        };
        enqueue_event(conn, new, now).await?;
        warned.push(id);
    }
    Ok(warned)
}
