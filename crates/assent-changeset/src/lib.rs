//! Pure planning of one agent wake: which tool calls run now, which wait for a person,
//! which are refused, and what the agent is told about each.
//!
//! - [`parse_calls`]: a wake's document in any [`Dialect`] (OpenAI Chat and Responses,
//!   Anthropic, Gemini, LangChain, Vercel AI SDK, MCP) → [`ToolCall`]s, every element
//!   accounted for; [`parse_tool_calls`] when the dialect does not matter;
//!   [`parse_calls_str`] reads the document's text, keeping every id as sent.
//! - [`reply_messages`]: the wake's replies as that dialect's tool-result messages
//!   ([`exact_reply_messages`]: as JSON text, each id repeated token for token);
//!   [`tool_definitions`]: the tools an agent may call as an SDK's `tools` parameter.
//! - [`WakePlanner`]: routes each call in order (validation, policy, batch explosion,
//!   redundancy, duplicates, the per-set cap) and answers with a [`PlannedCall`].
//! - [`ChangeSetBuilder`]: accumulates the deferred items of the wake and builds the
//!   [`assent_domain::ChangeSet`].
//! - Redundancy (ADR 0009): proposals the target's host says would change nothing
//!   ([`TargetState::redundancy`]) are skipped with feedback for the model. The rules
//!   are the host's; this crate names no tool.
//!
//! - [`render_history`]: decisions as the `## Recent User Decisions` section of the
//!   agent's next prompt, worded beside the replies.
//!
//! No I/O, no clock, no async runtime: the target's state, earlier pending items, recent
//! rejections, ids and `now` come in as arguments.
//!
//! A wake's document (here Anthropic's `tool_use` blocks) read into calls:
//!
//! ```
//! use assent_changeset::{ToolCall, parse_tool_calls};
//! use serde_json::json;
//!
//! let calls: Vec<ToolCall> = parse_tool_calls(&json!([{"type": "tool_use", "id": "toolu_1",
//!     "name": "refund_invoice", "input": {"amountCents": 2500}}]))?;
//! assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("toolu_1", "refund_invoice"));
//! # Ok::<(), assent_changeset::ChangesetError>(())
//! ```

mod builder;
mod calls;
mod definitions;
mod dialect;
mod error;
mod history;
mod planner;
mod replies;
pub mod reply;

/// Re-exported from `assent-tools`, where a host's rules answer with it.
pub use assent_tools::{Redundancy, TargetState};
pub use builder::{AddOutcome, ChangeSetBuilder, DEFAULT_MAX_ITEMS_PER_SET};
pub use calls::{ToolArguments, ToolCall, parse_tool_calls};
pub use definitions::tool_definitions;
pub use dialect::{
    CallOrigin, Dialect, ParsedCalls, SentId, derived_gemini_id, parse_calls, parse_calls_str,
};
pub use error::ChangesetError;
pub use history::{
    HISTORY_HEADING, MAX_HISTORY_ENTRIES, MAX_HISTORY_LINE_CHARS, MAX_HISTORY_TOKENS,
    MAX_RUN_ERROR_CHARS, RunStatus, render_history, render_history_with_runs,
};
pub use planner::{CallPlan, PlannedCall, PlannerConfig, PolicyDenied, RefusedAgain, WakePlanner};
pub use replies::{CallReply, ReplyMessages, exact_reply_messages, reply_messages};
