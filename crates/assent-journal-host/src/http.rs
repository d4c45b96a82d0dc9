//! The journal's own routes on the review server (feature `http`): `POST /api/tasks`
//! and `GET /api/tasks/{id}`. The server knows no host; whoever composes the journal
//! with it mounts these: `Server::with_routes(Role::Reviewer, routes())`.

use crate::{JournalError, NewTask, create_task, load_task};
use assent_confirm::Engine;
use assent_server::ServerError;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

/// The routes, relative to `/api`.
pub fn routes() -> Router<Engine> {
    Router::new()
        .route("/tasks", post(create))
        .route("/tasks/{id}", get(show))
}

/// `POST /api/tasks {title, category, status?, priority?, estimateMinutes?, dueDate?,
/// labels?, checklist?}`: 201 with the task.
async fn create(
    State(engine): State<Engine>,
    body: Result<Json<NewTask>, JsonRejection>,
) -> Result<Response, ServerError> {
    let Json(new) = body?;
    let store = engine.store();
    let id = engine.new_id().to_string();
    let mut tx = store.begin_write().await?;
    let task = create_task(tx.connection(), &id, &new, store.device_id(), engine.now())
        .await
        .map_err(server_error)?;
    tx.commit().await.map_err(ServerError::Store)?;
    Ok((StatusCode::CREATED, Json(task)).into_response())
}

/// `GET /api/tasks/{id}`.
async fn show(
    State(engine): State<Engine>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ServerError> {
    let Path(id) = id?;
    let mut conn = engine
        .store()
        .read_connection()
        .await
        .map_err(ServerError::Store)?;
    let task = load_task(&mut conn, id.trim())
        .await
        .map_err(server_error)?
        .ok_or_else(|| ServerError::NotFound(format!("no task {id:?}")))?;
    Ok(Json(task).into_response())
}

/// The server's answer to a journal error: the caller's fault where it is.
fn server_error(error: JournalError) -> ServerError {
    match error {
        JournalError::TaskNotFound(_) => ServerError::NotFound(error.to_string()),
        JournalError::TaskExists(_) => ServerError::Conflict(error.to_string()),
        JournalError::InvalidTask { .. } => ServerError::BadRequest(error.to_string()),
        JournalError::Store(error) => ServerError::Store(error),
        other => ServerError::Internal(other.to_string()),
    }
}
