//! The MCP server the client talks to: the upstream's tools, gated.

use crate::McpError;
use crate::catalog::{TOOL_TITLE, Trust, idempotent, listed, registry, route, title};
use crate::host::{McpHost, check_host_free, host_name};
use crate::upstream::{Deadlines, Upstream, UpstreamCaller};
use assent_changeset::parse_tool_calls;
use assent_confirm::{Engine, WakeRequest};
use assent_domain::{ChangeItemStatus, OffsetDateTime, OperationId, Target, Uuid, Verdict};
use assent_store::host_tools::{self, HostTool, ListedTool};
use assent_store::jobs::{self, JobStatus};
use assent_store::{Store, agents, change_sets, decisions, operations};
use assent_tools::RuleAction;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tracing::Instrument;

/// The first line of the reply to a queued call.
pub const QUEUED: &str = "Proposal queued for user review.";

/// How often a waiting call looks at its item, and the gateway at its jobs.
const POLL: Duration = Duration::from_millis(200);

/// How often a waiting call tells the client it is still waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What `assent mcp` was told.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The server's name: the target id of its calls.
    pub server: String,
    /// The agent whose policy gates the calls.
    pub agent: String,
    /// The category of the server's target (checked against the agent's allowlist).
    pub category: String,
    /// How long a queued call waits for a person before it answers that it is queued.
    pub wait: Option<Duration>,
    /// Whether the upstream's annotations may let a tool run at once or be retried.
    pub trust: Trust,
    /// How long the upstream may take to start and to answer a call.
    pub deadlines: Deadlines,
}

/// The gateway: see the module documentation. Cloning shares it.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    /// The engine over the catalog as last checked; rebuilt when the upstream's tools
    /// or a pin change (see [`Gateway::sync_catalog`]).
    engine: RwLock<Engine>,
    /// The tools asked about whatever the rules say: their definition changed since
    /// a person accepted it.
    review: Mutex<BTreeSet<String>>,
    /// The tools the operator said are idempotent (`assent agent idempotent`).
    operator_idempotent: Mutex<BTreeSet<String>>,
    caller: Arc<UpstreamCaller>,
    target: Target,
    options: GatewayOptions,
    /// The tools the client was last told have an `outputSchema` (they ran at once
    /// when listed); see [`Gateway::keep_promise`].
    promised: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The gateway of `upstream` over `store`: builds the catalog and the host and
    /// opens the engine; the agent must exist.
    pub async fn open(
        store: Store,
        upstream: Arc<Upstream>,
        options: GatewayOptions,
    ) -> Result<Self, McpError> {
        if options.server.trim().is_empty() {
            return Err(McpError::EmptyServerName);
        }
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(assent_store::StoreError::from)?;
        if agents::policy(&mut conn, &options.agent).await?.is_none() {
            return Err(McpError::UnknownAgent(options.agent.clone()));
        }
        let tools = upstream.tools();
        let catalog = record_catalog(&mut conn, &options, &tools).await?;
        let operator_idempotent = host_tools::idempotent_tools(&mut conn, &options.agent).await?;
        drop(conn);
        let review = review_of(&catalog);
        let registry = registry(&tools, options.trust, &review)?;
        let caller = Arc::new(UpstreamCaller::new(upstream));
        let host = Arc::new(McpHost::new(
            &options.server,
            &options.category,
            caller.clone(),
            retried(&tools, options.trust, &operator_idempotent),
        ));
        let target = host.target();
        let engine = Engine::open(store, Arc::new(registry), host.clone()).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine: RwLock::new(engine),
                review: Mutex::new(review),
                operator_idempotent: Mutex::new(operator_idempotent),
                caller,
                target,
                options,
                promised: Mutex::new(BTreeSet::new()),
            }),
        })
    }

    /// Brings the catalog up to date before a listing or a call: lists the upstream's
    /// tools again when `relist` (a client's `tools/list`) or when the upstream said
    /// they changed, records them (a new definition is not pinned), and rebuilds the
    /// engine when a definition changed or a person accepted one (`assent agent
    /// allow`, from any process). One read of the catalog otherwise.
    #[tracing::instrument(skip(self), fields(server = %self.inner.options.server))]
    pub async fn sync_catalog(&self, relist: bool) -> Result<(), McpError> {
        let inner = &self.inner;
        let upstream = inner.caller.upstream();
        let relisted = if relist || upstream.take_tools_changed() {
            Some(upstream.relist().await?)
        } else {
            None
        };
        let store = self.engine().store().clone();
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(assent_store::StoreError::from)?;
        let catalog = match &relisted {
            Some(tools) => record_catalog(&mut conn, &inner.options, tools).await?,
            None => host_tools::for_host(&mut conn, &host_name(&inner.options.server)).await?,
        };
        let operator_idempotent =
            host_tools::idempotent_tools(&mut conn, &inner.options.agent).await?;
        drop(conn);
        let review = review_of(&catalog);
        let same_review = inner.review.lock().is_ok_and(|current| *current == review);
        let same_word = inner
            .operator_idempotent
            .lock()
            .is_ok_and(|current| *current == operator_idempotent);
        if same_review && same_word && relisted.is_none() {
            return Ok(());
        }
        let tools = upstream.tools();
        let options = &inner.options;
        let registry = registry(&tools, options.trust, &review)?;
        let host = McpHost::new(
            &options.server,
            &options.category,
            inner.caller.clone(),
            retried(&tools, options.trust, &operator_idempotent),
        );
        let engine = Engine::new(store, Arc::new(registry), Arc::new(host));
        if let Ok(mut current) = inner.engine.write() {
            *current = engine;
        }
        if let Ok(mut current) = inner.review.lock() {
            *current = review;
        }
        if let Ok(mut current) = inner.operator_idempotent.lock() {
            *current = operator_idempotent;
        }
        Ok(())
    }

    /// The engine over the catalog as last checked (for a confirmation in this
    /// process).
    pub fn engine(&self) -> Engine {
        match self.inner.engine.read() {
            Ok(engine) => engine.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Runs the gateway's periodic work; called at least five times a second while it
    /// serves: the execution ledger's jobs of this server (approved by a person from
    /// anywhere) run here, so a confirmation takes effect within a second. A job's
    /// lease is the call deadline and 5 s more: `--call-timeout` is what bounds a call,
    /// and a job whose gateway died mid-call is found in doubt soon after.
    pub async fn tick(&self, now: OffsetDateTime) {
        let engine = self.engine();
        let mut settings = engine.job_settings();
        if let Ok(call) = time::Duration::try_from(self.inner.options.deadlines.call) {
            settings.lease = call + time::Duration::seconds(5);
        }
        if let Err(error) = engine.with_job_settings(settings).run_due_jobs(now).await {
            tracing::error!(%error, "running this server's approved calls failed");
        }
    }

    /// The upstream's tools the agent may see: every one its rules do not deny, a
    /// deferred one without its output schema and with a note that its result comes
    /// after review ([`listed`]).
    pub async fn visible_tools(&self) -> Result<Vec<Tool>, McpError> {
        let policy = self.policy().await?;
        let engine = self.engine();
        let registry = engine.registry();
        Ok(self
            .inner
            .caller
            .upstream()
            .tools()
            .iter()
            .filter_map(|tool| {
                let action = route(&policy, registry.get(&tool.name)?);
                (action != RuleAction::Deny).then(|| listed(tool, action))
            })
            .collect())
    }

    async fn policy(&self) -> Result<assent_tools::AgentPolicy, McpError> {
        let mut conn = self
            .engine()
            .store()
            .pool()
            .acquire()
            .await
            .map_err(assent_store::StoreError::from)?;
        agents::policy(&mut conn, &self.inner.options.agent)
            .await?
            .ok_or_else(|| McpError::UnknownAgent(self.inner.options.agent.clone()))
    }

    /// One call of the client: refused, run now, or queued (and perhaps waited for).
    pub async fn call(
        &self,
        tool_name: &str,
        args: Value,
        progress: Option<&RequestContext<RoleServer>>,
    ) -> Result<CallToolResult, ErrorData> {
        let inner = &self.inner;
        self.sync_catalog(false).await.map_err(internal)?;
        let Some(tool) = inner
            .caller
            .upstream()
            .tools()
            .into_iter()
            .find(|t| t.name == tool_name)
        else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {tool_name:?}"),
                None,
            ));
        };
        let engine = self.engine();
        let registry = engine.registry();
        if let Err(error) = registry.validate_args(tool_name, &args) {
            return Ok(error_result(error.to_string()));
        }
        let policy = self.policy().await.map_err(internal)?;
        if let Some(spec) = registry.get(tool_name)
            && route(&policy, spec) == RuleAction::Deny
        {
            return Ok(error_result(format!(
                "Tool {tool_name} is denied by policy"
            )));
        }
        let run_key = format!("mcp-{}", Uuid::new_v4());
        let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "call-1",
            "name": tool_name, "input": args.clone()}]))
        .map_err(|e| internal(e.to_string()))?;
        let request = WakeRequest::new(
            inner.options.agent.clone(),
            inner.target.clone(),
            run_key.clone(),
            calls,
        );
        let now = OffsetDateTime::now_utc();
        let wake = TOOL_TITLE
            .scope(title(&tool), engine.wakes().wake(request, now))
            .await
            .map_err(internal)?;
        let reply = wake
            .responses
            .first()
            .map(|r| r.content.clone())
            .unwrap_or_default();
        let Some(set) = wake.change_set else {
            let operation =
                OperationId::derive(&run_key, tool_name, &args, &[inner.target.id.as_str()]);
            return Ok(match inner.caller.take_result(&operation) {
                Some(result) => result,
                None => error_result(reply),
            });
        };
        let queued = format!("{reply}\nChange set {}, item 0.", set.id);
        match inner.options.wait {
            Some(wait) => self.wait_for(set.id, wait, queued, progress).await,
            None => Ok(CallToolResult::success(vec![ContentBlock::text(queued)])),
        }
    }

    /// Keeps the listing's promise to a client that checks results: a tool listed with
    /// an `outputSchema` (it ran at once then) that the agent's rules now defer gets
    /// an answer without structured content (the queue receipt), so that answer is
    /// turned into an error result saying so, which no client checks against the
    /// schema; the `bool` says whether that happened, so the client is told the list
    /// changed. Any other result is returned as it is.
    pub async fn keep_promise(
        &self,
        tool_name: &str,
        mut result: CallToolResult,
    ) -> (CallToolResult, bool) {
        let promised = self
            .inner
            .promised
            .lock()
            .is_ok_and(|promised| promised.contains(tool_name));
        if !promised || result.is_error == Some(true) || result.structured_content.is_some() {
            return (result, false);
        }
        let engine = self.engine();
        let deferred = match (self.policy().await, engine.registry().get(tool_name)) {
            (Ok(policy), Some(spec)) => route(&policy, spec) == RuleAction::Ask,
            _ => false,
        };
        if deferred {
            result.is_error = Some(true);
            result.content.push(ContentBlock::text(format!(
                "Tool {tool_name} now waits for a person's review, so this answer has no \
                 structured result; list the tools again."
            )));
        }
        (result, deferred)
    }

    /// Holds a queued call until a person decides or `wait` runs out.
    async fn wait_for(
        &self,
        set_id: Uuid,
        wait: Duration,
        queued: String,
        context: Option<&RequestContext<RoleServer>>,
    ) -> Result<CallToolResult, ErrorData> {
        let started = tokio::time::Instant::now();
        let token = context.and_then(|c| c.meta.get_progress_token());
        let mut last_progress = started;
        let mut step = 0.0;
        while started.elapsed() < wait {
            tokio::time::sleep(POLL).await;
            if let Some(result) = self.decided(set_id).await.map_err(internal)? {
                return Ok(result);
            }
            if let (Some(token), Some(context)) = (&token, context)
                && last_progress.elapsed() >= PROGRESS_EVERY
            {
                last_progress = tokio::time::Instant::now();
                step += 1.0;
                let mut note = ProgressNotificationParam::new(token.clone(), step);
                note.message = Some("Waiting for a person to review the call.".to_owned());
                let _ = context.peer.notify_progress(note).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(queued)]))
    }

    /// The answer for a queued call once a person decided its item, `None` while open.
    async fn decided(&self, set_id: Uuid) -> Result<Option<CallToolResult>, McpError> {
        let engine = self.engine();
        let store = engine.store();
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(assent_store::StoreError::from)?;
        let Some(set) = change_sets::load(&mut conn, set_id).await? else {
            return Ok(Some(error_result(
                "The proposal no longer exists.".to_owned(),
            )));
        };
        let Some(item) = set.items.first() else {
            return Ok(None);
        };
        match item.status {
            ChangeItemStatus::Pending | ChangeItemStatus::Deferred => Ok(None),
            ChangeItemStatus::Confirmed => {
                if let Some(job) = jobs::for_item(&mut conn, set.id, 0).await? {
                    return Ok(match job.status {
                        JobStatus::Applied => Some(
                            self.inner
                                .caller
                                .take_result(&job.operation_id)
                                .unwrap_or_else(|| {
                                    CallToolResult::success(vec![ContentBlock::text(
                                        job.result.unwrap_or_default(),
                                    )])
                                }),
                        ),
                        JobStatus::Failed | JobStatus::Retracted => Some(error_result(format!(
                            "Approved, but the call failed: {}",
                            job.last_error.as_deref().unwrap_or("no error recorded")
                        ))),
                        // Nobody knows whether it happened, and nothing runs it again
                        // (an idempotent one is rerun: keep waiting for that).
                        JobStatus::InDoubt if !job.idempotent => Some(error_result(format!(
                            "Approved, but whether the call took effect is unknown (in doubt) \
                             until a person settles it: {}",
                            job.last_error.as_deref().unwrap_or("no error recorded")
                        ))),
                        // Approved or running: keep waiting.
                        _ => None,
                    });
                }
                let operation = OperationId::for_proposal(
                    &set.run_key,
                    &item.tool_name,
                    &item.args,
                    &set.target_id,
                    set.id,
                    0,
                );
                if let Some(result) = self.inner.caller.take_result(&operation) {
                    return Ok(Some(result));
                }
                let message = operations::applied(&mut conn, &operation).await?;
                let text = message.unwrap_or_else(|| "Confirmed and applied.".to_owned());
                Ok(Some(CallToolResult::success(vec![ContentBlock::text(
                    text,
                )])))
            }
            ChangeItemStatus::Rejected | ChangeItemStatus::Retracted => {
                let history = decisions::for_change_set(&mut conn, set_id).await?;
                let reason = history
                    .iter()
                    .rev()
                    .find(|d| d.item_index == 0 && d.verdict != Verdict::Confirmed)
                    .and_then(|d| d.reason.clone())
                    .unwrap_or_else(|| "no reason given".to_owned());
                Ok(Some(error_result(format!(
                    "Rejected by the user: {reason}"
                ))))
            }
        }
    }
}

/// Records `tools` as the catalog of the gateway's host in the database, so edits of
/// its items are checked against their schemas from any process and a definition
/// that changed since a person accepted it is caught.
async fn record_catalog(
    conn: &mut assent_store::AnyConnection,
    options: &GatewayOptions,
    tools: &[Tool],
) -> Result<Vec<HostTool>, McpError> {
    let definitions: Vec<(String, Value, Value)> = tools
        .iter()
        .map(|tool| {
            let definition = serde_json::to_value(tool).unwrap_or(Value::Null);
            let schema = Value::Object((*tool.input_schema).clone());
            (tool.name.to_string(), definition, schema)
        })
        .collect();
    let listed: Vec<ListedTool<'_>> = definitions
        .iter()
        .map(|(name, definition, input_schema)| ListedTool {
            name,
            definition,
            input_schema,
        })
        .collect();
    Ok(host_tools::record_catalog(
        conn,
        &host_name(&options.server),
        Some(&options.agent),
        Some(options.trust.as_str()),
        &listed,
        OffsetDateTime::now_utc(),
    )
    .await?)
}

/// The tools whose calls left in doubt simply run again: those the operator said are
/// idempotent, and under `--trust hints` those the upstream calls idempotent.
fn retried(tools: &[Tool], trust: Trust, operator: &BTreeSet<String>) -> BTreeSet<String> {
    tools
        .iter()
        .filter(|tool| idempotent(tool, trust) || operator.contains(tool.name.as_ref()))
        .map(|tool| tool.name.to_string())
        .collect()
}

/// The tools whose definition changed since a person accepted it.
fn review_of(catalog: &[HostTool]) -> BTreeSet<String> {
    catalog
        .iter()
        .filter(|tool| tool.changed())
        .map(|tool| tool.tool_name.clone())
        .collect()
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn internal(error: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            format!("assent-mcp ({})", self.inner.options.server),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(match self.inner.options.trust {
            Trust::None => {
                "Calls are queued for a person to review in Assent and answered with \
                     the change set id, except those of tools the operator allowed to run \
                     at once."
            }
            Trust::Hints => {
                "Tools the server marks read-only (and not destructive) run at once; \
                     every other call is queued for a person to review in Assent and \
                     answered with the change set id."
            }
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.sync_catalog(true).await.map_err(internal)?;
        let tools = self.visible_tools().await.map_err(internal)?;
        if let Ok(mut promised) = self.inner.promised.lock() {
            *promised = tools
                .iter()
                .filter(|tool| tool.output_schema.is_some())
                .map(|tool| tool.name.to_string())
                .collect();
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = tracing::info_span!("mcp_call", tool = %request.name);
        let args = Value::Object(request.arguments.unwrap_or_default());
        // A client's notifications/cancelled ends the call here: its future (a wake, an
        // upstream call after the wake's commit) is dropped, and the upstream is told.
        let call = self
            .call(&request.name, args, Some(&context))
            .instrument(span);
        let result = tokio::select! {
            result = call => result?,
            () = context.ct.cancelled() => {
                tracing::info!(tool = %request.name, "the client cancelled the call");
                return Err(ErrorData::internal_error("the client cancelled the call", None));
            }
        };
        let (result, broken) = self.keep_promise(&request.name, result).await;
        if broken {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(result.into())
    }
}

/// Serves the client on stdin/stdout in front of `command args` until the client
/// leaves (`Ok`) or the upstream stops (an error saying so; queued items stay). A
/// server name whose host another server of the database uses is refused first.
pub async fn run(
    store: Store,
    options: GatewayOptions,
    command: &str,
    args: &[String],
) -> Result<(), McpError> {
    check_host_free(&store, &options.server).await?;
    // Everything the gateway logs, its upstream's stderr included, names the server.
    let span = tracing::warn_span!("mcp_gateway", server = %options.server);
    let upstream = Arc::new(
        Upstream::start(command, args, options.deadlines)
            .instrument(span.clone())
            .await?,
    );
    let gateway = Gateway::open(store, upstream.clone(), options).await?;
    let server = gateway
        .clone()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Client(e.to_string()))?;
    let mut ticks = tokio::time::interval(POLL);
    let mut waiting = std::pin::pin!(server.waiting());
    let mut supervisor = Supervisor::default();
    loop {
        tokio::select! {
            quit = &mut waiting => {
                return quit.map(|_| ()).map_err(|e| McpError::Client(e.to_string()));
            }
            _ = ticks.tick() => {
                if upstream.is_closed() {
                    // Approved jobs wait while the server is down (they would burn
                    // their attempts); immediate calls fail at once, naming it.
                    supervisor.revive(&gateway, &upstream).instrument(span.clone()).await;
                    continue;
                }
                supervisor.up();
                gateway.tick(OffsetDateTime::now_utc()).await;
            }
        }
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
