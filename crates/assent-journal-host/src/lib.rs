//! The reference task journal as a real host of the engine.
//!
//! Tasks live in their own tables (`tasks`, `task_labels`, `checklist_items`) in the
//! same SQLite database as the engine's change sets and decisions, so a person's
//! confirmation and the change it causes commit — or roll back — in one transaction.
//! [`JournalHost`] implements [`assent_confirm::Host`] for targets of kind `task`: a handler for every
//! singular tool of the journal's catalog, the category/vector-clock resolver the
//! audited executor checks policy with, task snapshots for redundancy checks and
//! review, and the local tools (the agent's report and observations).
//!
//! In device sync, [`TaskEntities`] exports every task (with its labels and checklist)
//! as one synced entity and writes merged versions back as they came (their clock and
//! `updated_at`, no outbox message): the one writer the invariant below exempts.
//!
//! Architecture invariant: every write to a task ticks its vector clock for this host,
//! sets `updated_at` from the caller's `now` (nothing here reads the clock) and
//! enqueues the task's new state in the outbox, all on the caller's connection; this
//! crate never opens, commits or rolls back a transaction itself.
//!
//! The journal's engine on an in-memory database, and a task of its own tables:
//!
//! ```
//! use assent_domain::OffsetDateTime;
//! use assent_journal_host::{NewTask, create_task, journal_engine, load_task};
//! use assent_store::Store;
//!
//! async fn journal() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = Store::open("sqlite::memory:").await?;
//!     let engine = journal_engine(store.clone()).await?;
//!     assert_eq!(engine.host().name(), "journal");
//!     let task = NewTask {
//!         title: "Write the report".to_owned(),
//!         category: Some("work".to_owned()),
//!         ..NewTask::default()
//!     };
//!     let mut tx = store.begin_write().await?;
//!     create_task(tx.connection(), "t1", &task, "laptop", OffsetDateTime::now_utc()).await?;
//!     tx.commit().await?;
//!     let mut conn = store.read_connection().await?;
//!     let loaded = load_task(&mut conn, "t1").await?.ok_or("no task")?;
//!     assert_eq!(loaded.title, "Write the report");
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(journal())
//! }
//! ```

#![forbid(unsafe_code)]

mod error;
mod handlers;
mod host;
#[cfg(feature = "http")]
pub mod http;
mod migrations;
mod sync;
mod tasks;

pub use error::JournalError;
pub use host::{JournalHost, TASK_KIND, journal_engine, task_target};
pub use migrations::MIGRATIONS;
pub use sync::{TASK_ENTITY, TaskEntities};
pub use tasks::{NewTask, create_task, load_task, task_vector_clock};

#[cfg(test)]
mod test_support {
    //! A fresh database per test, in a temporary directory.

    use assent_store::Store;
    use tempfile::TempDir;
    use time::OffsetDateTime;
    use time::macros::datetime;

    /// The fixed time of the tests.
    pub(crate) const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

    /// A migrated store in its own directory (deleted on drop).
    pub(crate) struct TestDb {
        pub(crate) store: Store,
        _dir: TempDir,
    }

    impl TestDb {
        pub(crate) async fn open() -> Self {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite://{}/t.db", dir.path().display());
            let store = Store::open(&url).await.expect("store opens");
            store
                .migrate_host("journal", crate::MIGRATIONS)
                .await
                .expect("journal tables");
            Self { store, _dir: dir }
        }
    }
}
