//! The phone doors' sender (`assent notify`): every open item queued since a channel
//! was added is sent to it once — an ntfy notification with Approve, Reject and View
//! actions, or an email with the same links — and, once the item is decided anywhere,
//! followed by a short message naming who decided.
//!
//! Each message carries one-time answer links (`/api/answer/{token}` on the server's
//! public URL, see `assent_store::phone`) for the channel's person, the item's revision,
//! and until the agent stops waiting (`waitsUntil`); the message says until when, and
//! what happens then.
//!
//! Delivery: a post is claimed in the database before its call (a crash leaves a claim,
//! never a second message). A call refused before anything was sent (no connection, a
//! 4xx/5xx answer) is tried again with backoff ([`crate::backoff`]) up to
//! [`MAX_ATTEMPTS`]; a call that got no answer (a timeout after the request went out)
//! may have arrived, so it is recorded `unknown` and not sent again: one message too
//! few, never the same question twice. Each call is bounded by [`CALL_TIMEOUT`], and no
//! database transaction is open while a server answers.

use crate::WebhookError;
use assent_domain::{ChangeItem, ChangeSet, format_time, one_line};
use assent_store::phone::{self, AnswerLink, Channel, ChannelKind, LinkAction, Post, PostState};
use assent_store::{Store, change_sets, decisions, waits};
use serde_json::{Value, json};
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// How long one call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls refused before anything was sent, before a post is given up.
pub const MAX_ATTEMPTS: u32 = 6;
/// ntfy's largest message body (its default `message-size-limit`), in bytes.
pub const NTFY_MAX_MESSAGE_BYTES: usize = 4096;
/// The longest title sent (ntfy shows one line).
pub const NTFY_MAX_TITLE_CHARS: usize = 200;
/// How long a link works when the agent said nothing about its wait.
pub const DEFAULT_LINK_LIFETIME: time::Duration = time::Duration::hours(24);

/// What a call's failure means for the post.
#[derive(Debug)]
enum Failure {
    /// Nothing was delivered: try again.
    NotSent(String),
    /// It may have been delivered: never sent again.
    Unknown(String),
}

/// The sender over one store, with the public address its links point to.
pub struct PhonePoster {
    store: Store,
    public_url: String,
    http: reqwest::Client,
}

impl PhonePoster {
    /// A sender over `store` whose links point to `public_url` (`assent serve
    /// --public-url`).
    pub fn new(store: Store, public_url: &str) -> Result<Self, WebhookError> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        Ok(Self {
            store,
            public_url: public_url.trim_end_matches('/').to_owned(),
            http,
        })
    }

    /// Ticks every `interval` until `shutdown`; failures are logged and retried at the
    /// next tick.
    pub async fn run(self, interval: Duration, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            if let Err(error) = self.tick(OffsetDateTime::now_utc()).await {
                tracing::warn!(%error, "phone doors");
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = &mut shutdown => return,
            }
        }
    }

    /// One look: new items sent, due retries tried, decided items followed up. How many
    /// messages went out.
    pub async fn tick(&self, now: OffsetDateTime) -> Result<usize, WebhookError> {
        let mut conn = self.store.read_connection().await?;
        let channels = phone::channels(&mut conn).await?;
        if channels.is_empty() {
            return Ok(0);
        }
        let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::all()).await?;
        drop(conn);
        let mut sent = 0;
        for set in open.iter().rev() {
            let mut conn = self.store.read_connection().await?;
            let posted = phone::posts_of(&mut conn, set.id).await?;
            drop(conn);
            for (index, item) in set.items.iter().enumerate() {
                if !item.status.is_open() {
                    continue;
                }
                for channel in channels.iter().filter(|c| {
                    c.created_at <= set.created_at
                        && !posted
                            .iter()
                            .any(|p| p.channel_id == c.id && p.item_index == index)
                }) {
                    let mut conn = self.store.read_connection().await?;
                    if !phone::claim_post(&mut conn, &channel.id, set.id, index, now).await? {
                        continue;
                    }
                    drop(conn);
                    let post = Post {
                        channel_id: channel.id.clone(),
                        change_set_id: set.id,
                        item_index: index,
                        state: PostState::Claimed,
                        attempts: 0,
                        next_at: now,
                    };
                    sent += usize::from(self.send(channel, set, item, post, now).await?);
                }
            }
        }
        let mut conn = self.store.read_connection().await?;
        let retries = phone::posts_in(&mut conn, PostState::Retry).await?;
        drop(conn);
        for post in retries.into_iter().filter(|p| p.next_at <= now) {
            let Some(channel) = channels.iter().find(|c| c.id == post.channel_id) else {
                continue;
            };
            let mut conn = self.store.read_connection().await?;
            let set = change_sets::load(&mut conn, post.change_set_id).await?;
            drop(conn);
            match set {
                Some(set)
                    if set
                        .items
                        .get(post.item_index)
                        .is_some_and(|i| i.status.is_open()) =>
                {
                    let item = set.items[post.item_index].clone();
                    sent += usize::from(self.send(channel, &set, &item, post, now).await?);
                }
                _ => {
                    let mut conn = self.store.read_connection().await?;
                    let post = Post {
                        state: PostState::Failed,
                        ..post
                    };
                    phone::record_post(&mut conn, &post, Some("decided before it could be sent"))
                        .await?;
                }
            }
        }
        sent += self.follow_up(&channels, now).await?;
        Ok(sent)
    }

    /// Sends item `index` of `set` to `channel` with fresh links; records how it went.
    /// `true` when it went out.
    async fn send(
        &self,
        channel: &Channel,
        set: &ChangeSet,
        item: &ChangeItem,
        mut post: Post,
        now: OffsetDateTime,
    ) -> Result<bool, WebhookError> {
        let span = tracing::info_span!("phone_delivery", channel = %channel.id, set = %set.id, index = post.item_index);
        let _entered = span.enter();
        let mut conn = self.store.read_connection().await?;
        let wait = waits::of(&mut conn, &[set.id]).await?.get(&set.id).copied();
        let withdrawn = waits::withdrawn_after(&mut conn, set.id).await?.is_some();
        let secret = phone::channel_secret(&mut conn, &channel.id).await?;
        let expires_at = wait.unwrap_or(now + DEFAULT_LINK_LIFETIME);
        let mut urls = Vec::new();
        for action in [LinkAction::Approve, LinkAction::Reject] {
            let token = new_token();
            let link = AnswerLink {
                channel_id: channel.id.clone(),
                change_set_id: set.id,
                item_index: post.item_index,
                revision: item.revision,
                person: channel.person.clone(),
                action,
                expires_at,
                used_at: None,
            };
            phone::insert_link(&mut conn, &phone::token_hash(&token), &link, now).await?;
            urls.push(format!("{}/api/answer/{token}", self.public_url));
        }
        drop(conn);
        let message = Question {
            set,
            item,
            index: post.item_index,
            approve_url: &urls[0],
            reject_url: &urls[1],
            view_url: &crate::review_link(&self.public_url, &set.id.to_string()),
            waits_until: wait,
            expires_at,
            withdrawn,
            now,
        };
        post.attempts += 1;
        let result = match channel.kind {
            ChannelKind::Ntfy => {
                self.publish(
                    channel,
                    secret.as_deref(),
                    &ntfy_question(channel, &message),
                )
                .await
            }
            ChannelKind::Email => {
                let (subject, text, html) = email_question(&message);
                mail(channel, secret.as_deref(), &subject, text, html).await
            }
        };
        let mut conn = self.store.read_connection().await?;
        let (state, detail, sent) = match result {
            Ok(()) => (PostState::Sent, None, true),
            Err(Failure::Unknown(why)) => (PostState::Unknown, Some(why), false),
            Err(Failure::NotSent(why)) if post.attempts >= MAX_ATTEMPTS => {
                (PostState::Failed, Some(why), false)
            }
            Err(Failure::NotSent(why)) => {
                post.next_at = now + crate::backoff(i64::from(post.attempts), jitter());
                (PostState::Retry, Some(why), false)
            }
        };
        if let Some(why) = &detail {
            tracing::warn!(state = state.as_str(), error = %why, "phone message not sent");
        } else {
            tracing::info!("phone message sent");
        }
        post.state = state;
        phone::record_post(&mut conn, &post, detail.as_deref()).await?;
        Ok(sent)
    }

    /// The follow-up of each sent post whose item was decided: who decided, and what.
    async fn follow_up(
        &self,
        channels: &[Channel],
        now: OffsetDateTime,
    ) -> Result<usize, WebhookError> {
        let mut conn = self.store.read_connection().await?;
        let mut posts = phone::posts_in(&mut conn, PostState::Sent).await?;
        posts.extend(phone::posts_in(&mut conn, PostState::Unknown).await?);
        drop(conn);
        let mut sent = 0;
        for post in posts {
            let Some(channel) = channels.iter().find(|c| c.id == post.channel_id) else {
                continue;
            };
            let mut conn = self.store.read_connection().await?;
            let Some(set) = change_sets::load(&mut conn, post.change_set_id).await? else {
                continue;
            };
            let Some(item) = set.items.get(post.item_index) else {
                continue;
            };
            if item.status.is_open() {
                continue;
            }
            let decided = decisions::for_change_set(&mut conn, set.id).await?;
            let secret = phone::channel_secret(&mut conn, &channel.id).await?;
            drop(conn);
            let outcome = decided
                .iter()
                .rev()
                .find(|d| d.item_index == post.item_index)
                .map(|d| {
                    format!(
                        "{} by {} at {}",
                        d.verdict,
                        one_line(d.decided_by.as_deref().unwrap_or("someone")),
                        format_time(d.created_at)
                    )
                })
                .unwrap_or_else(|| format!("{:?} at {}", item.status, format_time(now)));
            let result = match channel.kind {
                ChannelKind::Ntfy => {
                    self.publish(
                        channel,
                        secret.as_deref(),
                        &ntfy_follow_up(channel, &set, item, post.item_index, &outcome),
                    )
                    .await
                }
                ChannelKind::Email => {
                    let subject = format!("Decided: {}", title(&set, item));
                    let text = format!(
                        "{outcome}\n{}\n\nThe links of the earlier message answer nothing now.\n",
                        one_line(&item.human_summary)
                    );
                    let html = format!(
                        "<p>{}</p><p>{}</p><p>The links of the earlier message answer nothing now.</p>",
                        escape_html(&outcome),
                        escape_html(&one_line(&item.human_summary))
                    );
                    mail(channel, secret.as_deref(), &subject, text, html).await
                }
            };
            // A follow-up is told once: a failed one is logged, not retried (the
            // question's links already answer "decided elsewhere").
            if let Err(error) = &result {
                tracing::warn!(?error, "phone follow-up not sent");
            } else {
                sent += 1;
            }
            let mut conn = self.store.read_connection().await?;
            let post = Post {
                state: PostState::Followed,
                ..post
            };
            phone::record_post(&mut conn, &post, None).await?;
        }
        Ok(sent)
    }

    /// Publishes `body` (ntfy's JSON form) to the root of `channel`'s server.
    async fn publish(
        &self,
        channel: &Channel,
        token: Option<&str>,
        body: &Value,
    ) -> Result<(), Failure> {
        let (root, _) = ntfy_root_and_topic(&channel.address)
            .ok_or_else(|| Failure::NotSent("not an ntfy topic URL".to_owned()))?;
        let mut request = self
            .http
            .post(root)
            .header(
                "X-Sequence-ID",
                body["sequence_id"].as_str().unwrap_or_default(),
            )
            .json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(Failure::NotSent(format!(
                "the ntfy server answered {}",
                response.status()
            ))),
            Err(error) if error.is_connect() || error.is_builder() => Err(Failure::NotSent(
                format!("cannot reach the ntfy server: {error}"),
            )),
            Err(error) => Err(Failure::Unknown(format!(
                "no answer from the ntfy server (it may have published): {error}"
            ))),
        }
    }
}

/// What a question message says, in any door.
struct Question<'a> {
    set: &'a ChangeSet,
    item: &'a ChangeItem,
    index: usize,
    approve_url: &'a str,
    reject_url: &'a str,
    view_url: &'a str,
    /// When the agent stops waiting, if it said.
    waits_until: Option<OffsetDateTime>,
    /// When the links stop working.
    expires_at: OffsetDateTime,
    /// Whether the call goes back to the agent's own prompt then.
    withdrawn: bool,
    /// When it is sent.
    now: OffsetDateTime,
}

impl Question<'_> {
    /// The line saying until when the agent waits and what happens then.
    fn waits(&self) -> String {
        match (self.waits_until, self.withdrawn) {
            (Some(until), true) => format!(
                "The agent waits until {}; then the call goes back to the agent's own prompt and these buttons answer nothing.",
                format_time(until)
            ),
            (Some(until), false) => format!(
                "The agent waits until {}; then it stops waiting (its own timeout answer applies) and these buttons answer nothing.",
                format_time(until)
            ),
            (None, _) => format!("The buttons work until {}.", format_time(self.expires_at)),
        }
    }

    /// The arguments, as shown.
    fn arguments(&self) -> String {
        let args = serde_json::to_string_pretty(&self.item.args)
            .unwrap_or_else(|_| assent_domain::canonical_json(&self.item.args));
        format!("{}\n{args}", self.item.human_summary)
    }
}

/// Checks an ntfy topic URL (`assent notify ntfy add`): `https://`, or `http://` to a
/// loopback host (as webhooks), naming a topic of letters, digits, `-` and `_`.
pub fn validate_ntfy_url(text: &str) -> Result<String, WebhookError> {
    let url = crate::validate_url(text, false)?;
    if url.query().is_some() {
        return Err(WebhookError::InvalidChannel(
            "an ntfy topic URL takes no query: give https://SERVER/TOPIC".to_owned(),
        ));
    }
    ntfy_root_and_topic(url.as_str()).ok_or_else(|| {
        WebhookError::InvalidChannel(
            "an ntfy topic URL ends in its topic, letters, digits, - and _ (at most 64): https://ntfy.sh/my-topic".to_owned(),
        )
    })?;
    Ok(url.to_string())
}

/// Checks an SMTP server URL (`--smtp`, `ASSENT_SMTP_URL`): `smtps://` (TLS),
/// `smtp://…?tls=required` (STARTTLS), or plain `smtp://` to a loopback host only (as
/// webhooks take `http://` only there). Credentials may be in it (it is stored as a
/// secret, never listed).
pub fn validate_smtp_url(text: &str) -> Result<String, WebhookError> {
    let invalid =
        |reason: &str| WebhookError::InvalidChannel(format!("invalid SMTP URL: {reason}"));
    let url = reqwest::Url::parse(text.trim()).map_err(|e| invalid(&e.to_string()))?;
    let Some(host) = url.host_str() else {
        return Err(invalid("it names no host"));
    };
    let starttls = url
        .query_pairs()
        .any(|(key, value)| key == "tls" && value == "required");
    match url.scheme() {
        "smtps" => {}
        "smtp" if starttls || crate::target::is_loopback(host) => {}
        "smtp" => {
            return Err(invalid(
                "plain smtp:// only to loopback (127.0.0.1, ::1, localhost); use smtps:// (TLS) or smtp://…?tls=required (STARTTLS)",
            ));
        }
        _ => return Err(invalid("expected smtps:// or smtp://")),
    }
    Ok(url.to_string())
}

/// Checks an email address.
pub fn validate_email(text: &str) -> Result<String, WebhookError> {
    text.trim()
        .parse::<lettre::Address>()
        .map(|address| address.to_string())
        .map_err(|e| {
            WebhookError::InvalidChannel(format!("invalid email address {:?}: {e}", text.trim()))
        })
}

/// A topic URL's server root (where JSON is published) and topic.
pub fn ntfy_root_and_topic(topic_url: &str) -> Option<(String, String)> {
    let url = reqwest::Url::parse(topic_url).ok()?;
    let topic = url.path_segments()?.next_back()?.to_owned();
    let valid = !topic.is_empty()
        && topic.len() <= 64
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return None;
    }
    let mut root = url.clone();
    root.set_query(None);
    root.set_fragment(None);
    let path = url.path();
    root.set_path(&path[..path.len() - topic.len()]);
    Some((root.to_string(), topic))
}

/// `text` cut to at most `max` bytes on a character boundary, saying so when cut.
pub fn cut_saying(text: &str, max: usize, more: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let note = format!("… (cut: {} of {} bytes shown; {more})", max, text.len());
    let keep = max.saturating_sub(note.len());
    let mut end = keep.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &text[..end])
}

fn sequence_id(set: Uuid, index: usize) -> String {
    format!("assent-{}-{index}", set.simple())
}

fn title(set: &ChangeSet, item: &ChangeItem) -> String {
    let title: String = format!("{}: {}", one_line(&set.agent_id), one_line(&item.tool_name))
        .chars()
        .take(NTFY_MAX_TITLE_CHARS)
        .collect();
    title
}

/// The ntfy publish of a question: title (agent and tool), the arguments cut to ntfy's
/// limit with the cut said, the wait, priority, and the Approve / Reject / View actions.
fn ntfy_question(channel: &Channel, q: &Question<'_>) -> Value {
    let (_, topic) = ntfy_root_and_topic(&channel.address).unwrap_or_default();
    let waits = q.waits();
    let room = NTFY_MAX_MESSAGE_BYTES - waits.len() - 2;
    let message = format!(
        "{}\n\n{waits}",
        cut_saying(&q.arguments(), room, "View shows all")
    );
    // Urgent when the agent waits less than two minutes more.
    let priority = match q.waits_until {
        Some(until) if until - q.now < time::Duration::minutes(2) => 5,
        _ => 4,
    };
    json!({
        "topic": topic,
        "sequence_id": sequence_id(q.set.id, q.index),
        "title": title(q.set, q.item),
        "message": message,
        "priority": priority,
        "tags": ["question"],
        "click": q.view_url,
        "actions": [
            {"action": "http", "label": "Approve", "url": q.approve_url, "method": "POST", "clear": true},
            {"action": "http", "label": "Reject", "url": q.reject_url, "method": "POST", "clear": true},
            {"action": "view", "label": "View", "url": q.view_url},
        ],
    })
}

/// The ntfy publish that replaces a question once its item was decided (same sequence
/// id; an ntfy server before 2.16 shows it as a new notification).
fn ntfy_follow_up(
    channel: &Channel,
    set: &ChangeSet,
    item: &ChangeItem,
    index: usize,
    outcome: &str,
) -> Value {
    let (_, topic) = ntfy_root_and_topic(&channel.address).unwrap_or_default();
    json!({
        "topic": topic,
        "sequence_id": sequence_id(set.id, index),
        "title": title(set, item),
        "message": cut_saying(&format!("{outcome}\n{}", one_line(&item.human_summary)), NTFY_MAX_MESSAGE_BYTES, "the page shows all"),
        "priority": 2,
        "tags": ["white_check_mark"],
    })
}

/// How an email channel's secret is stored: the SMTP URL and the sender address.
pub fn email_secret(smtp_url: &str, from: &str) -> String {
    json!({"smtp": smtp_url, "from": from}).to_string()
}

/// The subject, plain text and HTML of a question's email: the arguments, until when
/// the agent waits, and the Approve / Reject links (each opens a page with one more
/// button, so a mail scanner following links decides nothing) and View.
fn email_question(q: &Question<'_>) -> (String, String, String) {
    let subject = format!("Waiting for you: {}", title(q.set, q.item));
    let arguments = cut_saying(&q.arguments(), 64 * 1024, "View shows all");
    let waits = q.waits();
    let text = format!(
        "{arguments}\n\n{waits}\n\nApprove: {}\nReject: {}\nView: {}\n\nEach link opens a page with one more button; it works once.\n",
        q.approve_url, q.reject_url, q.view_url
    );
    let html = format!(
        "<p><b>{}</b></p><pre style=\"white-space:pre-wrap\">{}</pre><p>{}</p>\
         <p><a href=\"{}\">Approve</a> &middot; <a href=\"{}\">Reject</a> &middot; <a href=\"{}\">View</a></p>\
         <p>Each link opens a page with one more button; it works once.</p>",
        escape_html(&title(q.set, q.item)),
        escape_html(&arguments),
        escape_html(&waits),
        escape_html(q.approve_url),
        escape_html(q.reject_url),
        escape_html(q.view_url),
    );
    (subject, text, html)
}

/// Sends one email (plain text and HTML alternatives) to `channel`'s address through
/// the SMTP server of its secret.
async fn mail(
    channel: &Channel,
    secret: Option<&str>,
    subject: &str,
    text: String,
    html: String,
) -> Result<(), Failure> {
    use lettre::message::MultiPart;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
    let secret: Value = secret
        .and_then(|s| serde_json::from_str(s).ok())
        .ok_or_else(|| Failure::NotSent("the channel has no SMTP settings".to_owned()))?;
    let smtp = secret["smtp"].as_str().unwrap_or_default();
    let from = secret["from"].as_str().unwrap_or(&channel.address);
    let bad = |what: &str, e: &dyn std::fmt::Display| Failure::NotSent(format!("{what}: {e}"));
    let message = Message::builder()
        .from(from.parse().map_err(|e| bad("bad sender address", &e))?)
        .to(channel
            .address
            .parse()
            .map_err(|e| bad("bad address", &e))?)
        .subject(subject)
        .multipart(MultiPart::alternative_plain_html(text, html))
        .map_err(|e| bad("cannot build the message", &e))?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp)
        .map_err(|e| bad("bad SMTP URL", &e))?
        .timeout(Some(CALL_TIMEOUT))
        .build();
    // Reached first, so that a server down or refusing is known as "not sent".
    match transport.test_connection().await {
        Ok(true) => {}
        Ok(false) => {
            return Err(Failure::NotSent(
                "the SMTP server did not answer NOOP".to_owned(),
            ));
        }
        Err(error) => {
            return Err(Failure::NotSent(format!(
                "cannot reach the SMTP server: {error}"
            )));
        }
    }
    match transport.send(message).await {
        Ok(_) => Ok(()),
        // The server refused it, or nothing was said to it yet: not delivered.
        Err(error) if error.is_transient() || error.is_permanent() || error.is_client() => Err(
            Failure::NotSent(format!("the SMTP server refused it: {error}")),
        ),
        Err(error) if error.is_tls() => Err(Failure::NotSent(format!("TLS failed: {error}"))),
        // Lost mid-conversation: it may have been accepted.
        Err(error) => Err(Failure::Unknown(format!(
            "no answer from the SMTP server (it may have accepted it): {error}"
        ))),
    }
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A new answer link's token: 32 random bytes (two v4 UUIDs, 244 random bits from the
/// operating system's generator) as 64 hex digits; the store keeps only its hash.
pub fn new_token() -> String {
    format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

/// Jitter in `[0, 1)` from the operating system's generator (through a v4 UUID).
fn jitter() -> f64 {
    let bytes = Uuid::new_v4().into_bytes();
    f64::from(u16::from_le_bytes([bytes[0], bytes[1]])) / 65_536.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_url_is_its_server_root_and_topic() {
        assert_eq!(
            ntfy_root_and_topic("https://ntfy.sh/my-topic"),
            Some(("https://ntfy.sh/".to_owned(), "my-topic".to_owned()))
        );
        assert_eq!(
            ntfy_root_and_topic("http://127.0.0.1:8080/push/alerts_1?x=1"),
            Some((
                "http://127.0.0.1:8080/push/".to_owned(),
                "alerts_1".to_owned()
            ))
        );
        assert_eq!(ntfy_root_and_topic("https://ntfy.sh/"), None);
        assert_eq!(ntfy_root_and_topic("https://ntfy.sh/a b"), None);
    }

    /// Issue 56: a call longer than ntfy takes is cut to 4096 bytes, saying so, and
    /// still says until when the agent waits.
    #[test]
    fn a_long_call_is_cut_to_ntfys_limit_and_says_so() {
        let set = ChangeSet::new(assent_domain::NewChangeSet {
            id: Uuid::from_u128(5),
            agent_id: "coder".into(),
            target: assent_domain::Target::new("workspace", "/w"),
            thread_id: "th".into(),
            run_key: "k".into(),
            items: vec![ChangeItem::new(
                "Write",
                json!({"file_path": "/w/big.txt", "content": "é".repeat(6000)}),
                "Write /w/big.txt",
            )],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        let channel = Channel {
            id: "n1".into(),
            kind: ChannelKind::Ntfy,
            address: "https://ntfy.sh/alerts".into(),
            person: "alice".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        };
        let until = OffsetDateTime::UNIX_EPOCH + time::Duration::minutes(10);
        let question = Question {
            set: &set,
            item: &set.items[0],
            index: 0,
            approve_url: "https://a.example/api/answer/1",
            reject_url: "https://a.example/api/answer/2",
            view_url: "https://a.example/#change-set-x",
            waits_until: Some(until),
            expires_at: until,
            withdrawn: true,
            now: OffsetDateTime::UNIX_EPOCH,
        };
        let body = ntfy_question(&channel, &question);
        let message = body["message"].as_str().expect("a message");
        assert!(message.len() <= NTFY_MAX_MESSAGE_BYTES, "{}", message.len());
        assert!(message.contains("(cut: "), "{message}");
        assert!(message.contains("View shows all"));
        assert!(
            message
                .ends_with("goes back to the agent's own prompt and these buttons answer nothing.")
        );
        assert_eq!(body["topic"], "alerts");
        assert_eq!(body["title"], "coder: Write");
        assert_eq!(body["priority"], 4);
        let labels: Vec<&str> = body["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .filter_map(|a| a["label"].as_str())
            .collect();
        assert_eq!(labels, ["Approve", "Reject", "View"]);
    }

    #[test]
    fn tokens_are_long_and_random() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn a_long_text_is_cut_to_the_limit_and_says_so() {
        let text = "é".repeat(5000);
        let cut = cut_saying(&text, 4096, "View shows all");
        assert!(cut.len() <= 4096, "{}", cut.len());
        assert!(cut.ends_with("(cut: 4096 of 10000 bytes shown; View shows all)"));
        assert_eq!(cut_saying("short", 4096, "x"), "short");
    }
}
