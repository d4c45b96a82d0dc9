//! Moving one agent's calls on one target from a host to another: a host renamed
//! by a new release (an MCP gateway's host is named after its agent and server where
//! it was named after the server alone) takes over what the old name held for it.
//!
//! Only the rows of that agent and target move, so what an old shared host name held
//! for another agent stays where it is until that agent's own gateway takes it.

use crate::Connection;
use crate::StoreError;
use assent_domain::Target;

/// What [`rehost`] moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rehosted {
    /// Items whose job the new host will run when they are confirmed.
    pub items: u64,
    /// Jobs the new host's executors now claim.
    pub jobs: u64,
    /// Catalog entries copied (with their pins) to the new host.
    pub tools: u64,
}

/// Whether `from` holds any item or job of agent `agent_id` on `target` (a read, so
/// a caller can skip [`rehost`]'s writes when there is nothing to move).
pub async fn holds(
    conn: &mut Connection,
    from: &str,
    agent_id: &str,
    target: &Target,
) -> Result<bool, StoreError> {
    let found: Option<String> = sqlx::query_scalar(
        "SELECT j.id FROM execution_jobs j
         WHERE j.host = $1 AND j.agent_id = $2 AND j.target_kind = $3 AND j.target_id = $4
         UNION ALL
         SELECT i.change_set_id FROM change_items i JOIN change_sets s ON s.id = i.change_set_id
         WHERE i.host = $1 AND s.agent_id = $2 AND s.target_kind = $3 AND s.target_id = $4
         LIMIT 1",
    )
    .bind(from)
    .bind(agent_id)
    .bind(&target.kind)
    .bind(&target.id)
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// Moves the items and jobs of agent `agent_id` on `target` from host `from` to host
/// `to` (the new host claims the jobs; a confirmation of an item records its job for
/// the new host), and copies `from`'s catalog to `to` with each tool's name prefixed
/// by `tool_prefix` (empty for none), keeping its pin, so a definition a person
/// accepted stays accepted and one that changed stays changed. Entries `to` already
/// has are kept; `from`'s entries stop naming the agent. With a prefix, the entries are
/// also copied under their own names for no agent: what an item recorded under such a
/// name was approved against. Run it in a write
/// transaction: the moves are one step.
pub async fn rehost(
    conn: &mut Connection,
    from: &str,
    to: &str,
    agent_id: &str,
    target: &Target,
    tool_prefix: &str,
) -> Result<Rehosted, StoreError> {
    let items = sqlx::query(
        "UPDATE change_items SET host = $1
         WHERE host = $2 AND change_set_id IN (
             SELECT id FROM change_sets WHERE agent_id = $3 AND target_kind = $4 AND target_id = $5)",
    )
    .bind(to)
    .bind(from)
    .bind(agent_id)
    .bind(&target.kind)
    .bind(&target.id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let jobs = sqlx::query(
        "UPDATE execution_jobs SET host = $1
         WHERE host = $2 AND agent_id = $3 AND target_kind = $4 AND target_id = $5",
    )
    .bind(to)
    .bind(from)
    .bind(agent_id)
    .bind(&target.kind)
    .bind(&target.id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let tools = sqlx::query(
        "INSERT INTO host_tools (host, tool_name, agent_id, trust, definition, input_schema, hash,
                                 pinned_hash, first_seen_at, updated_at)
         SELECT $1, $2 || tool_name, $3, trust, definition, input_schema, hash, pinned_hash,
                first_seen_at, updated_at
         FROM host_tools WHERE host = $4
         ON CONFLICT (host, tool_name) DO NOTHING",
    )
    .bind(to)
    .bind(tool_prefix)
    .bind(agent_id)
    .bind(from)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    // The items recorded under the bare names keep finding their tool's definition
    // (an approval's digest names its hash); no agent meets the tool by that name.
    if !tool_prefix.is_empty() {
        sqlx::query(
            "INSERT INTO host_tools (host, tool_name, agent_id, trust, definition, input_schema,
                                     hash, pinned_hash, first_seen_at, updated_at)
             SELECT $1, tool_name, NULL, trust, definition, input_schema, hash, pinned_hash,
                    first_seen_at, updated_at
             FROM host_tools WHERE host = $2
             ON CONFLICT (host, tool_name) DO NOTHING",
        )
        .bind(to)
        .bind(from)
        .execute(&mut *conn)
        .await?;
    }
    // The old host's entries are no longer the agent's: its tools are listed once, as
    // the new host's (`assent tools`, `agent show`), and accepted there.
    sqlx::query("UPDATE host_tools SET agent_id = NULL WHERE host = $1 AND agent_id = $2")
        .bind(from)
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
    Ok(Rehosted { items, jobs, tools })
}
