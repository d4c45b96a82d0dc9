//! Creating an agent or replacing its categories, for `POST /api/agents` and
//! `assent agent create` alike.

use crate::api::{ApiResult, Body, created, now, ok};
use crate::{AppState, ServerError};
use assent_domain::OffsetDateTime;
use assent_store::{Store, StoreError, agents};
use assent_tools::AgentPolicy;
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde::Serialize;

/// An agent after it was written: `{id, categories}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentView {
    /// The agent's id, trimmed.
    pub id: String,
    /// The categories it may change, in policy order.
    pub categories: Vec<String>,
    /// Whether it did not exist before (not part of the JSON).
    #[serde(skip)]
    pub created: bool,
}

/// Creates agent `id` with `categories`, or replaces the categories of an existing one
/// while keeping its rules. A blank id or no non-blank category changes nothing.
pub async fn set_agent_categories(
    store: &Store,
    id: &str,
    categories: &[String],
    now: OffsetDateTime,
) -> Result<AgentView, ServerError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(ServerError::BadRequest(
            "agent id must not be blank".to_owned(),
        ));
    }
    let categories: Vec<&str> = categories
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
        .collect();
    if categories.is_empty() {
        return Err(ServerError::BadRequest(
            "categories needs at least one category".to_owned(),
        ));
    }
    let mut tx = store.begin_write().await?;
    let existing = agents::policy(&mut tx, id).await?;
    // Keep the rules of an existing agent; this only sets categories.
    let policy = existing
        .iter()
        .flat_map(|old| old.rules().iter().cloned())
        .fold(AgentPolicy::new(categories), AgentPolicy::with_rule);
    agents::upsert(&mut tx, id, &policy, now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(AgentView {
        id: id.to_owned(),
        categories: policy.allowed_categories().map(str::to_owned).collect(),
        created: existing.is_none(),
    })
}

/// `POST /api/agents {id, categories}`.
#[derive(Debug, Deserialize)]
pub(crate) struct AgentBody {
    id: String,
    categories: Vec<String>,
}

pub(crate) async fn create_agent(
    State(state): State<AppState>,
    body: Body<AgentBody>,
) -> ApiResult {
    let Json(body) = body?;
    let agent =
        set_agent_categories(state.engine.store(), &body.id, &body.categories, now()).await?;
    if agent.created {
        created(agent)
    } else {
        ok(agent)
    }
}
