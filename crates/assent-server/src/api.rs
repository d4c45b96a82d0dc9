//! The JSON API under `/api`: one handler per route, each parsing its input, calling an
//! engine service and answering in the shapes of [`crate::shapes`]. Every decision
//! publishes the changed set on the event bus.

use crate::agents::set_agent_categories;
use crate::auth::Principal;
use crate::events::ServerEvent;
use crate::shapes::{SetView, confirm_all_json, confirmed_json, scheduled_wake_json, wake_json};
use crate::tools;
use crate::{AppState, ServerError};
use assent_changeset::{Dialect, ParsedCalls};
use assent_confirm::{CancellationToken, ScheduledWake, Scheduler, Session, WakeRequest};
use assent_domain::{
    ChangeDecision, ChangeSet, ChangeSetStatus, LEGACY_TARGET_KIND, OffsetDateTime, Target, Uuid,
};
use assent_store::{AnyConnection, audit, change_sets, decisions};
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// A JSON body, or the problem explaining why it is not one.
type Body<T> = Result<Json<T>, JsonRejection>;
/// Query parameters, or the problem explaining why they do not parse.
type Params<T> = Result<Query<T>, QueryRejection>;
/// What every handler returns.
type ApiResult = Result<Response, ServerError>;

/// Default and largest `limit` of the list routes.
const DEFAULT_DECISIONS: u32 = 20;
const MAX_LIST: u32 = 500;

fn ok(value: impl serde::Serialize) -> ApiResult {
    Ok(Json(value).into_response())
}

fn created(value: impl serde::Serialize) -> ApiResult {
    Ok((StatusCode::CREATED, Json(value)).into_response())
}

fn parse_set_id(text: &str) -> Result<Uuid, ServerError> {
    Uuid::parse_str(text.trim())
        .map_err(|e| ServerError::BadRequest(format!("invalid change set id {text:?}: {e}")))
}

fn parse_index(text: &str) -> Result<usize, ServerError> {
    text.parse().map_err(|_| {
        ServerError::BadRequest(format!(
            "invalid item index {text:?}: expected a whole number from 0"
        ))
    })
}

fn parse_limit(text: Option<&str>, default: u32) -> Result<u32, ServerError> {
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

/// The set with `id` and its decisions, or 404.
async fn load_with_decisions(
    conn: &mut AnyConnection,
    id: Uuid,
) -> Result<(ChangeSet, Vec<ChangeDecision>), ServerError> {
    let set = change_sets::load(conn, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("no change set {id}")))?;
    let decided = decisions::for_change_set(conn, id).await?;
    Ok((set, decided))
}

/// Tells live screens that a decision changed the set; they fetch it.
fn publish_update(state: &AppState, id: Uuid) {
    state.events.publish(ServerEvent::updated(id));
}

/// `POST /api/agents {id, categories}`.
#[derive(Debug, Deserialize)]
pub(crate) struct AgentBody {
    id: String,
    categories: Vec<String>,
}

pub(crate) async fn create_agent(
    State(state): State<AppState>,
    body: Body<AgentBody>,
) -> ApiResult {
    let Json(body) = body?;
    let agent =
        set_agent_categories(state.engine.store(), &body.id, &body.categories, now()).await?;
    if agent.created {
        created(agent)
    } else {
        ok(agent)
    }
}

/// `POST /api/wakes {agentId, taskId | targetKind + targetId, toolCalls, runKey?, threadId?, subAgent?,
/// delegated?, format?, replyFormat?}`: `toolCalls` in any SDK dialect (`format`
/// forces one); the answer's `messages` are the replies in `replyFormat` or the
/// calls' dialect.
///
/// With `subAgent` (a name, or a path such as `researcher/helper`) or `delegated:
/// true` (the sub-agent is then named after `agentId`), the wake is a sub-agent's: its
/// queued calls are put to the server's session over the confirmation bus, and the
/// request waits (at most the bus's timeout per question) until a person answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WakeBody {
    agent_id: String,
    #[serde(flatten)]
    target: TargetParams,
    tool_calls: Value,
    run_key: Option<String>,
    thread_id: Option<String>,
    sub_agent: Option<String>,
    delegated: Option<bool>,
    format: Option<String>,
    reply_format: Option<String>,
}

impl WakeBody {
    /// The sub-agent's path below the bus root, when this is a delegated wake.
    fn sub_agent(&self) -> Result<Option<String>, ServerError> {
        match (self.delegated, &self.sub_agent) {
            (Some(false), Some(_)) => Err(ServerError::BadRequest(
                "subAgent names a sub-agent, but delegated is false".to_owned(),
            )),
            (_, Some(path)) => Ok(Some(path.clone())),
            (Some(true), None) => Ok(Some(self.agent_id.clone())),
            (Some(false) | None, None) => Ok(None),
        }
    }
}

pub(crate) async fn wake(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Body<WakeBody>,
) -> ApiResult {
    let Json(body) = body?;
    caller.may_act_for(&body.agent_id)?;
    let sub_agent = body.sub_agent()?;
    let parsed = tools::read_calls(&body.tool_calls, body.format.as_deref())?;
    let reply_format = tools::dialect(body.reply_format.as_deref(), "replyFormat")?;
    let run_key = body.run_key.unwrap_or_else(|| Uuid::new_v4().to_string());
    let calls = parsed.calls.clone();
    let target = body.target.target()?.ok_or_else(|| {
        ServerError::BadRequest("taskId (or targetKind and targetId) is required".to_owned())
    })?;
    let mut request = WakeRequest::new(body.agent_id, target, run_key, calls);
    if let Some(thread) = body.thread_id {
        request.thread_id = thread;
    }
    if let Some(path) = sub_agent {
        return delegated_wake(&state, &path, request, &parsed, reply_format).await;
    }
    let outcome = state.engine.wakes().wake(request, now()).await?;
    if let Some(set) = &outcome.change_set {
        state.events.publish(ServerEvent::created(set));
    }
    ok(tools::add_messages(
        wake_json(&outcome),
        &parsed,
        reply_format,
        &outcome,
    )?)
}

/// A sub-agent's wake: written like any other (so the change set is on screen while
/// its questions wait), then each queued call confirmed through a bus derived from the
/// server's at `path`. Without a bus the session is headless: every call that needs a
/// person is refused and stays pending.
/// Its `messages` answer with the wake's immediate replies, like `responses`.
async fn delegated_wake(
    state: &AppState,
    path: &str,
    request: WakeRequest,
    parsed: &ParsedCalls,
    reply_format: Option<Dialect>,
) -> ApiResult {
    let session = match &state.delegation {
        Some(delegation) => Session::Delegated(delegation.agent_bus(path)?),
        None => Session::Headless,
    };
    let scheduler = Scheduler::new(state.engine.clone(), session);
    let agent_path = scheduler.agent_path(&request.agent_id).to_owned();
    let now = now();
    let wake = state.engine.wakes().wake(request, now).await?;
    let mut calls = Vec::new();
    if let Some(set) = &wake.change_set {
        state.events.publish(ServerEvent::created(set));
        // Nothing cancels the token: a client that goes away drops this future, and
        // the bus withdraws the open question.
        calls = scheduler
            .confirm_pending(set, &CancellationToken::new(), now)
            .await?;
        publish_update(state, set.id);
    }
    let scheduled = ScheduledWake { wake, calls };
    let body = scheduled_wake_json(&scheduled, &agent_path);
    ok(tools::add_messages(
        body,
        parsed,
        reply_format,
        &scheduled.wake,
    )?)
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

/// `GET /api/change-sets?taskId=|targetKind=&targetId=&agentId=&status=`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetsQuery {
    #[serde(flatten)]
    target: TargetParams,
    agent_id: Option<String>,
    status: Option<String>,
}

pub(crate) async fn list_change_sets(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<SetsQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let filter = change_sets::PendingFilter {
        target: query.target.target()?,
        agent_id: caller.scope_agent(query.agent_id)?,
        limit: None,
    };
    let status = match query.status.as_deref().map(str::trim) {
        None | Some("" | "open") => None,
        Some(text) => Some(text.parse::<ChangeSetStatus>().map_err(|_| {
            ServerError::BadRequest(format!(
                "invalid status {text:?}: expected open, pending, partiallyResolved, resolved or expired"
            ))
        })?),
    };
    let mut conn = state.connection().await?;
    let sets: Vec<ChangeSet> = match status {
        None => change_sets::pending(&mut conn, &filter).await?,
        Some(status) => change_sets::with_status(&mut conn, status, &filter).await?,
    };
    let mut decided = Vec::with_capacity(sets.len());
    for set in &sets {
        decided.push(decisions::for_change_set(&mut conn, set.id).await?);
    }
    let views: Vec<SetView<'_>> = sets
        .iter()
        .zip(&decided)
        .map(|(set, decided)| SetView::of(set).with_reasons(decided))
        .collect();
    ok(views)
}

/// `GET /api/change-sets/{id}`.
pub(crate) async fn show_change_set(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let id = parse_set_id(&id)?;
    let mut conn = state.connection().await?;
    let (set, decided) = load_with_decisions(&mut conn, id).await?;
    // Another agent's set is not this agent's business, not even that it exists.
    if caller.confined_to().is_some_and(|own| own != set.agent_id) {
        return Err(ServerError::NotFound(format!("no change set {id}")));
    }
    ok(SetView::of(&set).with_reasons(&decided))
}

type ItemPath = Result<Path<(String, String)>, PathRejection>;

fn item_path(path: ItemPath) -> Result<(Uuid, usize), ServerError> {
    let Path((set, index)) = path?;
    Ok((parse_set_id(&set)?, parse_index(&index)?))
}

/// `POST /api/change-sets/{id}/items/{index}/confirm`.
pub(crate) async fn confirm_item(State(state): State<AppState>, path: ItemPath) -> ApiResult {
    let (set, index) = item_path(path)?;
    let outcome = state
        .engine
        .confirmations()
        .confirm_item(set, index, now())
        .await?;
    publish_update(&state, set);
    ok(confirmed_json(&outcome))
}

/// `{reason?}` of a rejection or dismissal.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReasonBody {
    reason: Option<String>,
}

/// `POST /api/change-sets/{id}/items/{index}/reject {reason}`.
pub(crate) async fn reject_item(
    State(state): State<AppState>,
    path: ItemPath,
    body: Body<ReasonBody>,
) -> ApiResult {
    let (set, index) = item_path(path)?;
    let Json(body) = body?;
    let decision = state
        .engine
        .confirmations()
        .reject_item(set, index, body.reason, now())
        .await?;
    publish_update(&state, set);
    ok(decision)
}

/// `{args}` of an edit.
#[derive(Debug, Deserialize)]
pub(crate) struct EditBody {
    args: Value,
}

/// `POST /api/change-sets/{id}/items/{index}/edit {args}`.
pub(crate) async fn edit_item(
    State(state): State<AppState>,
    path: ItemPath,
    body: Body<EditBody>,
) -> ApiResult {
    let (set, index) = item_path(path)?;
    let Json(body) = body?;
    if !body.args.is_object() {
        return Err(ServerError::BadRequest(
            "args must be a JSON object".to_owned(),
        ));
    }
    let outcome = state
        .engine
        .confirmations()
        .edit_and_confirm(set, index, body.args, now())
        .await?;
    publish_update(&state, set);
    ok(confirmed_json(&outcome))
}

/// `POST /api/change-sets/{id}/items/{index}/defer`.
pub(crate) async fn defer_item(State(state): State<AppState>, path: ItemPath) -> ApiResult {
    let (set, index) = item_path(path)?;
    let decision = state
        .engine
        .confirmations()
        .defer_item(set, index, now())
        .await?;
    publish_update(&state, set);
    ok(decision)
}

/// `POST /api/change-sets/{id}/confirm-all`.
pub(crate) async fn confirm_all(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let set = parse_set_id(&id)?;
    let result = state.engine.confirmations().confirm_all(set, now()).await?;
    publish_update(&state, set);
    ok(confirm_all_json(&result))
}

/// `POST /api/change-sets/{id}/dismiss {reason}`.
pub(crate) async fn dismiss(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Body<ReasonBody>,
) -> ApiResult {
    let Path(id) = id?;
    let set = parse_set_id(&id)?;
    let Json(body) = body?;
    let decisions = state
        .engine
        .confirmations()
        .dismiss(set, body.reason, now())
        .await?;
    publish_update(&state, set);
    ok(decisions)
}

/// `?agentId=&taskId=&limit=` of the decision routes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecisionsQuery {
    agent_id: Option<String>,
    #[serde(flatten)]
    target: TargetParams,
    limit: Option<String>,
}

impl DecisionsQuery {
    /// The agent (required, except that an agent token defaults to its own; checked
    /// against the token) and the limit (default 20).
    fn agent_and_limit(&self, caller: &Principal) -> Result<(String, u32), ServerError> {
        let asked = self
            .agent_id
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned);
        let agent = caller
            .scope_agent(asked)?
            .ok_or_else(|| ServerError::BadRequest("agentId is required".to_owned()))?;
        let limit = parse_limit(self.limit.as_deref(), DEFAULT_DECISIONS)?;
        Ok((agent, limit))
    }
}

/// `GET /api/decisions?agentId=&taskId=&limit=`: newest first.
pub(crate) async fn list_decisions(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<DecisionsQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let (agent, limit) = query.agent_and_limit(&caller)?;
    let mut conn = state.connection().await?;
    let target = query.target.target()?;
    let list = decisions::recent(&mut conn, &agent, target.as_ref(), limit).await?;
    ok(list)
}

/// `GET /api/history?agentId=&taskId=`: the prompt section as `text/plain` (empty when
/// there are no decisions yet).
pub(crate) async fn history(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<DecisionsQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let (agent, limit) = query.agent_and_limit(&caller)?;
    let target = query.target.target()?;
    let section = state
        .engine
        .confirmations()
        .history(&agent, target.as_ref(), limit)
        .await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        section.unwrap_or_default(),
    )
        .into_response())
}

/// `?taskId=&limit=` of the audit route.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditQuery {
    #[serde(flatten)]
    target: TargetParams,
    limit: Option<String>,
}

/// `GET /api/audit?taskId=`: the audit trail, oldest first (the newest `limit`).
pub(crate) async fn audit_trail(
    State(state): State<AppState>,
    query: Params<AuditQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let limit = parse_limit(query.limit.as_deref(), MAX_LIST)?;
    let filter = match query.target.target()? {
        Some(target) => audit::AuditFilter::Target(target),
        None => audit::AuditFilter::All,
    };
    let mut conn = state.connection().await?;
    ok(audit::list(&mut conn, &filter, limit).await?)
}

/// `GET /api/events`: server-sent events.
pub(crate) async fn events(State(state): State<AppState>) -> Response {
    state.events.response().into_response()
}

/// Any other `/api` path.
pub(crate) async fn not_found() -> ServerError {
    ServerError::NotFound("no such API route".to_owned())
}

/// `{"status": "ok", "role", "agentId"}`, for checking a token and learning what it
/// may do (`GET /api/session`).
pub(crate) async fn session(Extension(caller): Extension<Principal>) -> Response {
    Json(json!({
        "status": "ok",
        "role": caller.role,
        "agentId": caller.agent_id,
    }))
    .into_response()
}

/// The clock of a request.
fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}
