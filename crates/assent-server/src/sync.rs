//! Device sync over HTTP, the peer side of `assent sync --peer`: `POST /api/sync` merges
//! the caller's batch and answers with this device's own, so one round trip exchanges
//! both ways; `GET /api/sync/host`, `GET /api/sync/peers` and `GET /api/conflicts` show
//! what `assent sync host`, `assent sync peers` and `assent conflicts` show.
//!
//! A batch carries a device's whole synced state, so `POST /api/sync` has its own body
//! limit ([`DEFAULT_SYNC_BODY_LIMIT`], the size `assent sync import` reads from a file)
//! instead of the API's 4 MiB.

use crate::{AppState, ServerError};
use assent_confirm::ConfirmError;
use assent_confirm::admin::ImportReport;
use assent_domain::{OffsetDateTime, Uuid};
use assent_store::StoreError;
use assent_sync::{SyncBatch, SyncError};
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The largest body `POST /api/sync` accepts (256 MiB); larger ones get 413.
pub const DEFAULT_SYNC_BODY_LIMIT: usize = 256 * 1024 * 1024;

/// The answer to `POST /api/sync`: what this device merged of the caller's batch, and
/// this device's own batch (taken after that merge) for the caller to merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncExchange {
    /// What merging the caller's batch did here (`replayed` when it had been merged
    /// before).
    pub report: ImportReport,
    /// This device's state, for the caller.
    pub batch: SyncBatch,
}

/// `POST /api/sync` with a [`SyncBatch`] → [`SyncExchange`]. The merge and the export
/// run in one write transaction: a refused batch (400, or 409 when it claims this
/// device's own host id) changes nothing and exports nothing.
#[tracing::instrument(skip_all, fields(batch, from))]
pub(crate) async fn exchange(
    State(state): State<AppState>,
    body: Result<Json<SyncBatch>, JsonRejection>,
) -> Result<Response, ServerError> {
    let Json(batch) = body?;
    let span = tracing::Span::current();
    span.record("batch", tracing::field::display(batch.batch_id));
    span.record("from", batch.from_host.as_str());
    let now = OffsetDateTime::now_utc();
    // A batch claiming this device's own host id is refused before the write lock (a
    // device pointed at itself must not wait on its own lock); any other refused batch
    // is recorded in the imports' log by the engine.
    let (report, answer) = state
        .engine
        .admin()
        .exchange_sync_batch(&batch, Uuid::new_v4(), now)
        .await
        .map_err(|error| match error {
            ConfirmError::Store(error) => refused(error),
            other => ServerError::Confirm(other),
        })?;
    tracing::info!(
        replayed = report.replayed,
        conflicts = report.conflicts.len(),
        answer = %answer.batch_id,
        "sync exchange done"
    );
    Ok(Json(SyncExchange {
        report,
        batch: answer,
    })
    .into_response())
}

/// An import's failure as the caller's fault where the batch is to blame: a batch that
/// cannot be merged (400, or 409 for this device's own host id) or a host entity the
/// host cannot write (400); anything else stays an internal error.
fn refused(error: StoreError) -> ServerError {
    match error {
        StoreError::Sync(error @ SyncError::FromThisHost { .. }) => {
            ServerError::Conflict(error.to_string())
        }
        StoreError::Sync(error) => ServerError::BadRequest(error.to_string()),
        StoreError::HostEntity(problem) => {
            ServerError::BadRequest(format!("sync batch has an invalid entity: {problem}"))
        }
        other => ServerError::Store(other),
    }
}

/// `GET /api/sync/host`: `{hostId}`, as `assent sync host --json` prints it.
pub(crate) async fn host(State(state): State<AppState>) -> Response {
    Json(json!({ "hostId": state.engine.store().device_id() })).into_response()
}

/// `GET /api/sync/peers`: the devices merged from, as `assent sync peers --json`.
pub(crate) async fn peers(State(state): State<AppState>) -> Result<Response, ServerError> {
    Ok(Json(state.engine.admin().sync_peers().await?).into_response())
}

/// `GET /api/conflicts`: decisions that lost to an earlier one on another device, as
/// `assent conflicts --json`.
pub(crate) async fn conflicts(State(state): State<AppState>) -> Result<Response, ServerError> {
    Ok(Json(state.engine.admin().sync_conflicts().await?).into_response())
}
