//! Agents and their policies, for `POST /api/agents`, `PUT|DELETE
//! /api/agents/{id}/rules/{tool}` and `assent agent create|allow|ask|deny|unset|show|list`
//! alike.

use crate::api::{ApiResult, Body, created, now, ok};
use crate::auth::Principal;
use crate::{AppState, ServerError};
use assent_confirm::agents::{Agent, HostTool};
use assent_confirm::{AgentSettings, ConfirmError, Engine, RuleChange};
use assent_domain::OffsetDateTime;
use assent_tools::RuleAction;
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
    /// ([`HostTool::to_json`]); left out for other agents.
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
    pub fn of(agent: &Agent) -> Self {
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

    /// The view of an agent's settings ([`Engine::agent_settings`]), with the host
    /// tools it meets.
    pub fn of_settings(settings: &AgentSettings) -> Self {
        Self {
            tools: settings.tools.iter().map(HostTool::to_json).collect(),
            idempotent_tools: settings.idempotent_tools.iter().cloned().collect(),
            holds: settings
                .holds
                .iter()
                .map(|(tool, seconds)| HoldView {
                    tool: tool.clone(),
                    seconds: *seconds,
                })
                .collect(),
            quorums: settings
                .quorums
                .iter()
                .map(|(tool, approvals)| QuorumView {
                    tool: tool.clone(),
                    approvals: *approvals,
                })
                .collect(),
            ..Self::of(&settings.agent)
        }
    }
}

/// The engine's refusal of an agent setting as this server answers it: an unknown
/// agent 404 (`no agent "id"`), a setting that cannot be set as given 400 with the
/// reason alone.
fn refused(id: &str, error: ConfirmError) -> ServerError {
    match error {
        ConfirmError::UnknownAgent(_) => no_agent(id),
        ConfirmError::InvalidRule(why) | ConfirmError::InvalidSetting(why) => {
            ServerError::BadRequest(why)
        }
        other => other.into(),
    }
}

/// Sets agent `id`'s hold window for `tool` to `seconds` (0 removes it,
/// [`Admin::set_hold`](assent_confirm::Admin::set_hold)): its confirmed calls of
/// `tool` then wait that long, cancellable, before they run. Returns the agent and whether it changed. Unknown
/// agent 404; blank tool or argument pattern 400.
pub async fn set_agent_hold(
    engine: &Engine,
    id: &str,
    tool: &str,
    seconds: u32,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let id = id.trim();
    let changed = engine
        .admin()
        .set_hold(id, tool, seconds, now)
        .await
        .map_err(|e| refused(id, e))?;
    Ok((agent_view(engine, id).await?, changed))
}

/// Creates agent `id` with `categories`, or replaces the categories of an existing one
/// while keeping its rules ([`Engine::set_categories`]). A blank id or no non-blank
/// category changes nothing (400).
pub async fn set_agent_categories(
    engine: &Engine,
    id: &str,
    categories: &[String],
    now: OffsetDateTime,
) -> Result<AgentView, ServerError> {
    let id = id.trim();
    let created = engine
        .set_categories(id, categories, now)
        .await
        .map_err(|e| refused(id, e))?;
    Ok(AgentView {
        created,
        ..agent_view(engine, id).await?
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
    let changed = engine
        .change_rule(id, change, now)
        .await
        .map_err(|e| refused(id, e))?;
    Ok((agent_view(engine, id).await?, changed))
}

/// Removes agent `id`'s rule for exactly `pattern` (`assent agent unset`, `DELETE
/// /api/agents/{id}/rules/{pattern}`), by `by`: the agent as it is now, and whether it
/// had such a rule.
pub async fn remove_agent_rule(
    engine: &Engine,
    id: &str,
    pattern: &str,
    by: &str,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let id = id.trim();
    if pattern.trim().is_empty() {
        return Err(ServerError::BadRequest(
            "the rule's pattern must not be blank".to_owned(),
        ));
    }
    let removed = engine
        .remove_rule(id, pattern, Some(by), now)
        .await
        .map_err(|e| refused(id, e))?;
    Ok((agent_view(engine, id).await?, removed))
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
/// `id`'s calls of `tool` are idempotent ([`Engine::set_idempotent`]), so that one a
/// crash left in doubt runs again instead of waiting for a person. Returns the agent
/// and whether it changed. An unknown agent is [`ServerError::NotFound`]; a blank tool
/// [`ServerError::BadRequest`].
pub async fn set_agent_idempotent(
    engine: &Engine,
    id: &str,
    tool: &str,
    idempotent: bool,
    now: OffsetDateTime,
) -> Result<(AgentView, bool), ServerError> {
    let id = id.trim();
    let changed = engine
        .set_idempotent(id, tool, idempotent, now)
        .await
        .map_err(|e| refused(id, e))?;
    Ok((agent_view(engine, id).await?, changed))
}

/// Agent `id`, or [`ServerError::NotFound`].
pub async fn agent_view(engine: &Engine, id: &str) -> Result<AgentView, ServerError> {
    let id = id.trim();
    let settings = engine
        .agent_settings(id)
        .await?
        .ok_or_else(|| no_agent(id))?;
    Ok(AgentView::of_settings(&settings))
}

/// Every agent, by id.
pub async fn agent_views(engine: &Engine) -> Result<Vec<AgentView>, ServerError> {
    Ok(engine
        .all_agent_settings()
        .await?
        .iter()
        .map(AgentView::of_settings)
        .collect())
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
    let agent = set_agent_categories(&state.engine, &body.id, &body.categories, now()).await?;
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
    /// Keep a rule that names no tool the agent's coding agent sends (otherwise 400).
    #[serde(default, rename = "anyName")]
    any_name: bool,
    /// A condition over the history (issue 57): `{"kind": "after", "count": 5,
    /// "windowSeconds": 3600}`, `{"kind": "onlyAfter", "pattern": P, "withinSeconds":
    /// 900, "succeeded": true}` or `{"kind": "total", "pointer": "/cents", "over":
    /// 50000, "perSeconds": 86400}`; with it, `approvals` is the quorum once it holds.
    #[serde(default)]
    condition: Option<assent_tools::When>,
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
        any_name: body.any_name,
        by: Some(caller.identity()),
        condition: body.condition,
        ..RuleChange::new(tool, action)
    };
    let (agent, _) = change_agent_rule(&state.engine, &id, &change, now()).await?;
    ok(agent)
}

/// `DELETE /api/agents/{id}/rules/{pattern}`: the rule for exactly that pattern removed
/// (the agent as it is then; removing a rule it does not have changes nothing).
pub(crate) async fn remove_rule(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult {
    let Path((id, pattern)) = path?;
    let (agent, _) =
        remove_agent_rule(&state.engine, &id, &pattern, &caller.identity(), now()).await?;
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
    let (agent, _) = set_agent_hold(&state.engine, &id, &tool, body.seconds, now()).await?;
    ok(agent)
}
