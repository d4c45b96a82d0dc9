//! An agent's settings, changed in one place for every door: its categories, rules
//! (an expiry and a quorum with an `ask`), shadow rules, hold windows, the operator's
//! word on idempotent tools and on calls that may run after their chat ended, and a
//! grant suggestion applied. The CLI (`assent agent …`, `assent grants suggest
//! --apply`), the API (`POST /api/agents`, `PUT /api/agents/{id}/rules|holds/{tool}`)
//! and the demos call these [`Engine`] methods, never the store's tables, so a change
//! has the same effect whichever door it came through (a rule set over the API and
//! changed on the CLI leaves no stray shadow rule behind), and each is one
//! transaction (a crash never leaves half a change: an ask without its quorum, a rule
//! beside the shadow rule it promoted, an allow without its accepted definition).
//!
//! What a door or a host reads of an agent and of the tools it meets is here too: the
//! settings view ([`Engine::agent_settings`]), and the reads a host makes on its own
//! connection, inside its own transaction ([`policy_at`], [`rules_at`], …), with the
//! plain types they return. The one write a host makes of its own accord, recording the
//! catalog its upstream lists, is [`record_host_catalog`].

use crate::{Admin, ConfirmError, ConflictKind, Engine};
use assent_store::{Connection, Store, agents as stored, host_tools, mcp_sessions};
use assent_tools::{GrantSuggestion, InForce, RuleAction, RuleProvenance, RuleSource, ToolRule};
use std::collections::BTreeSet;
use time::OffsetDateTime;

pub use assent_store::agents::{
    Agent, ShadowRule, ToolSettings, get, kind_of, policy_and_settings_at, policy_at, record_kind,
    rules_at, settings_of, shadow_rules,
};
pub use assent_store::host_tools::{
    GatewayRead, HostTool, ListedTool, changed_items, definition_hash,
    for_agent as tools_for_agent, for_host as tools_for_host, gateway_read, get as host_tool,
    idempotent_tools, own_catalogs, registered as host_registered,
};

/// One change of an agent's rule for a tool name or `*` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChange {
    /// The tool name or pattern, as the agent's client names its tools.
    pub tool: String,
    /// What the rule says.
    pub action: RuleAction,
    /// When the rule stops applying; `None` for good.
    pub until: Option<OffsetDateTime>,
    /// With [`RuleAction::Ask`]: how many distinct people confirm each call (1 removes
    /// a quorum); `None` leaves the quorum as it is.
    pub approvals: Option<u32>,
    /// Who sets it (a token's id over the API, `--as` or the OS user on the CLI), for
    /// the consent chain's record of the change; `None` when unknown.
    pub by: Option<String>,
    /// Keep a rule that names no tool the agent's coding agent sends (`--any-name`):
    /// refused otherwise, once a hook event recorded the agent's kind
    /// ([`names_a_sent_tool`]).
    pub any_name: bool,
    /// A condition over the history (`--after`, `--only-after`, `--total`): the rule
    /// applies only while it holds ([`assent_tools::Condition`]). With it, `approvals`
    /// is the quorum once it holds, kept in the rule rather than per tool.
    pub condition: Option<assent_tools::When>,
    /// How the rule is set (issue 57): kept with it, with `by` and the time, as its
    /// provenance ([`assent_tools::RuleProvenance`]). A command by default.
    pub source: RuleSource,
}

impl RuleChange {
    /// The rule `action` for `tool`, for good, leaving any quorum as it is.
    pub fn new(tool: impl Into<String>, action: RuleAction) -> Self {
        Self {
            tool: tool.into(),
            action,
            until: None,
            approvals: None,
            by: None,
            any_name: false,
            condition: None,
            source: RuleSource::Command,
        }
    }

    /// The rule it sets, or why it cannot be set.
    pub(crate) fn rule(&self) -> Result<ToolRule, ConfirmError> {
        let tool = self.tool.trim();
        let rule = ToolRule::new(tool, self.action)
            .map_err(|e| ConfirmError::InvalidRule(e.to_string()))?;
        if let Some(when) = &self.condition {
            let rule = self.conditional(rule, when.clone())?;
            return Ok(match self.until {
                Some(until) => rule.until(until),
                None => rule,
            });
        }
        match self.approvals {
            Some(_) if tool.contains('(') => {
                return Err(ConfirmError::InvalidRule(format!(
                    "a quorum is set for a tool name or * pattern, not for an argument pattern ({tool}): quorums are kept per tool"
                )));
            }
            Some(_) if self.action != RuleAction::Ask => {
                return Err(ConfirmError::InvalidRule(format!(
                    "approvals go with the action ask, not {} (how many people confirm each call of {tool})",
                    self.action.as_str()
                )));
            }
            Some(0) => {
                return Err(ConfirmError::InvalidRule(format!(
                    "approvals for {tool} must be at least 1"
                )));
            }
            _ => {}
        }
        Ok(match self.until {
            Some(until) => rule.until(until),
            None => rule,
        })
    }

    /// `rule` applying only while `when` holds, with the change's quorum once it does.
    /// A deny has no condition: a person's later confirmation re-checks the rules
    /// without the history, where a deny that may hold would refuse it.
    fn conditional(
        &self,
        rule: ToolRule,
        when: assent_tools::When,
    ) -> Result<ToolRule, ConfirmError> {
        if self.action == RuleAction::Deny {
            return Err(ConfirmError::InvalidRule(format!(
                "a condition over the history goes with allow or ask, not deny ({})",
                rule.pattern()
            )));
        }
        if self.approvals.is_some() && self.action != RuleAction::Ask {
            return Err(ConfirmError::InvalidRule(format!(
                "approvals go with the action ask, not {} (how many people confirm each call of {})",
                self.action.as_str(),
                rule.pattern()
            )));
        }
        // One person is no quorum to keep; zero is refused by the condition.
        let approvals = self.approvals.filter(|n| *n != 1);
        let condition = assent_tools::Condition::new(when, approvals)
            .map_err(|e| ConfirmError::InvalidRule(e.to_string()))?;
        Ok(rule.when(condition))
    }
}

/// Everything an agent's settings say, read together: what `assent agent show` and
/// `GET /api/agents/{id}` show.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AgentSettings {
    /// The agent: id, categories, rules (expired ones included), when created and
    /// changed.
    pub agent: Agent,
    /// Its shadow rules, tried without effect, in the order first set.
    pub shadow_rules: Vec<ShadowRule>,
    /// Its hold windows: tool and seconds, by tool.
    pub holds: Vec<(String, u32)>,
    /// Its quorums (more than one approval): tool and how many, by tool.
    pub quorums: Vec<(String, u32)>,
    /// The tools the operator said are idempotent for it, by name.
    pub idempotent_tools: BTreeSet<String>,
    /// The tools it meets through a host's catalog (an MCP gateway's), by host and
    /// name; empty for other agents.
    pub tools: Vec<HostTool>,
}

impl AgentSettings {
    /// Agent `id`'s settings read on `conn`, or `None` for an unknown agent.
    async fn read(conn: &mut Connection, id: &str) -> Result<Option<Self>, ConfirmError> {
        let Some(agent) = stored::get(conn, id).await? else {
            return Ok(None);
        };
        Self::of(conn, agent).await.map(Some)
    }

    async fn of(conn: &mut Connection, agent: Agent) -> Result<Self, ConfirmError> {
        let id = agent.id.as_str();
        Ok(Self {
            shadow_rules: stored::shadow_rules(conn, id).await?.unwrap_or_default(),
            holds: stored::holds(conn, id).await?,
            quorums: stored::quorums(conn, id).await?,
            idempotent_tools: host_tools::idempotent_tools(conn, id).await?,
            tools: host_tools::for_agent(conn, id).await?,
            agent,
        })
    }
}

/// Records the catalog `host` lists now for agent `agent` (with its `trust`), in one
/// transaction: a tool new here is pinned as it is; a known one keeps its pin, so a
/// changed definition shows as [`HostTool::changed`] until a person allows the tool
/// again. What an MCP gateway writes when its upstream lists its tools. Returns the
/// host's catalog as recorded.
pub async fn record_host_catalog(
    store: &Store,
    host: &str,
    agent: &str,
    trust: &str,
    tools: &[ListedTool<'_>],
    now: OffsetDateTime,
) -> Result<Vec<HostTool>, ConfirmError> {
    let mut tx = store.begin_write().await?;
    let catalog =
        host_tools::record_catalog(tx.connection(), host, Some(agent), Some(trust), tools, now)
            .await?;
    tx.commit().await?;
    Ok(catalog)
}

/// A tool name or `*` pattern for a per-tool setting, trimmed: not blank (refused with
/// `blank`), and not an argument pattern, which a setting kept per tool would keep and
/// never apply (`what` names the setting in the refusal).
fn setting_tool<'a>(tool: &'a str, blank: &str, what: &str) -> Result<&'a str, ConfirmError> {
    let tool = tool.trim();
    if tool.is_empty() {
        return Err(ConfirmError::InvalidSetting(blank.to_owned()));
    }
    if tool.contains(['(', ')']) {
        return Err(ConfirmError::InvalidSetting(format!(
            "a {what} is set for a tool name or * pattern, not for an argument pattern ({tool}): {what}s are kept per tool"
        )));
    }
    Ok(tool)
}

impl Engine {
    /// Agent `agent`'s settings, or `None` for an unknown agent.
    pub async fn agent_settings(&self, agent: &str) -> Result<Option<AgentSettings>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        AgentSettings::read(&mut conn, agent.trim()).await
    }

    /// Agent `agent`'s policy in force at `now` (its rules expired by then left out),
    /// or `None` for an unknown agent: what decides which tools it is shown.
    pub async fn policy_in_force(
        &self,
        agent: &str,
        now: OffsetDateTime,
    ) -> Result<Option<assent_tools::AgentPolicy>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(stored::policy_at(&mut conn, agent, now).await?)
    }

    /// Agent `agent`'s policy in force at `now` with its settings for `tool` (quorum,
    /// hold), read together; `None` for an unknown agent.
    pub async fn rules_in_force(
        &self,
        agent: &str,
        tool: &str,
        now: OffsetDateTime,
    ) -> Result<Option<(assent_tools::AgentPolicy, ToolSettings)>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(stored::policy_and_settings_at(&mut conn, agent, tool, now).await?)
    }

    /// Agent `agent`'s tool settings (quorums, holds) as one table, empty for an
    /// unknown agent.
    pub async fn tool_settings(
        &self,
        agent: &str,
    ) -> Result<assent_tools::ToolSettingsTable, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(stored::settings_of(&mut conn, agent).await?)
    }
}

impl Admin<'_> {
    /// The catalogs services record of their own tools (no agent's, no gateway's), by
    /// host and name.
    pub async fn service_catalogs(&self) -> Result<Vec<HostTool>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(host_tools::own_catalogs(&mut conn).await?)
    }

    /// What `host` recorded of `tool` in its catalog: `Ok(Some(tool))` when listed,
    /// `Ok(None)` when not; and whether `host` recorded a catalog at all.
    pub async fn catalog_entry(
        &self,
        host: &str,
        tool: &str,
    ) -> Result<(Option<HostTool>, bool), ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        let entry = host_tools::get(&mut conn, host, tool).await?;
        let registered = entry.is_some() || host_tools::registered(&mut conn, host).await?;
        Ok((entry, registered))
    }
}

impl Engine {
    /// Every agent's settings, by id.
    pub async fn all_agent_settings(&self) -> Result<Vec<AgentSettings>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let mut all = Vec::new();
        for agent in stored::list(&mut conn).await? {
            all.push(AgentSettings::of(&mut conn, agent).await?);
        }
        Ok(all)
    }

    /// Creates agent `agent` with `categories` (trimmed, blank ones left out), or
    /// replaces the categories of an existing one, keeping its rules. Returns whether
    /// the agent is new. A blank id or no category left is
    /// [`ConfirmError::InvalidSetting`], and nothing is written.
    #[tracing::instrument(skip(self, categories))]
    pub async fn set_categories(
        &self,
        agent: &str,
        categories: &[String],
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let agent = agent.trim();
        if agent.is_empty() {
            return Err(ConfirmError::InvalidSetting(
                "agent id must not be blank".to_owned(),
            ));
        }
        let categories: Vec<&str> = categories
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
            .collect();
        if categories.is_empty() {
            return Err(ConfirmError::InvalidSetting(
                "categories needs at least one category".to_owned(),
            ));
        }
        let mut tx = self.store.begin_write().await?;
        let existing = stored::policy_at(tx.connection(), agent, now).await?;
        // Keep the rules of an existing agent (those in force); this only sets
        // categories.
        let policy = existing
            .iter()
            .flat_map(|old| old.rules().iter().cloned())
            .fold(
                assent_tools::AgentPolicy::new(categories),
                assent_tools::AgentPolicy::with_rule,
            );
        stored::upsert(tx.connection(), agent, &policy, now).await?;
        tx.commit().await?;
        Ok(existing.is_none())
    }

    /// Removes agent `agent`'s rule for exactly `pattern` (`assent agent unset`, `DELETE
    /// /api/agents/{id}/rules/{pattern}`), entered on the consent chain with who removed
    /// it (`by`), in one transaction: calls it decided are then decided by the agent's
    /// other rules, or asked. Returns whether it had such a rule. An unknown agent is
    /// [`ConfirmError::UnknownAgent`], and nothing is written.
    #[tracing::instrument(skip(self))]
    pub async fn remove_rule(
        &self,
        agent: &str,
        pattern: &str,
        by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let (agent, pattern) = (agent.trim(), pattern.trim());
        let mut tx = self.store.begin_write().await?;
        let Some(changed) = stored::remove_rule(tx.connection(), agent, pattern, now).await? else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        if changed && let Some(by) = by {
            stored::record_changed_by(tx.connection(), agent, by, now).await?;
        }
        tx.commit().await?;
        tracing::info!(changed, "rule removed");
        Ok(changed)
    }

    /// Sets agent `agent`'s rule as `change` says, in one transaction: the rule
    /// (replacing the one it had for exactly that pattern), the quorum when given, the
    /// shadow rule for that pattern removed (a rule set for real promotes it), and, for
    /// `allow`, the tool's current definition accepted. Returns whether anything
    /// changed. An unknown agent is [`ConfirmError::UnknownAgent`]; a blank pattern or
    /// approvals without `ask` [`ConfirmError::InvalidRule`], and nothing is written.
    #[tracing::instrument(skip(self, change), fields(agent = %agent, tool = %change.tool, action = change.action.as_str()))]
    pub async fn change_rule(
        &self,
        agent: &str,
        change: &RuleChange,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let agent = agent.trim();
        let rule = change.rule()?;
        let mut tx = self.store.begin_write().await?;
        if !change.any_name {
            names_a_sent_tool(tx.connection(), agent, rule.pattern()).await?;
        }
        let changed = change_rule_on(tx.connection(), agent, change, rule, now).await?;
        tx.commit().await?;
        tracing::info!(changed, "rule set");
        Ok(changed)
    }

    /// Applies grant suggestion `suggestion` (`assent grants suggest --apply`): its
    /// agent's `allow` rule for its tool until its expiry, set as
    /// [`Engine::change_rule`] sets one, by `by`. What is in force for the tool is
    /// read again in the same transaction, so a deny, quorum or hold set since the
    /// suggestion was listed, or a definition recorded since, is never weakened or
    /// accepted: that is a [`ConflictKind::SuggestionRefused`] conflict whose message
    /// says why, and nothing is written. Returns whether anything changed.
    #[tracing::instrument(skip(self, suggestion), fields(agent = %suggestion.agent, tool = %suggestion.tool))]
    pub async fn apply_suggestion(
        &self,
        suggestion: &GrantSuggestion,
        by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let (agent, tool) = (suggestion.agent.as_str(), suggestion.tool.as_str());
        // An argument pattern when the evidence supports only one (a tool of commands
        // or paths), the tool otherwise.
        let pattern = suggestion.pattern.as_deref();
        let change = RuleChange {
            until: Some(suggestion.expires_at),
            by: by.map(str::to_owned),
            source: RuleSource::Suggestion,
            ..RuleChange::new(pattern.unwrap_or(tool), RuleAction::Allow)
        };
        let rule = change.rule()?;
        let mut tx = self.store.begin_write().await?;
        let Some((policy, settings)) =
            stored::policy_and_settings_at(tx.connection(), agent, tool, now).await?
        else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        let hold = settings
            .hold
            .map(|h| u32::try_from(h.whole_seconds()).unwrap_or(u32::MAX));
        let mut in_force = InForce::of(&policy, tool, settings.approvals_needed, hold);
        in_force.definition_changed = host_tools::for_agent(tx.connection(), agent)
            .await?
            .iter()
            .any(|t| t.tool_name == tool && t.changed());
        if let Some(why) = in_force.refusal_of(agent, tool, pattern) {
            return Err(ConfirmError::conflict(ConflictKind::SuggestionRefused, why));
        }
        let changed = change_rule_on(tx.connection(), agent, &change, rule, now).await?;
        tx.commit().await?;
        tracing::info!(changed, "grant suggestion applied");
        Ok(changed)
    }

    /// Sets agent `agent`'s shadow rule `action` for `tool` (`--shadow`: tried without
    /// effect, reported against what people decide), from `now` on; the same rule
    /// again keeps its start. Returns whether it changed. An unknown agent is
    /// [`ConfirmError::UnknownAgent`], a blank pattern [`ConfirmError::InvalidRule`].
    #[tracing::instrument(skip(self))]
    pub async fn set_shadow_rule(
        &self,
        agent: &str,
        tool: &str,
        action: RuleAction,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        self.set_shadow_rule_when(agent, tool, action, None, now)
            .await
    }

    /// [`Self::set_shadow_rule`] for a rule with a condition over the history
    /// (`assent agent ask A T --after 5/1h --shadow`): the shadow report judges it on
    /// the history of each decision it covers.
    #[tracing::instrument(skip(self))]
    pub async fn set_shadow_rule_when(
        &self,
        agent: &str,
        tool: &str,
        action: RuleAction,
        condition: Option<assent_tools::When>,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let agent = agent.trim();
        let rule = match condition {
            None => ToolRule::new(tool.trim(), action)
                .map_err(|e| ConfirmError::InvalidRule(e.to_string()))?,
            Some(when) => RuleChange {
                condition: Some(when),
                ..RuleChange::new(tool, action)
            }
            .rule()?,
        };
        let mut tx = self.store.begin_write().await?;
        let Some(changed) = stored::set_shadow_rule(tx.connection(), agent, rule, now).await?
        else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        tx.commit().await?;
        Ok(changed)
    }
}

impl Admin<'_> {
    /// Sets agent `agent`'s hold window for `tool` to `seconds` (0 removes it): its
    /// confirmed calls of `tool` then wait that long, cancellable, before they run.
    /// Returns whether it changed. A blank tool or an argument pattern is
    /// [`ConfirmError::InvalidSetting`], an unknown agent
    /// [`ConfirmError::UnknownAgent`].
    #[tracing::instrument(skip(self))]
    pub async fn set_hold(
        &self,
        agent: &str,
        tool: &str,
        seconds: u32,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let agent = agent.trim();
        // Holds are looked up by tool name: an argument pattern would be kept and never
        // apply.
        let tool = setting_tool(tool, "tool must not be blank", "hold")?;
        let mut tx = self.engine.store.begin_write().await?;
        let Some(changed) = stored::set_hold(tx.connection(), agent, tool, seconds, now).await?
        else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        tx.commit().await?;
        Ok(changed)
    }
}

impl Engine {
    /// Records (or, with `idempotent` false, takes back) the operator's word that agent
    /// `agent`'s calls of `tool` are idempotent, so that one a crash left in doubt runs
    /// again instead of waiting for a person. Returns whether it changed. A blank tool
    /// is [`ConfirmError::InvalidSetting`], an unknown agent
    /// [`ConfirmError::UnknownAgent`].
    #[tracing::instrument(skip(self))]
    pub async fn set_idempotent(
        &self,
        agent: &str,
        tool: &str,
        idempotent: bool,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let (agent, tool) = (agent.trim(), tool.trim());
        if tool.is_empty() {
            return Err(ConfirmError::InvalidSetting(
                "the tool's name must not be blank".to_owned(),
            ));
        }
        let mut tx = self.store.begin_write().await?;
        if stored::get(tx.connection(), agent).await?.is_none() {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        }
        let changed =
            host_tools::set_idempotent(tx.connection(), agent, tool, idempotent, now).await?;
        tx.commit().await?;
        Ok(changed)
    }
}

impl Admin<'_> {
    /// Records (or, with `on` false, takes back) the operator's word that agent
    /// `agent`'s MCP calls of `tool` (a name or `*` pattern) may run in a later gateway
    /// session when a person confirms them after their chat ended. Returns whether it
    /// changed. A pattern that could match nothing is [`ConfirmError::InvalidSetting`],
    /// an unknown agent [`ConfirmError::UnknownAgent`].
    #[tracing::instrument(skip(self))]
    pub async fn set_run_after_disconnect(
        &self,
        agent: &str,
        tool: &str,
        on: bool,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let (agent, tool) = (agent.trim(), tool.trim());
        // A name or pattern as a rule takes it: one that could match nothing is
        // refused, not kept and ignored.
        ToolRule::new(tool, RuleAction::Allow)
            .map_err(|e| ConfirmError::InvalidSetting(e.to_string()))?;
        let mut tx = self.engine.store.begin_write().await?;
        if stored::get(tx.connection(), agent).await?.is_none() {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        }
        let changed =
            mcp_sessions::set_run_after_disconnect(tx.connection(), agent, tool, on, now).await?;
        tx.commit().await?;
        Ok(changed)
    }
}

/// Refuses a rule `pattern` of agent `agent` that can match no tool its coding agent
/// sends (issue 52: `Bash(rm *)` on a Gemini CLI agent never matched, its shell being
/// `run_shell_command`): the names come from the agent's recorded kind (its first
/// hook event, `assent_store::agents::kind_of`); an agent of no known kind accepts
/// every rule, as does a pattern that may name an MCP tool (`__` in it, or `mcp`
/// first), whose names no list holds. The error names the tools the kind sends.
pub async fn names_a_sent_tool(
    conn: &mut Connection,
    agent: &str,
    pattern: &str,
) -> Result<(), ConfirmError> {
    let Some((kind, names)) = stored::kind_of(conn, agent).await? else {
        return Ok(());
    };
    let tool = pattern.split_once('(').map_or(pattern, |(tool, _)| tool);
    let mcp = tool.contains("__") || tool.starts_with("mcp");
    if mcp
        || names
            .iter()
            .any(|name| assent_tools::name_matches(tool, name))
    {
        return Ok(());
    }
    Err(ConfirmError::InvalidRule(format!(
        "{pattern} names no tool agent {agent} sends: its hook answers {kind}, whose tools are {} (MCP tools aside); write the rule in its naming, or pass --any-name (\"anyName\": true over the API) to keep it anyway",
        names.join(", ")
    )))
}

/// [`Engine::change_rule`] on the caller's transaction, `rule` being `change`'s.
pub(crate) async fn change_rule_on(
    conn: &mut Connection,
    agent: &str,
    change: &RuleChange,
    rule: ToolRule,
    now: OffsetDateTime,
) -> Result<bool, ConfirmError> {
    let tool = rule.pattern().to_owned();
    let rule = rule.with_provenance(RuleProvenance::new(
        change.source.clone(),
        change.by.clone(),
        now,
    ));
    let Some(mut changed) = stored::set_rule(conn, agent, rule, now).await? else {
        return Err(ConfirmError::UnknownAgent(agent.to_owned()));
    };
    changed |= stored::remove_shadow_rule(conn, agent, &tool, now).await?;
    if let Some(needed) = change.approvals.filter(|_| change.condition.is_none()) {
        changed |= stored::set_approvals_needed(conn, agent, &tool, needed, now)
            .await?
            .unwrap_or(false);
    }
    if change.action.runs_unasked() {
        // Allowing a tool again accepts its current definition: one that changed
        // after it was first seen is asked about until a person does.
        changed |= host_tools::accept(conn, agent, &tool).await? > 0;
    }
    if changed && let Some(by) = change.by.as_deref() {
        stored::record_changed_by(conn, agent, by, now).await?;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimpleHost;
    use assent_tools::{GrantEvidence, ToolMode, ToolRegistry, ToolSpec};
    use std::sync::Arc;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    async fn engine() -> Engine {
        let store = Store::open("sqlite::memory:").await.expect("a store");
        let mut tools = ToolRegistry::new();
        let schema = serde_json::json!({"type": "object"});
        tools
            .register(ToolSpec::new("send", "Send.", ToolMode::Deferred, schema))
            .expect("registered");
        Engine::open(store, Arc::new(tools), Arc::new(SimpleHost::new("ops")))
            .await
            .expect("an engine")
    }

    fn suggestion(agent: &str, tool: &str) -> GrantSuggestion {
        GrantSuggestion {
            id: assent_tools::suggestion_id(agent, tool),
            agent: agent.to_owned(),
            tool: tool.to_owned(),
            pattern: None,
            rule: "allow",
            expires_at: T0 + time::Duration::days(30),
            replaces: None,
            refused: None,
            evidence: GrantEvidence {
                confirmed_unchanged: 6,
                edited: 0,
                rejected: 0,
                undone: 0,
                reviewers: 1,
                automatic: 0,
                before_definition: 0,
                first_at: T0,
                last_at: T0,
            },
        }
    }

    #[tokio::test]
    async fn each_setting_names_its_bad_input_and_an_unknown_agent_and_writes_nothing() {
        let engine = engine().await;
        let invalid = |r: Result<bool, ConfirmError>| match r {
            Err(ConfirmError::InvalidSetting(why)) => why,
            other => panic!("not an invalid setting: {other:?}"),
        };
        let unknown = |r: Result<bool, ConfirmError>| {
            assert!(
                matches!(&r, Err(ConfirmError::UnknownAgent(a)) if a == "nobody"),
                "{r:?}"
            );
        };
        let work = ["work".to_owned()];
        assert_eq!(
            invalid(engine.set_categories(" ", &work, T0).await),
            "agent id must not be blank"
        );
        assert_eq!(
            invalid(engine.set_categories("a", &[" ".to_owned()], T0).await),
            "categories needs at least one category"
        );
        assert_eq!(
            invalid(engine.admin().set_hold("nobody", " ", 30, T0).await),
            "tool must not be blank"
        );
        assert!(
            invalid(
                engine
                    .admin()
                    .set_hold("nobody", "Bash(rm *)", 30, T0)
                    .await
            )
            .contains("holds are kept per tool")
        );
        assert_eq!(
            invalid(engine.set_idempotent("nobody", "", true, T0).await),
            "the tool's name must not be blank"
        );
        unknown(engine.admin().set_hold("nobody", "send", 30, T0).await);
        unknown(engine.set_idempotent("nobody", "send", true, T0).await);
        unknown(
            engine
                .admin()
                .set_run_after_disconnect("nobody", "send", true, T0)
                .await,
        );
        unknown(
            engine
                .set_shadow_rule("nobody", "send", RuleAction::Deny, T0)
                .await,
        );
        unknown(
            engine
                .change_rule("nobody", &RuleChange::new("send", RuleAction::Deny), T0)
                .await,
        );
        assert!(engine.all_agent_settings().await.expect("read").is_empty());

        assert!(
            engine
                .set_categories(" a ", &work, T0)
                .await
                .expect("created")
        );
        assert!(!engine.set_categories("a", &work, T0).await.expect("again"));
        assert!(
            engine
                .admin()
                .set_hold("a", " send ", 30, T0)
                .await
                .expect("held")
        );
        assert!(
            !engine
                .admin()
                .set_hold("a", "send", 30, T0)
                .await
                .expect("the same")
        );
        assert!(
            engine
                .set_idempotent("a", "send", true, T0)
                .await
                .expect("said")
        );
        let settings = engine.agent_settings("a").await.expect("read").expect("a");
        assert_eq!(settings.holds, [("send".to_owned(), 30)]);
        assert_eq!(
            settings.idempotent_tools,
            BTreeSet::from(["send".to_owned()])
        );
    }

    #[tokio::test]
    async fn a_rule_promotes_the_shadow_rule_and_a_suggestion_never_weakens_what_came_since() {
        let engine = engine().await;
        engine
            .set_categories("a", &["work".to_owned()], T0)
            .await
            .expect("created");
        assert!(
            engine
                .set_shadow_rule("a", "send", RuleAction::Allow, T0)
                .await
                .expect("shadowed")
        );
        let ask = RuleChange {
            approvals: Some(2),
            ..RuleChange::new("send", RuleAction::Ask)
        };
        assert!(engine.change_rule("a", &ask, T0).await.expect("set"));
        let settings = engine.agent_settings("a").await.expect("read").expect("a");
        assert!(settings.shadow_rules.is_empty(), "{settings:?}");
        assert_eq!(settings.quorums, [("send".to_owned(), 2)]);

        // A quorum set since the suggestion was listed: refused, nothing written.
        let refused = engine
            .apply_suggestion(&suggestion("a", "send"), Some("alice"), T0)
            .await
            .expect_err("refused");
        assert_eq!(
            refused.conflict_kind(),
            Some(ConflictKind::SuggestionRefused)
        );
        assert!(
            refused.to_string().contains("needs 2 approvals"),
            "{refused}"
        );
        let after = engine.agent_settings("a").await.expect("read").expect("a");
        assert_eq!(after, settings);

        // Without the quorum it applies, with its expiry.
        let one = RuleChange {
            approvals: Some(1),
            ..RuleChange::new("send", RuleAction::Ask)
        };
        engine.change_rule("a", &one, T0).await.expect("set");
        assert!(
            engine
                .apply_suggestion(&suggestion("a", "send"), Some("alice"), T0)
                .await
                .expect("applied")
        );
        let applied = engine.agent_settings("a").await.expect("read").expect("a");
        let rule = &applied.agent.policy.rules()[0];
        assert_eq!(
            (rule.action(), rule.expires_at()),
            (RuleAction::Allow, Some(T0 + time::Duration::days(30)))
        );
    }
}
