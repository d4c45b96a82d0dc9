//! The upstream MCP server, spoken to with rmcp's client: a child process over stdio,
//! or a Streamable HTTP endpoint (reqwest over rustls with ring and webpki's roots).

use crate::McpError;
use crate::config::UpstreamSource;
use crate::redact::redact;
use assent_domain::OperationId;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    RequestMetaObject, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tracing::Instrument;

/// The key of a call's `_meta` that carries the operation id (the idempotency key) to
/// the upstream.
pub const OPERATION_ID_META: &str = "assent/operationId";

/// A started upstream server and the tools it listed last. A server that stops can be
/// started again in place ([`Upstream::restart`]); calls always go to the current one.
pub struct Upstream {
    /// The server's name as the gateway serves it (`--server`, a configuration's
    /// key): what the errors a client or a person reads name it by.
    name: String,
    command: String,
    source: UpstreamSource,
    service: RwLock<Arc<Connection>>,
    tools: RwLock<Vec<Tool>>,
    deadlines: Deadlines,
}

type Connection = RunningService<RoleClient, UpstreamEvents>;

/// How long the gateway waits for its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// For the start: the MCP handshake and the first `tools/list`.
    pub start: Duration,
    /// For the answer to one `tools/call`; a call of an approved item that outlives it
    /// is in doubt.
    pub call: Duration,
}

impl Default for Deadlines {
    /// 30 s to start, 60 s per call.
    fn default() -> Self {
        Self {
            start: Duration::from_secs(30),
            call: Duration::from_secs(60),
        }
    }
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
#[non_exhaustive]
pub enum UpstreamError {
    /// It was not sent (the server was gone before the request was written): it may
    /// succeed later.
    #[error("{0}")]
    Retryable(String),
    /// It will fail again (the tool answered with an error).
    #[error("{0}")]
    Permanent(String),
    /// It was sent, and no answer came (the server died, the pipe broke, the call
    /// timed out): the effect may have happened.
    #[error("{0}")]
    InDoubt(String),
}

impl Upstream {
    /// Starts `command` with `args` under the default [`Deadlines`].
    pub async fn spawn(command: &str, args: &[String]) -> Result<Self, McpError> {
        Self::start(command, args, Deadlines::default()).await
    }

    /// Starts `command` with `args`, completes the MCP handshake and reads its tools,
    /// all within `deadlines.start`; its calls are bounded by `deadlines.call`.
    pub async fn start(
        command: &str,
        args: &[String],
        deadlines: Deadlines,
    ) -> Result<Self, McpError> {
        let source = UpstreamSource::Command {
            program: command.to_owned(),
            args: args.to_vec(),
            env: std::collections::BTreeMap::new(),
        };
        Self::open(source, deadlines).await
    }

    /// Starts (a command) or reaches (a URL) the server of `source`, completes the MCP
    /// handshake and reads its tools, all within `deadlines.start`; its calls are
    /// bounded by `deadlines.call`.
    pub async fn open(source: UpstreamSource, deadlines: Deadlines) -> Result<Self, McpError> {
        let name = source.describe();
        Self::open_as(&name, source, deadlines).await
    }

    /// [`Upstream::open`] for the gateway's server `name`: errors of its calls name it
    /// so, not by its command line or URL.
    pub async fn open_as(
        name: &str,
        source: UpstreamSource,
        deadlines: Deadlines,
    ) -> Result<Self, McpError> {
        let line = source.describe();
        let (service, tools) = connect(&source, &line, deadlines.start).await?;
        Ok(Self {
            name: name.to_owned(),
            command: line,
            source,
            service: RwLock::new(Arc::new(service)),
            tools: RwLock::new(tools),
            deadlines,
        })
    }

    /// Starts the server again after it stopped, within the start deadline; its tools
    /// are listed again (the caller checks them against their pins).
    #[tracing::instrument(skip(self), fields(upstream = %self.command))]
    pub async fn restart(&self) -> Result<(), McpError> {
        let (service, tools) = connect(&self.source, &self.command, self.deadlines.start).await?;
        if let Ok(mut current) = self.service.write() {
            *current = Arc::new(service);
        }
        if let Ok(mut listed) = self.tools.write() {
            *listed = tools;
        }
        tracing::info!("the upstream server was started again");
        Ok(())
    }

    /// The connection to the server as it runs now.
    fn service(&self) -> Arc<Connection> {
        match self.service.read() {
            Ok(service) => service.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The command line it was started with, or its URL.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Where it is: its command or its URL, as given (the folders of a command bound
    /// what the gateway reads for diffs).
    pub fn source(&self) -> &UpstreamSource {
        &self.source
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
        self.service()
            .service()
            .tools_changed
            .swap(false, Ordering::SeqCst)
    }

    /// Lists its tools again, within the call deadline; they replace the ones listed
    /// before.
    pub async fn relist(&self) -> Result<Vec<Tool>, McpError> {
        let failed = |reason: String| McpError::UpstreamRelist {
            command: self.command.clone(),
            reason,
        };
        let service = self.service();
        let tools = tokio::time::timeout(self.deadlines.call, service.peer().list_all_tools())
            .await
            .map_err(|_| {
                failed(format!(
                    "no answer within {} s",
                    self.deadlines.call.as_secs_f64()
                ))
            })?
            .map_err(|e| failed(redact(&e.to_string())))?;
        if let Ok(mut listed) = self.tools.write() {
            listed.clone_from(&tools);
        }
        Ok(tools)
    }

    /// Whether its connection has closed (the process exited or closed its pipes).
    pub fn is_closed(&self) -> bool {
        // `RunningService::is_closed` only sees a cancellation: a server that exited
        // shows as its transport closing.
        let service = self.service();
        service.is_closed() || service.peer().is_transport_closed()
    }

    /// Calls `tool` with `args` (an object, or nothing); see [`Upstream::call_as`].
    pub async fn call(&self, tool: &str, args: &Value) -> Result<CallToolResult, UpstreamError> {
        self.call_as(None, tool, args).await
    }

    /// Calls `tool` with `args` (an object, or nothing) on behalf of `operation`, whose
    /// id travels in the request's `_meta` as [`OPERATION_ID_META`], waiting at most the
    /// call deadline. An error before the request is handed to the connection is
    /// retryable (as is a failed write to a child's stdin); once it is, a lost
    /// connection, a failed HTTP POST or a timeout leaves the call in doubt, and a
    /// JSON-RPC error from the server is permanent.
    pub async fn call_as(
        &self,
        operation: Option<&OperationId>,
        tool: &str,
        args: &Value,
    ) -> Result<CallToolResult, UpstreamError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map.clone());
        }
        if let Some(operation) = operation {
            let mut meta = RequestMetaObject::new();
            meta.insert(OPERATION_ID_META.to_owned(), operation.as_str().into());
            params.meta = Some(meta);
        }
        // The client's trace context, when this runs inside its call.
        if let Some(trace) = crate::trace_context::to_forward() {
            trace.write_meta(params.meta.get_or_insert_with(RequestMetaObject::new));
        }
        let unsent = |why: String| {
            UpstreamError::Retryable(format!(
                "the upstream server {:?} was not reachable for {tool} (nothing was sent): {}",
                self.name,
                redact(&why)
            ))
        };
        if self.is_closed() {
            return Err(unsent("its connection is closed".to_owned()));
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .service()
            .peer()
            .send_request_with_option(
                request,
                PeerRequestOptions::with_timeout(self.deadlines.call),
            )
            .await
            .map_err(|error| unsent(error.to_string()))?;
        // Dropped before its answer (the client cancelled the call that waits on it):
        // the server is told, as the client told the gateway.
        let mut unanswered = CancelOnDrop {
            peer: handle.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response().await;
        unanswered.id = None;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(ServerResult::EmptyResult(_)) => Ok(CallToolResult::default()),
            Ok(other) => Err(UpstreamError::InDoubt(format!(
                "the upstream server {:?} answered {tool} with something other than a tool \
                 result ({}): the call may have taken effect",
                self.name,
                redact(&format!("{other:?}"))
            ))),
            Err(ServiceError::McpError(error)) => Err(UpstreamError::Permanent(format!(
                "the upstream refused {tool}: {}",
                redact(&error.message)
            ))),
            // Over stdio a failed write never reached the server. Over HTTP the POST
            // may have been read (a reset after the body was sent, a 5xx after the
            // tool ran): the call may have taken effect.
            Err(ServiceError::TransportSend(error))
                if matches!(self.source, UpstreamSource::Command { .. }) =>
            {
                Err(unsent(error.to_string()))
            }
            Err(other) => Err(UpstreamError::InDoubt(format!(
                "the upstream server {:?} did not answer {tool} ({}): the call may have \
                 taken effect",
                self.name,
                redact(&other.to_string())
            ))),
        }
    }
}

/// Writes each line the server prints on its stderr to the gateway's log at `info`
/// (servers print their banners and notes there; `assent` shows target
/// `assent_mcp::upstream_stderr` at `info` by default, so they stay visible without
/// reading as warnings), in the caller's span: the gateway's names the server.
fn forward_stderr(stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt as _;
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "assent_mcp::upstream_stderr", "{}", redact(&assent_domain::one_line(&line)));
            }
        }
        .instrument(span),
    );
}

/// Tells the server that a call it was sent is cancelled, when the future waiting for
/// its answer is dropped before the answer came (a client's `notifications/cancelled`
/// drops the gateway's call).
struct CancelOnDrop {
    peer: rmcp::service::Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let (Some(id), Ok(runtime)) = (self.id.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let cancelled = rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the client".to_owned()),
                ),
            );
            if let Err(error) = peer.send_notification(cancelled.into()).await {
                tracing::debug!(%error, "the upstream could not be told of a cancellation");
            }
        });
    }
}

/// Starts the server of `source` (`line` names it in errors), completes the MCP
/// handshake and lists its tools, all within `deadline`. A child is killed when its
/// connection is dropped.
async fn connect(
    source: &UpstreamSource,
    line: &str,
    deadline: Duration,
) -> Result<(Connection, Vec<Tool>), McpError> {
    let start_error = |reason: String| McpError::UpstreamStart {
        command: line.to_owned(),
        reason: redact(&reason),
    };
    let handshake = async {
        let service = match source {
            UpstreamSource::Command { program, args, env } => {
                let mut child = tokio::process::Command::new(program);
                child.args(args).envs(env).kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(child)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| start_error(e.to_string()))?;
                if let Some(stderr) = stderr {
                    forward_stderr(stderr);
                }
                UpstreamEvents::default().serve(transport).await
            }
            UpstreamSource::Http { url, headers } => {
                let transport = http_transport(url, headers).map_err(start_error)?;
                UpstreamEvents::default().serve(transport).await
            }
        }
        .map_err(|e| start_error(e.to_string()))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| start_error(format!("tools/list failed: {e}")))?;
        Ok::<_, McpError>((service, tools))
    };
    tokio::time::timeout(deadline, handshake)
        .await
        .map_err(|_| {
            start_error(format!(
                "no answer to initialize and tools/list within {} s (--start-timeout)",
                deadline.as_secs_f64()
            ))
        })?
}

/// rmcp's Streamable HTTP client transport to `url`, sending `headers` with every
/// request, over reqwest with rustls (ring, webpki's roots: no system OpenSSL, no
/// aws-lc-rs; HTTP/1.1).
pub fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("header {name:?}: {e}"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|e| format!("the value of header {name}: {e}"))?;
        custom.insert(name, value);
    }
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| e.to_string())?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client, config,
    ))
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
/// operation id is the idempotency key (sent in the request's `_meta`), the result text
/// is what is recorded, an error is retryable, permanent or in doubt. It keeps each
/// call's full result (all content blocks, structured content, `isError`) by operation
/// id until the gateway hands it to the client, so an immediate call passes through
/// unchanged.
pub struct UpstreamCaller {
    upstream: Arc<Upstream>,
    results: Mutex<HashMap<String, CallToolResult>>,
    /// `SERVER__`: taken off a tool's name (one the upstream does not list as it is)
    /// before the upstream is called, so a call named as a `--config` gateway names it
    /// reaches the upstream's own tool.
    prefix: String,
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
        Self::with_prefix(upstream, String::new())
    }

    /// A caller of `upstream` for a gateway whose tools may be named `prefix` and the
    /// upstream's name (`SERVER__tool`); any other name (the upstream's own) is called
    /// as it is.
    pub fn with_prefix(upstream: Arc<Upstream>, prefix: String) -> Self {
        Self {
            upstream,
            results: Mutex::new(HashMap::new()),
            prefix,
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
        let tool_name = self.upstream_name(tool_name);
        let span = tracing::info_span!(
            "mcp_upstream_call",
            tool = tool_name,
            operation = operation_id.as_str()
        );
        let result = self
            .upstream
            .call_as(Some(operation_id), tool_name, args)
            .instrument(span)
            .await?;
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

    /// The upstream's name of the tool the gateway calls `tool_name`.
    pub(crate) fn upstream_name<'a>(&self, tool_name: &'a str) -> &'a str {
        match tool_name.strip_prefix(&self.prefix) {
            Some(bare)
                if !self.prefix.is_empty()
                    && !self.upstream.tools().iter().any(|t| t.name == tool_name) =>
            {
                bare
            }
            _ => tool_name,
        }
    }

    /// Keeps `result` as the answer of call `operation_id` unless the upstream's own
    /// answer is kept already (an immediate call that failed before the upstream
    /// answered: the gateway's own words, said once).
    pub fn keep_result(&self, operation_id: &OperationId, result: CallToolResult) {
        if let Ok(mut results) = self.results.lock() {
            results
                .entry(operation_id.as_str().to_owned())
                .or_insert(result);
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
