//! The engines the unit tests build, each on a new in-memory SQLite store with the
//! host `ops`: one with no tools, one whose deferred tool `send` acts on targets of
//! category `ops`.

use crate::{Engine, SimpleHost};
use assent_store::Store;
use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

/// An engine with no tools.
pub(crate) async fn bare_engine() -> Engine {
    open(ToolRegistry::new(), SimpleHost::new("ops")).await
}

/// An engine with the deferred tool `send`, every target of category `ops`.
pub(crate) async fn send_engine() -> Engine {
    let mut tools = ToolRegistry::new();
    let schema = json!({"type": "object"});
    tools
        .register(ToolSpec::new("send", "Send.", ToolMode::Deferred, schema))
        .expect("registered");
    let host = SimpleHost::new("ops")
        .category(|_tx, _target| Box::pin(async { Ok(Some("ops".to_owned())) }));
    open(tools, host).await
}

async fn open(tools: ToolRegistry, host: SimpleHost) -> Engine {
    let store = Store::open("sqlite::memory:").await.expect("a store");
    Engine::open(store, Arc::new(tools), Arc::new(host))
        .await
        .expect("an engine")
}

/// [`send_engine`] with agent `a` allowed on category `ops` (created at `now`).
pub(crate) async fn send_engine_with_agent(now: time::OffsetDateTime) -> Engine {
    let engine = send_engine().await;
    engine
        .set_categories("a", &["ops".to_owned()], now)
        .await
        .expect("an agent");
    engine
}

/// A wake of agent `a` on `service/target` with `calls` sends (`{"n": i}`) at `now`:
/// its set's id.
pub(crate) async fn queue_sends(
    engine: &Engine,
    target: &str,
    run: &str,
    calls: usize,
    now: time::OffsetDateTime,
) -> uuid::Uuid {
    let document: Vec<serde_json::Value> = (0..calls)
        .map(|n| json!({"type": "tool_use", "id": format!("c{n}"), "name": "send", "input": {"n": n}}))
        .collect();
    let calls = assent_changeset::parse_tool_calls(&json!(document)).expect("calls");
    let request = crate::WakeRequest::new(
        "a",
        assent_domain::Target::new("service", target),
        run,
        calls,
    );
    let wake = engine.wakes().wake(request, now).await.expect("a wake");
    wake.change_set.expect("a set").id
}
