//! Assent puts a person between an LLM agent and the data it wants to change.
//!
//! Start here. The types a service needs to gate its own tools are at the top:
//! [`Engine`] (opened over a [`Store`], a tool registry of [`ToolSpec`]s and a host),
//! [`SimpleHost`] (a host made of closures), [`WakeRequest`] (an agent's calls),
//! [`AgentPolicy`] (what an agent may do) and, with the `server` feature, `Server` (the
//! review page and API over the service's own engine). Everything else is under the
//! workspace's crates, re-exported as modules: [`domain`], [`tools`], [`changeset`],
//! [`store`], [`sync`], [`confirm`]. Features: `journal` (the reference task journal,
//! `journal` and `journal_host`; off by default), `webhooks` (deliveries, also run by
//! the engine's worker) and `server`.
//!
//! A service gates its tool `set_body`: the agent's call waits for a person, and the
//! handler runs once the person confirms, in the transaction that records the decision.
//!
//! ```
//! use assent::changeset::parse_tool_calls;
//! use assent::domain::{OffsetDateTime, Target};
//! use assent::tools::{ToolMode, ToolRegistry};
//! use assent::{AgentPolicy, Engine, SimpleHost, Store, ToolSpec, WakeRequest};
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! const NOTES: &str = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)";
//!
//! async fn service(url: &str) -> Result<(), Box<dyn std::error::Error>> {
//!     let host = SimpleHost::new("notes")
//!         .migration("notes", NOTES, NOTES)
//!         .handle("set_body", |tx, call| {
//!             Box::pin(async move {
//!                 let body = call.args["body"].as_str().ok_or("no body")?;
//!                 sqlx::query("UPDATE notes SET body = $1 WHERE id = $2")
//!                     .bind(body)
//!                     .bind(&call.target.target.id)
//!                     .execute(tx)
//!                     .await?;
//!                 Ok(format!("Body set to {body}."))
//!             })
//!         })
//!         // Every note is in category `notes` (a real service reads it from its table).
//!         .category(|_tx, _note| Box::pin(async { Ok(Some("notes".to_owned())) }));
//!     let schema = json!({"type": "object", "required": ["body"],
//!         "properties": {"body": {"type": "string"}}});
//!     let mut tools = ToolRegistry::new();
//!     let spec = ToolSpec::new("set_body", "Replace a note's body.", ToolMode::Deferred, schema);
//!     tools.register(spec)?;
//!
//!     let store = Store::open(url).await?;
//!     let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
//!     let now = OffsetDateTime::now_utc();
//!     let policy = AgentPolicy::new(["notes"]);
//!     // The service's own writes go through the store's writer, as the engine's do.
//!     let mut tx = store.begin_write().await?;
//!     assent::store::agents::upsert(tx.connection(), "scribe", &policy, now).await?;
//!     sqlx::query("INSERT INTO notes VALUES ('n1', 'draft')")
//!         .execute(tx.connection())
//!         .await?;
//!     tx.commit().await?;
//!
//!     let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
//!         "name": "set_body", "input": {"body": "final"}}]))?;
//!     let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
//!     let wake = engine.wakes().wake(request, now).await?;
//!     assert_eq!(wake.responses[0].content, "Proposal queued for user review.");
//!
//!     let set = wake.change_set.ok_or("nothing queued")?;
//!     let confirmed = engine.confirmations().confirm_item(assent_confirm::ItemRef::new(set.id, 0), now).await?;
//!     assert_eq!(confirmed.message(), "Body set to final.");
//!     let body: String = sqlx::query_scalar("SELECT body FROM notes")
//!         .fetch_one(store.read_connection().await?.connection())
//!         .await?;
//!     assert_eq!(body, "final");
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let dir = tempfile::tempdir()?;
//!     let url = format!("sqlite://{}", dir.path().join("service.db").display());
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(service(&url))
//! }
//! ```

pub use assent_confirm::{Engine, ItemRef, SimpleHost, WakeRequest};
#[cfg(feature = "server")]
pub use assent_server::Server;
pub use assent_store::Store;
pub use assent_tools::{AgentPolicy, ToolSpec};

pub use assent_changeset as changeset;
pub use assent_confirm as confirm;
pub use assent_domain as domain;
#[cfg(feature = "journal")]
pub use assent_journal as journal;
#[cfg(feature = "journal")]
pub use assent_journal_host as journal_host;
#[cfg(feature = "server")]
pub use assent_server as server;
pub use assent_store as store;
pub use assent_sync as sync;
pub use assent_tools as tools;
#[cfg(feature = "webhooks")]
pub use assent_webhooks as webhooks;
