//! The upstream MCP server: a child process spoken to over stdio with rmcp's client.

use crate::McpError;
use assent_domain::OperationId;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tracing::Instrument;

/// A started upstream server and the tools it listed last.
pub struct Upstream {
    command: String,
    service: RunningService<RoleClient, UpstreamEvents>,
    tools: RwLock<Vec<Tool>>,
}

/// What the upstream tells the gateway unasked: that its tools changed
/// (`notifications/tools/list_changed`), so the gateway lists them again before the
/// next call and checks each definition against the one a person accepted.
#[derive(Debug, Clone, Default)]
pub struct UpstreamEvents {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for UpstreamEvents {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!("the upstream says its tools changed");
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("command", &self.command)
            .field("tools", &self.tools().len())
            .finish_non_exhaustive()
    }
}

/// Why an upstream call failed, in the execution ledger's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// It may succeed later (the server is gone, the pipe broke, a timeout).
    #[error("{0}")]
    Retryable(String),
    /// It will fail again (the tool answered with an error).
    #[error("{0}")]
    Permanent(String),
}

impl Upstream {
    /// Starts `command` with `args`, completes the MCP handshake and reads its tools.
    pub async fn spawn(command: &str, args: &[String]) -> Result<Self, McpError> {
        let line = std::iter::once(command)
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let start_error = |reason: String| McpError::UpstreamStart {
            command: line.clone(),
            reason,
        };
        let mut child = tokio::process::Command::new(command);
        child.args(args);
        let transport = TokioChildProcess::new(child).map_err(|e| start_error(e.to_string()))?;
        let service = UpstreamEvents::default()
            .serve(transport)
            .await
            .map_err(|e| start_error(e.to_string()))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| start_error(format!("tools/list failed: {e}")))?;
        Ok(Self {
            command: line,
            service,
            tools: RwLock::new(tools),
        })
    }

    /// The command line it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The tools it listed last.
    pub fn tools(&self) -> Vec<Tool> {
        self.tools
            .read()
            .map(|tools| tools.clone())
            .unwrap_or_default()
    }

    /// Whether it said its tools changed since the last call of this (and forgets it).
    pub fn take_tools_changed(&self) -> bool {
        self.service
            .service()
            .tools_changed
            .swap(false, Ordering::SeqCst)
    }

    /// Lists its tools again; they replace the ones listed before.
    pub async fn relist(&self) -> Result<Vec<Tool>, McpError> {
        let tools =
            self.service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| McpError::UpstreamRelist {
                    command: self.command.clone(),
                    reason: e.to_string(),
                })?;
        if let Ok(mut listed) = self.tools.write() {
            listed.clone_from(&tools);
        }
        Ok(tools)
    }

    /// Whether its connection has closed (the process exited or closed its pipes).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Calls `tool` with `args` (an object, or nothing).
    pub async fn call(&self, tool: &str, args: &Value) -> Result<CallToolResult, UpstreamError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map.clone());
        }
        self.service
            .peer()
            .call_tool(params)
            .await
            .map_err(|error| match error {
                ServiceError::McpError(error) => UpstreamError::Permanent(format!(
                    "the upstream refused {tool}: {}",
                    error.message
                )),
                other => UpstreamError::Retryable(format!(
                    "the upstream server `{}` did not answer {tool}: {other}",
                    self.command
                )),
            })
    }
}

/// The text blocks of a tool result, one per line (other blocks are named by kind).
pub fn result_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(_) => "[image]".to_owned(),
            ContentBlock::Audio(_) => "[audio]".to_owned(),
            _ => "[resource]".to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The upstream call shaped as the execution ledger's `ExternalHandler::call`: the
/// operation id is the idempotency key, the result text is what is recorded, an error
/// is retryable or permanent. It keeps each call's full result (all content blocks,
/// structured content, `isError`) by operation id until the gateway hands it to the
/// client, so an immediate call passes through unchanged.
pub struct UpstreamCaller {
    upstream: Arc<Upstream>,
    results: Mutex<HashMap<String, CallToolResult>>,
}

impl std::fmt::Debug for UpstreamCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCaller")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl UpstreamCaller {
    /// A caller of `upstream`.
    pub fn new(upstream: Arc<Upstream>) -> Self {
        Self {
            upstream,
            results: Mutex::new(HashMap::new()),
        }
    }

    /// The upstream.
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// Runs the call; a result with `isError` is a permanent error carrying its text.
    pub async fn call(
        &self,
        operation_id: &OperationId,
        tool_name: &str,
        args: &Value,
    ) -> Result<String, UpstreamError> {
        let span = tracing::info_span!(
            "mcp_upstream_call",
            tool = tool_name,
            operation = operation_id.as_str()
        );
        let result = self.upstream.call(tool_name, args).instrument(span).await?;
        let text = result_text(&result);
        let failed = result.is_error == Some(true);
        if let Ok(mut results) = self.results.lock() {
            results.insert(operation_id.as_str().to_owned(), result);
        }
        if failed {
            Err(UpstreamError::Permanent(text))
        } else {
            Ok(text)
        }
    }

    /// The full result of the call `operation_id`, once.
    pub fn take_result(&self, operation_id: &OperationId) -> Option<CallToolResult> {
        self.results
            .lock()
            .ok()
            .and_then(|mut results| results.remove(operation_id.as_str()))
    }
}
