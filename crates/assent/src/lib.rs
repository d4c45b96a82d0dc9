//! Assent puts a person between an LLM agent and the data it wants to change.
//!
//! This facade re-exports the workspace's crates under one name, for users who want the
//! whole engine; services that need one piece depend on that crate alone.

pub use assent_changeset as changeset;
pub use assent_confirm as confirm;
pub use assent_domain as domain;
#[cfg(feature = "journal")]
pub use assent_journal as journal;
#[cfg(feature = "journal")]
pub use assent_journal_host as journal_host;
pub use assent_store as store;
pub use assent_sync as sync;
pub use assent_tools as tools;
