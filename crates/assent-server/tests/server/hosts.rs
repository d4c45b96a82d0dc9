//! The server serves any host's engine: a notes service with its own table and tool,
//! no journal, proposed, listed, confirmed and remembered over the API.

use crate::support::{TOKEN, TestServer};
use assent_confirm::{Engine, SimpleHost};
use assent_server::Server;
use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

const NOTES: &str =
    "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL, folder TEXT NOT NULL)";

async fn notes_server() -> TestServer {
    TestServer::start_composed(async |store| {
        let host = SimpleHost::new("notes")
            .migration("notes", NOTES, NOTES)
            .handle("rewrite_note", |tx, call| {
                Box::pin(async move {
                    let body = call.args["body"].as_str().ok_or("no body")?;
                    sqlx::query("UPDATE notes SET body = $1 WHERE id = $2")
                        .bind(body)
                        .bind(&call.target.target.id)
                        .execute(tx)
                        .await?;
                    Ok("Note rewritten.")
                })
            })
            .category(|tx, note| {
                Box::pin(async move {
                    Ok(sqlx::query_scalar("SELECT folder FROM notes WHERE id = $1")
                        .bind(&note.id)
                        .fetch_optional(tx)
                        .await?)
                })
            });
        let schema = json!({"type": "object", "required": ["body"],
            "properties": {"body": {"type": "string"}}});
        let mut tools = ToolRegistry::new();
        tools
            .register(ToolSpec::new(
                "rewrite_note",
                "Rewrite a note.",
                ToolMode::Deferred,
                schema,
            ))
            .expect("registered");
        let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
            .await
            .expect("the notes engine");
        sqlx::query("INSERT INTO notes VALUES ('n1', 'draft', 'personal')")
            .execute(
                store
                    .read_connection()
                    .await
                    .expect("a read connection")
                    .connection(),
            )
            .await
            .expect("a note");
        Server::new(engine, TOKEN)
    })
    .await
}

#[tokio::test]
async fn another_hosts_items_are_proposed_listed_confirmed_and_remembered() {
    let server = notes_server().await;
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"id": "scribe", "categories": ["personal"]}),
        )
        .await;
    assert_eq!(status, 201);
    let call = json!([{"id": "c1", "type": "function", "function": {
        "name": "rewrite_note", "arguments": "{\"body\":\"final\"}"}}]);
    let (status, wake) = server
        .post(
            "/api/wakes",
            json!({"agentId": "scribe", "targetKind": "note", "targetId": "n1", "toolCalls": call}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    assert_eq!(
        wake["responses"][0]["content"],
        "Proposal queued for user review."
    );

    let (status, sets) = server
        .get("/api/change-sets?targetKind=note&targetId=n1")
        .await;
    assert_eq!(status, 200);
    let set = &sets[0];
    assert_eq!(set["targetKind"], "note");
    assert_eq!(set["targetId"], "n1");
    assert!(set.get("taskId").is_none(), "a note is no task: {set}");
    assert_eq!(set["items"][0]["toolName"], "rewrite_note");
    let id = set["id"].as_str().expect("id");

    let (status, body) = server
        .post(&format!("/api/change-sets/{id}/items/0/confirm"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let note: String = sqlx::query_scalar("SELECT body FROM notes WHERE id = 'n1'")
        .fetch_one(
            server
                .store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await
        .expect("the note");
    assert_eq!(note, "final");

    let history = server
        .request(
            reqwest::Method::GET,
            "/api/history?agentId=scribe&targetKind=note&targetId=n1",
        )
        .send()
        .await
        .expect("history")
        .text()
        .await
        .expect("text");
    assert!(history.contains("rewrite_note"), "{history}");
    assert!(history.contains("confirmed"), "{history}");

    // The journal's routes are the journal's: a server composed without it has none.
    let (status, _) = server.get("/api/tasks/n1").await;
    assert_eq!(status, 404);
    // A target named twice, or half, is a bad request.
    let (status, _) = server
        .get("/api/change-sets?taskId=t&targetKind=note&targetId=n1")
        .await;
    assert_eq!(status, 400);
    let (status, _) = server.get("/api/change-sets?targetId=n1").await;
    assert_eq!(status, 400);
}
