//! Agents and their execution policies.

use crate::{StoreError, timefmt};
use assent_tools::{AgentPolicy, RuleAction, ToolRule};
use serde_json::{Value, json};
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

/// The agent's policy, or `None` when no such agent exists.
pub async fn policy(
    conn: &mut AnyConnection,
    agent_id: &str,
) -> Result<Option<AgentPolicy>, StoreError> {
    let Some(row) = sqlx::query("SELECT categories, rules FROM agents WHERE id = $1")
        .bind(agent_id)
        .fetch_optional(conn)
        .await?
    else {
        return Ok(None);
    };
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
    Ok(Some(policy))
}
