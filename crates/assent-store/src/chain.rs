//! The consent chain: every decision, approval, audit record, job status, rule change
//! and grant this device writes, as an entry holding its canonical content and a
//! SHA-256 over the previous entry's hash, its own position and content.
//!
//! Why a chain and not a checksum per row: editing, removing or reordering any entry
//! breaks the hash of every entry after it, and a head written down elsewhere
//! ([`head`], `assent audit head`) catches a tail rewritten as a whole. Why its own
//! table rather than hash columns on each row: a job's status and an agent's rules
//! are rows that change in place, and their history is what a proof needs (which
//! rule was in force when a call ran). Each chained row keeps its entry's content,
//! so a row edited behind the store's back no longer matches its entry
//! ([`crate::proof`] compares them).
//!
//! Entries are appended by the store functions that write those rows, in the same
//! transaction, so a rollback leaves neither. The writer lock every write holds
//! (`BEGIN IMMEDIATE`, the advisory lock on PostgreSQL) keeps one appender at a time;
//! a second one would break the primary key and fail rather than fork the chain.
//!
//! Chains are per device: a row imported from another device is entered on this
//! device's chain with its origin named, and never rewrites the origin's chain.

use crate::Connection;
use crate::row::{Statement, StoreRow};
use crate::{Backend, StoreError, timefmt};
use assent_domain::canonical_json;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::Row;
use time::OffsetDateTime;

const TABLE: &str = "consent_chain";

/// An arbitrary constant naming the consent chain's lock among PostgreSQL advisory
/// locks (a key apart from the writer lock's).
const CHAIN_LOCK_KEY: i64 = 0x4153_5345_4e54_4348; // "ASSENTCH"

/// The `prev` of a chain's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The first entry: where the chain begins and what it does not claim.
    ChainBegins,
    /// A decision row (`decisions`), by id.
    Decision,
    /// An approval toward a quorum (`approvals`).
    Approval,
    /// An audit record (`audit_records`), by id.
    Audit,
    /// A job written or moved to another status (`execution_jobs`).
    Job,
    /// An agent's categories, rules, shadow rules and tool settings after a change.
    Rules,
    /// A grant written or revoked (`grants`).
    Grant,
    /// The quorum an item was proposed with, when it needs more than one person
    /// (`change_items.approvals_needed`), by `set:index`: the proof checks the item's
    /// approvals against it, so lowering the row later proves nothing.
    Quorum,
}

impl EntryKind {
    /// The kind as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChainBegins => "chainBegins",
            Self::Decision => "decision",
            Self::Approval => "approval",
            Self::Audit => "audit",
            Self::Job => "job",
            Self::Rules => "rules",
            Self::Grant => "grant",
            Self::Quorum => "quorum",
        }
    }

    /// The kind stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::ChainBegins,
            Self::Decision,
            Self::Approval,
            Self::Audit,
            Self::Job,
            Self::Rules,
            Self::Grant,
            Self::Quorum,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// An entry to append: its kind, the key of the row it is about, and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What it records.
    pub kind: EntryKind,
    /// The row it is about (a decision's id, an audit record's id, a job's id, an
    /// agent's id, `set:index:revision:approver` for an approval).
    pub subject: String,
    /// What was written, as JSON (stored canonical).
    pub content: Value,
}

/// An entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEntry {
    /// The device whose chain it is on.
    pub device_id: String,
    /// Its position on that chain, from 1.
    pub seq: u64,
    /// Its kind as stored (unknown kinds are reported by the proof, not dropped).
    pub kind: String,
    /// The row it is about.
    pub subject: String,
    /// Its canonical content.
    pub content: String,
    /// The hash of the entry before it ([`GENESIS`] for the first).
    pub prev: String,
    /// Its own hash ([`entry_hash`]).
    pub hash: String,
    /// When it was written.
    pub created_at: String,
}

impl ChainEntry {
    /// The hash its fields call for, to compare with the stored one.
    pub fn expected_hash(&self) -> String {
        entry_hash(
            &self.prev,
            &self.device_id,
            self.seq,
            &self.kind,
            &self.subject,
            &self.content,
        )
    }
}

/// SHA-256 (hex) of an entry: each field prefixed by its length in bytes, so no
/// field can absorb another's text.
pub fn entry_hash(
    prev: &str,
    device_id: &str,
    seq: u64,
    kind: &str,
    subject: &str,
    content: &str,
) -> String {
    let mut hasher = Sha256::new();
    for part in [prev, device_id, &seq.to_string(), kind, subject, content] {
        hasher.update(format!("{}:", part.len()).as_bytes());
        hasher.update(part.as_bytes());
    }
    assent_domain::lower_hex(&hasher.finalize())
}

/// Where a device's chain stands: what to write down, publish or send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The device.
    pub device_id: String,
    /// How many entries its chain has.
    pub entries: u64,
    /// The last entry's hash ([`GENESIS`] while the chain is empty).
    pub hash: String,
}

/// This device's head.
pub async fn head(conn: &mut Connection) -> Result<Head, StoreError> {
    let row = sqlx::query(HEAD).fetch_optional(&mut *conn).await?;
    decode_head(row.as_ref())
}

/// The read of this device's head ([`decode_head`] decodes it).
pub(crate) const HEAD: &str = "SELECT d.host_id AS device,
        (SELECT seq FROM consent_chain c WHERE c.device_id = d.host_id ORDER BY seq DESC LIMIT 1) AS seq,
        (SELECT hash FROM consent_chain c WHERE c.device_id = d.host_id ORDER BY seq DESC LIMIT 1) AS hash
 FROM sync_device d WHERE d.singleton = 1";

/// The head [`HEAD`] read (`None`: no row).
pub(crate) fn decode_head(row: Option<&impl StoreRow>) -> Result<Head, StoreError> {
    decode_head_named(row, ["device", "seq", "hash"])
}

/// [`decode_head`] of a row holding [`HEAD`]'s three columns under the names
/// `[device, seq, hash]` (`chain_head_columns!` in a read of other rows).
pub(crate) fn decode_head_named(
    row: Option<&impl StoreRow>,
    [device, seq, hash]: [&str; 3],
) -> Result<Head, StoreError> {
    let row = row.ok_or_else(|| {
        StoreError::corrupt(
            TABLE,
            "the database has no device id (sync_device is empty)",
        )
    })?;
    let seq: Option<i64> = row.value(seq)?;
    Ok(Head {
        device_id: row.value(device)?,
        entries: seq.map_or(Ok(0), |s| {
            u64::try_from(s).map_err(|e| StoreError::corrupt(TABLE, format!("seq {s}: {e}")))
        })?,
        hash: row
            .value::<Option<String>>(hash)?
            .unwrap_or_else(|| GENESIS.to_owned()),
    })
}

/// Appends `entries` to this device's chain in the caller's transaction: one read of
/// the head, one insert. The first append on a database also writes the chain's
/// beginning (and the rules every agent had then, so a proof knows the rules in force
/// from the first entry on).
pub(crate) async fn append(
    conn: &mut Connection,
    entries: Vec<Entry>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let head = locked_head(conn).await?;
    let entries = if head.entries == 0 {
        let mut first = beginning(conn).await?;
        first.extend(entries);
        first
    } else {
        entries
    };
    write(conn, head, entries, now).await
}

/// This device's head, read under the chain's lock (taken on PostgreSQL, where
/// writers of different targets run side by side; SQLite has one writer at a time).
async fn locked_head(conn: &mut Connection) -> Result<Head, StoreError> {
    if Backend::of(conn) == Backend::Postgres {
        // Writers of different targets run side by side on PostgreSQL: the chain is
        // theirs to share, one appender at a time until each commits.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(CHAIN_LOCK_KEY)
            .execute(&mut *conn)
            .await?;
    }
    head(conn).await
}

/// Writes `entries` after `head`: one insert.
async fn write(
    conn: &mut Connection,
    head: Head,
    entries: Vec<Entry>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        let insert = insert_after_unnest(head, entries, now)?;
        if !insert.is_empty() {
            insert.query().execute(pg).await?;
        }
        return Ok(());
    }
    insert_after(head, entries, now)?
        .query()
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// [`insert_after`] on PostgreSQL: `$1` the device, `$2` the time, then the entries'
/// columns as arrays, one statement text whatever the count (`crate::row::Unnest`).
#[cfg(feature = "postgres")]
const INSERT_UNNEST: &str =
    "INSERT INTO consent_chain (device_id, seq, kind, subject, content, prev, hash, created_at)
 SELECT $1::text, seq, kind, subject, content, prev, hash, $2::text
 FROM UNNEST($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
      AS u(seq, kind, subject, content, prev, hash)";

/// The types of [`INSERT_UNNEST`]'s arrays: `seq` an integer, the rest text.
#[cfg(feature = "postgres")]
const INSERT_TYPES: [crate::row::ArrayType; 6] = {
    use crate::row::ArrayType::{Int, Text};
    [Int, Text, Text, Text, Text, Text]
};

/// [`insert_after`]'s rows as [`INSERT_UNNEST`]: the same entries, hashed the same way.
#[cfg(feature = "postgres")]
fn insert_after_unnest(
    head: Head,
    entries: Vec<Entry>,
    now: OffsetDateTime,
) -> Result<crate::row::Unnest, StoreError> {
    use crate::row::{Unnest, Value};
    let scalars = vec![
        Value::from(head.device_id.as_str()),
        Value::from(timefmt::format(now)),
    ];
    let mut insert = Unnest::new(INSERT_UNNEST, TABLE, scalars, &INSERT_TYPES);
    for row in hashed_rows(&head, entries) {
        let (seq, kind, subject, content, prev, hash) = row?;
        insert.row(vec![
            Value::from(seq),
            Value::from(kind),
            Value::from(subject),
            Value::from(content),
            Value::from(prev),
            Value::from(hash),
        ])?;
    }
    Ok(insert)
}

/// An entry's row after `head`: seq, kind, subject, canonical content, prev, hash.
#[cfg(feature = "postgres")]
type HashedRow = (i64, &'static str, String, String, String, String);

/// The rows of `entries` after `head`, each hashed onto the one before.
#[cfg(feature = "postgres")]
fn hashed_rows(
    head: &Head,
    entries: Vec<Entry>,
) -> impl Iterator<Item = Result<HashedRow, StoreError>> + '_ {
    let mut prev = head.hash.clone();
    (1u64..).zip(entries).map(move |(offset, entry)| {
        let seq = head.entries + offset;
        let content = canonical_json(&entry.content);
        let kind = entry.kind.as_str();
        let hash = entry_hash(&prev, &head.device_id, seq, kind, &entry.subject, &content);
        let seq = i64::try_from(seq).map_err(|e| StoreError::corrupt(TABLE, e))?;
        let prev = std::mem::replace(&mut prev, hash.clone());
        Ok((seq, kind, entry.subject, content, prev, hash))
    })
}

/// The insert of `entries` after `head`, each hashed onto the one before.
pub(crate) fn insert_after(
    head: Head,
    entries: Vec<Entry>,
    now: OffsetDateTime,
) -> Result<Statement, StoreError> {
    let created_at = timefmt::format(now);
    let mut prev = head.hash;
    let mut rows = Vec::with_capacity(entries.len());
    for (offset, entry) in (1u64..).zip(entries) {
        let seq = head.entries + offset;
        let content = canonical_json(&entry.content);
        let kind = entry.kind.as_str();
        let hash = entry_hash(&prev, &head.device_id, seq, kind, &entry.subject, &content);
        rows.push((
            seq,
            kind,
            entry.subject,
            content,
            std::mem::replace(&mut prev, hash.clone()),
            hash,
        ));
    }
    let mut sql = String::from(
        "INSERT INTO consent_chain (device_id, seq, kind, subject, content, prev, hash, created_at) VALUES ",
    );
    for i in 0..rows.len() {
        let p = i * 8;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})",
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5,
            p + 6,
            p + 7,
            p + 8
        ));
    }
    let mut statement = Statement::new(sql);
    for (seq, kind, subject, content, prev, hash) in rows {
        let seq = i64::try_from(seq).map_err(|e| StoreError::corrupt(TABLE, e))?;
        statement = statement
            .bind(head.device_id.as_str())
            .bind(seq)
            .bind(kind)
            .bind(subject)
            .bind(content)
            .bind(prev)
            .bind(hash)
            .bind(created_at.as_str());
    }
    Ok(statement)
}

/// [`insert_after`], inserting nothing unless `head` is still this device's head
/// when the statement runs (its entry is there and none after it): `head` was read
/// earlier in the transaction (a decision's read, on SQLite), and the transaction may
/// have appended since. The statement's change count says which: `entries.len()`
/// rows, or none, and then the caller reads the head and inserts after it. Never a
/// fork: a stale head inserts nothing.
pub(crate) fn insert_after_checked(
    head: Head,
    entries: Vec<Entry>,
    now: OffsetDateTime,
) -> Result<Statement, StoreError> {
    let count = entries.len();
    let device = head.device_id.clone();
    let seq = i64::try_from(head.entries).map_err(|e| StoreError::corrupt(TABLE, e))?;
    let hash = head.hash.clone();
    let insert = insert_after(head, entries, now)?;
    let (sql, values) = insert.into_parts();
    let Some(at) = sql.find(" VALUES ") else {
        return Err(StoreError::corrupt(TABLE, "an insert without VALUES"));
    };
    let (columns, rows) = sql.split_at(at);
    let rows = &rows[" VALUES ".len()..];
    let first = count * 8;
    let checked = format!(
        "{columns} SELECT * FROM (VALUES {rows}) WHERE EXISTS (SELECT 1 FROM consent_chain WHERE device_id = ${d} AND seq = ${s} AND hash = ${h}) AND NOT EXISTS (SELECT 1 FROM consent_chain WHERE device_id = ${d} AND seq > ${s})",
        d = first + 1,
        s = first + 2,
        h = first + 3,
    );
    Ok(values
        .into_iter()
        .fold(Statement::new(checked), |statement, value| {
            statement.bind(value)
        })
        .bind(device)
        .bind(seq)
        .bind(hash))
}

/// Begins this device's chain, in the caller's transaction, when it has no entry yet,
/// nothing was recorded since the upgrade, and the database holds what the chain
/// speaks of (history from before the chain, or an agent's rules): the store does this when it opens an upgraded database, so the
/// chain begins at the upgrade itself, not at the first write after it, and a proof
/// run first finds the old rows unclaimed rather than written around the store.
/// `Ok(false)` when there was nothing to begin.
///
/// Its entries are stamped with the last moment the old history recorded (the newest
/// audit record, decision or agent change), where the chain takes over: the store
/// opening reads no clock of its own.
pub(crate) async fn begin_if_empty(conn: &mut Connection) -> Result<bool, StoreError> {
    let head = locked_head(conn).await?;
    if head.entries > 0 {
        return Ok(false);
    }
    // Only a chain that never began: nothing recorded since the upgrade (no audit
    // record past the origin's floor, no decision on a database that had none), so a
    // chain removed as a whole after use is not begun again here (the proof then
    // names every row as written around the store).
    let needed: i64 = sqlx::query_scalar(
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM audit_records a, consent_chain_origin o
                                      WHERE o.singleton = 1 AND a.id > o.audit_id_floor)
                      AND (EXISTS (SELECT 1 FROM consent_chain_origin WHERE had_history <> 0)
                           OR (EXISTS (SELECT 1 FROM agents)
                               AND NOT EXISTS (SELECT 1 FROM decisions)))
                     THEN 1 ELSE 0 END",
    )
    .fetch_one(&mut *conn)
    .await?;
    if needed == 0 {
        return Ok(false);
    }
    let last: Option<String> = sqlx::query_scalar(
        "SELECT MAX(at) FROM (SELECT MAX(created_at) AS at FROM audit_records
                              UNION ALL SELECT MAX(created_at) FROM decisions
                              UNION ALL SELECT MAX(updated_at) FROM agents) recorded",
    )
    .fetch_one(&mut *conn)
    .await?;
    // A time the old release wrote in another form is no reason to refuse the open:
    // the stamp is information, never part of an entry's hash.
    let at = last
        .and_then(|text| timefmt::parse(TABLE, &text).ok())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let first = beginning(conn).await?;
    write(conn, head, first, at).await?;
    Ok(true)
}

/// The entry of the quorum item `index` of set `set` was proposed with (more than
/// one person), for the chain.
pub(crate) fn quorum_entry(set: &assent_domain::ChangeSet, index: usize, needed: u32) -> Entry {
    Entry {
        kind: EntryKind::Quorum,
        subject: format!("{}:{index}", set.id),
        content: json!({
            "changeSetId": set.id,
            "itemIndex": index,
            "toolName": set.items.get(index).map(|item| item.tool_name.as_str()),
            "approvalsNeeded": needed,
        }),
    }
}

/// The entries a chain starts with: where it begins (what the upgrade left
/// unclaimed) and every agent's rules at that moment.
async fn beginning(conn: &mut Connection) -> Result<Vec<Entry>, StoreError> {
    let origin = sqlx::query(
        "SELECT audit_id_floor, had_history FROM consent_chain_origin WHERE singleton = 1",
    )
    .fetch_optional(&mut *conn)
    .await?;
    let (floor, had_history) = match origin {
        Some(row) => (
            row.try_get::<i64, _>("audit_id_floor")?,
            row.try_get::<i64, _>("had_history")? != 0,
        ),
        None => (0, false),
    };
    let mut entries = vec![Entry {
        kind: EntryKind::ChainBegins,
        subject: String::new(),
        content: json!({
            "auditIdFloor": floor,
            "reason": if had_history { "upgrade" } else { "newDatabase" },
        }),
    }];
    let agents = sqlx::query(
        "SELECT id, categories, rules, shadow_rules, tool_settings, rejection_memory FROM agents ORDER BY id",
    )
    .fetch_all(&mut *conn)
    .await?;
    for row in &agents {
        entries.push(rules_entry(row, None)?);
    }
    Ok(entries)
}

/// The rules entry of agent row `row` (`id, categories, rules, shadow_rules,
/// tool_settings`), naming who changed them when known.
pub(crate) fn rules_entry(row: &sqlx::any::AnyRow, by: Option<&str>) -> Result<Entry, StoreError> {
    let content = rules_content(row)?;
    let mut content = content;
    if let Some(by) = by {
        content["by"] = json!(by);
    }
    Ok(Entry {
        kind: EntryKind::Rules,
        subject: row.try_get("id")?,
        content,
    })
}

/// An agent row's policy as a rules entry's content (without `by`): what a proof
/// compares with the row.
pub fn rules_content(row: &sqlx::any::AnyRow) -> Result<Value, StoreError> {
    let json = |column: &str| -> Result<Value, StoreError> {
        let text: String = row.try_get(column)?;
        serde_json::from_str(&text)
            .map_err(|e| StoreError::corrupt("agents", format!("{column}: {e}")))
    };
    let mut content = json!({
        "agent": row.try_get::<String, _>("id")?,
        "categories": json("categories")?,
        "rules": json("rules")?,
        "shadowRules": json("shadow_rules")?,
        "toolSettings": json("tool_settings")?,
    });
    // Only when it is not the default (migration 0030): entries written before it have
    // no such key, and an agent that never changed it must still match them.
    let memory: String = row.try_get("rejection_memory")?;
    if let Some(memory) = crate::rejection_memory::RejectionMemory::chain_content(&memory)? {
        content["rejectionMemory"] = memory;
    }
    Ok(content)
}

/// Appends the rules entry of agent `agent_id` as it now stands.
pub(crate) async fn append_rules(
    conn: &mut Connection,
    agent_id: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    append_rules_by(conn, agent_id, None, now).await
}

/// [`append_rules`], naming who made the change when known.
pub(crate) async fn append_rules_by(
    conn: &mut Connection,
    agent_id: &str,
    by: Option<&str>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    append_rules_noting(conn, agent_id, by, None, now).await
}

/// [`append_rules_by`], with one more key of the content saying where the change came
/// from (a policy file's hash: [`crate::policy_file::CHAIN_KEY`]); a proof compares the
/// entry with the row without it, as without `by`.
pub(crate) async fn append_rules_noting(
    conn: &mut Connection,
    agent_id: &str,
    by: Option<&str>,
    note: Option<(&str, Value)>,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let row = sqlx::query(
        "SELECT id, categories, rules, shadow_rules, tool_settings, rejection_memory FROM agents WHERE id = $1",
    )
    .bind(agent_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(()) };
    let mut entry = rules_entry(&row, by)?;
    if let Some((key, value)) = note {
        entry.content[key] = value;
    }
    append(conn, vec![entry], now).await
}

/// Every entry of every device's chain, in chain order (device, then position).
pub async fn entries(conn: &mut Connection) -> Result<Vec<ChainEntry>, StoreError> {
    let rows = sqlx::query(
        "SELECT device_id, seq, kind, subject, content, prev, hash, created_at FROM consent_chain ORDER BY device_id, seq",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get("seq")?;
            Ok(ChainEntry {
                device_id: row.try_get("device_id")?,
                seq: u64::try_from(seq)
                    .map_err(|e| StoreError::corrupt(TABLE, format!("seq {seq}: {e}")))?,
                kind: row.try_get("kind")?,
                subject: row.try_get("subject")?,
                content: row.try_get("content")?,
                prev: row.try_get("prev")?,
                hash: row.try_get("hash")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "postgres")]
    #[test]
    fn the_array_insert_hashes_as_the_values_insert_does() {
        crate::row::assert_unnest_casts(INSERT_UNNEST, 2, &INSERT_TYPES);
        let head = Head {
            device_id: "dev".to_owned(),
            entries: 4,
            hash: "f".repeat(64),
        };
        let entries = vec![
            Entry {
                kind: EntryKind::Decision,
                subject: "d".to_owned(),
                content: json!({"b": 1, "a": [null, "é"]}),
            },
            Entry {
                kind: EntryKind::Audit,
                subject: "7".to_owned(),
                content: json!({}),
            },
        ];
        let rows: Vec<HashedRow> = hashed_rows(&head, entries.clone())
            .collect::<Result<_, _>>()
            .expect("hashed");
        let values = insert_after(head, entries, OffsetDateTime::UNIX_EPOCH).expect("insert");
        use crate::row::Value as V;
        let expected: Vec<V> = rows
            .iter()
            .flat_map(|(seq, kind, subject, content, prev, hash)| {
                [
                    V::from("dev"),
                    V::from(*seq),
                    V::from(*kind),
                    V::from(subject),
                    V::from(content),
                    V::from(prev),
                    V::from(hash),
                    V::from(timefmt::format(OffsetDateTime::UNIX_EPOCH)),
                ]
            })
            .collect();
        assert_eq!(values.params(), expected.as_slice());
        assert_eq!(rows[0].0, 5);
        assert_eq!(
            rows[1].4, rows[0].5,
            "the second entry's prev is the first's hash"
        );
    }

    #[test]
    fn a_hash_covers_every_field() {
        let base = entry_hash(GENESIS, "dev", 1, "decision", "x", "{}");
        assert_eq!(base.len(), 64);
        assert_ne!(base, entry_hash(GENESIS, "dev", 2, "decision", "x", "{}"));
        assert_ne!(base, entry_hash(GENESIS, "dev2", 1, "decision", "x", "{}"));
        assert_ne!(base, entry_hash(GENESIS, "dev", 1, "audit", "x", "{}"));
        assert_ne!(base, entry_hash(GENESIS, "dev", 1, "decision", "y", "{}"));
        assert_ne!(
            base,
            entry_hash(GENESIS, "dev", 1, "decision", "x", "{\"a\":1}")
        );
        // A field's text cannot move into its neighbour.
        assert_ne!(
            entry_hash(GENESIS, "dev", 1, "decision", "x\ny", "{}"),
            entry_hash(GENESIS, "dev", 1, "decision", "x", "y\n{}")
        );
    }

    #[test]
    fn kinds_round_trip() {
        for kind in [
            "chainBegins",
            "decision",
            "approval",
            "audit",
            "job",
            "rules",
            "grant",
            "quorum",
        ] {
            assert_eq!(EntryKind::parse(kind).map(EntryKind::as_str), Some(kind));
        }
        assert_eq!(EntryKind::parse("other"), None);
    }
}
