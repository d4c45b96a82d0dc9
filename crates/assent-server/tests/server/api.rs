//! The JSON API end to end: authentication, the review flow, live events, problem
//! details for bad input (which changes nothing), the size limit and shutdown.

use crate::support::{TOKEN, TestServer, next_event, read};
use reqwest::Method;
use serde_json::{Value, json};

fn assert_problem(status: u16, body: &Value, expected: u16) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["status"], expected, "{body}");
    assert_eq!(body["type"], "about:blank", "{body}");
    assert!(body["title"].is_string(), "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn every_api_route_needs_the_bearer_token() {
    let server = TestServer::start().await;
    for (method, path) in [
        (Method::GET, "/api/change-sets"),
        (Method::POST, "/api/agents"),
        (Method::GET, "/api/events"),
        (Method::GET, "/api/no-such-route"),
    ] {
        let url = format!("{}{path}", server.base);
        let missing = server
            .client
            .request(method.clone(), &url)
            .send()
            .await
            .expect("send");
        assert_eq!(
            missing.headers()["content-type"],
            "application/problem+json"
        );
        assert_eq!(missing.headers()["www-authenticate"], "Bearer");
        let (status, body) = read(missing).await;
        assert_problem(status, &body, 401);
        let wrong = server
            .client
            .request(method, &url)
            .bearer_auth(format!("{TOKEN}x"))
            .send()
            .await
            .expect("send");
        assert_eq!(wrong.status().as_u16(), 401, "{path}");
    }
    let (status, body) = server.get("/api/no-such-route").await;
    assert_problem(status, &body, 404);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_page_is_served_without_a_token_under_a_strict_policy() {
    let server = TestServer::start().await;
    let page = server.client.get(&server.base).send().await.expect("send");
    assert_eq!(page.status().as_u16(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    let html = page.text().await.expect("body");
    assert!(html.contains("id=\"login\""));
    assert!(!html.contains("<script>"), "no inline script");
    let script = server
        .client
        .get(format!("{}/assets/app.js", server.base))
        .send()
        .await
        .expect("send");
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(!script.text().await.expect("body").contains("innerHTML"));
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_wake_is_reviewed_item_by_item_and_the_task_changes() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Fix login bug").await;
    let set = server.propose(&task).await;

    let (status, sets) = server.get(&format!("/api/change-sets?taskId={task}")).await;
    assert_eq!(status, 200);
    let listed = &sets[0];
    assert_eq!(listed["id"], set.as_str());
    assert_eq!(listed["agentId"], "triage");
    assert_eq!(listed["status"], "pending");
    assert_eq!(listed["items"][0]["toolName"], "update_task_priority");
    assert_eq!(listed["items"][0]["index"], 0);
    assert_eq!(
        listed["items"][1]["humanSummary"]
            .as_str()
            .map(|s| s.contains("Write a regression test")),
        Some(true)
    );

    let (status, confirmed) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{confirmed}");
    assert_eq!(confirmed["decision"]["verdict"], "confirmed");
    let (status, again) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_problem(status, &again, 409);
    assert_eq!(again["conflictKind"], "alreadyDecided", "{again}");

    let (status, rejected) = server
        .post(
            &format!("/api/change-sets/{set}/items/1/reject"),
            json!({"reason": "we track tests elsewhere"}),
        )
        .await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(rejected["reason"], "we track tests elsewhere");

    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["status"], "resolved");
    assert_eq!(shown["items"][0]["status"], "confirmed");
    assert_eq!(shown["items"][1]["status"], "rejected");
    assert_eq!(shown["items"][1]["reason"], "we track tests elsewhere");
    assert_eq!(shown["items"][0].get("reason"), None);
    let (_, open) = server.get(&format!("/api/change-sets?taskId={task}")).await;
    assert_eq!(open, json!([]));
    let (_, resolved) = server
        .get(&format!("/api/change-sets?taskId={task}&status=resolved"))
        .await;
    assert_eq!(resolved[0]["id"], set.as_str());

    let (_, snapshot) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(snapshot["priority"], "P0");
    assert_eq!(snapshot["checklist"], json!([]));

    let (_, decisions) = server
        .get(&format!(
            "/api/decisions?agentId=triage&taskId={task}&limit=10"
        ))
        .await;
    assert_eq!(decisions.as_array().map(Vec::len), Some(2));
    let history = server
        .request(
            Method::GET,
            &format!("/api/history?agentId=triage&taskId={task}"),
        )
        .send()
        .await
        .expect("send");
    assert!(
        history.headers()["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/plain"))
    );
    let history = history.text().await.expect("text");
    assert!(history.contains("## Recent User Decisions"), "{history}");
    assert!(history.contains("we track tests elsewhere"), "{history}");

    let (_, audit) = server.get(&format!("/api/audit?taskId={task}")).await;
    let kinds: Vec<&str> = audit
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert!(kinds.len() >= 2, "an action and a result record: {kinds:?}");

    // The proof of what ran, and the head to write down: the same as the CLI's.
    let (status, head) = server.get("/api/audit/head").await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(head["head"].as_str().map(str::len), Some(64), "{head}");
    assert!(head["entries"].as_u64() > Some(0), "{head}");
    let (status, proof) = server.get("/api/audit/verify").await;
    assert_eq!(status, 200, "{proof}");
    assert_eq!(proof["verified"], true, "{proof}");
    assert_eq!(proof["head"], head["head"]);
    assert!(proof["effectsChecked"].as_u64() > Some(0), "{proof}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn anthropic_calls_edits_confirm_all_and_dismiss() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Ship the release").await;
    let blocks = json!([
        {"type": "text", "text": "Here is what I suggest."},
        {"type": "tool_use", "id": "toolu_1", "name": "update_task_estimate", "input": {"minutes": 90}},
        {"type": "tool_use", "id": "toolu_2", "name": "assign_task_label", "input": {"label": "release"}},
        {"type": "tool_use", "id": "toolu_3", "name": "set_task_status", "input": {"status": "IN PROGRESS"}}
    ]);
    let (status, wake) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": blocks}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    assert_eq!(wake["responses"][0]["toolCallId"], "toolu_1");
    let set = wake["changeSetId"].as_str().expect("queued").to_owned();

    let (status, edited) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/edit"),
            json!({"args": {"minutes": 120}}),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["decision"]["editedArgs"], json!({"minutes": 120}));
    let (status, deferred) = server
        .post(&format!("/api/change-sets/{set}/items/1/defer"), json!({}))
        .await;
    assert_eq!(status, 200, "{deferred}");
    let (status, all) = server
        .post(&format!("/api/change-sets/{set}/confirm-all"), json!({}))
        .await;
    assert_eq!(status, 200, "{all}");
    let results: Vec<&str> = all["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["result"].as_str())
        .collect();
    assert_eq!(results, ["skipped", "skipped", "confirmed"]);
    let (status, dismissed) = server
        .post(
            &format!("/api/change-sets/{set}/dismiss"),
            json!({"reason": "not this sprint"}),
        )
        .await;
    assert_eq!(status, 200, "{dismissed}");
    assert_eq!(dismissed[0]["itemIndex"], 1);
    let (status, again) = server
        .post(&format!("/api/change-sets/{set}/dismiss"), json!({}))
        .await;
    assert_problem(status, &again, 409);

    let (_, snapshot) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(snapshot["estimateMinutes"], 120);
    assert_eq!(snapshot["status"], "IN PROGRESS");
    assert_eq!(snapshot["labels"], json!(["backend"]));
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn bad_input_gets_problem_details_and_changes_nothing() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Untouched").await;
    let set = server.propose(&task).await;
    let missing = uuid::Uuid::new_v4();

    let cases: Vec<(u16, Value, u16)> = vec![
        {
            let response = server
                .request(Method::POST, "/api/wakes")
                .header("content-type", "application/json")
                .body("{not json")
                .send()
                .await
                .expect("send");
            let (status, body) = read(response).await;
            (status, body, 400)
        },
        {
            let (s, b) = server
                .post(
                    "/api/wakes",
                    json!({"agentId": "triage", "taskId": task, "toolCalls": {"nothing": true}}),
                )
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post(
                    "/api/wakes",
                    json!({"agentId": "ghost", "taskId": task, "toolCalls": []}),
                )
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post("/api/agents", json!({"id": "  ", "categories": ["work"]}))
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post("/api/tasks", json!({"title": "", "category": "work"}))
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server.get("/api/tasks/no-such-task").await;
            (s, b, 404)
        },
        {
            let (s, b) = server.get("/api/change-sets/not-a-uuid").await;
            (s, b, 400)
        },
        {
            let (s, b) = server.get(&format!("/api/change-sets/{missing}")).await;
            (s, b, 404)
        },
        {
            let (s, b) = server.get("/api/change-sets?status=bogus").await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post(
                    &format!("/api/change-sets/{missing}/items/0/confirm"),
                    json!({}),
                )
                .await;
            (s, b, 404)
        },
        {
            let (s, b) = server
                .post(
                    &format!("/api/change-sets/{set}/items/9/confirm"),
                    json!({}),
                )
                .await;
            (s, b, 404)
        },
        {
            let (s, b) = server
                .post(
                    &format!("/api/change-sets/{set}/items/-1/confirm"),
                    json!({}),
                )
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post(
                    &format!("/api/change-sets/{set}/items/0/edit"),
                    json!({"args": [1, 2]}),
                )
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server
                .post(
                    &format!("/api/change-sets/{set}/items/0/edit"),
                    json!({"args": {"priority": "P9"}}),
                )
                .await;
            (s, b, 400)
        },
        {
            let (s, b) = server.get("/api/decisions").await;
            (s, b, 400)
        },
        {
            let (s, b) = server.get("/api/decisions?agentId=triage&limit=0").await;
            (s, b, 400)
        },
    ];
    for (i, (status, body, expected)) in cases.iter().enumerate() {
        assert_eq!(status, expected, "case {i}: {body}");
        assert_problem(*status, body, *expected);
    }

    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["status"], "pending");
    let (_, sets) = server.get("/api/change-sets").await;
    assert_eq!(
        sets.as_array().map(Vec::len),
        Some(1),
        "no other set was written"
    );
    let (_, snapshot) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(snapshot["priority"], Value::Null);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413() {
    let server = TestServer::start_with(|s| s.with_body_limit(1024)).await;
    let task = server.agent_and_task("Small").await;
    let huge = "x".repeat(4096);
    let (status, body) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": [], "pad": huge}),
        )
        .await;
    assert_problem(status, &body, 413);
    let (_, sets) = server.get("/api/change-sets").await;
    assert_eq!(sets, json!([]));
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn events_announce_new_and_changed_sets_and_end_on_shutdown() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Live").await;
    let mut stream = server
        .request(Method::GET, "/api/events")
        .send()
        .await
        .expect("subscribe");
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    next_event(&mut stream, &mut buffer, "ready").await;

    let set = server.propose(&task).await;
    let created = next_event(&mut stream, &mut buffer, "changeSetCreated").await;
    assert_eq!(created["changeSet"]["id"], set.as_str());
    assert_eq!(created["changeSet"]["status"], "pending");
    // Events name the set; a stalled stream must not hold whole sets (and their reasons).
    assert!(created["changeSet"].get("items").is_none(), "{created}");

    server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    let updated = next_event(&mut stream, &mut buffer, "changeSetUpdated").await;
    assert_eq!(updated["changeSet"], json!({"id": set}));
    let (_, now) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(now["items"][0]["status"], "confirmed");
    assert_eq!(now["status"], "partiallyResolved");

    // A graceful shutdown ends the open stream instead of waiting on it forever.
    server.stop().await.expect("clean stop with a stream open");
    let mut rest = Vec::new();
    while let Ok(Some(chunk)) = stream.chunk().await {
        rest.extend_from_slice(&chunk);
    }
}

#[tokio::test]
async fn of_concurrent_confirmations_of_one_item_exactly_one_wins() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Raced").await;
    let set = server.propose(&task).await;
    let path = format!("/api/change-sets/{set}/items/0/confirm");
    let requests = (0..8).map(|_| server.post(&path, json!({})));
    let results = futures_util::future::join_all(requests).await;
    let mut statuses: Vec<u16> = results.iter().map(|(status, _)| *status).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 409, 409, 409, 409, 409, 409, 409],
        "{results:?}"
    );
    for (status, body) in &results {
        if *status == 409 {
            assert_problem(*status, body, 409);
        }
    }
    let (_, decisions) = server
        .get(&format!("/api/decisions?agentId=triage&taskId={task}"))
        .await;
    assert_eq!(decisions.as_array().map(Vec::len), Some(1));
    server.stop().await.expect("clean stop");
}
