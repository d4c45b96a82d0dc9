//! Agents and their execution policies.

use crate::{StoreError, timefmt};
use assent_tools::{AgentPolicy, RuleAction, ToolRule};
use serde_json::{Value, json};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use time::OffsetDateTime;

/// Creates the agent or replaces its policy.
pub async fn upsert(
    conn: &mut AnyConnection,
    agent_id: &str,
    policy: &AgentPolicy,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let categories: Vec<&str> = policy.allowed_categories().collect();
    let rules: Vec<Value> = policy
        .rules()
        .iter()
        .map(|r| json!({"pattern": r.pattern(), "action": r.action().as_str()}))
        .collect();
    let now = timefmt::format(now);
    sqlx::query(
        "INSERT INTO agents (id, categories, rules, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
         ON CONFLICT (id) DO UPDATE SET categories = excluded.categories, rules = excluded.rules, updated_at = excluded.updated_at",
    )
    .bind(agent_id)
    .bind(json!(categories).to_string())
    .bind(Value::Array(rules).to_string())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
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

/// The agent's policy, or `None` when no such agent exists.
pub async fn policy(
    conn: &mut AnyConnection,
    agent_id: &str,
) -> Result<Option<AgentPolicy>, StoreError> {
    Ok(get(conn, agent_id).await?.map(|agent| agent.policy))
}

/// The agent `agent_id`, or `None` when no such agent exists.
pub async fn get(conn: &mut AnyConnection, agent_id: &str) -> Result<Option<Agent>, StoreError> {
    sqlx::query("SELECT id, categories, rules, created_at, updated_at FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Every agent, by id.
pub async fn list(conn: &mut AnyConnection) -> Result<Vec<Agent>, StoreError> {
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
    let categories: Vec<String> =
        serde_json::from_str(&categories).map_err(|e| StoreError::corrupt("agents", e))?;
    let rules: Vec<Value> =
        serde_json::from_str(&rules).map_err(|e| StoreError::corrupt("agents", e))?;
    let mut policy = AgentPolicy::new(categories);
    for rule in rules {
        let pattern = rule["pattern"].as_str().unwrap_or_default();
        let action: RuleAction = rule["action"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .map_err(|e: String| StoreError::corrupt("agents", e))?;
        policy = policy.with_rule(
            ToolRule::new(pattern, action).map_err(|e| StoreError::corrupt("agents", e))?,
        );
    }
    Ok(Agent {
        id: row.try_get("id")?,
        policy,
        created_at: timefmt::parse("agents", &row.try_get::<String, _>("created_at")?)?,
        updated_at: timefmt::parse("agents", &row.try_get::<String, _>("updated_at")?)?,
    })
}
