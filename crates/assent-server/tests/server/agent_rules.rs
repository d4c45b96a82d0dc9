//! `PUT /api/agents/{id}/rules/{tool}`: an admin sets an agent's rule for a tool, the
//! agent's next wake routes by it, and no agent or reviewer token may do so.

use crate::support::{TestServer, read};
use serde_json::{Value, json};

/// `PUT path` with `secret` and a JSON `body`: status, content type and JSON body.
async fn put(server: &TestServer, secret: &str, path: &str, body: Value) -> (u16, String, Value) {
    let response = server
        .client
        .put(format!("{}{path}", server.base))
        .bearer_auth(secret)
        .json(&body)
        .send()
        .await
        .expect("send");
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (status, body) = read(response).await;
    (status, kind, body)
}

/// A wake of `triage` on `task` with one call of `tool`; its reply and the answer.
async fn wake(server: &TestServer, task: &str, tool: &str, arguments: Value) -> (String, Value) {
    let calls = json!([{"id": "call_1", "type": "function",
        "function": {"name": tool, "arguments": arguments.to_string()}}]);
    let (status, body) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": calls}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let reply = body["responses"][0]["content"]
        .as_str()
        .expect("a reply")
        .to_owned();
    (reply, body)
}

#[tokio::test]
async fn an_admin_sets_rules_and_the_next_wake_routes_by_them() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Rules").await;
    let admin = crate::support::TOKEN;
    let rule = |tool: &str| format!("/api/agents/triage/rules/{tool}");

    let (status, _, denied) = put(
        &server,
        admin,
        &rule("set_task_language"),
        json!({"action": "deny"}),
    )
    .await;
    assert_eq!(status, 200, "{denied}");
    assert_eq!(denied["id"], "triage");
    assert_eq!(denied["categories"], json!(["work"]));
    assert_eq!(
        denied["rules"],
        json!([{"tool": "set_task_language", "action": "deny"}])
    );
    assert!(denied["createdAt"].is_string() && denied["updatedAt"].is_string());
    let (status, _, again) = put(
        &server,
        admin,
        &rule("set_task_language"),
        json!({"action": "deny"}),
    )
    .await;
    assert_eq!(
        (status, &again),
        (200, &denied),
        "the same rule changes nothing"
    );

    let (reply, body) = wake(
        &server,
        &task,
        "set_task_language",
        json!({"languageCode": "en"}),
    )
    .await;
    // Its words as ever, then where the rule came from (issue 57).
    assert!(
        reply.starts_with(
            "Denied by policy: Tool set_task_language is denied by policy. Nothing was queued or executed. Decided by rule deny set_task_language (a command, set by "
        ),
        "{reply}"
    );
    assert!(body["changeSetId"].is_null(), "{body}");

    // Asked, the immediate tool waits for a person; allowed, the deferred one runs.
    let (status, _, _) = put(
        &server,
        admin,
        &rule("set_task_language"),
        json!({"action": "ask"}),
    )
    .await;
    assert_eq!(status, 200);
    let (reply, _) = wake(
        &server,
        &task,
        "set_task_language",
        json!({"languageCode": "en"}),
    )
    .await;
    assert_eq!(reply, "Proposal queued for user review.");
    let (status, _, allowed) = put(
        &server,
        admin,
        &rule("update_task_*"),
        json!({"action": "allow"}),
    )
    .await;
    assert_eq!(status, 200, "{allowed}");
    assert_eq!(
        allowed["rules"],
        json!([
            {"tool": "set_task_language", "action": "ask"},
            {"tool": "update_task_*", "action": "allow"},
        ])
    );
    let (_, body) = wake(
        &server,
        &task,
        "update_task_priority",
        json!({"priority": "P0"}),
    )
    .await;
    assert!(body["changeSetId"].is_null(), "ran at once: {body}");
    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(shown["priority"], "P0", "{shown}");

    // Creating again replaces the categories, keeps the rules, and says so.
    let (status, agent) = server
        .post(
            "/api/agents",
            json!({"id": "triage", "categories": ["work", "home"]}),
        )
        .await;
    assert_eq!(status, 200, "{agent}");
    assert_eq!(agent["rules"], allowed["rules"]);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn unknown_agents_bad_actions_and_other_roles_are_refused() {
    let server = TestServer::start().await;
    server.agent_and_task("Refusals").await;
    let admin = crate::support::TOKEN;
    let path = "/api/agents/triage/rules/set_task_status";

    let (status, kind, body) = put(
        &server,
        admin,
        "/api/agents/ghost/rules/set_task_status",
        json!({"action": "deny"}),
    )
    .await;
    assert_eq!((status, kind.as_str()), (404, "application/problem+json"));
    assert_eq!(body["status"], 404);
    assert_eq!(body["detail"], "no agent \"ghost\"");

    for bad in [json!({"action": "never"}), json!({"action": 1}), json!({})] {
        let (status, kind, body) = put(&server, admin, path, bad.clone()).await;
        assert_eq!(
            (status, kind.as_str()),
            (400, "application/problem+json"),
            "{bad}: {body}"
        );
        assert_eq!(body["status"], 400);
    }
    let (_, _, body) = put(&server, admin, path, json!({"action": "never"})).await;
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("expected allow, ask or deny")),
        "{body}"
    );
    let (status, _, body) = put(
        &server,
        admin,
        "/api/agents/triage/rules/%20",
        json!({"action": "deny"}),
    )
    .await;
    assert_eq!(status, 400, "a blank tool: {body}");

    for role in ["agent", "reviewer"] {
        let secret = server
            .token(role, (role == "agent").then_some("triage"))
            .await;
        let (status, _, body) = put(&server, &secret, path, json!({"action": "allow"})).await;
        assert_eq!(status, 403, "{role}: {body}");
    }
    let (_, _, unchanged) = put(&server, admin, path, json!({"action": "ask"})).await;
    assert_eq!(
        unchanged["rules"],
        json!([{"tool": "set_task_status", "action": "ask"}]),
        "nothing refused was written"
    );
    server.stop().await.expect("clean stop");
}

/// `DELETE path` with `secret`: status and JSON body.
async fn delete(server: &TestServer, secret: &str, path: &str) -> (u16, Value) {
    let response = server
        .client
        .delete(format!("{}{path}", server.base))
        .bearer_auth(secret)
        .send()
        .await
        .expect("send");
    read(response).await
}

/// Issue 53, point 10: `DELETE /api/agents/{id}/rules/{pattern}` removes exactly that
/// rule, for an admin only; the next wake is asked about the tool again.
#[tokio::test]
async fn an_admin_removes_a_rule_by_its_pattern() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Unset").await;
    let admin = crate::support::TOKEN;
    let path = "/api/agents/triage/rules/set_task_language";
    let (status, _, _) = put(&server, admin, path, json!({"action": "deny"})).await;
    assert_eq!(status, 200);
    let (status, _, _) = put(
        &server,
        admin,
        "/api/agents/triage/rules/set_task_*",
        json!({"action": "allow"}),
    )
    .await;
    assert_eq!(status, 200);

    for role in ["agent", "reviewer"] {
        let secret = server
            .token(role, (role == "agent").then_some("triage"))
            .await;
        let (status, body) = delete(&server, &secret, path).await;
        assert_eq!(status, 403, "{role}: {body}");
    }
    let (status, body) = delete(&server, admin, "/api/agents/ghost/rules/x").await;
    assert_eq!(status, 404, "{body}");

    let (status, agent) = delete(&server, admin, path).await;
    assert_eq!(status, 200, "{agent}");
    assert_eq!(
        agent["rules"],
        json!([{"tool": "set_task_*", "action": "allow"}]),
        "only that pattern's rule went"
    );
    let (status, again) = delete(&server, admin, path).await;
    assert_eq!((status, &again), (200, &agent), "nothing left to remove");
    let (reply, _) = wake(
        &server,
        &task,
        "set_task_language",
        json!({"languageCode": "de"}),
    )
    .await;
    assert!(!reply.contains("Denied"), "the deny rule is gone: {reply}");
    server.stop().await.expect("clean stop");
}
