//! `assent-rig`: a person in a rig agent's loop.
//!
//! [`AssentHook`] is a rig-agent hook (`AgentBuilder::add_hook`) that routes every tool
//! call of a rig agent through an Assent engine: the agent's policy decides, immediate
//! calls run through the audited executor, denied ones are refused with the engine's
//! reply text, deferred ones become a change set a person decides anywhere (and, with
//! [`AssentHook::wait`], the model reads the outcome: the handler's result, the edited
//! call's result, or the rejection with its reason). [`RigToolHost::rig_tool`] makes a
//! rig [`Tool`](rig_core::tool::Tool) a tool of a [`SimpleHost`](assent_confirm::SimpleHost),
//! so its body runs through the engine, exactly once, audited; [`tool_spec`] is its
//! catalog entry.
//!
//! The adapter is thin: it maps rig's dispatch boundary onto a wake and a set's
//! outcome and knows no host, no table and no SDK dialect of its own.

mod error;
mod hook;
mod replies;
mod tools;

pub use error::RigError;
pub use hook::{Answer, AssentHook};
pub use tools::{AssentOperation, RigToolHost, tool_spec};
