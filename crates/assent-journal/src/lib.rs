//! The reference task journal: the catalog of tools an agent uses to change a task, and
//! the [`TaskSnapshot`] of a task's current state that redundancy checks and review
//! screens compare proposals against.
//!
//! This crate is pure: the catalog is data plus summary functions, and snapshots are
//! plain values handed in by whoever loaded them.
//!
//! ```
//! use assent_journal::{catalog, normalize_priority, tool};
//!
//! let tools = catalog();
//! let spec = tools.get(tool::UPDATE_TASK_PRIORITY).ok_or("the catalog has it")?;
//! assert_eq!(spec.name, "update_task_priority");
//! assert_eq!(normalize_priority(" p1 "), "P1");
//! # Ok::<(), &str>(())
//! ```

mod catalog;
mod redundancy;
mod snapshot;

pub use catalog::{
    TASK_PRIORITIES, TASK_STATUSES, catalog, format_due_date, normalize_priority, normalize_status,
    parse_due_date, parse_estimate_minutes, register_catalog, tool,
};
pub use snapshot::{ChecklistItem, TaskSnapshot};
