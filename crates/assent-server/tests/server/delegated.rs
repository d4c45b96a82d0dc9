//! Sub-agents asking the server's session over the confirmation bus: a delegated wake
//! posted over HTTP waits until a person answers through
//! `POST /api/confirmations/{correlationId}`; requests and resolutions are server-sent
//! events and `GET /api/confirmations`; bad, unknown and second answers are refused and
//! change nothing; without a bus, or when the server stops mid-wait, the wake ends
//! fail-closed instead of hanging.

use crate::support::{TOKEN, TestServer, next_event, read};
use assent_confirm::{NOBODY_TO_ASK, PARENT_STOPPED_LISTENING};
use assent_store::delegation;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A waiting wake that never ends is a failure, not a hung test run; this bounds the
/// wait for that verdict and measures nothing.
const HANG: Duration = Duration::from_secs(60);

fn priority_call(priority: &str) -> Value {
    json!([{"id": "call_1", "type": "function", "function": {
        "name": "update_task_priority",
        "arguments": json!({"priority": priority}).to_string(),
    }}])
}

fn assert_problem(status: u16, body: &Value, expected: u16) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["status"], expected, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

/// A delegating server on which sub-agent `sub_agent` of `triage` has asked about
/// raising a new task's priority to `priority`, seen on the event stream.
struct Asking {
    server: TestServer,
    task: String,
    stream: reqwest::Response,
    buffer: String,
    wake: tokio::task::JoinHandle<(u16, Value)>,
    /// The `confirmationRequested` event's request.
    request: Value,
    /// Its correlation id.
    id: String,
}

async fn asking(sub_agent: &str, priority: &str) -> Asking {
    let server = TestServer::start_delegating().await;
    let task = server.agent_and_task("Delegated").await;
    let mut buffer = String::new();
    let mut stream = server.events(&mut buffer).await;
    let wake = server.spawn_delegated_wake(sub_agent, &task, priority_call(priority));
    // The set is on screen before its question is asked.
    let created = next_event(&mut stream, &mut buffer, "changeSetCreated").await;
    let asked = next_event(&mut stream, &mut buffer, "confirmationRequested").await;
    let request = asked["request"].clone();
    assert_eq!(
        request["details"]["changeSetId"],
        created["changeSet"]["id"]
    );
    let id = request["correlationId"]
        .as_str()
        .expect("correlation id")
        .to_owned();
    Asking {
        server,
        task,
        stream,
        buffer,
        wake,
        request,
        id,
    }
}

async fn finished(wake: tokio::task::JoinHandle<(u16, Value)>) -> (u16, Value) {
    tokio::time::timeout(HANG, wake)
        .await
        .expect("the delegated wake ended")
        .expect("the wake task does not panic")
}

#[tokio::test]
async fn a_delegated_wake_waits_for_an_answer_over_http_and_the_task_changes() {
    let Asking {
        server,
        task,
        mut stream,
        mut buffer,
        wake,
        request,
        id,
    } = asking("researcher", "P0").await;
    assert_eq!(request["agentPath"], "review/researcher");
    assert_eq!(request["toolCall"]["name"], "update_task_priority");
    assert_eq!(request["toolCall"]["args"], json!({"priority": "P0"}));
    let set = request["details"]["changeSetId"]
        .as_str()
        .expect("the request names its change set")
        .to_owned();

    // A screen that joins late still sees it.
    let (status, pending) = server.get("/api/confirmations").await;
    assert_eq!(status, 200);
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    assert_eq!(pending[0]["correlationId"], id.as_str());

    let (status, answered) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"correlationId": id, "outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["agentPath"], "review/researcher");
    assert_eq!(answered["outcome"]["kind"], "proceedOnce");

    let (status, body) = finished(wake).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["changeSetId"], set.as_str());
    assert_eq!(body["agentPath"], "review/researcher");
    let call = &body["calls"][0];
    assert_eq!(call["result"], "applied", "{body}");
    assert_eq!(call["strategy"], "delegated");
    assert_eq!(call["correlationIds"], json!([id]));
    assert!(call["reply"].as_str().is_some_and(|r| !r.is_empty()));

    let resolved = next_event(&mut stream, &mut buffer, "confirmationResolved").await;
    assert_eq!(resolved["resolution"]["correlationId"], id.as_str());
    assert_eq!(resolved["resolution"]["outcome"]["kind"], "proceedOnce");
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["items"][0]["status"], "confirmed");

    // The first answer stands: a second one is a conflict and changes nothing.
    let (status, again) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"outcome": {"kind": "reject", "reason": "too late"}}),
        )
        .await;
    assert_problem(status, &again, 409);

    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(shown["priority"], "P0", "{shown}");
    let (_, pending) = server.get("/api/confirmations").await;
    assert_eq!(pending, json!([]));
    let mut conn = server.store.read_connection().await.expect("connection");
    let records = delegation::for_change_set(&mut conn, set.parse().expect("uuid"))
        .await
        .expect("delegation records");
    drop(conn);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].agent_path, "review/researcher");
    assert_eq!(records[0].correlation_id, id);
    assert_eq!(records[0].outcome, "proceedOnce");
    assert!(records[0].decision_id.is_some(), "linked to its decision");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn bad_unknown_and_unauthenticated_answers_are_refused_and_change_nothing() {
    let Asking {
        server,
        task,
        wake,
        request,
        id,
        ..
    } = asking("researcher/helper", "P1").await;
    assert_eq!(request["agentPath"], "review/researcher/helper");
    let path = format!("/api/confirmations/{id}");

    let unknown = server
        .post(
            "/api/confirmations/no-such-request",
            json!({"outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_problem(unknown.0, &unknown.1, 404);
    for bad in [
        json!({"outcome": {"kind": "maybe"}}),
        json!({"outcome": "proceedOnce"}),
        json!({}),
        json!({"outcome": {"kind": "cancelled"}}),
        json!({"outcome": {"kind": "unanswered", "reason": "I say so"}}),
        json!({"outcome": {"kind": "proceedWithEdits", "args": {"priority": "urgent"}}}),
        json!({"outcome": {"kind": "proceedWithEdits", "args": ["P0"]}}),
        json!({"correlationId": "someone-else", "outcome": {"kind": "proceedOnce"}}),
    ] {
        let (status, body) = server.post(&path, bad.clone()).await;
        assert_problem(status, &body, 400);
        assert!(!body["detail"].as_str().unwrap_or("").is_empty(), "{bad}");
    }
    let no_token = server
        .client
        .post(format!("{}{path}", server.base))
        .json(&json!({"outcome": {"kind": "proceedOnce"}}))
        .send()
        .await
        .expect("send");
    let (status, body) = read(no_token).await;
    assert_problem(status, &body, 401);

    // Nothing above touched the waiting request.
    let (_, pending) = server.get("/api/confirmations").await;
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");

    let (status, _) = server
        .post(
            &path,
            json!({"outcome": {"kind": "proceedWithEdits", "args": {"priority": "P2"}}}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = finished(wake).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["calls"][0]["result"], "applied", "{body}");
    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(shown["priority"], "P2", "the edit ran, not the proposal");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_rejection_with_a_reason_reaches_the_sub_agent_and_its_history() {
    let Asking {
        server,
        task,
        wake,
        id,
        ..
    } = asking("researcher", "P0").await;
    let (status, _) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"outcome": {"kind": "reject", "reason": "not before the audit"}}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, body) = finished(wake).await;
    assert_eq!(body["calls"][0]["result"], "rejected", "{body}");
    assert!(
        body["calls"][0]["reply"]
            .as_str()
            .is_some_and(|r| r.contains("not before the audit")),
        "{body}"
    );
    let (_, decisions) = server
        .get(&format!("/api/decisions?agentId=triage&taskId={task}"))
        .await;
    assert_eq!(
        decisions[0]["reason"], "not before the audit",
        "{decisions}"
    );
    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_ne!(shown["priority"], "P0");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn without_a_bus_a_delegated_wake_is_refused_fail_closed_and_kept_for_review() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("No parent").await;
    let wake = server.spawn_delegated_wake("researcher", &task, priority_call("P0"));
    let (status, body) = finished(wake).await;
    assert_eq!(status, 200, "{body}");
    let call = &body["calls"][0];
    assert_eq!(call["result"], "refused", "{body}");
    assert!(
        call["reply"]
            .as_str()
            .is_some_and(|r| r.contains("no interactive session or delegation")),
        "{body}"
    );
    let set = body["changeSetId"].as_str().expect("the proposal is kept");
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["items"][0]["status"], "pending");
    let (status, pending) = server.get("/api/confirmations").await;
    assert_eq!((status, pending), (200, json!([])));
    let (status, body) = server
        .post(
            "/api/confirmations/anything",
            json!({"outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_problem(status, &body, 404);

    let (status, body) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": priority_call("P1"),
                   "subAgent": "researcher", "delegated": false}),
        )
        .await;
    assert_problem(status, &body, 400);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_bus_nobody_listens_to_denies_at_once() {
    // `router()` without `run()`: the bus exists, but no server session listens to it.
    let bus = assent_confirm::ConfirmationBus::new("review", Default::default()).expect("bus");
    let dir = tempfile::tempdir().expect("directory");
    let url = format!("sqlite://{}", dir.path().join("review.db").display());
    let store = assent_store::Store::open(&url).await.expect("database");
    let router = crate::support::journal_server(&store)
        .await
        .with_bus(bus)
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });
    let client = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        client
            .request(Method::POST, format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    read(
        post(
            "/api/agents",
            json!({"id": "triage", "categories": ["work"]}),
        )
        .await
        .expect("agent"),
    )
    .await;
    let (_, task) = read(
        post("/api/tasks", json!({"title": "Nobody", "category": "work"}))
            .await
            .expect("task"),
    )
    .await;
    let (status, body) = read(
        post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task["id"], "toolCalls": priority_call("P0"), "delegated": true}),
        )
        .await
        .expect("wake"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["agentPath"], "review/triage");
    assert_eq!(body["calls"][0]["result"], "waiting", "{body}");
    assert_eq!(body["calls"][0]["outcome"]["reason"], NOBODY_TO_ASK);
    serving.abort();
    store.close().await;
}

#[tokio::test]
async fn stopping_the_server_mid_wait_ends_the_wake_fail_closed() {
    let Asking { server, wake, .. } = asking("researcher", "P0").await;

    tokio::time::timeout(HANG, server.stop())
        .await
        .expect("the shutdown did not wait on the open question")
        .expect("clean stop");
    let (status, body) = finished(wake).await;
    assert_eq!(status, 200, "{body}");
    let call = &body["calls"][0];
    assert_eq!(call["result"], "waiting", "{body}");
    assert_eq!(call["outcome"]["kind"], "unanswered");
    assert_eq!(call["outcome"]["reason"], PARENT_STOPPED_LISTENING);
}

#[tokio::test]
async fn a_sub_agent_that_hangs_up_withdraws_its_question_and_leaves_the_item_pending() {
    let Asking {
        server,
        mut stream,
        mut buffer,
        wake,
        request,
        id,
        ..
    } = asking("researcher", "P0").await;
    wake.abort();
    let withdrawn = tokio::time::timeout(
        HANG,
        next_event(&mut stream, &mut buffer, "confirmationResolved"),
    )
    .await
    .expect("the question was withdrawn");
    assert_eq!(withdrawn["resolution"]["correlationId"], id.as_str());
    assert_eq!(withdrawn["resolution"]["outcome"]["kind"], "cancelled");
    let (_, pending) = server.get("/api/confirmations").await;
    assert_eq!(pending, json!([]));
    let (status, body) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_problem(status, &body, 404);
    let set = request["details"]["changeSetId"].as_str().expect("set id");
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["items"][0]["status"], "pending", "kept for review");
    server.stop().await.expect("clean stop");
}
