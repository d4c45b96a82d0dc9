//! The server as the parent session of sub-agents: it holds the root
//! [`ConfirmationBus`], forwards its requests and resolutions as server-sent events,
//! lists what waits (`GET /api/confirmations`), answers (`POST
//! /api/confirmations/{correlationId}`), and derives the buses that delegated wakes
//! (`POST /api/wakes` with `subAgent`) ask through.

use crate::events::{EventBus, ServerEvent};
use crate::{AppState, ServerError};
use assent_confirm::{
    AgentBus, ConfirmError, ConfirmationBus, ConfirmationOutcome, ConfirmationRequest, Engine,
};
use assent_tools::ToolRegistry;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// The first segment of every delegated agent path on a server's bus.
pub const DEFAULT_BUS_ROOT: &str = "review";

/// How many answered correlation ids are remembered, so that a second answer is told
/// 409 (already answered) rather than 404 (unknown).
const REMEMBERED_ANSWERS: usize = 4096;

/// The server's side of the bus, shared by the handlers.
#[derive(Clone)]
pub(crate) struct Delegation {
    bus: ConfirmationBus,
    answered: Arc<Mutex<Answered>>,
}

/// Correlation ids answered through this server, oldest first, bounded.
#[derive(Default)]
struct Answered {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Answered {
    fn remember(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
        }
        while self.order.len() > REMEMBERED_ANSWERS {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }
}

impl Delegation {
    pub(crate) fn new(bus: ConfirmationBus) -> Self {
        Self {
            bus,
            answered: Arc::default(),
        }
    }

    /// The bus of the sub-agent at `path` below the root (`researcher` or
    /// `researcher/helper`): each segment derived in turn, so it is checked like any
    /// sub-agent name.
    pub(crate) fn agent_bus(&self, path: &str) -> Result<AgentBus, ServerError> {
        let mut segments = path.split('/');
        let first = segments.next().unwrap_or_default();
        let mut bus = self.bus.derive(first)?;
        for segment in segments {
            bus = bus.derive(segment)?;
        }
        Ok(bus)
    }

    /// Subscribes to the bus and publishes every request and resolution on `events`
    /// until the event bus closes. The subscription is dropped then, so the bus no
    /// longer counts the server as listening and every open wait ends fail-closed.
    pub(crate) fn forward(&self, events: EventBus, engine: Engine) -> JoinHandle<()> {
        // Both subscriptions are taken here, before the server accepts a request, so
        // that nothing asked once it runs goes unannounced.
        let mut resolutions = self.bus.resolutions();
        let mut requests = self.bus.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = events.closed() => break,
                    request = requests.recv() => match request {
                        Some(request) => {
                            tracing::info!(agent = %request.agent_path, tool = %request.tool_call.name, "delegated confirmation requested");
                            events.publish(ServerEvent::confirmation_requested(&request));
                            crate::webhooks::confirmation_requested(&engine, &request);
                        }
                        None => break,
                    },
                    resolution = resolutions.recv() => match resolution {
                        Ok(resolution) => events.publish(ServerEvent::confirmation_resolved(&resolution)),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            // The pending list stays right; only screens may show a
                            // stale request until they reload or answer it (404).
                            tracing::warn!(missed, "confirmation resolutions missed");
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                }
            }
            drop(requests);
            tracing::info!("stopped listening to delegated confirmations");
        })
    }

    /// The waiting request `id`, if any.
    fn waiting(&self, id: &str) -> Option<ConfirmationRequest> {
        self.bus
            .pending()
            .into_iter()
            .find(|request| request.correlation_id.as_deref() == Some(id))
    }

    /// Answers `id`. Refused: unknown or stale ids (404, `UnknownCorrelationId`) and
    /// ids this server already answered (409).
    fn answer(&self, id: &str, outcome: ConfirmationOutcome) -> Result<(), ServerError> {
        // Held across the answer and its record, so that of two racing answers the
        // loser always finds the winner's record.
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        match self.bus.respond(id, outcome) {
            Ok(()) => {
                answered.remember(id.to_owned());
                Ok(())
            }
            Err(ConfirmError::UnknownCorrelationId(_)) if answered.ids.contains(id) => {
                Err(already_answered(id))
            }
            Err(error) => Err(error.into()),
        }
    }

    fn was_answered(&self, id: &str) -> bool {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ids
            .contains(id)
    }
}

fn already_answered(id: &str) -> ServerError {
    ServerError::Conflict(format!(
        "confirmation request {id} was already answered; the first answer stands"
    ))
}

/// `GET /api/confirmations`: the requests waiting for an answer (an empty list when the
/// server has no bus).
pub(crate) async fn list(State(state): State<AppState>) -> Response {
    let pending = state
        .delegation
        .as_ref()
        .map(|delegation| delegation.bus.pending())
        .unwrap_or_default();
    Json(pending).into_response()
}

/// `POST /api/confirmations/{correlationId} {outcome, correlationId?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnswerBody {
    correlation_id: Option<String>,
    outcome: ConfirmationOutcome,
}

pub(crate) async fn answer(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> Result<Response, ServerError> {
    let Path(id) = id?;
    let Json(body) = body?;
    if let Some(claimed) = &body.correlation_id
        && *claimed != id
    {
        return Err(ServerError::BadRequest(format!(
            "correlationId {claimed:?} in the body does not match {id:?} in the path"
        )));
    }
    let Some(delegation) = &state.delegation else {
        return Err(ConfirmError::UnknownCorrelationId(id).into());
    };
    let Some(request) = delegation.waiting(&id) else {
        if delegation.was_answered(&id) {
            return Err(already_answered(&id));
        }
        return Err(ConfirmError::UnknownCorrelationId(id).into());
    };
    let outcome = checked_answer(body.outcome, &request, state.engine.registry())?;
    delegation.answer(&id, outcome.clone())?;
    Ok(Json(json!({
        "correlationId": id,
        "agentPath": request.agent_path,
        "toolName": request.tool_call.name,
        "outcome": outcome,
        "status": "answered",
    }))
    .into_response())
}

/// The outcome a person may give to `request`, or why not: only the four answers
/// (proceedOnce, proceedAlways, proceedWithEdits, reject); edits are checked against
/// the tool's schema here, so a bad edit is refused while the request still waits
/// instead of costing the sub-agent one of its prompts.
fn checked_answer(
    outcome: ConfirmationOutcome,
    request: &ConfirmationRequest,
    registry: &ToolRegistry,
) -> Result<ConfirmationOutcome, ServerError> {
    match outcome {
        ConfirmationOutcome::ProceedOnce | ConfirmationOutcome::ProceedAlways { .. } => Ok(outcome),
        ConfirmationOutcome::ProceedWithEdits { args } => {
            if !args.is_object() {
                return Err(ServerError::BadRequest(
                    "outcome.args must be a JSON object".to_owned(),
                ));
            }
            registry
                .validate_args(&request.tool_call.name, &args)
                .map_err(|error| ServerError::BadRequest(format!("outcome.args: {error}")))?;
            Ok(ConfirmationOutcome::ProceedWithEdits { args })
        }
        ConfirmationOutcome::Reject { reason } => Ok(ConfirmationOutcome::Reject {
            reason: assent_domain::clean_reason(reason)
                .map_err(|error| ServerError::BadRequest(format!("outcome.reason: {error}")))?,
        }),
        other @ (ConfirmationOutcome::Deferred { .. }
        | ConfirmationOutcome::Cancelled
        | ConfirmationOutcome::Unanswered { .. }) => Err(ServerError::BadRequest(format!(
            "outcome kind {:?} is not an answer; use proceedOnce, proceedAlways, proceedWithEdits or reject",
            other.kind()
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use assent_confirm::ToolCallRequest;
    use serde_json::json;

    fn priority_request() -> ConfirmationRequest {
        ConfirmationRequest::new(
            ToolCallRequest {
                name: "update_task_priority".into(),
                args: json!({"priority": "P0"}),
            },
            "Set priority to P0",
            json!({}),
        )
    }

    #[test]
    fn only_the_four_answers_pass_and_edits_must_fit_the_schema() {
        let registry = assent_journal::catalog();
        let request = priority_request();
        let check = |outcome| checked_answer(outcome, &request, &registry);
        assert!(check(ConfirmationOutcome::ProceedOnce).is_ok());
        assert!(check(ConfirmationOutcome::ProceedAlways { args_pattern: None }).is_ok());
        assert!(
            check(ConfirmationOutcome::ProceedWithEdits {
                args: json!({"priority": "P1"})
            })
            .is_ok()
        );
        for refused in [
            ConfirmationOutcome::ProceedWithEdits {
                args: json!({"priority": "urgent"}),
            },
            ConfirmationOutcome::ProceedWithEdits { args: json!("P1") },
            ConfirmationOutcome::Cancelled,
            ConfirmationOutcome::unanswered("made up"),
            ConfirmationOutcome::Deferred {
                change_set_id: uuid::Uuid::new_v4(),
            },
        ] {
            let error = check(refused.clone()).unwrap_err();
            assert!(matches!(error, ServerError::BadRequest(_)), "{refused:?}");
        }
        assert_eq!(
            check(ConfirmationOutcome::reject("  ")).unwrap(),
            ConfirmationOutcome::Reject { reason: None }
        );
    }

    #[test]
    fn answered_ids_are_remembered_up_to_a_bound() {
        let mut answered = Answered::default();
        for n in 0..REMEMBERED_ANSWERS + 2 {
            answered.remember(n.to_string());
        }
        answered.remember((REMEMBERED_ANSWERS + 1).to_string());
        assert_eq!(answered.ids.len(), REMEMBERED_ANSWERS);
        assert_eq!(answered.order.len(), REMEMBERED_ANSWERS);
        assert!(!answered.ids.contains("0") && !answered.ids.contains("1"));
        assert!(answered.ids.contains(&(REMEMBERED_ANSWERS + 1).to_string()));
    }
}
