//! Tokens with roles: an agent's token walks every route of the API and decides
//! nothing, and its event stream tells it of its own agent's sets only; a reviewer
//! decides but does not configure; revoked tokens open nothing.

use crate::support::{TestServer, next_event};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn call(server: &TestServer, secret: &str, method: Method, path: &str) -> (u16, Value) {
    let body = json!({
        "agentId": "triage", "taskId": "x", "toolCalls": [], "reason": "r",
        "args": {}, "categories": ["work"], "id": "a", "role": "admin",
        "outcome": {"kind": "proceedOnce"},
    });
    server.send_as(secret, method, path, &body).await
}

/// Every route path registered in the server's router, from its source: the test
/// below must name each one, so a new route cannot skip the role check unseen.
fn registered_routes() -> Vec<String> {
    let source = [
        include_str!("../../src/lib.rs"),
        include_str!("../../src/webhooks.rs"),
        // The journal's routes, mounted by whoever composes it (here, the tests' server).
        include_str!("../../../assent-journal-host/src/http.rs"),
    ]
    .concat();
    source
        .split(".route(\n")
        .skip(1)
        .chain(source.split(".route(").skip(1))
        .filter_map(|rest| rest.trim_start().strip_prefix('"'))
        .filter_map(|rest| rest.split('"').next())
        // Routes outside `/api`'s nest (Slack's) are written whole.
        .map(|path| {
            if path.starts_with("/api/") {
                path.to_owned()
            } else {
                format!("/api{path}")
            }
        })
        .collect()
}

#[tokio::test]
async fn an_agent_token_walks_every_route_and_can_decide_nothing() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Roles").await;
    let own_set = server.propose(&task).await;
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"id": "other", "categories": ["work"]}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, other) = server
        .post(
            "/api/wakes",
            json!({"agentId": "other", "taskId": task, "toolCalls": [
                {"id": "c", "type": "function", "function": {"name": "update_task_priority", "arguments": "{\"priority\":\"P3\"}"}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{other}");
    let other_set = other["changeSetId"].as_str().expect("set").to_owned();
    let agent = server.token("agent", Some("triage")).await;

    let item = |action: &str| format!("/api/change-sets/{own_set}/items/0/{action}");
    let forbidden: Vec<(Method, String)> = vec![
        (Method::POST, "/api/agents".to_owned()),
        (Method::PUT, "/api/agents/triage/rules/any".to_owned()),
        (Method::PUT, "/api/agents/triage/holds/any".to_owned()),
        (Method::GET, "/api/policy".to_owned()),
        (Method::POST, "/api/policy/plan".to_owned()),
        (Method::POST, "/api/policy/apply".to_owned()),
        (Method::POST, "/api/tasks".to_owned()),
        (Method::GET, format!("/api/tasks/{task}")),
        (
            Method::POST,
            format!("/api/change-sets/{own_set}/confirm-all"),
        ),
        (Method::POST, format!("/api/change-sets/{own_set}/dismiss")),
        (Method::POST, item("confirm")),
        (Method::POST, item("reject")),
        (Method::POST, item("edit")),
        (Method::POST, item("defer")),
        (Method::POST, item("undo")),
        (Method::GET, "/api/audit".to_owned()),
        (Method::GET, "/api/audit/head".to_owned()),
        (Method::GET, "/api/audit/verify".to_owned()),
        (Method::GET, "/api/audit/digest".to_owned()),
        (Method::GET, item("why")),
        (Method::GET, "/api/rejections".to_owned()),
        (Method::GET, "/api/jobs".to_owned()),
        (Method::POST, "/api/jobs/any/resolve".to_owned()),
        (Method::POST, "/api/jobs/any/retry".to_owned()),
        (Method::POST, "/api/jobs/any/retract".to_owned()),
        (Method::POST, "/api/jobs/any/cancel".to_owned()),
        (Method::GET, "/api/confirmations".to_owned()),
        (Method::POST, "/api/confirmations/some-id".to_owned()),
        (Method::POST, "/api/sync".to_owned()),
        (Method::GET, "/api/sync/host".to_owned()),
        (Method::GET, "/api/sync/peers".to_owned()),
        (Method::GET, "/api/conflicts".to_owned()),
        (Method::GET, "/api/tokens".to_owned()),
        (Method::POST, "/api/tokens".to_owned()),
        (Method::POST, "/api/tokens/any/revoke".to_owned()),
        (Method::GET, "/api/webhooks".to_owned()),
        (Method::POST, "/api/webhooks".to_owned()),
        (Method::GET, "/api/webhooks/deliveries".to_owned()),
        (
            Method::POST,
            "/api/webhooks/deliveries/1/redeliver".to_owned(),
        ),
        (Method::DELETE, "/api/webhooks/any".to_owned()),
        (Method::POST, "/api/webhooks/any/test".to_owned()),
        // Its own agent's routes, but for another agent.
        (Method::GET, "/api/change-sets?agentId=other".to_owned()),
        (Method::GET, "/api/decisions?agentId=other".to_owned()),
        (Method::GET, "/api/history?agentId=other".to_owned()),
        (Method::GET, "/api/tools?agentId=other".to_owned()),
        (Method::GET, format!("/api/change-sets/{other_set}/outcome")),
        (
            Method::GET,
            format!("/api/change-sets/{other_set}/items/0/decision"),
        ),
        (
            Method::POST,
            format!("/api/change-sets/{other_set}/items/0/ran"),
        ),
        (Method::POST, "/api/calls/client%3Aother%3Ax/ran".to_owned()),
    ];
    let allowed: Vec<(Method, String)> = vec![
        (Method::GET, "/api/session".to_owned()),
        (Method::POST, "/api/wakes".to_owned()),
        (Method::GET, "/api/change-sets".to_owned()),
        (Method::GET, format!("/api/change-sets/{own_set}")),
        (Method::GET, format!("/api/change-sets/{own_set}/outcome")),
        (Method::GET, "/api/decisions".to_owned()),
        (Method::GET, "/api/history".to_owned()),
        (Method::GET, "/api/tools".to_owned()),
        // Calls its client runs itself (`client_calls.rs`).
        (Method::POST, "/api/calls".to_owned()),
        (
            Method::GET,
            format!("/api/change-sets/{own_set}/items/0/decision"),
        ),
        (
            Method::POST,
            format!("/api/change-sets/{own_set}/items/0/ran"),
        ),
        (
            Method::POST,
            "/api/calls/client%3Atriage%3Ax/ran".to_owned(),
        ),
        // A stream of its own agent's sets only (see the test below).
        (Method::GET, "/api/events".to_owned()),
    ];
    // Authenticated by Slack's signature, not by a token: an agent token is no
    // signature, and here Slack is not even connected.
    let slack_signed: Vec<(Method, String)> =
        vec![(Method::POST, "/api/slack/interactions".to_owned())];
    let walked: Vec<&str> = forbidden
        .iter()
        .chain(&allowed)
        .chain(&slack_signed)
        .map(|(_, path)| path.as_str())
        .collect();
    let routes = registered_routes();
    assert!(
        routes.len() >= 25,
        "the router's routes are read: {routes:?}"
    );
    for route in routes {
        let pattern: Vec<&str> = route.split('/').collect();
        let covered = walked.iter().any(|path| {
            let path: Vec<&str> = path.split('?').next().unwrap_or(path).split('/').collect();
            path.len() == pattern.len()
                && path
                    .iter()
                    .zip(&pattern)
                    .all(|(part, want)| want.starts_with('{') || part == want)
        });
        assert!(covered, "the route {route} is not walked by this test");
    }

    for (method, path) in &forbidden {
        let (status, body) = call(&server, &agent, method.clone(), path).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
    }
    for (method, path) in &allowed {
        if path == "/api/events" {
            // A stream does not end: its status is all there is to read here.
            let status = server
                .client
                .get(format!("{}{path}", server.base))
                .bearer_auth(&agent)
                .send()
                .await
                .expect("subscribe")
                .status();
            assert_eq!(status, 200, "{method} {path}");
            continue;
        }
        let (status, body) = call(&server, &agent, method.clone(), path).await;
        assert!(
            status != 403 && status != 401,
            "{method} {path}: {status} {body}"
        );
    }

    for (method, path) in &slack_signed {
        let (status, body) = call(&server, &agent, method.clone(), path).await;
        assert_eq!(status, 404, "{method} {path}: {body}");
    }

    // Nothing was decided or configured by all that.
    let (_, set) = server.get(&format!("/api/change-sets/{own_set}")).await;
    assert_eq!(set["status"], "pending", "{set}");
    let (_, tokens) = server.get("/api/tokens").await;
    assert_eq!(tokens.as_array().map(Vec::len), Some(1), "{tokens}");

    // What it may read is its own agent's only.
    let (_, session) = call(&server, &agent, Method::GET, "/api/session").await;
    assert_eq!(session["role"], "agent");
    assert_eq!(session["agentId"], "triage");
    let (_, sets) = call(&server, &agent, Method::GET, "/api/change-sets").await;
    let ids: Vec<&str> = sets
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, vec![own_set.as_str()]);
    let (status, _) = call(
        &server,
        &agent,
        Method::GET,
        &format!("/api/change-sets/{other_set}"),
    )
    .await;
    assert_eq!(status, 404, "another agent's set is not even there");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_reviewer_decides_but_does_not_configure_and_revoked_tokens_open_nothing() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Reviewer").await;
    let set = server.propose(&task).await;
    let reviewer = server.token("reviewer", None).await;
    let (status, body) = call(
        &server,
        &reviewer,
        Method::POST,
        &format!("/api/change-sets/{set}/items/0/confirm"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for path in ["/api/agents", "/api/tokens", "/api/sync"] {
        let (status, body) = call(&server, &reviewer, Method::POST, path).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (_, session) = call(&server, &reviewer, Method::GET, "/api/session").await;
    assert_eq!(session["role"], "reviewer");

    let (_, tokens) = server.get("/api/tokens").await;
    let id = tokens[0]["id"].as_str().expect("id").to_owned();
    assert!(tokens[0].get("secret").is_none(), "{tokens}");
    let (status, revoked) = server
        .post(&format!("/api/tokens/{id}/revoke"), json!({}))
        .await;
    assert_eq!(status, 200, "{revoked}");
    let (status, _) = call(&server, &reviewer, Method::GET, "/api/session").await;
    assert_eq!(status, 401, "a revoked token opens nothing");

    let (status, body) = server.post("/api/tokens", json!({"role": "agent"})).await;
    assert_eq!(status, 400, "an agent token needs its agent: {body}");
    server.stop().await.expect("clean stop");
}

/// A wake of agent `other` on `task`; returns its set's id.
async fn other_agents_set(server: &TestServer, task: &str, priority: &str) -> String {
    let arguments = json!({ "priority": priority }).to_string();
    let (status, body) = server
        .post(
            "/api/wakes",
            json!({"agentId": "other", "taskId": task, "toolCalls": [
                {"id": "c", "type": "function", "function": {"name": "update_task_priority", "arguments": arguments}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["changeSetId"].as_str().expect("set").to_owned()
}

/// Every event (name and data) `stream` carries until `enough` says so, and then for
/// `linger` more, so that whatever should not come has had its chance to.
async fn hear(
    stream: &mut reqwest::Response,
    buffer: &mut String,
    enough: impl Fn(&[(String, Value)]) -> bool,
    linger: Duration,
) -> Vec<(String, Value)> {
    let mut heard = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut until = None;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let Some(name) = block.lines().find_map(|l| l.strip_prefix("event:")) else {
                continue; // a keep-alive comment
            };
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            heard.push((
                name.trim().to_owned(),
                serde_json::from_str(&data).expect("JSON data"),
            ));
        }
        if until.is_none() && enough(&heard) {
            until = Some(tokio::time::Instant::now() + linger);
        }
        match tokio::time::timeout_at(until.unwrap_or(deadline), stream.chunk()).await {
            Ok(chunk) => {
                let chunk = chunk
                    .expect("read the stream")
                    .expect("the stream stays open");
                buffer.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
            }
            Err(_) if until.is_some() => return heard,
            Err(_) => panic!("the expected events did not come; heard {heard:?}"),
        }
    }
}

#[tokio::test]
async fn an_agent_token_hears_of_its_own_agents_sets_only() {
    let server = TestServer::start_delegating().await;
    let task = server.agent_and_task("Events").await;
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"id": "other", "categories": ["work"]}),
        )
        .await;
    assert_eq!(status, 201);
    // Sets made before the stream opens: their agent is read when they are written.
    let own_old = server.propose(&task).await;
    let other_old = other_agents_set(&server, &task, "P3").await;

    let agent = server.token("agent", Some("triage")).await;
    let mut stream = server
        .client
        .get(format!("{}/api/events", server.base))
        .bearer_auth(&agent)
        .send()
        .await
        .expect("subscribe");
    assert_eq!(stream.status(), 200);
    let mut buffer = String::new();
    next_event(&mut stream, &mut buffer, "ready").await;
    let mut reviewer_buffer = String::new();
    let mut reviewer = server.events(&mut reviewer_buffer).await;

    let decide = async |set: &str, index: usize, verb: &str| {
        let (status, body) = server
            .post(
                &format!("/api/change-sets/{set}/items/{index}/{verb}"),
                json!({"reason": "not now"}),
            )
            .await;
        assert_eq!(status, 200, "{verb} {set}/{index}: {body}");
    };
    decide(&other_old, 0, "confirm").await;
    // Its checklist item: the priority changed under its other item (the other
    // agent's P3), which the stale-target guard would refuse.
    decide(&own_old, 1, "confirm").await;
    // Sets made while it listens: their agent is in the creation event.
    let other_new = other_agents_set(&server, &task, "P2").await;
    let later = server.agent_and_task("Events, later").await;
    let own_new = server.propose(&later).await;
    decide(&other_new, 0, "reject").await;
    decide(&own_new, 0, "reject").await;

    // A sub-agent of its own agent asks the server's session: a reviewer hears the
    // request and its answer; the agent's token hears neither.
    let calls = json!([{"id": "call_1", "type": "function", "function": {
        "name": "add_checklist_item", "arguments": "{\"title\":\"Asked\"}",
    }}]);
    let wake = server.spawn_delegated_wake("researcher", &task, calls);
    let asked = next_event(&mut reviewer, &mut reviewer_buffer, "confirmationRequested").await;
    let id = asked["request"]["correlationId"]
        .as_str()
        .expect("correlation id")
        .to_owned();
    let (status, answered) = server
        .post(
            &format!("/api/confirmations/{id}"),
            json!({"outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    let (status, body) = wake.await.expect("the wake task does not panic");
    assert_eq!(status, 200, "{body}");
    next_event(&mut reviewer, &mut reviewer_buffer, "confirmationResolved").await;

    let is = |name: &str, set: &str| {
        let (name, set) = (name.to_owned(), set.to_owned());
        move |(heard, data): &(String, Value)| *heard == name && data["changeSet"]["id"] == set
    };
    let heard = hear(
        &mut stream,
        &mut buffer,
        |heard| {
            heard.iter().any(is("changeSetUpdated", &own_old))
                && heard.iter().any(is("changeSetCreated", &own_new))
                && heard.iter().any(is("changeSetUpdated", &own_new))
        },
        // Writes reach the change feed's follower within a second; it announces them again.
        Duration::from_millis(1_500),
    )
    .await;
    for (name, data) in &heard {
        assert!(
            name == "changeSetCreated" || name == "changeSetUpdated",
            "an agent hears of sets only: {name} {data}"
        );
        let set = data["changeSet"]["id"].as_str().expect("a set's id");
        assert!(
            set != other_old && set != other_new,
            "another agent's set reached the agent: {name} {data}"
        );
        let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
        assert_eq!(shown["agentId"], "triage", "{name} {data}");
    }
    server.stop().await.expect("clean stop");
}
