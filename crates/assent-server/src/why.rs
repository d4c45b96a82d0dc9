//! `GET /api/change-sets/{id}/items/{index}/why`: why an item was decided so, as `assent
//! why SET IDX --json` prints it; `GET /api/audit/digest?since=&agentId=&limit=`: the
//! calls an `audit` rule let run, as `assent audit digest --json` (issue 57).

use crate::api::{ApiResult, Params, now, ok, parse_index, parse_limit, resolve_set_id};
use crate::{AppState, ServerError};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How far back the digest reads without `since`.
const DIGEST_DEFAULT_SPAN: time::Duration = time::Duration::days(7);

/// `GET /api/change-sets/{id}/items/{index}/why` (a reviewer's: it names the rules and
/// who set them). An unknown set or item is 404, as for the set itself.
pub(crate) async fn why_item(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult {
    let Path((set, index)) = path?;
    let set = resolve_set_id(&state, &set).await?;
    let index = parse_index(&index)?;
    ok(state.engine.why_item(set, index).await?)
}

/// The digest's query: from when (RFC 3339, default 7 days ago), whose, how many.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DigestQuery {
    since: Option<String>,
    agent_id: Option<String>,
    limit: Option<String>,
}

/// `GET /api/audit/digest`: `{since, calls: [...]}`.
pub(crate) async fn digest(State(state): State<AppState>, query: Params<DigestQuery>) -> ApiResult {
    let Query(query) = query?;
    let since = match query.since.as_deref().map(str::trim) {
        None | Some("") => now() - DIGEST_DEFAULT_SPAN,
        Some(text) => OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
            ServerError::BadRequest(format!(
                "invalid since {text:?}: expected an RFC 3339 time ({e})"
            ))
        })?,
    };
    let limit = parse_limit(query.limit.as_deref(), 500)?;
    let calls = state
        .engine
        .audited_calls(since, query.agent_id.as_deref(), limit)
        .await?;
    let calls: Vec<Value> = calls
        .iter()
        .map(assent_confirm::why::digest_entry)
        .collect();
    ok(json!({"since": assent_domain::format_time(since), "calls": calls}))
}
