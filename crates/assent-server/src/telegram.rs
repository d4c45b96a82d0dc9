//! Telegram's buttons (`assent serve --telegram`), for a phone with no public URL: the
//! bot long-polls `getUpdates` (no webhook), so nothing reaches in. Three parts:
//!
//! - pure: [`set_message`] renders a change set as one plain-text message (no
//!   `parse_mode`, so agent text cannot format, link or mention) within Telegram's
//!   4,096 characters, with an inline keyboard Approve / Reject / View per open item;
//!   [`callback_data`] and [`parse_callback`] name an item and its revision only, in
//!   at most 64 bytes, read back strictly.
//! - [`TelegramApi`]: the Bot API, each call bounded by a timeout; a 429's
//!   `retry_after` is reported so the caller waits it out.
//! - the poster and the poller, which use these, are in `telegram_bot.rs`.
//!
//! A tap decides through the engine's confirmation service as every other door does,
//! as the mapped person (`telegram:42 (alice)`), bound to the revision the message
//! showed; a user nobody mapped is told so in the chat and nothing changes.

use assent_confirm::records::Quorum;
use assent_domain::{ChangeDecision, ChangeSet, Verdict, head_and_tail, named_summary, one_line};
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// The Bot API, unless the connection or `--telegram-api-url` names another (a
/// self-hosted Bot API server, a test's fake).
pub const DEFAULT_TELEGRAM_API_URL: &str = "https://api.telegram.org";

/// Telegram's limits: characters of a message's text, bytes of a button's callback
/// data, characters of an `answerCallbackQuery` text.
pub(crate) const MAX_TEXT_CHARS: usize = 4_096;
pub(crate) const MAX_CALLBACK_BYTES: usize = 64;
pub(crate) const MAX_ANSWER_CHARS: usize = 200;

/// How long one ordinary call may take; `getUpdates` gets its long-poll on top.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Items given buttons in one message (three each: Telegram allows 100 buttons); the
/// rest are answered on the page or the command line, and the message says so.
const MAX_ITEMS_WITH_BUTTONS: usize = 30;
/// Characters of one argument's value, and of a diff, shown (head and tail kept).
const VALUE_CHARS: usize = 600;
const DIFF_CHARS: usize = 1_500;

/// What a button asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tap {
    /// Approve the item.
    Approve,
    /// Reject it: the reason is asked for first.
    Reject,
    /// Where to see it whole (without a public URL: the `assent show` command).
    View,
}

impl Tap {
    fn code(self) -> &'static str {
        match self {
            Tap::Approve => "a",
            Tap::Reject => "r",
            Tap::View => "v",
        }
    }
}

/// A button's callback data: what it asks, the set, the item and the revision shown
/// (`a:<32 hex>:<index>:<revision>`, at most 2 + 32 + 1 + 20 + 1 + 10 = 66 bytes for
/// absurd numbers; [`set_message`] gives buttons only to items that fit in 64).
pub(crate) fn callback_data(tap: Tap, set: Uuid, index: usize, revision: u32) -> String {
    format!("{}:{}:{index}:{revision}", tap.code(), set.simple())
}

/// The tap, item and revision a callback data names; `None` for anything no button of
/// ours carries (too long, another shape, a number with a sign or leading zeros).
pub(crate) fn parse_callback(data: &str) -> Option<(Tap, Uuid, usize, u32)> {
    if data.len() > MAX_CALLBACK_BYTES {
        return None;
    }
    let mut parts = data.split(':');
    let tap = match parts.next()? {
        "a" => Tap::Approve,
        "r" => Tap::Reject,
        "v" => Tap::View,
        _ => return None,
    };
    let set = parts.next()?;
    if set.len() != 32 || !set.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let set = Uuid::parse_str(set).ok()?;
    fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
        let plain = !text.is_empty()
            && text.len() <= 10
            && text.bytes().all(|b| b.is_ascii_digit())
            && (text == "0" || !text.starts_with('0'));
        plain.then(|| text.parse().ok()).flatten()
    }
    let index = number(parts.next()?)?;
    let revision = number(parts.next()?)?;
    parts
        .next()
        .is_none()
        .then_some((tap, set, index, revision))
}

/// A Telegram id (a user's or a chat's): an optional minus and at most 20 digits.
pub(crate) fn is_telegram_id(id: &str) -> bool {
    let digits = id.strip_prefix('-').unwrap_or(id);
    !digits.is_empty() && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Where the page shows item `index` of set `set`: its stable per-item anchor.
pub(crate) fn item_link(public_url: &str, set: Uuid, index: usize) -> String {
    format!("{}/#item-{set}-{index}", public_url.trim_end_matches('/'))
}

/// What a message says about a set besides the set itself.
pub(crate) struct SetState<'a> {
    /// The set's decisions, oldest first.
    pub decisions: &'a [ChangeDecision],
    /// Its quorum state.
    pub quorum: &'a Quorum,
    /// The page's public address, for View.
    pub public_url: Option<&'a str>,
}

/// A value as a person reads it, on lines of its own when it has several (a diff
/// stays a diff), every misleading character made visible, cut with head and tail
/// kept and the cut said.
fn shown(value: &Value, max_chars: usize) -> String {
    let whole = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let cut = head_and_tail(&whole, max_chars);
    cut.split('\n')
        .map(|line| one_line(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One item: its tool and summary, every argument, the diff or the value replaced,
/// then how it stands.
fn item_text(set: &ChangeSet, index: usize, state: &SetState<'_>) -> String {
    let item = &set.items[index];
    let mut lines = vec![format!(
        "[{index}] {}",
        one_line(&head_and_tail(
            &named_summary(&item.tool_name, &item.human_summary),
            300
        ))
    )];
    match &item.args {
        Value::Object(map) => {
            for (key, arg) in map {
                let value = shown(arg, VALUE_CHARS);
                if value.contains('\n') {
                    lines.push(format!("• {}:\n{value}", one_line(key)));
                } else {
                    lines.push(format!("• {}: {value}", one_line(key)));
                }
            }
        }
        other => lines.push(format!("• {}", shown(other, VALUE_CHARS))),
    }
    if let Some(before) = &item.before {
        let label = if set.target_kind == assent_confirm::records::AGENT_RUNS_KIND {
            "diff"
        } else {
            "before"
        };
        lines.push(format!("{label}:\n{}", shown(before, DIFF_CHARS)));
    }
    lines.push(item_state(set, index, state));
    lines.join("\n")
}

/// How item `index` stands: decided (by whom, why), approvals so far, or waiting; a
/// refreshed stale item says so.
fn item_state(set: &ChangeSet, index: usize, state: &SetState<'_>) -> String {
    let item = &set.items[index];
    if !item.status.is_open() {
        let last = state.decisions.iter().rev().find(|d| d.item_index == index);
        let by = last
            .and_then(|d| d.decided_by.as_deref())
            .map(|by| format!(" by {}", one_line(by)))
            .unwrap_or_default();
        let reason = last
            .filter(|d| d.verdict == Verdict::Rejected)
            .and_then(|d| d.reason.as_deref())
            .map(|reason| format!(": “{}”", one_line(&head_and_tail(reason, 300))))
            .unwrap_or_default();
        let mark = match item.status.as_str() {
            "confirmed" => "✅",
            "rejected" => "❌",
            _ => "•",
        };
        return format!("{mark} {}{by}{reason}", item.status.as_str());
    }
    let mut said = match item.status.as_str() {
        "deferred" => "⏸ deferred".to_owned(),
        _ => "⌛ waiting".to_owned(),
    };
    if let Some((_, needed, revision)) = state.quorum.items.iter().find(|(i, _, _)| *i == index) {
        let by: Vec<String> = revision
            .approvals
            .iter()
            .map(|a| one_line(&a.by).into_owned())
            .collect();
        said.push_str(&format!(" · approvals {} of {needed}", revision.people()));
        if !by.is_empty() {
            said.push_str(&format!(" (by {})", by.join(", ")));
        }
    }
    if let Some(detail) = &item.stale_detail {
        said.push_str(&format!(
            " · refreshed: the target changed ({}); decide on revision {}",
            one_line(&head_and_tail(detail, 200)),
            item.revision
        ));
    }
    said
}

/// Where to see everything: the item on the page when it is public, else
/// `assent show`.
fn whole_elsewhere(set: Uuid, index: usize, public_url: Option<&str>) -> String {
    match public_url {
        Some(url) => item_link(url, set, index),
        None => format!("assent show {set} {index}"),
    }
}

/// Change set `set` as one Telegram message: `{"text", "reply_markup"}`, the text
/// within 4,096 characters and every callback data within 64 bytes. An item too long
/// for the message is named with where to see it whole; nothing is cut unsaid.
pub(crate) fn set_message(set: &ChangeSet, state: &SetState<'_>) -> Value {
    let open = set
        .items
        .iter()
        .filter(|item| item.status.is_open())
        .count();
    let short = &set.id.simple().to_string()[..8];
    let header = if open == 0 {
        format!(
            "{} on {}: every item decided ({} item(s), set {short})",
            one_line(&set.agent_id),
            one_line(&set.target().to_string()),
            set.items.len()
        )
    } else {
        format!(
            "{} waits for a person on {} ({open} of {} item(s) open, set {short})",
            one_line(&set.agent_id),
            one_line(&set.target().to_string()),
            set.items.len()
        )
    };
    // Room kept for the closing line that names what did not fit.
    let budget = MAX_TEXT_CHARS - 200;
    let mut text = header;
    let mut left_out = Vec::new();
    for index in 0..set.items.len() {
        let whole = item_text(set, index, state);
        let part = if whole.chars().count() + text.chars().count() + 2 <= budget {
            whole
        } else {
            let item = &set.items[index];
            format!(
                "[{index}] {}\n(too long for this message; whole: {})\n{}",
                one_line(&head_and_tail(&item.tool_name, 100)),
                whole_elsewhere(set.id, index, state.public_url),
                item_state(set, index, state)
            )
        };
        if part.chars().count() + text.chars().count() + 2 > budget {
            left_out.push(index);
            continue;
        }
        text.push_str("\n\n");
        text.push_str(&part);
    }
    if !left_out.is_empty() {
        text.push_str(&format!(
            "\n\n{} more item(s) not shown here: {}",
            left_out.len(),
            match state.public_url {
                Some(url) => format!("{}/#change-set-{}", url.trim_end_matches('/'), set.id),
                None => format!("assent show {}", set.id),
            }
        ));
    }
    let mut keyboard = Vec::new();
    let mut without_buttons = 0;
    for (index, item) in set.items.iter().enumerate() {
        if !item.status.is_open() {
            continue;
        }
        let fits =
            callback_data(Tap::Approve, set.id, index, item.revision).len() <= MAX_CALLBACK_BYTES;
        if keyboard.len() >= MAX_ITEMS_WITH_BUTTONS || left_out.contains(&index) || !fits {
            without_buttons += 1;
            continue;
        }
        let data = |tap| callback_data(tap, set.id, index, item.revision);
        let view = match state.public_url {
            Some(url) => {
                json!({"text": format!("View [{index}]"), "url": item_link(url, set.id, index)})
            }
            None => json!({"text": format!("View [{index}]"), "callback_data": data(Tap::View)}),
        };
        keyboard.push(json!([
            {"text": format!("✅ Approve [{index}]"), "callback_data": data(Tap::Approve)},
            {"text": format!("❌ Reject [{index}]"), "callback_data": data(Tap::Reject)},
            view,
        ]));
    }
    if without_buttons > 0 {
        text.push_str(&format!(
            "\n{without_buttons} open item(s) have no buttons here: answer them on the page or with assent review"
        ));
    }
    let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
    json!({"text": text, "reply_markup": {"inline_keyboard": keyboard}})
}

/// How a Bot API call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Too many requests: wait this many seconds before the next call.
    RetryAfter(u64),
    /// Anything else, said without the URL (it holds the token).
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::RetryAfter(seconds) => {
                write!(f, "Telegram asked to wait {seconds} s (429)")
            }
            CallError::Failed(why) => f.write_str(why),
        }
    }
}

/// The Bot API as the connected bot, each call bounded by a timeout.
#[derive(Clone)]
pub(crate) struct TelegramApi {
    http: reqwest::Client,
    /// `{api_url}/bot{token}/`: a secret, never logged.
    base: String,
}

impl std::fmt::Debug for TelegramApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TelegramApi { .. }")
    }
}

impl TelegramApi {
    /// The API at `api_url` with the bot token `token`.
    pub(crate) fn new(api_url: &str, token: &str) -> Result<Self, CallError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| CallError::Failed(e.to_string()))?;
        Ok(Self {
            http,
            base: format!("{}/bot{token}/", api_url.trim_end_matches('/')),
        })
    }

    /// Calls `method` with `body`, waiting at most `wait` beyond the ordinary bound;
    /// the `result` when Telegram says `ok`.
    pub(crate) async fn call_waiting(
        &self,
        method: &str,
        body: &Value,
        wait: Duration,
    ) -> Result<Value, CallError> {
        let failed = |why: String| CallError::Failed(format!("{method}: {why}"));
        let response = self
            .http
            .post(format!("{}{method}", self.base))
            .timeout(CALL_TIMEOUT + wait)
            .json(body)
            .send()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .map_err(|e| failed(format!("HTTP {status}, not JSON: {}", e.without_url())))?;
        if answer["ok"] == Value::Bool(true) {
            return Ok(answer["result"].clone());
        }
        if status.as_u16() == 429 || answer["error_code"] == 429 {
            let seconds = answer["parameters"]["retry_after"].as_u64().unwrap_or(5);
            return Err(CallError::RetryAfter(seconds.clamp(1, 3_600)));
        }
        let description = answer["description"].as_str().unwrap_or("no description");
        Err(failed(format!(
            "HTTP {status}: {}",
            one_line(&head_and_tail(description, 300))
        )))
    }

    /// Calls `method` with `body` within the ordinary bound.
    pub(crate) async fn call(&self, method: &str, body: &Value) -> Result<Value, CallError> {
        self.call_waiting(method, body, Duration::ZERO).await
    }

    /// Answers a tap with `text` (cut to Telegram's 200 characters), as an alert.
    pub(crate) async fn answer_tap(&self, id: &str, text: &str) -> Result<(), CallError> {
        let text: String = one_line(text).chars().take(MAX_ANSWER_CHARS).collect();
        self.call(
            "answerCallbackQuery",
            &json!({"callback_query_id": id, "text": text, "show_alert": true}),
        )
        .await
        .map(|_| ())
    }

    /// Sends `text` to `chat_id` (as a reply to `reply_to` when given); the sent
    /// message's id.
    pub(crate) async fn send(
        &self,
        chat_id: &str,
        text: &str,
        reply_to: Option<i64>,
        reply_markup: Option<Value>,
    ) -> Result<i64, CallError> {
        let mut body = json!({"chat_id": chat_id, "text": text.chars().take(MAX_TEXT_CHARS).collect::<String>()});
        if let Some(reply_to) = reply_to {
            body["reply_parameters"] =
                json!({"message_id": reply_to, "allow_sending_without_reply": true});
        }
        if let Some(markup) = reply_markup {
            body["reply_markup"] = markup;
        }
        let sent = self.call("sendMessage", &body).await?;
        sent["message_id"]
            .as_i64()
            .ok_or_else(|| CallError::Failed("sendMessage: no message_id in the answer".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{ChangeItem, NewChangeSet, OffsetDateTime, Target};

    #[test]
    fn callback_data_names_item_and_revision_only_and_is_read_strictly() {
        let set = Uuid::from_u128(0xabc);
        let data = callback_data(Tap::Approve, set, 3, 7);
        assert!(data.len() <= MAX_CALLBACK_BYTES, "{data}");
        assert_eq!(parse_callback(&data), Some((Tap::Approve, set, 3, 7)));
        let widest = callback_data(Tap::Reject, set, 99_999_999, u32::MAX);
        assert!(widest.len() <= MAX_CALLBACK_BYTES, "{widest}");
        assert_eq!(
            parse_callback(&widest),
            Some((Tap::Reject, set, 99_999_999, u32::MAX))
        );
        let hex = set.simple().to_string();
        for bad in [
            String::new(),
            format!("x:{hex}:0:0"),
            format!("a:{hex}:0"),
            format!("a:{hex}:0:0:0"),
            format!("a:{hex}:-1:0"),
            format!("a:{hex}:+1:0"),
            format!("a:{hex}:01:0"),
            format!("a:{hex}:0: 0"),
            format!("a:{}:0:0", set.hyphenated()),
            format!("a:{}:0:0", hex.to_uppercase()),
            format!("a:{hex}:0:99999999999"),
            format!("a:{hex}:0:0{}", " ".repeat(40)),
        ] {
            assert_eq!(parse_callback(&bad), None, "{bad:?}");
        }
        assert!(is_telegram_id("42") && is_telegram_id("-1001234"));
        assert!(!is_telegram_id("") && !is_telegram_id("-") && !is_telegram_id("4 2"));
    }

    fn a_set(items: Vec<ChangeItem>) -> ChangeSet {
        ChangeSet::new(NewChangeSet {
            id: Uuid::from_u128(9),
            agent_id: "coder".into(),
            target: Target::new("workspace", "/w"),
            thread_id: "th".into(),
            run_key: "r".into(),
            items,
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set")
    }

    #[test]
    fn a_message_shows_every_argument_and_a_diff_on_lines_within_the_limits() {
        let mut item = ChangeItem::new(
            "write_file",
            json!({"path": "src/a.rs", "content": "fn a() {}\nfn b() {}\n"}),
            "write_file(path: src/a.rs)",
        );
        item.before = Some(json!(
            "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1,2 @@\n fn a() {}\n+fn b() {}"
        ));
        let long = ChangeItem::new("append", json!({"text": "x".repeat(10_000)}), "append");
        let set = a_set(vec![item, long]);
        let quorum = Quorum::default();
        let state = SetState {
            decisions: &[],
            quorum: &quorum,
            public_url: Some("https://assent.example/"),
        };
        let message = set_message(&set, &state);
        let text = message["text"].as_str().expect("text");
        assert!(text.chars().count() <= MAX_TEXT_CHARS);
        assert!(text.contains("• path: src/a.rs"), "{text}");
        assert!(
            text.contains("+++ b/src/a.rs\n@@ -1 +1,2 @@\n fn a() {}\n+fn b() {}"),
            "{text}"
        );
        assert!(!text.contains('⏎'), "a diff keeps its lines: {text}");
        assert!(text.contains("chars cut"), "the cut is said: {text}");
        let rows = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .expect("a keyboard");
        assert_eq!(rows.len(), 2);
        for button in rows.iter().flat_map(|row| row.as_array().expect("a row")) {
            if let Some(data) = button["callback_data"].as_str() {
                assert!(data.len() <= MAX_CALLBACK_BYTES);
            }
        }
        assert_eq!(
            rows[0][2]["url"],
            format!("https://assent.example/#item-{}-0", set.id)
        );
        assert_eq!(
            parse_callback(rows[1][0]["callback_data"].as_str().expect("data")),
            Some((Tap::Approve, set.id, 1, 0))
        );

        // Many long items: the message stays within 4,096 characters and names what
        // it left out.
        let many = a_set(
            (0..40)
                .map(|i| ChangeItem::new("t", json!({"v": "y".repeat(500 + i)}), "t"))
                .collect(),
        );
        let message = set_message(&many, &state);
        let text = message["text"].as_str().expect("text");
        assert!(text.chars().count() <= MAX_TEXT_CHARS);
        assert!(text.contains("more item(s) not shown here"), "{text}");
        assert!(text.contains("have no buttons here"), "{text}");
    }
}
