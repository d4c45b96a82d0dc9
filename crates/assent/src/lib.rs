//! Assent puts a person between an LLM agent and the data it wants to change.
//!
//! This facade re-exports the workspace's crates under one name, for users who want the
//! whole engine; services that need one piece depend on that crate alone. Features:
//! `journal` (default: the reference task journal), `webhooks` (deliveries, also run
//! by the engine's worker) and `server` (the review page and API, embeddable).

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
