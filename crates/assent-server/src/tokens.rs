//! `/api/tokens`: admins make, list and revoke the API's tokens (the same as `assent
//! tokens`). A secret is in the answer that made it, and nowhere else ever after.

use crate::{AppState, ServerError};
use assent_confirm::admin::Role;
use assent_domain::OffsetDateTime;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

/// `POST /api/tokens {role, agentId?, person?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NewToken {
    role: String,
    agent_id: Option<String>,
    /// The person a reviewer or admin token is issued to (who decides through it).
    person: Option<String>,
}

/// `201 {id, role, agentId, person, createdAt, revokedAt, secret}`.
pub(crate) async fn add(
    State(state): State<AppState>,
    body: Result<Json<NewToken>, JsonRejection>,
) -> Result<Response, ServerError> {
    let Json(body) = body?;
    let role: Role = body.role.parse()?;
    let issued = state
        .engine
        .admin()
        .issue_named_token(
            role,
            body.agent_id.as_deref(),
            body.person.as_deref(),
            OffsetDateTime::now_utc(),
        )
        .await?;
    tracing::info!(token = %issued.token.id, role = %role, "token issued");
    let mut view = serde_json::to_value(&issued.token).unwrap_or_default();
    view["secret"] = json!(issued.secret);
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `GET /api/tokens`: every token, never a secret.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Response, ServerError> {
    Ok(Json(state.engine.admin().tokens().await?).into_response())
}

/// `POST /api/tokens/{id}/revoke`.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ServerError> {
    let Path(id) = id?;
    let revoked = state
        .engine
        .admin()
        .revoke_token(&id, OffsetDateTime::now_utc())
        .await?;
    match revoked {
        Some(token) => Ok(Json(token).into_response()),
        None => Err(ServerError::NotFound(format!("no token {id:?}"))),
    }
}
