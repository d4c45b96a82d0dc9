//! `/api/jobs`: the execution ledger (jobs of confirmed items whose tool's effect lies
//! outside the database) and a person's answers to those that need one; and the
//! executor loop that runs the server's own host's jobs while it serves.

use crate::api::{ApiResult, Body, now, ok, publish_update};
use crate::events::EventBus;
use crate::{AppState, ServerError};
use assent_confirm::records::Job;
use assent_confirm::{Engine, JobRun, Resolution};
use assent_domain::{OffsetDateTime, Uuid};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

fn parse_job_id(text: &str) -> Result<Uuid, ServerError> {
    Uuid::parse_str(text.trim())
        .map_err(|e| ServerError::BadRequest(format!("invalid job id {text:?}: {e}")))
}

/// `GET /api/jobs`: every job but retracted ones, oldest first.
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult {
    let list = state.engine.list_jobs(false).await?;
    ok(list.iter().map(Job::to_json).collect::<Vec<Value>>())
}

/// The body of `POST /api/jobs/{id}/resolve`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResolveBody {
    /// `happened` or `rerun`.
    resolution: String,
}

fn settled(state: &AppState, job: &Job) -> ApiResult {
    publish_update(state, job.change_set_id);
    ok(job.to_json())
}

/// `POST /api/jobs/{id}/resolve {"resolution": "happened"|"rerun"}`: settles a job in
/// doubt (409 when it is not in doubt).
pub(crate) async fn resolve(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Body<ResolveBody>,
) -> ApiResult {
    let Path(id) = id?;
    let id = parse_job_id(&id)?;
    let axum::Json(body) = body?;
    let resolution = match body.resolution.trim() {
        "happened" => Resolution::Happened,
        "rerun" => Resolution::Rerun,
        other => {
            return Err(ServerError::BadRequest(format!(
                "invalid resolution {other:?}: expected happened or rerun"
            )));
        }
    };
    let job = state.engine.resolve_job(id, resolution, now()).await?;
    settled(&state, &job)
}

/// `POST /api/jobs/{id}/retry`: runs a failed job again (409 when it has not failed).
pub(crate) async fn retry(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let job = state.engine.retry_job(parse_job_id(&id)?, now()).await?;
    settled(&state, &job)
}

/// `POST /api/jobs/{id}/retract`: withdraws a failed job (409 when it has not failed).
pub(crate) async fn retract(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let job = state.engine.retract_job(parse_job_id(&id)?, now()).await?;
    settled(&state, &job)
}

/// `POST /api/jobs/{id}/cancel`: takes back a confirmation still in its hold window
/// (the item ends rejected; 409 once the job started or finished).
pub(crate) async fn cancel(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let Path(id) = id?;
    let job = state.engine.cancel_job(parse_job_id(&id)?, now()).await?;
    settled(&state, &job)
}

/// Runs the due jobs of the engine's host every `interval` until `events` closes.
/// Failures are logged and retried at the next poll.
pub(crate) async fn execute(engine: Engine, events: EventBus, interval: Duration) {
    let closed = events.closed();
    let mut closed = std::pin::pin!(closed);
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = &mut closed => return,
        }
        match engine.run_due_jobs(OffsetDateTime::now_utc()).await {
            Ok(run) if run != JobRun::default() => tracing::info!(?run, "jobs run"),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "running due jobs failed"),
        }
    }
}
