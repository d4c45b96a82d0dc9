//! The reference task journal: the catalog of tools an agent uses to change a task, and
//! the [`TaskSnapshot`] of a task's current state that redundancy checks and review
//! screens compare proposals against.
//!
//! This crate is pure: the catalog is data plus summary functions, and snapshots are
//! plain values handed in by whoever loaded them.

mod catalog;
mod snapshot;

pub use catalog::{
    TASK_STATUSES, catalog, normalize_priority, normalize_status, parse_estimate_minutes,
    register_catalog, tool,
};
pub use snapshot::{ChecklistItem, TaskSnapshot};
