//! `assent-rig`: a person in a rig agent's loop.
//!
//! [`AssentHook`] is a rig-agent hook (`AgentBuilder::add_hook`) that routes every tool
//! call of a rig agent through an Assent engine: the agent's policy decides, immediate
//! calls run through the audited executor, denied ones are refused with the engine's
//! reply text, deferred ones become a change set a person decides anywhere (and, with
//! [`AssentHook::wait`], the model reads the outcome: the handler's result, the edited
//! call's result, or the rejection with its reason). [`RigToolHost::rig_tool`] makes a
//! rig [`Tool`](rig_core::tool::Tool) a tool of a [`SimpleHost`](assent_confirm::SimpleHost),
//! so its body runs through the engine, exactly once, audited; [`tool_spec`] is its
//! catalog entry.
//!
//! The adapter is thin: it maps rig's dispatch boundary onto a wake and a set's
//! outcome and knows no host, no table and no SDK dialect of its own.
//!
//! The hook answers a rig tool call of a deferred tool with the queued receipt (a rig agent
//! gets it with `AgentBuilder::add_hook(hook)`):
//!
//! ```
//! use assent_confirm::{Engine, SimpleHost};
//! use assent_domain::{OffsetDateTime, Target};
//! use assent_rig::AssentHook;
//! use assent_store::Store;
//! use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! async fn answer() -> Result<(), Box<dyn std::error::Error>> {
//!     let host = SimpleHost::new("notes")
//!         .handle("set_body", |_tx, _call| Box::pin(async { Ok("Body set.") }))
//!         .category(|_tx, _note| Box::pin(async { Ok(Some("notes".to_owned())) }));
//!     let mut tools = ToolRegistry::new();
//!     let schema = json!({"type": "object"});
//!     tools.register(ToolSpec::new("set_body", "Replace a body.", ToolMode::Deferred, schema))?;
//!     let store = Store::open("sqlite::memory:").await?;
//!     let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
//!     let now = OffsetDateTime::now_utc();
//!     engine.set_categories("scribe", &["notes".to_owned()], now).await?;
//!
//!     let hook = AssentHook::new(engine, "scribe", Target::new("note", "n1")).run_key("chat-1");
//!     let answer = hook.answer("chat-1", "call_1", "set_body", r#"{"body": "final"}"#).await?;
//!     assert_eq!(answer.text, "Proposal queued for user review.");
//!     assert!(!answer.is_error);
//!     assert!(hook.change_set_id("call_1").is_some());
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(answer())
//! }
//! ```

mod error;
mod hook;
mod replies;
mod tools;

pub use error::RigError;
pub use hook::{Answer, AssentHook};
pub use tools::{AssentOperation, RigToolHost, tool_spec};
