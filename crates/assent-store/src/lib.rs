//! Persistence of Assent on SQLite or PostgreSQL (a native sqlx pool, the store's own
//! or the service's, the [`Backend`] chosen once from the URL scheme or the pool; each
//! backend behind its cargo feature, `sqlite` and `postgres`): change sets and their items, decisions, the audit
//! trail, applied operations and the sync outbox, each a function on the caller's
//! connection. It knows no host and runs no tool: the engine (assent-confirm) drives
//! hosts; a host's own tables come with its migrations ([`Store::migrate_host`]).
//!
//! Every write that another device must learn about enqueues an outbox message in the
//! same transaction ([`outbox::enqueue`]), so a rollback leaves neither the row nor its
//! message behind. Functions that take `&mut` [`Connection`] (the host API's connection:
//! an sqlx executor for the `Any` database that also hands out the native one) compose
//! inside one
//! transaction opened with [`Store::begin_write`] (`BEGIN IMMEDIATE` on SQLite, an
//! advisory writer lock on PostgreSQL, so concurrent writers, in this process or
//! another, queue on the lock instead of failing late), on its
//! [`WriteTx::connection`]; nested work goes in a [`WriteTx::savepoint`]. Reads take
//! [`Store::read_connection`]; the pool itself stays inside the store.
//!
//! Device sync ([`sync`]) exports this device's synced state as an
//! [`assent_sync::SyncBatch`] and merges a peer's batch by executing the pure plan of
//! [`assent_sync::plan_merge`] in one transaction; host-owned rows (a journal's tasks)
//! take part through [`sync::HostEntities`].
//!
//! Webhooks ([`webhooks`]): a change set created, resolved or expired writes its event
//! and one delivery per interested subscription in the same transaction; the sender
//! (assent-webhooks) claims due deliveries like the outbox's.
//!
//! Durability on SQLite: WAL journal, `synchronous = FULL` by default (a committed decision
//! survives power loss, not only a crash of the process; [`Durability`] names the
//! trade-off), foreign keys on, a 10 s busy timeout.
//!
//! A store on an in-memory SQLite database, and an agent's policy written and read back:
//!
//! ```
//! use assent_store::{Backend, Store, agents};
//! use assent_tools::AgentPolicy;
//! use time::OffsetDateTime;
//!
//! async fn policy() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = Store::open("sqlite::memory:").await?;
//!     assert_eq!(store.backend(), Backend::Sqlite);
//!     let now = OffsetDateTime::now_utc();
//!     let mut tx = store.begin_write().await?;
//!     agents::upsert(tx.connection(), "scribe", &AgentPolicy::new(["notes"]), now).await?;
//!     tx.commit().await?;
//!     let mut conn = store.read_connection().await?;
//!     let read = agents::policy_at(&mut conn, "scribe", now).await?.ok_or("no agent")?;
//!     assert_eq!(read.allowed_categories().collect::<Vec<_>>(), ["notes"]);
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(policy())
//! }
//! ```

// A build with one backend (or none) leaves the other's helpers unused; the full build
// (both, what CI lints) keeps every warning.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(
        dead_code,
        unused_mut,
        unused_variables,
        unused_imports,
        unreachable_code,
        irrefutable_let_patterns
    )
)]

/// The join condition of an item (`i`) and the job (`j`) holding its confirmation in a
/// hold window ([`jobs::Job::scheduled`]): one place for the reads of a single item and
/// of a whole set ([`jobs::served_item`], [`change_sets::load_for_decision`]).
macro_rules! held_job_of_item {
    () => {
        "j.change_set_id = i.change_set_id AND j.item_index = i.item_index
          AND j.held = 1 AND j.status = 'approved' AND j.attempts = 0"
    };
}

/// This device's chain head as three columns of a read of other rows
/// (`chain_device`, `chain_seq`, `chain_hash`: [`chain::decode_head_named`]), as
/// `chain::HEAD` reads it alone. Only SQLite's decision read takes the head with the set.
#[cfg(feature = "sqlite")]
macro_rules! chain_head_columns {
    () => {
        "(SELECT host_id FROM sync_device WHERE singleton = 1) AS chain_device,
         (SELECT seq FROM consent_chain c WHERE c.device_id = (SELECT host_id FROM sync_device WHERE singleton = 1) ORDER BY seq DESC LIMIT 1) AS chain_seq,
         (SELECT hash FROM consent_chain c WHERE c.device_id = (SELECT host_id FROM sync_device WHERE singleton = 1) ORDER BY seq DESC LIMIT 1) AS chain_hash"
    };
}

/// The columns of a decision's row, in the order `decisions::write_row` and
/// `plan::insert_decisions` bind them.
macro_rules! decision_row_columns {
    () => {
        "id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason,
     edited_args, human_summary, args, created_at, vector_clock, origin_host, approval_digest, decided_by, shadow"
    };
}

/// `($1, …, $columns), ($columns+1, …), …`: the placeholders of a multi-row `VALUES`
/// list of `rows` rows, numbered in row order (every value is bound, never formatted in).
pub(crate) fn values_placeholders(rows: usize, columns: usize) -> String {
    let row = |row: usize| {
        let placeholders: Vec<String> = (1..=columns)
            .map(|column| format!("${}", row * columns + column))
            .collect();
        format!("({})", placeholders.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

#[cfg(feature = "sqlite")]
mod c_api;
mod connection;
mod error;
mod row;
mod store;
mod writer;

#[cfg(test)]
mod query_plans;

pub mod agents;
pub mod approvals;
pub mod audit;
pub mod chain;
pub mod change_feed;
pub mod change_sets;
pub mod decisions;
pub mod delegation;
pub mod expiry_warnings;
pub mod host_tools;
pub mod jobs;
pub mod mcp_sessions;
pub mod operations;
pub mod outbox;
pub mod phone;
pub mod plan;
pub mod policy_file;
pub mod proof;
pub mod rehost;
mod rejection_memory;
pub mod rejections;
pub mod run_history;
pub mod slack;
pub mod sync;
pub mod telegram;
pub mod timefmt;
pub mod tokens;
pub mod verified_heads;
pub mod waits;
pub mod webhooks;
pub mod why;

pub use audit::StoreAuditSink;
pub use connection::Connection;
pub use error::StoreError;
pub use store::{
    Backend, DEFAULT_CONNECT_TIMEOUT, Durability, HostMigration, MIGRATIONS_TABLE,
    POSTGRES_MIGRATIONS, ReadConnection, SQLITE_MIGRATIONS, ServicePool, Store, StoreOptions,
};
pub use writer::{GroupCommits, Savepoint, WriteTx};

#[cfg(test)]
mod placeholders {
    #[test]
    fn placeholders_number_rows_in_order() {
        assert_eq!(
            super::values_placeholders(2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(super::values_placeholders(1, 1), "($1)");
        assert_eq!(super::values_placeholders(0, 4), "");
    }
}
