//! `POST /api/wakes`: an agent's tool calls, in any SDK's dialect, planned and
//! persisted; a sub-agent's wake is put to the server's session over the bus.

use crate::api::{ApiResult, Body, TargetParams, now, ok, publish_update};
use crate::auth::Principal;
use crate::events::ServerEvent;
use crate::shapes::{scheduled_wake_json, wake_json};
use crate::tools;
use crate::{AppState, ServerError};
use assent_changeset::{Dialect, ParsedCalls};
use assent_confirm::{CancellationToken, ScheduledWake, Scheduler, Session, WakeRequest};
use assent_domain::Uuid;
use axum::Json;
use axum::extract::{Extension, State};
use serde::Deserialize;
use serde_json::value::RawValue;

/// `POST /api/wakes {agentId, taskId | targetKind + targetId, toolCalls, runKey?, threadId?, subAgent?,
/// delegated?, format?, replyFormat?}`: `toolCalls` in any SDK dialect (`format`
/// forces one); the answer's `messages` are the replies in `replyFormat` or the
/// calls' dialect. `toolCalls` is kept as its JSON text, so that an MCP request id
/// (`18446744073709551616000`, `1e3`) is answered token for token.
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
    tool_calls: Box<RawValue>,
    run_key: Option<String>,
    thread_id: Option<String>,
    sub_agent: Option<String>,
    delegated: Option<bool>,
    format: Option<String>,
    reply_format: Option<String>,
    /// `"client"`: the client runs the calls itself (`calls.rs`).
    executed_by: Option<String>,
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
    if body.executed_by.is_some() {
        crate::calls::check_executed_by(body.executed_by.as_deref())?;
        if sub_agent.is_some() {
            return Err(ServerError::BadRequest(
                "a client-executed wake cannot be a sub-agent's".to_owned(),
            ));
        }
        let agent = body.agent_id.trim();
        return crate::calls::client_wake(&state, agent, &body.target, &parsed, reply_format).await;
    }
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
    for set in &outcome.change_sets {
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
    for set in &wake.change_sets {
        state.events.publish(ServerEvent::created(set));
        // Nothing cancels the token: a client that goes away drops this future, and
        // the bus withdraws the open question.
        calls.extend(
            scheduler
                .confirm_pending(set, &CancellationToken::new(), now)
                .await?,
        );
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
