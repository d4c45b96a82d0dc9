//! Telegram's buttons against a local fake of the Bot API (an axum server inside the
//! test that checks every request's shape and Telegram's limits, and feeds updates
//! through `getUpdates` long-polls with offsets, as Telegram does): each queued set is
//! posted once per chat, a tap decides through the engine as the mapped person, Reject
//! asks for the reason with a ForceReply, a decision made anywhere edits the message,
//! and an unmapped user, a forged or stale callback, another user's reply and a 429
//! change nothing they should not.

use crate::support::TestServer;
use assent_server::ServerLimits;
use assent_store::telegram::{self, TelegramSecrets, TelegramSettings, TelegramUser};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BOT_TOKEN: &str = "123456:test-Token_abc";
const CHAT: i64 = -100_123;

/// What the fake recorded and what it has to give.
#[derive(Default)]
struct Fake {
    calls: Vec<(String, Value)>,
    broken: Vec<String>,
    /// Updates not yet confirmed by an offset past them.
    updates: Vec<Value>,
    /// Update ids given out, to catch one given twice (an offset not advanced).
    given: BTreeSet<i64>,
    next_update: i64,
    next_message: i64,
    /// Answer the next `getUpdates` with a 429 and this `retry_after`.
    too_many: Option<u64>,
}

type Shared = Arc<(Mutex<Fake>, tokio::sync::Notify)>;

/// The Bot API as far as the bot uses it, on a random loopback port.
async fn fake_telegram() -> (String, Shared) {
    let shared = Shared::default();
    shared.0.lock().expect("lock").next_update = 1_000;
    let app = axum::Router::new()
        .route("/{bot}/{method}", post(answer))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, shared)
}

fn check_keyboard(markup: &Value, broken: &mut Vec<String>) {
    if markup.is_null() || markup.get("force_reply").is_some() {
        return;
    }
    let Some(rows) = markup["inline_keyboard"].as_array() else {
        broken.push(format!("reply_markup without inline_keyboard: {markup}"));
        return;
    };
    let mut buttons = 0;
    for button in rows
        .iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
    {
        buttons += 1;
        if button["text"].as_str().is_none_or(str::is_empty) {
            broken.push(format!("a button without text: {button}"));
        }
        match (button["callback_data"].as_str(), button["url"].as_str()) {
            (Some(data), None) if (1..=64).contains(&data.len()) => {}
            (None, Some(url)) if url.starts_with("https://") => {}
            _ => broken.push(format!(
                "a button's callback_data or url is wrong: {button}"
            )),
        }
    }
    if buttons > 100 {
        broken.push(format!("{buttons} buttons"));
    }
}

fn check_text(body: &Value, broken: &mut Vec<String>) {
    match body["text"].as_str() {
        Some(text) if !text.is_empty() && text.chars().count() <= 4_096 => {}
        _ => broken.push(format!("text missing, empty or over 4,096: {body}")),
    }
    if body.get("parse_mode").is_some() {
        broken.push("parse_mode: agent text would be formatted".to_owned());
    }
}

async fn answer(
    State(shared): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> axum::response::Response {
    let (lock, notify) = &*shared;
    if bot != format!("bot{BOT_TOKEN}") {
        lock.lock()
            .expect("lock")
            .broken
            .push(format!("{method}: not the bot's token"));
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        )
            .into_response();
    }
    if method == "getUpdates" {
        let (Some(offset), Some(timeout)) = (body["offset"].as_i64(), body["timeout"].as_u64())
        else {
            lock.lock()
                .expect("lock")
                .broken
                .push(format!("getUpdates without offset or timeout: {body}"));
            return Json(json!({"ok": true, "result": []})).into_response();
        };
        if timeout == 0 || timeout > 50 {
            lock.lock()
                .expect("lock")
                .broken
                .push(format!("getUpdates timeout {timeout}: not a long poll"));
        }
        for _ in 0..2 {
            let notified = notify.notified();
            {
                let mut fake = lock.lock().expect("lock");
                fake.calls.push((method.clone(), body.clone()));
                if let Some(retry_after) = fake.too_many.take() {
                    return (
                        StatusCode::TOO_MANY_REQUESTS,
                        Json(json!({"ok": false, "error_code": 429,
                            "description": "Too Many Requests: retry later",
                            "parameters": {"retry_after": retry_after}})),
                    )
                        .into_response();
                }
                // An offset confirms every update before it: they are gone.
                fake.updates
                    .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
                let ready: Vec<Value> = fake.updates.clone();
                if !ready.is_empty() {
                    for update in &ready {
                        let id = update["update_id"].as_i64().expect("an id");
                        if !fake.given.insert(id) {
                            fake.broken
                                .push(format!("update {id} given twice: the offset did not move"));
                        }
                    }
                    return Json(json!({"ok": true, "result": ready})).into_response();
                }
            }
            // A long poll: held until an update comes (or the poll's time is up).
            let _ = tokio::time::timeout(Duration::from_secs(timeout), notified).await;
        }
        return Json(json!({"ok": true, "result": []})).into_response();
    }
    let mut fake = lock.lock().expect("lock");
    match method.as_str() {
        "sendMessage" => {
            if !(body["chat_id"].is_string() || body["chat_id"].is_i64()) {
                fake.broken
                    .push(format!("sendMessage without chat_id: {body}"));
            }
            check_text(&body, &mut fake.broken);
            check_keyboard(&body["reply_markup"], &mut fake.broken);
        }
        "editMessageText" => {
            if body["message_id"].as_i64().is_none() || body["chat_id"].is_null() {
                fake.broken.push(format!(
                    "editMessageText without chat_id or message_id: {body}"
                ));
            }
            check_text(&body, &mut fake.broken);
            check_keyboard(&body["reply_markup"], &mut fake.broken);
        }
        "answerCallbackQuery" => {
            if body["callback_query_id"].as_str().is_none() {
                fake.broken
                    .push(format!("answerCallbackQuery without an id: {body}"));
            }
            if body["text"]
                .as_str()
                .is_some_and(|t| t.chars().count() > 200)
            {
                fake.broken
                    .push(format!("answerCallbackQuery text over 200: {body}"));
            }
        }
        other => fake.broken.push(format!("an unexpected method {other}")),
    }
    fake.next_message += 1;
    let message_id = fake.next_message;
    let chat = body["chat_id"].clone();
    fake.calls.push((method, body));
    Json(json!({"ok": true, "result": {"message_id": message_id, "chat": {"id": chat}}}))
        .into_response()
}

/// Gives `update` (an update id is added) to the next `getUpdates`.
fn feed(shared: &Shared, mut update: Value) -> i64 {
    let (lock, notify) = &**shared;
    let id = {
        let mut fake = lock.lock().expect("lock");
        fake.next_update += 1;
        let id = fake.next_update;
        update["update_id"] = json!(id);
        fake.updates.push(update);
        id
    };
    notify.notify_waiters();
    id
}

/// A tap by `user` on a button with `data` of message `message_id` in `chat`; the
/// callback query's id.
fn tap(shared: &Shared, user: i64, chat: i64, message_id: i64, data: &str) -> String {
    let id = format!("cq-{user}-{}", rand_suffix(shared));
    feed(
        shared,
        json!({"callback_query": {"id": id, "chat_instance": "ci",
            "from": {"id": user, "is_bot": false, "first_name": "Someone"},
            "message": {"message_id": message_id, "date": 0, "chat": {"id": chat, "type": "group"}},
            "data": data}}),
    );
    id
}

fn rand_suffix(shared: &Shared) -> i64 {
    shared.0.lock().expect("lock").next_update
}

/// A reply by `user` in `chat` to message `to` saying `text`.
fn reply(shared: &Shared, user: i64, chat: i64, to: i64, text: &str) {
    feed(
        shared,
        json!({"message": {"message_id": 9_000 + rand_suffix(shared), "date": 0,
            "from": {"id": user, "is_bot": false, "first_name": "Someone"},
            "chat": {"id": chat, "type": "group"}, "text": text,
            "reply_to_message": {"message_id": to, "date": 0, "chat": {"id": chat, "type": "group"}}}}),
    );
}

/// The calls of `method` so far (every rule kept so far).
fn calls(shared: &Shared, method: &str) -> Vec<Value> {
    let fake = shared.0.lock().expect("lock");
    assert!(fake.broken.is_empty(), "{:?}", fake.broken);
    fake.calls
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, body)| body.clone())
        .collect()
}

/// Waits (up to 20 s) until `check` holds for the calls of `method`; returns them.
async fn wait_for(shared: &Shared, method: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..400 {
        let seen = calls(shared, method);
        if check(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {method}: {:?}", calls(shared, method));
}

/// Waits until the tap `id` is answered; the answer's text.
async fn answered(shared: &Shared, id: &str) -> String {
    let seen = wait_for(shared, "answerCallbackQuery", |seen| {
        seen.iter().any(|a| a["callback_query_id"] == id)
    })
    .await;
    seen.iter()
        .find(|a| a["callback_query_id"] == id)
        .and_then(|a| a["text"].as_str())
        .expect("a text")
        .to_owned()
}

/// A server posting to the fake (given as `--telegram-api-url`; the connection names
/// an address nothing listens on), with 42 mapped to alice and 43 to bob, posting to
/// `chat` (none: their private chats).
async fn connected(chat: Option<i64>) -> (TestServer, Shared) {
    let (base, shared) = fake_telegram().await;
    let server = TestServer::start_with(|server| {
        server
            .with_limits(ServerLimits {
                feed_interval: Duration::from_millis(50),
                ..ServerLimits::default()
            })
            .with_telegram(Some(base))
    })
    .await;
    let mut conn = server.store.read_connection().await.expect("conn");
    let now = time::OffsetDateTime::now_utc();
    telegram::connect(
        &mut conn,
        &TelegramSettings {
            chat_id: chat.map(|c| c.to_string()),
            api_url: "http://127.0.0.1:9".into(),
            public_url: None,
            connected_at: now - time::Duration::minutes(1),
        },
        &TelegramSecrets {
            bot_token: BOT_TOKEN.into(),
        },
    )
    .await
    .expect("connects");
    for (user_id, name) in [("42", "alice"), ("43", "bob")] {
        let user = TelegramUser {
            user_id: user_id.into(),
            name: name.into(),
        };
        telegram::add_user(&mut conn, &user, now)
            .await
            .expect("maps");
    }
    (server, shared)
}

/// The callback data of button `column` (0 Approve, 1 Reject, 2 View) of item `index`.
fn button(message: &Value, index: usize, column: usize) -> String {
    message["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("a keyboard")
        .iter()
        .find(|row| {
            row[0]["text"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("[{index}]")))
        })
        .and_then(|row| row[column]["callback_data"].as_str())
        .expect("the button")
        .to_owned()
}

/// Item `index` of set `set` as the API shows it.
async fn item(server: &TestServer, set: &str, index: usize) -> Value {
    server.get(&format!("/api/change-sets/{set}")).await.1["items"][index].clone()
}

#[tokio::test]
async fn a_tap_decides_as_the_mapped_person_and_nothing_else_does() {
    let (server, shared) = connected(Some(CHAT)).await;
    let task = server.agent_and_task("Telegram").await;
    let set = server.propose(&task).await;
    let posted = wait_for(&shared, "sendMessage", |seen| !seen.is_empty()).await;
    assert_eq!(posted[0]["chat_id"], CHAT.to_string());
    let text = posted[0]["text"].as_str().expect("text");
    assert!(
        text.contains("update_task_priority") && text.contains("• priority: P0"),
        "{text}"
    );
    let message_id = 1;
    let approve = button(&posted[0], 0, 0);
    assert!(approve.len() <= 64);

    // Someone nobody mapped is refused in the chat, and nothing changes.
    let refused = tap(&shared, 99, CHAT, message_id, &approve);
    assert!(answered(&shared, &refused).await.contains("not a reviewer"));
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    // A callback no button of ours carries, and one naming a revision not shown.
    let forged = tap(&shared, 42, CHAT, message_id, &format!("{approve}:0"));
    assert!(answered(&shared, &forged).await.contains("not one of ours"));
    let stale_data = format!("{}:{}", approve.rsplit_once(':').expect("a revision").0, 1);
    let stale = tap(&shared, 42, CHAT, message_id, &stale_data);
    let said = answered(&shared, &stale).await;
    assert!(said.contains("Not decided"), "{said}");
    assert_eq!(item(&server, &set, 0).await["status"], "pending");

    // Alice's tap confirms, as her, and the message is edited to say so.
    let alice = tap(&shared, 42, CHAT, message_id, &approve);
    let said = answered(&shared, &alice).await;
    assert!(said.contains("Priority set to P0"), "{said}");
    let confirmed = item(&server, &set, 0).await;
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["decidedBy"], "telegram:42 (alice)");
    wait_for(&shared, "editMessageText", |seen| {
        seen.iter().any(|m| {
            m["text"]
                .as_str()
                .is_some_and(|t| t.contains("by telegram:42 (alice)"))
        })
    })
    .await;
    let again = tap(&shared, 42, CHAT, message_id, &approve);
    assert!(answered(&shared, &again).await.contains("already"));

    // Bob's Reject asks for the reason; alice's reply to that question is not his, his
    // reply rejects with it.
    let reject = button(&posted[0], 1, 1);
    let bob = tap(&shared, 43, CHAT, message_id, &reject);
    assert!(answered(&shared, &bob).await.contains("reason"));
    let asked = wait_for(&shared, "sendMessage", |seen| {
        seen.iter()
            .any(|m| m["reply_markup"]["force_reply"] == true)
    })
    .await;
    let question = asked
        .iter()
        .position(|m| m["reply_markup"]["force_reply"] == true)
        .expect("the question");
    // The fake numbers every message it answers: the question is the call's number.
    let question_id = {
        let fake = shared.0.lock().expect("lock");
        let mut n = 0;
        let mut found = None;
        for (method, body) in &fake.calls {
            if method != "getUpdates" {
                n += 1;
                if method == "sendMessage" && *body == asked[question] {
                    found = Some(n);
                }
            }
        }
        found.expect("numbered")
    };
    reply(&shared, 42, CHAT, question_id, "alice's words");
    reply(&shared, 43, CHAT, question_id, "not this sprint");
    wait_for(&shared, "editMessageText", |seen| {
        seen.iter().any(|m| {
            m["text"]
                .as_str()
                .is_some_and(|t| t.contains("not this sprint"))
        })
    })
    .await;
    let rejected = item(&server, &set, 1).await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["decidedBy"], "telegram:43 (bob)");
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert!(!shown.to_string().contains("alice's words"), "{shown}");
    // Posted once, asked once, bob told; alice's reply was to no question of hers.
    let sent = wait_for(&shared, "sendMessage", |seen| seen.len() >= 3).await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(
        sent[2]["text"]
            .as_str()
            .is_some_and(|t| t.contains("rejected")),
        "{sent:?}"
    );
    assent_tests::assert_proven(&server.store, "a tap on Telegram decides").await;
}

#[tokio::test]
async fn each_private_chat_gets_the_set_and_a_decision_on_the_page_edits_every_message() {
    let (server, shared) = connected(None).await;
    // The first long poll is told to wait: the poller waits it out and polls again.
    shared.0.lock().expect("lock").too_many = Some(1);
    let task = server.agent_and_task("Telegram").await;
    let set = server.propose(&task).await;
    let posted = wait_for(&shared, "sendMessage", |seen| seen.len() == 2).await;
    let mut chats: Vec<String> = posted
        .iter()
        .map(|m| m["chat_id"].as_str().expect("a chat").to_owned())
        .collect();
    chats.sort();
    assert_eq!(chats, ["42", "43"]);
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/reject"),
            json!({"reason": "decided on the page"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let edited = wait_for(&shared, "editMessageText", |seen| {
        let chats: BTreeSet<&str> = seen
            .iter()
            .filter(|m| {
                m["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("decided on the page"))
            })
            .filter_map(|m| m["chat_id"].as_str())
            .collect();
        chats.len() == 2
    })
    .await;
    assert!(edited.iter().all(|m| m["message_id"].as_i64().is_some()));
    // After the 429, the poller came back; a tap on the decided item changes nothing.
    let private = posted
        .iter()
        .find(|m| m["chat_id"] == "42")
        .expect("alice's");
    let late = tap(&shared, 42, 42, 1, &button(private, 0, 0));
    let said = answered(&shared, &late).await;
    assert!(said.contains("already rejected"), "{said}");
    assert!(calls(&shared, "getUpdates").len() >= 2);
    assert_eq!(item(&server, &set, 0).await["status"], "rejected");
    assent_tests::assert_proven(&server.store, "decided on the page").await;
}

/// One person across doors (THREATS 9): under a quorum of 2, alice's tap in Telegram
/// and alice on the command line are one approver; bob's tap is the second person.
#[tokio::test]
async fn alice_in_telegram_and_on_the_command_line_is_one_approver() {
    let (server, shared) = connected(Some(CHAT)).await;
    let task = server.agent_and_task("Telegram").await;
    let (status, body) = server
        .send_as(
            crate::support::TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/rules/update_task_priority",
            &json!({"action": "ask", "approvals": 2}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let set = server.propose(&task).await;
    let posted = wait_for(&shared, "sendMessage", |seen| !seen.is_empty()).await;
    assert!(
        posted[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("approvals 0 of 2")),
        "{posted:?}"
    );
    let approve = button(&posted[0], 0, 0);
    let alice = tap(&shared, 42, CHAT, 1, &approve);
    let said = answered(&shared, &alice).await;
    assert!(said.contains("1 of 2"), "{said}");
    wait_for(&shared, "editMessageText", |seen| {
        seen.iter().any(|m| {
            m["text"]
                .as_str()
                .is_some_and(|t| t.contains("approvals 1 of 2 (by telegram:42 (alice))"))
        })
    })
    .await;

    // What `assent confirm --as alice` does: the engine over the same database.
    let cli = assent_journal_host::journal_engine(server.store.clone())
        .await
        .expect("an engine");
    let id: uuid::Uuid = set.parse().expect("a set id");
    let again = cli
        .confirmations()
        .by("alice")
        .confirm_item(
            assent_confirm::ItemRef::new(id, 0),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .expect_err("alice twice is not a quorum");
    assert!(
        again
            .to_string()
            .contains("alice has approved item 0 already"),
        "{again}"
    );
    assert_eq!(item(&server, &set, 0).await["status"], "pending");

    let bob = tap(&shared, 43, CHAT, 1, &approve);
    answered(&shared, &bob).await;
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assent_tests::assert_proven(&server.store, "telegram alice and bob").await;
}
