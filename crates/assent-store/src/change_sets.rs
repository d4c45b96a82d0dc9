//! Change sets and their items, in two relational tables.

use crate::Connection;
use crate::agents::{self, StoredRules};
use crate::approvals::{Approval, Revision};
#[cfg(feature = "sqlite")]
use crate::error::SqliteResult;
use crate::jobs::ServedItem;
use crate::outbox::{self, entity};
use crate::plan::WritePlan;
use crate::row::{Param, Statement, StoreRow, bind_all};
use crate::webhooks;
use crate::{StoreError, chain, timefmt};
use assent_domain::{
    ChangeItem, ChangeItemStatus, ChangeSet, ChangeSetStatus, OperationId, Target, VectorClock,
};
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

const TABLE: &str = "change_sets";

/// The predicate of the open-set partial indexes, spelled exactly as in the migration.
macro_rules! open_sets {
    () => {
        "status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL"
    };
}

/// The columns of a set that [`decode_set`] reads, as every read of sets names them:
/// the open-set reads are answered from the covering indexes of migration 0027, which
/// hold exactly these (a `SELECT *` would also fetch `deleted_at` and `undoes` from the
/// table).
macro_rules! set_columns {
    () => {
        "id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock"
    };
}

/// The columns of an item that [`decode_item`] reads, and the set it belongs to.
macro_rules! item_columns {
    () => {
        "change_set_id, tool_name, args, human_summary, status, before_value, fingerprint, stale_detail, approvals_needed, revision"
    };
}

/// Which open sets to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingFilter {
    /// Only sets about this target.
    pub target: Option<Target>,
    /// Only sets of this agent.
    pub agent_id: Option<String>,
    /// At most this many sets (newest first); `None` for all.
    pub limit: Option<u32>,
}

impl PendingFilter {
    /// Every open set.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only the sets about `target`.
    #[must_use]
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Only the sets of agent `agent_id`.
    #[must_use]
    pub fn agent(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = Some(agent_id.into());
        self
    }

    /// At most `limit` sets, newest first.
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Which items waiting for a person to list ([`pending_items`]): all of them, newest
/// first, unless narrowed with the builder's methods.
///
/// ```
/// use assent_domain::Target;
/// use assent_store::change_sets::ItemFilter;
///
/// let filter = ItemFilter::new()
///     .agent("billing-agent")
///     .target(Target::new("order", "o-7"))
///     .tool("issue_refund")
///     .oldest_first()
///     .limit(20);
/// assert_eq!(filter.limit, Some(20));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ItemFilter {
    /// Only items of this agent's sets.
    pub agent: Option<String>,
    /// Only items of sets about this target.
    pub target: Option<Target>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Oldest proposals first (newest first otherwise); a set's items in their order
    /// either way.
    pub oldest_first: bool,
    /// At most this many items; `None` for all.
    pub limit: Option<u32>,
}

impl ItemFilter {
    /// Every item waiting for a person, newest first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only items of agent `agent`'s sets.
    #[must_use]
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Only items of sets about `target`.
    #[must_use]
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Only calls of tool `tool`.
    #[must_use]
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Oldest proposals first.
    #[must_use]
    pub fn oldest_first(mut self) -> Self {
        self.oldest_first = true;
        self
    }

    /// At most `limit` items.
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// One item waiting for a person: a pending item of an open set, as a service's own
/// review screen lists it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingItem {
    /// The item: its set and index.
    pub item: assent_domain::ItemRef,
    /// The agent that proposed it.
    pub agent_id: String,
    /// What its set is about.
    pub target: Target,
    /// The tool it calls.
    pub tool_name: String,
    /// The arguments it would run with if confirmed now: the proposal's, or those of
    /// the revision a person's edit started under a quorum.
    pub args: Value,
    /// What a person reads about it.
    pub summary: String,
    /// When the agent proposed it.
    pub proposed_at: OffsetDateTime,
    /// Its revision (0 until an edit under a quorum or a stale-target refresh): a
    /// decision shown this revision is bound to it.
    pub revision: u32,
    /// How many people must approve it, when more than one.
    pub approvals_needed: Option<u32>,
}

/// The statement of [`pending_items`], newest or oldest first (`$order`): pending items
/// of open sets, narrowed by agent, target and tool when given.
macro_rules! pending_items_sql {
    ($order:literal) => {
        concat!(
            "SELECT s.id AS set_id, s.agent_id, s.target_kind, s.target_id, s.created_at,
                    i.item_index, i.tool_name, i.args, i.human_summary, i.revision, i.approvals_needed
             FROM change_sets s JOIN change_items i ON i.change_set_id = s.id
             WHERE s.status IN ('pending', 'partiallyResolved') AND s.deleted_at IS NULL
               AND i.status = 'pending'
               AND ($1 IS NULL OR s.agent_id = $1)
               AND ($2 IS NULL OR (s.target_kind = $2 AND s.target_id = $3))
               AND ($4 IS NULL OR i.tool_name = $4)
             ORDER BY s.created_at ",
            $order,
            ", s.id ",
            $order,
            ", i.item_index LIMIT $5"
        )
    };
}

/// The items waiting for a person that `filter` names (see [`ItemFilter`]), each
/// with the arguments it would run with now.
#[tracing::instrument(skip(conn))]
pub async fn pending_items(
    conn: &mut Connection,
    filter: &ItemFilter,
) -> Result<Vec<PendingItem>, StoreError> {
    let sql = if filter.oldest_first {
        pending_items_sql!("ASC")
    } else {
        pending_items_sql!("DESC")
    };
    let rows = sqlx::query(sql)
        .bind(filter.agent.as_deref())
        .bind(filter.target.as_ref().map(|t| t.kind.as_str()))
        .bind(filter.target.as_ref().map(|t| t.id.as_str()))
        .bind(filter.tool.as_deref())
        // No limit: the largest one (PostgreSQL refuses SQLite's `LIMIT -1`).
        .bind(filter.limit.map_or(i64::MAX, i64::from))
        .fetch_all(&mut *conn)
        .await?;
    let corrupt = |e: String| StoreError::corrupt("change_items", e);
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        let set_id: String = row.try_get("set_id")?;
        let index: i64 = row.try_get("item_index")?;
        let args: String = row.try_get("args")?;
        let created_at: String = row.try_get("created_at")?;
        let revision = u32::try_from(row.try_get::<i64, _>("revision")?)
            .map_err(|e| corrupt(e.to_string()))?;
        let item = assent_domain::ItemRef::new(
            Uuid::parse_str(&set_id).map_err(|e| corrupt(e.to_string()))?,
            usize::try_from(index).map_err(|e| corrupt(e.to_string()))?,
        );
        items.push(PendingItem {
            item,
            agent_id: row.try_get("agent_id")?,
            target: Target::new(
                row.try_get::<String, _>("target_kind")?,
                row.try_get::<String, _>("target_id")?,
            ),
            tool_name: row.try_get("tool_name")?,
            args: serde_json::from_str(&args).map_err(|e| corrupt(e.to_string()))?,
            summary: row.try_get("human_summary")?,
            proposed_at: timefmt::parse(TABLE, &created_at)?,
            revision,
            approvals_needed: row
                .try_get::<Option<i64>, _>("approvals_needed")?
                .map(|n| u32::try_from(n).map_err(|e| corrupt(e.to_string())))
                .transpose()?,
        });
    }
    // An item a person edited under a quorum runs with its revision's arguments (few
    // items have one: read only for those).
    for pending in &mut items {
        if pending.revision > 0 {
            let current = crate::approvals::current(
                conn,
                pending.item.change_set_id,
                pending.item.index,
                pending.revision,
            )
            .await?;
            if let Some(args) = current.args {
                pending.args = args;
            }
        }
    }
    Ok(items)
}

async fn enqueue_set(
    conn: &mut Connection,
    set: &ChangeSet,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    outbox::enqueue(conn, entity::CHANGE_SET, &set.id.to_string(), set, now).await
}

/// The outbox payload of `set`, as [`enqueue_set`] writes it.
fn set_payload(set: &ChangeSet) -> Result<String, StoreError> {
    serde_json::to_string(set).map_err(|e| StoreError::corrupt("outbox", e))
}

/// Inserts a new set with its items (and its outbox message), served by no host in
/// particular.
pub async fn insert(
    conn: &mut Connection,
    set: &ChangeSet,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    insert_served(conn, set, None, now).await
}

/// Inserts a new set whose items `host` serves (a wake's: the host's name is written
/// on every item, so a process without that host knows whose worker runs it).
#[tracing::instrument(skip_all, fields(change_set = %set.id, items = set.items.len()))]
pub async fn insert_served(
    conn: &mut Connection,
    set: &ChangeSet,
    host: Option<&str>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    insert_rows(conn, set, host, now).await?;
    enqueue_set(conn, set, now).await?;
    webhooks::enqueue_set_event(conn, webhooks::event::CHANGE_SET_CREATED, set, now).await?;
    Ok(())
}

/// [`insert_served`] as writes of `plan`, which the caller applies with its commit
/// (a wake, issue 55: its set enters the store with the wake's other writes, under
/// one lock of the connection on SQLite): the set's row, its items' rows (item `i`
/// with the effect `effects[i]`, `Some(idempotent)` for a tool whose effect lies
/// outside the database, as [`crate::jobs::mark_external`] records it), a quorum's
/// entry on the chain and the set's outbox message. Not its webhook event: a wake
/// that found a subscription writes it with [`crate::webhooks::enqueue_set_event`].
pub fn plan_insert_served(
    plan: &mut WritePlan,
    backend: crate::Backend,
    set: &ChangeSet,
    host: Option<&str>,
    effects: &[Option<bool>],
) -> Result<(), StoreError> {
    let clock = json!(set.vector_clock).to_string();
    let set_id = set.id.to_string();
    plan.statement(
        Statement::new(
            "INSERT INTO change_sets (id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                .to_owned(),
        )
        .bind(set_id.as_str())
        .bind(set.agent_id.as_str())
        .bind(set.target_kind.as_str())
        .bind(set.target_id.as_str())
        .bind(set.thread_id.as_str())
        .bind(set.run_key.as_str())
        .bind(set.status.as_str())
        .bind(timefmt::format(set.created_at))
        .bind(set.resolved_at.map(timefmt::format))
        .bind(clock.as_str()),
    );
    let effect = |index: usize| match effects.get(index).copied().flatten() {
        Some(true) => Some("externalIdempotent"),
        Some(false) => Some("external"),
        None => None,
    };
    match backend {
        // One statement whatever the count (arrays would not bind here: see ITEMS_JSON).
        crate::Backend::Postgres => {
            plan.statement(items_json(&set_id, &clock, host, &set.items, effect));
        }
        crate::Backend::Sqlite => {
            const COLUMNS: usize = ITEM_COLUMNS + 1;
            let items: Vec<(usize, &ChangeItem)> = set.items.iter().enumerate().collect();
            for chunk in items.chunks(ITEMS_PER_INSERT) {
                let sql = format!(
                    "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status, before_value, vector_clock, host, fingerprint, stale_detail, approvals_needed, effect)
             VALUES {}",
                    crate::values_placeholders(chunk.len(), COLUMNS)
                );
                let statement =
                    chunk
                        .iter()
                        .fold(Statement::new(sql), |statement, (index, item)| {
                            statement
                                .bind(set_id.as_str())
                                .bind(*index as i64)
                                .bind(item.tool_name.as_str())
                                .bind(item.args.to_string())
                                .bind(item.human_summary.as_str())
                                .bind(item.status.as_str())
                                .bind(item.before.as_ref().map(Value::to_string))
                                .bind(clock.as_str())
                                .bind(host)
                                .bind(item.fingerprint.as_ref().map(Value::to_string))
                                .bind(item.stale_detail.as_deref())
                                .bind(item.approvals_needed.map(i64::from))
                                .bind(effect(*index))
                        });
                plan.statement(statement);
            }
        }
    }
    for (index, item) in set.items.iter().enumerate() {
        if item.approvals_needed() > 1 {
            plan.entry(chain::quorum_entry(set, index, item.approvals_needed()));
        }
    }
    plan.message_text(
        entity::CHANGE_SET,
        set_id,
        crate::outbox::payload_text(set)?,
    );
    Ok(())
}

/// The columns of one `change_items` row [`insert_rows`] binds.
const ITEM_COLUMNS: usize = 12;
/// Rows per `INSERT` of a set's items (well under both backends' bind limits).
const ITEMS_PER_INSERT: usize = 50;

/// The rows of a new set and its items, without an outbox message (sync writes what
/// another device sent, with no host: see [`insert_served`]).
///
/// An item that needs more than one person has its quorum entered on the consent
/// chain in the same transaction ([`chain::quorum_entry`]), so the proof checks its
/// approvals against what it was proposed with, whatever its row says later.
pub(crate) async fn insert_rows(
    conn: &mut Connection,
    set: &ChangeSet,
    host: Option<&str>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let clock = json!(set.vector_clock).to_string();
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        insert_set_unnest(pg, set, &clock, host).await?;
        return chain::append(conn, quorum_entries(set), now).await;
    }
    sqlx::query(
        "INSERT INTO change_sets (id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(set.id.to_string())
    .bind(&set.agent_id)
    .bind(&set.target_kind)
    .bind(&set.target_id)
    .bind(&set.thread_id)
    .bind(&set.run_key)
    .bind(set.status.as_str())
    .bind(timefmt::format(set.created_at))
    .bind(set.resolved_at.map(timefmt::format))
    .bind(&clock)
    .execute(&mut *conn)
    .await?;
    // One statement for a set's items (a set holds at most 25; longer ones, which only
    // a bad batch could bring, go in chunks): each row of a wake is not a round trip.
    let set_id = set.id.to_string();
    let items: Vec<(usize, &ChangeItem)> = set.items.iter().enumerate().collect();
    for chunk in items.chunks(ITEMS_PER_INSERT) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|row| {
                let first = row * ITEM_COLUMNS + 1;
                let params: Vec<String> = (first..first + ITEM_COLUMNS)
                    .map(|n| format!("${n}"))
                    .collect();
                format!("({})", params.join(", "))
            })
            .collect();
        let sql = format!(
            "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status, before_value, vector_clock, host, fingerprint, stale_detail, approvals_needed)
             VALUES {}",
            rows.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (index, item) in chunk {
            query = query
                .bind(set_id.as_str())
                .bind(*index as i64)
                .bind(item.tool_name.as_str())
                .bind(item.args.to_string())
                .bind(item.human_summary.as_str())
                .bind(item.status.as_str())
                .bind(item.before.as_ref().map(Value::to_string))
                .bind(clock.as_str())
                .bind(host)
                .bind(item.fingerprint.as_ref().map(Value::to_string))
                .bind(item.stale_detail.as_deref())
                .bind(item.approvals_needed.map(i64::from));
        }
        query.execute(&mut *conn).await?;
    }
    chain::append(conn, quorum_entries(set), now).await
}

/// The chain entries of `set`'s items that need more than one person.
fn quorum_entries(set: &ChangeSet) -> Vec<chain::Entry> {
    set.items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.approvals_needed() > 1)
        .map(|(index, item)| chain::quorum_entry(set, index, item.approvals_needed()))
        .collect()
}

/// The items of a set planned by [`plan_insert_served`] on PostgreSQL, whatever their
/// count: `$1` the set, `$2` the clock, `$3` the host, `$4` the items as a JSON array
/// of rows. JSON rather than arrays for [`ITEM_STATUSES_JSON`]'s reason: a write plan's
/// statements bind through sqlx's `Any` driver; the text stays the same for 1 item or
/// 25 (issue 55).
const ITEMS_JSON: &str = "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status, before_value, vector_clock, host, fingerprint, stale_detail, approvals_needed, effect)
 SELECT $1, u.item_index, u.tool_name, u.args, u.human_summary, u.status, u.before_value, $2, $3,
        u.fingerprint, u.stale_detail, u.approvals_needed, u.effect
 FROM json_to_recordset($4::json)
      AS u(item_index bigint, tool_name text, args text, human_summary text, status text,
           before_value text, fingerprint text, stale_detail text, approvals_needed integer,
           effect text)";

/// The statement of [`ITEMS_JSON`] for `items` of set `set_id`, item `i` with the
/// effect `effect(i)`.
fn items_json(
    set_id: &str,
    clock: &str,
    host: Option<&str>,
    items: &[ChangeItem],
    effect: impl Fn(usize) -> Option<&'static str>,
) -> Statement {
    let rows: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            json!({
                "item_index": index,
                "tool_name": item.tool_name,
                "args": item.args.to_string(),
                "human_summary": item.human_summary,
                "status": item.status.as_str(),
                "before_value": item.before.as_ref().map(Value::to_string),
                "fingerprint": item.fingerprint.as_ref().map(Value::to_string),
                "stale_detail": item.stale_detail,
                "approvals_needed": item.approvals_needed,
                "effect": effect(index),
            })
        })
        .collect();
    Statement::new(ITEMS_JSON.to_owned())
        .bind(set_id)
        .bind(clock)
        .bind(host)
        .bind(Value::Array(rows).to_string())
}

/// [`insert_rows`] on PostgreSQL: the set's row (`$1`–`$10`, its clock `$10` also its
/// items') and its items (the host `$11`, then their columns as arrays) in one
/// statement whose text is the same for any count (`crate::row::Unnest`). The items
/// reference the set inserted beside them: PostgreSQL checks a foreign key at the end
/// of the statement, when both rows exist.
#[cfg(feature = "postgres")]
const SET_UNNEST: &str = "WITH set_row AS (
   INSERT INTO change_sets (id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock)
   VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text))
 INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status, before_value, vector_clock, host, fingerprint, stale_detail, approvals_needed)
 SELECT $1::text, item_index, tool_name, args, human_summary, status, before_value, $10::text, $11::text, fingerprint,
        stale_detail, approvals_needed
 FROM UNNEST($12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[],
             $20::bigint[])
      AS u(item_index, tool_name, args, human_summary, status, before_value, fingerprint, stale_detail,
           approvals_needed)";

/// The types of [`SET_UNNEST`]'s arrays: the index and the quorum integers.
#[cfg(feature = "postgres")]
const ITEM_TYPES: [crate::row::ArrayType; 9] = {
    use crate::row::ArrayType::{Int, Text};
    [Int, Text, Text, Text, Text, Text, Text, Text, Int]
};

/// Writes `set` and its items with [`SET_UNNEST`].
#[cfg(feature = "postgres")]
async fn insert_set_unnest(
    pg: &mut sqlx::PgConnection,
    set: &ChangeSet,
    clock: &str,
    host: Option<&str>,
) -> Result<(), StoreError> {
    use crate::row::{Unnest, Value as V};
    let scalars = vec![
        V::from(set.id.to_string()),
        V::from(set.agent_id.as_str()),
        V::from(set.target_kind.as_str()),
        V::from(set.target_id.as_str()),
        V::from(set.thread_id.as_str()),
        V::from(set.run_key.as_str()),
        V::from(set.status.as_str()),
        V::from(timefmt::format(set.created_at)),
        V::from(set.resolved_at.map(timefmt::format)),
        V::from(clock),
        V::from(host),
    ];
    let mut insert = Unnest::new(SET_UNNEST, "change_items", scalars, &ITEM_TYPES);
    for (index, item) in set.items.iter().enumerate() {
        let index = i64::try_from(index).map_err(|e| StoreError::corrupt("change_items", e))?;
        insert.row(vec![
            V::from(index),
            V::from(item.tool_name.as_str()),
            V::from(item.args.to_string()),
            V::from(item.human_summary.as_str()),
            V::from(item.status.as_str()),
            V::from(item.before.as_ref().map(Value::to_string)),
            V::from(item.fingerprint.as_ref().map(Value::to_string)),
            V::from(item.stale_detail.as_deref()),
            V::from(item.approvals_needed.map(i64::from)),
        ])?;
    }
    // Even with no item: the set's row is written by the statement's `WITH`.
    insert.query().execute(pg).await?;
    Ok(())
}

/// Writes the set's status, resolution time and clock, and the statuses of the items
/// at `changed_items`, each with its outbox message.
#[tracing::instrument(skip_all, fields(change_set = %set.id, status = %set.status))]
pub async fn update_status(
    conn: &mut Connection,
    set: &ChangeSet,
    changed_items: &[usize],
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let mut plan = WritePlan::default();
    update_status_into(conn, set, changed_items, now, &mut plan).await?;
    plan.apply(conn, now).await
}

/// [`update_status`] with its writes (the statuses and their outbox messages) in
/// `plan`, which the caller applies before it commits; only a webhook event of a set
/// that closes is written at once.
pub async fn update_status_into(
    conn: &mut Connection,
    set: &ChangeSet,
    changed_items: &[usize],
    now: OffsetDateTime,
    plan: &mut WritePlan,
) -> Result<(), StoreError> {
    for statement in status_statements(set, changed_items, crate::Backend::of(conn)) {
        plan.statement(statement);
    }
    for (index, item) in changed_items
        .iter()
        .filter_map(|&index| Some((index, set.items.get(index)?)))
    {
        let payload = json!({"changeSetId": set.id, "itemIndex": index, "status": item.status});
        plan.message_text(
            entity::CHANGE_ITEM,
            format!("{}:{index}", set.id),
            payload.to_string(),
        );
    }
    plan.message_text(entity::CHANGE_SET, set.id.to_string(), set_payload(set)?);
    if let Some(event) = webhooks::status_event(set, changed_items) {
        webhooks::enqueue_set_event(conn, event, set, now).await?;
    }
    Ok(())
}

/// [`update_status`] without the outbox messages; a changed item takes the set's clock.
pub(crate) async fn write_status(
    conn: &mut Connection,
    set: &ChangeSet,
    changed_items: &[usize],
) -> Result<(), StoreError> {
    for statement in status_statements(set, changed_items, crate::Backend::of(conn)) {
        statement.query().execute(&mut *conn).await?;
    }
    Ok(())
}

/// The statements of [`write_status`]: the set's status, resolution time and clock,
/// then its changed items' statuses (each taking the set's clock), up to
/// [`ITEMS_PER_STATUS_WRITE`] items in one statement; on PostgreSQL all of them in one
/// statement of one text ([`ITEM_STATUSES_JSON`]).
fn status_statements(
    set: &ChangeSet,
    changed_items: &[usize],
    backend: crate::Backend,
) -> Vec<Statement> {
    let clock = json!(set.vector_clock).to_string();
    let mut statements = vec![
        Statement::new(
            "UPDATE change_sets SET status = $1, resolved_at = $2, vector_clock = $3 WHERE id = $4"
                .to_owned(),
        )
        .bind(set.status.as_str())
        .bind(set.resolved_at.map(timefmt::format))
        .bind(clock.as_str())
        .bind(set.id.to_string()),
    ];
    let changed: Vec<(usize, &ChangeItem)> = changed_items
        .iter()
        .filter_map(|&index| Some((index, set.items.get(index)?)))
        .collect();
    if backend == crate::Backend::Postgres {
        if !changed.is_empty() {
            statements.push(item_statuses_json(set.id, &clock, &changed));
        }
        return statements;
    }
    for chunk in changed.chunks(ITEMS_PER_STATUS_WRITE) {
        statements.push(item_statuses(set.id, &clock, chunk));
    }
    statements
}

/// [`item_statuses`] on PostgreSQL, whatever the count of items: `$1` the clock, `$2`
/// the set, `$3` the items as a JSON array of rows. Why JSON and not arrays as
/// `crate::row::Unnest` binds them: the statement is one of a write plan's, which
/// bind through sqlx's `Any` driver (no arrays there); a JSON string carries text and
/// NULL exactly, and the text stays the same for 1 item or 25 (issue 55).
const ITEM_STATUSES_JSON: &str =
    "UPDATE change_items c SET status = u.status, vector_clock = $1, stale_detail = u.stale_detail,
        before_value = u.before_value, fingerprint = u.fingerprint
 FROM json_to_recordset($3::json)
      AS u(item_index bigint, status text, stale_detail text, before_value text, fingerprint text)
 WHERE c.change_set_id = $2 AND c.item_index = u.item_index";

/// The statement of [`ITEM_STATUSES_JSON`] for `items` of set `set_id`.
fn item_statuses_json(set_id: Uuid, clock: &str, items: &[(usize, &ChangeItem)]) -> Statement {
    let rows: Vec<Value> = items
        .iter()
        .map(|(index, item)| {
            json!({
                "item_index": index,
                "status": item.status.as_str(),
                "stale_detail": item.stale_detail,
                "before_value": item.before.as_ref().map(Value::to_string),
                "fingerprint": item.fingerprint.as_ref().map(Value::to_string),
            })
        })
        .collect();
    Statement::new(ITEM_STATUSES_JSON.to_owned())
        .bind(clock)
        .bind(set_id.to_string())
        .bind(Value::Array(rows).to_string())
}

/// How many items [`item_statuses`] updates in one statement (5 parameters each).
const ITEMS_PER_STATUS_WRITE: usize = 100;

/// The statuses of `items` of set `set_id`, each with `clock`, in one statement: a
/// confirm-all of 25 items or a dismissal writes its items' statuses in one round trip.
/// A merge may bring the stale-target guard's refresh of an item too.
fn item_statuses(set_id: Uuid, clock: &str, items: &[(usize, &ChangeItem)]) -> Statement {
    // `CASE item_index WHEN $i THEN $v …` per column: parameters 1 and 2 are the clock
    // and the set, then five per item (its index and four values).
    let case = |column: usize| {
        let arms: String = (0..items.len())
            .map(|n| format!(" WHEN ${} THEN ${}", 3 + 5 * n, 4 + 5 * n + column))
            .collect();
        format!("CASE item_index{arms} END")
    };
    let indexes: Vec<String> = (0..items.len())
        .map(|n| format!("${}", 3 + 5 * n))
        .collect();
    let sql = format!(
        "UPDATE change_items SET status = {}, vector_clock = $1, stale_detail = {}, before_value = {},
             fingerprint = {}
         WHERE change_set_id = $2 AND item_index IN ({})",
        case(0),
        case(1),
        case(2),
        case(3),
        indexes.join(", ")
    );
    items.iter().fold(
        Statement::new(sql).bind(clock).bind(set_id.to_string()),
        |statement, (index, item)| {
            statement
                .bind(*index as i64)
                .bind(item.status.as_str())
                .bind(item.stale_detail.as_deref())
                .bind(item.before.as_ref().map(Value::to_string))
                .bind(item.fingerprint.as_ref().map(Value::to_string))
        },
    )
}

fn decode_set(row: &impl StoreRow, items: Vec<ChangeItem>) -> Result<ChangeSet, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(TABLE, e);
    let id: String = row.value("id")?;
    let status: String = row.value("status")?;
    let created_at: String = row.value("created_at")?;
    let resolved_at: Option<String> = row.value("resolved_at")?;
    let clock: String = row.value("vector_clock")?;
    Ok(ChangeSet {
        id: Uuid::parse_str(&id).map_err(|e| corrupt(e.to_string()))?,
        agent_id: row.value("agent_id")?,
        target_kind: row.value("target_kind")?,
        target_id: row.value("target_id")?,
        thread_id: row.value("thread_id")?,
        run_key: row.value("run_key")?,
        status: status
            .parse::<ChangeSetStatus>()
            .map_err(|e| corrupt(e.to_string()))?,
        items,
        created_at: timefmt::parse(TABLE, &created_at)?,
        resolved_at: resolved_at.map(|t| timefmt::parse(TABLE, &t)).transpose()?,
        vector_clock: serde_json::from_str::<VectorClock>(&clock)
            .map_err(|e| corrupt(e.to_string()))?,
    })
}

fn decode_item(row: &impl StoreRow) -> Result<ChangeItem, StoreError> {
    decode_item_as(row, "status")
}

/// An item of `row`, its status in column `status_column` (a join with its set names
/// it apart from the set's).
fn decode_item_as(row: &impl StoreRow, status_column: &str) -> Result<ChangeItem, StoreError> {
    let corrupt = |e: String| StoreError::corrupt("change_items", e);
    let args: String = row.value("args")?;
    let status: String = row.value(status_column)?;
    let before: Option<String> = row.value("before_value")?;
    let fingerprint: Option<String> = row.value("fingerprint")?;
    Ok(ChangeItem {
        tool_name: row.value("tool_name")?,
        args: serde_json::from_str(&args).map_err(|e| corrupt(e.to_string()))?,
        human_summary: row.value("human_summary")?,
        status: status
            .parse::<ChangeItemStatus>()
            .map_err(|e| corrupt(e.to_string()))?,
        before: before
            .map(|b| serde_json::from_str(&b))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        fingerprint: fingerprint
            .map(|f| serde_json::from_str(&f))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        stale_detail: row.value("stale_detail")?,
        approvals_needed: row
            .value::<Option<i64>>("approvals_needed")?
            .map(|n| u32::try_from(n).map_err(|e| corrupt(e.to_string())))
            .transpose()?,
        revision: u32::try_from(row.value::<i64>("revision")?)
            .map_err(|e| corrupt(e.to_string()))?,
    })
}

/// Marks item `index` of set `change_set_id` stale (`detail`) and refreshes what it was
/// proposed against: `before` and `fingerprint` as the target holds them now, so that a
/// new confirmation applies to the target as it is. The refresh starts a new revision:
/// approvals given for the target as it was no longer count.
pub async fn mark_stale(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
    detail: &str,
    before: Option<&Value>,
    fingerprint: Option<&Value>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE change_items SET stale_detail = $1, before_value = $2, fingerprint = $3,
             revision = revision + 1
         WHERE change_set_id = $4 AND item_index = $5",
    )
    .bind(detail)
    .bind(before.map(Value::to_string))
    .bind(fingerprint.map(Value::to_string))
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .execute(conn)
    .await?;
    Ok(())
}

/// What an undo set reverses: an applied item of another set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Undoes {
    /// The set of the item undone.
    pub change_set_id: Uuid,
    /// Its index.
    pub item_index: usize,
    /// The operation id it was applied under.
    pub operation_id: String,
}

/// Records that set `change_set_id` reverses `undoes`.
pub async fn set_undoes(
    conn: &mut Connection,
    change_set_id: Uuid,
    undoes: &Undoes,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE change_sets SET undoes = $1 WHERE id = $2")
        .bind(json!(undoes).to_string())
        .bind(change_set_id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// What set `change_set_id` reverses, when it is an undo set.
pub async fn undoes(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<Option<Undoes>, StoreError> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT undoes FROM change_sets WHERE id = $1")
            .bind(change_set_id.to_string())
            .fetch_optional(conn)
            .await?;
    text.flatten()
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| StoreError::corrupt(TABLE, format!("undoes: {e}")))
        })
        .transpose()
}

/// What the confirmed undo sets of agent `agent_id` reversed: the items its history
/// shows as undone.
pub async fn undone_for_agent(
    conn: &mut Connection,
    agent_id: &str,
) -> Result<Vec<Undoes>, StoreError> {
    let links: Vec<String> = sqlx::query_scalar(
        "SELECT s.undoes FROM change_sets s
         JOIN change_items i ON i.change_set_id = s.id AND i.item_index = 0
         WHERE s.agent_id = $1 AND s.undoes IS NOT NULL AND i.status = 'confirmed'",
    )
    .bind(agent_id)
    .fetch_all(conn)
    .await?;
    links
        .iter()
        .map(|text| {
            serde_json::from_str(text)
                .map_err(|e| StoreError::corrupt(TABLE, format!("undoes: {e}")))
        })
        .collect()
}

/// The sets of `rows`, each with its items: the items of up to [`SETS_PER_ITEM_READ`]
/// sets in one statement, not one statement per set (a list of 100 open sets is two
/// round trips to the database, not 101).
async fn with_items(conn: &mut Connection, rows: &[AnyRow]) -> Result<Vec<ChangeSet>, StoreError> {
    let ids = rows
        .iter()
        .map(|row| row.try_get::<String, _>("id"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut items: std::collections::HashMap<String, Vec<ChangeItem>> =
        std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(SETS_PER_ITEM_READ) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(items_of_sets_sql(chunk.len())));
        for id in chunk {
            query = query.bind(id.as_str());
        }
        for row in query.fetch_all(&mut *conn).await? {
            let set: String = row.try_get("change_set_id")?;
            items.entry(set).or_default().push(decode_item(&row)?);
        }
    }
    rows.iter()
        .zip(&ids)
        .map(|(row, id)| decode_set(row, items.remove(id).unwrap_or_default()))
        .collect()
}

/// The read of the items of `sets` sets (their ids bound as `$1`…), in set and item
/// order.
fn items_of_sets_sql(sets: usize) -> String {
    let params: Vec<String> = (1..=sets).map(|n| format!("${n}")).collect();
    format!(
        concat!(
            "SELECT ",
            item_columns!(),
            " FROM change_items WHERE change_set_id IN ({}) ORDER BY change_set_id, item_index"
        ),
        params.join(", ")
    )
}

/// How many sets' items [`with_items`] reads in one statement (SQLite allows 32,766
/// parameters, PostgreSQL 65,535).
const SETS_PER_ITEM_READ: usize = 500;

/// The columns of a set (`s`) and its items (`i`, the item's status as `item_status`),
/// read in one statement by [`load`] and [`load_for_decision`].
macro_rules! set_and_item_columns {
    () => {
        "s.id, s.agent_id, s.target_kind, s.target_id, s.thread_id, s.run_key, s.status, s.created_at,
         s.resolved_at, s.vector_clock,
         i.item_index, i.tool_name, i.args, i.human_summary, i.status AS item_status, i.before_value,
         i.fingerprint, i.stale_detail, i.approvals_needed, i.revision"
    };
}

/// The set with `id` (deleted sets are not found), with its items in the same
/// statement.
pub async fn load(conn: &mut Connection, id: Uuid) -> Result<Option<ChangeSet>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        set_and_item_columns!(),
        " FROM change_sets s LEFT JOIN change_items i ON i.change_set_id = s.id
         WHERE s.id = $1 AND s.deleted_at IS NULL
         ORDER BY i.item_index"
    ))
    .bind(id.to_string())
    .fetch_all(&mut *conn)
    .await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    decode_set(first, decode_items(&rows)?).map(Some)
}

/// The items of `rows` (a set without items is one row whose item columns are all
/// NULL).
fn decode_items(rows: &[AnyRow]) -> Result<Vec<ChangeItem>, StoreError> {
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        if row.value::<Option<i64>>("item_index")?.is_some() {
            items.push(decode_item_as(row, "item_status")?);
        }
    }
    Ok(items)
}

/// What a decision on a set reads, under its transaction's lock, before its host is
/// asked anything ([`load_for_decision`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DecisionRead {
    /// The set, with its items.
    pub set: ChangeSet,
    /// Who serves each item, in item order: its host, where its effect lands, and the
    /// job holding its confirmation in a hold window (as
    /// [`crate::jobs::served_item`] reads one item).
    pub served: Vec<ServedItem>,
    /// The set's agent's rules, or `None` when this database has no such agent (its
    /// set came from another device).
    pub rules: Option<StoredRules>,
    /// What the read found of the operations its caller asked about
    /// ([`load_for_decision_with`]): none asked, none known.
    pub applied: AppliedRead,
    /// Each item's current revision and its approvals, in item order (as
    /// [`crate::approvals::current`] reads one item): a quorum is counted, and a held
    /// call's approvers named, from the read, not from a read of rows written since.
    pub revisions: Vec<Revision>,
    /// This device's chain head as the read found it, under the transaction's write
    /// lock (SQLite only; `None` elsewhere): a plan applied in the same transaction
    /// appends after it without reading it again ([`WritePlan::after_head`]), and
    /// reads it only when the chain moved since.
    pub chain_head: Option<chain::Head>,
}

/// The applied operations a decision's read looked up ([`load_for_decision_with`]):
/// which it asked about, and the stored message of each that was applied.
#[derive(Debug, Clone, Default)]
pub struct AppliedRead {
    asked: Vec<OperationId>,
    found: Vec<(String, String)>,
}

impl AppliedRead {
    /// `None` when the read did not ask about `operation_id` (look it up); else the
    /// message recorded when it was applied, if it was, as
    /// [`crate::operations::applied`] would have answered in the same transaction.
    pub fn known(&self, operation_id: &OperationId) -> Option<Option<String>> {
        if !self.asked.contains(operation_id) {
            return None;
        }
        Some(
            self.found
                .iter()
                .find(|(id, _)| id == operation_id.as_str())
                .map(|(_, message)| message.clone()),
        )
    }
}

/// The columns and joins of [`DECISION_READ`] after its `SELECT` and before its
/// `WHERE`: the set, its items, who serves each, its agent's rules and its items'
/// approvals (one row per approval; few items have any), for the extra columns of
/// [`DECISION_READ_WITH_HEAD`] to come between.
macro_rules! decision_read_columns {
    () => {
        concat!(
            set_and_item_columns!(),
            ", i.effect, i.host, j.id AS held_job, j.due_at AS held_until,
             a.categories AS agent_categories, a.rules AS agent_rules,
             a.tool_settings AS agent_tool_settings, a.shadow_rules AS agent_shadow_rules,
             p.revision AS approval_revision, p.approved_by AS approval_by,
             p.args AS approval_args, p.created_at AS approval_at"
        )
    };
}

/// The joins and order of [`DECISION_READ`].
macro_rules! decision_read_from {
    () => {
        concat!(
            " FROM change_sets s LEFT JOIN change_items i ON i.change_set_id = s.id
             LEFT JOIN execution_jobs j ON ",
            held_job_of_item!(),
            " LEFT JOIN agents a ON a.id = s.agent_id
             LEFT JOIN approvals p ON p.change_set_id = i.change_set_id AND p.item_index = i.item_index
             WHERE s.id = $1 AND s.deleted_at IS NULL
             ORDER BY i.item_index, p.revision, p.created_at, p.approved_by"
        )
    };
}

/// The read of [`load_for_decision`]: the set, its items, who serves each, its
/// agent's rules and its items' approvals, in one statement.
const DECISION_READ: &str = concat!("SELECT ", decision_read_columns!(), decision_read_from!());

/// [`DECISION_READ`] with this device's chain head ([`chain::HEAD`]'s columns), on
/// SQLite: its write transaction holds the database's write lock from `BEGIN
/// IMMEDIATE`, so the head read here is the one its plan appends after unless the
/// transaction itself appended since (its plan's insert checks that, see
/// [`chain::insert_after_checked`]). Not on PostgreSQL, where the chain's lock is
/// taken only at the plan's end.
#[cfg(feature = "sqlite")]
const DECISION_READ_WITH_HEAD: &str = concat!(
    "SELECT ",
    decision_read_columns!(),
    ", ",
    chain_head_columns!(),
    decision_read_from!()
);

/// How many operation ids one read of [`load_for_decision_with`] asks about.
const OPERATIONS_PER_READ: usize = 200;

/// The lookup of `count` applied operations by id.
fn applied_sql(count: usize) -> String {
    let ids: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
    format!(
        "SELECT operation_id, message FROM applied_operations WHERE operation_id IN ({})",
        ids.join(", ")
    )
}

/// The rows of [`DECISION_READ`], decoded as they come (either kind of row).
#[derive(Default)]
struct DecisionRows {
    set: Option<ChangeSet>,
    rules: Option<StoredRules>,
    served: Vec<ServedItem>,
    /// Each item's approval rows, in item order, as the read ordered them.
    approvals: Vec<Vec<(i64, String, Approval)>>,
    /// The index of the item of the last row.
    last_index: Option<i64>,
    chain_head: Option<chain::Head>,
}

impl DecisionRows {
    fn push(&mut self, row: &impl StoreRow) -> Result<(), StoreError> {
        self.push_with(row, false)
    }

    /// [`Self::push`] of a row of [`DECISION_READ_WITH_HEAD`] when `head`.
    fn push_with(&mut self, row: &impl StoreRow, head: bool) -> Result<(), StoreError> {
        if self.set.is_none() {
            self.set = Some(decode_set(row, Vec::new())?);
            if head {
                self.chain_head = Some(chain::decode_head_named(
                    Some(row),
                    ["chain_device", "chain_seq", "chain_hash"],
                )?);
            }
            let categories: Option<String> = row.value("agent_categories")?;
            if categories.is_some() {
                self.rules = Some(agents::stored_rules(
                    row,
                    [
                        "agent_categories",
                        "agent_rules",
                        "agent_tool_settings",
                        "agent_shadow_rules",
                    ],
                )?);
            }
        }
        let Some(index) = row.value::<Option<i64>>("item_index")? else {
            return Ok(());
        };
        let Some(set) = &mut self.set else {
            return Ok(());
        };
        // An item with several approvals comes in as many rows: taken once.
        if self.last_index != Some(index) {
            self.last_index = Some(index);
            set.items.push(decode_item_as(row, "item_status")?);
            self.served.push(crate::jobs::decode_served(row)?);
            self.approvals.push(Vec::new());
        }
        if let Some(approval) = crate::approvals::decode_joined(row)?
            && let Some(rows) = self.approvals.last_mut()
        {
            rows.push(approval);
        }
        Ok(())
    }

    fn read(self, applied: AppliedRead) -> Result<Option<DecisionRead>, StoreError> {
        let Some(set) = self.set else {
            return Ok(None);
        };
        let revisions = set
            .items
            .iter()
            .zip(self.approvals)
            .map(|(item, rows)| {
                crate::approvals::latest(rows.into_iter(), i64::from(item.revision))
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(DecisionRead {
            set,
            served: self.served,
            rules: self.rules,
            applied,
            revisions,
            chain_head: self.chain_head,
        }))
    }
}

/// The set with `id` (deleted sets are not found) as a decision reads it: with its
/// items, who serves each and its agent's rules, in one statement, so a decision on
/// any item of the set reads the database once before its host is asked anything.
pub async fn load_for_decision(
    conn: &mut Connection,
    id: Uuid,
) -> Result<Option<DecisionRead>, StoreError> {
    load_for_decision_with(conn, id, |_| Vec::new()).await
}

/// [`load_for_decision`], and whether each operation `operations` names (given the
/// set as read) was applied ([`DecisionRead::applied`]): everything a decision
/// needs from the database before its host is asked anything. On SQLite both reads
/// run through the C API under one lock of the connection (issue 55): the decision
/// enters the store once to read.
pub async fn load_for_decision_with(
    conn: &mut Connection,
    id: Uuid,
    operations: impl FnOnce(&ChangeSet) -> Vec<OperationId>,
) -> Result<Option<DecisionRead>, StoreError> {
    let id_text = id.to_string();
    #[cfg(feature = "sqlite")]
    if let Some(sqlite) = conn.as_sqlite() {
        return crate::c_api::with_c_api(sqlite, |c| {
            let mut rows = DecisionRows::default();
            {
                let mut statement = c.bound(DECISION_READ_WITH_HEAD, &[Param::Text(&id_text)])?;
                let mut raw = statement.raw_query();
                while let Some(row) = raw.next().or_store()? {
                    rows.push_with(row, true)?;
                }
            }
            let Some(set) = &rows.set else {
                return Ok(None);
            };
            let asked = operations(set);
            let mut found = Vec::new();
            for chunk in asked.chunks(OPERATIONS_PER_READ) {
                let params: Vec<Param<'_>> =
                    chunk.iter().map(|id| Param::Text(id.as_str())).collect();
                let mut statement = c.bound(&applied_sql(chunk.len()), &params)?;
                let mut raw = statement.raw_query();
                while let Some(row) = raw.next().or_store()? {
                    found.push((row.value("operation_id")?, row.value("message")?));
                }
            }
            rows.read(AppliedRead { asked, found })
        })
        .await;
    }
    let fetched = sqlx::query(DECISION_READ)
        .bind(&id_text)
        .fetch_all(&mut *conn)
        .await?;
    let mut rows = DecisionRows::default();
    for row in &fetched {
        rows.push(row)?;
    }
    let Some(set) = &rows.set else {
        return Ok(None);
    };
    let asked = operations(set);
    let mut found = Vec::new();
    for chunk in asked.chunks(OPERATIONS_PER_READ) {
        let params: Vec<Param<'_>> = chunk.iter().map(|id| Param::Text(id.as_str())).collect();
        let sql = applied_sql(chunk.len());
        for row in bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), &params)
            .fetch_all(&mut *conn)
            .await?
        {
            found.push((row.value("operation_id")?, row.value("message")?));
        }
    }
    rows.read(AppliedRead { asked, found })
}

/// Like [`load_for_decision`], but a missing set is an error.
pub async fn require_for_decision(
    conn: &mut Connection,
    id: Uuid,
) -> Result<DecisionRead, StoreError> {
    require_for_decision_with(conn, id, |_| Vec::new()).await
}

/// Like [`load_for_decision_with`], but a missing set is an error.
pub async fn require_for_decision_with(
    conn: &mut Connection,
    id: Uuid,
    operations: impl FnOnce(&ChangeSet) -> Vec<OperationId>,
) -> Result<DecisionRead, StoreError> {
    load_for_decision_with(conn, id, operations)
        .await?
        .ok_or(StoreError::ChangeSetNotFound(id))
}

/// The fewest hex digits a prefix of a set's id must give.
pub const MIN_PREFIX_DIGITS: usize = 8;

/// The id `text` names: a whole id (as [`Uuid::parse_str`] reads it, with no query), or
/// the first [`MIN_PREFIX_DIGITS`] or more hex digits of exactly one set's id (not
/// deleted), in any case, with or without its dashes. Anything else is
/// [`StoreError::InvalidChangeSetId`]; a prefix no set has is
/// [`StoreError::NoChangeSetWithPrefix`], one several sets share
/// [`StoreError::AmbiguousChangeSetId`].
pub async fn resolve_id(conn: &mut Connection, text: &str) -> Result<Uuid, StoreError> {
    let trimmed = text.trim();
    if let Ok(id) = Uuid::parse_str(trimmed) {
        return Ok(id);
    }
    let prefix = id_prefix(trimmed).ok_or_else(|| StoreError::InvalidChangeSetId {
        text: text.to_owned(),
        reason: format!("expected a UUID, or its first {MIN_PREFIX_DIGITS} or more hex digits"),
    })?;
    // `prefix` is hex digits and dashes only: nothing in it is special to LIKE.
    let (first, matches): (Option<String>, i64) = sqlx::query_as(
        "SELECT MIN(id), COUNT(*) FROM change_sets WHERE id LIKE $1 AND deleted_at IS NULL",
    )
    .bind(format!("{prefix}%"))
    .fetch_one(conn)
    .await?;
    match (first, matches) {
        (Some(id), 1) => Uuid::parse_str(&id).map_err(|e| StoreError::corrupt(TABLE, e)),
        (_, 0) | (None, _) => Err(StoreError::NoChangeSetWithPrefix(prefix)),
        (_, matches) => Err(StoreError::AmbiguousChangeSetId { prefix, matches }),
    }
}

/// `text` as the start of a set id's text (lowercase, dashes where the id has them),
/// when it is [`MIN_PREFIX_DIGITS`] or more hex digits, with no dashes or with each of
/// its dashes where an id's text has one.
fn id_prefix(text: &str) -> Option<String> {
    const DASHES: [usize; 4] = [8, 13, 18, 23];
    let text = text.to_ascii_lowercase();
    let bare = text.bytes().all(|b| b.is_ascii_hexdigit());
    let shaped = text.len() <= 36
        && text.bytes().enumerate().all(|(i, b)| {
            if DASHES.contains(&i) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        });
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    if !(bare || shaped) || digits.len() < MIN_PREFIX_DIGITS || digits.len() > 32 {
        return None;
    }
    let mut prefix = String::with_capacity(36);
    for (i, digit) in digits.chars().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            prefix.push('-');
        }
        prefix.push(digit);
    }
    Some(prefix)
}

/// Like [`load`], but a missing set is an error.
pub async fn require(conn: &mut Connection, id: Uuid) -> Result<ChangeSet, StoreError> {
    load(conn, id)
        .await?
        .ok_or(StoreError::ChangeSetNotFound(id))
}

/// The target of set `id`, or `None` when there is no such set. A set's target never
/// changes, so this may be read before the transaction that locks it.
pub async fn target_of(conn: &mut Connection, id: Uuid) -> Result<Option<Target>, StoreError> {
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT target_kind, target_id FROM change_sets WHERE id = $1")
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?;
    Ok(row.map(|(kind, id)| Target::new(kind, id)))
}

/// Open sets (pending or partially resolved, not deleted), newest first.
#[tracing::instrument(skip(conn))]
pub async fn pending(
    conn: &mut Connection,
    filter: &PendingFilter,
) -> Result<Vec<ChangeSet>, StoreError> {
    // One static statement per filter shape, so SQLite can use the partial indexes
    // (an `$1 IS NULL OR target_id = $1` predicate would defeat them).
    // No limit: the largest one (PostgreSQL refuses SQLite's `LIMIT -1`).
    let limit = filter.limit.map_or(i64::MAX, i64::from);
    let (sql, params) = match (&filter.target, &filter.agent_id) {
        (Some(target), Some(agent)) => (
            OPEN_ON_TARGET_OF_AGENT,
            vec![
                Param::Text(&target.kind),
                Param::Text(&target.id),
                Param::Text(agent),
                Param::Int(limit),
            ],
        ),
        (Some(target), None) => (
            concat!(
                "SELECT ",
                set_columns!(),
                " FROM change_sets WHERE ",
                open_sets!(),
                " AND target_kind = $1 AND target_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3"
            ),
            vec![
                Param::Text(&target.kind),
                Param::Text(&target.id),
                Param::Int(limit),
            ],
        ),
        (None, Some(agent)) => (
            concat!(
                "SELECT ",
                set_columns!(),
                " FROM change_sets WHERE ",
                open_sets!(),
                " AND agent_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
            ),
            vec![Param::Text(agent), Param::Int(limit)],
        ),
        (None, None) => (
            concat!(
                "SELECT ",
                set_columns!(),
                " FROM change_sets WHERE ",
                open_sets!(),
                " ORDER BY created_at DESC, id DESC LIMIT $1"
            ),
            vec![Param::Int(limit)],
        ),
    };
    // On SQLite both reads (the sets, then their items) run through the C API under
    // one lock of the connection (issue 55): no round trip to sqlx's worker per
    // statement, and only the columns decoded.
    #[cfg(feature = "sqlite")]
    if let Some(sqlite) = conn.as_sqlite() {
        return crate::c_api::with_c_api(sqlite, |c| pending_through_c_api(c, sql, &params)).await;
    }
    let rows = bind_all(sqlx::query(sql), &params)
        .fetch_all(&mut *conn)
        .await?;
    with_items(conn, &rows).await
}

/// The open sets of one agent on one target (`$1` and `$2` the target, `$3` the
/// agent, `$4` how many), newest first: [`pending`]'s statement for that filter.
pub(crate) const OPEN_ON_TARGET_OF_AGENT: &str = concat!(
    "SELECT ",
    set_columns!(),
    " FROM change_sets WHERE ",
    open_sets!(),
    // `agent_id || ''`: search the target's index (a target has few open
    // sets; an agent may have many), not the agent's, which ties on cost.
    // (SQLite's `+agent_id` idiom is no text operator in PostgreSQL.)
    " AND target_kind = $1 AND target_id = $2 AND agent_id || '' = $3",
    " ORDER BY created_at DESC, id DESC LIMIT $4"
);

/// A column (`0` or `1`) saying whether the agent `$1` has an open set on the target
/// `$2`, `$3`: a wake asks it with the agent's rules, and reads the sets only when
/// there are some ([`crate::decisions::wake`]).
pub(crate) const ANY_OPEN_ON_TARGET_OF_AGENT: &str = concat!(
    "(SELECT count(*) FROM (SELECT 1 FROM change_sets WHERE ",
    open_sets!(),
    " AND target_kind = $2 AND target_id = $3 AND agent_id || '' = $1 LIMIT 1) open_set)"
);

/// The sets `sql` (a read of [`set_columns`]) finds, with their items, through the C
/// API on a locked connection: [`pending`]'s two statements.
#[cfg(feature = "sqlite")]
pub(crate) fn pending_through_c_api(
    c: &crate::c_api::CApi<'_>,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<ChangeSet>, StoreError> {
    let mut statement = c.bound(sql, params)?;
    let mut rows = statement.raw_query();
    let mut sets = Vec::new();
    while let Some(row) = rows.next().or_store()? {
        sets.push(decode_set(row, Vec::new())?);
    }
    let ids: Vec<String> = sets.iter().map(|set| set.id.to_string()).collect();
    let mut items: std::collections::HashMap<String, Vec<ChangeItem>> =
        std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(SETS_PER_ITEM_READ) {
        let mut statement = c.bound(&items_of_sets_sql(chunk.len()), chunk)?;
        let mut rows = statement.raw_query();
        while let Some(row) = rows.next().or_store()? {
            let set: String = row.value("change_set_id")?;
            items.entry(set).or_default().push(decode_item(row)?);
        }
    }
    for (set, id) in sets.iter_mut().zip(&ids) {
        set.items = items.remove(id).unwrap_or_default();
    }
    Ok(sets)
}

/// Ids of open sets created before `cutoff`, oldest first.
pub async fn open_created_before(
    conn: &mut Connection,
    cutoff: OffsetDateTime,
) -> Result<Vec<Uuid>, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM change_sets
         WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL AND created_at < $1
         ORDER BY created_at",
    )
    .bind(timefmt::format(cutoff))
    .fetch_all(conn)
    .await?;
    ids.iter()
        .map(|id| Uuid::parse_str(id).map_err(|e| StoreError::corrupt(TABLE, e)))
        .collect()
}

/// Sets (not deleted) whose status is `status`, narrowed by the target and agent of
/// `filter`, newest first. For the open statuses [`pending`] is the indexed query;
/// listing resolved or expired sets scans the table, which is fine for a review screen
/// that asks now and then.
#[tracing::instrument(skip(conn))]
pub async fn with_status(
    conn: &mut Connection,
    status: ChangeSetStatus,
    filter: &PendingFilter,
) -> Result<Vec<ChangeSet>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        set_columns!(),
        " FROM change_sets
         WHERE status = $1 AND deleted_at IS NULL
           AND ($2 IS NULL OR (target_kind = $2 AND target_id = $3)) AND ($4 IS NULL OR agent_id = $4)
         ORDER BY created_at DESC, id DESC LIMIT $5"
    ))
    .bind(status.as_str())
    .bind(filter.target.as_ref().map(|t| t.kind.as_str()))
    .bind(filter.target.as_ref().map(|t| t.id.as_str()))
    .bind(filter.agent_id.as_deref())
    .bind(filter.limit.map_or(i64::MAX, i64::from))
    .fetch_all(&mut *conn)
    .await?;
    with_items(conn, &rows).await
}

/// Starts revision `revision` of item `index` of set `change_set_id` (an edit under a
/// quorum): approvals of earlier ones no longer count.
pub async fn set_revision(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
    revision: u32,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE change_items SET revision = $1 WHERE change_set_id = $2 AND item_index = $3",
    )
    .bind(i64::from(revision))
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .execute(conn)
    .await?;
    Ok(())
}

/// The newest change sets (at most `limit`, deleted ones left out) whose thread starts
/// with `prefix`, of agent `agent` when given, oldest first, with their items. `prefix`
/// is matched exactly, as in [`crate::audit::with_run_key_prefix`].
pub async fn with_thread_prefix(
    conn: &mut Connection,
    prefix: &'static str,
    agent: Option<&str>,
    limit: u32,
) -> Result<Vec<ChangeSet>, StoreError> {
    let pattern = format!("{prefix}%");
    let limit = i64::from(limit);
    let ids: Vec<String> = match agent {
        Some(agent) => {
            sqlx::query_scalar(
                "SELECT id FROM change_sets WHERE thread_id LIKE $1 AND agent_id = $2
                 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $3",
            )
            .bind(pattern)
            .bind(agent)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT id FROM change_sets WHERE thread_id LIKE $1
                 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $2",
            )
            .bind(pattern)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    let mut sets = Vec::with_capacity(ids.len());
    for id in ids.iter().rev() {
        let id =
            Uuid::parse_str(id).map_err(|e| StoreError::corrupt("change_sets", e.to_string()))?;
        if let Some(set) = load(conn, id).await?
            && set.thread_id.starts_with(prefix)
        {
            sets.push(set);
        }
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use assent_domain::NewChangeSet;

    #[cfg(feature = "postgres")]
    #[test]
    fn the_array_insert_casts_each_column_to_its_type() {
        crate::row::assert_unnest_casts(SET_UNNEST, 11, &ITEM_TYPES);
    }

    #[tokio::test]
    async fn open_sets_come_with_their_own_items_in_order() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("connection");
        let now = OffsetDateTime::UNIX_EPOCH;
        let mut ids = Vec::new();
        for (n, count) in [3_usize, 1, 2].into_iter().enumerate() {
            let items = (0..count)
                .map(|i| ChangeItem::new("t", serde_json::json!({"i": i}), format!("{n}/{i}")))
                .collect();
            let set = ChangeSet::new(NewChangeSet {
                id: Uuid::new_v4(),
                agent_id: "a".into(),
                target: Target::new("task", format!("t{n}")),
                thread_id: "th".into(),
                run_key: format!("r{n}"),
                items,
                created_at: now + time::Duration::seconds(n as i64),
            })
            .expect("a set");
            insert(&mut conn, &set, now).await.expect("inserted");
            ids.push((set.id, count, n));
        }
        let open = pending(&mut conn, &PendingFilter::default())
            .await
            .expect("read");
        assert_eq!(open.len(), 3);
        for set in &open {
            let (_, count, n) = ids
                .iter()
                .find(|(id, ..)| *id == set.id)
                .expect("one of ours");
            let summaries: Vec<&str> = set.items.iter().map(|i| i.human_summary.as_str()).collect();
            let expected: Vec<String> = (0..*count).map(|i| format!("{n}/{i}")).collect();
            assert_eq!(summaries, expected, "set {n}");
        }
    }

    #[test]
    fn prefixes_are_hex_digits_with_the_ids_dashes() {
        let cases = [
            ("0123ABCD", Some("0123abcd")),
            ("0123abcd-", Some("0123abcd")),
            ("0123abcd-ef", Some("0123abcd-ef")),
            ("0123abcdef01", Some("0123abcd-ef01")),
            ("0123abcdef012", Some("0123abcd-ef01-2")),
            (
                "0123abcd-ef01-2345-6789-abcdef01234",
                Some("0123abcd-ef01-2345-6789-abcdef01234"),
            ),
            ("0123abc", None),
            ("0123abc-", None),
            ("0123-abcd", None),
            ("0123abcd_", None),
            ("0123abcd%", None),
            ("0123abcg", None),
            ("", None),
            ("0123abcd-ef01-2345-6789-abcdef0123456", None),
            ("0123abcdef0123456789abcdef01234567", None),
        ];
        for (text, expected) in cases {
            assert_eq!(id_prefix(text).as_deref(), expected, "{text:?}");
        }
    }
}
