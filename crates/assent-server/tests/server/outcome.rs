//! `GET /api/change-sets/{id}/outcome?wait=SECS`: the agent's long poll for what a
//! person decided, ended within a second by a reviewer's decision over the API.

use crate::support::{TestServer, read};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn call(server: &TestServer, secret: &str, method: Method, path: &str) -> (u16, Value) {
    server
        .send_as(secret, method, path, &json!({"reason": "not now"}))
        .await
}

#[tokio::test]
async fn an_agents_long_poll_returns_within_a_second_of_a_reviewers_decision() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Outcome").await;
    let set = server.propose(&task).await;
    let agent = server.token("agent", Some("triage")).await;
    let reviewer = server.token("reviewer", None).await;
    let outcome = format!("/api/change-sets/{set}/outcome");

    // Without `wait`, at once.
    let (status, now) = call(&server, &agent, Method::GET, &outcome).await;
    assert_eq!(status, 200, "{now}");
    assert_eq!(now["changeSetId"], set);
    assert_eq!(now["status"], "pending");
    assert_eq!(now["settled"], false);
    assert_eq!(now["items"][0]["toolName"], "update_task_priority");
    assert_eq!(now["items"][0]["status"], "pending");
    assert_eq!(now["items"][1]["decision"], Value::Null);
    for bad in ["61", "3600", "-1", "soon"] {
        let (status, body) = call(
            &server,
            &agent,
            Method::GET,
            &format!("{outcome}?wait={bad}"),
        )
        .await;
        assert_eq!(status, 400, "wait={bad}: {body}");
    }
    let (status, body) = call(
        &server,
        &agent,
        Method::GET,
        "/api/change-sets/00000000-0000-0000-0000-000000000000/outcome",
    )
    .await;
    assert_eq!(status, 404, "{body}");

    let started = Instant::now();
    let poll = tokio::spawn({
        let client = server.client.clone();
        let url = format!("{}{outcome}?wait=30", server.base);
        let agent = agent.clone();
        async move {
            let answer = read(
                client
                    .get(url)
                    .bearer_auth(agent)
                    .send()
                    .await
                    .expect("send"),
            )
            .await;
            (answer, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = call(
        &server,
        &reviewer,
        Method::POST,
        &format!("/api/change-sets/{set}/items/1/reject"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(!poll.is_finished(), "one item is still open");
    let (status, body) = call(
        &server,
        &reviewer,
        Method::POST,
        &format!("/api/change-sets/{set}/items/0/confirm"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let decided = Instant::now();
    let ((status, body), returned) = poll.await.expect("the poll");
    assert_eq!(status, 200, "{body}");
    assert!(
        returned.duration_since(decided) < Duration::from_secs(1),
        "returned {:?} after the decision",
        returned.duration_since(decided)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "not at its timeout"
    );
    assert_eq!(body["settled"], true, "{body}");
    assert_eq!(body["status"], "resolved");
    assert_eq!(body["items"][0]["status"], "confirmed");
    assert_eq!(body["items"][0]["decision"]["verdict"], "confirmed");
    assert!(body["items"][0]["result"].is_string(), "{body}");
    assert_eq!(body["items"][1]["status"], "rejected");
    assert_eq!(body["items"][1]["decision"]["reason"], "not now");

    // A reviewer (and an admin) may read it too; a wait on a settled set answers at once.
    let (status, again) = call(
        &server,
        &reviewer,
        Method::GET,
        &format!("{outcome}?wait=60"),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, body);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_long_poll_nobody_answers_returns_unsettled_at_its_timeout() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Nobody").await;
    let set = server.propose(&task).await;
    let started = Instant::now();
    let (status, body) = server
        .get(&format!("/api/change-sets/{set}/outcome?wait=1"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(body["settled"], false);
    assert_eq!(body["status"], "pending");
    server.stop().await.expect("clean stop");
}
