//! `GET /api/rejections`: what the page shows of remembered rejections (issue 53, point
//! 6): the rejections remembered now, and the calls refused again in the last day
//! because of one, each naming the rejection, who made it and why.

use crate::AppState;
use crate::api::{ApiResult, now, ok};
use assent_confirm::rejections::RefusedAgain;
use assent_domain::format_time;
use axum::extract::State;
use serde_json::{Value, json};
use time::Duration;

/// How far back the page's "refused again" lines go.
const REFUSED_LOOKBACK: Duration = Duration::hours(24);

/// The most "refused again" lines the page gets.
const REFUSED_LINES: u32 = 50;

/// `GET /api/rejections`: `{remembered: [{id, agentId, toolName, args, reason,
/// rejectedBy, rejectedAt}], refusedAgain: [{agentId, toolName, args, at, refusedBy,
/// rejectedBy, rejectedAt, reason}]}`, newest first.
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult {
    let at = now();
    let remembered = state.engine.remembered_rejections(None, at).await?;
    let refused = state
        .engine
        .refused_again(None, at - REFUSED_LOOKBACK, REFUSED_LINES)
        .await?;
    ok(json!({
        "remembered": remembered.iter().map(|d| json!({
            "id": d.id,
            "agentId": d.agent_id,
            "targetKind": d.target_kind,
            "targetId": d.target_id,
            "toolName": d.tool_name,
            "args": d.args,
            "reason": d.reason,
            "rejectedBy": d.decided_by,
            "rejectedAt": format_time(d.created_at),
        })).collect::<Vec<Value>>(),
        "refusedAgain": refused.iter().map(refused_json).collect::<Vec<Value>>(),
    }))
}

fn refused_json(refused: &RefusedAgain) -> Value {
    let record = &refused.record;
    let rejection = refused.rejection.as_ref();
    json!({
        "agentId": record.agent_id,
        "targetKind": record.target_kind,
        "targetId": record.target_id,
        "toolName": record.tool_name,
        "args": record.args,
        "at": format_time(record.created_at),
        "refusedBy": record.refused_by,
        "rejectedBy": rejection.and_then(|d| d.decided_by.as_deref()),
        "rejectedAt": rejection.map(|d| format_time(d.created_at)),
        "reason": rejection.and_then(|d| d.reason.as_deref()),
    })
}
