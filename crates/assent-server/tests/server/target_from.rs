//! A tool that takes its target from its arguments (`ToolSpec::target_from`, issue 54,
//! point 13) over the API: a wake's refund is queued for the order it names, and an
//! edit that names another order is a bad request that changes nothing.

use crate::support::{TOKEN, TestServer};
use assent_confirm::{Engine, SimpleHost};
use assent_server::Server;
use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

async fn billing_server() -> TestServer {
    TestServer::start_composed(async |store| {
        let host = SimpleHost::new("billing")
            .handle("issue_refund", |_, _| Box::pin(async { Ok("refunded") }))
            .category(|_, _| Box::pin(async { Ok(Some("billing".to_owned())) }));
        let schema = json!({"type": "object", "required": ["order_id", "cents"],
            "properties": {"order_id": {"type": "string"}, "cents": {"type": "integer"}}});
        let refund = ToolSpec::new(
            "issue_refund",
            "Refund an order.",
            ToolMode::Deferred,
            schema,
        )
        .target_from("order", "/order_id");
        let mut tools = ToolRegistry::new();
        tools.register(refund).expect("registered");
        let engine = Engine::open(store, Arc::new(tools), Arc::new(host))
            .await
            .expect("the billing engine");
        Server::new(engine, TOKEN)
    })
    .await
}

#[tokio::test]
async fn an_edit_over_the_api_cannot_move_a_refund_to_another_order() {
    let server = billing_server().await;
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"id": "billing-agent", "categories": ["billing"]}),
        )
        .await;
    assert_eq!(status, 201);
    let call = json!([{"id": "c1", "type": "function", "function": {
        "name": "issue_refund", "arguments": "{\"order_id\":\"o-7\",\"cents\":500}"}}]);
    let (status, wake) = server
        .post(
            "/api/wakes",
            json!({"agentId": "billing-agent", "targetKind": "customer", "targetId": "c-1",
                "toolCalls": call}),
        )
        .await;
    assert_eq!(status, 200, "{wake}");
    let (status, sets) = server
        .get("/api/change-sets?targetKind=order&targetId=o-7")
        .await;
    assert_eq!(status, 200);
    let id = sets[0]["id"]
        .as_str()
        .expect("queued for order o-7")
        .to_owned();

    let (status, body) = server
        .post(
            &format!("/api/change-sets/{id}/items/0/edit"),
            json!({"args": {"order_id": "o-8", "cents": 500}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string()
            .contains("an edit cannot move the call to another target"),
        "{body}"
    );
    let (status, set) = server.get(&format!("/api/change-sets/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(set["items"][0]["status"], "pending", "{set}");
    assert_eq!(set["items"][0]["args"]["order_id"], "o-7", "{set}");

    let (status, body) = server
        .post(
            &format!("/api/change-sets/{id}/items/0/edit"),
            json!({"args": {"order_id": "o-7", "cents": 300}}),
        )
        .await;
    assert_eq!(status, 200, "an edit of the amount runs: {body}");
}
