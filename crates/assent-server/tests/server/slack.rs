//! Slack's buttons against a local fake of Slack's Web API (an axum server that records
//! every call and checks messages against Block Kit's limits): each queued set is
//! posted once, a signed click decides through the engine as the mapped person, a
//! decision made anywhere rewrites the message, and a forged signature, an old
//! timestamp, a replay, an unmapped user, a double click and a click on an item decided
//! elsewhere change nothing and say why. Socket Mode against a local WebSocket server
//! speaking its envelopes: each acknowledged, decided the same way, and a `disconnect`
//! followed by a new connection.

use crate::support::TestServer;
use assent_confirm::ItemRef;
use assent_server::ServerLimits;
use assent_store::slack::{self, SlackSecrets, SlackSettings, SlackUser};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SIGNING_SECRET: &str = "test-signing-secret";
const BOT_TOKEN: &str = "xoxb-test-token";
const APP_TOKEN: &str = "xapp-test-token";

/// What the fake recorded: each call's method and body, and every broken rule.
#[derive(Default)]
struct Recorded {
    calls: Vec<(String, Value)>,
    broken: Vec<String>,
    /// What `apps.connections.open` answers: the test's Socket Mode server.
    socket_url: Option<String>,
}

type Shared = Arc<Mutex<Recorded>>;

/// Slack's Web API as far as the app uses it, on a random loopback port.
async fn fake_slack() -> (String, Shared) {
    let recorded = Shared::default();
    let app = axum::Router::new()
        .route("/api/{method}", post(answer))
        .with_state(recorded.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/api/", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, recorded)
}

async fn answer(
    State(recorded): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let mut recorded = recorded.lock().expect("lock");
    let token = if method == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {token}"))
    {
        recorded
            .broken
            .push(format!("{method}: not the token {token}"));
    }
    if method == "chat.postMessage" || method == "chat.update" {
        check_block_kit(&body, &mut recorded.broken);
    }
    let n = recorded.calls.len();
    let url = recorded.socket_url.clone();
    recorded.calls.push((method, body));
    Json(json!({"ok": true, "ts": format!("1700000000.{n:06}"), "url": url}))
}

/// Block Kit's limits: 50 blocks, 3,000 characters a section, 25 elements an actions
/// block.
fn check_block_kit(body: &Value, broken: &mut Vec<String>) {
    let blocks = body["blocks"].as_array().cloned().unwrap_or_default();
    if blocks.len() > 50 {
        broken.push(format!("{} blocks", blocks.len()));
    }
    for block in blocks {
        if let Some(text) = block["text"]["text"].as_str()
            && text.chars().count() > 3_000
        {
            broken.push("a section over 3,000 characters".to_owned());
        }
        if block["type"] == "actions" && block["elements"].as_array().map_or(0, Vec::len) > 25 {
            broken.push("an actions block over 25 elements".to_owned());
        }
    }
}

/// A server that reads the change feed often, with Slack connected to the fake and
/// `U1` mapped to alice, `U2` to bob.
async fn connected() -> (TestServer, Shared) {
    connected_with(|server| server, None).await
}

/// [`connected`], the server configured by `configure` too, and the fake answering
/// `apps.connections.open` with `socket_url`.
async fn connected_with(
    configure: impl FnOnce(assent_server::Server) -> assent_server::Server,
    socket_url: Option<String>,
) -> (TestServer, Shared) {
    let server = TestServer::start_with(|server| {
        configure(server.with_limits(ServerLimits {
            feed_interval: Duration::from_millis(50),
            ..ServerLimits::default()
        }))
    })
    .await;
    let (base, recorded) = fake_slack().await;
    recorded.lock().expect("lock").socket_url = socket_url;
    let mut conn = server.store.read_connection().await.expect("conn");
    let now = time::OffsetDateTime::now_utc();
    slack::connect(
        &mut conn,
        &SlackSettings {
            channel: "C1".into(),
            api_url: base,
            public_url: Some("https://assent.example".into()),
            connected_at: now - time::Duration::minutes(1),
        },
        &SlackSecrets {
            bot_token: BOT_TOKEN.into(),
            signing_secret: SIGNING_SECRET.into(),
        },
    )
    .await
    .expect("connects");
    for (user_id, name) in [("U1", "alice"), ("U2", "bob")] {
        let user = SlackUser {
            user_id: user_id.into(),
            name: name.into(),
        };
        slack::add_user(&mut conn, &user, now).await.expect("maps");
    }
    (server, recorded)
}

/// The calls of `method` recorded so far.
fn calls(recorded: &Shared, method: &str) -> Vec<Value> {
    let recorded = recorded.lock().expect("lock");
    assert!(recorded.broken.is_empty(), "{:?}", recorded.broken);
    recorded
        .calls
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, body)| body.clone())
        .collect()
}

/// Waits (up to 10 s) until `check` holds for the calls of `method`; returns them.
async fn wait_for(recorded: &Shared, method: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..200 {
        let seen = calls(recorded, method);
        if check(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {method}: {:?}", calls(recorded, method));
}

/// The `value` of the button `action` of item `index` in a message, if it has one.
fn button(message: &Value, action: &str, index: usize) -> Option<String> {
    message["blocks"]
        .as_array()?
        .iter()
        .filter(|block| block["block_id"] == format!("item-{index}"))
        .flat_map(|block| block["elements"].as_array().cloned().unwrap_or_default())
        .find(|element| element["action_id"] == action)
        .and_then(|element| element["value"].as_str().map(str::to_owned))
}

/// Whether an ephemeral message to `user` says `text`.
fn told(seen: &[Value], user: &str, text: &str) -> bool {
    seen.iter()
        .any(|body| body["user"] == user && body["text"].as_str().is_some_and(|t| t.contains(text)))
}

/// Posts `payload` to the interactions route as Slack would, signed with `secret` at
/// `seconds` from now; returns the status and the raw request for replays.
async fn click(
    server: &TestServer,
    payload: &Value,
    secret: &str,
    seconds: i64,
) -> (u16, reqwest::RequestBuilder) {
    let body = format!(
        "payload={}",
        form_urlencoded::byte_serialize(payload.to_string().as_bytes()).collect::<String>()
    );
    let timestamp = (time::OffsetDateTime::now_utc().unix_timestamp() + seconds).to_string();
    let signature = assent_webhooks::slack_signature(secret, &timestamp, body.as_bytes());
    let request = server
        .client
        .post(format!("{}/api/slack/interactions", server.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp)
        .header("x-slack-signature", signature)
        .body(body);
    let again = request.try_clone().expect("a plain body");
    let status = request.send().await.expect("sends").status().as_u16();
    (status, again)
}

fn approve(user: &str, value: &str) -> Value {
    json!({"type": "block_actions", "user": {"id": user}, "channel": {"id": "C1"},
        "trigger_id": "t1", "actions": [{"action_id": "approve", "value": value}]})
}

/// Item `index` of set `set` as the API shows it.
async fn item(server: &TestServer, set: &str, index: usize) -> Value {
    server.get(&format!("/api/change-sets/{set}")).await.1["items"][index].clone()
}

#[tokio::test]
async fn a_signed_click_decides_and_nothing_else_does() {
    let (server, recorded) = connected().await;
    let task = server.agent_and_task("Slack").await;
    let set = server.propose(&task).await;
    let posted = wait_for(&recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["channel"], "C1");
    let value = button(&posted[0], "approve", 0).expect("an Approve button");
    let text = posted[0].to_string();
    assert!(
        text.contains("update_task_priority")
            && text.contains("https://assent.example/#change-set-")
    );

    // A forged signature and an old timestamp are refused before the body is read.
    let (status, _) = click(&server, &approve("U1", &value), "not-the-secret", 0).await;
    assert_eq!(status, 403);
    let (status, _) = click(&server, &approve("U1", &value), SIGNING_SECRET, -400).await;
    assert_eq!(status, 403);
    // A Slack user nobody mapped is told so, and nothing changes.
    let (status, _) = click(&server, &approve("U9", &value), SIGNING_SECRET, 0).await;
    assert_eq!(status, 200);
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U9", "not a reviewer here")
    })
    .await;
    assert_eq!(item(&server, &set, 0).await["status"], "pending");

    // Alice's signed click confirms, as her, and the message loses that button.
    let (status, replay) = click(&server, &approve("U1", &value), SIGNING_SECRET, 0).await;
    assert_eq!(status, 200);
    let updated = wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| button(m, "approve", 0).is_none())
    })
    .await;
    let last = updated.last().expect("an update");
    assert_eq!(last["ts"], posted_ts(&recorded));
    assert!(last.to_string().contains("by slack:U1 (alice)"), "{last}");
    let confirmed = item(&server, &set, 0).await;
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["decidedBy"], "slack:U1 (alice)");

    // The same request again is a replay; a second click is told it is decided.
    assert_eq!(replay.send().await.expect("sends").status().as_u16(), 409);
    let (status, _) = click(&server, &approve("U1", &value), SIGNING_SECRET, 1).await;
    assert_eq!(status, 200);
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U1", "already confirmed")
    })
    .await;

    // Decided on the page: the message is rewritten, and a click on it changes nothing.
    let other = button(&posted[0], "approve", 1).expect("item 1's button");
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/1/reject"),
            json!({"reason": "not this sprint"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter()
            .any(|m| m.to_string().contains("not this sprint"))
    })
    .await;
    let (status, _) = click(&server, &approve("U2", &other), SIGNING_SECRET, 0).await;
    assert_eq!(status, 200);
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U2", "already rejected")
    })
    .await;
    assert_eq!(item(&server, &set, 1).await["status"], "rejected");
    assert_eq!(calls(&recorded, "chat.postMessage").len(), 1, "posted once");
    assent_tests::assert_proven(&server.store, "a signed click confirms").await;
}

/// The `ts` the fake gave the first post.
fn posted_ts(recorded: &Shared) -> Value {
    let recorded = recorded.lock().expect("lock");
    let index = recorded
        .calls
        .iter()
        .position(|(m, _)| m == "chat.postMessage")
        .expect("a post");
    json!(format!("1700000000.{index:06}"))
}

#[tokio::test]
async fn reject_asks_for_a_reason_in_a_modal() {
    let (server, recorded) = connected().await;
    let task = server.agent_and_task("Slack").await;
    let set = server.propose(&task).await;
    let posted = wait_for(&recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    let value = button(&posted[0], "reject", 0).expect("a Reject button");
    let reject = json!({"type": "block_actions", "user": {"id": "U1"}, "channel": {"id": "C1"},
        "trigger_id": "trigger-1", "actions": [{"action_id": "reject", "value": value}]});
    assert_eq!(click(&server, &reject, SIGNING_SECRET, 0).await.0, 200);
    let opened = wait_for(&recorded, "views.open", |seen| !seen.is_empty()).await;
    assert_eq!(opened[0]["trigger_id"], "trigger-1");
    let view = &opened[0]["view"];
    assert_eq!(
        item(&server, &set, 0).await["status"],
        "pending",
        "nothing yet"
    );
    let submitted = json!({"type": "view_submission", "user": {"id": "U1"}, "view": {
        "callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
        "state": {"values": {"reason": {"reason": {"type": "plain_text_input",
            "value": "wrong task"}}}}}});
    assert_eq!(click(&server, &submitted, SIGNING_SECRET, 0).await.0, 200);
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| m.to_string().contains("wrong task"))
    })
    .await;
    let rejected = item(&server, &set, 0).await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["reason"], "wrong task");
    assert_eq!(rejected["decidedBy"], "slack:U1 (alice)");
    assent_tests::assert_proven(&server.store, "rejected in a modal").await;
}

#[tokio::test]
async fn two_mapped_people_meet_a_quorum_of_two_and_one_person_twice_does_not() {
    let (server, recorded) = connected().await;
    let task = server.agent_and_task("Slack").await;
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
    let posted = wait_for(&recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    let value = button(&posted[0], "approve", 0).expect("Approve");
    assert!(posted[0].to_string().contains("approvals 0 of 2"));

    assert_eq!(
        click(&server, &approve("U1", &value), SIGNING_SECRET, 0)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U1", "1 of 2")
    })
    .await;
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| {
            m.to_string()
                .contains("approvals 1 of 2 (by slack:U1 (alice))")
        })
    })
    .await;
    assert_eq!(
        click(&server, &approve("U1", &value), SIGNING_SECRET, 1)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        seen.iter().filter(|m| m["user"] == "U1").count() == 2
    })
    .await;
    assert_eq!(
        item(&server, &set, 0).await["status"],
        "pending",
        "one person twice"
    );

    assert_eq!(
        click(&server, &approve("U2", &value), SIGNING_SECRET, 0)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| button(m, "approve", 0).is_none())
    })
    .await;
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assent_tests::assert_proven(&server.store, "two mapped people meet a quorum").await;
}

/// Puts a quorum of 2 on `update_task_priority` and queues a set; returns its id and
/// item 0's Approve value.
async fn under_a_quorum_of_two(server: &TestServer, recorded: &Shared) -> (String, String) {
    let task = server.agent_and_task("Slack").await;
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
    let posted = wait_for(recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    let value = button(&posted[0], "approve", 0).expect("Approve");
    (set, value)
}

#[tokio::test]
async fn one_person_through_slack_and_the_command_line_is_one_approver() {
    let (server, recorded) = connected().await;
    let (set, value) = under_a_quorum_of_two(&server, &recorded).await;
    let id: uuid::Uuid = set.parse().expect("a set id");
    // What `assent confirm --as NAME` does: the engine over the same database.
    let cli = assent_journal_host::journal_engine(server.store.clone())
        .await
        .expect("an engine");
    let now = time::OffsetDateTime::now_utc();

    // Alice in Slack, then alice on the command line: the same person twice.
    assert_eq!(
        click(&server, &approve("U1", &value), SIGNING_SECRET, 0)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U1", "1 of 2")
    })
    .await;
    let again = cli
        .confirmations()
        .by("alice")
        .confirm_item(ItemRef::new(id, 0), now)
        .await
        .expect_err("alice twice is not a quorum");
    assert!(
        again
            .to_string()
            .contains("alice has approved item 0 already"),
        "{again}"
    );
    assert_eq!(
        item(&server, &set, 0).await["status"],
        "pending",
        "nothing changed"
    );
    let approvals = item(&server, &set, 0).await["approvals"].clone();
    assert_eq!(
        approvals.as_array().map(Vec::len),
        Some(1),
        "no second approval recorded: {approvals}"
    );

    // Bob on the command line is the second person: the quorum is met.
    cli.confirmations()
        .by("bob")
        .confirm_item(ItemRef::new(id, 0), now)
        .await
        .expect("bob meets the quorum");
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assent_tests::assert_proven(&server.store, "slack alice and cli bob").await;
}

#[tokio::test]
async fn the_command_line_first_then_the_same_person_in_slack_is_refused() {
    let (server, recorded) = connected().await;
    let (set, value) = under_a_quorum_of_two(&server, &recorded).await;
    let id: uuid::Uuid = set.parse().expect("a set id");
    let cli = assent_journal_host::journal_engine(server.store.clone())
        .await
        .expect("an engine");
    cli.confirmations()
        .by("alice")
        .confirm_item(ItemRef::new(id, 0), time::OffsetDateTime::now_utc())
        .await
        .expect("alice's approval, short of the quorum");
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    assert_eq!(
        click(&server, &approve("U1", &value), SIGNING_SECRET, 0)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U1", "approved item 0 already")
    })
    .await;
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    assert_eq!(
        click(&server, &approve("U2", &value), SIGNING_SECRET, 1)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| button(m, "approve", 0).is_none())
    })
    .await;
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assent_tests::assert_proven(&server.store, "cli alice and slack bob").await;
}

/// The next text the app sends over the socket, as JSON (pings skipped).
async fn next_text(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) -> Value {
    use futures_util::StreamExt;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("the app answers in time")
            .expect("the socket is open")
            .expect("a message");
        if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
            return serde_json::from_str(&text).expect("JSON");
        }
    }
}

/// The app's next Socket Mode connection to `listener`, greeted with `hello`.
async fn next_socket(
    listener: &tokio::net::TcpListener,
) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    use futures_util::SinkExt;
    let (stream, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("the app connects in time")
        .expect("accepts");
    let mut socket = tokio_tungstenite::accept_async(stream)
        .await
        .expect("a WebSocket");
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            json!({"type": "hello", "num_connections": 1}).to_string(),
        ))
        .await
        .expect("hello");
    socket
}

#[tokio::test]
async fn socket_mode_acknowledges_each_envelope_decides_and_reconnects() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("address"));
    let (server, recorded) =
        connected_with(|server| server.with_slack_socket(APP_TOKEN), Some(url)).await;
    let task = server.agent_and_task("Socket").await;
    let set = server.propose(&task).await;
    let posted = wait_for(&recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    let first = button(&posted[0], "approve", 0).expect("Approve 0");
    let second = button(&posted[0], "approve", 1).expect("Approve 1");

    let mut socket = next_socket(&listener).await;
    let envelope = json!({"envelope_id": "e1", "type": "interactive",
        "accepts_response_payload": false, "payload": approve("U1", &first)});
    socket
        .send(Message::text(envelope.to_string()))
        .await
        .expect("sends");
    assert_eq!(next_text(&mut socket).await, json!({"envelope_id": "e1"}));
    wait_for(&recorded, "chat.update", |seen| {
        seen.iter().any(|m| button(m, "approve", 0).is_none())
    })
    .await;
    assert_eq!(
        item(&server, &set, 0).await["decidedBy"],
        "slack:U1 (alice)"
    );

    // Slack asks the app to reconnect: it opens a new connection and goes on there.
    socket
        .send(Message::text(
            json!({"type": "disconnect", "reason": "refresh_requested"}).to_string(),
        ))
        .await
        .expect("sends");
    let mut again = next_socket(&listener).await;
    let envelope = json!({"envelope_id": "e2", "type": "interactive",
        "payload": approve("U9", &second)});
    again
        .send(Message::text(envelope.to_string()))
        .await
        .expect("sends");
    assert_eq!(next_text(&mut again).await, json!({"envelope_id": "e2"}));
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U9", "not a reviewer here")
    })
    .await;
    assert_eq!(item(&server, &set, 1).await["status"], "pending");
    assert_eq!(calls(&recorded, "apps.connections.open").len(), 2);
}

/// A reviewer token issued to `person` (`POST /api/tokens {role, person}`): its secret.
async fn token_of(server: &TestServer, person: Option<&str>) -> String {
    let (status, body) = server
        .post("/api/tokens", json!({"role": "reviewer", "person": person}))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["person"], json!(person));
    body["secret"].as_str().expect("secret").to_owned()
}

/// `POST /api/change-sets/{set}/items/0/confirm` with `secret`: status and body.
async fn confirm_with(server: &TestServer, secret: &str, set: &str) -> (u16, Value) {
    server
        .send_as(
            secret,
            reqwest::Method::POST,
            &format!("/api/change-sets/{set}/items/0/confirm"),
            &json!({}),
        )
        .await
}

#[tokio::test]
async fn alice_in_slack_and_through_her_token_is_one_approver_and_a_token_naming_nobody_counts_for_none()
 {
    let (server, recorded) = connected().await;
    let (set, value) = under_a_quorum_of_two(&server, &recorded).await;
    let alice = token_of(&server, Some("alice")).await;
    let bob = token_of(&server, Some("bob")).await;
    let nobody = token_of(&server, None).await;

    // Alice in Slack, then alice through her token: one person.
    assert_eq!(
        click(&server, &approve("U1", &value), SIGNING_SECRET, 0)
            .await
            .0,
        200
    );
    wait_for(&recorded, "chat.postEphemeral", |seen| {
        told(seen, "U1", "1 of 2")
    })
    .await;
    let (status, body) = confirm_with(&server, &alice, &set).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("has approved item 0 already"),
        "{body}"
    );
    // A token naming nobody, and the server's own token: no quorum counts them.
    for secret in [nobody.as_str(), crate::support::TOKEN] {
        let (status, body) = confirm_with(&server, secret, &set).await;
        assert_eq!(status, 409, "{body}");
        assert!(
            body.to_string().contains("names no person; re-issue it with `assent tokens add --role reviewer --person NAME` to approve items needing 2 people"),
            "{body}"
        );
    }
    let pending = item(&server, &set, 0).await;
    assert_eq!(
        pending["status"], "pending",
        "one person met a two-person rule"
    );
    assert_eq!(
        pending["approvals"].as_array().map(Vec::len),
        Some(1),
        "{pending}"
    );

    // Bob through his token is the second person.
    let (status, body) = confirm_with(&server, &bob, &set).await;
    assert_eq!(status, 200, "{body}");
    let confirmed = item(&server, &set, 0).await;
    assert_eq!(confirmed["status"], "confirmed");
    assert!(
        confirmed["decidedBy"]
            .as_str()
            .is_some_and(|by| by.starts_with("token:") && by.ends_with(" (bob)")),
        "{confirmed}"
    );
    assent_tests::assert_proven(&server.store, "alice in slack and bob's token").await;
}

#[tokio::test]
async fn a_click_sent_again_with_its_signature_re_cased_is_a_replay() {
    let (server, recorded) = connected().await;
    let task = server.agent_and_task("Slack").await;
    server.propose(&task).await;
    let posted = wait_for(&recorded, "chat.postMessage", |seen| !seen.is_empty()).await;
    let value = button(&posted[0], "approve", 0).expect("Approve");
    let (status, replay) = click(&server, &approve("U1", &value), SIGNING_SECRET, 0).await;
    assert_eq!(status, 200);
    let mut replay = replay.build().expect("a request");
    let signature = replay.headers()["x-slack-signature"]
        .to_str()
        .expect("text")
        .to_owned();
    let recased = format!("v0={}", signature["v0=".len()..].to_ascii_uppercase());
    assert_ne!(recased, signature);
    replay.headers_mut().insert(
        "x-slack-signature",
        recased.parse().expect("a header value"),
    );
    let answered = server.client.execute(replay).await.expect("sends");
    assert_eq!(
        answered.status().as_u16(),
        409,
        "a re-cased replay is a replay"
    );
}
