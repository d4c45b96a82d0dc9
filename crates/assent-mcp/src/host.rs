//! The engine's host for MCP calls: target kind `mcp`, one target per server.
//!
//! Every tool's effect lies outside the database, so [`McpHost`] declares it
//! `Effect::External` (idempotent when the tool's `idempotentHint` says so and the
//! operator trusts hints, `--trust hints`): a
//! confirmation, from whatever process, records the decision and an execution job, and
//! the gateway's executor (`Gateway::tick`, `engine.run_due_jobs`) runs the upstream
//! call through [`UpstreamCaller`] with the item's operation id as the idempotency key —
//! exactly once, or visibly in doubt. A tool that runs at once (an allow rule, or a
//! trusted read-only hint) still runs inline in the wake ([`InlineUpstream`]), like any
//! immediate call.

use crate::catalog::TARGET_KIND;
use crate::upstream::UpstreamCaller;
use crate::upstream::UpstreamError;
use assent_confirm::{Effect, ExternalCall, ExternalError, ExternalHandler, Host, Reconciliation};
use assent_domain::{Target, VectorClock};
use assent_store::AnyConnection;
use assent_tools::{
    BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The host's name for server `server`: `mcp_` and the name with every character
/// other than an ASCII letter or digit turned into `_`.
pub fn host_name(server: &str) -> String {
    let tail: String = server
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("mcp_{tail}")
}

/// Runs an immediate call on the upstream inline, within the wake.
#[derive(Debug)]
pub struct InlineUpstream(pub Arc<UpstreamCaller>);

impl ToolHandler<AnyConnection> for InlineUpstream {
    fn execute<'a>(
        &'a self,
        _ctx: &'a mut AnyConnection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        Box::pin(async move {
            let called = self
                .0
                .call(
                    &invocation.operation_id,
                    &invocation.tool_name,
                    &invocation.args,
                )
                .await;
            match called {
                Ok(message) => Ok(ToolOutcome {
                    message,
                    mutated: true,
                }),
                Err(error) => Err(ToolsError::HandlerFailed {
                    tool: invocation.tool_name.clone(),
                    message: error.to_string(),
                }),
            }
        })
    }
}

/// Runs an approved call on the upstream for the execution ledger, with the item's
/// operation id as the idempotency key and no database lock held.
#[derive(Debug)]
pub struct LedgerUpstream(pub Arc<UpstreamCaller>);

impl ExternalHandler for LedgerUpstream {
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        Box::pin(async move {
            self.0
                .call(call.operation_id, call.tool_name, call.args)
                .await
                .map_err(|error| match error {
                    UpstreamError::Retryable(text) => ExternalError::Retryable(text),
                    UpstreamError::Permanent(text) => ExternalError::Permanent(text),
                })
        })
    }

    fn reconcile<'a>(&'a self, _call: ExternalCall<'a>) -> BoxFuture<'a, Reconciliation> {
        // MCP has no way to ask a server whether a call happened.
        Box::pin(async { Reconciliation::Unknown })
    }
}

/// The host of one gated MCP server: see the module documentation.
#[derive(Debug)]
pub struct McpHost {
    name: String,
    resolver: ServerCategory,
    inline: InlineUpstream,
    ledger: LedgerUpstream,
    idempotent: BTreeSet<String>,
}

impl McpHost {
    /// The host of server `server`, whose target (`mcp`, `server`) has `category`, and
    /// whose calls `caller` runs; the tools named in `idempotent` (their trusted
    /// `idempotentHint`, see `catalog::idempotent`) are simply run again when a crash
    /// leaves them in doubt.
    pub fn new(
        server: &str,
        category: &str,
        caller: Arc<UpstreamCaller>,
        idempotent: BTreeSet<String>,
    ) -> Self {
        Self {
            name: host_name(server),
            resolver: ServerCategory {
                server: server.to_owned(),
                category: category.to_owned(),
            },
            inline: InlineUpstream(caller.clone()),
            ledger: LedgerUpstream(caller),
            idempotent,
        }
    }

    /// The target every call of this server is about.
    pub fn target(&self) -> Target {
        Target::new(TARGET_KIND, self.resolver.server.clone())
    }
}

impl Host for McpHost {
    fn name(&self) -> &str {
        &self.name
    }

    fn handler(&self, _tool_name: &str) -> Option<&dyn ToolHandler<AnyConnection>> {
        Some(&self.inline)
    }

    fn effect(&self, tool_name: &str) -> Effect {
        Effect::External {
            idempotent: self.idempotent.contains(tool_name),
        }
    }

    fn external(&self, _tool_name: &str) -> Option<&dyn ExternalHandler> {
        Some(&self.ledger)
    }

    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection> {
        &self.resolver
    }
}

/// The category of the server's one target; any other target has none (denied).
#[derive(Debug)]
struct ServerCategory {
    server: String,
    category: String,
}

impl CategoryResolver<AnyConnection> for ServerCategory {
    fn category_of<'a>(
        &'a self,
        _ctx: &'a mut AnyConnection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let ours = target.kind == TARGET_KIND && target.id == self.server;
        let category = ours.then(|| self.category.clone());
        Box::pin(async move { Ok(category) })
    }

    fn vector_clock_of<'a>(
        &'a self,
        _ctx: &'a mut AnyConnection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async { Ok(None) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_is_letters_digits_and_underscores() {
        assert_eq!(host_name("files"), "mcp_files");
        assert_eq!(host_name("my-files.v2"), "mcp_my_files_v2");
    }
}
