//! Every SDK dialect over HTTP: `POST /api/wakes` reads each golden fixture of
//! assent-changeset and answers with its golden `messages`; unknown elements and
//! call-less documents are refused and write nothing; `GET /api/tools` per format.

use crate::support::TestServer;
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
