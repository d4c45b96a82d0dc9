//! What the JSON API's handlers share (body and query extractors, answers, ids and
//! limits, the target a request names) and the routes of no resource (session, events,
//! the fallback). The handlers live by resource: [`crate::wakes`],
//! [`crate::change_sets`], [`crate::decisions`], [`crate::agents`], [`crate::tokens`],
//! [`crate::sync`], [`crate::tools`], [`crate::webhooks`]; each parses its input, calls
//! an engine service and answers in the shapes of [`crate::shapes`]. Every decision
//! publishes the changed set on the event bus.

use crate::auth::Principal;
use crate::events::ServerEvent;
use crate::{AppState, ServerError};
use assent_confirm::ConfirmError;
use assent_confirm::admin::Role;
use assent_domain::{LEGACY_TARGET_KIND, OffsetDateTime, Target, Uuid};
use assent_store::StoreError;
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

/// A JSON body, or the problem explaining why it is not one.
pub(crate) type Body<T> = Result<Json<T>, JsonRejection>;
/// Query parameters, or the problem explaining why they do not parse.
pub(crate) type Params<T> = Result<Query<T>, QueryRejection>;
/// What every handler returns.
pub(crate) type ApiResult = Result<Response, ServerError>;

/// Default and largest `limit` of the list routes.
pub(crate) const DEFAULT_DECISIONS: u32 = 20;
pub(crate) const MAX_LIST: u32 = 500;

pub(crate) fn ok(value: impl serde::Serialize) -> ApiResult {
    Ok(Json(value).into_response())
}

pub(crate) fn created(value: impl serde::Serialize) -> ApiResult {
    Ok((StatusCode::CREATED, Json(value)).into_response())
}

/// A change set's whole id.
pub(crate) fn parse_set_id(text: &str) -> Result<Uuid, ServerError> {
    Uuid::parse_str(text.trim())
        .map_err(|e| ServerError::BadRequest(format!("invalid change set id {text:?}: {e}")))
}

/// The change set a path names: its whole id, or the first 8 or more hex digits of
/// exactly one set's id (404 when none has them, 400 when several do).
pub(crate) async fn resolve_set_id(state: &AppState, text: &str) -> Result<Uuid, ServerError> {
    // A whole id needs no connection.
    if let Ok(id) = Uuid::parse_str(text.trim()) {
        return Ok(id);
    }
    state
        .engine
        .resolve_set_id(text)
        .await
        .map_err(|error| match error {
            ConfirmError::Store(error @ StoreError::NoChangeSetWithPrefix(_)) => {
                ServerError::NotFound(error.to_string())
            }
            ConfirmError::Store(
                error @ (StoreError::InvalidChangeSetId { .. }
                | StoreError::AmbiguousChangeSetId { .. }),
            ) => ServerError::BadRequest(error.to_string()),
            ConfirmError::Store(other) => ServerError::Store(other),
            other => ServerError::Confirm(other),
        })
}

pub(crate) fn parse_index(text: &str) -> Result<usize, ServerError> {
    text.parse().map_err(|_| {
        ServerError::BadRequest(format!(
            "invalid item index {text:?}: expected a whole number from 0"
        ))
    })
}

pub(crate) fn parse_limit(text: Option<&str>, default: u32) -> Result<u32, ServerError> {
    let Some(text) = text else {
        return Ok(default);
    };
    match text.trim().parse::<u32>() {
        Ok(limit @ 1..=MAX_LIST) => Ok(limit),
        _ => Err(ServerError::BadRequest(format!(
            "invalid limit {text:?}: expected 1 to {MAX_LIST}"
        ))),
    }
}

/// Tells live screens that a decision changed the set; they fetch it.
pub(crate) fn publish_update(state: &AppState, id: Uuid) {
    state.events.publish(ServerEvent::updated(id));
}

/// Which target a request is about: `taskId` (a journal task, the spelling of release
/// 0.1.0) or `targetKind` and `targetId` (any host's).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TargetParams {
    task_id: Option<String>,
    target_kind: Option<String>,
    target_id: Option<String>,
}

impl TargetParams {
    /// The target named, `None` when none is.
    pub(crate) fn target(&self) -> Result<Option<Target>, ServerError> {
        let text = |value: &Option<String>| {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        match (
            text(&self.task_id),
            text(&self.target_kind),
            text(&self.target_id),
        ) {
            (None, None, None) => Ok(None),
            (Some(task), None, None) => Ok(Some(Target::new(LEGACY_TARGET_KIND, task))),
            (None, Some(kind), Some(id)) => Ok(Some(Target::new(kind, id))),
            (Some(_), _, _) => Err(ServerError::BadRequest(
                "name the target once: taskId, or targetKind and targetId".to_owned(),
            )),
            (None, _, _) => Err(ServerError::BadRequest(
                "targetKind and targetId go together".to_owned(),
            )),
        }
    }
}

/// `GET /api/events`: server-sent events. A reviewer or an admin hears every event; an
/// agent token only what concerns its own agent's sets (see
/// [`crate::events::EventBus::agent_stream`]).
pub(crate) async fn events(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
) -> ApiResult {
    match (caller.role, caller.agent_id) {
        (Role::Reviewer | Role::Admin, _) => Ok(state.events.response().into_response()),
        (Role::Agent, Some(agent_id)) => Ok(state
            .events
            .agent_response(state.engine.store().clone(), agent_id)
            .into_response()),
        // Every agent token names its agent; one that does not hears nothing.
        (Role::Agent, None) => Err(ServerError::Forbidden(
            "this agent token names no agent".to_owned(),
        )),
    }
}

/// Any other `/api` path.
pub(crate) async fn not_found() -> ServerError {
    ServerError::NotFound("no such API route".to_owned())
}

/// `{"status": "ok", "role", "agentId", "identity"}`, for checking a token and learning what it
/// may do (`GET /api/session`).
pub(crate) async fn session(Extension(caller): Extension<Principal>) -> Response {
    Json(json!({
        "status": "ok",
        "role": caller.role,
        "agentId": caller.agent_id,
        // Who this token's decisions are recorded as (a quorum counts it as a person).
        "identity": caller.identity(),
    }))
    .into_response()
}

/// The clock of a request.
pub(crate) fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}
