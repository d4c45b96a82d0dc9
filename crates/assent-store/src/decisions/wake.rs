//! What a wake reads of the engine's tables, entering the store once (issue 55): in
//! one statement the agent's rules and how it remembers rejections, whether it has an
//! open set on the target, whether any webhook subscription exists, and which of the
//! operations the wake may run at once were applied (a retried wake's); then, only
//! when the wake will queue something (its caller decides, given the rules), the
//! agent's recent decisions on the target and, when there are some, its open sets
//! there. On SQLite all of it runs through the C API under one lock of the
//! connection; on PostgreSQL the same statements run through sqlx.
//!
//! Why the caller decides in the middle: a wake that queues nothing (the gateway's
//! allowed calls, a hook's) needs neither the open sets nor the recent decisions, and
//! whether it queues follows from the agent's rules and what the host said of the
//! target, both known by then (the host is asked before this read).

use crate::Connection;
use crate::StoreError;
#[cfg(feature = "sqlite")]
use crate::error::SqliteResult;
use crate::rejection_memory::RejectionMemory;
use crate::row::{Param, StoreRow, bind_all};
use crate::{agents, change_sets, decisions};
use assent_domain::{ChangeDecision, ChangeSet, OperationId, Target};
use assent_tools::{AgentPolicy, ToolSettingsTable};
use time::OffsetDateTime;

/// An agent's rules as a wake reads them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WakeRules {
    /// Its policy in force at the wake's time.
    pub policy: AgentPolicy,
    /// Its per-tool settings (quorums, holds).
    pub settings: ToolSettingsTable,
    /// How it remembers rejections.
    pub memory: RejectionMemory,
}

/// What [`read`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WakeRead {
    /// The agent's rules.
    pub rules: WakeRules,
    /// Whether the open sets and recent decisions below were read (the caller said
    /// the wake queues); when not, both are empty.
    pub queuing: bool,
    /// The agent's open sets on the target, newest first, with their items.
    pub open_sets: Vec<ChangeSet>,
    /// The agent's most recent decisions on the target, newest first (at most the
    /// `lookback` asked for), whichever its memory keeps; empty when it keeps none.
    pub recent: Vec<ChangeDecision>,
    /// Whether any webhook subscription exists: a set the wake queues then has its
    /// `changeSet.created` event written ([`crate::webhooks::enqueue_set_event`]).
    pub webhooks: bool,
    /// Each operation the caller asked about, with the message it was applied with
    /// (`None`: not applied).
    pub applied: Vec<(OperationId, Option<String>)>,
}

/// How many operation ids the first statement asks about; a wake that may run more
/// at once asks about the rest in statements of their own.
const OPERATIONS_PER_READ: usize = 200;

/// The first statement: the agent's rules, whether it has open sets on the target
/// (`$2`, `$3`), whether webhook subscriptions exist and, for `operations` ids (`$4`
/// on), one row per applied operation.
fn first_sql(operations: usize) -> String {
    let (applied_columns, applied_join) = if operations == 0 {
        (String::new(), String::new())
    } else {
        let ids: Vec<String> = (4..operations + 4).map(|n| format!("${n}")).collect();
        (
            ", o.operation_id AS applied_id, o.message AS applied_message".to_owned(),
            format!(
                " LEFT JOIN applied_operations o ON o.operation_id IN ({})",
                ids.join(", ")
            ),
        )
    };
    format!(
        "SELECT a.categories AS categories, a.rules AS rules, a.tool_settings AS tool_settings,
         a.rejection_memory AS rejection_memory,
         (SELECT count(*) FROM webhook_subscriptions) AS webhooks,
         {} AS open_sets{applied_columns}
         FROM agents a{applied_join} WHERE a.id = $1",
        change_sets::ANY_OPEN_ON_TARGET_OF_AGENT
    )
}

/// The lookup of `count` applied operations by id.
fn applied_sql(count: usize) -> String {
    let ids: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
    format!(
        "SELECT operation_id, message FROM applied_operations WHERE operation_id IN ({})",
        ids.join(", ")
    )
}

/// The first statement's answers, gathered over its rows.
struct First {
    rules: WakeRules,
    open_sets: bool,
    webhooks: bool,
    /// The applied operations found (id, message).
    found: Vec<(String, String)>,
}

impl First {
    fn decode(row: &impl StoreRow, joined: bool, now: OffsetDateTime) -> Result<Self, StoreError> {
        let (policy, settings, memory) = agents::wake_rules(row, now)?;
        let webhooks: i64 = row.value("webhooks")?;
        let open_sets: i64 = row.value("open_sets")?;
        let mut first = Self {
            rules: WakeRules {
                policy,
                settings,
                memory,
            },
            open_sets: open_sets > 0,
            webhooks: webhooks > 0,
            found: Vec::new(),
        };
        first.push(row, joined)?;
        Ok(first)
    }

    /// The applied operation `row` names, if any.
    fn push(&mut self, row: &impl StoreRow, joined: bool) -> Result<(), StoreError> {
        if joined {
            let id: Option<String> = row.value("applied_id")?;
            let message: Option<String> = row.value("applied_message")?;
            if let (Some(id), Some(message)) = (id, message) {
                self.found.push((id, message));
            }
        }
        Ok(())
    }
}

/// Reads what a wake of `agent_id` about `target` needs from the engine's tables:
/// `None` for an unknown agent. `operations`: those the wake may run at once (more
/// is harmless, fewer only leaves the rest to be asked by the executor); whether each
/// was applied is read with the rules. `queues` is told the agent's rules and says
/// whether the wake queues anything; only then are its open sets on the target (when
/// it has any) and its `lookback` most recent decisions there read (when its memory
/// keeps rejections at all).
#[tracing::instrument(skip_all, fields(agent = agent_id, target = %target, operations = operations.len()))]
pub async fn read(
    conn: &mut Connection,
    agent_id: &str,
    target: &Target,
    lookback: u32,
    now: OffsetDateTime,
    operations: &[OperationId],
    queues: impl FnOnce(&WakeRules) -> bool,
) -> Result<Option<WakeRead>, StoreError> {
    let (joined, rest) = operations.split_at(operations.len().min(OPERATIONS_PER_READ));
    let mut first_params = vec![
        Param::Text(agent_id),
        Param::Text(&target.kind),
        Param::Text(&target.id),
    ];
    first_params.extend(joined.iter().map(|id| Param::Text(id.as_str())));
    let open_params = [
        Param::Text(&target.kind),
        Param::Text(&target.id),
        Param::Text(agent_id),
        Param::Int(i64::MAX),
    ];
    let recent_params = [
        Param::Text(agent_id),
        Param::Text(&target.kind),
        Param::Text(&target.id),
        Param::Int(i64::from(lookback)),
    ];
    let sql = first_sql(joined.len());
    let join = !joined.is_empty();
    #[cfg(feature = "sqlite")]
    if let Some(sqlite) = conn.as_sqlite() {
        return crate::c_api::with_c_api(sqlite, |c| {
            let mut first = {
                let mut statement = c.bound(&sql, &first_params)?;
                let mut rows = statement.raw_query();
                let Some(row) = rows.next().or_store()? else {
                    return Ok(None);
                };
                let mut first = First::decode(row, join, now)?;
                while let Some(row) = rows.next().or_store()? {
                    first.push(row, join)?;
                }
                first
            };
            for chunk in rest.chunks(OPERATIONS_PER_READ) {
                let params: Vec<Param<'_>> =
                    chunk.iter().map(|id| Param::Text(id.as_str())).collect();
                let mut statement = c.bound(&applied_sql(chunk.len()), &params)?;
                let mut rows = statement.raw_query();
                while let Some(row) = rows.next().or_store()? {
                    first
                        .found
                        .push((row.value("operation_id")?, row.value("message")?));
                }
            }
            let queuing = queues(&first.rules);
            let open_sets = if queuing && first.open_sets {
                change_sets::pending_through_c_api(
                    c,
                    change_sets::OPEN_ON_TARGET_OF_AGENT,
                    &open_params,
                )?
            } else {
                Vec::new()
            };
            let mut recent = Vec::new();
            if queuing && first.rules.memory.window() > time::Duration::ZERO {
                let mut statement = c.bound(decisions::RECENT_ON_TARGET, &recent_params)?;
                let mut rows = statement.raw_query();
                while let Some(row) = rows.next().or_store()? {
                    recent.push(decisions::decode(row)?);
                }
            }
            Ok(Some(finish(
                first, operations, queuing, open_sets, recent, now,
            )))
        })
        .await;
    }
    let rows = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), &first_params)
        .fetch_all(&mut *conn)
        .await?;
    let Some((row, more)) = rows.split_first() else {
        return Ok(None);
    };
    let mut first = First::decode(row, join, now)?;
    for row in more {
        first.push(row, join)?;
    }
    for chunk in rest.chunks(OPERATIONS_PER_READ) {
        let params: Vec<Param<'_>> = chunk.iter().map(|id| Param::Text(id.as_str())).collect();
        for row in bind_all(
            sqlx::query(sqlx::AssertSqlSafe(applied_sql(chunk.len()))),
            &params,
        )
        .fetch_all(&mut *conn)
        .await?
        {
            first
                .found
                .push((row.value("operation_id")?, row.value("message")?));
        }
    }
    let queuing = queues(&first.rules);
    let open_sets = if queuing && first.open_sets {
        change_sets::pending(
            conn,
            &change_sets::PendingFilter::all()
                .target(target.clone())
                .agent(agent_id.to_owned()),
        )
        .await?
    } else {
        Vec::new()
    };
    let mut recent = Vec::new();
    if queuing && first.rules.memory.window() > time::Duration::ZERO {
        for row in bind_all(sqlx::query(decisions::RECENT_ON_TARGET), &recent_params)
            .fetch_all(&mut *conn)
            .await?
        {
            recent.push(decisions::decode(&row)?);
        }
    }
    Ok(Some(finish(
        first, operations, queuing, open_sets, recent, now,
    )))
}

/// The read: each operation asked about with its message if it was applied, and the
/// recent decisions narrowed to the rejections the agent's memory keeps (its window,
/// less what a person told Assent to forget).
fn finish(
    first: First,
    operations: &[OperationId],
    queuing: bool,
    open_sets: Vec<ChangeSet>,
    mut recent: Vec<ChangeDecision>,
    now: OffsetDateTime,
) -> WakeRead {
    recent.retain(|decision| first.rules.memory.remembers(decision, now));
    let applied = operations
        .iter()
        .map(|id| {
            let message = first
                .found
                .iter()
                .find(|(found, _)| found == id.as_str())
                .map(|(_, message)| message.clone());
            (id.clone(), message)
        })
        .collect();
    WakeRead {
        rules: first.rules,
        queuing,
        open_sets,
        recent,
        webhooks: first.webhooks,
        applied,
    }
}
