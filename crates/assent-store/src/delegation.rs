//! Delegated confirmation: the "always" grants a parent gave its sub-agents, and the log
//! of every question a sub-agent's call raised, linking each resulting decision to the
//! asking agent path.

use crate::Connection;
use crate::{StoreError, chain, outbox, timefmt};
use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

/// Outbox entity kind of a grant: other devices must honour a revocation too.
pub const GRANT_ENTITY: &str = "grant";
/// Outbox entity kind of a delegation record.
pub const DELEGATION_ENTITY: &str = "delegation";

/// "Run this tool for this agent without asking", for matching arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// Its id (`assent grants revoke ID`).
    pub id: Uuid,
    /// The agent it was given to: the one whose change set the answer decided. A grant
    /// covers only this agent's calls, whatever sub-agent path another agent names.
    /// `None` only for a grant from before grants were bound to agents whose answer
    /// cannot be found any more; it covers nothing.
    pub agent_id: Option<String>,
    /// The agent path it is for (`root/child`), exactly.
    pub agent_path: String,
    /// The tool it is for, exactly.
    pub tool_name: String,
    /// The call's arguments must contain this value; every call when `None`.
    pub args_pattern: Option<Value>,
    /// The answer that created it.
    pub correlation_id: String,
    /// When it was given.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it was revoked; a revoked grant allows nothing.
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
    /// A "yes, for this session" grant: the coding agent's session (its hook events'
    /// `session_id`) it covers, alone; `None` for a sub-agent's "always" grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A session grant's rule pattern, as the person saw it (`Bash(git status*)`);
    /// `None` for a session grant of what `args_pattern` binds ([`session_binding`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_pattern: Option<String>,
}

impl Grant {
    /// Whether the grant covers a call with `args`: not revoked, and the arguments
    /// contain the pattern.
    pub fn covers(&self, args: &Value) -> bool {
        self.revoked_at.is_none()
            && self.session_id.is_none()
            && self
                .args_pattern
                .as_ref()
                .is_none_or(|pattern| contains(args, pattern))
    }

    /// Whether this session grant covers a call of its tool with `args` in workspace
    /// `target_id` ([`session_covers`]); a revoked grant, or one of no session,
    /// covers nothing.
    pub fn covers_in_session(&self, args: &Value, target_id: &str) -> bool {
        self.revoked_at.is_none()
            && self.session_id.is_some()
            && session_covers(
                self.call_pattern.as_deref(),
                self.args_pattern.as_ref(),
                &self.tool_name,
                args,
                target_id,
            )
    }
}

/// Whether a session grant of `tool` covers a call of it with `args` in workspace
/// `target_id`: its rule pattern surely covers the call (an unsure match, a chained
/// command or a `..` path, never allows: `assent_tools::call_covers`), or, with no
/// pattern, the call binds exactly what the person answered ([`session_binding`] of
/// both: the same command, or the same path, whatever free text the agent wrote
/// beside it). The proof reads session grants with the same function.
pub fn session_covers(
    call_pattern: Option<&str>,
    exact_args: Option<&Value>,
    tool: &str,
    args: &Value,
    target_id: &str,
) -> bool {
    match (call_pattern, exact_args) {
        (Some(pattern), _) => {
            assent_tools::call_covers(
                pattern,
                tool,
                Some(assent_tools::CallContext::new(args, target_id)),
            ) == assent_tools::Coverage::Yes
        }
        (None, Some(exact)) => {
            assent_domain::canonical_json(&session_binding(exact))
                == assent_domain::canonical_json(&session_binding(args))
        }
        (None, None) => false,
    }
}

/// A command-like call's arguments that hold its command.
const COMMAND_KEYS: [&str; 2] = ["command", "cmd"];
/// A file tool's arguments that hold its path: all a session grant of a file binds.
const PATH_KEYS: [&str; 3] = ["file_path", "path", "notebook_path"];
/// Arguments that say nothing of what runs: the agent's free text about a call (Claude
/// Code's and Gemini CLI's `description`) and how long the agent waits for a command
/// (`timeout`). No session grant binds them.
const UNBOUND: [&str; 2] = ["description", "timeout"];

/// What a session grant given without a pattern binds of a call's `args` (issue 53:
/// it bound Claude's free-text `description`, so the next identical command, described
/// in other words, was asked again): a command-like call's command and how it runs
/// (every argument but `description` and `timeout`: a flag such as a sandbox switch stays bound);
/// a file tool's path alone, so "yes, for this session" on a write of a file lets the
/// session write that file again; any other call's arguments but the free text.
pub fn session_binding(args: &Value) -> Value {
    let Value::Object(map) = args else {
        return args.clone();
    };
    let has_text = |keys: &[&str]| {
        keys.iter()
            .any(|key| map.get(*key).is_some_and(Value::is_string))
    };
    let bound = |key: &str| {
        if has_text(&COMMAND_KEYS) || !has_text(&PATH_KEYS) {
            !UNBOUND.contains(&key)
        } else {
            PATH_KEYS.contains(&key)
        }
    };
    Value::Object(
        map.iter()
            .filter(|(key, _)| bound(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    )
}

/// Whether `value` contains `pattern`: an object pattern needs every key, with a value
/// that contains the pattern's value; anything else must be equal. An array pattern is
/// compared whole, so a grant never covers more elements than a person saw.
pub fn contains(value: &Value, pattern: &Value) -> bool {
    match (value, pattern) {
        (Value::Object(value), Value::Object(pattern)) => pattern
            .iter()
            .all(|(key, p)| value.get(key).is_some_and(|v| contains(v, p))),
        (value, pattern) => value == pattern,
    }
}

/// Which grants to list.
#[derive(Debug, Clone, Default)]
pub struct GrantFilter {
    /// Only this agent path.
    pub agent_path: Option<String>,
    /// Only this tool.
    pub tool_name: Option<String>,
    /// Revoked grants too.
    pub include_revoked: bool,
}

/// What revoking found.
#[derive(Debug, Clone, PartialEq)]
pub enum Revocation {
    /// Revoked now.
    Revoked(Grant),
    /// It had been revoked before; nothing changed.
    AlreadyRevoked(Grant),
    /// No grant has this id.
    NotFound,
}

const GRANTS: &str = "grants";

/// Stores a grant and its outbox message.
#[tracing::instrument(skip_all, fields(grant = %grant.id, agent = ?grant.agent_id, path = %grant.agent_path, tool = %grant.tool_name))]
pub async fn insert_grant(
    conn: &mut Connection,
    grant: &Grant,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO grants (id, agent_path, tool_name, args_pattern, correlation_id, created_at, revoked_at, agent_id,
                             session_id, call_pattern)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(grant.id.to_string())
    .bind(&grant.agent_path)
    .bind(&grant.tool_name)
    .bind(grant.args_pattern.as_ref().map(Value::to_string))
    .bind(&grant.correlation_id)
    .bind(timefmt::format(grant.created_at))
    .bind(grant.revoked_at.map(timefmt::format))
    .bind(grant.agent_id.as_deref())
    .bind(grant.session_id.as_deref())
    .bind(grant.call_pattern.as_deref())
    .execute(&mut *conn)
    .await?;
    chain::append(conn, vec![grant_entry(grant)], now).await?;
    enqueue_grant(conn, grant, now).await
}

/// A grant's entry on the consent chain: its whole row as written.
fn grant_entry(grant: &Grant) -> chain::Entry {
    chain::Entry {
        kind: chain::EntryKind::Grant,
        subject: grant.id.to_string(),
        content: grant_chain_content(grant),
    }
}

/// What a grant's chain entry holds: its whole row (a session grant's two fields only
/// when set, so the entries of grants from before them read as they were written).
pub fn grant_chain_content(grant: &Grant) -> Value {
    let mut content = serde_json::json!({
        "id": grant.id,
        "agentId": grant.agent_id,
        "agentPath": grant.agent_path,
        "toolName": grant.tool_name,
        "argsPattern": grant.args_pattern,
        "correlationId": grant.correlation_id,
        "createdAt": timefmt::format(grant.created_at),
        "revokedAt": grant.revoked_at.map(timefmt::format),
    });
    if let Some(session) = &grant.session_id {
        content["sessionId"] = Value::from(session.as_str());
        content["callPattern"] = grant
            .call_pattern
            .as_deref()
            .map_or(Value::Null, Value::from);
    }
    content
}

/// Every grant, for [`crate::proof`].
pub(crate) async fn all_for_proof(conn: &mut Connection) -> Result<Vec<Grant>, StoreError> {
    let rows = sqlx::query("SELECT * FROM grants")
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(decode_grant).collect()
}

async fn enqueue_grant(
    conn: &mut Connection,
    grant: &Grant,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    outbox::enqueue(conn, GRANT_ENTITY, &grant.id.to_string(), grant, now).await
}

pub(crate) fn decode_grant(row: &AnyRow) -> Result<Grant, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(GRANTS, e);
    let id: String = row.try_get("id")?;
    let pattern: Option<String> = row.try_get("args_pattern")?;
    let created_at: String = row.try_get("created_at")?;
    let revoked_at: Option<String> = row.try_get("revoked_at")?;
    Ok(Grant {
        id: Uuid::parse_str(&id).map_err(|e| corrupt(e.to_string()))?,
        agent_id: row.try_get("agent_id")?,
        agent_path: row.try_get("agent_path")?,
        tool_name: row.try_get("tool_name")?,
        args_pattern: pattern
            .map(|text| serde_json::from_str(&text).map_err(|e| corrupt(e.to_string())))
            .transpose()?,
        correlation_id: row.try_get("correlation_id")?,
        created_at: timefmt::parse(GRANTS, &created_at)?,
        revoked_at: revoked_at
            .map(|text| timefmt::parse(GRANTS, &text))
            .transpose()?,
        session_id: row.try_get("session_id")?,
        call_pattern: row.try_get("call_pattern")?,
    })
}

/// The active grants given to agent `agent_id` at `agent_path` for `tool_name`, oldest
/// first. Both must match: the path alone is chosen by whoever calls (`subAgent`).
pub async fn active_grants(
    conn: &mut Connection,
    agent_id: &str,
    agent_path: &str,
    tool_name: &str,
) -> Result<Vec<Grant>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM grants WHERE agent_id = $1 AND agent_path = $2 AND tool_name = $3 AND revoked_at IS NULL
         ORDER BY created_at, id",
    )
    .bind(agent_id)
    .bind(agent_path)
    .bind(tool_name)
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_grant).collect()
}

/// The first active session grant of agent `agent_id` for `tool_name` in coding-agent
/// session `session_id` that covers a call with `args` in workspace `target_id`
/// ([`Grant::covers_in_session`]), oldest first; only a grant given by answering a
/// call in that same workspace covers it.
pub async fn covering_session_grant(
    conn: &mut Connection,
    agent_id: &str,
    session_id: &str,
    tool_name: &str,
    args: &Value,
    target_id: &str,
) -> Result<Option<Grant>, StoreError> {
    // A session grant covers the workspace the person saw: the target of the decision
    // that created it (its correlation id), never another folder of the same session.
    let rows = sqlx::query(
        "SELECT * FROM grants WHERE agent_id = $1 AND session_id = $2 AND tool_name = $3 AND revoked_at IS NULL
           AND EXISTS (SELECT 1 FROM decisions d WHERE d.id = grants.correlation_id AND d.target_id = $4)
         ORDER BY created_at, id",
    )
    .bind(agent_id)
    .bind(session_id)
    .bind(tool_name)
    .bind(target_id)
    .fetch_all(conn)
    .await?;
    for row in &rows {
        let grant = decode_grant(row)?;
        if grant.covers_in_session(args, target_id) {
            return Ok(Some(grant));
        }
    }
    Ok(None)
}

/// The first active grant of agent `agent_id` at `agent_path` for `tool_name` that
/// covers `args`.
pub async fn covering_grant(
    conn: &mut Connection,
    agent_id: &str,
    agent_path: &str,
    tool_name: &str,
    args: &Value,
) -> Result<Option<Grant>, StoreError> {
    Ok(active_grants(conn, agent_id, agent_path, tool_name)
        .await?
        .into_iter()
        .find(|grant| grant.covers(args)))
}

/// Grants matching `filter`, oldest first.
pub async fn list_grants(
    conn: &mut Connection,
    filter: &GrantFilter,
) -> Result<Vec<Grant>, StoreError> {
    // One static statement: NULL parameters switch a filter off.
    let rows = sqlx::query(
        "SELECT * FROM grants
         WHERE ($1 IS NULL OR agent_path = $1) AND ($2 IS NULL OR tool_name = $2)
           AND ($3 OR revoked_at IS NULL)
         ORDER BY created_at, id",
    )
    .bind(filter.agent_path.as_deref())
    .bind(filter.tool_name.as_deref())
    .bind(filter.include_revoked)
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_grant).collect()
}

/// Revokes grant `id` (and queues the change for other devices).
#[tracing::instrument(skip(conn))]
pub async fn revoke_grant(
    conn: &mut Connection,
    id: Uuid,
    now: OffsetDateTime,
) -> Result<Revocation, StoreError> {
    let Some(row) = sqlx::query("SELECT * FROM grants WHERE id = $1")
        .bind(id.to_string())
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(Revocation::NotFound);
    };
    let mut grant = decode_grant(&row)?;
    if grant.revoked_at.is_some() {
        return Ok(Revocation::AlreadyRevoked(grant));
    }
    sqlx::query("UPDATE grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
        .bind(id.to_string())
        .bind(timefmt::format(now))
        .execute(&mut *conn)
        .await?;
    grant.revoked_at = Some(now);
    chain::append(conn, vec![grant_entry(&grant)], now).await?;
    enqueue_grant(conn, &grant, now).await?;
    Ok(Revocation::Revoked(grant))
}

/// One question a sub-agent's call raised, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delegation {
    /// The question's correlation id (a fresh one for every prompt).
    pub correlation_id: String,
    /// Who asked (`root/child`), as the bus says, never as the sub-agent claims.
    pub agent_path: String,
    /// The change set holding the call.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// The tool.
    pub tool_name: String,
    /// The outcome's kind (`proceedOnce`, `reject`, `unanswered`, `granted`, ...).
    pub outcome: String,
    /// The reason given (a rejection's, or why nobody answered).
    pub reason: Option<String>,
    /// The decision written on this answer, if any.
    pub decision_id: Option<Uuid>,
    /// The grant that answered instead of a person, if any.
    pub grant_id: Option<Uuid>,
    /// When it was recorded.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

const DELEGATIONS: &str = "delegations";

/// Records a delegation and its outbox message.
#[tracing::instrument(skip_all, fields(correlation_id = %delegation.correlation_id, outcome = %delegation.outcome))]
pub async fn record(
    conn: &mut Connection,
    delegation: &Delegation,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO delegations (correlation_id, agent_path, change_set_id, item_index, tool_name, outcome,
                                  reason, decision_id, grant_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&delegation.correlation_id)
    .bind(&delegation.agent_path)
    .bind(delegation.change_set_id.to_string())
    .bind(delegation.item_index as i64)
    .bind(&delegation.tool_name)
    .bind(&delegation.outcome)
    .bind(delegation.reason.as_deref())
    .bind(delegation.decision_id.map(|id| id.to_string()))
    .bind(delegation.grant_id.map(|id| id.to_string()))
    .bind(timefmt::format(delegation.created_at))
    .execute(&mut *conn)
    .await?;
    outbox::enqueue(
        conn,
        DELEGATION_ENTITY,
        &delegation.correlation_id,
        delegation,
        now,
    )
    .await
}

fn decode_delegation(row: &AnyRow) -> Result<Delegation, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(DELEGATIONS, e);
    let uuid = |text: String| Uuid::parse_str(&text).map_err(|e| corrupt(e.to_string()));
    let set: String = row.try_get("change_set_id")?;
    let index: i64 = row.try_get("item_index")?;
    let decision: Option<String> = row.try_get("decision_id")?;
    let grant: Option<String> = row.try_get("grant_id")?;
    let created_at: String = row.try_get("created_at")?;
    Ok(Delegation {
        correlation_id: row.try_get("correlation_id")?,
        agent_path: row.try_get("agent_path")?,
        change_set_id: uuid(set)?,
        item_index: usize::try_from(index).map_err(|e| corrupt(e.to_string()))?,
        tool_name: row.try_get("tool_name")?,
        outcome: row.try_get("outcome")?,
        reason: row.try_get("reason")?,
        decision_id: decision.map(uuid).transpose()?,
        grant_id: grant.map(uuid).transpose()?,
        created_at: timefmt::parse(DELEGATIONS, &created_at)?,
    })
}

/// Every delegation about one change set, oldest first.
pub async fn for_change_set(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<Vec<Delegation>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM delegations WHERE change_set_id = $1 ORDER BY item_index, created_at, rowid",
    )
    .bind(change_set_id.to_string())
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_delegation).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_match_by_containment_and_arrays_whole() {
        let args = json!({"priority": "P0", "note": {"by": "me", "at": 1}, "labels": ["a", "b"]});
        assert!(contains(&args, &json!({})));
        assert!(contains(&args, &json!({"priority": "P0"})));
        assert!(contains(&args, &json!({"note": {"by": "me"}})));
        assert!(!contains(&args, &json!({"priority": "P1"})));
        assert!(!contains(&args, &json!({"missing": null})));
        assert!(!contains(&args, &json!({"labels": ["a"]})));
        assert!(contains(&args, &json!({"labels": ["a", "b"]})));
    }

    /// Issue 53: a session grant given without a pattern bound Claude's free-text
    /// `description`, so the identical command described in other words was asked
    /// again. It binds the command (and how it runs) or the path, never free text.
    #[test]
    fn a_session_grant_without_a_pattern_binds_the_command_or_the_path_only() {
        let covers =
            |granted: Value, call: Value| session_covers(None, Some(&granted), "Bash", &call, "/w");
        let asked = json!({"command": "npm test", "description": "Run the tests"});
        assert!(covers(
            asked.clone(),
            json!({"command": "npm test", "description": "Run the test suite again", "timeout": 60000})
        ));
        assert!(!covers(
            asked.clone(),
            json!({"command": "npm test -- --all", "description": "Run the tests"})
        ));
        assert!(
            !covers(
                asked.clone(),
                json!({"command": "npm test", "dangerouslyDisableSandbox": true})
            ),
            "a switch of how it runs stays bound"
        );
        assert!(!covers(
            asked,
            json!({"command": "npm test", "dir_path": "other"})
        ));
        let write = json!({"file_path": "src/a.rs", "content": "one"});
        assert!(covers(
            write.clone(),
            json!({"file_path": "src/a.rs", "content": "two"})
        ));
        assert!(!covers(
            write,
            json!({"file_path": "src/b.rs", "content": "one"})
        ));
        let other = json!({"repo": "acme/web", "description": "why"});
        assert!(covers(
            other.clone(),
            json!({"repo": "acme/web", "description": "other words"})
        ));
        assert!(!covers(other, json!({"repo": "acme/evil"})));
        assert_eq!(
            session_binding(&json!({"command": "ls", "description": "List", "timeout": 5})),
            json!({"command": "ls"})
        );
    }

    #[test]
    fn a_revoked_grant_covers_nothing() {
        let mut grant = Grant {
            id: Uuid::new_v4(),
            agent_id: Some("lead".into()),
            agent_path: "lead/researcher".into(),
            tool_name: "update_task_priority".into(),
            args_pattern: None,
            correlation_id: "c".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            revoked_at: None,
            session_id: None,
            call_pattern: None,
        };
        assert!(grant.covers(&json!({"priority": "P0"})));
        grant.revoked_at = Some(OffsetDateTime::UNIX_EPOCH);
        assert!(!grant.covers(&json!({"priority": "P0"})));
    }

    #[test]
    fn a_session_grant_covers_its_pattern_or_exactly_its_arguments_and_nothing_else() {
        let mut grant = Grant {
            id: Uuid::new_v4(),
            agent_id: Some("coder".into()),
            agent_path: "coder".into(),
            tool_name: "Bash".into(),
            args_pattern: Some(json!({"command": "git status"})),
            correlation_id: "d".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            revoked_at: None,
            session_id: Some("s1".into()),
            call_pattern: Some("Bash(git status*)".into()),
        };
        let call = |command: &str| json!({"command": command});
        assert!(grant.covers_in_session(&call("git status --short"), "/w"));
        assert!(!grant.covers_in_session(&call("git push"), "/w"));
        // A chained command is unsure: never allowed by a grant.
        assert!(!grant.covers_in_session(&call("git status; rm -rf /"), "/w"));
        // A session grant is never a sub-agent's "always" grant.
        assert!(!grant.covers(&call("git status")));
        grant.call_pattern = None;
        assert!(grant.covers_in_session(&call("git status"), "/w"));
        assert!(!grant.covers_in_session(&call("git status --short"), "/w"));
        // Issue 53: how long the agent waits is not what runs; how it runs is.
        assert!(grant.covers_in_session(&json!({"command": "git status", "timeout": 1}), "/w"));
        assert!(!grant.covers_in_session(
            &json!({"command": "git status", "run_in_background": true}),
            "/w"
        ));
        grant.revoked_at = Some(OffsetDateTime::UNIX_EPOCH);
        assert!(!grant.covers_in_session(&call("git status"), "/w"));
    }
}
