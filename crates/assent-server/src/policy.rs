//! The policy file over the API (issue 57), admin tokens only: `GET /api/policy` (the
//! TOML `assent policy export` prints, as `text/plain`, or its JSON form with `Accept:
//! application/json`), `POST /api/policy/plan` and `POST /api/policy/apply` (the body
//! is the file; `?prune=true` removes what it does not name; the plan's backtests cover
//! the last `sinceDays`, 30 by default). Applying records the token's person as who
//! applied it, with the file's SHA-256, on the consent chain. An invalid file is 400
//! with its line and column. The engine does the work
//! ([`assent_confirm::policy_file`]); `assent policy plan --json` answers the same
//! JSON ([`plan_json`]).

use crate::api::{ApiResult, Params, now, ok};
use crate::auth::Principal;
use crate::{AppState, ServerError};
use assent_confirm::policy_file::PlannedPolicy;
use assent_domain::OffsetDateTime;
use assent_tools::PolicyChange;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

/// One change as JSON (`{change, agent, …}`), with `backtest` (what `assent agent
/// backtest --json` prints, without `since`) for a rule set.
pub fn change_json(
    change: &PolicyChange,
    backtest: Option<&assent_tools::Backtest>,
) -> Result<Value, ServerError> {
    let unexpected = |e: serde_json::Error| ServerError::Internal(e.to_string());
    let mut shown = serde_json::to_value(change).map_err(unexpected)?;
    if let Some(backtest) = backtest {
        shown["backtest"] = serde_json::to_value(backtest).map_err(unexpected)?;
    }
    Ok(shown)
}

/// A plan as JSON: `{sha256, since, pending, changes: [...]}`.
pub fn plan_json(planned: &PlannedPolicy, since: OffsetDateTime) -> Result<Value, ServerError> {
    let changes = planned
        .plan
        .changes
        .iter()
        .zip(&planned.backtests)
        .map(|(change, backtest)| change_json(change, backtest.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "sha256": planned.sha256,
        "since": since
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        "pending": changes.len(),
        "changes": changes,
    }))
}

/// `?prune=&sinceDays=` of the plan and apply routes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicyQuery {
    #[serde(default)]
    prune: bool,
    since_days: Option<u32>,
}

/// `GET /api/policy`: every agent's settings as the policy file.
pub(crate) async fn export(State(state): State<AppState>, headers: HeaderMap) -> ApiResult {
    let file = state.engine.policy_export(None).await?;
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json"));
    if wants_json {
        return ok(file);
    }
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        file.to_toml(),
    )
        .into_response())
}

/// `POST /api/policy/plan`: what applying the file in the body would change.
pub(crate) async fn plan(
    State(state): State<AppState>,
    query: Params<PolicyQuery>,
    body: String,
) -> ApiResult {
    let Query(query) = query?;
    let since = now() - time::Duration::days(i64::from(query.since_days.unwrap_or(30)));
    let planned = state.engine.policy_plan(&body, query.prune, since).await?;
    ok(plan_json(&planned, since)?)
}

/// `POST /api/policy/apply`: the file in the body applied in one transaction, by the
/// token's person; what changed.
pub(crate) async fn apply(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<PolicyQuery>,
    body: String,
) -> ApiResult {
    let Query(query) = query?;
    let by = caller.identity();
    let applied = state
        .engine
        .admin()
        .apply_policy(&body, query.prune, None, &by, now())
        .await?;
    let changes = applied
        .changes
        .iter()
        .map(|c| change_json(c, None))
        .collect::<Result<Vec<_>, _>>()?;
    ok(json!({
        "sha256": assent_confirm::policy_file::sha256_hex(&body),
        "by": by,
        "applied": changes.len(),
        "changes": changes,
    }))
}
