//! The sync queue: every replicated write leaves a message here, in its transaction.
//!
//! At most one unsent message exists per entity; a newer write replaces its payload.
//! A sender claims a batch (a lease, so a crashed sender's claim runs out), then marks
//! each message sent or failed; failures are retried until `max_attempts`, then kept
//! as `dead` for a person to look at.

use crate::Connection;
use crate::row::Statement;
use crate::{Backend, StoreError, timefmt};
use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use time::{Duration, OffsetDateTime};

/// The kinds of entity the outbox carries.
pub mod entity {
    /// A whole change set with its items.
    pub const CHANGE_SET: &str = "changeSet";
    /// One item's status (`<set id>:<index>`).
    pub const CHANGE_ITEM: &str = "changeItem";
    /// A decision.
    pub const DECISION: &str = "changeDecision";
    /// An audit record.
    pub const AUDIT_RECORD: &str = "auditRecord";
}

/// One message of the queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxMessage {
    /// Queue position.
    pub id: i64,
    /// What kind of entity.
    pub entity_type: String,
    /// Which one.
    pub entity_id: String,
    /// Its state to replicate.
    pub payload: Value,
    /// `pending`, `inFlight`, `sent` or `dead`.
    pub status: String,
    /// Failed deliveries so far.
    pub attempts: i64,
    /// The last delivery error.
    pub last_error: Option<String>,
    /// When it was first enqueued.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When its payload or status last changed (a newer write replaces an unsent
    /// payload, so this is the age of what will be sent).
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// What became of a failed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureDisposition {
    /// Back in the queue for another attempt.
    WillRetry,
    /// A newer message for the same entity is already queued; this one is dropped.
    Superseded,
    /// Out of attempts: kept as `dead`.
    Dead,
}

/// Enqueues `payload` (any serializable value, e.g. a `serde_json::Value` or a domain
/// value) for `entity_type`/`entity_id`, replacing the payload of an unsent message for
/// the same entity.
pub async fn enqueue(
    conn: &mut Connection,
    entity_type: &str,
    entity_id: &str,
    payload: &(impl Serialize + ?Sized),
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let payload = payload_text(payload)?;
    let now = timefmt::format(now);
    sqlx::query(
        "INSERT INTO outbox (entity_type, entity_id, payload, status, attempts, created_at, updated_at)
         VALUES ($1, $2, $3, 'pending', 0, $4, $4)
         ON CONFLICT (entity_type, entity_id) WHERE status = 'pending'
         DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at",
    )
    .bind(entity_type)
    .bind(entity_id)
    .bind(payload)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// A message's payload as stored. Straight to text: building a `Value` tree first cost
/// a confirmation more than serializing its whole change set (callgrind, `cargo xtask
/// bench`).
pub(crate) fn payload_text(payload: &(impl Serialize + ?Sized)) -> Result<String, StoreError> {
    serde_json::to_string(payload).map_err(|e| StoreError::corrupt("outbox", e))
}

/// One message of [`enqueue_many`]: entity type, entity id, payload.
pub type Message<'a> = (&'a str, String, String);

/// [`enqueue`] of several messages of distinct entities in one statement (per 100):
/// a decision's item and set messages are one round trip, not one each.
pub async fn enqueue_many(
    conn: &mut Connection,
    messages: &[Message<'_>],
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        use crate::row::{ArrayType, Unnest, Value};
        let scalars = vec![Value::from(timefmt::format(now))];
        let mut upsert = Unnest::new(UPSERT_UNNEST, "outbox", scalars, &[ArrayType::Text; 3]);
        for (entity_type, entity_id, payload) in messages {
            upsert.row(vec![
                Value::from(*entity_type),
                Value::from(entity_id),
                Value::from(payload),
            ])?;
        }
        if !upsert.is_empty() {
            upsert.query().execute(pg).await?;
        }
        return Ok(());
    }
    for statement in upsert_statements(messages, now) {
        statement.query().execute(&mut *conn).await?;
    }
    Ok(())
}

/// [`enqueue_many`] on PostgreSQL: `$1` the time, then the messages' types, ids and
/// payloads as arrays, one statement text whatever the count (`crate::row::Unnest`),
/// queued in their order (the queue's ids are its order).
#[cfg(feature = "postgres")]
const UPSERT_UNNEST: &str = "INSERT INTO outbox (entity_type, entity_id, payload, status, attempts, created_at, updated_at)
 SELECT entity_type, entity_id, payload, 'pending', 0, $1::text, $1::text
 FROM UNNEST($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(entity_type, entity_id, payload, n)
 ORDER BY n
 ON CONFLICT (entity_type, entity_id) WHERE status = 'pending'
 DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at";

/// The upserts of `messages`, up to 100 in one statement.
pub(crate) fn upsert_statements(messages: &[Message<'_>], now: OffsetDateTime) -> Vec<Statement> {
    const PER_STATEMENT: usize = 100;
    let now = timefmt::format(now);
    messages
        .chunks(PER_STATEMENT)
        .map(|chunk| {
            // `$1` is the time of every row; each row has three parameters of its own.
            let rows: Vec<String> = (0..chunk.len())
                .map(|row| {
                    let first = 2 + row * 3;
                    format!(
                        "(${first}, ${}, ${}, 'pending', 0, $1, $1)",
                        first + 1,
                        first + 2
                    )
                })
                .collect();
            let sql = format!(
                "INSERT INTO outbox (entity_type, entity_id, payload, status, attempts, created_at, updated_at)
                 VALUES {}
                 ON CONFLICT (entity_type, entity_id) WHERE status = 'pending'
                 DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at",
                rows.join(", ")
            );
            chunk.iter().fold(
                Statement::new(sql).bind(now.as_str()),
                |statement, (entity_type, entity_id, payload)| {
                    statement
                        .bind(*entity_type)
                        .bind(entity_id.as_str())
                        .bind(payload.as_str())
                },
            )
        })
        .collect()
}

fn decode(row: &sqlx::any::AnyRow) -> Result<OutboxMessage, StoreError> {
    let payload: String = row.try_get("payload")?;
    let created_at: String = row.try_get("created_at")?;
    let updated_at: String = row.try_get("updated_at")?;
    Ok(OutboxMessage {
        id: row.try_get("id")?,
        entity_type: row.try_get("entity_type")?,
        entity_id: row.try_get("entity_id")?,
        payload: serde_json::from_str(&payload).map_err(|e| StoreError::corrupt("outbox", e))?,
        status: row.try_get("status")?,
        attempts: row.try_get("attempts")?,
        last_error: row.try_get("last_error")?,
        created_at: timefmt::parse("outbox", &created_at)?,
        updated_at: timefmt::parse("outbox", &updated_at)?,
    })
}

/// Deliverable messages, oldest first; SQLite's single writer lock keeps two
/// claimers apart.
const CLAIMABLE: &str = "SELECT * FROM outbox
     WHERE status = 'pending' OR (status = 'inFlight' AND claimed_until < $1)
     ORDER BY id LIMIT $2";

/// [`CLAIMABLE`] on a shared PostgreSQL: the rows stay locked until the claim commits,
/// and a concurrent claimer skips them instead of waiting and claiming them again.
const CLAIMABLE_SKIP_LOCKED: &str = "SELECT * FROM outbox
     WHERE status = 'pending' OR (status = 'inFlight' AND claimed_until < $1)
     ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED";

/// Claims up to `limit` deliverable messages (pending, or in flight with an expired
/// lease), oldest first, leasing them until `now + lease`. Run it in
/// [`crate::Store::begin_claim`]'s transaction (or a write transaction) so two senders
/// never claim the same message, from one process or several.
#[tracing::instrument(skip(conn))]
pub async fn claim_batch(
    conn: &mut Connection,
    limit: u32,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<Vec<OutboxMessage>, StoreError> {
    let now_text = timefmt::format(now);
    let rows = sqlx::query(match Backend::of(conn) {
        Backend::Sqlite => CLAIMABLE,
        Backend::Postgres => CLAIMABLE_SKIP_LOCKED,
    })
    .bind(&now_text)
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?;
    let until = timefmt::format(now + lease);
    let mut claimed = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut message = decode(row)?;
        sqlx::query("UPDATE outbox SET status = 'inFlight', claimed_until = $1, updated_at = $2 WHERE id = $3")
            .bind(&until)
            .bind(&now_text)
            .bind(message.id)
            .execute(&mut *conn)
            .await?;
        message.status = "inFlight".to_owned();
        claimed.push(message);
    }
    tracing::debug!(claimed = claimed.len(), "outbox batch claimed");
    Ok(claimed)
}

/// Marks delivered messages sent.
#[tracing::instrument(skip(conn))]
pub async fn mark_sent(
    conn: &mut Connection,
    ids: &[i64],
    now: OffsetDateTime,
) -> Result<u64, StoreError> {
    let now = timefmt::format(now);
    let mut marked = 0;
    for id in ids {
        marked += sqlx::query(
            "UPDATE outbox SET status = 'sent', claimed_until = NULL, updated_at = $1 WHERE id = $2 AND status = 'inFlight'",
        )
        .bind(&now)
        .bind(id)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(marked)
}

/// Records a failed delivery of message `id`: it is retried until it has failed
/// `max_attempts` times, unless a newer message for the same entity supersedes it.
#[tracing::instrument(skip(conn))]
pub async fn mark_failed(
    conn: &mut Connection,
    id: i64,
    error: &str,
    max_attempts: i64,
    now: OffsetDateTime,
) -> Result<FailureDisposition, StoreError> {
    let now = timefmt::format(now);
    let row = sqlx::query("SELECT entity_type, entity_id, attempts FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Err(StoreError::corrupt("outbox", format!("no message {id}")));
    };
    let (entity_type, entity_id, attempts): (String, String, i64) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    let attempts = attempts + 1;
    let newer: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM outbox WHERE entity_type = $1 AND entity_id = $2 AND status = 'pending' AND id <> $3",
    )
    .bind(&entity_type)
    .bind(&entity_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let (status, disposition) = if newer.is_some() {
        ("sent", FailureDisposition::Superseded)
    } else if attempts >= max_attempts {
        ("dead", FailureDisposition::Dead)
    } else {
        ("pending", FailureDisposition::WillRetry)
    };
    sqlx::query(
        "UPDATE outbox SET status = $1, attempts = $2, last_error = $3, claimed_until = NULL, updated_at = $4 WHERE id = $5",
    )
    .bind(status)
    .bind(attempts)
    .bind(error)
    .bind(&now)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    tracing::debug!(?disposition, attempts, "outbox delivery failed");
    Ok(disposition)
}

/// The messages not yet delivered (pending, in flight, dead), oldest first.
pub async fn undelivered(
    conn: &mut Connection,
    limit: u32,
) -> Result<Vec<OutboxMessage>, StoreError> {
    let rows = sqlx::query("SELECT * FROM outbox WHERE status <> 'sent' ORDER BY id LIMIT $1")
        .bind(i64::from(limit))
        .fetch_all(conn)
        .await?;
    rows.iter().map(decode).collect()
}

/// How many rows the outbox holds, whatever their status.
pub async fn count(conn: &mut Connection) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM outbox")
        .fetch_one(conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[cfg(feature = "postgres")]
    #[test]
    fn the_array_upsert_casts_each_column_to_text() {
        let columns = [crate::row::ArrayType::Text; 3];
        crate::row::assert_unnest_casts(UPSERT_UNNEST, 1, &columns);
    }

    #[tokio::test]
    async fn many_messages_in_one_statement_replace_a_pending_one_like_enqueue() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("connection");
        let now = OffsetDateTime::UNIX_EPOCH;
        enqueue(
            &mut conn,
            "changeSet",
            "a",
            &serde_json::json!({"v": 1}),
            now,
        )
        .await
        .expect("enqueued");
        let messages: Vec<Message<'_>> = (0..150)
            .map(|n| ("changeItem", format!("a:{n}"), format!("{{\"n\":{n}}}")))
            .chain([("changeSet", "a".to_owned(), "{\"v\":2}".to_owned())])
            .collect();
        enqueue_many(&mut conn, &messages, now)
            .await
            .expect("enqueued");
        let all = undelivered(&mut conn, 1_000).await.expect("read");
        assert_eq!(all.len(), 151, "150 new messages, one replaced");
        assert_eq!(all[0].entity_id, "a");
        assert_eq!(all[0].payload, serde_json::json!({"v": 2}));
        assert_eq!(all[150].entity_id, "a:149");
        assert_eq!(all[150].payload, serde_json::json!({"n": 149}));
    }
}
