//! The host contract: what a service implements so the engine can gate its tools.
//!
//! A host owns some kinds of targets (the journal: `task`; a billing service:
//! `invoice`; the MCP gateway: `mcp`) and, for each, answers what the engine asks:
//! the target's category (for the agent's allowlist) and vector clock, its current
//! state (for redundancy rules and the reviewer's "before"), a handler per tool,
//! local tools, the entities it syncs between devices, and its own tables as
//! migrations applied after the engine's. Everything runs on the caller's connection,
//! inside the engine's transaction, so a confirmed change and its decision commit
//! together.

use assent_domain::Target;
use assent_store::sync::HostEntities;
use assent_store::{AnyConnection, HostMigration};
use assent_tools::{BoxFuture, CategoryResolver, Stateless, TargetState, ToolHandler};
use serde_json::Value;
use time::OffsetDateTime;

/// A call of a local tool (the agent's own output, e.g. its report).
#[derive(Debug, Clone, Copy)]
pub struct LocalCall<'a> {
    /// The agent.
    pub agent_id: &'a str,
    /// What the wake is about.
    pub target: &'a Target,
    /// The tool.
    pub tool_name: &'a str,
    /// Validated arguments.
    pub args: &'a Value,
    /// The time of the call.
    pub now: OffsetDateTime,
}

/// A target's state as a host loads it; `None` when the target does not exist.
pub type LoadedState = Option<Box<dyn TargetState>>;

/// The engine's view of one service: see the module documentation.
pub trait Host: Send + Sync {
    /// The host's name: ASCII letters, digits and underscores (it names the table that
    /// records which of its migrations a database ran).
    fn name(&self) -> &str;

    /// Its own tables, applied in order after the engine's by [`crate::Engine::open`].
    fn migrations(&self) -> &[HostMigration] {
        &[]
    }

    /// The handler of a (singular) tool, if the host has one.
    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<AnyConnection>>;

    /// Category and vector clock of targets.
    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection>;

    /// The target's current state: `Ok(None)` when it does not exist (a wake on it is
    /// refused), an error when it failed to load (nothing is suppressed as redundant
    /// then). The default has no state to compare with: every proposal is kept.
    fn snapshot<'a>(
        &'a self,
        conn: &'a mut AnyConnection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        let _ = (conn, target);
        Box::pin(async { Ok(Some(Box::new(Stateless) as Box<dyn TargetState>)) })
    }

    /// Handles a local tool; the text is the reply to the agent. The default has none.
    fn handle_local<'a>(
        &'a self,
        conn: &'a mut AnyConnection,
        call: LocalCall<'a>,
    ) -> BoxFuture<'a, Result<String, String>> {
        let _ = conn;
        let tool = call.tool_name.to_owned();
        Box::pin(async move { Err(format!("this host has no local tool {tool:?}")) })
    }

    /// The entities it syncs between devices, if any.
    fn entities(&self) -> Option<&dyn HostEntities> {
        None
    }
}
