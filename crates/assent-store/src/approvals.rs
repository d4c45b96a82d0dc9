//! Partial confirmations of items that need more than one person (a quorum, `assent
//! agent ask AGENT TOOL --approvals N`; migration 0017). An item's approvals are kept
//! per revision: an edit starts a new one with the edited arguments, and only the
//! current revision's approvals count. The confirmation that meets the quorum writes
//! the item's one decision as any confirmation does.

use crate::Connection;
use crate::plan::WritePlan;
use crate::row::{Statement, StoreRow};
use crate::{StoreError, chain, timefmt};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

const TABLE: &str = "approvals";

/// One person's approval: who, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// A token's id, `--as`, or the OS user.
    pub by: String,
    /// When.
    pub at: OffsetDateTime,
}

/// An item's current revision and the approvals it has.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Revision {
    /// 0 before any approval or edit; each edit and each stale-target refresh adds one.
    pub number: i64,
    /// The arguments this revision runs with (`None`: the proposal's, or no approval
    /// yet).
    pub args: Option<Value>,
    /// Who approved it, first first.
    pub approvals: Vec<Approval>,
    /// Who last changed the arguments (the first approver of the revision an edit
    /// started), when a person did.
    pub edited_by: Option<String>,
}

impl Revision {
    /// Whether the person behind `by` has approved this revision, through any door
    /// ([`assent_domain::person`]: `slack:U1 (alice)` and `alice` are one person).
    pub fn approved_by(&self, by: &str) -> bool {
        let who = assent_domain::person(by);
        self.approvals
            .iter()
            .any(|a| assent_domain::person(&a.by) == who)
    }

    /// How many distinct people approved this revision: what a quorum counts (two
    /// rows of one person through two doors, written before doors were one person,
    /// count once).
    pub fn people(&self) -> usize {
        let mut people: Vec<&str> = self
            .approvals
            .iter()
            .map(|a| assent_domain::person(&a.by))
            .collect();
        people.sort_unstable();
        people.dedup();
        people.len()
    }
}

fn decode(row: &AnyRow) -> Result<(usize, i64, String, Approval), StoreError> {
    let index: i64 = row.try_get("item_index")?;
    let at: String = row.try_get("created_at")?;
    Ok((
        usize::try_from(index).map_err(|e| StoreError::corrupt(TABLE, e))?,
        row.try_get("revision")?,
        row.try_get("args")?,
        Approval {
            by: row.try_get("approved_by")?,
            at: timefmt::parse(TABLE, &at)?,
        },
    ))
}

/// The approval a row of a decision's read holds, joined to its item
/// (`change_sets::load_for_decision`: `approval_revision`, `approval_by`,
/// `approval_args`, `approval_at`), or `None` when its item has none.
pub(crate) fn decode_joined(
    row: &impl StoreRow,
) -> Result<Option<(i64, String, Approval)>, StoreError> {
    let Some(by) = row.value::<Option<String>>("approval_by")? else {
        return Ok(None);
    };
    let at: String = row.value("approval_at")?;
    Ok(Some((
        row.value("approval_revision")?,
        row.value("approval_args")?,
        Approval {
            by,
            at: timefmt::parse(TABLE, &at)?,
        },
    )))
}

/// Folds rows of one item, ordered by revision then time, into its latest revision;
/// `item_revision` (the item's own counter) is later when a stale-target refresh
/// started a revision nobody approved yet: the arguments carry over, the approvals do
/// not.
pub(crate) fn latest(
    rows: impl Iterator<Item = (i64, String, Approval)>,
    item_revision: i64,
) -> Result<Revision, StoreError> {
    let mut revision = Revision::default();
    for (number, args, approval) in rows {
        if number != revision.number || revision.args.is_none() {
            let args: Value =
                serde_json::from_str(&args).map_err(|e| StoreError::corrupt(TABLE, e))?;
            let edited = revision.args.as_ref().is_some_and(|before| *before != args)
                || (revision.args.is_none() && number > 0);
            let edited_by = if edited {
                Some(approval.by.clone())
            } else {
                revision.edited_by.take()
            };
            revision = Revision {
                number,
                args: Some(args),
                approvals: Vec::new(),
                edited_by,
            };
        }
        revision.approvals.push(approval);
    }
    if item_revision > revision.number {
        revision.number = item_revision;
        revision.approvals.clear();
    }
    Ok(revision)
}

const SELECT: &str = "SELECT item_index, revision, approved_by, args, created_at FROM approvals";

/// Item `index` of set `change_set_id`, whose own revision counter is `item_revision`
/// ([`assent_domain::ChangeItem::revision`]): its current revision and its approvals.
pub async fn current(
    conn: &mut Connection,
    change_set_id: Uuid,
    index: usize,
    item_revision: u32,
) -> Result<Revision, StoreError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE change_set_id = $1 AND item_index = $2 ORDER BY revision, created_at, approved_by"
    )))
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .fetch_all(conn)
    .await?;
    let decoded = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    latest(
        decoded.into_iter().map(|(_, n, args, a)| (n, args, a)),
        i64::from(item_revision),
    )
}

/// Who confirms a held item now, as its job records them (`execution_jobs.approved_by`,
/// migration 0020) for the decision its window's end writes, given its `revision` as
/// the deciding transaction read it, before this confirmation: under a quorum every
/// approver of that revision when it runs `args`, then `reviewer` last as the one who
/// met it (its own approval, planned beside the job, is of the same revision and
/// arguments); otherwise the reviewer alone. Approvals of other arguments are left
/// out: they did not consent to what runs. `item_args` are the item's own.
pub fn approvers(
    revision: &Revision,
    item_args: &Value,
    args: &Value,
    reviewer: Option<&str>,
) -> Vec<String> {
    let approved = revision.args.as_ref().unwrap_or(item_args);
    let mut by: Vec<String> = if approved == args {
        revision
            .approvals
            .iter()
            .map(|a| a.by.clone())
            .filter(|by| Some(by.as_str()) != reviewer)
            .collect()
    } else {
        Vec::new()
    };
    by.extend(reviewer.map(str::to_owned));
    by
}

/// The current revision of every item of `set` that has approvals, by item index.
pub async fn for_change_set(
    conn: &mut Connection,
    set: &assent_domain::ChangeSet,
) -> Result<Vec<(usize, Revision)>, StoreError> {
    let change_set_id = set.id;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE change_set_id = $1 ORDER BY item_index, revision, created_at, approved_by"
    )))
    .bind(change_set_id.to_string())
    .fetch_all(conn)
    .await?;
    let decoded = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    let mut items: Vec<(usize, Revision)> = Vec::new();
    let mut start = 0;
    while start < decoded.len() {
        let index = decoded[start].0;
        let end = decoded[start..]
            .iter()
            .position(|row| row.0 != index)
            .map_or(decoded.len(), |n| start + n);
        let rows = decoded[start..end]
            .iter()
            .map(|(_, n, args, a)| (*n, args.clone(), a.clone()));
        let item_revision = set.items.get(index).map_or(0, |item| item.revision);
        items.push((index, latest(rows, i64::from(item_revision))?));
        start = end;
    }
    Ok(items)
}

/// Plans `by`'s approval of revision `revision` of item `index`, which runs with
/// `args`: the row with the plan's other statements, its chain entry with the plan's
/// entries (last). The same person twice on one revision breaks the primary key: the
/// caller checks first (against the approvals its decision read) and says so. Nothing
/// in the deciding transaction reads it before the plan is applied: a quorum is
/// counted, and a held call's approvers named ([`approvers`]), from what the
/// decision's read found.
pub fn plan_record(
    plan: &mut WritePlan,
    change_set_id: Uuid,
    index: usize,
    revision: i64,
    by: &str,
    args: &Value,
    now: OffsetDateTime,
) {
    plan.statement(record_statement(
        change_set_id,
        index,
        revision,
        by,
        args,
        now,
    ));
    plan.entry(chain_entry(change_set_id, index, revision, by, args, now));
}

fn record_statement(
    change_set_id: Uuid,
    index: usize,
    revision: i64,
    by: &str,
    args: &Value,
    now: OffsetDateTime,
) -> Statement {
    Statement::new(
        "INSERT INTO approvals (change_set_id, item_index, revision, approved_by, args, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)"
            .to_owned(),
    )
    .bind(change_set_id.to_string())
    .bind(index as i64)
    .bind(revision)
    .bind(by)
    .bind(args.to_string())
    .bind(timefmt::format(now))
}

fn chain_entry(
    change_set_id: Uuid,
    index: usize,
    revision: i64,
    by: &str,
    args: &Value,
    now: OffsetDateTime,
) -> chain::Entry {
    chain::Entry {
        kind: chain::EntryKind::Approval,
        subject: approval_subject(change_set_id, index, revision, by),
        content: chain_content(
            change_set_id,
            index,
            revision,
            by,
            args,
            &timefmt::format(now),
        ),
    }
}

/// The chain subject of an approval: its primary key.
pub fn approval_subject(change_set_id: Uuid, index: usize, revision: i64, by: &str) -> String {
    format!("{change_set_id}:{index}:{revision}:{by}")
}

/// An approval's content on the consent chain: its whole row.
pub fn chain_content(
    change_set_id: Uuid,
    index: usize,
    revision: i64,
    by: &str,
    args: &Value,
    created_at: &str,
) -> Value {
    serde_json::json!({
        "changeSetId": change_set_id,
        "itemIndex": index,
        "revision": revision,
        "approvedBy": by,
        "args": args,
        "createdAt": created_at,
    })
}

/// Every approval row as `(subject, content)`, for [`crate::proof`].
pub(crate) async fn all_for_proof(
    conn: &mut Connection,
) -> Result<Vec<(String, Value)>, StoreError> {
    let rows = sqlx::query(
        "SELECT change_set_id, item_index, revision, approved_by, args, created_at FROM approvals",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let corrupt = |e: String| StoreError::corrupt("approvals", e);
            let set: String = row.try_get("change_set_id")?;
            let set = Uuid::parse_str(&set).map_err(|e| corrupt(e.to_string()))?;
            let index: i64 = row.try_get("item_index")?;
            let index = usize::try_from(index).map_err(|e| corrupt(e.to_string()))?;
            let revision: i64 = row.try_get("revision")?;
            let by: String = row.try_get("approved_by")?;
            let args: String = row.try_get("args")?;
            let args: Value = serde_json::from_str(&args).map_err(|e| corrupt(e.to_string()))?;
            let created_at: String = row.try_get("created_at")?;
            Ok((
                approval_subject(set, index, revision, &by),
                chain_content(set, index, revision, &by, &args, &created_at),
            ))
        })
        .collect()
}

/// What a set's views show of its items' quorums: for each item whose tool needs more
/// than one person, or that has approvals, how many it needs and who approved its
/// current revision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Quorum {
    /// `(item index, approvals needed, current revision)`, by item index.
    pub items: Vec<(usize, u32, Revision)>,
}

/// The quorum state of `set`'s items (two reads: its agent's settings, its approvals).
/// An item needs what it was proposed with or what the settings in force say, the
/// larger (matched by pattern as every path matches it).
pub async fn quorum_of(
    conn: &mut Connection,
    set: &assent_domain::ChangeSet,
) -> Result<Quorum, StoreError> {
    let settings = crate::agents::settings_of(conn, &set.agent_id).await?;
    let needs: Vec<u32> = set
        .items
        .iter()
        .map(|item| {
            settings
                .requirements(&item.tool_name)
                .approvals_needed
                .max(item.approvals_needed())
        })
        .collect();
    let quorums = needs.iter().any(|needed| *needed > 1);
    let mut revisions = if !quorums {
        Vec::new()
    } else {
        for_change_set(conn, set).await?
    };
    let mut items = Vec::new();
    for (index, needed) in needs.iter().copied().enumerate() {
        let revision = revisions
            .iter()
            .position(|(i, _)| *i == index)
            .map(|at| revisions.swap_remove(at).1);
        if needed > 1 || revision.is_some() {
            let number = set.items.get(index).map_or(0, |item| item.revision);
            items.push((
                index,
                needed,
                revision.unwrap_or_else(|| Revision {
                    number: i64::from(number),
                    ..Revision::default()
                }),
            ));
        }
    }
    Ok(Quorum { items })
}
