//! `POST /api/hooks/{kind}` (feature `http`): the same answer as `assent hook KIND`,
//! for Claude Code's `http` hooks and a team's shared server. Mounted by whoever
//! composes the server (`Server::with_routes(Role::Agent, routes())`), behind its token
//! check: an agent token answers for its own agent; a reviewer's or admin's names one
//! with `?agent=NAME`. Options as query parameters: `wait` (seconds), `onTimeout`
//! (`ask` | `deny`), `category`.
//!
//! A hook's HTTP error lets the call through in some agents, so everything after the
//! caller is known (a malformed event, a failed decision) is answered 200 with a
//! denial in the agent's dialect, never with an error status.

use crate::{AgentKind, Answer, HookOptions, OnTimeout, Phase};
use assent_confirm::Engine;
use assent_server::ServerError;
use assent_server::auth::Principal;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use std::collections::HashMap;
use std::time::Duration;

/// The longest wait a request may ask for.
const MAX_WAIT_SECS: u64 = 86_400;

/// The routes, relative to `/api`.
pub fn routes() -> Router<Engine> {
    Router::new().route("/hooks/{kind}", post(answer))
}

async fn answer(
    State(engine): State<Engine>,
    Extension(caller): Extension<Principal>,
    Path(kind): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Result<Response, ServerError> {
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
                        &format!("Assent could not decide, so the call is refused: {error}"),
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
