//! What was decided and done: `/api/decisions`, `/api/history` (the prompt section)
//! and `/api/audit`.

use crate::api::{ApiResult, DEFAULT_DECISIONS, MAX_LIST, Params, TargetParams, ok, parse_limit};
use crate::auth::Principal;
use crate::shapes::AuditView;
use crate::{AppState, ServerError};
use assent_confirm::RecentDecisions;
use assent_confirm::history::{AuditFilter, Report, VerifyOptions};
use assent_domain::Verdict;
use axum::extract::{Extension, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use serde::Deserialize;

/// `?agentId=&taskId=&limit=` of the decision routes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecisionsQuery {
    agent_id: Option<String>,
    #[serde(flatten)]
    target: TargetParams,
    limit: Option<String>,
}

impl DecisionsQuery {
    /// The agent (required, except that an agent token defaults to its own; checked
    /// against the token) and the limit (default 20).
    fn agent_and_limit(&self, caller: &Principal) -> Result<(String, u32), ServerError> {
        let asked = self
            .agent_id
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned);
        let agent = caller
            .scope_agent(asked)?
            .ok_or_else(|| ServerError::BadRequest("agentId is required".to_owned()))?;
        let limit = parse_limit(self.limit.as_deref(), DEFAULT_DECISIONS)?;
        Ok((agent, limit))
    }
}

/// `GET /api/decisions?agentId=&taskId=&limit=`: newest first.
pub(crate) async fn list_decisions(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<DecisionsQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let (agent, limit) = query.agent_and_limit(&caller)?;
    let target = query.target.target()?;
    // With each confirmation of an external tool's item, how its run stands; with each
    // decision, what a shadow rule of the agent said beside it.
    let RecentDecisions {
        decisions: list,
        runs,
        shadows,
        ..
    } = state
        .engine
        .recent_decisions(&agent, target.as_ref(), limit)
        .await?;
    let mut shown = Vec::with_capacity(list.len());
    for decision in &list {
        let mut value =
            serde_json::to_value(decision).map_err(|e| ServerError::Internal(e.to_string()))?;
        if let Some((_, shadow)) = shadows.iter().find(|(id, _)| *id == decision.id) {
            value["shadow"] = shadow.clone();
        }
        if decision.verdict == Verdict::Confirmed
            && let Some(job) = runs.iter().find(|j| {
                (j.change_set_id, j.item_index) == (decision.change_set_id, decision.item_index)
            })
        {
            value["execution"] = job.execution_json();
        }
        shown.push(value);
    }
    ok(shown)
}

/// `GET /api/history?agentId=&taskId=`: the prompt section as `text/plain` (empty when
/// there are no decisions yet).
pub(crate) async fn history(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    query: Params<DecisionsQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let (agent, limit) = query.agent_and_limit(&caller)?;
    let target = query.target.target()?;
    let section = state
        .engine
        .confirmations()
        .history(&agent, target.as_ref(), limit)
        .await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        section.unwrap_or_default(),
    )
        .into_response())
}

/// `?taskId=&limit=` of the audit route.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditQuery {
    #[serde(flatten)]
    target: TargetParams,
    limit: Option<String>,
}

/// `GET /api/audit?taskId=`: the audit trail, oldest first (the newest `limit`).
/// `GET /api/audit/head`: the consent chain's head (`deviceId`, `entries`, `head`),
/// to write down, publish, or compare with `assent audit verify --head` later.
pub(crate) async fn audit_head(State(state): State<AppState>) -> ApiResult {
    let head = state.engine.admin().chain_head().await?;
    ok(serde_json::json!({"deviceId": head.device_id, "entries": head.entries, "head": head.hash}))
}

/// `GET /api/audit/verify[?full=true]`: the proof of `assent audit verify [--full]` (`verified`, the head,
/// `effectsChecked` and every violation), run on the server's database.
/// Proven again when the head moved, or after this long even if it did not (a row
/// edited behind the store's back moves no head).
const PROOF_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// A proof with the head it proved and when.
pub(crate) struct CachedProof {
    head: String,
    at: std::time::Instant,
    report: Report,
}

/// `?full=true` of `GET /api/audit/verify`: the whole chain, as `audit verify --full`.
#[derive(Debug, Deserialize)]
pub(crate) struct VerifyQuery {
    full: Option<bool>,
}

pub(crate) async fn audit_verify(
    State(state): State<AppState>,
    query: Params<VerifyQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let full = query.full.unwrap_or(false);
    // One proof at a time: concurrent page loads wait for it instead of each reading
    // the whole database.
    let mut cached = state.proof.lock().await;
    let head = state.engine.admin().chain_head().await?.hash;
    if let Some(last) = cached.as_ref()
        && !full
        && last.head == head
        && last.at.elapsed() < PROOF_FRESH_FOR
    {
        return ok(&last.report);
    }
    let options = VerifyOptions {
        full,
        ..VerifyOptions::default()
    };
    let report = state.engine.admin().verify_proof(&options).await?;
    let body = ok(&report);
    *cached = Some(CachedProof {
        head,
        at: std::time::Instant::now(),
        report,
    });
    body
}

pub(crate) async fn audit_trail(
    State(state): State<AppState>,
    query: Params<AuditQuery>,
) -> ApiResult {
    let Query(query) = query?;
    let limit = parse_limit(query.limit.as_deref(), MAX_LIST)?;
    let filter = match query.target.target()? {
        Some(target) => AuditFilter::Target(target),
        None => AuditFilter::All,
    };
    let records = state.engine.admin().audit_trail(&filter, limit).await?;
    // Who edited what ran, and what the agent had proposed, as `assent audit --json`.
    let edited = state.engine.edited_confirmations().await?;
    let views: Vec<AuditView<'_>> = records
        .iter()
        .map(|record| AuditView::of(record).with_edits(&edited))
        .collect();
    ok(views)
}
