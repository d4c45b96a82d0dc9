//! What a host application provides so the engine can act on its data.

use assent_journal::TaskSnapshot;
use assent_store::AnyConnection;
use assent_tools::{BoxFuture, CategoryResolver, ToolHandler};
use serde_json::Value;
use time::OffsetDateTime;

/// A call of a local tool (the agent's own output, e.g. its report).
#[derive(Debug, Clone, Copy)]
pub struct LocalCall<'a> {
    /// The agent.
    pub agent_id: &'a str,
    /// The task the wake is about.
    pub task_id: &'a str,
    /// The tool.
    pub tool_name: &'a str,
    /// Validated arguments.
    pub args: &'a Value,
    /// The time of the call.
    pub now: OffsetDateTime,
}

/// The host's side of the engine: handlers for its tools, facts about its entities,
/// snapshots for redundancy checks, and local tools. Everything runs on the caller's
/// connection, inside the engine's transaction, so a confirmed change and its decision
/// commit together.
pub trait TaskHost: Send + Sync {
    /// The handler of a (singular) tool, if the host has one.
    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<AnyConnection>>;

    /// Category and vector clock of target entities.
    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection>;

    /// The task's current state; `Ok(None)` when it does not exist.
    fn snapshot<'a>(
        &'a self,
        conn: &'a mut AnyConnection,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskSnapshot>, String>>;

    /// Handles a local tool; the text is the reply to the agent.
    fn handle_local<'a>(
        &'a self,
        conn: &'a mut AnyConnection,
        call: LocalCall<'a>,
    ) -> BoxFuture<'a, Result<String, String>>;
}
