//! Webhook subscriptions, their events and the delivery queue.
//!
//! An event is written in the transaction of the write that caused it
//! ([`enqueue_event`], called by [`crate::change_sets`] for created and resolved sets,
//! by [`crate::expiry_warnings`] for sets about to expire, and [`enqueue_job_event`], called by the execution ledger when a
//! confirmed external item's job fails or goes in doubt), and only when a subscription
//! wants it: one `webhook_events` row and one `webhook_deliveries` row per matching
//! subscription. Without subscriptions a decision pays one indexed read of an empty
//! table and writes nothing more.
//!
//! A worker claims due deliveries ([`claim_due`], a lease like the outbox's, with
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL), sends them outside any transaction and
//! records the outcome ([`record_delivered`], [`record_failed`]). A claim whose worker
//! died runs out and is claimed again with the same event id. The signing secret is
//! stored with the subscription (every delivery needs it) and read only by
//! [`claim_due`] and [`signing_secret`]: [`Subscription`] has no field for it.
//!
//! A Slack incoming-webhook URL is a secret too: whoever has it posts into the channel.
//! It is stored whole and read whole only by [`claim_due`] and [`receiver_url`];
//! everything listed ([`Subscription`], [`Delivery`]) carries it masked
//! ([`shown_url`]), so no listing, JSON answer or log line can give it away. Any
//! other URL is listed with its user info and query values redacted
//! ([`redacted_url`]): a generic receiver's `?token=` authenticates just the same.

use crate::Connection;
use crate::jobs::{Job, JobStatus};
use crate::{Backend, StoreError, timefmt};
use assent_domain::{ChangeSet, ChangeSetStatus};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const SUBSCRIPTIONS: &str = "webhook_subscriptions";
const DELIVERIES: &str = "webhook_deliveries";

/// The event types a subscription can ask for.
pub mod event {
    /// A wake queued a change set for review.
    pub const CHANGE_SET_CREATED: &str = "changeSet.created";
    /// Every item of a set is decided.
    pub const CHANGE_SET_RESOLVED: &str = "changeSet.resolved";
    /// A set is still open a configured time before its TTL runs out (once per set).
    pub const CHANGE_SET_EXPIRING: &str = "changeSet.expiring";
    /// A set expired undecided.
    pub const CHANGE_SET_EXPIRED: &str = "changeSet.expired";
    /// A sub-agent asks its parent to confirm a call.
    pub const CONFIRMATION_REQUESTED: &str = "confirmation.requested";
    /// A confirmed item's external effect failed for good (a permanent error, retries
    /// used up, a policy that no longer allows it): a person may retry or retract it.
    pub const ITEM_FAILED: &str = "item.failed";
    /// A confirmed item's external call has no outcome (its executor stopped, or the
    /// call outlived its lease): it may have happened, and only a person can say.
    pub const ITEM_IN_DOUBT: &str = "item.inDoubt";
    /// A confirmed item's target changed between the proposal and its job's run:
    /// nothing ran, the job is retracted, and the item shows the target as it is.
    pub const ITEM_STALE: &str = "item.stale";
    /// A confirmed item of a held tool waits out its hold window (`notBefore` in its
    /// data): it may still be cancelled.
    pub const ITEM_SCHEDULED: &str = "item.scheduled";
    /// A held confirmation was cancelled within its window: the item ends rejected and
    /// nothing ran.
    pub const ITEM_CANCELLED: &str = "item.cancelled";
    /// An item that needs more than one person's confirmation got one more, short of
    /// its quorum (`approvals` and `approvalsNeeded` in its data).
    pub const ITEM_APPROVED: &str = "item.approved";
    /// The consent chain's head moved (`deviceId`, `entries`, `head` in its data): at
    /// most once an hour, so a receiver keeps checkpoints for `audit verify --head`.
    /// Sent only to subscriptions that name it.
    pub const AUDIT_HEAD: &str = "audit.head";
    /// Sent by `assent webhooks test` only; never stored.
    pub const TEST: &str = "webhook.test";

    /// Every type a subscription may name.
    pub const ALL: [&str; 12] = [
        CHANGE_SET_CREATED,
        CHANGE_SET_RESOLVED,
        CHANGE_SET_EXPIRING,
        CHANGE_SET_EXPIRED,
        CONFIRMATION_REQUESTED,
        ITEM_FAILED,
        ITEM_IN_DOUBT,
        ITEM_STALE,
        ITEM_SCHEDULED,
        ITEM_CANCELLED,
        ITEM_APPROVED,
        AUDIT_HEAD,
    ];
}

/// How often at most [`event::AUDIT_HEAD`] is sent.
pub const AUDIT_HEAD_EVERY: time::Duration = time::Duration::HOUR;

/// Whether an [`event::AUDIT_HEAD`] is due: a subscription wants it, the last one is
/// an hour old (or there was none) and the head moved since. A read, so a sender
/// polling every second takes no lock; [`enqueue_head_event`] writes it.
pub async fn head_event_due(
    conn: &mut Connection,
    now: OffsetDateTime,
) -> Result<Option<crate::chain::Head>, StoreError> {
    if wanting(conn, event::AUDIT_HEAD, None).await?.is_empty() {
        return Ok(None);
    }
    let last: Option<(String, String)> = sqlx::query_as(
        "SELECT created_at, payload FROM webhook_events WHERE event_type = $1 ORDER BY created_at DESC LIMIT 1",
    )
    .bind(event::AUDIT_HEAD)
    .fetch_optional(&mut *conn)
    .await?;
    let head = crate::chain::head(conn).await?;
    if head.entries == 0 {
        return Ok(None);
    }
    if let Some((at, payload)) = last {
        let at = timefmt::parse("webhook_events", &at)?;
        let sent: Value = serde_json::from_str(&payload).unwrap_or_default();
        if now - at < AUDIT_HEAD_EVERY || sent["data"]["head"] == head.hash.as_str() {
            return Ok(None);
        }
    }
    Ok(Some(head))
}

/// Writes an [`event::AUDIT_HEAD`] for `head` (from [`head_event_due`], in the caller's
/// write transaction).
pub async fn enqueue_head_event(
    conn: &mut Connection,
    head: &crate::chain::Head,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let new = NewEvent {
        event_type: event::AUDIT_HEAD,
        agent_id: None,
        change_set_id: None,
        data: json!({"deviceId": head.device_id, "entries": head.entries, "head": head.hash}),
    };
    enqueue_event(conn, new, now).await
}

/// A subscription as listed: everything but its secret, and its URL as it may be
/// shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// Its id (`assent webhooks remove ID`).
    pub id: Uuid,
    /// Where deliveries are posted, as [`shown_url`] shows it: a Slack URL masked
    /// (the sender reads the whole one with [`receiver_url`]).
    pub url: String,
    /// The event types it wants; empty means all of them.
    pub events: Vec<String>,
    /// `standard` (Standard Webhooks JSON) or `slack` (an incoming-webhook body).
    pub format: String,
    /// Only events about this agent's sets, when set.
    pub agent_id: Option<String>,
    /// When it was added.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl Subscription {
    /// Whether an event of `event_type` about `agent_id`'s set goes to this subscription.
    pub fn wants(&self, event_type: &str, agent_id: Option<&str>) -> bool {
        // A subscription to every event keeps getting the events it was made for:
        // `audit.head` (added later, and no event about a set) only when named.
        let type_ok = (self.events.is_empty() && event_type != event::AUDIT_HEAD)
            || self.events.iter().any(|e| e == event_type);
        let agent_ok = match (&self.agent_id, agent_id) {
            (None, _) => true,
            (Some(wanted), Some(agent)) => wanted == agent,
            (Some(_), None) => false,
        };
        type_ok && agent_ok
    }
}

/// A subscription to add, with the secret its deliveries are signed with.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    /// Where deliveries are posted (validated by the caller).
    pub url: String,
    /// The event types; empty for all.
    pub events: Vec<String>,
    /// `standard` or `slack`.
    pub format: String,
    /// Only this agent's sets.
    pub agent_id: Option<String>,
    /// `whsec_…`.
    pub secret: String,
}

/// One delivery as listed (`assent webhooks deliveries`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// Its id (`assent webhooks redeliver ID`).
    pub id: i64,
    /// The event's id: the `webhook-id` header of every attempt.
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// The subscription.
    pub subscription_id: Uuid,
    /// Its URL, as [`shown_url`] shows it.
    pub url: String,
    /// `pending`, `inFlight`, `delivered` or `dead`.
    pub status: String,
    /// Attempts made so far.
    pub attempts: i64,
    /// The receiver's last HTTP status, if it answered.
    pub last_status: Option<i64>,
    /// The last error, escaped and truncated by the sender.
    pub last_error: Option<String>,
    /// When the next attempt is due (pending ones).
    #[serde(with = "time::serde::rfc3339")]
    pub next_attempt_at: OffsetDateTime,
    /// When a receiver accepted it.
    #[serde(with = "time::serde::rfc3339::option")]
    pub delivered_at: Option<OffsetDateTime>,
    /// When the event was written.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A claimed delivery, with what sending it needs.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The delivery's id.
    pub id: i64,
    /// The event id (`webhook-id`).
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// The event, `{type, timestamp, data}`.
    pub payload: Value,
    /// The subscription's URL.
    pub url: String,
    /// Its format.
    pub format: String,
    /// Its signing secret (`whsec_…`).
    pub secret: String,
    /// Attempts before this one.
    pub attempts: i64,
}

/// Re-exported from `assent-domain`, where the listings' redaction of URLs lives.
pub use assent_domain::{is_secret_url, masked_url, redacted_url, shown_url};

fn parse_uuid(table: &'static str, text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::corrupt(table, e))
}

fn decode_subscription(row: &AnyRow) -> Result<Subscription, StoreError> {
    let id: String = row.try_get("id")?;
    let events: String = row.try_get("events")?;
    let created_at: String = row.try_get("created_at")?;
    let url: String = row.try_get("url")?;
    let format: String = row.try_get("format")?;
    Ok(Subscription {
        id: parse_uuid(SUBSCRIPTIONS, &id)?,
        url: shown_url(&url, &format).into_owned(),
        events: serde_json::from_str(&events).map_err(|e| StoreError::corrupt(SUBSCRIPTIONS, e))?,
        format,
        agent_id: row.try_get("agent_id")?,
        created_at: timefmt::parse(SUBSCRIPTIONS, &created_at)?,
    })
}

/// The columns of a listed subscription: never the secret.
const SUBSCRIPTION_COLUMNS: &str = "id, url, events, format, agent_id, created_at";

/// Adds a subscription; returns it as listed (its URL masked when it is a secret).
pub async fn insert_subscription(
    conn: &mut Connection,
    new: &NewSubscription,
    now: OffsetDateTime,
) -> Result<Subscription, StoreError> {
    let subscription = Subscription {
        id: Uuid::new_v4(),
        url: shown_url(&new.url, &new.format).into_owned(),
        events: new.events.clone(),
        format: new.format.clone(),
        agent_id: new.agent_id.clone(),
        created_at: now,
    };
    sqlx::query(
        "INSERT INTO webhook_subscriptions (id, url, events, format, agent_id, secret, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(subscription.id.to_string())
    .bind(&new.url)
    .bind(json!(subscription.events).to_string())
    .bind(&subscription.format)
    .bind(&subscription.agent_id)
    .bind(&new.secret)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(subscription)
}

/// Every subscription, oldest first.
pub async fn subscriptions(conn: &mut Connection) -> Result<Vec<Subscription>, StoreError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_at, id"
    )))
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_subscription).collect()
}

/// One subscription, if it exists.
pub async fn subscription(
    conn: &mut Connection,
    id: Uuid,
) -> Result<Option<Subscription>, StoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE id = $1"
    )))
    .bind(id.to_string())
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode_subscription).transpose()
}

/// The secret subscription `id` signs with: for the sender and `webhooks test` only,
/// never for display.
pub async fn signing_secret(conn: &mut Connection, id: Uuid) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT secret FROM webhook_subscriptions WHERE id = $1")
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?,
    )
}

/// The whole URL subscription `id` posts to: for the sender and `webhooks test` only,
/// never for display (a Slack URL is a secret; [`Subscription::url`] is masked).
pub async fn receiver_url(conn: &mut Connection, id: Uuid) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT url FROM webhook_subscriptions WHERE id = $1")
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?,
    )
}

/// Removes a subscription and its deliveries (pending ones are never sent). Returns
/// whether it existed.
pub async fn remove_subscription(conn: &mut Connection, id: Uuid) -> Result<bool, StoreError> {
    let id = id.to_string();
    sqlx::query("DELETE FROM webhook_deliveries WHERE subscription_id = $1")
        .bind(&id)
        .execute(&mut *conn)
        .await?;
    let removed = sqlx::query("DELETE FROM webhook_subscriptions WHERE id = $1")
        .bind(&id)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    Ok(removed > 0)
}

/// An event about to be written.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    /// One of [`event`]'s types.
    pub event_type: &'a str,
    /// The agent whose set it concerns (subscriptions filtered by agent match on it).
    pub agent_id: Option<&'a str>,
    /// The set it concerns, if any.
    pub change_set_id: Option<Uuid>,
    /// The event's `data`.
    pub data: Value,
}

/// The subscriptions that want an event of `event_type` about `agent_id`'s set.
async fn wanting(
    conn: &mut Connection,
    event_type: &str,
    agent_id: Option<&str>,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(subscriptions(conn)
        .await?
        .into_iter()
        .filter(|s| s.wants(event_type, agent_id))
        .map(|s| s.id)
        .collect())
}

/// Writes `new` for every subscription that wants it, in the caller's transaction.
/// Returns the event id, or `None` when no subscription wants it (nothing written).
#[tracing::instrument(skip_all, fields(event = new.event_type))]
pub async fn enqueue_event(
    conn: &mut Connection,
    new: NewEvent<'_>,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let wanting = wanting(conn, new.event_type, new.agent_id).await?;
    write_event(conn, &wanting, new, now).await
}

/// Writes `new` and one delivery for each of `wanting`; nothing when it is empty.
async fn write_event(
    conn: &mut Connection,
    wanting: &[Uuid],
    new: NewEvent<'_>,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    if wanting.is_empty() {
        return Ok(None);
    }
    let id = format!("msg_{}", Uuid::new_v4().simple());
    let at = timefmt::format(now);
    let payload = json!({
        "type": new.event_type,
        "timestamp": now.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| at.clone()),
        "data": new.data,
    });
    sqlx::query(
        "INSERT INTO webhook_events (id, event_type, change_set_id, payload, created_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(new.event_type)
    .bind(new.change_set_id.map(|id| id.to_string()))
    .bind(payload.to_string())
    .bind(&at)
    .execute(&mut *conn)
    .await?;
    for subscription in wanting {
        sqlx::query(
            "INSERT INTO webhook_deliveries (event_id, subscription_id, status, attempts, next_attempt_at, created_at, updated_at)
             VALUES ($1, $2, 'pending', 0, $3, $3, $3)",
        )
        .bind(&id)
        .bind(subscription.to_string())
        .bind(&at)
        .execute(&mut *conn)
        .await?;
    }
    tracing::debug!(deliveries = wanting.len(), "webhook event queued");
    Ok(Some(id))
}

/// A webhook's `target`: the host's kind and id, and for the journal's tasks also
/// `taskId` (the field release 0.1.0's receivers read).
fn target_json(kind: &str, id: &str) -> Value {
    let mut target = json!({"kind": kind, "id": id});
    if kind == assent_domain::LEGACY_TARGET_KIND {
        target["taskId"] = json!(id);
    }
    target
}

/// The `data` of a change-set event: the set, its agent and target, and its items with
/// their arguments whole (a summary may cut them; receivers and Slack show them).
pub fn change_set_data(set: &ChangeSet) -> Value {
    let items: Vec<Value> = set
        .items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            json!({
                "index": index,
                "toolName": item.tool_name,
                "args": item.args,
                "summary": item.human_summary,
                "status": item.status,
            })
        })
        .collect();
    json!({
        "changeSetId": set.id,
        "agentId": set.agent_id,
        "target": target_json(&set.target_kind, &set.target_id),
        "status": set.status,
        "createdAt": timefmt::format(set.created_at),
        "resolvedAt": set.resolved_at.map(timefmt::format),
        "items": items,
    })
}

/// Queues `event_type` about `set`.
pub async fn enqueue_set_event(
    conn: &mut Connection,
    event_type: &str,
    set: &ChangeSet,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let new = NewEvent {
        event_type,
        agent_id: Some(&set.agent_id),
        change_set_id: Some(set.id),
        data: change_set_data(set),
    };
    enqueue_event(conn, new, now).await
}

/// Queues `item.failed` or `item.inDoubt` about `job`, which the caller's transaction
/// has just moved to `status` with `error` as its last error (the ledger does, beside
/// the move, so the event exists exactly when the move commits). Other statuses
/// announce nothing. `data` is the item as `confirmation.requested` names a call
/// (`changeSetId`, `itemIndex`, `agentId`, `target`, `toolName`, `args` whole, the
/// item's `summary`) and the job (`jobId`, `status`, `attempts`, `lastError`).
#[tracing::instrument(skip_all, fields(job = %job.id, status = %status))]
pub async fn enqueue_job_event(
    conn: &mut Connection,
    job: &Job,
    status: JobStatus,
    error: &str,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let event_type = match status {
        JobStatus::Failed => event::ITEM_FAILED,
        JobStatus::InDoubt => event::ITEM_IN_DOUBT,
        _ => return Ok(None),
    };
    enqueue_item_event(conn, job, event_type, status.as_str(), error, now).await
}

/// Queues `item.stale` about `job`, which the caller's transaction has just retracted
/// because its target changed since the proposal (`detail`); the same `data` as
/// [`enqueue_job_event`]'s, with `detail` as `lastError`.
pub async fn enqueue_stale_event(
    conn: &mut Connection,
    job: &Job,
    detail: &str,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    enqueue_item_event(
        conn,
        job,
        event::ITEM_STALE,
        JobStatus::Retracted.as_str(),
        detail,
        now,
    )
    .await
}

/// Queues `item.approved` about item `index` of `set`: `revision` has one more
/// approval, short of `needed`. `data`: `changeSetId`, `itemIndex`, `agentId`,
/// `target`, `toolName`, `args` (the revision's), `summary`, `approvals` `[{by, at}]`
/// and `approvalsNeeded`.
pub async fn enqueue_approval_event(
    conn: &mut Connection,
    set: &ChangeSet,
    index: usize,
    revision: &crate::approvals::Revision,
    needed: u32,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let Some(item) = set.items.get(index) else {
        return Ok(None);
    };
    let approvals: Vec<Value> = revision
        .approvals
        .iter()
        .map(|a| json!({"by": a.by, "at": timefmt::format(a.at)}))
        .collect();
    let new = NewEvent {
        event_type: event::ITEM_APPROVED,
        agent_id: Some(&set.agent_id),
        change_set_id: Some(set.id),
        data: json!({
            "changeSetId": set.id,
            "itemIndex": index,
            "agentId": set.agent_id,
            "target": target_json(&set.target_kind, &set.target_id),
            "toolName": item.tool_name,
            "args": revision.args.as_ref().unwrap_or(&item.args),
            "summary": item.human_summary,
            "approvals": approvals,
            "approvalsNeeded": needed,
        }),
    };
    enqueue_event(conn, new, now).await
}

/// Queues `item.scheduled` (the caller's transaction has just written held job `job`,
/// due at the end of its window) or `item.cancelled` (it has just cancelled it); the
/// same `data` as [`enqueue_job_event`]'s, with `notBefore` when scheduled.
pub async fn enqueue_hold_event(
    conn: &mut Connection,
    job: &Job,
    cancelled: bool,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    if cancelled {
        let status = JobStatus::Retracted.as_str();
        let note = crate::jobs::CANCELLED_IN_HOLD;
        enqueue_item_event(conn, job, event::ITEM_CANCELLED, status, note, now).await
    } else {
        let status = crate::jobs::SCHEDULED;
        enqueue_item_event(conn, job, event::ITEM_SCHEDULED, status, "", now).await
    }
}

async fn enqueue_item_event(
    conn: &mut Connection,
    job: &Job,
    event_type: &'static str,
    status: &str,
    error: &str,
    now: OffsetDateTime,
) -> Result<Option<String>, StoreError> {
    let wanting = wanting(conn, event_type, Some(&job.agent_id)).await?;
    if wanting.is_empty() {
        return Ok(None);
    }
    let summary: Option<String> = sqlx::query_scalar(
        "SELECT human_summary FROM change_items WHERE change_set_id = $1 AND item_index = $2",
    )
    .bind(job.change_set_id.to_string())
    .bind(i64::try_from(job.item_index).unwrap_or(i64::MAX))
    .fetch_optional(&mut *conn)
    .await?;
    let mut data = json!({
        "changeSetId": job.change_set_id,
        "itemIndex": job.item_index,
        "agentId": job.agent_id,
        "target": target_json(&job.target.kind, &job.target.id),
        "toolName": job.tool_name,
        "args": job.args,
        "summary": summary,
        "jobId": job.id,
        "status": status,
        "attempts": job.attempts,
        "lastError": error,
    });
    if event_type == event::ITEM_SCHEDULED {
        data["notBefore"] = json!(timefmt::format(job.due_at));
    }
    let new = NewEvent {
        event_type,
        agent_id: Some(&job.agent_id),
        change_set_id: Some(job.change_set_id),
        data,
    };
    write_event(conn, &wanting, new, now).await
}

/// The event a status write causes, if any: called by [`crate::change_sets`] with the
/// items the write decided (a decision only ever decides open items, so a resolved set
/// with decided items has just been resolved).
pub(crate) fn status_event(set: &ChangeSet, changed_items: &[usize]) -> Option<&'static str> {
    match set.status {
        ChangeSetStatus::Resolved if !changed_items.is_empty() => Some(event::CHANGE_SET_RESOLVED),
        ChangeSetStatus::Expired => Some(event::CHANGE_SET_EXPIRED),
        _ => None,
    }
}

/// Due deliveries: pending and due, or in flight with a lease run out.
const DUE: &str = "SELECT id FROM webhook_deliveries
     WHERE (status = 'pending' AND next_attempt_at <= $1) OR (status = 'inFlight' AND claimed_until < $1)
     ORDER BY next_attempt_at, id LIMIT $2";

/// [`DUE`] on a shared PostgreSQL: concurrent workers skip each other's rows.
const DUE_SKIP_LOCKED: &str = "SELECT id FROM webhook_deliveries
     WHERE (status = 'pending' AND next_attempt_at <= $1) OR (status = 'inFlight' AND claimed_until < $1)
     ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED";

/// Whether any delivery is due: a read, so that an idle sender polling every second
/// never takes the writer lock (SQLite's claim is `BEGIN IMMEDIATE`).
pub async fn any_due(conn: &mut Connection, now: OffsetDateTime) -> Result<bool, StoreError> {
    let found: Option<i64> = sqlx::query_scalar(DUE)
        .bind(timefmt::format(now))
        .bind(1_i64)
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}

/// Claims up to `limit` due deliveries, leasing them until `now + lease`. Run it in
/// [`crate::Store::begin_claim`]'s transaction, so two workers (in one process or
/// several) never claim the same delivery at once.
#[tracing::instrument(skip(conn))]
pub async fn claim_due(
    conn: &mut Connection,
    limit: u32,
    now: OffsetDateTime,
    lease: Duration,
) -> Result<Vec<ClaimedDelivery>, StoreError> {
    let now_text = timefmt::format(now);
    let ids: Vec<i64> = sqlx::query_scalar(match Backend::of(conn) {
        Backend::Sqlite => DUE,
        Backend::Postgres => DUE_SKIP_LOCKED,
    })
    .bind(&now_text)
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?;
    let until = timefmt::format(now + lease);
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'inFlight', claimed_until = $1, updated_at = $2 WHERE id = $3",
        )
        .bind(&until)
        .bind(&now_text)
        .bind(id)
        .execute(&mut *conn)
        .await?;
        let row = sqlx::query(
            "SELECT d.id, d.event_id, d.attempts, e.event_type, e.payload, s.url, s.format, s.secret
             FROM webhook_deliveries d
             JOIN webhook_events e ON e.id = d.event_id
             JOIN webhook_subscriptions s ON s.id = d.subscription_id
             WHERE d.id = $1",
        )
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
        let payload: String = row.try_get("payload")?;
        claimed.push(ClaimedDelivery {
            id,
            event_id: row.try_get("event_id")?,
            event_type: row.try_get("event_type")?,
            payload: serde_json::from_str(&payload)
                .map_err(|e| StoreError::corrupt("webhook_events", e))?,
            url: row.try_get("url")?,
            format: row.try_get("format")?,
            secret: row.try_get("secret")?,
            attempts: row.try_get("attempts")?,
        });
    }
    tracing::debug!(claimed = claimed.len(), "webhook deliveries claimed");
    Ok(claimed)
}

/// Records that the receiver accepted delivery `id` with `status`. Returns false when
/// the delivery is no longer in flight (its lease ran out and another worker has it,
/// or its subscription was removed).
pub async fn record_delivered(
    conn: &mut Connection,
    id: i64,
    status: u16,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let now = timefmt::format(now);
    let updated = sqlx::query(
        "UPDATE webhook_deliveries
         SET status = 'delivered', attempts = attempts + 1, last_status = $1, last_error = NULL,
             claimed_until = NULL, delivered_at = $2, updated_at = $2
         WHERE id = $3 AND status = 'inFlight'",
    )
    .bind(i64::from(status))
    .bind(&now)
    .bind(id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(updated > 0)
}

/// Forgets deliveries delivered before `before`, and the events no delivery refers to
/// any more that were written before it; pending, in-flight and dead deliveries (and
/// their events) stay, dead letters until a person redelivers or removes them. Returns
/// how many deliveries were forgotten.
#[tracing::instrument(skip(conn))]
pub async fn prune_delivered(
    conn: &mut Connection,
    before: OffsetDateTime,
) -> Result<u64, StoreError> {
    let before = timefmt::format(before);
    let deliveries = sqlx::query(
        "DELETE FROM webhook_deliveries WHERE status = 'delivered' AND delivered_at < $1",
    )
    .bind(&before)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    sqlx::query(
        "DELETE FROM webhook_events WHERE created_at < $1
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)",
    )
    .bind(&before)
    .execute(&mut *conn)
    .await?;
    Ok(deliveries)
}

/// Records a failed attempt of delivery `id`: retried at `retry_at`, or dead-lettered
/// when it is `None`. `error` must already be safe to show (escaped, truncated).
pub async fn record_failed(
    conn: &mut Connection,
    id: i64,
    status: Option<u16>,
    error: &str,
    retry_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let now_text = timefmt::format(now);
    let (next_status, next_at) = match retry_at {
        Some(at) => ("pending", timefmt::format(at)),
        None => ("dead", now_text.clone()),
    };
    let updated = sqlx::query(
        "UPDATE webhook_deliveries
         SET status = $1, attempts = attempts + 1, last_status = $2, last_error = $3,
             claimed_until = NULL, next_attempt_at = $4, updated_at = $5
         WHERE id = $6 AND status = 'inFlight'",
    )
    .bind(next_status)
    .bind(status.map(i64::from))
    .bind(error)
    .bind(&next_at)
    .bind(&now_text)
    .bind(id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(updated > 0)
}

/// Puts delivery `id` back in the queue, due now, with a fresh count of attempts (a
/// person's redelivery of a dead or delivered one). Returns false for an unknown id.
pub async fn redeliver(
    conn: &mut Connection,
    id: i64,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let now = timefmt::format(now);
    let updated = sqlx::query(
        "UPDATE webhook_deliveries
         SET status = 'pending', attempts = 0, next_attempt_at = $1, claimed_until = NULL, updated_at = $1
         WHERE id = $2",
    )
    .bind(&now)
    .bind(id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(updated > 0)
}

fn decode_delivery(row: &AnyRow) -> Result<Delivery, StoreError> {
    let subscription_id: String = row.try_get("subscription_id")?;
    let next_attempt_at: String = row.try_get("next_attempt_at")?;
    let delivered_at: Option<String> = row.try_get("delivered_at")?;
    let created_at: String = row.try_get("created_at")?;
    let url: String = row.try_get("url")?;
    let format: String = row.try_get("format")?;
    Ok(Delivery {
        id: row.try_get("id")?,
        event_id: row.try_get("event_id")?,
        event_type: row.try_get("event_type")?,
        subscription_id: parse_uuid(DELIVERIES, &subscription_id)?,
        url: shown_url(&url, &format).into_owned(),
        status: row.try_get("status")?,
        attempts: row.try_get("attempts")?,
        last_status: row.try_get("last_status")?,
        last_error: row.try_get("last_error")?,
        next_attempt_at: timefmt::parse(DELIVERIES, &next_attempt_at)?,
        delivered_at: delivered_at
            .map(|t| timefmt::parse(DELIVERIES, &t))
            .transpose()?,
        created_at: timefmt::parse(DELIVERIES, &created_at)?,
    })
}

/// Deliveries, newest first: all, or only the dead ones (`failed`).
pub async fn deliveries(
    conn: &mut Connection,
    failed: bool,
    limit: u32,
) -> Result<Vec<Delivery>, StoreError> {
    let rows = sqlx::query(
        "SELECT d.id, d.event_id, e.event_type, d.subscription_id, s.url, s.format, d.status, d.attempts,
                d.last_status, d.last_error, d.next_attempt_at, d.delivered_at, d.created_at
         FROM webhook_deliveries d
         JOIN webhook_events e ON e.id = d.event_id
         JOIN webhook_subscriptions s ON s.id = d.subscription_id
         WHERE ($1 = 0 OR d.status = 'dead')
         ORDER BY d.id DESC LIMIT $2",
    )
    .bind(i64::from(failed))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_delivery).collect()
}
