//! `assent hook`: a person in front of the tools of the coding agents people already
//! run (Claude Code, Codex, Cursor, Copilot, VS Code, Gemini CLI), through the hook
//! each of them calls before a tool runs and obeys.
//!
//! - [`parse`] reads one event of an agent's hook (untrusted input: refused with the
//!   reason when malformed, never allowed), pure.
//! - [`decide`] routes the call through the agent's rules with the engine's own wake
//!   (the one decision point of every door), queues what needs a person, and waits
//!   for the decision through the change feed (`gate.rs` documents how).
//!   A call a person allowed for the rest of its session (a session grant) runs
//!   unasked under the grant, recorded as such (`session`).
//! - [`record_ran`] writes an after event (what ran) into the audit trail, linked to
//!   the decision by the agent's `tool_use_id`.
//! - [`render`] answers in the agent's dialect, with only the fields it documents,
//!   pure.
//!
//! - [`default_wait`]: how long a call waits for a person by default;
//!   [`HookOptions::run_ends`]: when the hook's whole run ends, counted from its start
//!   (a denial when the database keeps it busy); `install` writes each agent's timeout
//!   above that run.
//! - [`doctor`]: what `assent doctor` reads in a settings file: whether a failure of
//!   Assent blocks each hook of ours or lets the call through, and the repair.
//! - [`preset`]: the starter rules `assent hook install KIND --preset read-only` sets.
//! - [`sessions`]: what a coding agent's session did, call by call, read from what
//!   the hooks recorded (`assent sessions`, `assent session show`).
//! - (feature `http`) `http::routes`: `POST /api/hooks/{kind}` on `assent serve`, the
//!   same code behind an agent token.
//!
//! **Architecture Invariant:** no decision of its own: allow, ask and deny come from
//! the engine's wake, a person's answer from the confirmation service; every failure
//! is a denial or a blocking exit, never an allow.
//!
//! A Claude Code `PreToolUse` event read, and a denial rendered as Claude Code expects it:
//!
//! ```
//! use assent_hook::{AgentKind, Answer, parse, render};
//!
//! let event = parse(
//!     AgentKind::ClaudeCode,
//!     br#"{"hook_event_name": "PreToolUse", "session_id": "s1", "cwd": "/work",
//!         "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}"#,
//! )?;
//! assert_eq!(event.tool_name, "Bash");
//! let reply = render(AgentKind::ClaudeCode, &event, &Answer::Deny { reason: "Not now.".into() });
//! assert!(reply.stdout.contains("deny"), "{}", reply.stdout);
//! # Ok::<(), assent_hook::HookError>(())
//! ```

mod answer;
pub mod doctor;
mod error;
mod event;
mod gate;
#[cfg(feature = "http")]
pub mod http;
pub mod install;
mod kind;
pub mod preset;
mod session;
pub mod sessions;
mod summary;
mod workspace;

pub use answer::{Answer, Reply, refusal, render};
pub use error::HookError;
pub use event::{CURSOR_SHELL_TOOL, HookEvent, MAX_EVENT_BYTES, Phase, parse};
pub use gate::{
    ALLOWED, ANSWERED_IN_CLIENT, DEFAULT_CATEGORY, HookOptions, OnTimeout, TARGET_KIND, decide,
    default_wait, hook_host, record_ran,
};
pub use kind::AgentKind;
pub use workspace::Workspaces;
