//! The engine's host for MCP calls: target kind `mcp`, one target per server.
//!
//! THE LEDGER SEAM: until the execution ledger lands, a confirmed call runs inline,
//! inside the confirming transaction, through [`InlineUpstream`] (a `ToolHandler` over
//! [`UpstreamCaller::call`]). With the ledger, [`McpHost`] declares every tool
//! `Effect::External` (idempotent when the tool's `idempotentHint` says so) and returns
//! the caller from `external()`; `handler()` then returns `None`, and the gateway's
//! tick runs `engine.run_due_jobs(now)`.

use crate::catalog::TARGET_KIND;
use crate::upstream::UpstreamCaller;
use assent_confirm::Host;
use assent_domain::{Target, VectorClock};
use assent_store::AnyConnection;
use assent_tools::{
    BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
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

/// Runs a confirmed (or immediate) call on the upstream inline: the one adapter the
/// execution ledger replaces.
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

/// The host of one gated MCP server: see the module documentation.
#[derive(Debug)]
pub struct McpHost {
    name: String,
    resolver: ServerCategory,
    inline: InlineUpstream,
}

impl McpHost {
    /// The host of server `server`, whose target (`mcp`, `server`) has `category`, and
    /// whose calls `caller` runs.
    pub fn new(server: &str, category: &str, caller: Arc<UpstreamCaller>) -> Self {
        Self {
            name: host_name(server),
            resolver: ServerCategory {
                server: server.to_owned(),
                category: category.to_owned(),
            },
            inline: InlineUpstream(caller),
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
