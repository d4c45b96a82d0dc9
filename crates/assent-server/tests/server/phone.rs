//! The phone doors (issue 56): ntfy against a local fake of ntfy's JSON publish (an axum
//! server that records every publish and checks its shape and ntfy's limits), and
//! email against a real SMTP server (`aiosmtpd`). Each queued item is sent once with
//! one-time Approve / Reject links on the public URL and a View link; a tap decides
//! through the engine as the channel's person while the agent's long poll waits, and a
//! decision made elsewhere is followed up naming who decided. The links themselves: a
//! replay, another item, another revision, an expired link, a guessed token and a link
//! used after the item was decided elsewhere each change nothing and say why.

use crate::support::{TOKEN, TestServer};
use assent_confirm::phone::{ChannelKind, LinkAction};
use assent_server::ServerLimits;
use assent_store::phone::{self as links, AnswerLink};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// The public URL the server is told it is reached at; taps map it to the test server.
const PUBLIC: &str = "https://assent.example";
const NTFY_TOKEN: &str = "tk_test_secret";

/// What the fake recorded: each publish, and every broken rule.
#[derive(Default)]
struct Recorded {
    published: Vec<Value>,
    broken: Vec<String>,
}

type Shared = Arc<Mutex<Recorded>>;

/// ntfy's JSON publish (`POST /` on the server root), on a random loopback port.
async fn fake_ntfy() -> (String, Shared) {
    let recorded = Shared::default();
    let app = axum::Router::new()
        .route("/", post(publish))
        .with_state(recorded.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, recorded)
}

async fn publish(
    State(recorded): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let mut recorded = recorded.lock().expect("lock");
    let mut broken = Vec::new();
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {NTFY_TOKEN}"))
    {
        broken.push("no bearer token".to_owned());
    }
    if body["topic"] != "alerts" {
        broken.push(format!("topic {}", body["topic"]));
    }
    let message = body["message"].as_str().unwrap_or_default();
    if message.is_empty() || message.len() > 4096 {
        broken.push(format!("message of {} bytes", message.len()));
    }
    if body["title"]
        .as_str()
        .is_none_or(|t| t.is_empty() || t.chars().count() > 250)
    {
        broken.push("title".to_owned());
    }
    if !body["priority"]
        .as_i64()
        .is_some_and(|p| (1..=5).contains(&p))
    {
        broken.push("priority".to_owned());
    }
    if let Some(actions) = body.get("actions") {
        let actions = actions.as_array().cloned().unwrap_or_default();
        if actions.len() > 3 {
            broken.push("more than 3 actions".to_owned());
        }
        for action in &actions {
            let url = action["url"].as_str().unwrap_or_default();
            match action["action"].as_str() {
                Some("http") if action["method"] == "POST" && url.starts_with(PUBLIC) => {}
                Some("view") if url.starts_with(PUBLIC) => {}
                _ => broken.push(format!("action {action}")),
            }
            if action["label"].as_str().is_none_or(str::is_empty) {
                broken.push("an action without a label".to_owned());
            }
        }
    }
    recorded.broken.extend(broken);
    recorded.published.push(body);
    Json(json!({"id": "m1", "event": "message"}))
}

/// A server whose phone sender runs every 50 ms, with its public URL.
async fn server() -> TestServer {
    TestServer::start_with(|server| {
        server.with_public_url(PUBLIC).with_limits(ServerLimits {
            feed_interval: Duration::from_millis(50),
            ..ServerLimits::default()
        })
    })
    .await
}

/// Adds a channel of `kind` (queued items from a minute ago on are sent to it).
async fn add_channel(
    server: &TestServer,
    kind: ChannelKind,
    address: &str,
    secret: Option<&str>,
) -> String {
    let engine = assent_journal_host::journal_engine(server.store.clone())
        .await
        .expect("an engine");
    let channel = engine
        .phone()
        .add_channel(
            kind,
            address,
            "alice",
            secret,
            OffsetDateTime::now_utc() - time::Duration::minutes(1),
        )
        .await
        .expect("a channel");
    channel.id
}

fn published(recorded: &Shared) -> Vec<Value> {
    let recorded = recorded.lock().expect("lock");
    assert!(recorded.broken.is_empty(), "{:?}", recorded.broken);
    recorded.published.clone()
}

/// Waits (up to 10 s) until `check` holds for what was published; returns it.
async fn wait_published(recorded: &Shared, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..200 {
        let seen = published(recorded);
        if check(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never published as expected: {:?}", published(recorded));
}

/// The URL of `label`'s action in `message`.
fn action(message: &Value, label: &str) -> String {
    message["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["label"] == label)
        .and_then(|a| a["url"].as_str())
        .expect("the action")
        .to_owned()
}

/// What a phone does with a link: `METHOD` it, the public URL mapped to the server.
async fn tap(
    server: &TestServer,
    method: reqwest::Method,
    url: &str,
    form: &[(&str, &str)],
) -> (u16, String) {
    let url = url.replacen(PUBLIC, &server.base, 1);
    let response = server
        .client
        .request(method, url)
        .form(form)
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

async fn item(server: &TestServer, set: &str, index: usize) -> Value {
    let (status, body) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(status, 200, "{body}");
    body["items"][index].clone()
}

/// How many decisions the database holds for `set`.
async fn decisions(server: &TestServer, set: &str) -> usize {
    let mut conn = server.store.read_connection().await.expect("conn");
    assent_store::decisions::for_change_set(&mut conn, set.parse().expect("an id"))
        .await
        .expect("decisions")
        .len()
}

#[tokio::test]
async fn a_tap_on_ntfy_answers_the_waiting_agent_and_a_decision_elsewhere_is_followed_up() {
    let server = server().await;
    let (ntfy, recorded) = fake_ntfy().await;
    let task = server.agent_and_task("Phone").await;
    let set = server.propose(&task).await;
    // The agent waits two minutes: the notification says until when.
    let until = OffsetDateTime::now_utc() + time::Duration::minutes(2);
    {
        let mut conn = server.store.read_connection().await.expect("conn");
        assent_store::waits::record(&mut conn, set.parse().expect("id"), until)
            .await
            .expect("a wait");
    }
    add_channel(
        &server,
        ChannelKind::Ntfy,
        &format!("{ntfy}alerts"),
        Some(NTFY_TOKEN),
    )
    .await;
    let seen = wait_published(&recorded, |seen| seen.len() == 2).await;
    let first = seen
        .iter()
        .find(|m| m["message"].as_str().is_some_and(|t| t.contains("P0")))
        .expect("item 0's notification")
        .clone();
    assert_eq!(first["title"], "triage: update_task_priority");
    let message = first["message"].as_str().expect("message");
    assert!(
        message.contains(&format!(
            "waits until {}",
            assent_domain::format_time(until)
        )),
        "{message}"
    );
    assert!(action(&first, "View").contains("#change-set-"), "{first}");

    // The agent's long poll waits; the tap on Approve answers it.
    let waiting = {
        let request = server.request(
            reqwest::Method::GET,
            &format!("/api/change-sets/{set}/outcome?wait=30"),
        );
        tokio::spawn(async move { crate::support::read(request.send().await.expect("send")).await })
    };
    let (status, said) = tap(
        &server,
        reqwest::Method::POST,
        &action(&first, "Approve"),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{said}");
    assert!(said.contains("Approved as ntfy:n"), "{said}");
    let confirmed = item(&server, &set, 0).await;
    assert_eq!(confirmed["status"], "confirmed");
    assert!(
        confirmed["decidedBy"]
            .as_str()
            .is_some_and(|by| by.starts_with("ntfy:n") && by.ends_with(" (alice)")),
        "{confirmed}"
    );

    // Item 1 is rejected on the page: its notification is followed up naming who.
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/1/reject"),
            json!({"reason": "not now"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, outcome) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the agent is answered")
        .expect("the poll runs");
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["settled"], true, "{outcome}");
    let seen = wait_published(&recorded, |seen| {
        seen.iter().filter(|m| m.get("actions").is_none()).count() == 2
    })
    .await;
    let follow_ups: Vec<&Value> = seen.iter().filter(|m| m.get("actions").is_none()).collect();
    assert!(
        follow_ups.iter().any(|m| m["message"]
            .as_str()
            .is_some_and(|t| t.starts_with("rejected by"))),
        "{follow_ups:?}"
    );
    // The follow-up replaces the question: the same sequence id.
    assert!(
        follow_ups
            .iter()
            .any(|m| m["sequence_id"] == first["sequence_id"])
    );
    assert_eq!(
        seen.len(),
        4,
        "each item published once and followed up once"
    );
    assent_tests::assert_proven(&server.store, "a tap on ntfy confirms").await;
}

/// A link made as the sender makes them, for item `index` of `set` at `revision`.
async fn link(
    server: &TestServer,
    channel: &str,
    set: &str,
    index: usize,
    revision: u32,
    action: LinkAction,
    expires_at: OffsetDateTime,
) -> String {
    let token = assent_webhooks::phone::new_token();
    let mut conn = server.store.read_connection().await.expect("conn");
    links::insert_link(
        &mut conn,
        &links::token_hash(&token),
        &AnswerLink {
            channel_id: channel.to_owned(),
            change_set_id: set.parse::<Uuid>().expect("id"),
            item_index: index,
            revision,
            person: "alice".into(),
            action,
            expires_at,
            used_at: None,
        },
        OffsetDateTime::now_utc(),
    )
    .await
    .expect("a link");
    format!("{PUBLIC}/api/answer/{token}")
}

/// A queued set and an email channel nobody sends to (no sender runs without a public
/// URL): links are made by the test.
async fn queued() -> (TestServer, String, String) {
    let server = TestServer::start().await;
    let channel = add_channel(
        &server,
        ChannelKind::Email,
        "alice@example.com",
        Some(r#"{"smtp":"smtp://127.0.0.1:9","from":"alice@example.com"}"#),
    )
    .await;
    let task = server.agent_and_task("Links").await;
    let set = server.propose(&task).await;
    (server, channel, set)
}

fn later() -> OffsetDateTime {
    OffsetDateTime::now_utc() + time::Duration::minutes(5)
}

#[tokio::test]
async fn opening_a_link_decides_nothing_and_posting_it_decides_once() {
    let (server, channel, set) = queued().await;
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Reject, later()).await;
    // A mail scanner follows the link: it gets the page with one more button.
    let (status, page) = tap(&server, reqwest::Method::GET, &url, &[]).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("Reject this call?") && page.contains("<form method=\"post\">"),
        "{page}"
    );
    assert_eq!(item(&server, &set, 0).await["status"], "pending");

    let (status, said) = tap(
        &server,
        reqwest::Method::POST,
        &url,
        &[("reason", "not on a Friday")],
    )
    .await;
    assert_eq!(status, 200, "{said}");
    let rejected = item(&server, &set, 0).await;
    assert_eq!(rejected["status"], "rejected");
    // Replayed: refused, and nothing more is decided.
    let (status, said) = tap(&server, reqwest::Method::POST, &url, &[]).await;
    assert_eq!(status, 409);
    assert!(said.contains("it works once"), "{said}");
    assert_eq!(decisions(&server, &set).await, 1);
    assent_tests::assert_proven(&server.store, "a link decides once").await;
}

#[tokio::test]
async fn a_link_decides_its_own_item_whatever_the_request_names() {
    let (server, channel, set) = queued().await;
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Approve, later()).await;
    let (status, said) = tap(
        &server,
        reqwest::Method::POST,
        &format!("{url}?index=1&changeSetId={}", Uuid::nil()),
        &[("index", "1"), ("answer", "reject")],
    )
    .await;
    assert_eq!(status, 200, "{said}");
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assert_eq!(item(&server, &set, 1).await["status"], "pending");
    assert_eq!(decisions(&server, &set).await, 1);
}

#[tokio::test]
async fn a_link_for_an_older_revision_is_refused_and_says_so() {
    let server = TestServer::start().await;
    let channel = add_channel(&server, ChannelKind::Email, "alice@example.com", None).await;
    let task = server.agent_and_task("Quorum").await;
    let (status, body) = server
        .send_as(
            TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/rules/update_task_priority",
            &json!({"action": "ask", "approvals": 2}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let set = server.propose(&task).await;
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Approve, later()).await;
    // Bob edits the item under its quorum: a new revision.
    let bob = server.reviewer_token("bob").await;
    let (status, body) = server
        .send_as(
            &bob,
            reqwest::Method::POST,
            &format!("/api/change-sets/{set}/items/0/edit"),
            &json!({"args": {"priority": "P1"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let before = item(&server, &set, 0).await;
    assert_eq!(before["revision"], 1, "{before}");
    let (status, said) = tap(&server, reqwest::Method::POST, &url, &[]).await;
    assert_eq!(status, 409, "{said}");
    assert!(said.contains("revision 0 then, 1 now"), "{said}");
    assert_eq!(item(&server, &set, 0).await, before);
}

#[tokio::test]
async fn an_expired_link_is_too_late_and_changes_nothing() {
    let (server, channel, set) = queued().await;
    let ended = OffsetDateTime::now_utc() - time::Duration::seconds(1);
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Approve, ended).await;
    for method in [reqwest::Method::GET, reqwest::Method::POST] {
        let (status, said) = tap(&server, method, &url, &[]).await;
        assert_eq!(status, 410);
        assert!(
            said.contains(&format!(
                "too late: the agent stopped waiting at {}",
                assent_domain::format_time(ended)
            )),
            "{said}"
        );
    }
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    assert_eq!(decisions(&server, &set).await, 0);
}

#[tokio::test]
async fn a_guessed_token_answers_nothing() {
    let (server, channel, set) = queued().await;
    let _real = link(&server, &channel, &set, 0, 0, LinkAction::Approve, later()).await;
    for guess in [
        assent_webhooks::phone::new_token(),
        "0".repeat(64),
        "g".repeat(64),
        "x".to_owned(),
    ] {
        let (status, said) = tap(
            &server,
            reqwest::Method::POST,
            &format!("{PUBLIC}/api/answer/{guess}"),
            &[],
        )
        .await;
        assert_eq!(status, 404, "{guess}: {said}");
        assert!(said.contains("This link answers nothing"), "{said}");
    }
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    assert_eq!(decisions(&server, &set).await, 0);
}

#[tokio::test]
async fn a_link_used_after_the_item_was_decided_elsewhere_changes_nothing() {
    let (server, channel, set) = queued().await;
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Approve, later()).await;
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/reject"),
            json!({"reason": "no"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, said) = tap(&server, reqwest::Method::POST, &url, &[]).await;
    assert_eq!(status, 409, "{said}");
    assert!(
        said.contains("Already decided elsewhere (rejected by"),
        "{said}"
    );
    assert_eq!(item(&server, &set, 0).await["status"], "rejected");
    assert_eq!(decisions(&server, &set).await, 1);
    assent_tests::assert_proven(&server.store, "a late link changes nothing").await;
}

#[tokio::test]
async fn email_goes_through_a_real_smtp_server_with_one_time_links_and_a_follow_up() {
    let Some(python) = assent_tests::smtp::python() else {
        return;
    };
    let sink = assent_tests::smtp::SmtpSink::start(&python);
    let server = server().await;
    let secret = json!({"smtp": sink.url(), "from": "assent@example.com"}).to_string();
    add_channel(
        &server,
        ChannelKind::Email,
        "alice@example.com",
        Some(&secret),
    )
    .await;
    let task = server.agent_and_task("Mail").await;
    let set = server.propose(&task).await;
    let received = sink
        .wait_for(Duration::from_secs(20), |seen| seen.len() == 2)
        .await;
    assert_eq!(received.len(), 2, "{received:?}");
    let mail = received
        .iter()
        .find(|m| m["data"].as_str().is_some_and(|d| d.contains("P0")))
        .expect("item 0's email");
    assert_eq!(mail["to"], json!(["alice@example.com"]));
    // The message as sent, its quoted-printable soft line breaks undone.
    let data = mail["data"]
        .as_str()
        .expect("data")
        .replace("=\r\n", "")
        .replace("=\n", "")
        .replace("=3D", "=");
    assert!(data.contains("multipart/alternative"), "{data}");
    assert!(
        data.contains("text/plain") && data.contains("text/html"),
        "{data}"
    );
    let approve = data
        .lines()
        .find_map(|line| line.trim().strip_prefix("Approve: "))
        .expect("an Approve link in the plain text")
        .trim()
        .to_owned();
    assert!(
        approve.starts_with(&format!("{PUBLIC}/api/answer/")),
        "{approve}"
    );
    // Following the link (a scanner does) decides nothing; the page's button does.
    let (status, _) = tap(&server, reqwest::Method::GET, &approve, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    let (status, said) = tap(
        &server,
        reqwest::Method::POST,
        &approve,
        &[("answer", "approve")],
    )
    .await;
    assert_eq!(status, 200, "{said}");
    assert!(said.contains("Approved as email:n"), "{said}");
    let received = sink
        .wait_for(Duration::from_secs(20), |seen| seen.len() == 3)
        .await;
    let follow_up = received[2]["data"]
        .as_str()
        .expect("a follow-up")
        .replace("=\r\n", "")
        .replace("=\n", "");
    assert!(
        follow_up.contains("Decided: triage: update_task_priority"),
        "{follow_up}"
    );
    assert!(follow_up.contains("confirmed by email:n"), "{follow_up}");
    assent_tests::assert_proven(&server.store, "an email link confirms").await;
}

#[tokio::test]
async fn alice_through_a_link_and_on_the_command_line_is_one_approver() {
    let server = TestServer::start().await;
    let channel = add_channel(&server, ChannelKind::Ntfy, "https://ntfy.sh/alerts", None).await;
    let task = server.agent_and_task("Quorum").await;
    let (status, body) = server
        .send_as(
            TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/rules/update_task_priority",
            &json!({"action": "ask", "approvals": 2}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let set = server.propose(&task).await;
    let url = link(&server, &channel, &set, 0, 0, LinkAction::Approve, later()).await;
    let (status, said) = tap(&server, reqwest::Method::POST, &url, &[]).await;
    assert_eq!(status, 200, "{said}");
    assert_eq!(
        item(&server, &set, 0).await["status"],
        "pending",
        "one of two"
    );
    // What `assent confirm --as alice` does: the same person again, refused.
    let cli = assent_journal_host::journal_engine(server.store.clone())
        .await
        .expect("an engine");
    let id: Uuid = set.parse().expect("id");
    let again = cli
        .confirmations()
        .by("alice")
        .confirm_item(
            assent_confirm::ItemRef::new(id, 0),
            OffsetDateTime::now_utc(),
        )
        .await;
    assert!(again.is_err(), "alice twice: {again:?}");
    assert_eq!(item(&server, &set, 0).await["status"], "pending");
    // Bob is the second person.
    cli.confirmations()
        .by("bob")
        .confirm_item(
            assent_confirm::ItemRef::new(id, 0),
            OffsetDateTime::now_utc(),
        )
        .await
        .expect("bob approves");
    assert_eq!(item(&server, &set, 0).await["status"], "confirmed");
    assent_tests::assert_proven(&server.store, "a link and the command line").await;
}

/// The store's phone tables on every backend (PostgreSQL when
/// `ASSENT_TEST_POSTGRES_URL` is set): a link is used once and never after its
/// expiry, a post is claimed once, and a removed channel's unused links go.
#[tokio::test]
async fn the_phone_tables_behave_alike_on_every_backend() {
    use assent_store::phone::{Channel, Post, PostState};
    for backend in assent_tests::backends() {
        let (url, _dir) = backend.fresh_database().await;
        let store = assent_store::Store::open(&url).await.expect("opens");
        // Stored to the microsecond.
        let now = OffsetDateTime::now_utc();
        let now = now
            .replace_nanosecond(now.nanosecond() / 1000 * 1000)
            .expect("a time");
        let mut conn = store.read_connection().await.expect("conn");
        let channel = Channel {
            id: "n0123abcd".into(),
            kind: ChannelKind::Ntfy,
            address: "https://ntfy.sh/alerts".into(),
            person: "alice".into(),
            created_at: now,
        };
        links::add_channel(&mut conn, &channel, Some("tk_x"))
            .await
            .expect("adds");
        assert_eq!(
            links::channels(&mut conn).await.expect("lists"),
            vec![channel.clone()]
        );
        assert_eq!(
            links::channel_secret(&mut conn, &channel.id)
                .await
                .expect("reads")
                .as_deref(),
            Some("tk_x")
        );
        let set = Uuid::from_u128(7);
        let link = |action, expires_at| AnswerLink {
            channel_id: channel.id.clone(),
            change_set_id: set,
            item_index: 1,
            revision: 2,
            person: "alice".into(),
            action,
            expires_at,
            used_at: None,
        };
        let (good, old) = (
            assent_webhooks::phone::new_token(),
            assent_webhooks::phone::new_token(),
        );
        let later = now + time::Duration::minutes(5);
        let earlier = now - time::Duration::seconds(1);
        for (token, expires) in [(&good, later), (&old, earlier)] {
            links::insert_link(
                &mut conn,
                &links::token_hash(token),
                &link(LinkAction::Approve, expires),
                now,
            )
            .await
            .expect("inserts");
        }
        let read = links::link(&mut conn, &links::token_hash(&good))
            .await
            .expect("reads");
        assert_eq!(
            read.map(|l| (l.item_index, l.revision)),
            Some((1, 2)),
            "{backend:?}"
        );
        assert!(
            links::use_link(&mut conn, &links::token_hash(&good), now)
                .await
                .expect("uses")
        );
        assert!(
            !links::use_link(&mut conn, &links::token_hash(&good), now)
                .await
                .expect("uses")
        );
        assert!(
            !links::use_link(&mut conn, &links::token_hash(&old), now)
                .await
                .expect("uses")
        );
        assert!(
            links::claim_post(&mut conn, &channel.id, set, 1, now)
                .await
                .expect("claims")
        );
        assert!(
            !links::claim_post(&mut conn, &channel.id, set, 1, now)
                .await
                .expect("claims")
        );
        let post = Post {
            channel_id: channel.id.clone(),
            change_set_id: set,
            item_index: 1,
            state: PostState::Unknown,
            attempts: 1,
            next_at: now,
        };
        links::record_post(&mut conn, &post, Some("no answer"))
            .await
            .expect("records");
        assert_eq!(
            links::posts_in(&mut conn, PostState::Unknown)
                .await
                .expect("reads"),
            vec![post.clone()]
        );
        assert_eq!(
            links::posts_of(&mut conn, set).await.expect("reads"),
            vec![post]
        );
        assert!(
            links::remove_channel(&mut conn, &channel.id)
                .await
                .expect("removes")
        );
        assert!(
            links::link(&mut conn, &links::token_hash(&old))
                .await
                .expect("reads")
                .is_none()
        );
        assert!(
            links::link(&mut conn, &links::token_hash(&good))
                .await
                .expect("reads")
                .is_some(),
            "a used link stays on record"
        );
        drop(conn);
        store.close().await;
    }
}
