//! `GET /api/change-sets/{id}/outcome?wait=SECS`: what became of a set, as the agent
//! that proposed it awaits it — answered at once, or held until the set is settled
//! (every item decided, every confirmed external item's job settled) or `SECS` run out
//! (a long poll, woken by the change feed, so a decision made by any process ends it).

use crate::api::{ApiResult, Params, ok, parse_set_id};
use crate::auth::Principal;
use crate::{AppState, ServerError};
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, Query, State};
use serde::Deserialize;
use std::time::Duration;

/// The longest wait a request may ask for, in seconds.
pub(crate) const MAX_WAIT_SECS: u64 = 60;

/// `?wait=SECS`.
#[derive(Debug, Deserialize)]
pub(crate) struct OutcomeQuery {
    wait: Option<String>,
}

fn parse_wait(text: Option<&str>) -> Result<Duration, ServerError> {
    let Some(text) = text else {
        return Ok(Duration::ZERO);
    };
    match text.trim().parse::<u64>() {
        Ok(secs @ 0..=MAX_WAIT_SECS) => Ok(Duration::from_secs(secs)),
        _ => Err(ServerError::BadRequest(format!(
            "invalid wait {text:?}: expected 0 to {MAX_WAIT_SECS} seconds"
        ))),
    }
}

/// `GET /api/change-sets/{id}/outcome?wait=SECS`: the set's outcome (`changeSetId`,
/// `status`, `settled`, `items`). An agent token reads its own agent's sets only (403
/// for another's); reviewer and admin tokens read any.
pub(crate) async fn show_outcome(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
    query: Params<OutcomeQuery>,
) -> ApiResult {
    let Path(id) = id?;
    let id = parse_set_id(&id)?;
    let Query(query) = query?;
    let wait = parse_wait(query.wait.as_deref())?;
    {
        let set = state
            .engine
            .change_set(id)
            .await?
            .ok_or_else(|| ServerError::NotFound(format!("no change set {id}")))?;
        caller.may_act_for(&set.agent_id)?;
    }
    let confirmations = state.engine.confirmations();
    let outcome = if wait.is_zero() {
        confirmations.outcome(id).await?
    } else {
        confirmations.wait_outcome(id, wait).await?
    };
    ok(outcome)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_wait_is_at_most_a_minute() {
        assert_eq!(parse_wait(None).unwrap(), Duration::ZERO);
        assert_eq!(parse_wait(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(parse_wait(Some(" 60")).unwrap(), Duration::from_secs(60));
        for bad in ["61", "-1", "1.5", "soon", ""] {
            let error = parse_wait(Some(bad)).unwrap_err();
            assert!(
                matches!(error, ServerError::BadRequest(_)),
                "{bad}: {error}"
            );
        }
    }
}
