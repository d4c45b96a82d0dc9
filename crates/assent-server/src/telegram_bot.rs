//! The running side of Telegram (`assent serve --telegram`): the poster, which follows
//! the change feed and sends each queued set once per chat (`sendMessage`), then edits
//! the message (`editMessageText`) whenever what it says changes, whoever decided,
//! wherever; and the poller, which long-polls `getUpdates` with the stored offset and
//! decides each tap through the engine as the mapped person.
//!
//! Every call is bounded; a failure backs off (doubling up to a minute) and a 429 waits
//! its `retry_after`. No transaction is held while Telegram is awaited. Updates come
//! from anyone who can write to the bot: each is read strictly, the offset moves past
//! it before it is acted on (a tap is acted on at most once, even across a restart),
//! and only mapped users decide.

use crate::ServerError;
use crate::telegram::{
    CallError, SetState, Tap, TelegramApi, is_telegram_id, item_link, parse_callback, set_message,
};
use assent_confirm::Engine;
use assent_confirm::admin::{AskedReason, TelegramSettings};
use assent_confirm::records::PendingFilter;
use assent_domain::{OffsetDateTime, one_line};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::time::Duration;
use uuid::Uuid;

/// How long one `getUpdates` may hold the connection open, in seconds.
const LONG_POLL_SECONDS: u64 = 25;
/// The first pause after a failure, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Updates taken per `getUpdates` (Telegram's own maximum is 100).
const UPDATES_PER_CALL: u64 = 50;
/// Characters of a reason taken (the Slack modal's limit).
const MAX_REASON_CHARS: usize = 3_000;

/// The bot's API, from the stored connection and the `api_url` override, when a bot
/// is connected.
async fn connected(
    engine: &Engine,
    api_url: Option<&str>,
) -> Result<Option<(TelegramSettings, TelegramApi)>, String> {
    let Some((settings, secrets)) = engine
        .admin()
        .telegram_secrets()
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let api = TelegramApi::new(api_url.unwrap_or(&settings.api_url), &secrets.bot_token)
        .map_err(|e| e.to_string())?;
    Ok(Some((settings, api)))
}

/// Sleeps `pause` unless `shutdown` comes first; `false` when it did.
async fn pause(pause: Duration, shutdown: &mut (impl Future<Output = ()> + Unpin)) -> bool {
    tokio::select! {
        () = tokio::time::sleep(pause) => true,
        () = shutdown => false,
    }
}

/// The pause after `error`, the backoff doubled for the next one.
fn after(error: &CallError, backoff: &mut Duration) -> Duration {
    match error {
        CallError::RetryAfter(seconds) => Duration::from_secs(*seconds),
        CallError::Failed(_) => {
            let now = *backoff;
            *backoff = (*backoff * 2).min(MAX_BACKOFF);
            now
        }
    }
}

/// Long-polls `getUpdates` and acts on each update until `shutdown`.
pub(crate) async fn poll(
    engine: Engine,
    api_url: Option<String>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let wait = tokio::select! {
            polled = poll_once(&engine, api_url.as_deref()) => match polled {
                Ok(()) => {
                    backoff = FIRST_BACKOFF;
                    Duration::ZERO
                }
                Err(error) => {
                    tracing::warn!(%error, "Telegram getUpdates");
                    after(&error, &mut backoff)
                }
            },
            () = &mut shutdown => return,
        };
        if !wait.is_zero() && !pause(wait, &mut shutdown).await {
            return;
        }
    }
}

/// One `getUpdates` and the updates it gave.
async fn poll_once(engine: &Engine, api_url: Option<&str>) -> Result<(), CallError> {
    let Some((settings, api)) = connected(engine, api_url)
        .await
        .map_err(CallError::Failed)?
    else {
        return Err(CallError::Failed(
            "Telegram is not connected (assent telegram connect)".to_owned(),
        ));
    };
    let offset = engine
        .admin()
        .telegram_update_offset()
        .await
        .map_err(|e| CallError::Failed(e.to_string()))?;
    let updates = api
        .call_waiting(
            "getUpdates",
            &json!({"offset": offset, "timeout": LONG_POLL_SECONDS, "limit": UPDATES_PER_CALL,
                "allowed_updates": ["message", "callback_query"]}),
            Duration::from_secs(LONG_POLL_SECONDS),
        )
        .await?;
    let updates = updates.as_array().cloned().unwrap_or_default();
    let Some(last) = updates.iter().filter_map(|u| u["update_id"].as_i64()).max() else {
        return Ok(());
    };
    // Past them before acting: a tap is acted on at most once, even after a crash.
    engine
        .admin()
        .advance_telegram_offset(last.saturating_add(1))
        .await
        .map_err(|e| CallError::Failed(e.to_string()))?;
    for update in updates {
        if let Err(error) = act(engine, &api, &settings, &update).await {
            tracing::warn!(%error, "Telegram update not answered");
        }
    }
    Ok(())
}

/// A user id from an update's `from`, when it is one.
fn user_of(from: &Value) -> Option<String> {
    from["id"]
        .as_i64()
        .map(|id| id.to_string())
        .filter(|id| is_telegram_id(id))
}

/// Acts on one update: a tap, a reply giving a reason, `/start`; anything else is
/// ignored.
async fn act(
    engine: &Engine,
    api: &TelegramApi,
    settings: &TelegramSettings,
    update: &Value,
) -> Result<(), CallError> {
    if let Some(query) = update.get("callback_query") {
        let Some(id) = query["id"].as_str().filter(|id| id.len() <= 256) else {
            return Ok(());
        };
        let said = tap(engine, api, settings, query).await;
        return api.answer_tap(id, &said).await;
    }
    let Some(message) = update.get("message") else {
        return Ok(());
    };
    let (Some(user), Some(chat), Some(message_id)) = (
        user_of(&message["from"]),
        message["chat"]["id"].as_i64().map(|c| c.to_string()),
        message["message_id"].as_i64(),
    ) else {
        return Ok(());
    };
    let text = message["text"].as_str().unwrap_or_default();
    if let Some(asked) = message["reply_to_message"]["message_id"].as_i64() {
        let said = reason(engine, &chat, asked, &user, text).await;
        if let Some(said) = said {
            api.send(&chat, &said, Some(message_id), None).await?;
        }
        return Ok(());
    }
    if text.trim() == "/start" || text.trim().starts_with("/start ") {
        let said = format!(
            "Your Telegram user id is {user}. An admin lets you decide with: assent telegram users add {user} --as NAME"
        );
        api.send(&chat, &said, Some(message_id), None).await?;
    }
    Ok(())
}

/// What a tap asks, done as its mapped person; what to tell them.
async fn tap(
    engine: &Engine,
    api: &TelegramApi,
    settings: &TelegramSettings,
    query: &Value,
) -> String {
    let Some(user) = user_of(&query["from"]) else {
        return "Not decided: no user in the tap".to_owned();
    };
    let Some((tap, set, index, revision)) = query["data"].as_str().and_then(parse_callback) else {
        return "Not decided: that button is not one of ours".to_owned();
    };
    let span = tracing::info_span!("telegram_decision", %user, %set, index);
    let _entered = span.enter();
    let label = format!("[{} {index}]", &set.simple().to_string()[..8]);
    match decide(
        engine, api, settings, query, &user, tap, set, index, revision,
    )
    .await
    {
        Ok(said) => format!("{label} {said}"),
        Err(error) => format!("{label} Not decided: {}", one_line(&error.to_string())),
    }
}

/// The decision itself; what to tell the person.
#[allow(clippy::too_many_arguments)]
async fn decide(
    engine: &Engine,
    api: &TelegramApi,
    settings: &TelegramSettings,
    query: &Value,
    user: &str,
    tap: Tap,
    set: Uuid,
    index: usize,
    revision: u32,
) -> Result<String, ServerError> {
    if tap == Tap::View {
        return Ok(match &settings.public_url {
            Some(url) => item_link(url, set, index),
            None => format!("See it whole with: assent show {set} {index}"),
        });
    }
    let Some(name) = engine.admin().telegram_user_name(user).await? else {
        return Ok(format!(
            "You are not a reviewer here: nothing was decided (an admin maps you with: assent telegram users add {user} --as NAME)"
        ));
    };
    let item = assent_confirm::ItemRef::new(set, index);
    match tap {
        Tap::Approve => {
            let outcome = engine
                .confirmations()
                .by(assent_domain::telegram_reviewer(user, &name))
                .shown_revision(revision)
                .confirm_item(item, OffsetDateTime::now_utc())
                .await?;
            Ok(one_line(&outcome.message()).into_owned())
        }
        Tap::Reject => {
            let chat = query["message"]["chat"]["id"]
                .as_i64()
                .map(|c| c.to_string())
                .ok_or_else(|| ServerError::BadRequest("the tap names no chat".to_owned()))?;
            let shown = query["message"]["message_id"].as_i64();
            let asked = api
                .send(
                    &chat,
                    &format!(
                        "Why reject [{index}] of set {}? Reply to this message with the reason (the agent reads it); an empty reply rejects without one.",
                        &set.simple().to_string()[..8]
                    ),
                    shown,
                    Some(json!({"force_reply": true, "selective": true,
                        "input_field_placeholder": "The reason"})),
                )
                .await
                .map_err(|e| ServerError::Internal(e.to_string()))?;
            engine
                .admin()
                .ask_telegram_reason(
                    &chat,
                    asked,
                    &AskedReason {
                        user_id: user.to_owned(),
                        set,
                        index,
                        revision,
                    },
                    OffsetDateTime::now_utc(),
                )
                .await?;
            Ok("Reply to the bot's question with the reason".to_owned())
        }
        Tap::View => unreachable!("answered above"),
    }
}

/// A reply to the bot's question for a reason: the item rejected, as the mapped
/// person who tapped Reject, at the revision the tap named. `None`: the reply answers
/// no question of ours (ignored).
async fn reason(engine: &Engine, chat: &str, asked: i64, user: &str, text: &str) -> Option<String> {
    let taken = match engine.admin().take_telegram_reason(chat, asked, user).await {
        Ok(taken) => taken?,
        Err(error) => return Some(format!("Not decided: {}", one_line(&error.to_string()))),
    };
    let label = format!("[{} {}]", &taken.set.simple().to_string()[..8], taken.index);
    let decided = async {
        let Some(name) = engine.admin().telegram_user_name(user).await? else {
            return Ok::<_, ServerError>(
                "You are not a reviewer here (any more): nothing was decided".to_owned(),
            );
        };
        let text = text.trim();
        if text.chars().count() > MAX_REASON_CHARS {
            return Ok(format!(
                "Not decided: a reason of at most {MAX_REASON_CHARS} characters, please (tap Reject again)"
            ));
        }
        let reason = (!text.is_empty()).then(|| text.to_owned());
        let decision = engine
            .confirmations()
            .by(assent_domain::telegram_reviewer(user, &name))
            .shown_revision(taken.revision)
            .reject_item(
                assent_confirm::ItemRef::new(taken.set, taken.index),
                reason,
                OffsetDateTime::now_utc(),
            )
            .await?;
        Ok(format!("{}", decision.verdict))
    };
    Some(match decided.await {
        Ok(said) => format!("{label} {said}"),
        Err(error) => format!("{label} Not decided: {}", one_line(&error.to_string())),
    })
}

/// Sends each set queued since the bot was connected once to each chat, and edits its
/// messages whenever what they say changes, following the change feed, until
/// `shutdown`.
pub(crate) async fn post(
    engine: Engine,
    api_url: Option<String>,
    interval: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut position = None;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let wait = match tick(&engine, api_url.as_deref(), &mut position).await {
            Ok(()) => {
                backoff = FIRST_BACKOFF;
                interval
            }
            Err(error) => {
                tracing::warn!(%error, "Telegram poster");
                after(&error, &mut backoff).max(interval)
            }
        };
        if !pause(wait, &mut shutdown).await {
            return;
        }
    }
}

/// One look: the sets written since the last (on the first, every open set), each
/// sent or edited as needed.
async fn tick(
    engine: &Engine,
    api_url: Option<&str>,
    position: &mut Option<i64>,
) -> Result<(), CallError> {
    let failed = |e: assent_confirm::ConfirmError| CallError::Failed(e.to_string());
    let Some((settings, api)) = connected(engine, api_url)
        .await
        .map_err(CallError::Failed)?
    else {
        *position = None;
        return Ok(());
    };
    let before = *position;
    let sets: Vec<Uuid> = match *position {
        None => {
            let latest = engine.feed_position().await.map_err(failed)?;
            let open = engine
                .open_sets(&PendingFilter::default())
                .await
                .map_err(failed)?;
            *position = Some(latest);
            open.iter().rev().map(|set| set.id).collect()
        }
        Some(after) => {
            let page = engine.feed_since(after, 1_000).await.map_err(failed)?;
            *position = Some(page.position);
            page.sets
        }
    };
    let chats = match &settings.chat_id {
        Some(chat) => vec![chat.clone()],
        None => engine
            .admin()
            .telegram_users()
            .await
            .map_err(failed)?
            .into_iter()
            .map(|user| user.user_id)
            .collect(),
    };
    for set in sets {
        match sync(engine, &api, &settings, &chats, set).await {
            Ok(()) => {}
            // Telegram asked to slow down: this look is taken again after the wait (a
            // set already sent or edited is skipped then: its digest is recorded).
            Err(error @ CallError::RetryAfter(_)) => {
                *position = before;
                return Err(error);
            }
            Err(error) => tracing::warn!(%error, %set, "Telegram message not sent"),
        }
    }
    Ok(())
}

/// Sends set `id` to each chat it was not sent to (once, when it is open and was
/// queued since the bot was connected), or edits its messages when what they say
/// changed. The database is read and written through the engine, with no transaction
/// open while Telegram answers.
async fn sync(
    engine: &Engine,
    api: &TelegramApi,
    settings: &TelegramSettings,
    chats: &[String],
    id: Uuid,
) -> Result<(), CallError> {
    let failed = |e: assent_confirm::ConfirmError| CallError::Failed(e.to_string());
    let record = match engine.set_detail(id).await {
        Ok(detail) => detail.record,
        Err(assent_confirm::ConfirmError::ChangeSetNotFound(_)) => return Ok(()),
        Err(error) => return Err(failed(error)),
    };
    let posted = engine.admin().telegram_messages(id).await.map_err(failed)?;
    let set = &record.set;
    let message = set_message(
        set,
        &SetState {
            decisions: &record.decisions,
            quorum: &record.quorum,
            public_url: settings.public_url.as_deref(),
        },
    );
    let shown = assent_domain::lower_hex(&Sha256::digest(message.to_string().as_bytes()));
    let now = OffsetDateTime::now_utc();
    for message_row in &posted {
        let Some(message_id) = message_row
            .message_id
            .filter(|_| message_row.shown.as_deref() != Some(&shown))
        else {
            continue;
        };
        let mut body = message.clone();
        body["chat_id"] = json!(message_row.chat_id);
        body["message_id"] = json!(message_id);
        api.call("editMessageText", &body).await?;
        engine
            .admin()
            .record_telegram_message(id, &message_row.chat_id, message_id, &shown)
            .await
            .map_err(failed)?;
    }
    let open = set.items.iter().any(|item| item.status.is_open());
    if !open || set.created_at < settings.connected_at {
        return Ok(());
    }
    for chat in chats {
        if posted.iter().any(|p| &p.chat_id == chat)
            || !engine
                .admin()
                .claim_telegram_post(id, chat, now)
                .await
                .map_err(failed)?
        {
            continue;
        }
        let mut body = message.clone();
        body["chat_id"] = json!(chat);
        let sent = api.call("sendMessage", &body).await?;
        let message_id = sent["message_id"]
            .as_i64()
            .ok_or_else(|| CallError::Failed("sendMessage: no message_id".to_owned()))?;
        engine
            .admin()
            .record_telegram_message(id, chat, message_id, &shown)
            .await
            .map_err(failed)?;
        tracing::info!(%chat, message_id, "set posted to Telegram");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_and_a_429_waits_what_it_says() {
        let mut backoff = FIRST_BACKOFF;
        let failed = CallError::Failed("x".into());
        let waits: Vec<u64> = (0..8)
            .map(|_| after(&failed, &mut backoff).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(
            after(&CallError::RetryAfter(7), &mut backoff),
            Duration::from_secs(7)
        );
    }
}
