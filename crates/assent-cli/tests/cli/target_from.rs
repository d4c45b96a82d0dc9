//! A tool that takes its target from its arguments (`ToolSpec::target_from`, issue 54,
//! point 13): a person at the CLI, a process without the service's code, cannot move a
//! call to another target by editing it (exit 2), and the set stays as proposed.

use super::{Cli, assert_fails, code};
use assent_confirm::{Engine, SimpleHost, WakeRequest};
use assent_domain::{OffsetDateTime, Target};
use assent_tests::tool_calls;
use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

/// The billing service's engine on the database of `cli`: `issue_refund {order_id,
/// cents}` acts on the order its arguments name.
async fn billing(cli: &Cli) -> (assent_store::Store, Engine) {
    let store = assent_store::Store::open(&cli.db()).await.expect("store");
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
    tools.register(refund).expect("registers");
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
        .await
        .expect("the billing engine");
    (store, engine)
}

#[tokio::test]
async fn an_edit_at_the_cli_cannot_move_a_refund_to_another_order() {
    let cli = Cli::new();
    let now = OffsetDateTime::parse(super::NOW, &time::format_description::well_known::Rfc3339)
        .expect("now");
    let (store, engine) = billing(&cli).await;
    engine
        .set_categories("billing-agent", &["billing".to_owned()], now)
        .await
        .expect("agent");
    let calls = tool_calls(&[("issue_refund", json!({"order_id": "o-7", "cents": 500}))]);
    let request = WakeRequest::new(
        "billing-agent",
        Target::new("customer", "c-1"),
        "run-1",
        calls,
    );
    let wake = engine.wakes().wake(request, now).await.expect("wake");
    let set = wake.change_set.expect("queued");
    assert_eq!(
        set.target(),
        Target::new("order", "o-7"),
        "routed to its order"
    );
    let id = set.id.to_string();
    store.close().await;

    let moved = cli.run(&[
        "edit",
        &id,
        "0",
        "--args",
        r#"{"order_id": "o-8", "cents": 500}"#,
    ]);
    assert_fails(&moved, 2, "an edit cannot move the call to another target");

    let shown = cli.run(&["show", &id, "--json"]);
    assert_eq!(
        code(&shown),
        0,
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    let text = shown.to_string();
    assert!(text.contains("\"o-7\""), "{text}");
    assert!(
        !text.contains("o-8"),
        "nothing of the edit was kept: {text}"
    );
    assert!(text.contains("pending"), "{text}");
}
