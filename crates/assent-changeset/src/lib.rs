//! Pure planning of one agent wake: which tool calls run now, which wait for a person,
//! which are refused, and what the agent is told about each.
//!
//! - [`parse_tool_calls`]: OpenAI `tool_calls` or Anthropic `tool_use` blocks → [`ToolCall`]s.
//! - [`WakePlanner`]: routes each call in order (validation, policy, batch explosion,
//!   redundancy, duplicates, the per-set cap) and answers with a [`PlannedCall`].
//! - [`ChangeSetBuilder`]: accumulates the deferred items of the wake and builds the
//!   [`assent_domain::ChangeSet`].
//! - [`RedundancyCheck`] (ADR 0009): proposals that would change nothing are skipped
//!   with feedback for the model.
//!
//! No I/O, no clock, no async runtime: the task snapshot, earlier pending items, recent
//! rejections, ids and `now` come in as arguments.

mod builder;
mod calls;
mod error;
mod planner;
mod redundancy;
pub mod reply;

pub use builder::{AddOutcome, ChangeSetBuilder, DEFAULT_MAX_ITEMS_PER_SET};
pub use calls::{ToolArguments, ToolCall, parse_tool_calls};
pub use error::ChangesetError;
pub use planner::{CallPlan, PlannedCall, PlannerConfig, WakePlanner};
pub use redundancy::{Redundancy, RedundancyCheck};
