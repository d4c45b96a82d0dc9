//! The Slack app: approve and reject with buttons. Three parts, each usable alone:
//!
//! - [`verify_slack_signature`] (pure, the clock an argument): Slack's `v0` request
//!   signature, HMAC-SHA256 of `v0:{timestamp}:{raw body}`, compared in constant time,
//!   with timestamps more than [`SLACK_MAX_SKEW_SECONDS`] off refused.
//! - [`set_message`] (pure): a change set as Block Kit, within Block Kit's limits (50
//!   blocks, 3,000 characters a section, 25 elements an actions block), each open item
//!   with Approve, Reject and (with a public URL) Open, each decided item with who
//!   decided and how its run stands.
//! - [`SlackApi`] (the Web API, every call bounded by a timeout) and [`SlackPoster`],
//!   which follows the change feed and posts each queued set once (`chat.postMessage`)
//!   and rewrites its message whenever what it says changes (`chat.update`), whoever
//!   decided, wherever. No transaction is held while Slack is awaited.

use crate::WebhookError;
use assent_domain::{ChangeDecision, ChangeSet, OffsetDateTime, Verdict, head_and_tail, one_line};
use assent_store::approvals::{self, Quorum};
use assent_store::jobs::{self, Job};
use assent_store::slack::{self, SlackSecrets, SlackSettings};
use assent_store::{Store, change_feed, change_sets, decisions};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;
use uuid::Uuid;

/// Requests whose timestamp is further than this from the clock are refused.
pub const SLACK_MAX_SKEW_SECONDS: i64 = 300;

/// Slack's Web API, unless the connection names another (GovSlack, a test's fake).
pub const DEFAULT_SLACK_API_URL: &str = "https://slack.com/api/";

/// How long one Web API call may take.
pub const SLACK_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Block Kit's limits, kept by [`set_message`].
pub const MAX_BLOCKS: usize = 50;
/// Characters of one section's text.
pub const MAX_SECTION_CHARS: usize = 3_000;
/// Elements of one actions block.
pub const MAX_ACTIONS: usize = 25;

/// Items shown with their own blocks (two each, under a header, with one closing
/// block for the rest): 1 + 2 × 24 + 1 = 50.
const MAX_ITEMS_SHOWN: usize = 24;
/// Arguments listed per item, and characters of each value (head and tail kept).
const MAX_ARGS_SHOWN: usize = 10;
const VALUE_CHARS: usize = 150;

/// The action ids of the buttons, and the callback id of the reason modal.
pub const APPROVE: &str = "approve";
/// See [`APPROVE`]: approve, and run the same command (or the same file's call) of
/// the coding agent's session unasked from now on (issue 53). The server's reader of
/// clicks names it too (a test there checks both agree).
const APPROVE_SESSION: &str = "approve_session";
/// See [`APPROVE`].
pub const REJECT: &str = "reject";
/// See [`APPROVE`].
pub const OPEN: &str = "open";
/// See [`APPROVE`].
pub const REJECT_VIEW: &str = "reject_reason";

/// Checks a request's `X-Slack-Signature` (`v0=` and hex) against its
/// `X-Slack-Request-Timestamp` and raw body with the app's signing secret, before
/// anything of the body is read. The comparison is constant-time (`Mac::verify_slice`).
pub fn verify_slack_signature(
    signing_secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: OffsetDateTime,
) -> Result<(), WebhookError> {
    let refused = |why: String| Err(WebhookError::SlackRequest(why));
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return refused(
            "no X-Slack-Request-Timestamp or X-Slack-Signature header: not signed by Slack"
                .to_owned(),
        );
    };
    let Ok(seconds) = timestamp.trim().parse::<i64>() else {
        return refused(format!(
            "the timestamp {:?} is not a number of seconds",
            one_line(timestamp)
        ));
    };
    let skew = now.unix_timestamp().saturating_sub(seconds);
    if skew.abs() > SLACK_MAX_SKEW_SECONDS {
        return refused(format!(
            "the timestamp is {skew} s from this server's clock (more than {SLACK_MAX_SKEW_SECONDS} s): refused as a possible replay"
        ));
    }
    let Some(expected) = signature.strip_prefix("v0=").and_then(hex_bytes) else {
        return refused("the signature is not v0= and hex".to_owned());
    };
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .map_err(|e| WebhookError::Client(format!("cannot key HMAC-SHA256: {e}")))?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac.verify_slice(&expected)
        .or_else(|_| refused("the signature does not match this app's signing secret".to_owned()))
}

/// `v0=` and the hex HMAC Slack would send for `body` at `timestamp`: for tests and
/// fakes of Slack.
pub fn slack_signature(signing_secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!(
        "v0={}",
        assent_domain::lower_hex(&mac.finalize().into_bytes())
    )
}

/// The digest an accepted payload is remembered by, so that the same request sent again
/// is refused: the SHA-256 of its signature's MAC bytes, not of the header's text, since
/// the same MAC spelled in other hex (`AB` for `ab`) verifies as well and is the same
/// request. A header that is not `v0=` and hex (refused by
/// [`verify_slack_signature`] before this is asked) is digested as its text.
pub fn payload_digest(signature: &str) -> String {
    match signature.strip_prefix("v0=").and_then(hex_bytes) {
        Some(mac) => assent_domain::lower_hex(&Sha256::digest(&mac)),
        None => assent_domain::lower_hex(&Sha256::digest(signature.as_bytes())),
    }
}

fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok())
        .collect()
}

/// A button's value: the item and the revision it was shown at.
pub fn button_value(set: Uuid, index: usize, revision: u32) -> String {
    format!("{set}:{index}:{revision}")
}

/// The item and revision a button's value names; `None` for a value no message of
/// ours carries.
pub fn parse_button_value(value: &str) -> Option<(Uuid, usize, u32)> {
    let mut parts = value.split(':');
    let set = Uuid::parse_str(parts.next()?).ok()?;
    let index = parts.next()?.parse().ok()?;
    let revision = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((set, index, revision))
}

/// Agent text for mrkdwn: on one line, misleading characters escaped, and `&`, `<`,
/// `>` escaped as Slack asks, so no value can mention `@channel` or hide a link.
fn text(value: &str) -> String {
    one_line(value)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A JSON value as a person reads it: strings bare, the rest as JSON; cut with head
/// and tail kept.
fn value_text(value: &Value) -> String {
    text(&head_and_tail(&whole_text(value), VALUE_CHARS))
}

/// A JSON value whole, as [`value_text`] shows it before cutting.
fn whole_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How many characters of `value` [`value_text`] leaves out: all but the head and
/// tail `head_and_tail` keeps around its marker (sized, as there, for the count of
/// the whole).
fn hidden_chars(value: &Value) -> usize {
    let total = whole_text(value).chars().count();
    if total <= VALUE_CHARS {
        return 0;
    }
    let marker = format!(" …[{total} chars cut]… ").chars().count();
    total - VALUE_CHARS.saturating_sub(marker).max(2)
}

/// Where the page shows set `set`.
fn page_link(public_url: &str, set: Uuid) -> String {
    format!("{}/#change-set-{set}", public_url.trim_end_matches('/'))
}

/// What a message says about a set, besides the set: each item's last decision, the
/// quorum state, the jobs.
pub struct SetState<'a> {
    /// The set's decisions, oldest first.
    pub decisions: &'a [ChangeDecision],
    /// Its quorum state.
    pub quorum: &'a Quorum,
    /// Its jobs.
    pub jobs: &'a [Job],
    /// The page's public address, for Open and for what a message cannot hold.
    pub public_url: Option<&'a str>,
}

/// Change set `set` as a Slack message: `{"text", "blocks"}`, within Block Kit's
/// limits. Open items carry Approve, Reject and (with a public URL) Open; decided ones
/// say who decided and how their run stands.
pub fn set_message(set: &ChangeSet, state: &SetState<'_>) -> Value {
    let open = set
        .items
        .iter()
        .filter(|item| item.status.is_open())
        .count();
    // Once nothing is open, nobody waits: the message says so (issue 53, point 18).
    let (fallback, header) = if open == 0 {
        (
            format!(
                "{}: every item decided ({} item(s))",
                one_line(&set.agent_id),
                set.items.len()
            ),
            format!(
                "*{}* on `{}`: every item decided ({} item(s), set `{}`)",
                text(&set.agent_id),
                text(&set.target().to_string()),
                set.items.len(),
                &set.id.simple().to_string()[..8]
            ),
        )
    } else {
        (
            format!(
                "{} asks: {} of {} item(s) wait for review",
                one_line(&set.agent_id),
                open,
                set.items.len()
            ),
            format!(
                "*{}* waits for a person on `{}` ({} item(s), set `{}`)",
                text(&set.agent_id),
                text(&set.target().to_string()),
                set.items.len(),
                &set.id.simple().to_string()[..8]
            ),
        )
    };
    let mut blocks = vec![section(&header)];
    for (index, item) in set.items.iter().enumerate().take(MAX_ITEMS_SHOWN) {
        blocks.push(section(&item_text(set, index, state)));
        let held = state
            .jobs
            .iter()
            .any(|job| job.item_index == index && job.scheduled());
        if item.status.is_open() && !held {
            let mut buttons = vec![
                json!({"type": "button", "action_id": APPROVE, "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": button_value(set.id, index, item.revision)}),
                json!({"type": "button", "action_id": REJECT, "style": "danger",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": button_value(set.id, index, item.revision)}),
            ];
            if from_a_hook_session(set) {
                buttons.insert(
                    1,
                    json!({"type": "button", "action_id": APPROVE_SESSION,
                    "text": {"type": "plain_text", "text": "Approve for this session"},
                    "value": button_value(set.id, index, item.revision)}),
                );
            }
            if let Some(public_url) = state.public_url {
                buttons.push(json!({"type": "button", "action_id": OPEN,
                    "text": {"type": "plain_text", "text": "Open"},
                    "url": page_link(public_url, set.id)}));
            }
            blocks.push(
                json!({"type": "actions", "block_id": format!("item-{index}"),
                "elements": buttons}),
            );
        }
    }
    if set.items.len() > MAX_ITEMS_SHOWN {
        blocks.push(section(&format!(
            "… and {} more item(s): {}",
            set.items.len() - MAX_ITEMS_SHOWN,
            whole_elsewhere(set.id, None, state.public_url)
        )));
    }
    json!({"text": fallback, "blocks": blocks})
}

/// Whether `set` is a coding agent's hook call that named its session, so "approve
/// for this session" can answer it: the form `assent_confirm::session_of` reads
/// (that crate builds on this one; a server test checks both agree).
fn from_a_hook_session(set: &ChangeSet) -> bool {
    set.target_kind == "workspace"
        && set
            .thread_id
            .strip_prefix("hook-session:")
            .is_some_and(|session| !session.is_empty())
}

fn section(mrkdwn: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}})
}

/// Where to see everything: the page when it is public, else `assent show`.
fn whole_elsewhere(set: Uuid, index: Option<usize>, public_url: Option<&str>) -> String {
    match public_url {
        Some(public_url) => format!("<{}|open the page>", page_link(public_url, set)),
        None => match index {
            Some(index) => format!("`assent show {set} {index}`"),
            None => format!("`assent show {set}`"),
        },
    }
}

/// One item's section: tool, summary, arguments, before, then its state.
fn item_text(set: &ChangeSet, index: usize, state: &SetState<'_>) -> String {
    let item = &set.items[index];
    let head = format!(
        "*[{index}] `{}`* {}",
        text(&item.tool_name),
        text(&head_and_tail(&item.human_summary, 300))
    );
    let mut lines = vec![head.clone()];
    let mut cut = false;
    // Characters of the arguments not shown (issue 53: a message says how much of
    // what runs a person has not seen).
    let mut hidden = 0;
    match &item.args {
        Value::Object(map) => {
            for (key, arg) in map.iter().take(MAX_ARGS_SHOWN) {
                let whole = match arg {
                    Value::String(s) => s.chars().count(),
                    other => other.to_string().chars().count(),
                };
                cut |= whole > VALUE_CHARS;
                hidden += hidden_chars(arg);
                lines.push(format!(
                    "• {}: {}",
                    text(&head_and_tail(key, 40)),
                    value_text(arg)
                ));
            }
            if map.len() > MAX_ARGS_SHOWN {
                cut = true;
                hidden += map
                    .iter()
                    .skip(MAX_ARGS_SHOWN)
                    .map(|(key, arg)| key.chars().count() + whole_text(arg).chars().count())
                    .sum::<usize>();
                lines.push(format!(
                    "• … {} more argument(s)",
                    map.len() - MAX_ARGS_SHOWN
                ));
            }
        }
        other => lines.push(format!("• {}", value_text(other))),
    }
    if let Some(before) = &item.before {
        // A coding agent's file call stores the diff it makes, not a value it replaces.
        let label = if set.target_kind == jobs::AGENT_RUNS_KIND {
            "diff"
        } else {
            "before"
        };
        lines.push(format!("{label}: {}", value_text(before)));
    }
    if cut {
        lines.push(format!(
            "_cut to fit ({hidden} characters of the arguments not shown); every argument whole:_ {}",
            whole_elsewhere(set.id, Some(index), state.public_url)
        ));
    }
    lines.push(item_state(set, index, state));
    let joined = lines.join("\n");
    if joined.chars().count() <= MAX_SECTION_CHARS {
        return joined;
    }
    format!(
        "{head}\n_too long to show here:_ {}\n{}",
        whole_elsewhere(set.id, Some(index), state.public_url),
        item_state(set, index, state)
    )
}

/// How item `index` stands: decided (by whom, its run), held, approvals so far, or
/// waiting; a refreshed stale item says so.
fn item_state(set: &ChangeSet, index: usize, state: &SetState<'_>) -> String {
    let item = &set.items[index];
    let job = state.jobs.iter().find(|job| job.item_index == index);
    // A coding agent's call is run by the agent: how it stands, in the words of a call.
    let run = job
        .map(|job| match job.agent_outcome(None) {
            Some(outcome) => format!(" · {}", text(&head_and_tail(&outcome, 300))),
            None => format!(" · run: {}", job.status_name()),
        })
        .unwrap_or_default();
    if !item.status.is_open() {
        let last = state.decisions.iter().rev().find(|d| d.item_index == index);
        let by = last
            .and_then(|d| d.decided_by.as_deref())
            .map(|by| format!(" by {}", text(by)))
            .unwrap_or_default();
        let reason = last
            .filter(|d| d.verdict == Verdict::Rejected)
            .and_then(|d| d.reason.as_deref())
            .map(|reason| format!(": “{}”", text(&head_and_tail(reason, 300))))
            .unwrap_or_default();
        let mark = match item.status.as_str() {
            "confirmed" => "✅",
            "rejected" => "❌",
            _ => "•",
        };
        return format!("{mark} *{}*{by}{reason}{run}", item.status.as_str());
    }
    if let Some(job) = job.filter(|job| job.scheduled()) {
        return format!(
            "⏳ confirmed; runs when its hold ends ({})",
            assent_store::timefmt::format(job.due_at)
        );
    }
    let mut said = match item.status.as_str() {
        "deferred" => "⏸ deferred".to_owned(),
        _ => "⌛ waiting".to_owned(),
    };
    if let Some((_, needed, revision)) = state.quorum.items.iter().find(|(i, _, _)| *i == index) {
        let by: Vec<String> = revision.approvals.iter().map(|a| text(&a.by)).collect();
        said.push_str(&format!(
            " · approvals {} of {needed}{}",
            revision.people(),
            if by.is_empty() {
                String::new()
            } else {
                format!(" (by {})", by.join(", "))
            }
        ));
    }
    if let Some(detail) = &item.stale_detail {
        said.push_str(&format!(
            " · refreshed: the target changed ({}); decide on revision {}",
            text(&head_and_tail(detail, 200)),
            item.revision
        ));
    }
    said
}

/// The modal that asks a rejecting person for a reason; `private_metadata` carries
/// the button's value and the channel to answer in.
pub fn reject_view(button_value: &str, channel: &str) -> Value {
    json!({
        "type": "modal",
        "callback_id": REJECT_VIEW,
        "private_metadata": format!("{button_value} {channel}"),
        "title": {"type": "plain_text", "text": "Reject"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [{
            "type": "input", "block_id": "reason", "optional": true,
            "label": {"type": "plain_text", "text": "Why? The agent reads it."},
            "element": {"type": "plain_text_input", "action_id": "reason", "multiline": true,
                "max_length": 3000}
        }]
    })
}

/// Slack's Web API as the app's bot, each call bounded by [`SLACK_CALL_TIMEOUT`].
#[derive(Clone)]
pub struct SlackApi {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for SlackApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl SlackApi {
    /// The API at `base` (ending in `/`) with the bot token `token`.
    pub fn new(base: &str, token: &str) -> Result<Self, WebhookError> {
        let http = reqwest::Client::builder()
            .timeout(SLACK_CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        let base = if base.ends_with('/') {
            base.to_owned()
        } else {
            format!("{base}/")
        };
        Ok(Self {
            http,
            base,
            token: token.to_owned(),
        })
    }

    /// The API of the connected app.
    pub fn connected(
        settings: &SlackSettings,
        secrets: &SlackSecrets,
    ) -> Result<Self, WebhookError> {
        Self::new(&settings.api_url, &secrets.bot_token)
    }

    /// Calls `method` with `body`; Slack's answer when it says `ok`.
    #[tracing::instrument(skip(self, body), fields(base = %self.base))]
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, WebhookError> {
        let failed = |error: String| WebhookError::SlackApi {
            method: method.to_owned(),
            error,
        };
        let response = self
            .http
            .post(format!("{}{method}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .map_err(|e| failed(format!("HTTP {status}, not JSON: {}", e.without_url())))?;
        if answer["ok"] != Value::Bool(true) {
            let error = answer["error"].as_str().unwrap_or("no error given");
            return Err(failed(format!("HTTP {status}: {}", one_line(error))));
        }
        Ok(answer)
    }

    /// Posts `message` (`{"text", "blocks"}`) to `channel`; its `ts`.
    pub async fn post_message(
        &self,
        channel: &str,
        message: &Value,
    ) -> Result<String, WebhookError> {
        let mut body = message.clone();
        body["channel"] = json!(channel);
        let answer = self.call("chat.postMessage", &body).await?;
        answer["ts"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| WebhookError::SlackApi {
                method: "chat.postMessage".to_owned(),
                error: "no ts in the answer".to_owned(),
            })
    }

    /// Rewrites message `ts` of `channel` to `message`.
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        message: &Value,
    ) -> Result<(), WebhookError> {
        let mut body = message.clone();
        body["channel"] = json!(channel);
        body["ts"] = json!(ts);
        self.call("chat.update", &body).await.map(|_| ())
    }

    /// Opens `view` for the person whose click gave `trigger_id`.
    pub async fn open_view(&self, trigger_id: &str, view: &Value) -> Result<(), WebhookError> {
        self.call(
            "views.open",
            &json!({"trigger_id": trigger_id, "view": view}),
        )
        .await
        .map(|_| ())
    }

    /// Says `said` to `user` alone in `channel`.
    pub async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        said: &str,
    ) -> Result<(), WebhookError> {
        self.call(
            "chat.postEphemeral",
            &json!({"channel": channel, "user": user, "text": said}),
        )
        .await
        .map(|_| ())
    }
}

/// Posts each set queued since the app was connected once, and rewrites its message
/// whenever what it says changes, following the change feed (every process's writes).
pub struct SlackPoster {
    store: Store,
    /// The feed position read up to; `None` before the first sweep.
    position: Option<i64>,
}

impl SlackPoster {
    /// A poster over `store`.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            position: None,
        }
    }

    /// Ticks every `interval` until `shutdown`; failures are logged and retried at the
    /// next tick.
    pub async fn run(
        mut self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            if let Err(error) = self.tick(OffsetDateTime::now_utc()).await {
                tracing::warn!(%error, "Slack poster");
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = &mut shutdown => return,
            }
        }
    }

    /// A pooled connection for reads and single statements (no transaction: Slack is
    /// called between them).
    async fn connection(
        &self,
    ) -> Result<impl std::ops::DerefMut<Target = assent_store::Connection> + use<>, WebhookError>
    {
        Ok(self.store.read_connection().await?)
    }

    /// One look: the sets written since the last (on the first, every open set), each
    /// posted or rewritten as needed. How many messages were posted or rewritten.
    pub async fn tick(&mut self, now: OffsetDateTime) -> Result<usize, WebhookError> {
        let mut conn = self.connection().await?;
        let Some((settings, secrets)) = slack::secrets(&mut conn).await? else {
            self.position = None;
            return Ok(0);
        };
        let sets = match self.position {
            None => {
                let latest = change_feed::latest(&mut conn).await?;
                let open =
                    change_sets::pending(&mut conn, &change_sets::PendingFilter::default()).await?;
                self.position = Some(latest);
                open.iter().rev().map(|set| set.id).collect()
            }
            Some(after) => {
                let (sets, position) = change_feed::since(&mut conn, after, 1_000).await?;
                self.position = Some(position);
                sets
            }
        };
        drop(conn);
        let api = SlackApi::connected(&settings, &secrets)?;
        let mut sent = 0;
        for set in sets {
            let span = tracing::info_span!("slack_delivery", set = %set);
            let _entered = span.enter();
            match self.sync(&api, &settings, set, now).await {
                Ok(true) => sent += 1,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "Slack message not sent"),
            }
        }
        Ok(sent)
    }

    /// Posts set `id` (once, when it is open and was queued since the app was
    /// connected) or rewrites its message when what it says changed; `true` when a
    /// message was sent. The database is read and written on pooled connections with no
    /// transaction open while Slack answers.
    async fn sync(
        &self,
        api: &SlackApi,
        settings: &SlackSettings,
        id: Uuid,
        now: OffsetDateTime,
    ) -> Result<bool, WebhookError> {
        let mut conn = self.connection().await?;
        let Some(set) = change_sets::load(&mut conn, id).await? else {
            return Ok(false);
        };
        let posted = slack::message(&mut conn, id).await?;
        let decided = decisions::for_change_set(&mut conn, id).await?;
        let quorum = approvals::quorum_of(&mut conn, &set).await?;
        let ran = jobs::for_change_set(&mut conn, id).await?;
        let message = set_message(
            &set,
            &SetState {
                decisions: &decided,
                quorum: &quorum,
                jobs: &ran,
                public_url: settings.public_url.as_deref(),
            },
        );
        let shown = assent_domain::lower_hex(&Sha256::digest(message.to_string().as_bytes()));
        match posted {
            None => {
                let open = set.items.iter().any(|item| item.status.is_open());
                if !open
                    || set.created_at < settings.connected_at
                    || !slack::claim_post(&mut conn, id, &settings.channel, now).await?
                {
                    return Ok(false);
                }
                drop(conn);
                let ts = api.post_message(&settings.channel, &message).await?;
                let mut conn = self.connection().await?;
                slack::record_message(&mut conn, id, &ts, &shown).await?;
                tracing::info!(%ts, "set posted to Slack");
                Ok(true)
            }
            Some(posted) => {
                let Some(ts) = posted
                    .ts
                    .filter(|_| posted.shown.as_deref() != Some(&shown))
                else {
                    return Ok(false);
                };
                drop(conn);
                api.update(&posted.channel, &ts, &message).await?;
                let mut conn = self.connection().await?;
                slack::record_message(&mut conn, id, &ts, &shown).await?;
                tracing::info!(%ts, "Slack message rewritten");
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{ChangeItem, NewChangeSet, Target};

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    #[test]
    fn signatures_are_checked_on_the_raw_body_with_the_clock() {
        let now = OffsetDateTime::from_unix_timestamp(1_531_420_618).expect("a time");
        let body = b"token=xyz&payload=%7B%7D";
        let signature = slack_signature(SECRET, "1531420618", body);
        let check = |ts: &str, sig: Option<&str>, body: &[u8], now| {
            verify_slack_signature(SECRET, Some(ts), sig, body, now).map_err(|e| e.to_string())
        };
        assert_eq!(check("1531420618", Some(&signature), body, now), Ok(()));
        let forged = check(
            "1531420618",
            Some(&signature),
            b"token=xyz&payload=%7B%7E",
            now,
        );
        assert!(forged.is_err_and(|e| e.contains("does not match")));
        let late = now + time::Duration::seconds(301);
        assert!(
            check("1531420618", Some(&signature), body, late).is_err_and(|e| e.contains("301 s"))
        );
        assert!(check("1531420618", Some("v0=zz"), body, now).is_err_and(|e| e.contains("hex")));
        assert!(check("1531420618", None, body, now).is_err_and(|e| e.contains("not signed")));
        assert!(check("soon", Some(&signature), body, now).is_err_and(|e| e.contains("seconds")));
    }

    #[test]
    fn a_signature_re_cased_is_the_same_request_to_the_replay_memory() {
        let now = OffsetDateTime::from_unix_timestamp(1_531_420_618).expect("a time");
        let body = b"token=xyz&payload=%7B%7D";
        let signature = slack_signature(SECRET, "1531420618", body);
        let upper = format!("v0={}", signature["v0=".len()..].to_ascii_uppercase());
        let mixed: String = signature
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect::<String>()
            .replacen("V0=", "v0=", 1);
        for spelling in [&upper, &mixed] {
            assert_ne!(spelling, &signature);
            assert_eq!(
                verify_slack_signature(SECRET, Some("1531420618"), Some(spelling), body, now)
                    .map_err(|e| e.to_string()),
                Ok(()),
                "hex in any case verifies: {spelling}"
            );
            assert_eq!(
                payload_digest(spelling),
                payload_digest(&signature),
                "so it is remembered as the same request: {spelling}"
            );
        }
        let other = slack_signature(SECRET, "1531420619", body);
        assert_ne!(payload_digest(&other), payload_digest(&signature));
    }

    #[test]
    fn button_values_round_trip_and_refuse_strangers() {
        let set = Uuid::from_u128(9);
        assert_eq!(
            parse_button_value(&button_value(set, 2, 1)),
            Some((set, 2, 1))
        );
        assert_eq!(parse_button_value("x:1:1"), None);
        assert_eq!(parse_button_value(&format!("{set}:1:1:1")), None);
    }

    fn big_set(items: usize) -> ChangeSet {
        let long = "x".repeat(10_000);
        ChangeSet::new(NewChangeSet {
            id: Uuid::from_u128(1),
            agent_id: "<!channel> a".into(),
            target: Target::new("mcp", "files"),
            thread_id: "th".into(),
            run_key: "r".into(),
            items: (0..items)
                .map(|i| {
                    let args: serde_json::Map<String, Value> = (0..30)
                        .map(|k| (format!("k{k}"), json!(long.clone())))
                        .collect();
                    ChangeItem::new(format!("write_{i}"), Value::Object(args), long.clone())
                })
                .collect(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set")
    }

    /// Issue 53, point 18: a decided coding agent's call was still headed "waits for a
    /// person", its diff labelled `before`, its run "applied".
    #[test]
    fn a_decided_coding_agents_call_reads_as_a_call_nobody_waits_on() {
        let mut set = ChangeSet::new(NewChangeSet {
            id: Uuid::from_u128(1),
            agent_id: "claude".into(),
            target: Target::new(jobs::AGENT_RUNS_KIND, "/home/p"),
            thread_id: "th".into(),
            run_key: "r".into(),
            items: vec![ChangeItem {
                before: Some(json!("@@ line 1 @@\n-a\n+b\n")),
                ..ChangeItem::new("Edit", json!({"file_path": "x"}), "x: a → b")
            }],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        set.apply_verdict(0, Verdict::Confirmed, OffsetDateTime::UNIX_EPOCH)
            .expect("confirmed");
        let mut job = Job::approved(
            Uuid::from_u128(2),
            &set,
            0,
            "hook_claude",
            json!({"file_path": "x"}),
            assent_domain::OperationId::derive("r", "Edit", &json!({}), &["/home/p"]),
            OffsetDateTime::UNIX_EPOCH,
        );
        job.status = jobs::JobStatus::Applied;
        let quorum = Quorum::default();
        let message = set_message(
            &set,
            &SetState {
                decisions: &[],
                quorum: &quorum,
                jobs: &[job],
                public_url: None,
            },
        );
        let said = message.to_string();
        assert!(!said.contains("waits for a person"), "{said}");
        assert!(said.contains("every item decided"), "{said}");
        assert!(said.contains("diff: "), "{said}");
        assert!(said.contains("handed to the agent"), "{said}");
        assert!(!said.contains("run: applied"), "{said}");
    }

    #[test]
    fn a_cut_message_says_how_much_it_left_out() {
        let mut set = big_set(1);
        set.items[0].args = json!({"content": "x".repeat(1_000), "file_path": "a.txt"});
        let quorum = Quorum::default();
        let message = set_message(
            &set,
            &SetState {
                decisions: &[],
                quorum: &quorum,
                jobs: &[],
                public_url: Some("https://assent.example"),
            },
        )
        .to_string();
        let hidden = hidden_chars(&json!("x".repeat(1_000)));
        assert!(hidden > 800, "{hidden}");
        assert!(
            message.contains(&format!("[{hidden} chars cut]")),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "cut to fit ({hidden} characters of the arguments not shown); every argument whole:_ <https://assent.example/#change-set-"
            )),
            "{message}"
        );
        assert_eq!(hidden_chars(&json!("short")), 0);
    }

    #[test]
    fn messages_keep_block_kit_limits_and_escape_agent_text() {
        for items in [1, 24, 25, 60] {
            let set = big_set(items);
            let quorum = Quorum::default();
            let message = set_message(
                &set,
                &SetState {
                    decisions: &[],
                    quorum: &quorum,
                    jobs: &[],
                    public_url: Some("https://assent.example"),
                },
            );
            let blocks = message["blocks"].as_array().expect("blocks");
            assert!(blocks.len() <= MAX_BLOCKS, "{items}: {}", blocks.len());
            for block in blocks {
                if let Some(text) = block["text"]["text"].as_str() {
                    assert!(text.chars().count() <= MAX_SECTION_CHARS);
                    assert!(!text.contains("<!channel>"), "{text}");
                }
                if let Some(elements) = block["elements"].as_array() {
                    assert!(elements.len() <= MAX_ACTIONS);
                }
            }
        }
    }
}
