//! Agents and their policies, for `POST /api/agents`, `PUT /api/agents/{id}/rules/{tool}`
//! and `assent agent create|allow|ask|deny|show|list` alike.

use crate::api::{ApiResult, Body, created, now, ok};
use crate::auth::Principal;
use crate::{AppState, ServerError};
use assent_confirm::{ConfirmError, Engine, RuleChange};
use assent_domain::OffsetDateTime;
use assent_store::{Store, agents, host_tools};
use assent_tools::{AgentPolicy, RuleAction};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use serde::Deserialize;
use serde::Serialize;

/// An agent: `{id, categories, rules: [{tool, action}], createdAt, updatedAt}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    /// The agent's id, trimmed.
    pub id: String,
    /// The categories it may change, in policy order.
    pub categories: Vec<String>,
    /// Its rules by tool, in the order they were first set.
    pub rules: Vec<RuleView>,
    /// When it was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When its policy was last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// For an agent that meets tools through a host's catalog (an MCP gateway's
    /// `--agent`): each tool with its host, trust, description, annotations and
    /// whether its definition `changed` since a person accepted it
    /// ([`host_tools::HostTool::to_json`]); left out for other agents.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<serde_json::Value>,
    /// The tools the operator said are idempotent for it (`assent agent idempotent`):
    /// a call left in doubt runs again. Left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idempotent_tools: Vec<String>,
    /// Its hold windows (`assent agent hold`): `[{tool, seconds}]`, by tool; a
    /// confirmed call of such a tool waits that long, cancellable, before it runs.
    /// Left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<HoldView>,
    /// Its quorums (`assent agent ask … --approvals N`): `[{tool, approvals}]`, by
    /// tool; an item of such a tool runs after that many people confirmed it. Left out
    /// when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quorums: Vec<QuorumView>,
    /// Whether it did not exist before (not part of the JSON).
    #[serde(skip)]
    pub created: bool,
}

/// One rule of an agent: `{tool, action}`, the tool a name or a `*` pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleView {
    /// The tool's name, or a pattern where `*` matches any run of characters.
    pub tool: String,
    /// `allow`, `ask` or `deny`.
    pub action: &'static str,
}

/// One hold window of an agent: `{tool, seconds}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HoldView {
    /// The tool's name.
    pub tool: String,
    /// How long a confirmation of it waits before it runs.
    pub seconds: u32,
}

/// One quorum of an agent: `{tool, approvals}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuorumView {
    /// The tool's name.
    pub tool: String,
    /// How many distinct people must confirm an item of it.
    pub approvals: u32,
}

impl AgentView {
    /// The view of a stored agent.
    pub fn of(agent: &agents::Agent) -> Self {
        Self {
            id: agent.id.clone(),
            categories: agent
                .policy
                .allowed_categories()
                .map(str::to_owned)
                .collect(),
            rules: agent
                .policy
                .rules()
                .iter()
                .map(|rule| RuleView {
                    tool: rule.pattern().to_owned(),
                    action: rule.action().as_str(),
                })
                .collect(),
            created_at: agent.created_at,
            updated_at: agent.updated_at,
            tools: Vec::new(),
            idempotent_tools: Vec::new(),
            holds: Vec::new(),
            quorums: Vec::new(),
            created: false,
        }
    }

    /// The view of a stored agent with the host tools it meets.
    async fn read(
        conn: &mut assent_store::AnyConnection,
        agent: &agents::Agent,
    ) -> Result<Self, ServerError> {
        let tools = host_tools::for_agent(conn, &agent.id).await?;
        let idempotent = host_tools::idempotent_tools(conn, &agent.id).await?;
        let holds = agents::holds(conn, &agent.id).await?;
        let quorums = agents::quorums(conn, &agent.id).await?;
        Ok(Self {
            tools: tools.iter().map(host_tools::HostTool::to_json).collect(),
            idempotent_tools: idempotent.into_iter().collect(),
            holds: holds
                .into_iter()
                .map(|(tool, seconds)| HoldView { tool, seconds })
                .collect(),
            quorums: quorums
                .into_iter()
                .map(|(tool, approvals)| QuorumView { tool, approvals })
                .collect(),
            ..Self::of(agent)
        })
    }
}

/// Reads back agent `id` after a write in `conn`'s transaction.
async fn written(
    conn: &mut assent_store::AnyConnection,
    id: &str,
) -> Result<AgentView, ServerError> {
    let agent = agents::get(conn, id)
        .await?
        .ok_or_else(|| ServerError::Internal(format!("agent {id:?} vanished after its write")))?;
    AgentView::read(conn, &agent).await
}

/// Sets agent `id`'s hold window for `tool` to `seconds` (0 removes it): its confirmed
/// calls of `tool` then wait that long, cancellable, before they run. Returns the agent
/// and whether it changed. Unknown agent 404; blank tool 400.
pub async fn set_agent_hold(
    store: &Store,
    id: &str,
    tool: &str,
    seconds: u32,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let (id, tool) = (id.trim(), tool.trim());
    if tool.is_empty() {
        return Err(ServerError::BadRequest("tool must not be blank".to_owned()));
    }
    // Holds are looked up by tool name: an argument pattern would be kept and never
    // apply.
    if tool.contains('(') || tool.contains(')') {
        return Err(ServerError::BadRequest(format!(
            "a hold is set for a tool name or * pattern, not for an argument pattern ({tool}): holds are kept per tool"
        )));
    }
    let mut tx = store.begin_write().await?;
    let changed = agents::set_hold(tx.connection(), id, tool, seconds, now)
        .await?
        .ok_or_else(|| no_agent(id))?;
    let view = written(tx.connection(), id).await?;
    tx.commit().await?;
    Ok((view, changed))
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
    let existing = agents::policy(tx.connection(), id).await?;
    // Keep the rules of an existing agent; this only sets categories.
    let policy = existing
        .iter()
        .flat_map(|old| old.rules().iter().cloned())
        .fold(AgentPolicy::new(categories), AgentPolicy::with_rule);
    agents::upsert(tx.connection(), id, &policy, now).await?;
    let view = written(tx.connection(), id).await?;
    tx.commit().await?;
    Ok(AgentView {
        created: existing.is_none(),
        ..view
    })
}

/// Sets agent `id`'s rule as `change` says ([`Engine::change_rule`]: the rule, its
/// quorum, the shadow rule it promotes, in one transaction, as every door does); its
/// next wake routes by it. Setting the rule it already has writes nothing. Returns the
/// agent and whether it changed. An unknown agent is [`ServerError::NotFound`]; a blank
/// tool or approvals without `ask` [`ServerError::BadRequest`].
pub async fn change_agent_rule(
    engine: &Engine,
    id: &str,
    change: &RuleChange,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let id = id.trim();
    let changed = match engine.change_rule(id, change, now).await {
        Ok(changed) => changed,
        Err(ConfirmError::UnknownAgent(_)) => return Err(no_agent(id)),
        Err(ConfirmError::InvalidRule(why)) => return Err(ServerError::BadRequest(why)),
        Err(other) => return Err(other.into()),
    };
    Ok((agent_view(engine.store(), id).await?, changed))
}

/// [`change_agent_rule`] with the rule `action` for `tool`, for good.
pub async fn set_agent_rule(
    engine: &Engine,
    id: &str,
    tool: &str,
    action: RuleAction,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    change_agent_rule(engine, id, &RuleChange::new(tool, action), now).await
}

/// Records (or takes back, with `idempotent` false) the operator's word that agent
/// `id`'s calls of `tool` are idempotent, so that one a crash left in doubt runs again
/// instead of waiting for a person. Returns the agent and whether it changed. An
/// unknown agent is [`ServerError::NotFound`]; a blank tool [`ServerError::BadRequest`].
pub async fn set_agent_idempotent(
    store: &Store,
    id: &str,
    tool: &str,
    idempotent: bool,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let (id, tool) = (id.trim(), tool.trim());
    if tool.is_empty() {
        return Err(ServerError::BadRequest(
            "the tool's name must not be blank".to_owned(),
        ));
    }
    let mut tx = store.begin_write().await?;
    if agents::get(tx.connection(), id).await?.is_none() {
        return Err(no_agent(id));
    }
    let changed = host_tools::set_idempotent(tx.connection(), id, tool, idempotent, now).await?;
    let view = written(tx.connection(), id).await?;
    tx.commit().await?;
    Ok((view, changed))
}

/// Agent `id`, or [`ServerError::NotFound`].
pub async fn agent_view(store: &Store, id: &str) -> Result<AgentView, ServerError> {
    let mut conn = store.read_connection().await?;
    let id = id.trim();
    let agent = agents::get(&mut conn, id)
        .await?
        .ok_or_else(|| no_agent(id))?;
    AgentView::read(&mut conn, &agent).await
}

/// Every agent, by id.
pub async fn agent_views(store: &Store) -> Result<Vec<AgentView>, ServerError> {
    let mut conn = store.read_connection().await?;
    let mut views = Vec::new();
    for agent in agents::list(&mut conn).await? {
        views.push(AgentView::read(&mut conn, &agent).await?);
    }
    Ok(views)
}

fn no_agent(id: &str) -> ServerError {
    ServerError::NotFound(format!("no agent {id:?}"))
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

/// `PUT /api/agents/{id}/rules/{tool} {action}`.
#[derive(Debug, Deserialize)]
pub(crate) struct RuleBody {
    action: String,
    /// With `ask`: how many distinct people confirm each call (1 removes a quorum).
    approvals: Option<u32>,
}

pub(crate) async fn set_rule(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Body<RuleBody>,
) -> ApiResult {
    let Path((id, tool)) = path?;
    let Json(body) = body?;
    let action: RuleAction = body
        .action
        .trim()
        .parse()
        .map_err(ServerError::BadRequest)?;
    let change = RuleChange {
        approvals: body.approvals,
        by: Some(caller.identity()),
        ..RuleChange::new(tool, action)
    };
    let (agent, _) = change_agent_rule(&state.engine, &id, &change, now()).await?;
    ok(agent)
}

/// `PUT /api/agents/{id}/holds/{tool} {seconds}`: the agent's hold window for `tool`
/// (0 removes it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HoldBody {
    seconds: u32,
}

pub(crate) async fn set_hold(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Body<HoldBody>,
) -> ApiResult {
    let Path((id, tool)) = path?;
    let Json(body) = body?;
    let (agent, _) = set_agent_hold(state.engine.store(), &id, &tool, body.seconds, now()).await?;
    ok(agent)
}
