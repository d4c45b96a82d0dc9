//! An "always" grant belongs to the agent it was given to: another agent, with its own
//! agent token, cannot ride it by naming the same sub-agent or the first agent's id as
//! its `subAgent` (second security round).

use crate::support::{TestServer, next_event, read};
use assent_store::delegation;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A wake that never ends is a failure, not a hung test run; measures nothing.
const HANG: Duration = Duration::from_secs(60);

fn priority_call(priority: &str) -> Value {
    json!([{"id": "call_1", "type": "function", "function": {
        "name": "update_task_priority",
        "arguments": json!({"priority": priority}).to_string(),
    }}])
}

/// A task in `work` and agent `id` allowed to change it.
async fn agent_with_task(server: &TestServer, id: &str) -> String {
    let (status, body) = server
        .post("/api/agents", json!({"id": id, "categories": ["work"]}))
        .await;
    assert!(status == 200 || status == 201, "{body}");
    let (status, task) = server
        .post(
            "/api/tasks",
            json!({"title": format!("{id}'s task"), "category": "work"}),
        )
        .await;
    assert_eq!(status, 201, "{task}");
    task["id"].as_str().expect("task id").to_owned()
}

/// Posts a delegated wake of `agent` with its own `token`, in a task of its own.
fn spawn_wake(
    server: &TestServer,
    token: &str,
    body: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let request = server
        .client
        .request(Method::POST, format!("{}/api/wakes", server.base))
        .bearer_auth(token)
        .json(&body);
    tokio::spawn(async move { read(request.send().await.expect("send")).await })
}

async fn finished(wake: tokio::task::JoinHandle<(u16, Value)>) -> (u16, Value) {
    tokio::time::timeout(HANG, wake)
        .await
        .expect("the delegated wake ended")
        .expect("the wake task does not panic")
}

/// Answers the next question on the stream with `outcome`; returns the question.
async fn answer(
    server: &TestServer,
    stream: &mut reqwest::Response,
    buffer: &mut String,
    outcome: Value,
) -> Value {
    let asked = tokio::time::timeout(HANG, next_event(stream, buffer, "confirmationRequested"))
        .await
        .expect("a person is asked");
    let id = asked["request"]["correlationId"]
        .as_str()
        .expect("correlation id")
        .to_owned();
    let (status, body) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"outcome": outcome}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    asked["request"].clone()
}

#[tokio::test]
async fn another_agent_cannot_ride_a_grant_by_naming_the_same_sub_agent_or_the_agent() {
    let server = TestServer::start_delegating().await;
    let first_task = agent_with_task(&server, "a1").await;
    let second_task = agent_with_task(&server, "a2").await;
    let (a1, a2) = (
        server.token("agent", Some("a1")).await,
        server.token("agent", Some("a2")).await,
    );
    let mut buffer = String::new();
    let mut stream = server.events(&mut buffer).await;

    // A person answers "always" to a1's sub-agent `researcher` and to a1 itself
    // (`delegated: true`, path `review/a1`).
    for (shape, priority) in [
        (json!({"subAgent": "researcher"}), "P0"),
        (json!({"delegated": true}), "P2"),
    ] {
        let mut body = json!({"agentId": "a1", "taskId": first_task,
            "toolCalls": priority_call(priority)});
        body.as_object_mut()
            .expect("object")
            .extend(shape.as_object().expect("object").clone());
        let wake = spawn_wake(&server, &a1, body);
        answer(
            &server,
            &mut stream,
            &mut buffer,
            json!({"kind": "proceedAlways"}),
        )
        .await;
        let (status, body) = finished(wake).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["calls"][0]["result"], "applied", "{body}");
    }
    let mut conn = server.store.read_connection().await.expect("connection");
    let grants = delegation::list_grants(&mut conn, &delegation::GrantFilter::default())
        .await
        .expect("grants");
    drop(conn);
    assert_eq!(grants.len(), 2, "{grants:?}");
    assert!(
        grants.iter().all(|g| g.agent_id.as_deref() == Some("a1")),
        "{grants:?}"
    );

    // The grants still work for a1 itself: nobody is asked.
    let (status, body) = read(
        server
            .client
            .request(Method::POST, format!("{}/api/wakes", server.base))
            .bearer_auth(&a1)
            .json(
                &json!({"agentId": "a1", "taskId": first_task, "subAgent": "researcher",
                "toolCalls": priority_call("P1")}),
            )
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["calls"][0]["strategy"], "autoApprove", "{body}");

    // a2 names the same sub-agent, then a1's id: each time a person is asked, and
    // their rejection stands; a2's task never changes.
    // (Another priority each time: a rejected proposal is not asked again.)
    for (sub_agent, priority) in [("researcher", "P0"), ("a1", "P2")] {
        let wake = spawn_wake(
            &server,
            &a2,
            json!({"agentId": "a2", "taskId": second_task, "subAgent": sub_agent,
                "toolCalls": priority_call(priority)}),
        );
        let asked = answer(
            &server,
            &mut stream,
            &mut buffer,
            json!({"kind": "reject", "reason": "not yours"}),
        )
        .await;
        assert_eq!(asked["details"]["agentId"], "a2", "{asked}");
        let (status, body) = finished(wake).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["calls"][0]["strategy"], "delegated", "{body}");
        assert_ne!(body["calls"][0]["result"], "applied", "{body}");
    }
    let (_, task) = server.get(&format!("/api/tasks/{second_task}")).await;
    assert_eq!(task["priority"], Value::Null, "{task}");
    server.stop().await.expect("clean stop");
}
