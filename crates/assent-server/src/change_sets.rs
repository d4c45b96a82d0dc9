//! `/api/change-sets`: listing and showing sets, and a person's decisions on their
//! items (confirm, reject, edit, defer, confirm all, dismiss).

use crate::api::{
    ApiResult, Body, Params, TargetParams, now, ok, parse_index, parse_set_id, publish_update,
    resolve_set_id,
};
use crate::auth::Principal;
use crate::shapes::{SetView, confirm_all_json, confirmed_json, rejected_json};
use crate::{AppState, ServerError};
use assent_confirm::ConfirmError;
use assent_confirm::records::PendingFilter;
use assent_domain::{ChangeSetStatus, Uuid};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, Query, State};
use serde::Deserialize;
use serde_json::Value;

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
    let mut filter = PendingFilter::all();
    filter.target = query.target.target()?;
    filter.agent_id = caller.scope_agent(query.agent_id)?;
    let status = match query.status.as_deref().map(str::trim) {
        None | Some("" | "open") => None,
        Some(text) => Some(text.parse::<ChangeSetStatus>().map_err(|_| {
            ServerError::BadRequest(format!(
                "invalid status {text:?}: expected open, pending, partiallyResolved, resolved or expired"
            ))
        })?),
    };
    let records = state.engine.set_records(&filter, status).await?;
    let views: Vec<SetView<'_>> = records
        .iter()
        .map(|record| {
            SetView::of(&record.set)
                .with_reasons(&record.decisions)
                .with_jobs(&record.jobs)
                .with_changed_tools(&record.changed_tools)
                .with_undoable(|tool, args, before| reversible(&state, tool, args, before))
                .with_quorum(&record.quorum)
                .with_wait(record.waits_until)
        })
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
    // An agent names its sets by their whole ids: a prefix would tell it whether other
    // agents' sets begin so.
    let id = match caller.confined_to() {
        Some(_) => parse_set_id(&id)?,
        None => resolve_set_id(&state, &id).await?,
    };
    let detail = match state.engine.set_detail(id).await {
        Err(ConfirmError::ChangeSetNotFound(_)) => {
            return Err(ServerError::NotFound(format!("no change set {id}")));
        }
        read => read?,
    };
    let record = &detail.record;
    // Another agent's set is not this agent's business, not even that it exists.
    if caller
        .confined_to()
        .is_some_and(|own| own != record.set.agent_id)
    {
        return Err(ServerError::NotFound(format!("no change set {id}")));
    }
    let mut view = SetView::of(&record.set)
        .with_reasons(&record.decisions)
        .with_shadows(&record.decisions, &detail.shadows)
        .with_jobs(&record.jobs)
        .with_changed_tools(&record.changed_tools)
        .with_undoable(|tool, args, before| reversible(&state, tool, args, before))
        .with_quorum(&record.quorum)
        .with_wait(record.waits_until);
    with_agent_runs(&mut view, &record.jobs, &detail.agent_runs);
    ok(view)
}

/// Writes into `view` how each coding agent's call among `jobs` went, in the words of
/// a call, with what the agent reported it ran (`agent_runs`, its hook's after events):
/// each such item's `execution.outcome` ([`assent_confirm::records::Job::agent_outcome`]),
/// so no door shows "applied" for a call that only the agent ran, or did not.
pub fn with_agent_runs(
    view: &mut SetView<'_>,
    jobs: &[assent_confirm::records::Job],
    agent_runs: &[assent_tools::AuditRecord],
) {
    let reported = agent_runs
        .last()
        .and_then(|record| record.detail.as_deref());
    for job in jobs {
        let Some(outcome) = job.agent_outcome(reported) else {
            continue;
        };
        if let Some(execution) = view
            .items
            .get_mut(job.item_index)
            .and_then(|item| item.execution.as_mut())
        {
            execution["outcome"] = Value::String(outcome);
        }
    }
}

/// Whether this server's engine can reverse `tool(args)`, which replaced `before`
/// (`assent undo`; the result text is not known here, and no compensation of the
/// journal reads it).
fn reversible(state: &AppState, tool: &str, args: &Value, before: Option<&Value>) -> bool {
    state
        .engine
        .registry()
        .get(tool)
        .is_some_and(|spec| spec.compensate(args, before, "").is_some())
}

type ItemPath = Result<Path<(String, String)>, PathRejection>;

async fn item_path(state: &AppState, path: ItemPath) -> Result<(Uuid, usize), ServerError> {
    let Path((set, index)) = path?;
    let set = resolve_set_id(state, &set).await?;
    Ok((set, parse_index(&index)?))
}

/// `{revision?, forSession?, pattern?}` of a confirmation: the item revision the
/// person was shown, and "yes, for this session" with the pattern it covers (exactly
/// the item's arguments without one).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ConfirmBody {
    revision: Option<u32>,
    #[serde(default, rename = "forSession")]
    for_session: bool,
    pattern: Option<String>,
}

/// The body of a confirmation: none (as before revisions), or `{revision}`.
fn confirm_body(bytes: &[u8]) -> Result<ConfirmBody, ServerError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(ConfirmBody::default());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ServerError::BadRequest(format!(
            "invalid confirmation body: {e} (expected nothing, or {{\"revision\": N}})"
        ))
    })
}

/// The confirmations of `caller`, bound to the revision it was shown when it said.
fn confirmations_of(
    state: &AppState,
    caller: &Principal,
    revision: Option<u32>,
) -> assent_confirm::ConfirmationService {
    let service = caller.confirmations(&state.engine);
    match revision {
        Some(revision) => service.shown_revision(revision),
        None => service,
    }
}

/// `POST /api/change-sets/{id}/items/{index}/confirm {revision?, forSession?,
/// pattern?}`: 409 when the item's revision moved past the one named; with
/// `forSession`, the answer also grants the rest of the coding agent's session
/// (`sessionGrant` in the reply), 400 when it cannot (nothing changes then).
pub(crate) async fn confirm_item(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: ItemPath,
    body: axum::body::Bytes,
) -> ApiResult {
    let (set, index) = item_path(&state, path).await?;
    let body = confirm_body(&body)?;
    let service = confirmations_of(&state, &caller, body.revision);
    if body.for_session {
        let (outcome, grant) = service
            .confirm_for_session(
                assent_confirm::ItemRef::new(set, index),
                body.pattern.as_deref(),
                now(),
            )
            .await?;
        publish_update(&state, set);
        let mut shown = confirmed_json(&outcome);
        shown["sessionGrant"] = serde_json::json!(grant);
        return ok(shown);
    }
    if body.pattern.is_some() {
        return Err(ServerError::BadRequest(
            "\"pattern\" is for a session answer only: send it with \"forSession\": true"
                .to_owned(),
        ));
    }
    let outcome = service
        .confirm_item(assent_confirm::ItemRef::new(set, index), now())
        .await?;
    publish_update(&state, set);
    ok(confirmed_json(&outcome))
}

/// `{reason?}` of a rejection or dismissal.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReasonBody {
    reason: Option<String>,
}

/// `POST /api/change-sets/{id}/items/{index}/reject {reason}`: the decision, with
/// confirm's `decision` and `message` beside its fields.
pub(crate) async fn reject_item(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: ItemPath,
    body: Body<ReasonBody>,
) -> ApiResult {
    let (set, index) = item_path(&state, path).await?;
    let Json(body) = body?;
    let decision = state
        .engine
        .confirmations()
        .by(caller.identity())
        .reject_item(assent_confirm::ItemRef::new(set, index), body.reason, now())
        .await?;
    publish_update(&state, set);
    ok(rejected_json(&decision))
}

/// `{args, revision?}` of an edit.
#[derive(Debug, Deserialize)]
pub(crate) struct EditBody {
    args: Value,
    /// The item revision the person was shown.
    #[serde(default)]
    revision: Option<u32>,
}

/// `POST /api/change-sets/{id}/items/{index}/edit {args}`.
pub(crate) async fn edit_item(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: ItemPath,
    body: Body<EditBody>,
) -> ApiResult {
    let (set, index) = item_path(&state, path).await?;
    let Json(body) = body?;
    if !body.args.is_object() {
        return Err(ServerError::BadRequest(
            "args must be a JSON object".to_owned(),
        ));
    }
    let outcome = confirmations_of(&state, &caller, body.revision)
        .edit_and_confirm(assent_confirm::ItemRef::new(set, index), body.args, now())
        .await?;
    publish_update(&state, set);
    ok(confirmed_json(&outcome))
}

/// `POST /api/change-sets/{id}/items/{index}/defer`.
pub(crate) async fn defer_item(State(state): State<AppState>, path: ItemPath) -> ApiResult {
    let (set, index) = item_path(&state, path).await?;
    let decision = state
        .engine
        .confirmations()
        .defer_item(assent_confirm::ItemRef::new(set, index), now())
        .await?;
    publish_update(&state, set);
    ok(decision)
}

/// `POST /api/change-sets/{id}/items/{index}/undo`: proposes the reversal of an applied
/// item as a new change set (201, the set as `GET /api/change-sets/{id}` shows it,
/// with `undoes`); 409 when the item is not applied, 400 when its tool declares no
/// compensation.
pub(crate) async fn undo_item(State(state): State<AppState>, path: ItemPath) -> ApiResult {
    let (set, index) = item_path(&state, path).await?;
    let undo = state
        .engine
        .confirmations()
        .undo(assent_confirm::ItemRef::new(set, index), now())
        .await?;
    state.events.publish(crate::ServerEvent::created(&undo));
    let mut view = SetView::of(&undo);
    view.undoes = state.engine.undoes(undo.id).await?;
    crate::api::created(view)
}

/// `POST /api/change-sets/{id}/confirm-all`.
pub(crate) async fn confirm_all(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let set = resolve_set_id(&state, &id).await?;
    let confirmations = caller.confirmations(&state.engine);
    let result = confirmations.confirm_all(set, now()).await?;
    publish_update(&state, set);
    ok(confirm_all_json(&result))
}

/// `POST /api/change-sets/{id}/dismiss {reason}`.
pub(crate) async fn dismiss(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
    body: Body<ReasonBody>,
) -> ApiResult {
    let Path(id) = id?;
    let set = resolve_set_id(&state, &id).await?;
    let Json(body) = body?;
    let decisions = state
        .engine
        .confirmations()
        .by(caller.identity())
        .dismiss(set, body.reason, now())
        .await?;
    publish_update(&state, set);
    ok(decisions)
}
