//! Agents and their execution policies. A rule's expiry (`assent agent allow A T --for
//! 30d`) is kept in its JSON as `expiresAt`; [`policy_at`] leaves out the rules expired
//! at a given time. Shadow rules (`--shadow`), tried without effect, are kept apart in
//! `shadow_rules`, where no router reads them.

use crate::Connection;
use crate::{StoreError, chain, timefmt};
use assent_tools::{
    AgentPolicy, RuleAction, RuleProvenance, ToolRule, ToolSettingEntry, ToolSettingsTable,
};
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;

/// Creates the agent or replaces its policy.
pub async fn upsert(
    conn: &mut Connection,
    agent_id: &str,
    policy: &AgentPolicy,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let categories: Vec<&str> = policy.allowed_categories().collect();
    let rules: Vec<Value> = policy
        .rules()
        .iter()
        .map(|r| {
            let mut rule = json!({"pattern": r.pattern(), "action": r.action().as_str()});
            if let Some(at) = r.expires_at() {
                rule["expiresAt"] = json!(timefmt::format(at));
            }
            with_condition(&mut rule, r);
            // Where it came from (issue 57), beside what it says; a rule stored before
            // has none and reads as it did.
            if let Some(provenance) = r.provenance()
                && let (Some(rule), Value::Object(fields)) =
                    (rule.as_object_mut(), provenance.to_json())
            {
                rule.extend(fields);
            }
            rule
        })
        .collect();
    sqlx::query(
        "INSERT INTO agents (id, categories, rules, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
         ON CONFLICT (id) DO UPDATE SET categories = excluded.categories, rules = excluded.rules, updated_at = excluded.updated_at",
    )
    .bind(agent_id)
    .bind(json!(categories).to_string())
    .bind(Value::Array(rules).to_string())
    .bind(timefmt::format(now))
    .execute(&mut *conn)
    .await?;
    chain::append_rules(conn, agent_id, now).await
}

/// An agent as stored: its id, its policy and when it was created and last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The agent's id.
    pub id: String,
    /// Its categories and rules.
    pub policy: AgentPolicy,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When its policy was last written.
    pub updated_at: OffsetDateTime,
}

/// The agent's policy in force at `now`: its rules expired by then left out (the
/// tool's mode decides again), or `None` when no such agent exists. [`get`] keeps them.
pub async fn policy_at(
    conn: &mut Connection,
    agent_id: &str,
    now: OffsetDateTime,
) -> Result<Option<AgentPolicy>, StoreError> {
    Ok(get(conn, agent_id)
        .await?
        .map(|agent| agent.policy.in_force(now)))
}

/// Enters on the consent chain that `by` made the change agent `agent_id`'s rules
/// now show (its rules entry again, naming who).
pub async fn record_changed_by(
    conn: &mut Connection,
    agent_id: &str,
    by: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    chain::append_rules_by(conn, agent_id, Some(by), now).await
}

/// Sets agent `agent_id`'s rule for `rule`'s pattern to `rule` (its expiry included),
/// in the place of the rule it had for exactly that pattern, keeping its categories
/// and other rules (expired ones included). Returns `None` for an unknown agent, else
/// whether anything changed (setting the rule it has writes nothing).
pub async fn set_rule(
    conn: &mut Connection,
    agent_id: &str,
    rule: ToolRule,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    change_policy(conn, agent_id, now, |policy| {
        policy.with_rule_replaced(rule)
    })
    .await
}

/// Removes agent `agent_id`'s rule for exactly `pattern`, entered on the consent chain
/// as every change of its rules is ([`upsert`]): whether it had one, or `None` when no
/// such agent exists.
pub async fn remove_rule(
    conn: &mut Connection,
    agent_id: &str,
    pattern: &str,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    change_policy(conn, agent_id, now, |policy| policy.without_rule(pattern)).await
}

/// Writes agent `agent_id`'s rules as `change` makes them from the ones it has (on the
/// consent chain, through [`upsert`]) when that changes anything: whether it did, or
/// `None` when no such agent exists.
async fn change_policy(
    conn: &mut Connection,
    agent_id: &str,
    now: OffsetDateTime,
    change: impl FnOnce(AgentPolicy) -> AgentPolicy,
) -> Result<Option<bool>, StoreError> {
    let Some(agent) = get(conn, agent_id).await? else {
        return Ok(None);
    };
    let old = agent.policy;
    let policy = change(old.clone());
    let changed = policy != old;
    if changed {
        upsert(conn, agent_id, &policy, now).await?;
    }
    Ok(Some(changed))
}

/// The agent `agent_id`, or `None` when no such agent exists.
pub async fn get(conn: &mut Connection, agent_id: &str) -> Result<Option<Agent>, StoreError> {
    sqlx::query("SELECT id, categories, rules, created_at, updated_at FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Every agent, by id.
pub async fn list(conn: &mut Connection) -> Result<Vec<Agent>, StoreError> {
    sqlx::query("SELECT id, categories, rules, created_at, updated_at FROM agents ORDER BY id")
        .fetch_all(conn)
        .await?
        .iter()
        .map(from_row)
        .collect()
}

fn from_row(row: &AnyRow) -> Result<Agent, StoreError> {
    let categories: String = row.try_get("categories")?;
    let rules: String = row.try_get("rules")?;
    Ok(Agent {
        id: row.try_get("id")?,
        policy: policy_from(&categories, &rules)?,
        created_at: timefmt::parse("agents", &row.try_get::<String, _>("created_at")?)?,
        updated_at: timefmt::parse("agents", &row.try_get::<String, _>("updated_at")?)?,
    })
}

/// A rule's JSON with its condition over the history (`condition`, absent in the rows
/// of rules without one, as in every row written before conditions existed).
fn with_condition(json: &mut Value, rule: &ToolRule) {
    if let Some(condition) = rule.condition() {
        json["condition"] = json!(condition);
    }
}

/// `rule` with the condition its stored JSON `json` holds, if any.
fn condition_of(json: &Value, rule: ToolRule) -> Result<ToolRule, StoreError> {
    match json.get("condition") {
        None | Some(Value::Null) => Ok(rule),
        Some(condition) => {
            let condition: assent_tools::Condition = serde_json::from_value(condition.clone())
                .map_err(|e| StoreError::corrupt("agents", e))?;
            Ok(rule.when(condition))
        }
    }
}

/// The policy stored as `categories` and `rules` (every rule, expired ones included).
fn policy_from(categories: &str, rules: &str) -> Result<AgentPolicy, StoreError> {
    let categories: Vec<String> =
        serde_json::from_str(categories).map_err(|e| StoreError::corrupt("agents", e))?;
    let rules: Vec<Value> =
        serde_json::from_str(rules).map_err(|e| StoreError::corrupt("agents", e))?;
    let mut policy = AgentPolicy::new(categories);
    for rule in rules {
        let pattern = rule["pattern"].as_str().unwrap_or_default();
        let action: RuleAction = rule["action"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .map_err(|e: String| StoreError::corrupt("agents", e))?;
        let mut parsed =
            ToolRule::new(pattern, action).map_err(|e| StoreError::corrupt("agents", e))?;
        if let Some(at) = rule["expiresAt"].as_str() {
            parsed = parsed.until(timefmt::parse("agents", at)?);
        }
        if let Some(provenance) =
            RuleProvenance::from_json(&rule).map_err(|e| StoreError::corrupt("agents", e))?
        {
            parsed = parsed.with_provenance(provenance);
        }
        policy = policy.with_rule(condition_of(&rule, parsed)?);
    }
    Ok(policy)
}

/// An agent's rules as a decision reads them with its set
/// ([`crate::change_sets::load_for_decision`]): its policy (expired rules included),
/// its per-tool settings and its shadow rules.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRules {
    policy: AgentPolicy,
    settings: ToolSettingsTable,
    shadow_rules: Vec<ShadowRule>,
}

impl StoredRules {
    /// The policy in force at `now` and the agent's settings of `tool_name`: what
    /// [`policy_and_settings_at`] reads.
    pub fn at(&self, tool_name: &str, now: OffsetDateTime) -> (AgentPolicy, ToolSettings) {
        let settings = settings_for(&self.settings, tool_name, self.shadow_rules.clone());
        (self.policy.in_force(now), settings)
    }

    /// The agent's shadow rules, in the order first set.
    pub fn shadow_rules(&self) -> &[ShadowRule] {
        &self.shadow_rules
    }
}

/// The [`StoredRules`] of `row`, which holds an agent's `categories`, `rules`,
/// `tool_settings` and `shadow_rules` in the columns `columns` names, in that order.
pub(crate) fn stored_rules(
    row: &impl crate::row::StoreRow,
    columns: [&str; 4],
) -> Result<StoredRules, StoreError> {
    let [categories, rules, settings, shadows] = columns;
    let categories: String = row.value(categories)?;
    let rules: String = row.value(rules)?;
    let settings: String = row.value(settings)?;
    let shadows: String = row.value(shadows)?;
    Ok(StoredRules {
        policy: policy_from(&categories, &rules)?,
        settings: settings_table(&parse_tool_settings(&settings)?),
        shadow_rules: parse_shadow_rules(&shadows)?,
    })
}

/// A rule tried without effect (`assent agent allow A T --shadow`): it never routes a
/// call; its report compares it with what people decided since `since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowRule {
    /// The rule it would be.
    pub rule: ToolRule,
    /// When it was set.
    pub since: OffsetDateTime,
}

/// Agent `agent_id`'s shadow rules, in the order first set, or `None` for an unknown
/// agent.
pub async fn shadow_rules(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Option<Vec<ShadowRule>>, StoreError> {
    let text: Option<String> = sqlx::query_scalar("SELECT shadow_rules FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?;
    text.as_deref().map(parse_shadow_rules).transpose()
}

fn parse_shadow_rules(text: &str) -> Result<Vec<ShadowRule>, StoreError> {
    let rules: Vec<Value> =
        serde_json::from_str(text).map_err(|e| StoreError::corrupt("agents", e))?;
    rules
        .iter()
        .map(|rule| {
            let action: RuleAction = rule["action"]
                .as_str()
                .unwrap_or_default()
                .parse()
                .map_err(|e: String| StoreError::corrupt("agents", e))?;
            let pattern = rule["pattern"].as_str().unwrap_or_default();
            Ok(ShadowRule {
                rule: condition_of(
                    rule,
                    ToolRule::new(pattern, action).map_err(|e| StoreError::corrupt("agents", e))?,
                )?,
                since: timefmt::parse("agents", rule["since"].as_str().unwrap_or_default())?,
            })
        })
        .collect()
}

async fn write_shadow_rules(
    conn: &mut Connection,
    agent_id: &str,
    rules: &[ShadowRule],
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let json: Vec<Value> = rules
        .iter()
        .map(|s| {
            let mut rule = json!({"pattern": s.rule.pattern(), "action": s.rule.action().as_str(),
                "since": timefmt::format(s.since)});
            with_condition(&mut rule, &s.rule);
            rule
        })
        .collect();
    sqlx::query("UPDATE agents SET shadow_rules = $1, updated_at = $2 WHERE id = $3")
        .bind(Value::Array(json).to_string())
        .bind(timefmt::format(now))
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
    chain::append_rules(conn, agent_id, now).await
}

/// Sets agent `agent_id`'s shadow rule for `rule`'s pattern, from `now` on (the same
/// rule again keeps its start). `None` for an unknown agent, else whether it changed.
pub async fn set_shadow_rule(
    conn: &mut Connection,
    agent_id: &str,
    rule: ToolRule,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    let Some(mut rules) = shadow_rules(conn, agent_id).await? else {
        return Ok(None);
    };
    if rules.iter().any(|s| s.rule == rule) {
        return Ok(Some(false));
    }
    let shadow = ShadowRule { rule, since: now };
    match rules
        .iter_mut()
        .find(|s| s.rule.pattern() == shadow.rule.pattern())
    {
        Some(existing) => *existing = shadow,
        None => rules.push(shadow),
    }
    write_shadow_rules(conn, agent_id, &rules, now).await?;
    Ok(Some(true))
}

/// Removes agent `agent_id`'s shadow rule for `pattern` (a rule set for real promotes
/// it); whether there was one.
pub async fn remove_shadow_rule(
    conn: &mut Connection,
    agent_id: &str,
    pattern: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let Some(mut rules) = shadow_rules(conn, agent_id).await? else {
        return Ok(false);
    };
    let before = rules.len();
    rules.retain(|s| s.rule.pattern() != pattern);
    if rules.len() == before {
        return Ok(false);
    }
    write_shadow_rules(conn, agent_id, &rules, now).await?;
    Ok(true)
}

/// Agent `agent_id`'s per-tool settings (migration 0016) as stored: a JSON object keyed
/// by tool name, or `None` for an unknown agent.
async fn tool_settings(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Option<serde_json::Map<String, Value>>, StoreError> {
    let text: Option<String> = sqlx::query_scalar("SELECT tool_settings FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?;
    text.as_deref().map(parse_tool_settings).transpose()
}

fn parse_tool_settings(text: &str) -> Result<serde_json::Map<String, Value>, StoreError> {
    match serde_json::from_str(text).map_err(|e| StoreError::corrupt("agents", e))? {
        Value::Object(settings) => Ok(settings),
        other => Err(StoreError::corrupt(
            "agents",
            format!("tool_settings is not an object: {other}"),
        )),
    }
}

/// What an agent's settings say about one of its tools, read together (one statement
/// on a confirmation's path). The default: no hold, one approval, no shadow rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettings {
    /// Its hold window (`assent agent hold`), when it has one.
    pub hold: Option<time::Duration>,
    /// How many distinct people must confirm an item of it (1 without a quorum).
    pub approvals_needed: u32,
    /// The agent's shadow rules (all of them: a decision finds the one covering it).
    pub shadow_rules: Vec<ShadowRule>,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            hold: None,
            approvals_needed: 1,
            shadow_rules: Vec::new(),
        }
    }
}

/// Agent `agent_id`'s settings for `tool_name` (the defaults for an unknown agent).
pub async fn tool_settings_for(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
) -> Result<ToolSettings, StoreError> {
    let row = sqlx::query("SELECT tool_settings, shadow_rules FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?;
    match row {
        Some(row) => settings_from_row(&row, tool_name),
        None => Ok(ToolSettings::default()),
    }
}

/// The agent's policy in force at `now` ([`policy_at`]) and its settings for
/// `tool_name` ([`tool_settings_for`]), in one read; `None` for an unknown agent.
pub async fn policy_and_settings_at(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
    now: OffsetDateTime,
) -> Result<Option<(AgentPolicy, ToolSettings)>, StoreError> {
    let row = sqlx::query(
        "SELECT categories, rules, tool_settings, shadow_rules FROM agents WHERE id = $1",
    )
    .bind(agent_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let columns = ["categories", "rules", "tool_settings", "shadow_rules"];
    Ok(Some(stored_rules(&row, columns)?.at(tool_name, now)))
}

/// The agent's policy in force at `now` and all its per-tool settings (quorums, holds),
/// in one read: what the decision point needs for any of its tools. `None` for an
/// unknown agent.
pub async fn rules_at(
    conn: &mut Connection,
    agent_id: &str,
    now: OffsetDateTime,
) -> Result<Option<(AgentPolicy, ToolSettingsTable)>, StoreError> {
    let row = sqlx::query(
        "SELECT id, categories, rules, created_at, updated_at, tool_settings
         FROM agents WHERE id = $1",
    )
    .bind(agent_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let agent = from_row(&row)?;
    let settings: String = row.try_get("tool_settings")?;
    Ok(Some((
        agent.policy.in_force(now),
        settings_table(&parse_tool_settings(&settings)?),
    )))
}

/// [`rules_at`] with how the agent's rejections are remembered
/// ([`crate::rejections`]), in the same one read: what a wake needs.
pub async fn rules_and_rejection_memory_at(
    conn: &mut Connection,
    agent_id: &str,
    now: OffsetDateTime,
) -> Result<
    Option<(
        AgentPolicy,
        ToolSettingsTable,
        crate::rejection_memory::RejectionMemory,
    )>,
    StoreError,
> {
    let row = sqlx::query(
        "SELECT id, categories, rules, created_at, updated_at, tool_settings, rejection_memory
         FROM agents WHERE id = $1",
    )
    .bind(agent_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let agent = from_row(&row)?;
    let settings: String = row.try_get("tool_settings")?;
    let memory: String = row.try_get("rejection_memory")?;
    Ok(Some((
        agent.policy.in_force(now),
        settings_table(&parse_tool_settings(&settings)?),
        crate::rejection_memory::RejectionMemory::parse(&memory)?,
    )))
}

/// An agent's categories and rules, by id: what [`policy_in_force`] decodes.
pub(crate) const POLICY: &str = "SELECT categories, rules FROM agents WHERE id = $1";

/// The policy in force at `now` of a row naming `categories` and `rules` (either kind
/// of row), as [`policy_at`] reads it.
pub(crate) fn policy_in_force(
    row: &impl crate::row::StoreRow,
    now: OffsetDateTime,
) -> Result<AgentPolicy, StoreError> {
    let categories: String = row.value("categories")?;
    let rules: String = row.value("rules")?;
    Ok(policy_from(&categories, &rules)?.in_force(now))
}

/// The agent's policy in force at `now`, its tool settings and how it remembers
/// rejections, from a row naming `categories`, `rules`, `tool_settings` and
/// `rejection_memory` (either kind of row): what [`rules_and_rejection_memory_at`]
/// reads, for reads that take them with more ([`crate::decisions::wake`]).
pub(crate) fn wake_rules(
    row: &impl crate::row::StoreRow,
    now: OffsetDateTime,
) -> Result<
    (
        AgentPolicy,
        ToolSettingsTable,
        crate::rejection_memory::RejectionMemory,
    ),
    StoreError,
> {
    let categories: String = row.value("categories")?;
    let rules: String = row.value("rules")?;
    let settings: String = row.value("tool_settings")?;
    let memory: String = row.value("rejection_memory")?;
    Ok((
        policy_from(&categories, &rules)?.in_force(now),
        settings_table(&parse_tool_settings(&settings)?),
        crate::rejection_memory::RejectionMemory::parse(&memory)?,
    ))
}

fn settings_from_row(row: &AnyRow, tool_name: &str) -> Result<ToolSettings, StoreError> {
    let settings: String = row.try_get("tool_settings")?;
    let shadows: String = row.try_get("shadow_rules")?;
    let table = settings_table(&parse_tool_settings(&settings)?);
    Ok(settings_for(
        &table,
        tool_name,
        parse_shadow_rules(&shadows)?,
    ))
}

/// The settings of `tool_name` in `table`, with the agent's `shadow_rules`.
fn settings_for(
    table: &ToolSettingsTable,
    tool_name: &str,
    shadow_rules: Vec<ShadowRule>,
) -> ToolSettings {
    let needs = table.requirements(tool_name);
    ToolSettings {
        hold: needs.hold,
        approvals_needed: needs.approvals_needed,
        shadow_rules,
    }
}

/// The stored settings as the decision point reads them: each key a tool name or a
/// pattern, matched as rules are.
fn settings_table(settings: &serde_json::Map<String, Value>) -> ToolSettingsTable {
    ToolSettingsTable::new(
        settings
            .iter()
            .map(|(pattern, setting)| ToolSettingEntry {
                pattern: pattern.clone(),
                approvals: setting_number(setting, APPROVALS),
                hold_seconds: setting_number(setting, HOLD_SECONDS),
            })
            .collect(),
    )
}

/// Agent `agent_id`'s per-tool settings (quorums, holds) as the decision point reads
/// them; empty for an unknown agent.
pub async fn settings_of(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<ToolSettingsTable, StoreError> {
    Ok(settings_table(
        &tool_settings(conn, agent_id).await?.unwrap_or_default(),
    ))
}

/// Agent `agent_id`'s tools whose setting `key` is a number above zero, with it, by
/// tool name; empty for an unknown agent.
async fn numbered_settings(
    conn: &mut Connection,
    agent_id: &str,
    key: &str,
) -> Result<Vec<(String, u32)>, StoreError> {
    let settings = tool_settings(conn, agent_id).await?.unwrap_or_default();
    let mut found: Vec<(String, u32)> = settings
        .iter()
        .filter_map(|(tool, setting)| Some((tool.clone(), setting_number(setting, key)?)))
        .collect();
    found.sort();
    Ok(found)
}

/// A tool's setting `key` (`holdSeconds`, `approvals`) when it is a number above zero.
fn setting_number(setting: &Value, key: &str) -> Option<u32> {
    let number = u32::try_from(setting.get(key)?.as_u64()?).ok()?;
    (number > 0).then_some(number)
}

/// Sets agent `agent_id`'s setting `key` of `tool_name` to `value` (`None` removes
/// it), keeping its other settings. `None` for an unknown agent, else whether it
/// changed.
async fn set_tool_setting(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
    key: &str,
    value: Option<u32>,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    if tool_name.contains(['(', ')']) {
        return Err(StoreError::ArgumentPatternSetting(tool_name.to_owned()));
    }
    let Some(mut settings) = tool_settings(conn, agent_id).await? else {
        return Ok(None);
    };
    let before = settings.clone();
    let entry = settings
        .entry(tool_name.to_owned())
        .or_insert_with(|| json!({}));
    let Value::Object(setting) = entry else {
        return Err(StoreError::corrupt(
            "agents",
            format!("tool_settings[{tool_name:?}] is not an object"),
        ));
    };
    match value {
        Some(value) => setting.insert(key.to_owned(), json!(value)),
        None => setting.remove(key),
    };
    if setting.is_empty() {
        settings.remove(tool_name);
    }
    if settings == before {
        return Ok(Some(false));
    }
    sqlx::query("UPDATE agents SET tool_settings = $1, updated_at = $2 WHERE id = $3")
        .bind(Value::Object(settings).to_string())
        .bind(timefmt::format(now))
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
    chain::append_rules(conn, agent_id, now).await?;
    Ok(Some(true))
}

/// Agent `agent_id`'s hold windows (`assent agent hold`): tool name and seconds, by
/// tool name; empty for an unknown agent.
pub async fn holds(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Vec<(String, u32)>, StoreError> {
    numbered_settings(conn, agent_id, HOLD_SECONDS).await
}

/// Sets agent `agent_id`'s hold window for `tool_name` to `seconds` (0 removes it),
/// keeping its other settings. `None` for an unknown agent, else whether it changed.
pub async fn set_hold(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
    seconds: u32,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    let value = (seconds > 0).then_some(seconds);
    set_tool_setting(conn, agent_id, tool_name, HOLD_SECONDS, value, now).await
}

/// Agent `agent_id`'s quorums (`assent agent ask … --approvals N`): the tools whose
/// items need more than one person's confirmation, with how many, by tool name.
pub async fn quorums(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Vec<(String, u32)>, StoreError> {
    Ok(numbered_settings(conn, agent_id, APPROVALS)
        .await?
        .into_iter()
        .filter(|(_, needed)| *needed > 1)
        .collect())
}

/// Sets how many distinct people must confirm agent `agent_id`'s items of
/// `tool_name` (1 removes the quorum). `None` for an unknown agent, else whether it
/// changed.
pub async fn set_approvals_needed(
    conn: &mut Connection,
    agent_id: &str,
    tool_name: &str,
    needed: u32,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    let value = (needed > 1).then_some(needed);
    set_tool_setting(conn, agent_id, tool_name, APPROVALS, value, now).await
}

const HOLD_SECONDS: &str = "holdSeconds";
const APPROVALS: &str = "approvals";

/// The coding agent behind agent `agent`'s hook, and the tool names that kind sends,
/// as its first hook event recorded them ([`record_kind`]); `None` when no hook event of
/// it arrived (or the kind's names are not known).
pub async fn kind_of(
    conn: &mut Connection,
    agent: &str,
) -> Result<Option<(String, Vec<String>)>, StoreError> {
    let row = sqlx::query("SELECT kind, tool_names FROM agent_kinds WHERE agent_id = $1")
        .bind(agent)
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let names: String = row.try_get("tool_names")?;
    let names: Vec<String> = serde_json::from_str(&names)
        .map_err(|e| StoreError::corrupt("agent_kinds", format!("tool_names: {e}")))?;
    Ok(Some((row.try_get("kind")?, names)))
}

/// Records that agent `agent`'s hook is answered for a coding agent of `kind`, which
/// sends the tools `names` (MCP tools aside), unless that is recorded already.
/// Returns whether it changed.
pub async fn record_kind(
    conn: &mut Connection,
    agent: &str,
    kind: &str,
    names: &[&str],
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let names = serde_json::to_string(names)
        .map_err(|e| StoreError::corrupt("agent_kinds", e.to_string()))?;
    let done = sqlx::query(
        "INSERT INTO agent_kinds (agent_id, kind, tool_names, recorded_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (agent_id) DO UPDATE
            SET kind = excluded.kind, tool_names = excluded.tool_names, recorded_at = excluded.recorded_at
            WHERE agent_kinds.kind <> excluded.kind OR agent_kinds.tool_names <> excluded.tool_names",
    )
    .bind(agent)
    .bind(kind)
    .bind(names)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use time::Duration;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    #[tokio::test]
    async fn an_expiring_rule_round_trips_and_drops_out_of_the_policy_in_force() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let rule = |action| ToolRule::new("set_title", action).expect("a rule");
        assert_eq!(
            set_rule(&mut conn, "a", rule(RuleAction::Allow), T0)
                .await
                .expect("set"),
            None,
            "no such agent"
        );
        upsert(&mut conn, "a", &AgentPolicy::new(["work"]), T0)
            .await
            .expect("agent");
        let expiring = rule(RuleAction::Allow).until(T0 + Duration::days(30));
        assert_eq!(
            set_rule(&mut conn, "a", expiring.clone(), T0)
                .await
                .expect("set"),
            Some(true)
        );
        assert_eq!(
            set_rule(&mut conn, "a", expiring.clone(), T0)
                .await
                .expect("again"),
            Some(false)
        );
        let stored = get(&mut conn, "a").await.expect("read").expect("found");
        assert_eq!(stored.policy.rules(), std::slice::from_ref(&expiring));

        let day = |n| T0 + Duration::days(n);
        let before = policy_at(&mut conn, "a", day(29)).await.expect("read");
        assert_eq!(before.expect("found").rules(), [expiring]);
        let after = policy_at(&mut conn, "a", day(30)).await.expect("read");
        assert!(after.expect("found").rules().is_empty());
        // The stored agent keeps it for `agent show`; a permanent rule replaces it.
        assert_eq!(
            set_rule(&mut conn, "a", rule(RuleAction::Allow), day(31))
                .await
                .expect("set"),
            Some(true)
        );
        let stored = get(&mut conn, "a").await.expect("read").expect("found");
        assert_eq!(stored.policy.rules()[0].expires_at(), None);
    }

    #[tokio::test]
    async fn shadow_rules_are_kept_apart_from_the_policy() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let allow = ToolRule::new("set_title", RuleAction::Allow).expect("a rule");
        assert_eq!(
            set_shadow_rule(&mut conn, "a", allow.clone(), T0)
                .await
                .expect("set"),
            None
        );
        upsert(&mut conn, "a", &AgentPolicy::new(["work"]), T0)
            .await
            .expect("agent");
        let later = T0 + Duration::hours(1);
        assert_eq!(
            set_shadow_rule(&mut conn, "a", allow.clone(), T0)
                .await
                .expect("set"),
            Some(true)
        );
        assert_eq!(
            set_shadow_rule(&mut conn, "a", allow.clone(), later)
                .await
                .expect("again"),
            Some(false),
            "the same rule keeps its start"
        );
        let shadows = shadow_rules(&mut conn, "a")
            .await
            .expect("read")
            .expect("agent");
        assert_eq!(
            shadows,
            [ShadowRule {
                rule: allow,
                since: T0
            }]
        );
        let policy = policy_at(&mut conn, "a", later)
            .await
            .expect("read")
            .expect("agent");
        assert!(policy.rules().is_empty(), "a shadow rule never routes");
        // Rewriting the policy keeps the shadow rules; promotion removes one.
        upsert(&mut conn, "a", &AgentPolicy::new(["home"]), later)
            .await
            .expect("agent");
        assert_eq!(
            shadow_rules(&mut conn, "a")
                .await
                .expect("read")
                .map(|s| s.len()),
            Some(1)
        );
        assert!(
            remove_shadow_rule(&mut conn, "a", "set_title", later)
                .await
                .expect("rm")
        );
        assert!(
            !remove_shadow_rule(&mut conn, "a", "set_title", later)
                .await
                .expect("rm")
        );
    }

    #[tokio::test]
    async fn hold_windows_are_set_per_tool_and_removed_by_zero() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        assert_eq!(
            set_hold(&mut conn, "a", "set_title", 12, T0)
                .await
                .expect("set"),
            None,
            "an unknown agent"
        );
        upsert(&mut conn, "a", &AgentPolicy::new(["work"]), T0)
            .await
            .expect("agent");
        assert_eq!(
            set_hold(&mut conn, "a", "set_title", 12, T0)
                .await
                .expect("set"),
            Some(true)
        );
        assert_eq!(
            set_hold(&mut conn, "a", "set_title", 12, T0)
                .await
                .expect("again"),
            Some(false)
        );
        set_hold(&mut conn, "a", "delete", 30, T0)
            .await
            .expect("set");
        assert_eq!(
            holds(&mut conn, "a").await.expect("read"),
            [("delete".to_owned(), 30), ("set_title".to_owned(), 12)]
        );
        let set_title = tool_settings_for(&mut conn, "a", "set_title").await;
        assert_eq!(set_title.expect("read").hold, Some(Duration::seconds(12)));
        let other = tool_settings_for(&mut conn, "a", "other").await;
        assert_eq!(other.expect("read"), ToolSettings::default());
        // Rewriting the policy keeps the holds; zero removes one.
        upsert(&mut conn, "a", &AgentPolicy::new(["home"]), T0)
            .await
            .expect("agent");
        assert_eq!(
            set_hold(&mut conn, "a", "set_title", 0, T0)
                .await
                .expect("rm"),
            Some(true)
        );
        assert_eq!(
            holds(&mut conn, "a").await.expect("read"),
            [("delete".to_owned(), 30)]
        );
        assert_eq!(
            set_hold(&mut conn, "a", "set_title", 0, T0)
                .await
                .expect("rm"),
            Some(false)
        );
    }
}
