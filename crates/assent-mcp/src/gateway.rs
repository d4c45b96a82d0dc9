//! The MCP server the client talks to: the upstream's tools, gated.

use crate::McpError;
use crate::catalog::{Trust, gateway_registry, idempotent, listed, route};
use crate::config::FilePreview;
use crate::host::{FileReads, HEARTBEAT_EVERY, McpHost, SessionGuard, adopt_legacy, gateway_host};
use crate::preview::{Preview, Unread, preview_of, read_now, whole_for};
use crate::status::{
    STATUS_TOOL, requested_set, status_answer, status_tool, unknown_set, waited_answer,
};
use crate::upstream::{Deadlines, Upstream, UpstreamCaller};
use assent_changeset::{ToolArguments, ToolCall, reply};
use assent_confirm::agents::{self, HostTool, ListedTool};
use assent_confirm::{CallState, Engine, WakeRequest, client_sessions};
use assent_domain::{ChangeItemStatus, OffsetDateTime, OperationId, Target, Uuid};
use assent_store::Store;
use assent_tools::RuleAction;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    MetaObject, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tracing::Instrument;

/// The first line of the reply to a queued call (the reply module's).
pub use assent_changeset::reply::QUEUED;

/// How often the gateway looks at its jobs (a waiting call is woken by the engine's
/// change feed instead: [`assent_confirm::ConfirmationService::wait_outcome`]).
pub(crate) const POLL: Duration = Duration::from_millis(200);

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
    /// The review server's address as people reach it (`--public-url`): a queued
    /// call's `_meta` links to its set on the review page.
    pub public_url: Option<String>,
    /// `--ask-in-client`: a queued call asks the client's user (MCP elicitation) where
    /// the client can and the rules let a client's answer count (the `elicit` module).
    pub ask_in_client: bool,
    /// How the file of each write tool is read for its diff, by the upstream's tool
    /// name, beside those found by their schema (the server's `assent` block).
    pub previews: BTreeMap<String, FilePreview>,
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
    /// What the client's name of a tool adds to the upstream's: `SERVER__` behind a
    /// `--config` gateway ([`crate::Gateways`]), nothing for a single server. Rules,
    /// items, the catalog and every other record name a tool as the client does.
    prefix: String,
    /// When the previous release's host was last looked at for calls of this agent
    /// that arrived since (a sync from a device of that release): see [`adopt_legacy`].
    adopted_at: Mutex<Option<std::time::Instant>>,
    /// The change sets of calls a client is waiting on right now (held by `--wait`,
    /// not yet answered): withdrawn when the client stops waiting ([`Holding`]), and
    /// by [`Gateway::withdraw_held`] when the client's session or stdio ends.
    held: Mutex<BTreeSet<Uuid>>,
    /// This gateway's session (`assent_confirm::client_sessions`): the calls it queues are
    /// recorded as its own, and an approved call of a session that ended runs here only
    /// when the operator said so ([`crate::SessionGuard`]).
    session: Uuid,
    /// When the session last said it runs.
    heartbeat: Mutex<std::time::Instant>,
    /// The files read for the diffs of writes, shared with every host built here.
    files: Arc<FileReads>,
}

/// How often a running gateway looks for its agent's calls under the previous
/// release's host name.
const ADOPT_EVERY: Duration = Duration::from_secs(30);

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
        Self::open_with_prefix(store, upstream, options, String::new()).await
    }

    /// [`Gateway::open`] for one server of a `--config` gateway: its tools are named
    /// `prefix` and the upstream's name (`SERVER__tool`) for the client and in every
    /// record; the upstream is called by its own name.
    pub(crate) async fn open_with_prefix(
        store: Store,
        upstream: Arc<Upstream>,
        options: GatewayOptions,
        prefix: String,
    ) -> Result<Self, McpError> {
        if let Some(problem) = crate::config::server_name_problem(&options.server) {
            return Err(McpError::BadServerName(problem));
        }
        let mut conn = store.read_connection().await?;
        let now = OffsetDateTime::now_utc();
        let Some(policy) = agents::policy_at(&mut conn, &options.agent, now).await? else {
            return Err(McpError::UnknownAgent(options.agent.clone()));
        };
        drop(conn);
        adopt_legacy(&store, &options.agent, &options.server, &prefix, true).await?;
        let tools = upstream.tools();
        let catalog = record_catalog(&store, &options, &prefix, &tools).await?;
        let mut conn = store.read_connection().await?;
        let operator_idempotent = agents::idempotent_tools(&mut conn, &options.agent).await?;
        drop(conn);
        let session = Uuid::new_v4();
        let review = review_of(&catalog);
        let files = Arc::new(FileReads {
            previews: Default::default(),
            configured: options.previews.clone(),
        });
        let server_prefix = crate::config::namespaced(&options.server, "");
        let registry = gateway_registry(&tools, &server_prefix, &prefix, options.trust, &review)?;
        point_to_read_only_allow(&tools, &registry, &policy, &options, &prefix);
        let caller = Arc::new(UpstreamCaller::with_prefix(
            upstream,
            crate::config::namespaced(&options.server, ""),
        ));
        let host = Arc::new(
            McpHost::new(
                &options.agent,
                &options.server,
                &options.category,
                caller.clone(),
                retried(
                    &tools,
                    &options.server,
                    &prefix,
                    options.trust,
                    &operator_idempotent,
                ),
            )
            .with_session(SessionGuard {
                store: store.clone(),
                session,
            })
            .with_files(store.clone(), files.clone()),
        );
        let target = host.target();
        let engine = Engine::open(store, Arc::new(registry), host.clone()).await?;
        engine
            .admin()
            .open_client_session(
                session,
                &options.agent,
                &options.server,
                OffsetDateTime::now_utc(),
            )
            .await?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine: RwLock::new(engine),
                review: Mutex::new(review),
                operator_idempotent: Mutex::new(operator_idempotent),
                caller,
                target,
                options,
                promised: Mutex::new(BTreeSet::new()),
                prefix,
                adopted_at: Mutex::new(Some(std::time::Instant::now())),
                held: Mutex::new(BTreeSet::new()),
                session,
                heartbeat: Mutex::new(std::time::Instant::now()),
                files,
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
        self.sync_catalog_reading(relist).await.map(|_| ())
    }

    /// [`Gateway::sync_catalog`], giving the agent's policy in force now (`None`: no
    /// such agent), read with the catalog: a call enters the store once before its
    /// wake (issue 55).
    async fn sync_catalog_reading(
        &self,
        relist: bool,
    ) -> Result<Option<assent_tools::AgentPolicy>, McpError> {
        let inner = &self.inner;
        let upstream = inner.caller.upstream();
        let relisted = if relist || upstream.take_tools_changed() {
            Some(upstream.relist().await?)
        } else {
            None
        };
        let store = self.engine().store().clone();
        let recorded = match &relisted {
            Some(tools) => {
                Some(record_catalog(&store, &inner.options, &inner.prefix, tools).await?)
            }
            None => None,
        };
        let mut conn = store.read_connection().await?;
        let host = gateway_host(&inner.options.agent, &inner.options.server);
        let read = agents::gateway_read(
            &mut conn,
            &host,
            &inner.options.agent,
            OffsetDateTime::now_utc(),
        )
        .await?;
        drop(conn);
        let policy = read.policy;
        let catalog = recorded.unwrap_or(read.catalog);
        let operator_idempotent = read.idempotent;
        let review = review_of(&catalog);
        let same_review = inner.review.lock().is_ok_and(|current| *current == review);
        let same_word = inner
            .operator_idempotent
            .lock()
            .is_ok_and(|current| *current == operator_idempotent);
        if same_review && same_word && relisted.is_none() {
            return Ok(policy);
        }
        let tools = upstream.tools();
        let options = &inner.options;
        let registry = gateway_registry(
            &tools,
            &crate::config::namespaced(&options.server, ""),
            &inner.prefix,
            options.trust,
            &review,
        )?;
        let host = McpHost::new(
            &options.agent,
            &options.server,
            &options.category,
            inner.caller.clone(),
            retried(
                &tools,
                &options.server,
                &inner.prefix,
                options.trust,
                &operator_idempotent,
            ),
        )
        .with_session(SessionGuard {
            store: store.clone(),
            session: inner.session,
        })
        .with_files(store.clone(), inner.files.clone());
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
        Ok(policy)
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.inner.options.server
    }

    /// How long a queued call is held for a person (`--wait`).
    pub fn wait(&self) -> Option<Duration> {
        self.inner.options.wait
    }

    /// Whether the server's annotations count.
    pub fn trust(&self) -> Trust {
        self.inner.options.trust
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
        self.adopt_now_and_then().await;
        self.heartbeat(now).await;
        let engine = self.engine();
        let mut settings = engine.job_settings();
        if let Ok(call) = time::Duration::try_from(self.inner.options.deadlines.call) {
            settings.lease = call + time::Duration::seconds(5);
        }
        if let Err(error) = engine.with_job_settings(settings).run_due_jobs(now).await {
            tracing::error!(%error, "running this server's approved calls failed");
        }
    }

    /// Every [`HEARTBEAT_EVERY`], records that this gateway's session still runs.
    async fn heartbeat(&self, now: OffsetDateTime) {
        let due = self.inner.heartbeat.lock().is_ok_and(|mut last| {
            let due = last.elapsed() >= HEARTBEAT_EVERY;
            if due {
                *last = std::time::Instant::now();
            }
            due
        });
        if !due {
            return;
        }
        let seen = self
            .engine()
            .admin()
            .client_session_seen(self.inner.session, now)
            .await;
        if let Err(error) = seen {
            tracing::error!(%error, "recording that this gateway's session runs failed");
        }
    }

    /// Every [`ADOPT_EVERY`], takes over this agent's calls that arrived under the
    /// previous release's host name since the last look ([`adopt_legacy`]: one read
    /// when there are none).
    async fn adopt_now_and_then(&self) {
        let inner = &self.inner;
        let due = inner.adopted_at.lock().is_ok_and(|mut last| {
            let due = last.is_none_or(|at| at.elapsed() >= ADOPT_EVERY);
            if due {
                *last = Some(std::time::Instant::now());
            }
            due
        });
        if !due {
            return;
        }
        let store = self.engine().store().clone();
        let options = &inner.options;
        if let Err(error) = adopt_legacy(
            &store,
            &options.agent,
            &options.server,
            &inner.prefix,
            false,
        )
        .await
        {
            tracing::error!(%error, "looking for calls under the previous release's host failed");
        }
    }

    /// The upstream's tools as the client names them (see [`Inner::prefix`]).
    /// An upstream tool named like the gateway's own [`STATUS_TOOL`] is left out: the
    /// name answers the gateway's status, never reaches the upstream.
    fn client_tools(&self) -> Vec<Tool> {
        let mut tools = client_tools(&self.inner.caller.upstream().tools(), &self.inner.prefix);
        tools.retain(|tool| tool.name != STATUS_TOOL);
        tools
    }

    /// The upstream's tools the agent may see: every one its rules do not deny, a
    /// deferred one without its output schema and with a note that its result comes
    /// after review ([`listed`]).
    pub async fn visible_tools(&self) -> Result<Vec<Tool>, McpError> {
        let policy = self.policy().await?;
        let engine = self.engine();
        let registry = engine.registry();
        Ok(self
            .client_tools()
            .iter()
            .filter_map(|tool| {
                let action = route(&policy, registry.get(&tool.name)?);
                (action != RuleAction::Deny).then(|| listed(tool, action))
            })
            .collect())
    }

    /// A pooled connection of the gateway's store, held only for a short read.
    /// Whether set `set_id`'s call (its one item) still waits for a person: pending or
    /// deferred.
    async fn still_open(&self, set_id: Uuid) -> Result<bool, McpError> {
        Ok(self
            .engine()
            .change_set(set_id)
            .await?
            .and_then(|set| set.items.first().map(|item| item.status))
            .is_some_and(undecided))
    }

    async fn connection(&self) -> Result<assent_store::ReadConnection, McpError> {
        Ok(self.engine().store().read_connection().await?)
    }

    async fn policy(&self) -> Result<assent_tools::AgentPolicy, McpError> {
        let mut conn = self.connection().await?;
        agents::policy_at(
            &mut conn,
            &self.inner.options.agent,
            OffsetDateTime::now_utc(),
        )
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
        match self.call_or_task(tool_name, args, progress, false).await? {
            Called::Done(result) => Ok(result),
            Called::Task(task) => Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{QUEUED}\nTask {}.",
                task.task_id
            ))])),
        }
    }

    /// [`Gateway::call`]; when `as_task` (the client declared the tasks extension) a
    /// queued call is answered at once with a task naming its item (never held by
    /// `--wait`), whose state [`Gateway::task`] reads from the database.
    async fn call_or_task(
        &self,
        tool_name: &str,
        args: Value,
        progress: Option<&RequestContext<RoleServer>>,
        as_task: bool,
    ) -> Result<Called, ErrorData> {
        let inner = &self.inner;
        let policy = self.sync_catalog_reading(false).await.map_err(internal)?;
        if !self.client_tools().iter().any(|t| t.name == tool_name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {tool_name:?}"),
                None,
            ));
        }
        let engine = self.engine();
        let registry = engine.registry();
        if let Err(error) = registry.validate_args(tool_name, &args) {
            return Ok(Called::Done(error_result(error.to_string())));
        }
        let policy = policy
            .ok_or_else(|| McpError::UnknownAgent(inner.options.agent.clone()))
            .map_err(internal)?;
        if let Some(spec) = registry.get(tool_name)
            && route(&policy, spec) == RuleAction::Deny
        {
            // Where the deciding rule came from, after the words the client knows.
            let origin = reply::rule_origin(policy.ruling(tool_name, None).as_ref());
            let said = match origin {
                Some(origin) => format!("{}.{origin}", reply::denied_by_policy(tool_name)),
                None => reply::denied_by_policy(tool_name),
            };
            // On the record as every door's refusal is, with the rule that decided.
            let run_key = format!("mcp-{}", Uuid::new_v4());
            let record = assent_tools::AuditRecord {
                operation_id: OperationId::derive(
                    &run_key,
                    tool_name,
                    &args,
                    &[inner.target.id.as_str()],
                ),
                run_key,
                tool_name: tool_name.to_owned(),
                agent_id: inner.options.agent.clone(),
                target_kind: inner.target.kind.clone(),
                target_id: inner.target.id.clone(),
                kind: assent_tools::AuditKind::PolicyDenied,
                args,
                success: Some(false),
                detail: Some(said.clone()),
                vector_clock: None,
                created_at: OffsetDateTime::now_utc(),
                allowed_by: None,
                refused_by: None,
                decided_by: Some(policy.decided_by_call(spec, None)),
            };
            if let Err(error) =
                assent_confirm::history::record_agent_run(engine.store(), &record).await
            {
                // The refusal stands whether or not it could be recorded.
                tracing::error!(%error, "the refusal could not be recorded");
            }
            return Ok(Called::Done(error_result(said)));
        }
        let run_key = format!("mcp-{}", Uuid::new_v4());
        // The call is already typed: handed to the engine as it is, not written as some
        // dialect's JSON only to be parsed back.
        let call = ToolCall::new(
            "call-1".to_owned(),
            tool_name.to_owned(),
            ToolArguments::Value(args.clone()),
        );
        let request = WakeRequest::new(
            inner.options.agent.clone(),
            inner.target.clone(),
            run_key.clone(),
            vec![call],
        );
        // A write that will wait for a person has its file read first (outside any
        // transaction), for the diff the wake stores as its `before`.
        let preview = match registry.get(tool_name) {
            Some(spec) if route(&policy, spec) == RuleAction::Ask => {
                self.read_preview(tool_name, &args).await
            }
            _ => None,
        };
        if let Some(preview) = preview {
            inner.files.previews.keep(tool_name, &args, preview);
        }
        let now = OffsetDateTime::now_utc();
        let wake = engine.wakes().wake(request, now).await;
        inner.files.previews.forget(tool_name, &args);
        let wake = wake.map_err(internal)?;
        let reply = wake
            .responses
            .first()
            .map(|r| r.content.clone())
            .unwrap_or_default();
        let Some(set) = wake.change_set else {
            let operation =
                OperationId::derive(&run_key, tool_name, &args, &[inner.target.id.as_str()]);
            return Ok(Called::Done(match inner.caller.take_result(&operation) {
                Some(result) => result,
                None => error_result(reply),
            }));
        };
        // Held from the moment the set exists: a client that cancels while the call's
        // session and wait are recorded, or while it is asked in the client, leaves a
        // call nobody will hear of, withdrawn like one cancelled during the wait.
        let holding = Holding::new(self.clone(), set.id);
        if as_task {
            // A task outlives the request: the client follows it (`tasks/get`).
            holding.release();
            let task = Task::new(
                task_id(set.id, 0),
                TaskStatus::Working,
                rfc3339(set.created_at),
                rfc3339(now),
            )
            .with_status_message(WAITING)
            .with_poll_interval_ms(TASK_POLL_MS);
            return Ok(Called::Task(task));
        }
        // The call belongs to this chat: confirmed after it ended, it runs in no other
        // session unless its tool is marked run-after-disconnect.
        self.engine()
            .admin()
            .record_client_call(set.id, inner.session)
            .await
            .map_err(internal)?;
        let mut queued = CallToolResult::success(vec![ContentBlock::text(format!(
            "{reply}\nChange set {id}, item 0.\nTo learn what a person decided, call \
             {STATUS_TOOL} with {{\"changeSetId\": \"{id}\"}}.",
            id = set.id
        ))]);
        queued.meta = Some(self.receipt_meta(set.id));
        let client = progress.and_then(|context| {
            context
                .peer
                .peer_info()
                .map(|info| info.client_info.name.clone())
        });
        let mut wait = client_wait(inner.options.wait, client.as_deref());
        if inner.options.ask_in_client
            && let Some(context) = progress
        {
            let asking = wait.unwrap_or(crate::elicit::DEFAULT_ASK_WAIT);
            match crate::elicit::ask_in_client(&engine, context, &set, asking)
                .await
                .map_err(internal)?
            {
                // Decided in the client: the run (or the rejection) is answered as a
                // person's decision is, once the job ran.
                crate::elicit::Asked::Decided => wait = Some(asking),
                crate::elicit::Asked::Queued(Some(note)) => {
                    queued.content.push(ContentBlock::text(note))
                }
                crate::elicit::Asked::Queued(None) => {}
            }
        }
        let result = match wait {
            Some(wait) => {
                // For reviewers' screens only ("the agent waits 42 s more").
                let until = now + wait;
                self.engine()
                    .record_wait(set.id, until)
                    .await
                    .map_err(internal)?;
                self.wait_for(holding, wait, queued, progress).await?
            }
            None => {
                holding.release();
                queued
            }
        };
        Ok(Called::Done(result))
    }

    /// The diff of write `tool_name(args)` over its file as the upstream's read tool
    /// gives it now ([`crate::preview`]), or a line saying why there is none (the path
    /// leads out of the server's folders, what the write leaves cannot be told), or
    /// `None`: not a file write, or the file could not be read (a debug line says why).
    async fn read_preview(&self, tool_name: &str, args: &Value) -> Option<Preview> {
        let caller = &self.inner.caller;
        let upstream = caller.upstream();
        let tools = upstream.tools();
        let own = caller.upstream_name(tool_name);
        let tool = tools.iter().find(|t| t.name == own)?;
        let preview = preview_of(tool, &tools, &self.inner.files.configured)?;
        let path = args.get(&preview.path)?.as_str()?;
        match read_now(upstream, &preview, path, whole_for(args)).await {
            Ok(content) => Some(Preview::of(path, args, &content)),
            Err(Unread::Withheld(why)) => Some(Preview::withheld(&why)),
            Err(Unread::Failed) => None,
        }
    }

    /// The `_meta` of a queued call's receipt: `assent/changeSetId` and `assent/item`,
    /// and with a public URL the review page's link as `assent/reviewUrl`.
    fn receipt_meta(&self, set: Uuid) -> MetaObject {
        let mut meta = serde_json::Map::new();
        meta.insert(CHANGE_SET_META.to_owned(), json!(set.to_string()));
        meta.insert("assent/item".to_owned(), json!(0));
        if let Some(public) = &self.inner.options.public_url {
            meta.insert(
                REVIEW_URL_META.to_owned(),
                json!(format!(
                    "{}/#change-set-{set}",
                    public.trim_end_matches('/')
                )),
            );
        }
        MetaObject(meta)
    }

    /// The state of task `task_id` (`SET/ITEM`, see [`task_id`]) when it is a call of
    /// this server, read from the database, so it survives a restart of the gateway:
    /// `working` while the item is pending, deferred, approved or running;
    /// `completed` with the upstream's result once applied (the full result while
    /// this process still holds it, else the recorded text); `failed` with the
    /// person's reason when rejected, or the error when the run failed or is in doubt.
    pub async fn task(&self, task_id: &str) -> Result<Option<GetTaskResult>, McpError> {
        let Some(set_id) = self.own_task(task_id).await? else {
            return Ok(None);
        };
        let created = self
            .engine()
            .change_set(set_id)
            .await?
            .map(|set| set.created_at);
        let now = OffsetDateTime::now_utc();
        let (payload, message) = match self.decided(set_id).await? {
            None => (TaskPayload::Working, WAITING),
            Some(result) if result.is_error == Some(true) => {
                let mut error = serde_json::Map::new();
                error.insert("code".to_owned(), json!(TASK_FAILED_CODE));
                error.insert(
                    "message".to_owned(),
                    json!(crate::upstream::result_text(&result)),
                );
                (TaskPayload::Failed { error }, "Failed.")
            }
            Some(result) => {
                let Value::Object(result) = serde_json::to_value(&result).map_err(|e| {
                    McpError::Client(format!("a tool result did not serialize: {e}"))
                })?
                else {
                    return Err(McpError::Client("a tool result is not an object".into()));
                };
                (TaskPayload::Completed { result }, "Applied.")
            }
        };
        let task = Task::new(
            task_id,
            payload.status(),
            rfc3339(created.unwrap_or(now)),
            rfc3339(now),
        )
        .with_status_message(message)
        .with_poll_interval_ms(TASK_POLL_MS);
        Ok(Some(GetTaskResult::new(DetailedTask::new(task, payload))))
    }

    /// Withdraws the call of task `task_id` while a person has not decided it yet:
    /// the item is rejected with the reason [`CANCELLED_BY_AGENT`] (a decision like
    /// any other, in the audit trail); a decided one is left as it is (cancellation is
    /// cooperative). `None` when the task is not a call of this server.
    pub async fn cancel_task_of(&self, task_id: &str) -> Result<Option<()>, McpError> {
        let Some(set_id) = self.own_task(task_id).await? else {
            return Ok(None);
        };
        let engine = self.engine();
        if self.still_open(set_id).await? {
            let rejected = engine
                .confirmations()
                .reject_item(
                    assent_confirm::ItemRef::new(set_id, 0),
                    Some(CANCELLED_BY_AGENT.to_owned()),
                    OffsetDateTime::now_utc(),
                )
                .await;
            match rejected {
                Ok(_) | Err(assent_confirm::ConfirmError::Conflict { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Some(()))
    }

    /// The change set of task `task_id` when it names item 0 of a set of this agent on
    /// this server: another agent's task is unknown here, exactly like one that does
    /// not exist (its gateway shares this server's name, not its calls).
    async fn own_task(&self, task_id: &str) -> Result<Option<Uuid>, McpError> {
        let Some((set_id, 0)) = parse_task_id(task_id) else {
            return Ok(None);
        };
        Ok(self.owns(set_id).await?.then_some(set_id))
    }

    /// Whether change set `set_id` is a call of this agent on this server.
    async fn owns(&self, set_id: Uuid) -> Result<bool, McpError> {
        let ours = self.engine().change_set(set_id).await?.is_some_and(|set| {
            set.target_kind == self.inner.target.kind
                && set.target_id == self.inner.target.id
                && set.agent_id == self.inner.options.agent
        });
        Ok(ours)
    }

    /// The answer of `assent_status` for change set `set_id` when it is a call of this
    /// agent on this server (see the `status` module), `None` otherwise: the engine's
    /// outcome of the set, read after the ownership check.
    pub async fn status_of(&self, set_id: Uuid) -> Result<Option<CallToolResult>, McpError> {
        if !self.owns(set_id).await? {
            return Ok(None);
        }
        let outcome = self.engine().confirmations().outcome(set_id).await?;
        Ok(Some(status_answer(&outcome)))
    }

    /// The answer to an `assent_status` call with `args` on this server alone.
    pub async fn status(&self, args: &Value) -> Result<CallToolResult, ErrorData> {
        let set_id = match requested_set(args) {
            Ok(set_id) => set_id,
            Err(refused) => return Ok(refused),
        };
        let answer = self.status_of(set_id).await.map_err(internal)?;
        Ok(answer.unwrap_or_else(|| unknown_set(set_id)))
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
        holding: Holding,
        wait: Duration,
        queued: CallToolResult,
        context: Option<&RequestContext<RoleServer>>,
    ) -> Result<CallToolResult, ErrorData> {
        let deadline = tokio::time::Instant::now() + wait;
        let token = context.and_then(|c| c.meta.get_progress_token());
        let mut step = 0.0;
        // Dropped unanswered (the client cancelled, its session ended): withdrawn.
        let set_id = holding.set_id;
        let confirmations = self.engine().confirmations();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            // The engine's wait, woken by the change feed: a decision or a run recorded
            // by any process ends it within its poll of the feed.
            let answer = match confirmations
                .wait_outcome(set_id, left.min(PROGRESS_EVERY))
                .await
            {
                Ok(outcome) => self.answer_of(&outcome),
                Err(assent_confirm::ConfirmError::ChangeSetNotFound(_)) => {
                    Some(error_result(reply::GONE.to_owned()))
                }
                Err(error) => return Err(internal(error)),
            };
            if let Some(result) = answer {
                holding.release();
                return Ok(result);
            }
            if let (Some(token), Some(context)) = (&token, context) {
                step += 1.0;
                let mut note = ProgressNotificationParam::new(token.clone(), step);
                note.message = Some(WAITING.to_owned());
                let _ = context.peer.notify_progress(note).await;
            }
        }
        // Answered with the receipt: the model can follow it (`assent_status`).
        holding.release();
        Ok(queued)
    }

    /// Withdraws the call of change set `set_id` when it is still undecided: the
    /// client stopped waiting for it ([`STOPPED_WAITING`]), so nobody would hear its
    /// result. Through the engine's confirmation service (audited, webhooks); a call a
    /// person decided meanwhile is left as it is. A call of a tool the operator marked
    /// run-after-disconnect (`assent agent run-after-disconnect`) is kept for a person
    /// instead: once confirmed, a gateway of the agent runs it, in a later session too.
    #[tracing::instrument(skip(self), fields(server = %self.inner.options.server, change_set = %set_id))]
    pub async fn withdraw_abandoned(&self, set_id: Uuid) -> Result<(), McpError> {
        let engine = self.engine();
        // One read of the set: its call's tool and whether it is still undecided.
        let call = engine.change_set(set_id).await?.and_then(|set| {
            set.items
                .first()
                .map(|item| (item.tool_name.clone(), item.status))
        });
        let kept = match &call {
            Some((tool, _)) => {
                client_sessions::runs_after_disconnect(
                    engine.store(),
                    &self.inner.options.agent,
                    tool,
                )
                .await?
            }
            None => false,
        };
        let open = call.as_ref().is_some_and(|(_, status)| undecided(*status));
        if kept {
            tracing::info!(
                "the client stopped waiting; its tool runs after disconnect: kept for a person"
            );
        } else if open {
            let withdrawn = engine
                .confirmations()
                .withdraw_item(
                    assent_confirm::ItemRef::new(set_id, 0),
                    STOPPED_WAITING.to_owned(),
                    OffsetDateTime::now_utc(),
                )
                .await;
            match withdrawn {
                Ok(_) => tracing::info!("the client stopped waiting: the call is withdrawn"),
                Err(assent_confirm::ConfirmError::Conflict { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        if let Ok(mut held) = self.inner.held.lock() {
            held.remove(&set_id);
        }
        Ok(())
    }

    /// Ends this gateway's session: its client left (stdio closed, SIGTERM) or the
    /// gateway is stopping. Every call a client still waits on is withdrawn
    /// ([`Gateway::withdraw_abandoned`]), and the session is recorded as ended, so an
    /// approved call it made runs in no later session ([`crate::SessionGuard`]).
    pub async fn end_session(&self) {
        self.withdraw_held().await;
        let ended = self
            .engine()
            .admin()
            .end_client_session(self.inner.session, OffsetDateTime::now_utc())
            .await;
        if let Err(error) = ended {
            tracing::error!(%error, "recording the end of this gateway's session failed");
        }
    }

    /// Withdraws every call a client is still waiting on ([`Gateway::withdraw_abandoned`]).
    async fn withdraw_held(&self) {
        let held: Vec<Uuid> = self
            .inner
            .held
            .lock()
            .map(|held| held.iter().copied().collect())
            .unwrap_or_default();
        for set_id in held {
            if let Err(error) = self.withdraw_abandoned(set_id).await {
                tracing::error!(%error, change_set = %set_id, "withdrawing a call nobody waits for failed");
            }
        }
    }

    /// The answer for a queued call once it is settled, `None` while a person has not
    /// decided it or its run has not finished: the engine's outcome of the set.
    async fn decided(&self, set_id: Uuid) -> Result<Option<CallToolResult>, McpError> {
        match self.engine().confirmations().outcome(set_id).await {
            Ok(outcome) => Ok(self.answer_of(&outcome)),
            Err(assent_confirm::ConfirmError::ChangeSetNotFound(_)) => {
                Ok(Some(error_result(reply::GONE.to_owned())))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// [`waited_answer`] for `outcome`'s call, with the upstream's whole result (its
    /// structured content) while this process still holds it.
    fn answer_of(&self, outcome: &assent_confirm::SetOutcome) -> Option<CallToolResult> {
        let item = outcome.items.first()?;
        if !item.state.is_settled() {
            return None;
        }
        let kept = item
            .run
            .as_ref()
            .filter(|_| item.state == CallState::Applied)
            .and_then(|run| self.inner.caller.take_result(&run.operation_id));
        waited_answer(item, kept)
    }
}

/// At start, under `--trust none`: when tools the upstream marks read-only (and not
/// destructive) wait for a person because no rule allows them, one line on stderr
/// names them and the command that allows them once, knowingly.
fn point_to_read_only_allow(
    tools: &[Tool],
    registry: &assent_tools::ToolRegistry,
    policy: &assent_tools::AgentPolicy,
    options: &GatewayOptions,
    prefix: &str,
) {
    if options.trust != Trust::None {
        return;
    }
    let waiting: Vec<String> = tools
        .iter()
        .filter(|tool| {
            tool.annotations.as_ref().is_some_and(|hints| {
                hints.read_only_hint == Some(true) && hints.destructive_hint != Some(true)
            })
        })
        .map(|tool| format!("{prefix}{}", tool.name))
        .filter(|name| {
            registry
                .get(name)
                .is_some_and(|spec| route(policy, spec) == RuleAction::Ask)
        })
        .collect();
    if waiting.is_empty() {
        return;
    }
    tracing::warn!(
        "{} tools of server {} are marked read-only by the server and wait for a person like \
         writes ({}); to let them run at once, knowingly: assent agent allow {} --read-only-tools",
        waiting.len(),
        options.server,
        waiting.join(", "),
        options.agent
    );
}

/// Records `tools` as the catalog of the gateway's host in the database, so edits of
/// its items are checked against their schemas from any process and a definition
/// that changed since a person accepted it is caught.
///
/// Each tool is recorded under the name the client calls it by (`prefix` and the
/// upstream's name), with its definition as the upstream gave it: the pin is a hash of
/// the upstream's words, so it stays the same whatever the gateway calls the tool.
async fn record_catalog(
    store: &Store,
    options: &GatewayOptions,
    prefix: &str,
    tools: &[Tool],
) -> Result<Vec<HostTool>, McpError> {
    let definitions: Vec<(String, Value, Value)> = tools
        .iter()
        .map(|tool| {
            let definition = serde_json::to_value(tool).unwrap_or(Value::Null);
            let schema = Value::Object((*tool.input_schema).clone());
            (format!("{prefix}{}", tool.name), definition, schema)
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
    Ok(agents::record_host_catalog(
        store,
        &gateway_host(&options.agent, &options.server),
        &options.agent,
        options.trust.as_str(),
        &listed,
        OffsetDateTime::now_utc(),
    )
    .await?)
}

/// The tools whose calls left in doubt simply run again: those the operator said are
/// idempotent (by the name the client calls them, `prefix` and the upstream's name),
/// and under `--trust hints` those the upstream calls idempotent. The tool's name in
/// the other mode (see `catalog::gateway_registry`) is in the set too, for the jobs of
/// items recorded under it; the operator's word for a bare name does not cover a
/// namespaced tool (it may be another server's).
fn retried(
    tools: &[Tool],
    server: &str,
    prefix: &str,
    trust: Trust,
    operator: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut retried = BTreeSet::new();
    for tool in tools {
        let client = format!("{prefix}{}", tool.name);
        if idempotent(tool, trust) || operator.contains(&client) {
            retried.insert(tool.name.to_string());
            retried.insert(crate::config::namespaced(server, &tool.name));
        }
    }
    retried
}

/// `tools` as the client names them: `prefix` and each one's name.
fn client_tools(tools: &[Tool], prefix: &str) -> Vec<Tool> {
    tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            if !prefix.is_empty() {
                tool.name = format!("{prefix}{}", tool.name).into();
            }
            tool
        })
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

/// The names (`initialize`'s `clientInfo.name`) of clients known to give up on a call
/// after the TypeScript SDK's fixed 60 s request timeout: `claude-ai` is Claude
/// Desktop.
pub const SIXTY_SECOND_CLIENTS: &[&str] = &["claude-ai"];

/// The longest `--wait` for a client in [`SIXTY_SECOND_CLIENTS`]: it gets the receipt
/// before it gives up, so the call is not abandoned.
pub const SIXTY_SECOND_WAIT: Duration = Duration::from_secs(55);

/// How long a call of client `client` is held: `wait`, clamped to
/// [`SIXTY_SECOND_WAIT`] (with a warning naming the client) for a client that gives
/// up after 60 s.
pub fn client_wait(wait: Option<Duration>, client: Option<&str>) -> Option<Duration> {
    let wait = wait?;
    match client {
        Some(name) if wait > SIXTY_SECOND_WAIT && SIXTY_SECOND_CLIENTS.contains(&name) => {
            tracing::warn!(
                client = name,
                "--wait {}s is past what client {name:?} waits for a call (60 s): its calls are held {}s",
                wait.as_secs(),
                SIXTY_SECOND_WAIT.as_secs()
            );
            Some(SIXTY_SECOND_WAIT)
        }
        _ => Some(wait),
    }
}

/// A call a client is waiting on: registered in [`Inner::held`] from the moment its set
/// exists until the call is answered.
/// Released when the call is answered (a decision, or the receipt); dropped
/// unreleased (the client's cancellation, its request timeout or its session's end
/// drops the waiting future) it withdraws the call on a task of its own. It stays in
/// `held` until withdrawn, so [`Gateway::withdraw_held`] at the session's end finds it
/// even when that task had no time to run.
struct Holding {
    gateway: Option<Gateway>,
    set_id: Uuid,
}

impl Holding {
    fn new(gateway: Gateway, set_id: Uuid) -> Self {
        if let Ok(mut held) = gateway.inner.held.lock() {
            held.insert(set_id);
        }
        Self {
            gateway: Some(gateway),
            set_id,
        }
    }

    fn release(mut self) {
        if let Some(gateway) = self.gateway.take()
            && let Ok(mut held) = gateway.inner.held.lock()
        {
            held.remove(&self.set_id);
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let Some(gateway) = self.gateway.take() else {
            return;
        };
        let set_id = self.set_id;
        tracing::info!(change_set = %set_id, "the client stopped waiting for a queued call");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = gateway.withdraw_abandoned(set_id).await {
                    tracing::error!(%error, change_set = %set_id, "withdrawing a call nobody waits for failed");
                }
            });
        }
    }
}

/// The reason recorded when a call is withdrawn because its client stopped waiting
/// for it (cancelled the request, timed out, or closed its session or stdio).
pub const STOPPED_WAITING: &str = "the client stopped waiting";

/// What a call came to: an answer, or (for a client that declared the tasks
/// extension) a task for a queued call.
enum Called {
    Done(CallToolResult),
    Task(Task),
}

/// The key of a queued call's `_meta` that holds its change set id.
pub const CHANGE_SET_META: &str = "assent/changeSetId";

/// The key of a queued call's `_meta` that holds its review page's link (with
/// `--public-url`).
pub const REVIEW_URL_META: &str = "assent/reviewUrl";

/// The reason written when an agent cancels its task before a person decided it.
pub const CANCELLED_BY_AGENT: &str = "cancelled by the agent";

/// A task's status message while its call waits.
const WAITING: &str = "Waiting for a person to review the call.";

/// How often a client should poll a task, in milliseconds.
const TASK_POLL_MS: u64 = 1000;

/// The JSON-RPC error code of a failed task (rejected, or its run failed): in the
/// range the JSON-RPC specification leaves to servers.
pub const TASK_FAILED_CODE: i64 = -32000;

/// The task id of item `index` of change set `set`: `SET/INDEX`.
pub fn task_id(set: Uuid, index: usize) -> String {
    format!("{set}/{index}")
}

/// The change set and item a task id names.
pub fn parse_task_id(task_id: &str) -> Option<(Uuid, usize)> {
    let (set, index) = task_id.split_once('/')?;
    Some((set.parse().ok()?, index.parse().ok()?))
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
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
                .enable_tasks()
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
        let mut tools = self.list_for_client().await.map_err(internal)?;
        tools.push(status_tool());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.answer_call(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.task(&request.task_id)
            .await
            .map_err(internal)?
            .ok_or_else(|| unknown_task(&request.task_id))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel_task_of(&request.task_id)
            .await
            .map_err(internal)?
            .ok_or_else(|| unknown_task(&request.task_id))
    }
}

/// The error for a task id that names no call of the gateway's servers.
pub(crate) fn unknown_task(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task {task_id:?}"), None)
}

impl Gateway {
    /// The answer to a client's `tools/list`: the catalog brought up to date (the
    /// upstream listed again) and the tools the agent may see, remembering which were
    /// promised an `outputSchema` ([`Gateway::keep_promise`]).
    pub async fn list_for_client(&self) -> Result<Vec<Tool>, McpError> {
        self.sync_catalog(true).await?;
        let tools = self.visible_tools().await?;
        if let Ok(mut promised) = self.inner.promised.lock() {
            *promised = tools
                .iter()
                .filter(|tool| tool.output_schema.is_some())
                .map(|tool| tool.name.to_string())
                .collect();
        }
        Ok(tools)
    }

    /// The answer to a client's `tools/call` of one of this server's tools (its name as
    /// the client calls it: `SERVER__tool` behind a `--config` gateway).
    pub async fn answer_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = tracing::info_span!("mcp_call", server = %self.inner.options.server, tool = %request.name);
        // The client's W3C trace context, from the call's `_meta` (rmcp hands it in
        // the request or in the context): the span's parent, forwarded upstream.
        let received = request
            .meta
            .as_ref()
            .and_then(|meta| crate::trace_context::TraceContext::from_meta(meta))
            .or_else(|| crate::trace_context::TraceContext::from_meta(&context.meta));
        let args = Value::Object(request.arguments.unwrap_or_default());
        if request.name == STATUS_TOOL && self.inner.prefix.is_empty() {
            return Ok(self.status(&args).instrument(span).await?.into());
        }
        // A client's notifications/cancelled ends the call here: its future (a wake, an
        // upstream call after the wake's commit) is dropped, and the upstream is told.
        let as_task = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let call = crate::trace_context::scope(
            received,
            &span,
            self.call_or_task(&request.name, args, Some(&context), as_task)
                .instrument(span.clone()),
        );
        let result = tokio::select! {
            result = call => match result? {
                Called::Done(result) => result,
                Called::Task(task) => {
                    return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
                }
            },
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

/// Whether a call with item status `status` still waits for a person's decision.
fn undecided(status: ChangeItemStatus) -> bool {
    matches!(
        status,
        ChangeItemStatus::Pending | ChangeItemStatus::Deferred
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_gives_up_after_60_s_is_held_55_s_at_most() {
        let two_minutes = Some(Duration::from_secs(120));
        assert_eq!(
            client_wait(two_minutes, Some("claude-ai")),
            Some(SIXTY_SECOND_WAIT)
        );
        assert_eq!(client_wait(two_minutes, Some("mcp")), two_minutes);
        assert_eq!(client_wait(two_minutes, None), two_minutes);
        let short = Some(Duration::from_secs(30));
        assert_eq!(client_wait(short, Some("claude-ai")), short);
        assert_eq!(client_wait(None, Some("claude-ai")), None);
    }

    #[test]
    fn a_task_id_names_a_set_and_an_item() {
        let set = Uuid::new_v4();
        assert_eq!(parse_task_id(&task_id(set, 0)), Some((set, 0)));
        assert_eq!(parse_task_id(&task_id(set, 3)), Some((set, 3)));
        assert_eq!(parse_task_id(&set.to_string()), None);
        assert_eq!(parse_task_id("x/0"), None);
        assert_eq!(parse_task_id(&format!("{set}/-1")), None);
    }
}
