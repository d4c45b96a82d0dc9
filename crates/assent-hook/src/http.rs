//! `POST /api/hooks/{kind}` (feature `http`): the same answer as `assent hook KIND`,
//! for Claude Code's `http` hooks and a team's shared server. Mounted by whoever
//! composes the server (`Server::with_routes(Role::Agent, routes())`), behind its token
//! check: an agent token answers for its own agent; a reviewer's or admin's names one
//! with `?agent=NAME`. Options as query parameters: `wait` (seconds), `onTimeout`
//! (`ask` | `deny`), `category`.
//!
//! A hook's HTTP error lets the call through in some agents (Claude Code's `http`
//! hooks continue on an error status unless told `"onFailure": "block"`), so every
//! refusal is answered 200 with a denial in the agent's dialect, never with an error
//! status: a malformed event or a failed decision here, and the refusals before the
//! handler (a missing or revoked token, a bad query, an unknown kind, a body too
//! large) through [`refused`], which whoever composes the server mounts with
//! `Server::with_refusals(PREFIX, refused)`.

use crate::{AgentKind, Answer, HookOptions, OnTimeout, Phase};
use assent_confirm::Engine;
use assent_server::ServerError;
use assent_server::auth::Principal;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use std::collections::HashMap;
use std::time::Duration;

/// The longest wait a request may ask for.
const MAX_WAIT_SECS: u64 = 86_400;

/// The paths of the routes, for `Server::with_refusals`.
pub const PREFIX: &str = "/api/hooks/";

/// The answer to a refusal of `POST /api/hooks/{kind}` (status `status`, message
/// `message`): 200 with a denial in `kind`'s dialect. For a kind Assent does not know,
/// a body that every agent's dialect reads as a denial: Claude Code's and VS Code's
/// `hookSpecificOutput.permissionDecision`, Copilot's top-level `permissionDecision`,
/// Cursor's `permission`, Gemini CLI's `decision` (`block`, which Claude Code's
/// top-level `decision` also reads as a block). Codex, whose answers must hold its
/// fields alone, has no `http` hooks.
pub fn refused(path: &str, status: StatusCode, message: &str) -> Response {
    let reason = format!(
        "Assent refused the hook's request ({status}: {message}), so the call did not run; this is the hook's setup, not a decision about the call (no rule or person refused it): tell the user, retrying will not help until it is fixed"
    );
    let kind = path
        .strip_prefix(PREFIX)
        .map(|rest| rest.split('/').next().unwrap_or_default())
        .and_then(|kind| kind.parse::<AgentKind>().ok());
    let body = match kind {
        Some(kind) => crate::refusal(kind, &reason).stdout,
        None => serde_json::json!({
            "decision": "block",
            "reason": reason,
            "permission": "deny",
            "user_message": reason,
            "agent_message": reason,
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            },
        })
        .to_string(),
    };
    tracing::warn!(%status, %message, "a hook's request refused: answered as a denial");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// The routes, relative to `/api`: the hook, and what the hooks' sessions did
/// (`GET /api/hook-sessions[?agent=A]`, `GET /api/hook-sessions/{session}[?agent=A]`,
/// read-only; an agent token reads its own agent's sessions alone).
pub fn routes() -> Router<Engine> {
    Router::new()
        .route("/hooks/{kind}", post(answer))
        .route("/hook-sessions", get(sessions))
        .route("/hook-sessions/{session}", get(session))
}

/// Why a read of the sessions failed, as the server answers it.
fn unexpected(error: crate::HookError) -> ServerError {
    match error {
        crate::HookError::Confirm(error) => ServerError::Confirm(error),
        crate::HookError::Store(error) => ServerError::Store(error),
        other => ServerError::Internal(other.to_string()),
    }
}

/// `GET /api/hook-sessions`: every session, newest first (`assent sessions --json`).
async fn sessions(
    State(engine): State<Engine>,
    Extension(caller): Extension<Principal>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ServerError> {
    let agent = caller.scope_agent(query.get("agent").cloned())?;
    let calls = crate::sessions::calls(&engine, agent.as_deref(), None)
        .await
        .map_err(unexpected)?;
    let list: Vec<serde_json::Value> = crate::sessions::summaries(&calls)
        .iter()
        .map(crate::sessions::SessionSummary::to_json)
        .collect();
    Ok(axum::Json(list).into_response())
}

/// `GET /api/hook-sessions/{session}`: every call of one session, oldest first
/// (`assent session show ID --json`); 404 when it has none.
async fn session(
    State(engine): State<Engine>,
    Extension(caller): Extension<Principal>,
    Path(session): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ServerError> {
    let agent = caller.scope_agent(query.get("agent").cloned())?;
    let calls = crate::sessions::calls(&engine, agent.as_deref(), Some(&session))
        .await
        .map_err(unexpected)?;
    if calls.is_empty() {
        return Err(ServerError::NotFound(format!(
            "no hook call of session {session:?} is recorded"
        )));
    }
    let list: Vec<serde_json::Value> = calls
        .iter()
        .map(crate::sessions::SessionCall::to_json)
        .collect();
    Ok(axum::Json(serde_json::json!({"session": session, "calls": list})).into_response())
}

async fn answer(
    State(engine): State<Engine>,
    Extension(caller): Extension<Principal>,
    Path(kind): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Result<Response, ServerError> {
    let started = tokio::time::Instant::now();
    let kind: AgentKind = kind
        .parse()
        .map_err(|e: crate::HookError| ServerError::NotFound(e.to_string()))?;
    let agent = match (query.get("agent"), caller.confined_to()) {
        (Some(asked), _) => {
            caller.may_act_for(asked)?;
            asked.trim().to_owned()
        }
        (None, Some(own)) => own.to_owned(),
        (None, None) => {
            return Err(ServerError::BadRequest(
                "name the agent whose rules decide: ?agent=NAME (an agent token names its own)"
                    .to_owned(),
            ));
        }
    };
    let wait = match query.get("wait") {
        None => crate::default_wait(kind),
        Some(text) => match text.parse::<u64>() {
            Ok(secs) if secs <= MAX_WAIT_SECS => Duration::from_secs(secs),
            _ => {
                return Err(ServerError::BadRequest(format!(
                    "wait {text:?} is not a number of seconds from 0 to {MAX_WAIT_SECS}"
                )));
            }
        },
    };
    let on_timeout = match query.get("onTimeout").map(String::as_str) {
        None | Some("ask") => OnTimeout::Ask,
        Some("deny") => OnTimeout::Deny,
        Some(other) => {
            return Err(ServerError::BadRequest(format!(
                "onTimeout {other:?} is neither ask nor deny"
            )));
        }
    };
    let options = HookOptions {
        kind,
        agent,
        category: query
            .get("category")
            .cloned()
            .unwrap_or_else(|| crate::DEFAULT_CATEGORY.to_owned()),
        wait,
        on_timeout,
        started,
    };
    let reply = match crate::parse(kind, &body) {
        Err(error) => crate::refusal(kind, &error.to_string()),
        Ok(event) => {
            let answered = match event.phase {
                Phase::After => crate::record_ran(engine.store(), &options, &event)
                    .await
                    .map(|()| Answer::Recorded),
                Phase::Before | Phase::PermissionRequest => {
                    crate::decide(engine.store(), &options, &event).await
                }
            };
            match answered {
                Ok(answer) => crate::render(kind, &event, &answer),
                Err(error) => {
                    tracing::error!(%error, "the hook could not decide: denied");
                    crate::refusal(
                        kind,
                        &format!(
                            "Assent could not decide, so the call is refused and did not run (no rule or person refused it): {error}"
                        ),
                    )
                }
            }
        }
    };
    let body = if reply.stdout.is_empty() {
        "{}".to_owned()
    } else {
        reply.stdout
    };
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[tokio::test]
    async fn every_refusal_is_a_200_denial_in_the_kinds_dialect_or_a_neutral_one() {
        let claude = refused(
            "/api/hooks/claude-code",
            StatusCode::UNAUTHORIZED,
            "no token",
        );
        assert_eq!(claude.status(), StatusCode::OK);
        let claude = body_of(claude).await;
        assert_eq!(claude["hookSpecificOutput"]["permissionDecision"], "deny");
        let reason = claude["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .expect("a reason");
        assert!(
            reason.contains("401") && reason.contains("no token"),
            "{reason}"
        );
        let gemini = body_of(refused(
            "/api/hooks/gemini",
            StatusCode::PAYLOAD_TOO_LARGE,
            "too large",
        ))
        .await;
        assert_eq!(gemini["decision"], "deny");
        let unknown = body_of(refused("/api/hooks/nope", StatusCode::NOT_FOUND, "?")).await;
        assert_eq!(unknown["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(unknown["decision"], "block");
        assert_eq!(unknown["permission"], "deny");
        assert_eq!(unknown["permissionDecision"], "deny");
    }
}
