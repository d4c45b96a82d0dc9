//! Tokens with roles: an agent's token walks every route of the API and decides
//! nothing; a reviewer decides but does not configure; revoked tokens open nothing.

use crate::support::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

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
        .map(|path| format!("/api{path}"))
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
        (Method::GET, "/api/audit".to_owned()),
        (Method::GET, "/api/jobs".to_owned()),
        (Method::POST, "/api/jobs/any/resolve".to_owned()),
        (Method::POST, "/api/jobs/any/retry".to_owned()),
        (Method::POST, "/api/jobs/any/retract".to_owned()),
        (Method::GET, "/api/events".to_owned()),
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
    ];
    let walked: Vec<&str> = forbidden
        .iter()
        .chain(&allowed)
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
        let (status, body) = call(&server, &agent, method.clone(), path).await;
        assert!(
            status != 403 && status != 401,
            "{method} {path}: {status} {body}"
        );
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
