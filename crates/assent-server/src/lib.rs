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

mod agents;
mod api;
mod delegation;
mod error;
mod events;
mod page;
pub mod shapes;
mod sync;
pub mod token;
mod webhooks;

pub use agents::{AgentView, set_agent_categories};
pub use delegation::DEFAULT_BUS_ROOT;
pub use error::ServerError;
pub use events::{EventBus, ServerEvent};
pub use sync::{DEFAULT_SYNC_BODY_LIMIT, SyncExchange};

use assent_confirm::{ConfirmationBus, Engine};
use assent_store::StoreError;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use delegation::Delegation;
use sqlx::Any;
use sqlx::pool::PoolConnection;
use std::future::Future;
use std::sync::Arc;
use tower_http::trace::TraceLayer;

/// The largest request body accepted (4 MiB, as for `assent wake`); larger ones get 413.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// The engine over `store` with the reference task journal as host: what `assent
/// serve` and the command line run.
pub fn journal_engine(store: assent_store::Store) -> Engine {
    let host = assent_journal_host::JournalHost::new(store.host_id());
    Engine::new(store, Arc::new(assent_journal::catalog()), Arc::new(host))
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    engine: Engine,
    token: Arc<str>,
    events: EventBus,
    /// The parent side of the confirmation bus, when sub-agents may ask this server.
    delegation: Option<Delegation>,
}

impl AppState {
    /// A pooled connection for reads.
    async fn connection(&self) -> Result<PoolConnection<Any>, ServerError> {
        Ok(self
            .engine
            .store()
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?)
    }
}

/// The review server: the engine, its bearer token and the event bus.
#[derive(Clone)]
pub struct Server {
    state: AppState,
    body_limit: usize,
    sync_body_limit: usize,
}

impl Server {
    /// A server over `engine` that accepts `token` (see [`token::resolve_token`]).
    pub fn new(engine: Engine, token: impl Into<String>) -> Self {
        Self {
            state: AppState {
                engine,
                token: Arc::from(token.into()),
                events: EventBus::new(),
                delegation: None,
            },
            body_limit: DEFAULT_BODY_LIMIT,
            sync_body_limit: DEFAULT_SYNC_BODY_LIMIT,
        }
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

    /// The event bus, for publishing from outside a request.
    pub fn events(&self) -> &EventBus {
        &self.state.events
    }

    /// The application: the API, the page and their layers.
    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/session", get(api::session))
            .route("/agents", post(api::create_agent))
            .route("/tasks", post(api::create_new_task))
            .route("/tasks/{id}", get(api::show_task))
            .route("/wakes", post(api::wake))
            .route("/change-sets", get(api::list_change_sets))
            .route("/change-sets/{id}", get(api::show_change_set))
            .route("/change-sets/{id}/confirm-all", post(api::confirm_all))
            .route("/change-sets/{id}/dismiss", post(api::dismiss))
            .route(
                "/change-sets/{id}/items/{index}/confirm",
                post(api::confirm_item),
            )
            .route(
                "/change-sets/{id}/items/{index}/reject",
                post(api::reject_item),
            )
            .route("/change-sets/{id}/items/{index}/edit", post(api::edit_item))
            .route(
                "/change-sets/{id}/items/{index}/defer",
                post(api::defer_item),
            )
            .route("/decisions", get(api::list_decisions))
            .route("/history", get(api::history))
            .route("/audit", get(api::audit_trail))
            .route("/events", get(api::events))
            // A batch is a device's whole state: the innermost body limit wins.
            .route(
                "/sync",
                post(sync::exchange).layer(DefaultBodyLimit::max(self.sync_body_limit)),
            )
            .route("/sync/host", get(sync::host))
            .route("/sync/peers", get(sync::peers))
            .route("/conflicts", get(sync::conflicts))
            .route("/confirmations", get(delegation::list))
            .route("/confirmations/{id}", post(delegation::answer))
            .merge(webhooks::routes())
            .fallback(api::not_found)
            // `layer`, not `route_layer`: unknown `/api` paths need the token too, so
            // that a stranger learns nothing about which routes exist.
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                require_token,
            ));
        Router::new()
            .merge(page::routes())
            .nest("/api", api)
            .layer(DefaultBodyLimit::max(self.body_limit))
            .layer(TraceLayer::new_for_http())
            .with_state(self.state.clone())
    }

    /// Serves on `listener` until `shutdown` completes, then stops accepting, ends the
    /// event streams, stops listening to the confirmation bus (so that delegated wakes
    /// still waiting end fail-closed rather than hold the shutdown) and waits for
    /// requests in flight.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let events = self.state.events.clone();
        let forwarding = self.state.delegation.as_ref().map(|delegation| {
            delegation.forward(events.clone(), self.state.engine.store().clone())
        });
        let closing = events.clone();
        let signal = async move {
            shutdown.await;
            tracing::info!("shutting down");
            closing.close();
        };
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(signal)
            .await
            .map_err(|source| ServerError::Io {
                context: "serving failed".to_owned(),
                source,
            });
        // Serving can also end by failing; the forwarder ends only when told.
        events.close();
        if let Some(forwarding) = forwarding
            && let Err(error) = forwarding.await
        {
            tracing::error!(%error, "the confirmation forwarder failed");
        }
        served
    }
}

/// Lets a request through only with `Authorization: Bearer <token>`.
async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(token) if same_secret(token.trim().as_bytes(), state.token.as_bytes()) => {
            next.run(request).await
        }
        _ => ServerError::Unauthorized.into_response(),
    }
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    presented.len() == expected.len()
        && presented
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
        assert!(!same_secret(b"", b"abc"));
    }
}
