//! The delivery worker: claim due deliveries, post each in its own task with its own
//! timeout, record the outcome.

use crate::{Format, WebhookError, backoff, sign, slack_body};
use assent_store::Store;
use assent_store::expiry_warnings;
use assent_store::webhooks::{self, ClaimedDelivery, event};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::task::JoinSet;
use uuid::Uuid;

/// How long one request may take, connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a receiver's answer is read, and how much of it is kept.
const BODY_READ_LIMIT: usize = 4096;
const BODY_KEEP_CHARS: usize = 200;

/// How the worker behaves.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// The review server's address as receivers reach it (`assent serve --public-url`);
    /// events about a set then link to it on the review page.
    pub public_url: Option<String>,
    /// The per-request timeout; a receiver that takes longer counts as failed.
    pub timeout: Duration,
    /// Attempts before a delivery is dead-lettered.
    pub max_attempts: i64,
    /// How often the queue is looked at (events written by other processes are found
    /// within this).
    pub poll_interval: Duration,
    /// Deliveries in flight at once, at most.
    pub max_in_flight: usize,
    /// `(ttl, warn_before)`: open sets get `changeSet.expiring` once, `warn_before`
    /// before `created_at + ttl`. `None` warns about nothing.
    pub expiry: Option<(time::Duration, time::Duration)>,
    /// Delivered deliveries (and their events) older than this are forgotten by the
    /// running sender, so the queue does not grow forever; dead letters stay. `None`
    /// keeps everything.
    pub retention: Option<time::Duration>,
}

/// How long delivered webhooks are kept by default.
pub const DEFAULT_RETENTION: time::Duration = time::Duration::days(30);

/// How often the running sender forgets old deliveries.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            timeout: DEFAULT_TIMEOUT,
            max_attempts: crate::DEFAULT_MAX_ATTEMPTS,
            poll_interval: Duration::from_secs(1),
            max_in_flight: 32,
            expiry: None,
            retention: Some(DEFAULT_RETENTION),
        }
    }
}

/// What one pass over the queue did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Accepted by their receivers (2xx).
    pub delivered: usize,
    /// Failed, to be retried.
    pub retrying: usize,
    /// Failed for the last time: dead-lettered.
    pub dead: usize,
    /// Sets newly warned about (`changeSet.expiring`).
    pub expiring: usize,
}

/// The answer to `assent webhooks test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// Whether the receiver answered 2xx.
    pub ok: bool,
    /// Its HTTP status, if it answered.
    pub status: Option<u16>,
    /// Its answer or the error, escaped and truncated.
    pub detail: String,
}

/// How one attempt ended.
struct Attempt {
    status: Option<u16>,
    ok: bool,
    detail: String,
}

/// The sender over one database. Cheap to clone.
#[derive(Clone)]
pub struct Sender {
    store: Store,
    client: reqwest::Client,
    config: Arc<SenderConfig>,
}

/// The review page's link for `change_set_id` under `public_url`.
pub fn review_link(public_url: &str, change_set_id: &str) -> String {
    format!(
        "{}/#change-set-{change_set_id}",
        public_url.trim_end_matches('/')
    )
}

/// A receiver's answer or an error, made safe to store and show: at most 200
/// characters, control characters (newlines, terminal escapes) written as escapes.
pub fn safe_text(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == BODY_KEEP_CHARS {
            out.push('…');
            break;
        }
        if assent_domain::misleads(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The fields of a Standard Webhooks body that receivers show people as they are:
/// written by an agent (`summary`) or a remote tool (`lastError`).
const HUMAN_TEXT_FIELDS: [&str; 2] = ["summary", "lastError"];

/// Puts `object`'s human text fields on one line with nothing hidden, as every review
/// surface shows them (a receiver printing a summary must not print an agent's fake
/// second line). They stay whole: JSON has no length limit. `args`, ids and everything
/// else machines read stay exactly as written.
fn one_line_fields(object: &mut serde_json::Map<String, Value>) {
    for key in HUMAN_TEXT_FIELDS {
        if let Some(Value::String(text)) = object.get_mut(key)
            && let std::borrow::Cow::Owned(shown) = assent_domain::one_line(text)
        {
            *text = shown;
        }
    }
}

/// The body of `payload` in `format`, with the review link under `public_url` added.
fn shaped_body(format: Format, payload: &Value, public_url: Option<&str>) -> Value {
    let link = public_url.and_then(|url| {
        payload["data"]["changeSetId"]
            .as_str()
            .map(|id| review_link(url, id))
    });
    match format {
        Format::Slack => slack_body(payload, link.as_deref()),
        Format::Standard => {
            let mut body = payload.clone();
            if let Some(data) = body["data"].as_object_mut() {
                one_line_fields(data);
                if let Some(items) = data.get_mut("items").and_then(Value::as_array_mut) {
                    items
                        .iter_mut()
                        .filter_map(Value::as_object_mut)
                        .for_each(one_line_fields);
                }
                if let Some(link) = link {
                    data.insert("reviewUrl".to_owned(), Value::String(link));
                }
            }
            body
        }
    }
}

/// A number in `[0, 1)` from the system's random generator (through a v4 UUID).
fn jitter() -> f64 {
    let bytes = Uuid::new_v4().into_bytes();
    f64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        / (f64::from(u32::MAX) + 1.0)
}

impl Sender {
    /// A sender on `store`. Redirects are not followed: a receiver answers itself.
    pub fn new(store: Store, config: SenderConfig) -> Result<Self, WebhookError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("assent-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        Ok(Self {
            store,
            client,
            config: Arc::new(config),
        })
    }

    /// A pooled connection for reads and single statements.
    async fn connection(
        &self,
    ) -> Result<impl std::ops::DerefMut<Target = assent_store::Connection>, WebhookError> {
        Ok(self.store.read_connection().await?)
    }

    /// The lease on a claimed delivery: longer than any attempt can take, so a live
    /// worker never loses its claim; a dead worker's claim runs out after it.
    fn lease(&self) -> time::Duration {
        time::Duration::try_from(self.config.timeout).unwrap_or(time::Duration::MINUTE) * 2
            + time::Duration::seconds(30)
    }

    /// Warns about sets close to expiry, when configured. Returns how many.
    async fn warn_expiring(&self, now: OffsetDateTime) -> Result<usize, WebhookError> {
        let Some((ttl, warn_before)) = self.config.expiry else {
            return Ok(0);
        };
        {
            let mut conn = self.connection().await?;
            if !expiry_warnings::expiring_due(&mut conn, ttl, warn_before, now).await? {
                return Ok(0);
            }
        }
        let mut tx = self.store.begin_write().await?;
        let warned = expiry_warnings::warn_expiring(tx.connection(), ttl, warn_before, now).await?;
        tx.commit().await?;
        Ok(warned.len())
    }

    /// Sends the consent chain's head when it moved, at most once an hour.
    async fn announce_head(&self, now: OffsetDateTime) -> Result<(), WebhookError> {
        let head = {
            let mut conn = self.connection().await?;
            webhooks::head_event_due(&mut conn, now).await?
        };
        let Some(head) = head else { return Ok(()) };
        let mut tx = self.store.begin_write().await?;
        // Checked again under the lock: another sender may have sent it meanwhile.
        if webhooks::head_event_due(tx.connection(), now)
            .await?
            .is_some()
        {
            webhooks::enqueue_head_event(tx.connection(), &head, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn claim(&self, limit: usize) -> Result<Vec<ClaimedDelivery>, WebhookError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let now = OffsetDateTime::now_utc();
        {
            let mut conn = self.connection().await?;
            if !webhooks::any_due(&mut conn, now).await? {
                return Ok(Vec::new());
            }
        }
        let mut tx = self.store.begin_claim().await?;
        let claimed = webhooks::claim_due(tx.connection(), limit, now, self.lease()).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    /// One pass, for one-shot use (`assent webhooks deliver`, cron): warns about sets
    /// close to expiry, then sends every due delivery (concurrently, up to
    /// `max_in_flight` at a time) and waits for them.
    #[tracing::instrument(skip(self))]
    pub async fn deliver_due(&self) -> Result<DeliveryReport, WebhookError> {
        let mut report = DeliveryReport {
            expiring: self.warn_expiring(OffsetDateTime::now_utc()).await?,
            ..DeliveryReport::default()
        };
        self.announce_head(OffsetDateTime::now_utc()).await?;
        loop {
            let batch = self.claim(self.config.max_in_flight.max(1)).await?;
            if batch.is_empty() {
                return Ok(report);
            }
            let mut tasks = JoinSet::new();
            for delivery in batch {
                let sender = self.clone();
                tasks.spawn(async move { sender.attempt(delivery).await });
            }
            while let Some(done) = tasks.join_next().await {
                match done {
                    Ok(Ok(Some(true))) => report.delivered += 1,
                    Ok(Ok(Some(false))) => report.retrying += 1,
                    Ok(Ok(None)) => report.dead += 1,
                    Ok(Err(error)) => return Err(error),
                    Err(join) => tracing::error!(%join, "webhook delivery task failed"),
                }
            }
        }
    }

    /// Runs until `shutdown` completes: every poll interval, warns about sets close to
    /// expiry and starts a task for every due delivery while fewer than
    /// `max_in_flight` are in flight. Deliveries cut off by the shutdown are sent again
    /// (with the same id) once their lease runs out.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut tick = tokio::time::interval(self.config.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tasks: JoinSet<Result<Option<bool>, WebhookError>> = JoinSet::new();
        tracing::info!(poll = ?self.config.poll_interval, "webhook sender running");
        let mut pruned_at: Option<std::time::Instant> = None;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                _ = tick.tick() => {}
            }
            while let Some(done) = tasks.try_join_next() {
                if let Ok(Err(error)) = done {
                    tracing::error!(%error, "recording a webhook delivery failed");
                }
            }
            if let Err(error) = self.warn_expiring(OffsetDateTime::now_utc()).await {
                tracing::error!(%error, "warning about expiring sets failed");
            }
            if let Err(error) = self.announce_head(OffsetDateTime::now_utc()).await {
                tracing::error!(%error, "sending the consent chain's head failed");
            }
            if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                pruned_at = Some(std::time::Instant::now());
                if let Err(error) = self.prune(OffsetDateTime::now_utc()).await {
                    tracing::error!(%error, "forgetting old webhook deliveries failed");
                }
            }
            let room = self.config.max_in_flight.saturating_sub(tasks.len());
            if room == 0 {
                continue;
            }
            match self.claim(room).await {
                Ok(batch) => {
                    for delivery in batch {
                        let sender = self.clone();
                        tasks.spawn(async move { sender.attempt(delivery).await });
                    }
                }
                Err(error) => tracing::error!(%error, "claiming webhook deliveries failed"),
            }
        }
        tasks.shutdown().await;
        tracing::info!("webhook sender stopped");
    }

    /// Forgets deliveries delivered longer than the retention ago; how many.
    pub async fn prune(&self, now: OffsetDateTime) -> Result<u64, WebhookError> {
        let Some(retention) = self.config.retention else {
            return Ok(0);
        };
        let mut tx = self.store.begin_write().await?;
        let pruned = webhooks::prune_delivered(tx.connection(), now - retention).await?;
        tx.commit().await?;
        if pruned > 0 {
            tracing::info!(pruned, "old webhook deliveries forgotten");
        }
        Ok(pruned)
    }

    /// The body of `payload` in `format`, with the review link added.
    fn body(&self, format: Format, payload: &Value) -> Value {
        shaped_body(format, payload, self.config.public_url.as_deref())
    }

    /// Posts `payload` to `url`, signed with `secret` as message `id`.
    async fn post(&self, url: &str, secret: &str, id: &str, body: &Value) -> Attempt {
        let bytes = body.to_string().into_bytes();
        let timestamp = OffsetDateTime::now_utc().unix_timestamp();
        let Some(signature) = sign(secret, id, timestamp, &bytes) else {
            return Attempt {
                status: None,
                ok: false,
                detail: "the stored secret is not a whsec_ base64 key".to_owned(),
            };
        };
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(bytes)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(error) => {
                let what = if error.is_timeout() {
                    "timed out".to_owned()
                } else if error.is_connect() {
                    "cannot connect".to_owned()
                } else {
                    error.without_url().to_string()
                };
                return Attempt {
                    status: None,
                    ok: false,
                    detail: safe_text(&what),
                };
            }
        };
        let status = response.status();
        let mut answer = Vec::new();
        while answer.len() < BODY_READ_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => answer.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        answer.truncate(BODY_READ_LIMIT);
        let answer = String::from_utf8_lossy(&answer);
        let detail = if answer.trim().is_empty() {
            format!("HTTP {}", status.as_u16())
        } else {
            format!("HTTP {}: {}", status.as_u16(), answer.trim())
        };
        Attempt {
            status: Some(status.as_u16()),
            ok: status.is_success(),
            detail: safe_text(&detail),
        }
    }

    /// Sends one claimed delivery and records the outcome: `Some(true)` delivered,
    /// `Some(false)` to be retried, `None` dead-lettered.
    #[tracing::instrument(skip_all, fields(delivery = delivery.id, event = %delivery.event_id, attempt = delivery.attempts + 1))]
    async fn attempt(&self, delivery: ClaimedDelivery) -> Result<Option<bool>, WebhookError> {
        let format = Format::parse(&delivery.format).unwrap_or(Format::Standard);
        let body = self.body(format, &delivery.payload);
        let attempt = self
            .post(&delivery.url, &delivery.secret, &delivery.event_id, &body)
            .await;
        let now = OffsetDateTime::now_utc();
        let mut conn = self.connection().await?;
        if attempt.ok {
            let status = attempt.status.unwrap_or(200);
            webhooks::record_delivered(&mut conn, delivery.id, status, now).await?;
            tracing::info!(status, "webhook delivered");
            return Ok(Some(true));
        }
        let failed = delivery.attempts + 1;
        let retry_at = (failed < self.config.max_attempts).then(|| now + backoff(failed, jitter()));
        webhooks::record_failed(
            &mut conn,
            delivery.id,
            attempt.status,
            &attempt.detail,
            retry_at,
            now,
        )
        .await?;
        match retry_at {
            Some(at) => {
                tracing::warn!(detail = %attempt.detail, retry_at = %at, "webhook delivery failed; will retry");
                Ok(Some(false))
            }
            None => {
                tracing::warn!(detail = %attempt.detail, "webhook delivery failed for the last time; dead-lettered");
                Ok(None)
            }
        }
    }

    /// Sends a `webhook.test` event to subscription `id` now (not queued, not retried)
    /// and reports how the receiver answered.
    #[tracing::instrument(skip(self))]
    pub async fn test(&self, id: Uuid) -> Result<TestResult, WebhookError> {
        let mut conn = self.connection().await?;
        let subscription = webhooks::subscription(&mut conn, id)
            .await?
            .ok_or(WebhookError::NoSubscription(id))?;
        let secret = webhooks::signing_secret(&mut conn, id)
            .await?
            .ok_or(WebhookError::NoSubscription(id))?;
        // The listed URL may be masked (a Slack URL is a secret); post to the whole one.
        let url = webhooks::receiver_url(&mut conn, id)
            .await?
            .ok_or(WebhookError::NoSubscription(id))?;
        drop(conn);
        let now = OffsetDateTime::now_utc();
        let payload = json!({
            "type": event::TEST,
            "timestamp": now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
            "data": {"subscriptionId": id, "summary": "A test event from Assent"},
        });
        let format = Format::parse(&subscription.format).unwrap_or(Format::Standard);
        let body = self.body(format, &payload);
        let message_id = format!("msg_{}", Uuid::new_v4().simple());
        let attempt = self.post(&url, &secret, &message_id, &body).await;
        Ok(TestResult {
            ok: attempt.ok,
            status: attempt.status,
            detail: attempt.detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_answers_are_escaped_and_truncated() {
        assert_eq!(safe_text("ok"), "ok");
        assert_eq!(safe_text("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(safe_text("x\u{202e}y"), "x\\u{202e}y");
        // Every character the domain calls misleading, the invisible ones too.
        assert_eq!(
            safe_text("a\u{feff}b\u{2028}c\u{2060}d"),
            "a\\u{feff}b\\u{2028}c\\u{2060}d"
        );
        let long = "y".repeat(500);
        assert_eq!(safe_text(&long).chars().count(), BODY_KEEP_CHARS + 1);
    }

    #[test]
    fn links_point_at_the_set_on_the_review_page() {
        assert_eq!(
            review_link("https://a.example/", "s1"),
            "https://a.example/#change-set-s1"
        );
    }

    #[test]
    fn standard_bodies_keep_arguments_whole_and_summaries_on_one_line() {
        let content = format!("{}\nssh-ed25519 AAAA attacker@evil", "x".repeat(5000));
        let args = json!({"path": "/home/u/\u{202E}x", "content": content});
        let payload = json!({"type": "changeSet.created", "data": {
            "changeSetId": "s1",
            "summary": "Refund 5000 cents\nRefund 0 cents (confirmed)",
            "items": [{"index": 0, "args": args, "summary": "a\u{202E}b\nc", "status": "pending"}],
        }});
        let body = shaped_body(Format::Standard, &payload, Some("https://a.example"));
        assert_eq!(
            body["data"]["items"][0]["args"], args,
            "machines get them whole"
        );
        assert_eq!(body["data"]["items"][0]["summary"], "a\\u{202e}b⏎c");
        assert_eq!(
            body["data"]["summary"],
            "Refund 5000 cents⏎Refund 0 cents (confirmed)"
        );
        assert_eq!(
            body["data"]["reviewUrl"],
            "https://a.example/#change-set-s1"
        );
        assert_eq!(body["type"], "changeSet.created");
        let slack = shaped_body(Format::Slack, &payload, None);
        assert!(slack["blocks"].is_array());
    }

    #[test]
    fn jitter_stays_in_the_unit_interval() {
        assert!((0..100).map(|_| jitter()).all(|j| (0.0..1.0).contains(&j)));
    }
}
