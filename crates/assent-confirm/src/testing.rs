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
