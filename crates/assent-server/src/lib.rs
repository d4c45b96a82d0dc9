//! The review server of Assent: the engine behind an HTTP JSON API and a web page
//! where people confirm, edit and reject what agents proposed.
//!
//! - [`Server`]: the axum application over one [`Engine`] — `/api` routes behind a
//!   bearer token, server-sent events for live updates, the page at `/` — with request
//!   tracing, a request-size limit and graceful shutdown.
//! - [`shapes`]: the JSON shapes of change sets, wakes and confirmations, shared with
//!   the command line's `--json` output.
//! - [`token`]: where the bearer token comes from (given, or generated once and kept
//!   beside the database with mode 0600).
//! - [`ServerError`]: every failure, answered as RFC 9457 problem details.
//! - Device sync over HTTP (`POST /api/sync`, [`SyncExchange`]): the peer that `assent
//!   sync --peer` exchanges batches with, under its own body limit.
//! - Delegated confirmation: with [`Server::with_bus`] the server is the parent session
//!   of sub-agents — their requests are server-sent events and
//!   `GET /api/confirmations`, a person answers with
//!   `POST /api/confirmations/{correlationId}`, and `POST /api/wakes` with `subAgent`
//!   runs a sub-agent's wake that waits for those answers.
//!
//! No engine logic lives here: a handler parses, calls a service, and renders.
//!
//! The server over an engine (here with a host of no tools, on an in-memory database); a
//! service serves its router, or calls `Server::run` with a listener:
//!
//! ```
//! use assent_confirm::{Engine, SimpleHost};
//! use assent_server::Server;
//! use assent_store::Store;
//! use assent_tools::ToolRegistry;
//! use std::sync::Arc;
//!
//! async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = Store::open("sqlite::memory:").await?;
//!     let host = Arc::new(SimpleHost::new("notes"));
//!     let engine = Engine::open(store, Arc::new(ToolRegistry::new()), host).await?;
//!     let server = Server::new(engine, "a-long-random-bearer-token");
//!     let _app: axum::Router = server.router();
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!     runtime.block_on(serve())
//! }
//! ```

mod agents;
mod answer_links;
mod api;
pub mod auth;
mod calls;
mod change_sets;
mod decisions;
mod delegation;
mod error;
mod events;
mod feed;
mod jobs;
mod outcome;
mod page;
pub mod policy;
mod rejections;
pub mod shapes;
mod slack;
mod slack_socket;
mod telegram;
pub use telegram::DEFAULT_TELEGRAM_API_URL;
mod sync;
mod telegram_bot;
pub mod token;
mod tokens;
mod tools;
mod wakes;
mod webhooks;
mod why;

pub use agents::{
    AgentView, HoldView, QuorumView, RuleView, agent_view, agent_views, change_agent_rule,
    remove_agent_rule, set_agent_categories, set_agent_hold, set_agent_idempotent, set_agent_rule,
};
pub use change_sets::with_agent_runs;
pub use delegation::DEFAULT_BUS_ROOT;
pub use error::ServerError;
pub use events::{EventBus, ServerEvent};
pub use sync::{DEFAULT_SYNC_BODY_LIMIT, SyncExchange};

use assent_confirm::admin::Role;
use assent_confirm::{ConfirmationBus, Engine};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post, put};
use delegation::Delegation;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::TraceLayer;

/// A refusal of a path some host answers itself ([`Server::with_refusals`]), handed to
/// it with its status and message (the problem's `detail`).
async fn answer_refusals(
    refusals: Arc<[(&'static str, RefusalAnswer)]>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path().to_owned();
    let Some(answer) = refusals
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix))
        .map(|&(_, answer)| answer)
    else {
        return next.run(request).await;
    };
    let response = next.run(request).await;
    let status = response.status();
    if status.is_success() {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let detail = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|problem| problem.get("detail")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    answer(&path, status, &detail)
}

/// The largest request body accepted (4 MiB, as for `assent wake`); larger ones get 413.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// How slow clients, many clients and other processes are handled: see
/// [`Server::with_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// A connection that has not sent a request's headers by then is closed.
    pub header_read_timeout: Duration,
    /// A request whose body has not arrived by then is answered 408.
    pub body_read_timeout: Duration,
    /// Connections served at once; further ones wait in the listen queue.
    pub max_connections: usize,
    /// How often the change feed is read for writes by other processes.
    pub feed_interval: Duration,
    /// How often the engine's host's due jobs (the execution ledger) are run.
    pub jobs_interval: Duration,
}

impl Default for ServerLimits {
    /// 10 s for headers, 30 s for a body, 512 connections, the feed every second.
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 512,
            feed_interval: Duration::from_secs(1),
            jobs_interval: Duration::from_millis(500),
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    engine: Engine,
    token: Arc<str>,
    events: EventBus,
    /// The parent side of the confirmation bus, when sub-agents may ask this server.
    delegation: Option<Delegation>,
    /// The last proof of `GET /api/audit/verify`, reused while the chain's head stands
    /// and it is fresh: every page load asks, and a proof reads the whole database.
    proof: Arc<tokio::sync::Mutex<Option<decisions::CachedProof>>>,
}

/// The review server: the engine, its bearer token and the event bus.
#[derive(Clone)]
pub struct Server {
    state: AppState,
    host_routes: Vec<(Role, Router<Engine>)>,
    /// Routes outside `/api` that authenticate their callers themselves (the MCP
    /// gateway at `/mcp`, which takes agent tokens of its own agent).
    services: Vec<Router>,
    body_limit: usize,
    sync_body_limit: usize,
    limits: ServerLimits,
    /// The app-level token of Slack's Socket Mode, when the server receives Slack's
    /// interactions over it.
    slack_socket: Option<String>,
    /// When the server posts to Telegram and long-polls its updates: the Bot API URL
    /// that overrides the connection's, if any.
    telegram: Option<Option<String>>,
    /// Paths whose refusals their host answers itself ([`Server::with_refusals`]).
    refusals: Vec<(&'static str, RefusalAnswer)>,
    /// Where phones reach this server ([`Server::with_public_url`]).
    public_url: Option<String>,
}

/// How a host answers the refusals of its own routes ([`Server::with_refusals`]): from
/// the request's path, the refusal's status and its message, the response sent instead.
type RefusalAnswer = fn(&str, axum::http::StatusCode, &str) -> axum::response::Response;

impl Server {
    /// A server over `engine` that accepts `token` (see [`token::resolve_token`]).
    pub fn new(engine: Engine, token: impl Into<String>) -> Self {
        Self {
            state: AppState {
                engine,
                token: Arc::from(token.into()),
                events: EventBus::new(),
                delegation: None,
                proof: Arc::default(),
            },
            host_routes: Vec::new(),
            services: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            sync_body_limit: DEFAULT_SYNC_BODY_LIMIT,
            limits: ServerLimits::default(),
            slack_socket: None,
            telegram: None,
            refusals: Vec::new(),
            public_url: None,
        }
    }

    /// The same server with every refusal of a request whose path starts with `prefix`
    /// (any status but 2xx: the token check's 401 included, a body too large, a bad
    /// query) answered by `answer` instead: for callers that take an error status for
    /// "go ahead", such as a coding agent's `http` hook (`/api/hooks/`): `answer` gets
    /// the request's path, the refusal's status and its message, and returns the
    /// response sent instead.
    #[must_use]
    pub fn with_refusals(
        mut self,
        prefix: &'static str,
        answer: fn(&str, axum::http::StatusCode, &str) -> axum::response::Response,
    ) -> Self {
        self.refusals.push((prefix, answer));
        self
    }

    /// The same server with a host's own routes under `/api` (e.g. the journal's
    /// `/api/tasks`), mounted with the routes `role` may call, behind the same token
    /// check: the server knows no host, whoever composes one adds its routes here.
    #[must_use]
    pub fn with_routes(mut self, role: Role, routes: Router<Engine>) -> Self {
        self.host_routes.push((role, routes));
        self
    }

    /// The same server with `service` mounted beside `/api`, outside its token check:
    /// a service that authenticates its callers itself (the MCP gateway at `/mcp`,
    /// `assent serve --mcp-config`). The server's body limits, timeouts and request
    /// spans still apply.
    #[must_use]
    pub fn with_service(mut self, service: Router) -> Self {
        self.services.push(service);
        self
    }

    /// The same server with other [`ServerLimits`].
    #[must_use]
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The same server with another request-size limit, in bytes.
    #[must_use]
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// The same server with another request-size limit for `POST /api/sync`, in bytes.
    #[must_use]
    pub fn with_sync_body_limit(mut self, bytes: usize) -> Self {
        self.sync_body_limit = bytes;
        self
    }

    /// The same server as the parent session of `bus`: while it runs, it listens to the
    /// bus (requests become server-sent events and `GET /api/confirmations`), people
    /// answer through `POST /api/confirmations/{correlationId}`, and delegated wakes
    /// (`POST /api/wakes` with `subAgent`) ask through buses derived from it. Without a
    /// bus, delegated wakes are refused fail-closed and nothing is pending.
    #[must_use]
    pub fn with_bus(mut self, bus: ConfirmationBus) -> Self {
        self.state.delegation = Some(Delegation::new(bus));
        self
    }

    /// The same server receiving Slack's interactions over Socket Mode too, with the
    /// app-level token `app_token` (`xapp-…`): no public URL needed.
    #[must_use]
    pub fn with_slack_socket(mut self, app_token: impl Into<String>) -> Self {
        self.slack_socket = Some(app_token.into());
        self
    }

    /// The same server posting each queued set to the connected Telegram bot's chats
    /// and long-polling its updates (`getUpdates`: no public URL needed), at the Bot
    /// API `api_url` when given instead of the one the connection names.
    #[must_use]
    pub fn with_telegram(mut self, api_url: Option<String>) -> Self {
        self.telegram = Some(api_url);
        self
    }

    /// The same server sending each queued item to the phone channels (`assent notify`:
    /// ntfy, email) with one-time answer links on `public_url`, the address phones
    /// reach this server at, and following each up when it is decided.
    #[must_use]
    pub fn with_public_url(mut self, public_url: impl Into<String>) -> Self {
        self.public_url = Some(public_url.into());
        self
    }

    /// The event bus, for publishing from outside a request.
    pub fn events(&self) -> &EventBus {
        &self.state.events
    }

    /// The application: the API, the page and their layers.
    pub fn router(&self) -> Router {
        // Grouped by the least role that may call them (see `auth`). An agent token
        // reaches only the first group, and there only what concerns its own agent.
        let host_routes = |role: Role| {
            self.host_routes
                .iter()
                .filter(move |(r, _)| *r == role)
                .fold(Router::new(), |all, (_, routes)| {
                    all.merge(routes.clone().with_state(self.state.engine.clone()))
                })
        };
        let agent_routes = Router::new()
            .route("/session", get(api::session))
            .route("/wakes", post(wakes::wake))
            .route("/tools", get(tools::list))
            .route("/change-sets", get(change_sets::list_change_sets))
            .route("/change-sets/{id}", get(change_sets::show_change_set))
            .route("/change-sets/{id}/outcome", get(outcome::show_outcome))
            // Calls the client runs itself (`calls.rs`).
            .route("/calls", post(calls::propose))
            .route("/calls/{run_key}/ran", post(calls::ran_call))
            .route(
                "/change-sets/{id}/items/{index}/decision",
                get(calls::show_decision),
            )
            .route("/change-sets/{id}/items/{index}/ran", post(calls::ran_item))
            .route("/decisions", get(decisions::list_decisions))
            .route("/history", get(decisions::history))
            // An agent hears of its own agent's sets only.
            .route("/events", get(api::events))
            .merge(host_routes(Role::Agent));
        let reviewer_routes = Router::new()
            .merge(host_routes(Role::Reviewer))
            .route(
                "/change-sets/{id}/confirm-all",
                post(change_sets::confirm_all),
            )
            .route("/change-sets/{id}/dismiss", post(change_sets::dismiss))
            .route(
                "/change-sets/{id}/items/{index}/confirm",
                post(change_sets::confirm_item),
            )
            .route(
                "/change-sets/{id}/items/{index}/reject",
                post(change_sets::reject_item),
            )
            .route(
                "/change-sets/{id}/items/{index}/edit",
                post(change_sets::edit_item),
            )
            .route(
                "/change-sets/{id}/items/{index}/defer",
                post(change_sets::defer_item),
            )
            .route(
                "/change-sets/{id}/items/{index}/undo",
                post(change_sets::undo_item),
            )
            .route("/jobs", get(jobs::list))
            .route("/jobs/{id}/resolve", post(jobs::resolve))
            .route("/jobs/{id}/retry", post(jobs::retry))
            .route("/jobs/{id}/retract", post(jobs::retract))
            .route("/jobs/{id}/cancel", post(jobs::cancel))
            .route("/audit", get(decisions::audit_trail))
            .route("/rejections", get(rejections::list))
            .route("/audit/head", get(decisions::audit_head))
            .route("/audit/digest", get(why::digest))
            .route("/change-sets/{id}/items/{index}/why", get(why::why_item))
            .route("/audit/verify", get(decisions::audit_verify))
            .route("/confirmations", get(delegation::list))
            .route("/confirmations/{id}", post(delegation::answer))
            .route_layer(middleware::from_fn(auth::require_reviewer));
        let admin_routes = Router::new()
            .route("/agents", post(agents::create_agent))
            .route(
                "/agents/{id}/rules/{tool}",
                put(agents::set_rule).delete(agents::remove_rule),
            )
            .route("/agents/{id}/holds/{tool}", put(agents::set_hold))
            .route("/policy", get(policy::export))
            .route("/policy/plan", post(policy::plan))
            .route("/policy/apply", post(policy::apply))
            // A batch is a device's whole state: the innermost body limit wins.
            .route(
                "/sync",
                post(sync::exchange).layer(DefaultBodyLimit::max(self.sync_body_limit)),
            )
            .route("/sync/host", get(sync::host))
            .route("/sync/peers", get(sync::peers))
            .route("/conflicts", get(sync::conflicts))
            .route("/tokens", get(tokens::list).post(tokens::add))
            .route("/tokens/{id}/revoke", post(tokens::revoke))
            .merge(webhooks::routes())
            .merge(host_routes(Role::Admin))
            .route_layer(middleware::from_fn(auth::require_admin));
        let api = agent_routes
            .merge(reviewer_routes)
            .merge(admin_routes)
            .fallback(api::not_found)
            // `layer`, not `route_layer`: unknown `/api` paths need the token too, so
            // that a stranger learns nothing about which routes exist.
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                auth::authenticate,
            ));
        let services = self
            .services
            .iter()
            .fold(Router::new(), |all, service| all.merge(service.clone()));
        // Slack cannot send a bearer token: its route checks Slack's signature instead.
        let slack = Router::new().route("/api/slack/interactions", post(slack::interactions));
        // A one-time answer link is its own credential (phone doors: ntfy, email).
        let answers = Router::new().route(
            answer_links::ROUTE,
            get(answer_links::show).post(answer_links::answer),
        );
        let app = Router::new()
            .merge(page::routes())
            .merge(slack)
            .merge(answers)
            .nest("/api", api)
            .with_state(self.state.clone())
            .merge(services)
            .layer(DefaultBodyLimit::max(self.body_limit))
            .layer(RequestBodyTimeoutLayer::new(self.limits.body_read_timeout));
        let refusals: Arc<[(&'static str, RefusalAnswer)]> = self.refusals.clone().into();
        let app = if refusals.is_empty() {
            app
        } else {
            app.layer(middleware::from_fn(
                move |request: axum::extract::Request, next: middleware::Next| {
                    answer_refusals(refusals.clone(), request, next)
                },
            ))
        };
        app.layer(TraceLayer::new_for_http())
    }

    /// Serves on `listener` until `shutdown` completes, then stops accepting, ends the
    /// event streams, stops listening to the confirmation bus (so that delegated wakes
    /// still waiting end fail-closed rather than hold the shutdown) and waits for
    /// requests in flight. While it serves, it follows the change feed so that open
    /// pages learn of writes made by other processes.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let events = self.state.events.clone();
        let forwarding = self
            .state
            .delegation
            .as_ref()
            .map(|delegation| delegation.forward(events.clone(), self.state.engine.clone()));
        let feed_start = feed::start(&self.state.engine).await;
        let feed = tokio::spawn(feed::follow(
            self.state.engine.clone(),
            events.clone(),
            self.limits.feed_interval,
            feed_start,
        ));
        // Confirmed items of the engine's host's external tools run within about one
        // poll of their confirmation, from whichever process confirmed them.
        let executor = tokio::spawn(jobs::execute(
            self.state.engine.clone(),
            events.clone(),
            self.limits.jobs_interval,
        ));
        // Each set queued since Slack was connected is posted there once, and its
        // message rewritten whenever anything about it is decided, anywhere.
        let poster = tokio::spawn({
            let store = self.state.engine.store().clone();
            let events = events.clone();
            let interval = self.limits.feed_interval;
            async move {
                assent_webhooks::SlackPoster::new(store)
                    .run(interval, events.closed())
                    .await;
            }
        });
        // Phone channels get each queued item once, with links on the public URL.
        let phone =
            match self.public_url.as_deref().map(|url| {
                assent_webhooks::PhonePoster::new(self.state.engine.store().clone(), url)
            }) {
                Some(Ok(poster)) => {
                    let events = events.clone();
                    let interval = self.limits.feed_interval;
                    Some(tokio::spawn(async move {
                        poster.run(interval, events.closed()).await;
                    }))
                }
                Some(Err(error)) => {
                    tracing::error!(%error, "the phone doors cannot start");
                    None
                }
                None => None,
            };
        let socket = self.slack_socket.clone().map(|app_token| {
            let engine = self.state.engine.clone();
            let events = events.clone();
            tokio::spawn(async move {
                slack_socket::run(engine, app_token, events.closed()).await;
            })
        });
        let telegram = self.telegram.clone().map(|api_url| {
            let engine = self.state.engine.clone();
            let interval = self.limits.feed_interval;
            let (posting, polling) = (events.clone(), events.clone());
            let (poster_engine, poster_url) = (engine.clone(), api_url.clone());
            (
                tokio::spawn(async move {
                    telegram_bot::post(poster_engine, poster_url, interval, posting.closed()).await;
                }),
                tokio::spawn(async move {
                    telegram_bot::poll(engine, api_url, polling.closed()).await;
                }),
            )
        });
        let served = self.serve(listener, shutdown).await;
        // Serving can also end by failing; the forwarder and the feed end only when told.
        events.close();
        if let Some(forwarding) = forwarding
            && let Err(error) = forwarding.await
        {
            tracing::error!(%error, "the confirmation forwarder failed");
        }
        if let Err(error) = feed.await {
            tracing::error!(%error, "the change feed follower failed");
        }
        if let Err(error) = executor.await {
            tracing::error!(%error, "the job executor failed");
        }
        if let Err(error) = poster.await {
            tracing::error!(%error, "the Slack poster failed");
        }
        if let Some(phone) = phone
            && let Err(error) = phone.await
        {
            tracing::error!(%error, "the phone doors failed");
        }
        if let Some(socket) = socket
            && let Err(error) = socket.await
        {
            tracing::error!(%error, "Slack's Socket Mode failed");
        }
        if let Some((poster, poller)) = telegram {
            for ended in [poster.await, poller.await] {
                if let Err(error) = ended {
                    tracing::error!(%error, "Telegram's poster or poller failed");
                }
            }
        }
        served
    }

    /// The accept loop ([`accept_loop`]) serving this server's router; open event
    /// streams are closed before the graceful stop waits for connections.
    async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let app = self.router();
        let events = self.state.events.clone();
        // Open event streams would keep the graceful shutdown waiting forever.
        accept_loop(listener, app, self.limits, shutdown, move || events.close()).await
    }
}

/// Completes on ctrl-c or, on Unix, SIGTERM: the stop of `assent serve` and of the MCP
/// gateway alike (a service manager's stop is SIGTERM).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// The accept loop of `assent serve`, and of every other door served over HTTP (`assent
/// mcp --http`): `app` on `listener`, one HTTP/1 connection per task, at most
/// [`ServerLimits::max_connections`] at once (further ones wait in the listen queue),
/// each closed when it has not sent a request's headers within
/// [`ServerLimits::header_read_timeout`]. When `shutdown` completes, no connection is
/// accepted any more, `before_drain` runs (to end what would keep a connection open
/// forever, such as event streams), and the open connections are stopped gracefully.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    before_drain: impl FnOnce(),
) -> Result<(), ServerError> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let shutdown = std::pin::pin!(shutdown);
    let mut shutdown = shutdown;
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        // The semaphore is never closed.
        let Ok(slot) = slot else { break };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // An answer goes out as soon as it is written: with Nagle's algorithm on, the
        // part of a response written after its headers (an event stream's event, as
        // `assent mcp --http` answers a call) waits for the client's delayed ACK, 40 ms
        // on Linux, on every call.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "TCP_NODELAY could not be set");
        }
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            use tower::ServiceExt;
            app.clone().oneshot(request.map(axum::body::Body::new))
        });
        let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    tracing::info!("shutting down");
    before_drain();
    graceful.shutdown().await;
    Ok(())
}
