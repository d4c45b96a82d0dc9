//! Device sync for Assent, planned purely: what two devices exchange ([`SyncBatch`]) and
//! how an incoming batch merges into local state ([`plan_merge`], a diff turned into
//! sorted [`SyncOp`]s that the store executes in one transaction).
//!
//! Like `assent-domain`, this crate performs no I/O: no database, no clock, no network.
//! The same local state and the same batch always give the same operations, in the
//! same order, on every device. The rules (ADR 0006 point 7):
//!
//! - Mutable rows (a change set's status, a host entity such as a journal task) carry a
//!   [`assent_domain::VectorClock`]: incoming newer → apply; local newer or equal →
//!   keep; concurrent → one deterministic rule ([`plan_merge`] documents it).
//! - Decisions and audit records are append-only facts merged by union.
//! - A decided item beats a pending one; of two different final decisions on one item,
//!   the earlier by (time, host id, decision id) wins and the other is kept as a
//!   [`Conflict`].
//!
//! - A batch is checked as strictly as the local writes it stands for (item caps, the
//!   tasks and decisions it refers to, plausible clocks and times, an audit record
//!   behind every task write) before anything of it is planned.
//!
//! - Jobs of the execution ledger travel with the items' effects so that every device
//!   shows an external item's run; only the device that owns a job runs it, and only
//!   its owner's newer copy replaces it elsewhere. A confirmation demoted by a merge
//!   stops its own job ([`SyncOp::StopDemotedJob`]): never run, or in doubt.
//!
//! Merging is idempotent (a replayed batch plans nothing) and its result does not
//! depend on the order batches arrive in; both are property-tested.
//!
//! A batch from a device that has nothing yet plans nothing, on every device alike:
//!
//! ```
//! use assent_sync::{FORMAT_VERSION, SyncBatch, SyncState, plan_merge};
//! use time::macros::datetime;
//!
//! let now = datetime!(2026-03-01 12:00 UTC);
//! let batch = SyncBatch {
//!     format_version: FORMAT_VERSION,
//!     batch_id: uuid::Uuid::nil(),
//!     from_host: "phone".to_owned(),
//!     created_at: now,
//!     state: SyncState::default(),
//! };
//! let plan = plan_merge(&SyncState::default(), &batch, "laptop", now)?;
//! assert!(plan.is_empty());
//! # Ok::<(), assent_sync::SyncError>(())
//! ```

mod batch;
mod check;
mod error;
mod plan;

pub use batch::{
    EFFECTS, EntityVersion, FORMAT_VERSION, JOB_STATUSES, OLDEST_FORMAT_VERSION, SyncBatch,
    SyncState, SyncedAuditRecord, SyncedDecision, SyncedEffect, SyncedJob,
};
pub use check::{EARLIEST_TIME, MAX_CLOCK_COUNTER, MAX_CLOCK_SKEW};
pub use error::SyncError;
pub use plan::{Conflict, SyncOp, SyncPlan, plan_merge};
