//! The SDK dialects at the API's edge: `GET /api/tools?agentId=&format=` (the tools an
//! agent may call, as an SDK's `tools` parameter takes them), and the reading and
//! answering of `POST /api/wakes`' calls in the dialect they came in.

use crate::auth::Principal;
use crate::shapes::WakeWithMessages;
use crate::{AppState, ServerError};
use assent_changeset::{Dialect, ParsedCalls, parse_calls_str, tool_definitions};
use assent_confirm::WakeOutcome;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// `GET /api/tools?agentId=&format=`; `format` defaults to `openai`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolsQuery {
    agent_id: Option<String>,
    format: Option<String>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Result<Query<ToolsQuery>, QueryRejection>,
) -> Result<Response, ServerError> {
    let Query(query) = query?;
    let asked = query.agent_id.filter(|id| !id.trim().is_empty());
    let agent_id = caller
        .scope_agent(asked)?
        .ok_or_else(|| ServerError::BadRequest("agentId is required".to_owned()))?;
    let format = dialect(query.format.as_deref(), "format")?.unwrap_or(Dialect::OpenAi);
    let policy = state
        .engine
        .policy_in_force(agent_id.trim(), crate::api::now())
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("no agent {agent_id:?}")))?;
    let definitions = tool_definitions(state.engine.registry(), &policy, format)
        .map_err(|e| ServerError::BadRequest(format!("format: {e}")))?;
    Ok(Json(definitions).into_response())
}

/// The dialect named by a request's `field`, if it names one.
pub(crate) fn dialect(name: Option<&str>, field: &str) -> Result<Option<Dialect>, ServerError> {
    name.map(|name| {
        name.parse()
            .map_err(|e| ServerError::BadRequest(format!("{field}: {e}")))
    })
    .transpose()
}

/// A wake's `toolCalls` read in `format` (or the dialect their shape shows) from their
/// JSON text, so that an MCP request id is answered exactly as sent.
pub(crate) fn read_calls(
    tool_calls: &RawValue,
    format: Option<&str>,
) -> Result<ParsedCalls, ServerError> {
    let format = dialect(format, "format")?;
    parse_calls_str(tool_calls.get(), format)
        .map_err(|e| ServerError::BadRequest(format!("toolCalls: {e}")))
}

/// `body` (a wake's answer) with `messages`: the replies in `reply_format`, or in the
/// dialect the calls came in, each id as its call sent it.
pub(crate) fn add_messages(
    body: Value,
    parsed: &ParsedCalls,
    reply_format: Option<Dialect>,
    outcome: &WakeOutcome,
) -> Result<WakeWithMessages, ServerError> {
    let format = reply_format.unwrap_or(parsed.dialect);
    let messages = crate::shapes::wake_messages(parsed, format, outcome).map_err(|e| {
        ServerError::Internal(format!("the wake's replies do not answer its calls: {e}"))
    })?;
    Ok(WakeWithMessages::new(body, messages))
}
