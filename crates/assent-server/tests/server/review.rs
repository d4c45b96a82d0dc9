//! What a person approves is what they see: the API's item views carry every argument
//! whole however long it is (the page cuts for the eye, never the data), and the audit
//! trail keeps `taskId` beside `targetKind`/`targetId` for the journal's tasks. The
//! scene is issue 22's: a `write_file` whose path ends in `.ssh/authorized_keys` and
//! whose content ends in an appended key, from a host whose summary shows only the head
//! of the path (as the MCP gateway's does). The page's side is in `browser`.

use crate::support::{TOKEN, TestServer};
use assent_confirm::{Engine, SimpleHost};
use assent_server::Server;
use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
use serde_json::{Value, json};
use std::sync::Arc;

/// What the attacker appends to the content.
pub const APPENDED_KEY: &str = "ssh-ed25519 AAAA attacker@evil";

/// `/home/u/` and 200 characters, then `/.ssh/authorized_keys`.
pub fn long_path() -> String {
    format!("/home/u/{}/.ssh/authorized_keys", "d".repeat(200))
}

/// Eight lines of harmless keys, then the appended one.
pub fn long_content() -> String {
    format!(
        "{}{APPENDED_KEY}",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 me@laptop\n".repeat(8)
    )
}

/// A server of a files host: `write_file {path, content}` waits for a person, and its
/// summary shows the first 60 characters of the path only.
pub async fn files_server() -> TestServer {
    TestServer::start_composed(async |store| {
        let host = SimpleHost::new("files")
            .handle("write_file", |_, _| Box::pin(async { Ok("written") }))
            .category(|_, _| Box::pin(async { Ok(Some("files".to_owned())) }));
        let schema = json!({"type": "object", "required": ["path", "content"],
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}}});
        let spec = ToolSpec::new("write_file", "Write a file.", ToolMode::Deferred, schema)
            .with_summary(|args, _| {
                let path = args["path"].as_str().unwrap_or_default();
                format!(
                    "Write File(path: {}…)",
                    path.chars().take(60).collect::<String>()
                )
            });
        let mut tools = ToolRegistry::new();
        tools.register(spec).expect("registered");
        let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
            .await
            .expect("the files engine");
        Server::new(engine, TOKEN)
    })
    .await
}

/// The agent `writer` proposes `write_file` with `args` over the API; returns the
/// change set's id.
pub async fn propose_write(server: &TestServer, args: &Value) -> String {
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"id": "writer", "categories": ["files"]}),
        )
        .await;
    assert!(status == 201 || status == 200, "agent: {status}");
    let calls = json!([{"id": "c1", "type": "function", "function": {
        "name": "write_file", "arguments": args.to_string()}}]);
    let (status, wake) = server
        .post(
            "/api/wakes",
            json!({"agentId": "writer", "targetKind": "files", "targetId": "laptop", "toolCalls": calls}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    wake["changeSetId"].as_str().expect("queued").to_owned()
}

#[tokio::test]
async fn long_arguments_come_back_whole_from_every_item_view() {
    let server = files_server().await;
    let (path, content) = (long_path(), long_content());
    let args = json!({"path": path, "content": content});
    let set = propose_write(&server, &args).await;

    let (status, listed) = server.get("/api/change-sets").await;
    assert_eq!(status, 200);
    let (status, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(status, 200);
    for item in [&listed[0]["items"][0], &shown["items"][0]] {
        assert_eq!(item["args"], args, "{item}");
        assert!(
            item["humanSummary"]
                .as_str()
                .is_some_and(|s| s.starts_with("Write File(path: /home/u/")),
            "the host's summary as it wrote it: {item}"
        );
    }

    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, jobs) = server.get("/api/jobs").await;
    assert_eq!(status, 200);
    assert!(jobs.as_array().is_some_and(Vec::is_empty), "{jobs}");
    let (_, trail) = server.get("/api/audit").await;
    let records = trail.as_array().expect("a list");
    assert!(!records.is_empty());
    for record in records {
        assert_eq!(record["args"], args, "{record}");
        assert_eq!(record["targetKind"], "files");
        assert!(record.get("taskId").is_none(), "no task: {record}");
    }
}

#[tokio::test]
async fn the_audit_trail_keeps_task_id_beside_the_target() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Fix login bug").await;
    let set = server.propose(&task).await;
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, trail) = server.get(&format!("/api/audit?taskId={task}")).await;
    assert_eq!(status, 200);
    let records = trail.as_array().expect("a list");
    assert_eq!(records.len(), 2, "the action and its result: {trail}");
    for record in records {
        assert_eq!(record["targetKind"], "task", "{record}");
        assert_eq!(record["targetId"], task.as_str(), "{record}");
        assert_eq!(record["taskId"], task.as_str(), "{record}");
    }
}
