//! Assent puts a person between an LLM agent and the data it wants to change.
//!
//! Start here. The types a service needs to gate its own tools are at the top:
//! [`Engine`] (opened over a [`Store`], a tool registry of [`ToolSpec`]s and a host),
//! [`SimpleHost`] (a host made of closures), [`WakeRequest`] (an agent's calls),
//! [`ItemRef`] (the item a person decides), [`AgentPolicy`] (what an agent may do) and,
//! with the `server` feature, `Server` (the review page and API over the service's own
//! engine); [`prelude`] imports them at once. The rest comes as modules: [`domain`]
//! (change sets, targets, times), [`tools`] (tool specs, registries, policies),
//! [`changeset`] (parsing an agent's calls), [`store`] (the store's types and what a
//! service reads), [`sync`] (device sync batches) and [`confirm`] (the engine's
//! services, the [`Host`](confirm::Host) trait, and [`Admin`](confirm::Admin), the
//! operator's side: tokens, webhooks, Slack, sync, grants, the audit trail). Features:
//! `journal` (the reference task journal, `journal` and `journal_host`; off by
//! default), `webhooks` (deliveries, also run by the engine's worker) and `server`.
//!
//! The service's rows are written by its handlers, inside the engine's transaction;
//! the engine's own rows (decisions, audit records, the consent chain) only through
//! the engine's methods, never by hand: [`store`] hands out no table writer.
//!
#![doc = concat!("```\n", include_str!("../examples/service.rs"), "```")]

pub use assent_confirm::{Engine, ItemRef, SimpleHost, WakeRequest};
#[cfg(feature = "server")]
pub use assent_server::Server;
/// A service opens the store its engine runs on once, at start, from a URL: `sqlite://`
/// (a file, created when missing) or `postgres://`; its migrations run then.
///
/// ```
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use assent::Store;
/// use assent::store::Backend;
///
/// let store = Store::open("sqlite::memory:").await?;
/// assert_eq!(store.backend(), Backend::Sqlite);
/// // The service's own reads, on a connection of the store's pool.
/// let one: i64 = sqlx::query_scalar("SELECT 1")
///     .fetch_one(&mut *store.read_connection().await?)
///     .await?;
/// assert_eq!(one, 1);
/// # Ok(())
/// # }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// #     runtime.block_on(demo())
/// # }
/// ```
pub use assent_store::Store;
pub use assent_tools::{AgentPolicy, ToolSpec};

#[doc(inline)]
pub use assent_changeset as changeset;
#[doc(inline)]
pub use assent_confirm as confirm;
#[doc(inline)]
pub use assent_domain as domain;
#[cfg(feature = "journal")]
#[doc(inline)]
pub use assent_journal as journal;
#[cfg(feature = "journal")]
#[doc(inline)]
pub use assent_journal_host as journal_host;
#[cfg(feature = "server")]
#[doc(inline)]
pub use assent_server as server;
#[doc(inline)]
pub use assent_sync as sync;
#[doc(inline)]
pub use assent_tools as tools;
#[cfg(feature = "webhooks")]
#[doc(inline)]
pub use assent_webhooks as webhooks;

pub mod prelude {
    //! What a service imports to gate its tools: `use assent::prelude::*;`.

    pub use assent_changeset::parse_tool_calls;
    pub use assent_confirm::{ConfirmError, Engine, Host, ItemRef, SimpleHost, WakeRequest};
    pub use assent_domain::{OffsetDateTime, Target};
    pub use assent_store::Store;
    pub use assent_tools::{AgentPolicy, ToolMode, ToolRegistry, ToolSpec};
}

pub mod store {
    //! The store's types and the read models a service needs; no table writer.
    //!
    //! A service opens the [`Store`] its engine runs on, writes its own rows in the
    //! engine's transaction ([`WriteTx`], through a handler's connection, an
    //! [`Connection`]) and reads them on a [`ReadConnection`]. The engine's own rows
    //! (decisions, audit records, the consent chain, the sync outbox) are written by the
    //! engine's methods alone: the store's table functions stay inside the workspace
    //! (`assent-store`), so that a decision is never written without its audit record and
    //! its chain entry. What became of the engine's rows is read through the engine
    //! ([`Engine::open_sets`](crate::Engine::open_sets),
    //! [`ConfirmationService::outcome`](crate::confirm::ConfirmationService::outcome)) and
    //! its operator's side ([`Admin`](crate::confirm::Admin)).
    //!
    //! The store's table writers are not here: a decision written by hand, without
    //! its audit record and chain entry, does not compile in a dependent.
    //!
    //! ```compile_fail
    //! let _ = assent::store::decisions::insert;
    //! ```
    //! ```compile_fail
    //! let _ = assent::store::audit::insert;
    //! ```
    //! ```compile_fail
    //! let _ = assent::store::outbox::enqueue;
    //! ```
    //! ```compile_fail
    //! let _ = assent::store::operations::record_applied;
    //! ```
    //! ```compile_fail
    //! let _ = assent::store::agents::upsert;
    //! ```

    /// The read models of the engine's rows, as the engine's methods return them.
    pub use assent_store::change_sets::{PendingFilter, Undoes};
    pub use assent_store::jobs::{Job, JobStatus, ServedItem};
    /// A host's rows that take part in device sync (see
    /// [`Host::entities`](crate::confirm::Host::entities)).
    pub use assent_store::sync::HostEntities;
    pub use assent_store::{
        Backend, Connection, DEFAULT_CONNECT_TIMEOUT, Durability, GroupCommits, HostMigration,
        MIGRATIONS_TABLE, ReadConnection, Savepoint, ServicePool, Store, StoreError, StoreOptions,
        WriteTx,
    };
}
