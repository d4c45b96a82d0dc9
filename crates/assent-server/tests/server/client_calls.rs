//! Calls a client application runs itself (`POST /api/calls`, `POST /api/wakes` with
//! `"executedBy": "client"`): decided by the rules at once or by a person, awaited (long
//! poll and server-sent events), reported (`…/ran`) into the consent chain, and a
//! forged report (other arguments, another item, a second one) refused and recorded.

use crate::support::{TestServer, next_event, read};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A server with agent `shop` (category `client`), `lookup` allowed, `wipe` denied,
/// everything else asked; the agent's token.
async fn shop() -> (TestServer, String) {
    let server = TestServer::start().await;
    let (status, body) = server
        .post(
            "/api/agents",
            json!({"id": "shop", "categories": ["client"]}),
        )
        .await;
    assert!(status == 201 || status == 200, "{body}");
    let (status, body) = server
        .post(
            "/api/agents",
            json!({"id": "other", "categories": ["client"]}),
        )
        .await;
    assert!(status == 201 || status == 200, "{body}");
    for (tool, action) in [("lookup", "allow"), ("wipe", "deny")] {
        let (status, body) = read(
            server
                .request(Method::PUT, &format!("/api/agents/shop/rules/{tool}"))
                .json(&json!({"action": action}))
                .send()
                .await
                .expect("send"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let agent = server.token("agent", Some("shop")).await;
    (server, agent)
}

async fn propose(server: &TestServer, agent: &str, body: Value) -> Value {
    let (status, decision) = server
        .send_as(agent, Method::POST, "/api/calls", &body)
        .await;
    assert_eq!(status, 200, "{decision}");
    decision
}

async fn report(server: &TestServer, agent: &str, url: &Value, body: Value) -> (u16, Value) {
    let url = url.as_str().expect("a ran URL");
    server.send_as(agent, Method::POST, url, &body).await
}

async fn audit(server: &TestServer) -> Vec<Value> {
    let (status, trail) = server.get("/api/audit?limit=500").await;
    assert_eq!(status, 200, "{trail}");
    trail
        .as_array()
        .or_else(|| trail["records"].as_array())
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_call_the_rules_allow_runs_at_once_and_its_run_is_reported_once() {
    let (server, agent) = shop().await;
    let decision = propose(
        &server,
        &agent,
        json!({"tool": "lookup", "args": {"order": "A-1"}, "toolCallId": "c1", "executedBy": "client"}),
    )
    .await;
    assert_eq!(decision["decision"], "run", "{decision}");
    assert_eq!(decision["args"], json!({"order": "A-1"}));
    assert_eq!(decision["changeSetId"], Value::Null);
    assert_eq!(decision["runKey"], "client:shop:c1");
    assert!(
        decision["why"]
            .as_str()
            .unwrap_or_default()
            .contains("lookup"),
        "{decision}"
    );
    assert_eq!(decision["ranUrl"], "/api/calls/client%3Ashop%3Ac1/ran");
    // The same call again (a framework asking twice) gets the same answer.
    let again = propose(
        &server,
        &agent,
        json!({"tool": "lookup", "args": {"order": "A-1"}, "toolCallId": "c1"}),
    )
    .await;
    assert_eq!(again["decision"], "run");
    assert_eq!(again["runKey"], decision["runKey"]);
    // Another call under the same id is refused: one decision covers one call.
    let (status, body) = server
        .send_as(
            &agent,
            Method::POST,
            "/api/calls",
            &json!({"tool": "lookup", "args": {"order": "B-2"}, "toolCallId": "c1"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");

    let (status, body) = report(
        &server,
        &agent,
        &decision["ranUrl"],
        json!({"args": {"order": "B-2"}, "ok": true, "result": "found"}),
    )
    .await;
    assert_eq!(status, 409, "other arguments: {body}");
    let (status, body) = report(
        &server,
        &agent,
        &decision["ranUrl"],
        json!({"args": {"order": "A-1"}, "ok": true, "result": {"status": "shipped"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["recorded"], true);
    let (status, body) = report(
        &server,
        &agent,
        &decision["ranUrl"],
        json!({"args": {"order": "A-1"}, "ok": true, "result": "again"}),
    )
    .await;
    assert_eq!(status, 409, "a second report: {body}");

    let trail = audit(&server).await;
    let of_run: Vec<&Value> = trail
        .iter()
        .filter(|r| r["runKey"] == "client:shop:c1")
        .collect();
    assert!(
        of_run.iter().any(|r| r["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("ran in the client: {\"status\""))),
        "{of_run:?}"
    );
    assert_eq!(
        of_run
            .iter()
            .filter(|r| r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("a report of a client run refused")))
            .count(),
        2,
        "both refusals recorded: {of_run:?}"
    );
    let (status, proof) = server.get("/api/audit/verify").await;
    assert_eq!(status, 200, "{proof}");
    assert_eq!(proof["verified"], true, "{proof}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_denied_call_is_refused_and_recorded() {
    let (server, agent) = shop().await;
    let decision = propose(
        &server,
        &agent,
        json!({"tool": "wipe", "args": {}, "toolCallId": "w1"}),
    )
    .await;
    assert_eq!(decision["decision"], "deny", "{decision}");
    assert_eq!(decision["ranUrl"], Value::Null);
    assert!(decision["reason"].is_string(), "{decision}");
    let trail = audit(&server).await;
    assert!(
        trail
            .iter()
            .any(|r| r["runKey"] == "client:shop:w1" && r["kind"] == "policyDenied"),
        "{trail:?}"
    );
    // Malformed bodies change nothing.
    for bad in [
        json!({"tool": "refund", "args": [1]}),
        json!({"tool": "", "args": {}}),
        json!({"tool": "refund", "args": {}, "executedBy": "assent"}),
        json!({"tool": "refund", "args": {}, "target": " "}),
        json!({"tool": "refund", "args": {}, "surprise": 1}),
    ] {
        let (status, body) = server
            .send_as(&agent, Method::POST, "/api/calls", &bad)
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // Another agent's token may not propose for shop.
    let other = server.token("agent", Some("other")).await;
    let (status, body) = server
        .send_as(
            &other,
            Method::POST,
            "/api/calls",
            &json!({"tool": "refund", "args": {}, "agentId": "shop"}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn an_asked_call_waits_for_a_person_and_runs_with_what_was_approved() {
    let (server, agent) = shop().await;
    let reviewer = server.reviewer_token("alice").await;
    let decision = propose(
        &server,
        &agent,
        json!({"tool": "refund", "args": {"order": "A-17", "cents": 4200}, "target": "orders", "toolCallId": "r1"}),
    )
    .await;
    assert_eq!(decision["decision"], "ask", "{decision}");
    assert_eq!(decision["item"], 0);
    assert_eq!(decision["revision"], 0);
    let set = decision["changeSetId"].as_str().expect("a set").to_owned();
    let again = propose(
        &server,
        &agent,
        json!({"tool": "refund", "args": {"order": "A-17", "cents": 4200}, "toolCallId": "r1"}),
    )
    .await;
    assert_eq!(
        again["changeSetId"],
        set.as_str(),
        "the same call, the same set"
    );
    let (status, body) = server
        .send_as(
            &agent,
            Method::POST,
            "/api/calls",
            &json!({"tool": "refund", "args": {"order": "A-17", "cents": 9999}, "toolCallId": "r1"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");

    // Not approved yet: a report is refused (and recorded).
    let (status, body) = report(
        &server,
        &agent,
        &decision["ranUrl"],
        json!({"args": {"order": "A-17", "cents": 4200}, "ok": true, "result": "done"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");

    // The long poll ends within a second of the person's edit.
    let outcome = decision["outcomeUrl"].as_str().expect("an outcome URL");
    let (status, now) = server
        .send_as(&agent, Method::GET, outcome, &json!({}))
        .await;
    assert_eq!(
        (status, now["decision"].clone()),
        (200, json!("ask")),
        "{now}"
    );
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
                    .expect("poll"),
            )
            .await;
            (answer, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = server
        .send_as(
            &reviewer,
            Method::POST,
            &format!("/api/change-sets/{set}/items/0/edit"),
            &json!({"args": {"order": "A-17", "cents": 3000}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let decided = Instant::now();
    let ((status, approved), answered) = poll.await.expect("the poll");
    assert_eq!(status, 200, "{approved}");
    assert!(
        answered - decided < Duration::from_secs(1),
        "within a second"
    );
    assert_eq!(approved["decision"], "run", "{approved}");
    assert_eq!(approved["edited"], true);
    assert_eq!(approved["args"], json!({"order": "A-17", "cents": 3000}));
    assert!(
        approved["decidedBy"]
            .as_str()
            .unwrap_or_default()
            .contains("alice"),
        "{approved}"
    );

    // The proposal's arguments are not what was approved.
    let (status, body) = report(
        &server,
        &agent,
        &approved["ranUrl"],
        json!({"args": {"order": "A-17", "cents": 4200}, "ok": true, "result": "done"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    // Another agent may not report it.
    let other = server.token("agent", Some("other")).await;
    let (status, body) = report(
        &server,
        &other,
        &approved["ranUrl"],
        json!({"args": {"order": "A-17", "cents": 3000}, "ok": true}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = report(
        &server,
        &agent,
        &approved["ranUrl"],
        json!({"args": {"cents": 3000, "order": "A-17"}, "ok": false, "error": "provider down"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = report(
        &server,
        &agent,
        &approved["ranUrl"],
        json!({"args": {"cents": 3000, "order": "A-17"}, "ok": true}),
    )
    .await;
    assert_eq!(status, 409, "one approval, one report: {body}");
    // Nor through the route of calls allowed at once.
    let (status, body) = server
        .send_as(
            &agent,
            Method::POST,
            "/api/calls/client%3Ashop%3Ar1/ran",
            &json!({"args": {"cents": 3000, "order": "A-17"}, "ok": true}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let reported = propose(
        &server,
        &agent,
        json!({"tool": "refund", "args": {"order": "A-17", "cents": 4200}, "toolCallId": "r1"}),
    )
    .await;
    assert_eq!(reported["reported"], true, "{reported}");

    // A rejection, heard over server-sent events.
    let second = propose(
        &server,
        &agent,
        json!({"tool": "refund", "args": {"order": "B-2", "cents": 100}, "toolCallId": "r2"}),
    )
    .await;
    let second_set = second["changeSetId"].as_str().expect("a set").to_owned();
    let mut stream = server
        .client
        .get(format!(
            "{}{}",
            server.base,
            second["outcomeUrl"].as_str().expect("outcome")
        ))
        .bearer_auth(&agent)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("subscribe");
    assert_eq!(stream.status(), 200);
    let (status, body) = server
        .send_as(
            &reviewer,
            Method::POST,
            &format!("/api/change-sets/{second_set}/items/0/reject"),
            &json!({"reason": "already refunded"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut buffer = String::new();
    let rejected = next_event(&mut stream, &mut buffer, "decision").await;
    assert_eq!(rejected["decision"], "deny", "{rejected}");
    assert_eq!(rejected["reason"], "already refunded");
    let (status, body) = report(
        &server,
        &agent,
        &second["ranUrl"],
        json!({"args": {"order": "B-2", "cents": 100}, "ok": true}),
    )
    .await;
    assert_eq!(status, 409, "a rejected call: {body}");

    let trail = audit(&server).await;
    let refused = trail
        .iter()
        .filter(|r| {
            r["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("a report of a client run refused"))
        })
        .count();
    assert_eq!(refused, 4, "{trail:?}");
    let (status, proof) = server.get("/api/audit/verify").await;
    assert_eq!(status, 200, "{proof}");
    assert_eq!(proof["verified"], true, "{proof}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_report_for_an_item_of_another_host_is_refused() {
    let (server, agent) = shop().await;
    // An item of the server's own host (the journal's), proposed for shop by a wake.
    let (status, body) = server
        .post(
            "/api/agents",
            json!({"id": "shop", "categories": ["client", "work"]}),
        )
        .await;
    assert!(status == 200 || status == 201, "{body}");
    let (status, task) = server
        .post("/api/tasks", json!({"title": "T", "category": "work"}))
        .await;
    assert_eq!(status, 201, "{task}");
    let (status, wake) = server
        .send_as(
            &agent,
            Method::POST,
            "/api/wakes",
            &json!({"agentId": "shop", "taskId": task["id"], "toolCalls": [
                {"id": "x1", "type": "function", "function": {"name": "update_task_priority", "arguments": "{\"priority\":\"P0\"}"}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    let set = wake["changeSetId"]
        .as_str()
        .or_else(|| wake["changeSet"]["id"].as_str())
        .expect("a set")
        .to_owned();
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server
        .send_as(
            &agent,
            Method::POST,
            &format!("/api/change-sets/{set}/items/0/ran"),
            &json!({"args": {"priority": "P0"}, "ok": true}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_client_wake_answers_in_the_sdks_dialect() {
    let (server, agent) = shop().await;
    let (status, body) = server
        .send_as(
            &agent,
            Method::POST,
            "/api/wakes",
            &json!({"agentId": "shop", "targetKind": "client", "targetId": "orders", "executedBy": "client", "toolCalls": [
                {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{\"order\":\"A-1\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "refund", "arguments": "{\"order\":\"A-1\",\"cents\":5}"}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["calls"][0]["decision"], "run", "{body}");
    assert_eq!(body["calls"][1]["decision"], "ask", "{body}");
    assert_eq!(body["calls"][1]["toolCallId"], "call_b");
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{body}");
    assert_eq!(messages[0]["role"], "tool", "OpenAI's dialect: {body}");
    assert_eq!(messages[1]["tool_call_id"], "call_b");
    server.stop().await.expect("clean stop");
}

/// A rule over the history set over the API (issue 57) binds a client's calls: a
/// refund runs at once while the day's total stays within the bound, and the call that
/// takes it over is asked; a bad condition is a 400 and changes nothing.
#[tokio::test]
async fn a_running_total_set_over_the_api_asks_the_call_that_takes_it_over() {
    let (server, agent) = shop().await;
    let put = |tool: &'static str, body: Value| {
        let server = &server;
        async move {
            read(
                server
                    .request(Method::PUT, &format!("/api/agents/shop/rules/{tool}"))
                    .json(&body)
                    .send()
                    .await
                    .expect("send"),
            )
            .await
        }
    };
    let (status, body) = put("refund", json!({"action": "allow"})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put(
        "ref*",
        json!({"action": "ask", "condition": {"kind": "total", "pointer": "/cents", "over": 5000, "perSeconds": 86400}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put(
        "wipe*",
        json!({"action": "ask", "condition": {"kind": "total", "pointer": "cents", "over": 1, "perSeconds": 60}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let refund = |id: &str, cents: i64| json!({"tool": "refund", "args": {"order": id, "cents": cents}, "target": "orders", "toolCallId": id, "executedBy": "client"});
    let first = propose(&server, &agent, refund("A-1", 4200)).await;
    assert_eq!(first["decision"], "run", "{first}");
    let second = propose(&server, &agent, refund("A-2", 1000)).await;
    assert_eq!(second["decision"], "ask", "{second}");
}
