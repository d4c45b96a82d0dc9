//! Serving gateways to a client: one server (`--server NAME -- CMD`, its tools under
//! their own names) or every server of a configuration file (`--config FILE`, tools
//! namespaced `NAME__tool` by [`Gateways`]), on stdin/stdout or over Streamable HTTP
//! ([`Downstream`]) behind an agent token. Each server is supervised on a task of its
//! own: its approved calls run there, and a stopped upstream is started again there,
//! so one slow or dead server never holds up another.

use crate::McpError;
use crate::catalog::Trust;
use crate::config::{ServersConfig, UpstreamSource, namespaced, split_namespaced};
use crate::gateway::{Gateway, GatewayOptions, POLL, unknown_task};
use crate::host::check_host_free;
use crate::status::{STATUS_TOOL, requested_set, status_tool, unknown_set};
use crate::upstream::Upstream;
use assent_confirm::admin::{Role, authenticate_token};
use assent_domain::OffsetDateTime;
use assent_store::Store;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// Where the client reaches the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Downstream {
    /// On the gateway's stdin/stdout (the client started it).
    Stdio,
    /// Streamable HTTP at `http://ADDR/mcp`.
    Http(HttpDownstream),
}

/// The gateway served over Streamable HTTP (`assent mcp --http ADDR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpDownstream {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The host names (or `host:port`) a request's `Host` may name; empty: loopback
    /// only (`localhost`, `127.0.0.1`, `::1`), rmcp's protection against DNS
    /// rebinding.
    pub allowed_hosts: Vec<String>,
    /// The limits of `assent serve`'s accept loop, which serves the gateway too: a
    /// connection that sends no headers in time is closed, and at most so many are
    /// served at once (`ServerLimits::default()` in `assent mcp --http`).
    pub limits: assent_server::ServerLimits,
}

/// The log target of the lines an operator needs at start (the address `--http`
/// listens on), logged at `info`; `assent` shows it by default.
pub const ANNOUNCE: &str = "assent_mcp::announce";

/// The path the gateway is served at over HTTP.
pub const MCP_PATH: &str = "/mcp";

/// One served server: its gateway, its upstream and its log span.
struct Served {
    gateway: Gateway,
    upstream: Arc<Upstream>,
    span: tracing::Span,
}

/// Starts the server of `source` as `options.server` and opens its gateway.
///
/// `prefix` is what the client's name of each of its tools adds to the upstream's
/// (`NAME__` behind a `--config` gateway, empty for a single server).
async fn start(
    store: Store,
    options: GatewayOptions,
    source: UpstreamSource,
    prefix: String,
) -> Result<Served, McpError> {
    check_host_free(&store, &options.server).await?;
    // Everything the gateway logs, its upstream's stderr included, names the server.
    let span = tracing::warn_span!("mcp_gateway", server = %options.server);
    let upstream = Arc::new(
        Upstream::open_as(&options.server, source, options.deadlines)
            .instrument(span.clone())
            .await?,
    );
    let gateway = Gateway::open_with_prefix(store, upstream.clone(), options, prefix).await?;
    Ok(Served {
        gateway,
        upstream,
        span,
    })
}

/// Serves the client on stdin/stdout in front of `command args` until the client
/// leaves (`Ok`). An upstream that fails to start, or a server name whose host another
/// server of the database uses, is an error.
pub async fn run(
    store: Store,
    options: GatewayOptions,
    command: &str,
    args: &[String],
) -> Result<(), McpError> {
    run_one(store, options, command, args, Downstream::Stdio).await
}

/// [`run`], served to the client over `downstream`.
pub async fn run_one(
    store: Store,
    options: GatewayOptions,
    command: &str,
    args: &[String],
    downstream: Downstream,
) -> Result<(), McpError> {
    let agent = options.agent.clone();
    let source = UpstreamSource::Command {
        program: command.to_owned(),
        args: args.to_vec(),
        env: BTreeMap::new(),
    };
    let served = start(store.clone(), options, source, String::new()).await?;
    let handler = served.gateway.clone();
    serve(store, agent, handler, vec![served], downstream).await
}

/// Serves every server of `config` behind one endpoint, its tools named `NAME__tool`,
/// each with its own trust and category (`template` gives the agent, the wait, the
/// deadlines and the default category). A server that cannot be started, or whose
/// entry is broken, is logged (an error naming it and why) and skipped; none at all
/// is an error.
pub async fn run_config(
    store: Store,
    template: GatewayOptions,
    config: ServersConfig,
    downstream: Downstream,
) -> Result<(), McpError> {
    let agent = template.agent.clone();
    let served = start_all(store.clone(), template, config).await?;
    let handler = Gateways::new(served.iter().map(|s| s.gateway.clone()));
    serve(store, agent, handler, served, downstream).await
}

/// The gateways of `config`, mounted in another HTTP server (`assent serve`): the
/// router serves them at [`MCP_PATH`] exactly as `assent mcp --config FILE --http`
/// does (agent tokens of `template.agent` only; `allowed_hosts`, empty for loopback
/// only); the servers are supervised until the returned [`Supervision`] is dropped.
pub async fn mount_config(
    store: Store,
    template: GatewayOptions,
    config: ServersConfig,
    allowed_hosts: Vec<String>,
) -> Result<(axum::Router, Supervision), McpError> {
    let agent = template.agent.clone();
    let served = start_all(store.clone(), template, config).await?;
    let handler = Gateways::new(served.iter().map(|s| s.gateway.clone()));
    let router = http_router(store, agent, handler, allowed_hosts);
    Ok((router, Supervision::of(served)))
}

/// The servers' supervising tasks (restarts, approved calls); dropping it stops them.
#[derive(Debug)]
pub struct Supervision(tokio::task::JoinSet<()>);

impl Drop for Supervision {
    fn drop(&mut self) {
        self.0.abort_all();
    }
}

impl Supervision {
    fn of(served: Vec<Served>) -> Self {
        let mut tasks = tokio::task::JoinSet::new();
        for one in served {
            tasks.spawn(supervise(one));
        }
        Self(tasks)
    }
}

/// Starts every server of `config` at once; see [`run_config`].
async fn start_all(
    store: Store,
    template: GatewayOptions,
    config: ServersConfig,
) -> Result<Vec<Served>, McpError> {
    for broken in &config.broken {
        let reason = crate::redact::redact(&broken.reason);
        tracing::error!(server = %broken.name, %reason, "this MCP server is skipped: its entry cannot be served");
    }
    let mut starting = tokio::task::JoinSet::new();
    for entry in config.servers {
        let options = GatewayOptions {
            server: entry.name.clone(),
            trust: entry.trust,
            category: entry
                .category
                .clone()
                .unwrap_or_else(|| template.category.clone()),
            previews: entry.previews.clone(),
            ..template.clone()
        };
        let store = store.clone();
        let prefix = namespaced(&entry.name, "");
        starting.spawn(async move {
            (
                entry.name,
                start(store, options, entry.source, prefix).await,
            )
        });
    }
    let mut served = Vec::new();
    while let Some(started) = starting.join_next().await {
        match started {
            Ok((_, Ok(one))) => served.push(one),
            Ok((name, Err(error))) => {
                let error = crate::redact::redact(&error.to_string());
                tracing::error!(server = %name, %error, "this MCP server is skipped: it did not start");
            }
            Err(error) => tracing::error!(%error, "starting an MCP server panicked"),
        }
    }
    if served.is_empty() {
        return Err(McpError::NoServer);
    }
    served.sort_by(|a, b| a.gateway.server().cmp(b.gateway.server()));
    Ok(served)
}

/// Runs each server's periodic work on a task of its own, and serves `handler` over
/// `downstream` until the client leaves (stdio) or the process is stopped (HTTP).
async fn serve<H>(
    store: Store,
    agent: String,
    handler: H,
    served: Vec<Served>,
    downstream: Downstream,
) -> Result<(), McpError>
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    if let Some(wait) = gateways_wait(&served)
        && wait >= Duration::from_secs(60)
    {
        tracing::warn!(
            "--wait {}s is 60 s or more: clients built on the TypeScript MCP SDK (Claude \
             Desktop, Cursor, VS Code) give up on a call after 60 s and the call is withdrawn; \
             keep --wait under 60 (Claude Desktop's calls are held {}s at most)",
            wait.as_secs(),
            crate::gateway::SIXTY_SECOND_WAIT.as_secs()
        );
    }
    let gateways: Vec<Gateway> = served.iter().map(|s| s.gateway.clone()).collect();
    let supervision = Supervision::of(served);
    let result = match downstream {
        // A client that closes stdin and does not wait long for the gateway to exit
        // sends SIGTERM (the MCP stdio shutdown): the held calls are withdrawn below
        // either way, and so is the session ended when the handshake failed.
        Downstream::Stdio => match handler.serve(rmcp::transport::stdio()).await {
            Err(error) => Err(McpError::Client(error.to_string())),
            Ok(server) => tokio::select! {
                waited = server.waiting() => waited
                    .map(|_| ())
                    .map_err(|e| McpError::Client(e.to_string())),
                () = assent_server::shutdown_signal() => Ok(()),
            },
        },
        Downstream::Http(http) => serve_http(store, agent, handler, http).await,
    };
    // The client left (or the gateway is stopping): nobody hears the answers of the
    // calls still held, so they are withdrawn before the process ends.
    for gateway in &gateways {
        gateway.end_session().await;
    }
    drop(supervision);
    result
}

/// The `--wait` of the served gateways (all share it).
fn gateways_wait(served: &[Served]) -> Option<Duration> {
    served.first().and_then(|one| one.gateway.wait())
}

/// Five times a second: an upstream that stopped is started again (with backoff);
/// otherwise the server's approved calls run ([`Gateway::tick`]).
async fn supervise(served: Served) {
    let mut ticks = tokio::time::interval(POLL);
    let mut supervisor = Supervisor::default();
    loop {
        ticks.tick().await;
        if served.upstream.is_closed() {
            // Approved jobs wait while the server is down (they would burn their
            // attempts); immediate calls fail at once, naming it.
            supervisor
                .revive(&served.gateway, &served.upstream)
                .instrument(served.span.clone())
                .await;
            continue;
        }
        supervisor.up();
        served.gateway.tick(OffsetDateTime::now_utc()).await;
    }
}

/// Serves `handler` at [`MCP_PATH`] over Streamable HTTP until ctrl-c (or SIGTERM), through `assent
/// serve`'s accept loop with `http.limits` (`assent_server::accept_loop`): every
/// request carries an agent token of `agent` (`Authorization: Bearer`), else 401; a
/// `Host` outside the allowed hosts is refused by rmcp (403).
async fn serve_http<H>(
    store: Store,
    agent: String,
    handler: H,
    http: HttpDownstream,
) -> Result<(), McpError>
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    let router = http_router(store, agent.clone(), handler, http.allowed_hosts);
    let listener = tokio::net::TcpListener::bind(http.addr)
        .await
        .map_err(|e| McpError::Client(format!("cannot listen on {}: {e}", http.addr)))?;
    let local = listener
        .local_addr()
        .map_err(|e| McpError::Client(e.to_string()))?;
    tracing::info!(target: ANNOUNCE, "listening on http://{local}{MCP_PATH} (agent {agent})");
    // Open event streams would hold a graceful shutdown forever: ctrl-c ends it, the
    // loop itself is never told to stop.
    let served =
        assent_server::accept_loop(listener, router, http.limits, std::future::pending(), || {});
    tokio::select! {
        served = served => served.map_err(|e| McpError::Client(e.to_string())),
        () = assent_server::shutdown_signal() => Ok(()),
    }
}

/// `handler` at [`MCP_PATH`] over Streamable HTTP (rmcp's service, sessions kept in
/// memory), behind [`require_agent`]; a `Host` outside `allowed_hosts` (loopback names
/// when empty) is refused by rmcp.
fn http_router<H>(
    store: Store,
    agent: String,
    handler: H,
    allowed_hosts: Vec<String>,
) -> axum::Router
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default();
    if !allowed_hosts.is_empty() {
        config = config.with_allowed_hosts(allowed_hosts);
    }
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let auth = Arc::new(AgentAuth { store, agent });
    axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(auth, require_agent))
}

/// Who may use the gateway over HTTP: an agent token of the gateway's agent.
struct AgentAuth {
    store: Store,
    agent: String,
}

/// Refuses a request without an unrevoked agent token of the gateway's agent (401,
/// `WWW-Authenticate: Bearer`); a token of another agent or role is 403.
async fn require_agent(
    axum::extract::State(auth): axum::extract::State<Arc<AgentAuth>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let unauthorized = || {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "an agent token is required (Authorization: Bearer SECRET; `assent tokens add --role agent --agent AGENT`)",
        )
            .into_response()
    };
    let Some(secret) = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
    else {
        return unauthorized();
    };
    let token = authenticate_token(&auth.store, secret).await;
    match token {
        Ok(Some(token))
            if token.role == Role::Agent && token.agent_id.as_deref() == Some(&auth.agent) =>
        {
            next.run(request).await
        }
        Ok(Some(_)) => (
            StatusCode::FORBIDDEN,
            format!(
                "only an agent token of agent {:?} may use this gateway",
                auth.agent
            ),
        )
            .into_response(),
        Ok(None) => unauthorized(),
        Err(error) => {
            tracing::error!(%error, "checking a token failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Every server of a configuration file behind one MCP endpoint: server `NAME`'s tool
/// `tool` is listed and called as `NAME__tool`. A server whose tools cannot be listed
/// right now (its upstream is down) is left out of a listing, which the others answer.
#[derive(Clone)]
pub struct Gateways {
    servers: Arc<BTreeMap<String, Gateway>>,
}

impl std::fmt::Debug for Gateways {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateways")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Gateways {
    /// The gateways, each under its server's name.
    pub fn new(gateways: impl IntoIterator<Item = Gateway>) -> Self {
        Self {
            servers: Arc::new(
                gateways
                    .into_iter()
                    .map(|g| (g.server().to_owned(), g))
                    .collect(),
            ),
        }
    }

    /// The answer to an `assent_status` call: the first server's gateway whose call
    /// the set is answers; a set of no server of this agent is unknown.
    pub async fn status(
        &self,
        args: &serde_json::Value,
    ) -> Result<rmcp::model::CallToolResult, ErrorData> {
        let set_id = match requested_set(args) {
            Ok(set_id) => set_id,
            Err(refused) => return Ok(refused),
        };
        for gateway in self.servers.values() {
            let answer = gateway
                .status_of(set_id)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if let Some(answer) = answer {
                return Ok(answer);
            }
        }
        Ok(unknown_set(set_id))
    }

    /// The gateway of server `name`.
    pub fn get(&self, name: &str) -> Option<&Gateway> {
        self.servers.get(name)
    }
}

impl ServerHandler for Gateways {
    fn get_info(&self) -> ServerConfig {
        let hints: Vec<&str> = self
            .servers
            .values()
            .filter(|g| g.trust() == Trust::Hints)
            .map(Gateway::server)
            .collect();
        let mut instructions = format!(
            "Tools of several MCP servers, each named SERVER{sep}TOOL. Calls are queued for a \
             person to review in Assent and answered with the change set id, except those of \
             tools the operator allowed to run at once.",
            sep = crate::config::NAMESPACE_SEPARATOR
        );
        if !hints.is_empty() {
            instructions.push_str(&format!(
                " Of servers {}, tools marked read-only (and not destructive) run at once.",
                hints.join(", ")
            ));
        }
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "assent-mcp (gateway)",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut all: Vec<Tool> = Vec::new();
        for (name, gateway) in self.servers.iter() {
            // Each server's gateway names its tools `NAME__tool` itself.
            match gateway.list_for_client().await {
                Ok(tools) => all.extend(tools),
                Err(error) => {
                    tracing::warn!(server = %name, %error, "this server's tools are left out of the listing");
                }
            }
        }
        all.push(status_tool());
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let unknown = || {
            ErrorData::invalid_params(
                format!(
                    "unknown tool {:?} (tools are named SERVER{}TOOL)",
                    request.name,
                    crate::config::NAMESPACE_SEPARATOR
                ),
                None,
            )
        };
        if request.name == STATUS_TOOL {
            let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
            let span = tracing::info_span!("mcp_status");
            return Ok(self.status(&args).instrument(span).await?.into());
        }
        let Some((server, _)) = split_namespaced(&request.name) else {
            return Err(unknown());
        };
        let Some(gateway) = self.servers.get(server) else {
            return Err(unknown());
        };
        // The server's gateway takes the name as the client gave it: its rules, items
        // and records are per server (`NAME__tool`); it calls the upstream by its own.
        gateway.answer_call(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        for gateway in self.servers.values() {
            let found = gateway
                .task(&request.task_id)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if let Some(task) = found {
                return Ok(task);
            }
        }
        Err(unknown_task(&request.task_id))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        for gateway in self.servers.values() {
            let found = gateway
                .cancel_task_of(&request.task_id)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if found.is_some() {
                return Ok(());
            }
        }
        Err(unknown_task(&request.task_id))
    }
}

/// The first wait before an upstream that stopped is started again; it doubles up to
/// [`RESTART_MAX`] while starts keep failing.
const RESTART_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two starts of a stopped upstream.
const RESTART_MAX: Duration = Duration::from_secs(60);

/// Restarts a stopped upstream with backoff (1 s doubling to 60 s).
#[derive(Debug)]
struct Supervisor {
    backoff: Duration,
    next_try: Option<tokio::time::Instant>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self {
            backoff: RESTART_FIRST,
            next_try: None,
        }
    }
}

impl Supervisor {
    /// The upstream runs: the next stop waits the first backoff again.
    fn up(&mut self) {
        self.backoff = RESTART_FIRST;
        self.next_try = None;
    }

    /// The upstream is down: starts it again once its backoff has passed, then checks
    /// its tools against their pins.
    #[tracing::instrument(skip_all, fields(upstream = %upstream.command()))]
    async fn revive(&mut self, gateway: &Gateway, upstream: &Upstream) {
        let now = tokio::time::Instant::now();
        let Some(next_try) = self.next_try else {
            tracing::warn!(retry_in = ?self.backoff, "the upstream server stopped; it will be started again");
            self.next_try = Some(now + self.backoff);
            return;
        };
        if now < next_try {
            return;
        }
        match upstream.restart().await {
            Ok(()) => {
                self.up();
                if let Err(error) = gateway.sync_catalog(true).await {
                    tracing::error!(%error, "the restarted server's tools could not be checked");
                }
            }
            Err(error) => {
                self.backoff = (self.backoff * 2).min(RESTART_MAX);
                tracing::warn!(%error, retry_in = ?self.backoff, "the upstream server did not start again");
                self.next_try = Some(tokio::time::Instant::now() + self.backoff);
            }
        }
    }
}
