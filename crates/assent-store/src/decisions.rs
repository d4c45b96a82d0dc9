//! Decisions: the history a person leaves behind.

use crate::Connection;
#[cfg(feature = "sqlite")]
use crate::error::SqliteResult;
use crate::outbox::entity;
use crate::plan::{PlannedDecision, WritePlan};
use crate::row::{Param, StoreRow, bind_all};
use crate::{StoreError, chain, timefmt};
use assent_domain::{ChangeDecision, Target, VectorClock, Verdict};
use assent_tools::{PastCall, PastOutcome, ToolDefinition};
use serde_json::{Value, json};
use sqlx::Row;
use time::OffsetDateTime;
use uuid::Uuid;

pub mod wake;

/// How a decision answered in an MCP client (`assent mcp --ask-in-client`) names its
/// reviewer: `mcp-client:NAME`.
pub const MCP_CLIENT_PREFIX: &str = "mcp-client:";

const TABLE: &str = "decisions";

/// Inserts a decision and its outbox message. A second final decision for the same
/// item violates a unique index and fails: exactly-once holds even against a bug above.
#[tracing::instrument(skip_all, fields(decision = %decision.id, verdict = %decision.verdict))]
pub async fn insert(
    conn: &mut Connection,
    decision: &ChangeDecision,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    insert_approved(conn, decision, None, now).await
}

/// Inserts a decision made on this device with the digest of the action it approved
/// (a confirmation's; see [`assent_domain::approval_digest`]), and its outbox message.
/// The digest stays on this device: sync carries the decision without it.
pub async fn insert_approved(
    conn: &mut Connection,
    decision: &ChangeDecision,
    approval_digest: Option<&str>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let facts = LocalFacts {
        approval_digest,
        ..LocalFacts::default()
    };
    insert_decided(conn, decision, &facts, now).await
}

/// What a decision made on this device records beside itself and never syncs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFacts<'a> {
    /// A confirmation's digest of the action it approved
    /// ([`assent_domain::approval_digest`]).
    pub approval_digest: Option<&'a str>,
    /// Who decided (a token's id, `--as`, the OS user), when known.
    pub decided_by: Option<&'a str>,
    /// What a shadow rule of the agent said about it: `{rule, agreed}`.
    pub shadow: Option<&'a Value>,
}

/// Inserts a decision made on this device with its [`LocalFacts`], and its outbox
/// message.
pub async fn insert_decided(
    conn: &mut Connection,
    decision: &ChangeDecision,
    facts: &LocalFacts<'_>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let mut plan = WritePlan::default();
    insert_decided_into(conn, decision, facts, &mut plan).await?;
    plan.apply(conn, now).await
}

/// [`insert_decided`] with the decision's chain entry and outbox message in `plan`,
/// which the caller applies before it commits.
pub async fn insert_decided_into(
    conn: &mut Connection,
    decision: &ChangeDecision,
    facts: &LocalFacts<'_>,
    plan: &mut WritePlan,
) -> Result<(), StoreError> {
    write_row(conn, decision, None, facts, plan).await?;
    // Serialized straight into the outbox payload: no intermediate `Value` tree on the
    // confirmation's hot path.
    plan.message(entity::DECISION, decision.id.to_string(), decision)
}

/// [`insert_decided_into`] with the decision's row planned too: [`WritePlan::apply`]
/// writes it with the plan's other decisions in one statement, before the plan's audit
/// rows and chain entries. Nothing in the deciding transaction may read it before the
/// plan is applied: a decision that a delegation record names in the same transaction
/// is written with [`insert_decided_into`]. A second final decision for one item still
/// breaks the unique index, when the plan is applied.
pub fn plan_decided(
    decision: &ChangeDecision,
    facts: &LocalFacts<'_>,
    plan: &mut WritePlan,
) -> Result<(), StoreError> {
    plan.decision(PlannedDecision {
        decision: decision.clone(),
        approval_digest: facts.approval_digest.map(str::to_owned),
        decided_by: facts
            .decided_by
            .or(decision.decided_by.as_deref())
            .map(str::to_owned),
        shadow: facts.shadow.map(Value::to_string),
    });
    plan.entry(chain_entry(decision, facts, None));
    plan.message(entity::DECISION, decision.id.to_string(), decision)
}

/// The chain entry of a decision's row.
fn chain_entry(
    decision: &ChangeDecision,
    facts: &LocalFacts<'_>,
    origin_host: Option<&str>,
) -> chain::Entry {
    let decided_by = facts.decided_by.or(decision.decided_by.as_deref());
    chain::Entry {
        kind: chain::EntryKind::Decision,
        subject: decision.id.to_string(),
        content: chain_content(
            decision,
            facts.approval_digest,
            decided_by,
            facts.shadow,
            origin_host,
        ),
    }
}

/// The decision's row, without an outbox message; `origin_host` is `None` for a
/// decision made on this device.
pub(crate) async fn insert_row(
    conn: &mut Connection,
    decision: &ChangeDecision,
    origin_host: Option<&str>,
    facts: &LocalFacts<'_>,
) -> Result<(), StoreError> {
    let mut plan = WritePlan::default();
    write_row(conn, decision, origin_host, facts, &mut plan).await?;
    plan.apply(conn, decision.created_at).await
}

/// The decision's row, its chain entry planned in `plan`.
async fn write_row(
    conn: &mut Connection,
    decision: &ChangeDecision,
    origin_host: Option<&str>,
    facts: &LocalFacts<'_>,
    plan: &mut WritePlan,
) -> Result<(), StoreError> {
    sqlx::query(concat!(
        "INSERT INTO decisions (",
        decision_row_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
    ))
    .bind(decision.id.to_string())
    .bind(decision.change_set_id.to_string())
    .bind(decision.item_index as i64)
    .bind(&decision.agent_id)
    .bind(&decision.target_kind)
    .bind(&decision.target_id)
    .bind(&decision.tool_name)
    .bind(decision.verdict.as_str())
    .bind(decision.reason.as_deref())
    .bind(decision.edited_args.as_ref().map(Value::to_string))
    .bind(&decision.human_summary)
    .bind(decision.args.to_string())
    .bind(timefmt::format(decision.created_at))
    .bind(json!(decision.vector_clock).to_string())
    .bind(origin_host)
    .bind(facts.approval_digest)
    .bind(facts.decided_by.or(decision.decided_by.as_deref()))
    .bind(facts.shadow.map(Value::to_string))
    .execute(&mut *conn)
    .await?;
    plan.entry(chain_entry(decision, facts, origin_host));
    Ok(())
}

/// A decision row's content on the consent chain: every column but its vector clock
/// (which sync may advance).
pub fn chain_content(
    decision: &ChangeDecision,
    approval_digest: Option<&str>,
    decided_by: Option<&str>,
    shadow: Option<&Value>,
    origin_host: Option<&str>,
) -> Value {
    json!({
        "id": decision.id,
        "changeSetId": decision.change_set_id,
        "itemIndex": decision.item_index,
        "agentId": decision.agent_id,
        "targetKind": decision.target_kind,
        "targetId": decision.target_id,
        "toolName": decision.tool_name,
        "verdict": decision.verdict.as_str(),
        "reason": decision.reason,
        "editedArgs": decision.edited_args,
        "humanSummary": decision.human_summary,
        "args": decision.args,
        "createdAt": timefmt::format(decision.created_at),
        "originHost": origin_host,
        "approvalDigest": approval_digest,
        "decidedBy": decided_by,
        "shadow": shadow,
    })
}

/// A decision row with the columns its chain entry covers beside the decision.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRow {
    /// The decision.
    pub decision: ChangeDecision,
    /// Its approval digest, when a confirmation on this device recorded one.
    pub approval_digest: Option<String>,
    /// What a shadow rule said about it.
    pub shadow: Option<Value>,
    /// The device it was imported from; `None` for this device's own.
    pub origin_host: Option<String>,
}

impl DecisionRow {
    /// Its content on the consent chain.
    pub fn chain_content(&self) -> Value {
        chain_content(
            &self.decision,
            self.approval_digest.as_deref(),
            self.decision.decided_by.as_deref(),
            self.shadow.as_ref(),
            self.origin_host.as_deref(),
        )
    }
}

/// Every decision row, for [`crate::proof`].
pub(crate) async fn all_for_proof(conn: &mut Connection) -> Result<Vec<DecisionRow>, StoreError> {
    let rows = sqlx::query("SELECT * FROM decisions")
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|row| {
            let shadow: Option<String> = row.try_get("shadow")?;
            let shadow = shadow
                .map(|text| serde_json::from_str::<Value>(&text))
                .transpose()
                .map_err(|e| StoreError::corrupt(TABLE, e.to_string()))?;
            Ok(DecisionRow {
                decision: decode(row)?,
                approval_digest: row.try_get("approval_digest")?,
                shadow,
                origin_host: row.try_get("origin_host")?,
            })
        })
        .collect()
}

/// The columns of a decision that [`decode`] reads, as the history reads name them:
/// "recent decisions of an agent about a target" is answered from the covering index of
/// migration 0027, which holds exactly these (a `SELECT *` would also fetch
/// `origin_host`, `approval_digest` and `shadow` from the table, which no caller of these
/// reads looks at).
macro_rules! decision_columns {
    () => {
        "id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason, edited_args, human_summary, args, created_at, vector_clock, decided_by"
    };
}

pub(crate) fn decode(row: &impl StoreRow) -> Result<ChangeDecision, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(TABLE, e);
    let json =
        |text: String| serde_json::from_str::<Value>(&text).map_err(|e| corrupt(e.to_string()));
    let id: String = row.value("id")?;
    let set: String = row.value("change_set_id")?;
    let index: i64 = row.value("item_index")?;
    let verdict: String = row.value("verdict")?;
    let edited: Option<String> = row.value("edited_args")?;
    let args: String = row.value("args")?;
    let created_at: String = row.value("created_at")?;
    let clock: String = row.value("vector_clock")?;
    Ok(ChangeDecision {
        id: Uuid::parse_str(&id).map_err(|e| corrupt(e.to_string()))?,
        change_set_id: Uuid::parse_str(&set).map_err(|e| corrupt(e.to_string()))?,
        item_index: usize::try_from(index).map_err(|e| corrupt(e.to_string()))?,
        agent_id: row.value("agent_id")?,
        target_kind: row.value("target_kind")?,
        target_id: row.value("target_id")?,
        tool_name: row.value("tool_name")?,
        verdict: verdict
            .parse::<Verdict>()
            .map_err(|e| corrupt(e.to_string()))?,
        reason: row.value("reason")?,
        edited_args: edited.map(json).transpose()?,
        human_summary: row.value("human_summary")?,
        args: json(args)?,
        created_at: timefmt::parse(TABLE, &created_at)?,
        vector_clock: serde_json::from_str::<VectorClock>(&clock)
            .map_err(|e| corrupt(e.to_string()))?,
        decided_by: row.value("decided_by")?,
    })
}

/// An agent's most recent decisions on one target, newest first (`$1` the agent, `$2`
/// and `$3` the target, `$4` how many): [`recent`]'s, and a wake's
/// ([`wake`]).
pub(crate) const RECENT_ON_TARGET: &str = concat!(
    "SELECT ",
    decision_columns!(),
    " FROM decisions WHERE agent_id = $1 AND target_kind = $2 AND target_id = $3
     ORDER BY created_at DESC, rowid DESC LIMIT $4"
);

/// The agent's most recent decisions (about `target` when given), newest first.
#[tracing::instrument(skip(conn))]
pub async fn recent(
    conn: &mut Connection,
    agent_id: &str,
    target: Option<&Target>,
    limit: u32,
) -> Result<Vec<ChangeDecision>, StoreError> {
    let (sql, params) = match target {
        Some(target) => (
            RECENT_ON_TARGET,
            vec![
                Param::Text(agent_id),
                Param::Text(target.kind.as_str()),
                Param::Text(target.id.as_str()),
                Param::Int(i64::from(limit)),
            ],
        ),
        None => (
            concat!(
                "SELECT ",
                decision_columns!(),
                " FROM decisions WHERE agent_id = $1 ORDER BY created_at DESC, rowid DESC LIMIT $2"
            ),
            vec![Param::Text(agent_id), Param::Int(i64::from(limit))],
        ),
    };
    // On SQLite through the C API (issue 55): one lock of the connection, no round
    // trip to sqlx's worker, the same decoder.
    #[cfg(feature = "sqlite")]
    if let Some(sqlite) = conn.as_sqlite() {
        return crate::c_api::with_c_api(sqlite, |c| {
            let mut statement = c.bound(sql, &params)?;
            let mut rows = statement.raw_query();
            let mut decisions = Vec::new();
            while let Some(row) = rows.next().or_store()? {
                decisions.push(decode(row)?);
            }
            Ok(decisions)
        })
        .await;
    }
    let rows = bind_all(sqlx::query(sql), &params).fetch_all(conn).await?;
    rows.iter().map(decode).collect()
}

/// Agent `agent_id`'s rejections decided at or after `since`, newest first, at most
/// `limit` (what the rejections remembered are read from).
pub async fn rejected_since(
    conn: &mut Connection,
    agent_id: &str,
    since: OffsetDateTime,
    limit: u32,
) -> Result<Vec<ChangeDecision>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        decision_columns!(),
        " FROM decisions WHERE agent_id = $1 AND verdict = $2 AND created_at >= $3
         ORDER BY created_at DESC, rowid DESC LIMIT $4"
    ))
    .bind(agent_id)
    .bind(Verdict::Rejected.as_str())
    .bind(timefmt::format(since))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// Every confirmation with edited arguments, with the run key of its set, oldest first:
/// what lets a listing of the audit trail say who edited the arguments a record shows
/// and what the agent had proposed.
pub async fn edited_with_run_keys(
    conn: &mut Connection,
) -> Result<Vec<(String, ChangeDecision)>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        decision_columns!(),
        ", (SELECT s.run_key FROM change_sets s WHERE s.id = decisions.change_set_id) AS set_run_key
         FROM decisions WHERE edited_args IS NOT NULL AND verdict = $1 ORDER BY created_at, rowid"
    ))
    .bind(Verdict::Confirmed.as_str())
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            let run_key: Option<String> = row.try_get("set_run_key")?;
            Ok((run_key.unwrap_or_default(), decode(row)?))
        })
        .collect()
}

/// One decision, by id; `None` when there is none.
pub async fn by_id(conn: &mut Connection, id: Uuid) -> Result<Option<ChangeDecision>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        decision_columns!(),
        " FROM decisions WHERE id = $1"
    ))
    .bind(id.to_string())
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode).transpose()
}

/// Every decision about one set, oldest first.
pub async fn for_change_set(
    conn: &mut Connection,
    change_set_id: Uuid,
) -> Result<Vec<ChangeDecision>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        decision_columns!(),
        " FROM decisions WHERE change_set_id = $1 ORDER BY created_at, rowid"
    ))
    .bind(change_set_id.to_string())
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// The newest position in the decision feed (0 when empty): where a follower that
/// wants only decisions made from now on starts.
pub async fn feed_position(conn: &mut Connection) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(seq), 0) FROM decision_feed")
            .fetch_one(conn)
            .await?,
    )
}

/// The decisions committed after decision-feed position `after`, at most `limit`, in
/// commit order, each with its position (migration 0032). A decision whose set was
/// deleted since is left out.
pub async fn feed_since(
    conn: &mut Connection,
    after: i64,
    limit: u32,
) -> Result<Vec<(i64, ChangeDecision)>, StoreError> {
    let rows = sqlx::query(
        "SELECT f.seq, d.id, d.change_set_id, d.item_index, d.agent_id, d.target_kind,
                d.target_id, d.tool_name, d.verdict, d.reason, d.edited_args, d.human_summary,
                d.args, d.created_at, d.vector_clock, d.decided_by
         FROM decision_feed f JOIN decisions d ON d.id = f.decision_id
         WHERE f.seq > $1 ORDER BY f.seq LIMIT $2",
    )
    .bind(after)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| Ok((row.try_get::<i64, _>("seq")?, decode(row)?)))
        .collect()
}

/// The statement of [`past_calls`] with its filter `$filter` on `decisions d`: each final
/// decision with whether a standing grant made it (a delegation record links it to a
/// grant: no person looked at the call), and the definition in force of the item's
/// tool when an upstream's catalog recorded one for an agent (since when, and whether a
/// person accepted it). An engine's own catalog (no agent) is left out: its definitions
/// are the service's own code, pinned as they are, and change only with a release.
macro_rules! past_calls_sql {
    ($filter:literal) => {
        concat!(
            "SELECT d.id, d.change_set_id, d.item_index, d.agent_id, d.tool_name, d.verdict, d.reason,
                    d.edited_args, d.origin_host, d.decided_by, d.created_at, d.args, d.target_id,
                    (SELECT MIN(g.grant_id) FROM delegations g WHERE g.decision_id = d.id) AS grant_id,
                    t.defined_at, t.hash AS tool_hash, t.pinned_hash AS tool_pinned_hash
             FROM decisions d
             LEFT JOIN change_items i ON i.change_set_id = d.change_set_id AND i.item_index = d.item_index
             LEFT JOIN host_tools t ON t.host = i.host AND t.tool_name = i.tool_name AND t.agent_id IS NOT NULL
             WHERE ",
            $filter,
            " AND d.verdict IN ('confirmed', 'rejected')
             AND d.change_set_id NOT IN (SELECT id FROM change_sets WHERE undoes IS NOT NULL)
             ORDER BY d.created_at, d.rowid"
        )
    };
}

/// The final decisions (confirmed or rejected) made at or after `since`, of agent
/// `agent` when given, oldest first, as the history's pure readers take them
/// ([`assent_tools::suggest_grants`], [`assent_tools::backtest`]): a confirmation with
/// changed arguments is an edit, and an item a confirmed undo set reverses is undone.
/// The undo sets' own decisions are left out: a person proposed those, not the agent.
///
/// A call's `reviewer` is the person who decided it when the decision names one
/// (`decided_by`), else the device it was decided on (its `origin_host` once synced,
/// `local` for this one), so `reviewers` is a lower bound on the people.
pub async fn past_calls(
    conn: &mut Connection,
    agent: Option<&str>,
    since: OffsetDateTime,
) -> Result<Vec<PastCall>, StoreError> {
    let since = timefmt::format(since);
    let rows = match agent {
        Some(agent) => {
            sqlx::query(past_calls_sql!("d.agent_id = $1 AND d.created_at >= $2"))
                .bind(agent)
                .bind(since)
                .fetch_all(&mut *conn)
                .await?
        }
        None => {
            sqlx::query(past_calls_sql!("d.created_at >= $1"))
                .bind(since)
                .fetch_all(&mut *conn)
                .await?
        }
    };
    let links: Vec<String> = sqlx::query_scalar(
        "SELECT s.undoes FROM change_sets s
         JOIN change_items i ON i.change_set_id = s.id AND i.item_index = 0
         WHERE s.undoes IS NOT NULL AND i.status = 'confirmed'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut undone = std::collections::BTreeSet::new();
    for link in links {
        let undoes: crate::change_sets::Undoes = serde_json::from_str(&link)
            .map_err(|e| StoreError::corrupt("change_sets", format!("undoes: {e}")))?;
        undone.insert((undoes.change_set_id.to_string(), undoes.item_index));
    }
    let corrupt = |e: String| StoreError::corrupt(TABLE, e);
    rows.iter()
        .map(|row| {
            let change_set_id: String = row.try_get("change_set_id")?;
            let index: i64 = row.try_get("item_index")?;
            let item_index = usize::try_from(index).map_err(|e| corrupt(e.to_string()))?;
            let verdict: String = row.try_get("verdict")?;
            let edited: Option<String> = row.try_get("edited_args")?;
            let verdict = verdict
                .parse::<Verdict>()
                .map_err(|e| corrupt(e.to_string()))?;
            let outcome = PastOutcome::of(verdict, edited.is_some())
                .ok_or_else(|| corrupt(format!("{verdict} is not a person's final verdict")))?;
            let origin: Option<String> = row.try_get("origin_host")?;
            let decided_by: Option<String> = row.try_get("decided_by")?;
            let created_at: String = row.try_get("created_at")?;
            let grant_id: Option<String> = row.try_get("grant_id")?;
            let args: String = row.try_get("args")?;
            let args: serde_json::Value =
                serde_json::from_str(&args).map_err(|e| corrupt(format!("args: {e}")))?;
            let defined_at: Option<String> = row.try_get("defined_at")?;
            let tool_hash: Option<String> = row.try_get("tool_hash")?;
            let tool_pinned: Option<String> = row.try_get("tool_pinned_hash")?;
            let definition = match (defined_at, tool_hash, tool_pinned) {
                (Some(since), Some(hash), Some(pinned)) => Some(ToolDefinition {
                    since: timefmt::parse("host_tools", &since)?,
                    accepted: hash == pinned,
                }),
                _ => None,
            };
            // An answer relayed by an MCP client (elicitation) may be the client's own,
            // automated: never counted as a person's.
            let relayed = decided_by
                .as_deref()
                .is_some_and(|by| by.starts_with(MCP_CLIENT_PREFIX));
            Ok(PastCall {
                automatic: grant_id.is_some() || relayed,
                definition,
                decision_id: row.try_get("id")?,
                undone: undone.contains(&(change_set_id.clone(), item_index)),
                change_set_id,
                item_index,
                agent_id: row.try_get("agent_id")?,
                tool_name: row.try_get("tool_name")?,
                outcome,
                reason: row.try_get("reason")?,
                reviewer: Some(decided_by.or(origin).unwrap_or_else(|| "local".to_owned())),
                at: timefmt::parse(TABLE, &created_at)?,
                args,
                target_id: row.try_get("target_id")?,
            })
        })
        .collect()
}

/// The shadow verdicts (`{rule, agreed}`) recorded beside `decisions`, by decision id
/// (one query; decisions no shadow rule covered are left out).
pub async fn shadows_of(
    conn: &mut Connection,
    decisions: &[ChangeDecision],
) -> Result<Vec<(Uuid, Value)>, StoreError> {
    if decisions.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders: Vec<String> = (1..=decisions.len()).map(|n| format!("${n}")).collect();
    let sql = format!(
        "SELECT id, shadow FROM decisions WHERE shadow IS NOT NULL AND id IN ({})",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for decision in decisions {
        query = query.bind(decision.id.to_string());
    }
    let rows = query.fetch_all(conn).await?;
    rows.iter()
        .map(|row| {
            let id: String = row.try_get("id")?;
            let shadow: String = row.try_get("shadow")?;
            Ok((
                Uuid::parse_str(&id).map_err(|e| StoreError::corrupt(TABLE, e))?,
                serde_json::from_str(&shadow).map_err(|e| StoreError::corrupt(TABLE, e))?,
            ))
        })
        .collect()
}
