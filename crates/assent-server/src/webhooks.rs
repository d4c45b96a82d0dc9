//! Webhook subscriptions over HTTP, the API twin of `assent webhooks`:
//! `GET /api/webhooks`, `POST /api/webhooks` (the only answer that carries the signing
//! secret), `DELETE /api/webhooks/{id}`, `POST /api/webhooks/{id}/test`,
//! `GET /api/webhooks/deliveries?failed=&limit=` and
//! `POST /api/webhooks/deliveries/{id}/redeliver`. [`routes`] is nested under `/api`
//! behind the token like every other route.
//!
//! It also writes `confirmation.requested` events: a sub-agent's question exists only
//! on this server's bus, so the forwarder hands each one to [`confirmation_requested`].

use crate::{AppState, ServerError};
use assent_confirm::admin::{NewEvent, NewSubscription, webhook_event};
use assent_confirm::{ConfirmationRequest, Engine};
use assent_domain::{OffsetDateTime, Uuid};
use assent_webhooks::{
    Format, Sender, SenderConfig, WebhookError, generate_secret, validate_events, validate_url,
};
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

/// The `/webhooks` routes, to nest under `/api`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/webhooks", get(list).post(add))
        .route("/webhooks/deliveries", get(deliveries))
        .route("/webhooks/deliveries/{id}/redeliver", post(redeliver))
        .route("/webhooks/{id}", delete(remove))
        .route("/webhooks/{id}/test", post(test))
}

fn refused(error: WebhookError) -> ServerError {
    match error {
        WebhookError::Store(error) => ServerError::Store(error),
        WebhookError::NoSubscription(id) => {
            ServerError::NotFound(format!("no webhook subscription {id}"))
        }
        WebhookError::Client(reason) => ServerError::Token(reason),
        other => ServerError::BadRequest(other.to_string()),
    }
}

fn subscription_id(path: Result<Path<String>, PathRejection>) -> Result<Uuid, ServerError> {
    let Path(text) = path.map_err(|e| ServerError::BadRequest(e.body_text()))?;
    Uuid::parse_str(&text).map_err(|e| {
        ServerError::BadRequest(format!("invalid webhook subscription id {text:?}: {e}"))
    })
}

/// Every subscription, without secrets; a Slack URL (itself a secret) comes masked from
/// the store, under the same `url` field.
async fn list(State(state): State<AppState>) -> Result<Response, ServerError> {
    Ok(Json(state.engine.admin().webhook_subscriptions().await?).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AddBody {
    url: String,
    #[serde(default)]
    events: Vec<String>,
    format: Option<String>,
    agent_id: Option<String>,
    #[serde(default)]
    allow_http: bool,
}

async fn add(
    State(state): State<AppState>,
    body: Result<Json<AddBody>, JsonRejection>,
) -> Result<Response, ServerError> {
    let Json(body) = body.map_err(|e| ServerError::BadRequest(e.body_text()))?;
    let url = validate_url(&body.url, body.allow_http).map_err(refused)?;
    let events = validate_events(&body.events).map_err(refused)?;
    let format = Format::parse(body.format.as_deref().unwrap_or("standard")).map_err(refused)?;
    let secret = generate_secret();
    let new = NewSubscription {
        url: url.to_string(),
        events,
        format: format.as_str().to_owned(),
        agent_id: body
            .agent_id
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty()),
        secret: secret.clone(),
    };
    let added = state
        .engine
        .admin()
        .add_webhook_subscription(&new, OffsetDateTime::now_utc())
        .await?;
    let answer = json!({
        "id": added.id,
        "url": added.url,
        "events": added.events,
        "format": added.format,
        "secret": secret,
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

async fn remove(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ServerError> {
    let id = subscription_id(path)?;
    let removed = state.engine.admin().remove_webhook_subscription(id).await?;
    if !removed {
        return Err(ServerError::NotFound(format!(
            "no webhook subscription {id}"
        )));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn test(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ServerError> {
    let id = subscription_id(path)?;
    let sender =
        Sender::new(state.engine.store().clone(), SenderConfig::default()).map_err(refused)?;
    let result = sender.test(id).await.map_err(refused)?;
    Ok(
        Json(json!({"id": id, "ok": result.ok, "status": result.status, "detail": result.detail}))
            .into_response(),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    #[serde(default)]
    failed: bool,
    limit: Option<u32>,
}

async fn deliveries(
    State(state): State<AppState>,
    query: Result<Query<DeliveriesQuery>, QueryRejection>,
) -> Result<Response, ServerError> {
    let Query(query) = query.map_err(|e| ServerError::BadRequest(e.body_text()))?;
    let rows = state
        .engine
        .admin()
        .webhook_deliveries(query.failed, query.limit.unwrap_or(100).min(1000))
        .await?;
    Ok(Json(rows).into_response())
}

async fn redeliver(
    State(state): State<AppState>,
    path: Result<Path<i64>, PathRejection>,
) -> Result<Response, ServerError> {
    let Path(id) = path.map_err(|e| ServerError::BadRequest(e.body_text()))?;
    if !state
        .engine
        .admin()
        .redeliver_webhook(id, OffsetDateTime::now_utc())
        .await?
    {
        return Err(ServerError::NotFound(format!("no webhook delivery {id}")));
    }
    Ok(Json(json!({"id": id, "status": "pending"})).into_response())
}

/// Writes a `confirmation.requested` event for `request` (for the subscriptions that
/// The `target` of a `confirmation.requested` event, as a change set event names it:
/// kind and id, plus `taskId` for the journal's tasks.
fn confirmation_target(details: &Value) -> Value {
    let mut target = json!({"kind": details["targetKind"], "id": details["targetId"]});
    if !details["taskId"].is_null() {
        target["taskId"] = details["taskId"].clone();
    }
    target
}

/// want one), in a task of its own so the forwarder never waits on the database.
pub(crate) fn confirmation_requested(engine: &Engine, request: &ConfirmationRequest) {
    let engine = engine.clone();
    let details = &request.details;
    let agent_id = details["agentId"].as_str().map(str::to_owned);
    let change_set_id = details["changeSetId"]
        .as_str()
        .and_then(|id| Uuid::parse_str(id).ok());
    let data = json!({
        "correlationId": request.correlation_id,
        "agentPath": request.agent_path,
        "agentId": agent_id,
        "toolName": request.tool_call.name,
        "args": request.tool_call.args,
        "summary": request.summary,
        "changeSetId": change_set_id,
        "itemIndex": details["itemIndex"],
        "target": confirmation_target(details),
    });
    tokio::spawn(async move {
        let new = NewEvent {
            event_type: webhook_event::CONFIRMATION_REQUESTED,
            agent_id: agent_id.as_deref(),
            change_set_id,
            data,
        };
        let written = engine
            .admin()
            .queue_webhook_event(new, OffsetDateTime::now_utc())
            .await;
        if let Err(error) = written {
            tracing::error!(%error, "writing the confirmation.requested webhook event failed");
        }
    });
}
