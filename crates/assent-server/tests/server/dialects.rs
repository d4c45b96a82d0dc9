//! Every SDK dialect over HTTP: `POST /api/wakes` reads each golden fixture of
//! assent-changeset and answers with its golden `messages`; unknown elements and
//! call-less documents are refused and write nothing; MCP request ids are echoed
//! token for token, also past 64 bits; `GET /api/tools` per format.

use crate::support::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let text = assent_tests::dialect_fixture(name);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn new_task(server: &TestServer, title: &str) -> String {
    let (status, task) = server
        .post("/api/tasks", json!({"title": title, "category": "work"}))
        .await;
    assert_eq!(status, 201, "{task}");
    task["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn each_dialect_is_answered_in_its_own_messages() {
    let server = TestServer::start().await;
    server.agent_and_task("setup").await;
    for dialect in assent_tests::dialect_names() {
        // A fresh task each time, so the first call is queued, not a duplicate.
        let task = new_task(&server, dialect).await;
        let (status, wake) = server
            .post(
                "/api/wakes",
                json!({"agentId": "triage", "taskId": task, "toolCalls": fixture(&format!("{dialect}.in.json"))}),
            )
            .await;
        assert_eq!(status, 200, "{dialect}: {wake}");
        assert!(wake["changeSetId"].is_string(), "{dialect}: queued");
        assert_eq!(
            wake["messages"],
            fixture(&format!("{dialect}.out.json")),
            "{dialect}"
        );
        assert_eq!(wake["responses"].as_array().map(Vec::len), Some(2));
        assert!(wake["responses"][0]["toolCallId"].is_string());
    }
    // Another dialect's replies on request; a forced format that does not fit is a 400.
    let task = new_task(&server, "cross").await;
    let (status, wake) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": fixture("gemini.in.json"),
                   "format": "gemini", "replyFormat": "openai"}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    assert_eq!(wake["messages"][0]["tool_call_id"], "gemini-call-1");
    assert_eq!(wake["messages"][0]["role"], "tool");
    for body in [
        json!({"agentId": "triage", "taskId": task, "toolCalls": fixture("gemini.in.json"), "format": "anthropic"}),
        json!({"agentId": "triage", "taskId": task, "toolCalls": fixture("gemini.in.json"), "replyFormat": "cohere"}),
    ] {
        let (status, problem) = server.post("/api/wakes", body).await;
        assert_eq!(status, 400, "{problem}");
    }
    server.stop().await.expect("clean stop");
}

/// `POST /api/wakes` with `body` as it is written: status and the body's text.
async fn post_text(server: &TestServer, body: String) -> (u16, String) {
    let response = server
        .request(Method::POST, "/api/wakes")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

/// MCP requests whose ids a `serde_json::Value` cannot hold as sent.
const EXACT_IDS: &str = r#"[
  {"jsonrpc": "2.0", "id": 18446744073709551616000, "method": "tools/call", "params": {"name": "update_task_priority", "arguments": {"priority": "P0"}}},
  {"jsonrpc": "2.0", "id": "req-\u0041", "method": "tools/call", "params": {"name": "set_task_language", "arguments": {"languageCode": "en"}}},
  {"jsonrpc": "2.0", "id": 1e3, "method": "tools/call", "params": {"name": "delete_everything", "arguments": {}}}
]"#;

#[tokio::test]
async fn mcp_request_ids_are_echoed_token_for_token() {
    let server = TestServer::start().await;
    server.agent_and_task("setup").await;
    for sub_agent in ["", r#", "subAgent": "researcher""#] {
        let task = new_task(&server, "exact ids").await;
        let (status, text) = post_text(
            &server,
            format!(r#"{{"agentId": "triage", "taskId": "{task}", "toolCalls": {EXACT_IDS}{sub_agent}}}"#),
        )
        .await;
        assert_eq!(status, 200, "{sub_agent}: {text}");
        for id in [
            r#""id":18446744073709551616000,"#,
            r#""id":"req-\u0041","#,
            r#""id":1e3,"#,
        ] {
            assert!(text.contains(id), "{sub_agent}: {id} in {text}");
        }
        assert!(!text.contains("e+22"), "{sub_agent}: {text}");
        let wake: Value = serde_json::from_str(&text).expect("JSON");
        assert!(wake["changeSetId"].is_string(), "{sub_agent}: queued");
        assert_eq!(wake["responses"].as_array().map(Vec::len), Some(3));
        assert_eq!(wake["messages"][2]["result"]["isError"], true);
        assert_eq!(wake["messages"][1]["id"], "req-A");
        if !sub_agent.is_empty() {
            assert!(wake["calls"].is_array(), "{text}");
        }
    }
    // Another dialect's replies name the calls by the ids Assent keeps.
    let task = new_task(&server, "exact ids, openai replies").await;
    let (status, text) = post_text(
        &server,
        format!(
            r#"{{"agentId": "triage", "taskId": "{task}", "toolCalls": {EXACT_IDS}, "replyFormat": "openai"}}"#
        ),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let wake: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(wake["messages"][0]["role"], "tool", "{text}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn other_dialects_answer_byte_for_byte_as_before() {
    let server = TestServer::start().await;
    server.agent_and_task("setup").await;
    for dialect in assent_tests::dialect_names() {
        let task = new_task(&server, dialect).await;
        let calls = assent_tests::dialect_fixture(&format!("{dialect}.in.json"));
        let (status, text) = post_text(
            &server,
            format!(r#"{{"agentId": "triage", "taskId": "{task}", "toolCalls": {calls}}}"#),
        )
        .await;
        assert_eq!(status, 200, "{dialect}: {text}");
        // As a `Value` writes it: the keys sorted, `messages` among them.
        let wake: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(text, wake.to_string(), "{dialect}");
        assert_eq!(
            wake["messages"],
            fixture(&format!("{dialect}.out.json")),
            "{dialect}"
        );
    }
    // A body that is not JSON, one without toolCalls and one with `null` for them are
    // refused as before.
    let task = new_task(&server, "refused").await;
    for (body, expected) in [
        (
            r#"{"agentId": "triage", "toolCalls": ["#.to_owned(),
            "invalid JSON body: ",
        ),
        (
            format!(r#"{{"agentId": "triage", "taskId": "{task}"}}"#),
            "invalid JSON body: Failed to deserialize the JSON body into the target type: missing field `toolCalls`",
        ),
        (
            format!(r#"{{"agentId": "triage", "taskId": "{task}", "toolCalls": null}}"#),
            "toolCalls: tool calls must be ",
        ),
    ] {
        let (status, text) = post_text(&server, body).await;
        assert_eq!(status, 400, "{text}");
        let problem: Value = serde_json::from_str(&text).expect("a problem");
        assert_eq!(problem["status"], 400, "{text}");
        assert_eq!(problem["title"], "Bad Request", "{text}");
        let detail = problem["detail"].as_str().expect("a detail");
        assert!(detail.starts_with(expected), "{detail}");
    }
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn unknown_elements_and_call_less_documents_change_nothing() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Untouched").await;
    for dialect in assent_tests::dialect_names() {
        for (kind, needle) in [("unknown", "frobnicate"), ("call-less", "no tool call")] {
            let (status, problem) = server
                .post(
                    "/api/wakes",
                    json!({"agentId": "triage", "taskId": task, "toolCalls": fixture(&format!("{dialect}.{kind}.json"))}),
                )
                .await;
            assert_eq!(status, 400, "{dialect} {kind}: {problem}");
            let detail = problem["detail"].as_str().expect("a detail");
            assert!(detail.contains(needle), "{dialect} {kind}: {detail}");
            assert!(!detail.contains('\n'), "one line: {detail}");
        }
    }
    let (_, sets) = server.get("/api/change-sets").await;
    assert_eq!(sets, json!([]), "no change set written");
    let (_, audit) = server.get("/api/audit").await;
    assert_eq!(audit, json!([]), "nothing ran");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn tool_definitions_per_format() {
    let server = TestServer::start().await;
    server.agent_and_task("setup").await;
    let (status, openai) = server.get("/api/tools?agentId=triage").await;
    assert_eq!(status, 200, "{openai}");
    let names: Vec<&str> = openai
        .as_array()
        .expect("openai's tools array")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"update_task_priority"), "{names:?}");
    let (_, mcp) = server.get("/api/tools?agentId=triage&format=mcp").await;
    let tools = mcp["tools"].as_array().expect("a tools/list result");
    assert_eq!(tools.len(), names.len());
    let by_name = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"))["annotations"]
            .clone()
    };
    assert_eq!(by_name("set_task_language"), json!({"readOnlyHint": true}));
    assert_eq!(by_name("update_task_priority")["destructiveHint"], true);
    let (_, gemini) = server.get("/api/tools?agentId=triage&format=gemini").await;
    assert_eq!(
        gemini["functionDeclarations"].as_array().map(Vec::len),
        Some(names.len())
    );
    for (query, expected) in [
        ("agentId=ghost", 404),
        ("format=mcp", 400),
        ("agentId=triage&format=langchain", 400),
        ("agentId=triage&format=cohere", 400),
    ] {
        let (status, problem) = server.get(&format!("/api/tools?{query}")).await;
        assert_eq!(status, expected, "{query}: {problem}");
    }
    server.stop().await.expect("clean stop");
}
