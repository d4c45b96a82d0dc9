//! Proof of consent (`assent audit verify`): given a database, check that the consent
//! chain ([`crate::chain`]) is intact, that every chained row still says what its
//! entry says, and that every effect that ran had the consent its rules required when
//! it ran.
//!
//! [`verify`] reads what it needs (the I/O); [`check`] decides over plain values, so
//! each rule of the proof is tested without a database. The rules, each a
//! [`ProofRule`]:
//! 1. the chain is intact: positions consecutive from 1, each `prev` the hash before
//!    it, each hash what its fields call for, a checkpoint head (`--head`) on it;
//! 2. rows match their entries: a decision, approval, audit record, job, agent's rules
//!    or grant edited or removed behind the store's back no longer matches the entry
//!    written with it, and a row written around the store has no entry;
//! 3. every effect that ran (an audit `result` with success) traces to a confirmation
//!    by named people (as many distinct ones as the quorum the item was proposed with
//!    asked, by its `quorum` entry, counted by [`assent_domain::person`] so one person
//!    through two doors is one, none of them the agent through any door, all of them
//!    on the arguments that ran) or to what let it run unasked (a rule in force at
//!    that moment by the chain's own history of the agent's rules, a grant, the tool's
//!    declared mode with no rule asking or denying it);
//! 4. a held confirmation ran after its window and was not cancelled first; nothing
//!    ran after a rejection of its item was on the chain;
//! 5. an operation took effect at most once, unless it went in doubt (a person or the
//!    host settled it);
//! 6. a job ran what its decision approved (the same approval digest and arguments).
//!
//! What it cannot prove, and says so in the guide: a chain recomputed as a whole by
//! someone with write access to the file passes rules 1 and 2 unless its head was
//! written down before (`assent audit head`); effects imported from another device
//! are not checked here (their consent is on the origin's chain): the report counts
//! them by origin device (`imported`). An answer given in an agent's own client
//! (`mcp-client:NAME`, `claude-code-client`) may be automated by the client: the
//! effects it let run are counted apart (`clientAnswered`), never as a person's
//! consent. Under `--strict` both are violations.

use crate::Connection;
use crate::chain::{self, ChainEntry, EntryKind, GENESIS, Head};
use crate::jobs::{self, Job, JobStatus};
use crate::verified_heads::{self, PROOF_VERSION, VerifiedHead};
use crate::{StoreError, approvals, audit, decisions, delegation, timefmt};
use assent_domain::{OperationId, canonical_json};
use assent_tools::{AuditKind, CallContext, Coverage, PathFacts, call_covers, name_matches};
use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use time::OffsetDateTime;
use uuid::Uuid;

/// Which rule of the proof an entry or row broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProofRule {
    /// Rule 1: the chain is intact.
    ChainIntact,
    /// Rule 2: a row still says what its entry says.
    RowMatchesEntry,
    /// Rule 3: an effect had the consent it needed.
    Consent,
    /// Rule 4: a held confirmation ran after its window, uncancelled.
    HoldWindow,
    /// Rule 4: nothing ran after its item's rejection.
    NoRunAfterRejection,
    /// Rule 5: an operation took effect at most once.
    AtMostOnce,
    /// Rule 6: what ran is what was approved.
    ApprovedAction,
    /// `--strict`: an effect this device cannot check (imported from another device)
    /// or that no person consented to (answered in the agent's client).
    Unchecked,
}

impl ProofRule {
    /// The rule as the report names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChainIntact => "chainIntact",
            Self::RowMatchesEntry => "rowMatchesEntry",
            Self::Consent => "consent",
            Self::HoldWindow => "holdWindow",
            Self::NoRunAfterRejection => "noRunAfterRejection",
            Self::AtMostOnce => "atMostOnce",
            Self::ApprovedAction => "approvedAction",
            Self::Unchecked => "unchecked",
        }
    }
}

/// One thing the proof found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// The entry (`device#seq`) or, for a row with no entry, the row (`decision ID`).
    pub entry: String,
    /// The rule it broke.
    pub rule: ProofRule,
    /// What was expected, and what was found instead.
    pub expected: String,
}

/// What [`verify`] checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Check effects from this moment on only (the chain and rows are always checked
    /// whole: a cut chain proves nothing).
    pub since: Option<OffsetDateTime>,
    /// A head written down before (`assent audit head`): the chain must still hold it.
    pub head: Option<String>,
    /// Fail on every effect the proof cannot tie to a person here: one imported from
    /// another device, one answered in the agent's client.
    pub strict: bool,
    /// The home folder a path rule's `~/` stood for when the calls were decided (the
    /// hook's user's, as the coding agents read `~`): without it, a call a `~/` allow
    /// rule let run unasked cannot be tied to that rule.
    pub home: Option<String>,
    /// Verify the whole chain, whatever head a previous verify stored (`--full`):
    /// the only way to find an entry or row changed before that head.
    pub full: bool,
}

/// What the proof knows of paths: the home folder it was given, and every path as
/// written (where a link led when the call was decided is the decision's to judge; a
/// rule the proof reads as written covers at least what it covered then).
#[derive(Debug)]
struct PathsAsWritten<'a> {
    home: &'a str,
}

impl PathFacts for PathsAsWritten<'_> {
    fn home(&self) -> Option<&str> {
        Some(self.home)
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        Ok(path.to_owned())
    }
}

/// The proof's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Whether every rule held (`violations` is empty).
    pub verified: bool,
    /// This device's head as verified.
    pub device_id: String,
    /// Entries on this device's chain.
    pub entries: u64,
    /// The last entry's hash.
    pub head: String,
    /// Effects (successful results) whose consent was checked.
    pub effects_checked: u64,
    /// Of those, effects confirmed by an answer in the agent's client, not by a person
    /// (failed under `--strict`).
    pub client_answered: u64,
    /// Effects imported from other devices, unchecked here, by origin device (failed
    /// under `--strict`).
    pub imported: std::collections::BTreeMap<String, u64>,
    /// Everything found wrong, in chain order; empty when the proof holds.
    pub violations: Vec<Violation>,
    /// The head a previous clean verify stored, when this one checked only the
    /// entries after it; `None` when it verified the whole chain.
    pub started_after: Option<VerifiedHead>,
    /// Why the whole chain was verified (`--full`, the first verify, a stored head
    /// that no longer matches, another version); `None` when it started after a head.
    pub full_because: Option<String>,
    /// How many entries this verify checked (every entry in a full one).
    pub checked_entries: u64,
    /// Each chain's head as this verify left it: where the next one starts when
    /// this one found nothing wrong.
    pub chains: Vec<VerifiedHead>,
}

impl Report {
    /// Whether every rule held.
    pub fn verified(&self) -> bool {
        self.verified
    }
}

/// Everything the proof reads, as plain values.
#[derive(Debug, Clone, Default)]
pub struct ProofInput {
    /// This device's id.
    pub device_id: String,
    /// Every chain entry, in chain order.
    pub entries: Vec<ChainEntry>,
    /// Decision rows.
    pub decisions: Vec<decisions::DecisionRow>,
    /// Audit rows.
    pub audit: Vec<audit::AuditRow>,
    /// Approval rows as `(subject, content)`.
    pub approvals: Vec<(String, Value)>,
    /// Job rows.
    pub jobs: Vec<Job>,
    /// Agent rows as rules contents.
    pub agents: Vec<Value>,
    /// Grant rows.
    pub grants: Vec<delegation::Grant>,
    /// Change sets' run keys.
    pub run_keys: HashMap<Uuid, String>,
    /// Item rows that need more than one person: `(set, index) → approvals needed`
    /// (an item not here needs one).
    pub quorums: HashMap<(Uuid, usize), u32>,
    /// Per device, the last entry a previous clean verify covered `(seq, hash)`: the
    /// entries up to it are context for the new ones (read for what they say, their
    /// hash checked, not their links or effects again). Empty for a full verify.
    pub verified: HashMap<String, (u64, String)>,
}

impl ProofInput {
    /// Whether `entry` was verified before (context for the new entries).
    fn is_context(&self, entry: &ChainEntry) -> bool {
        self.verified
            .get(&entry.device_id)
            .is_some_and(|(seq, _)| entry.seq <= *seq)
    }
}

/// Reads what the proof needs and checks it ([`check`]): from the head a previous
/// clean verify stored ([`verified_heads`]) when there is one that still matches,
/// else (and under [`VerifyOptions::full`]) the whole chain. It stores nothing: the
/// caller saves [`Report::chains`] when the report is clean.
#[tracing::instrument(skip_all, fields(full = options.full))]
pub async fn verify(conn: &mut Connection, options: &VerifyOptions) -> Result<Report, StoreError> {
    let head = chain::head(conn).await?;
    let mut found = Vec::new();
    // `--since` promises the whole chain, and `--strict` holds older effects to a
    // stricter rule than the verify that stored the head may have: both run in full.
    let start = if options.full {
        Err("--full".to_owned())
    } else if options.since.is_some() {
        Err("--since checks the whole chain".to_owned())
    } else if options.strict {
        Err("--strict checks every effect again".to_owned())
    } else {
        usable_heads(conn, &head, &mut found).await?
    };
    let (input, started_after, full_because, stored) = match start {
        Ok(heads) => {
            let input = incremental_input(conn, &head, &heads, options).await?;
            let own = heads
                .iter()
                .find(|h| h.device_id == head.device_id)
                .cloned();
            (input, own, None, heads)
        }
        Err(because) => (
            full_input(conn, &head).await?,
            None,
            Some(because),
            Vec::new(),
        ),
    };
    let mut report = check(&input, &head, options);
    report.violations.extend(found);
    report.violations.sort_by(|a, b| a.entry.cmp(&b.entry));
    report.verified = report.violations.is_empty();
    report.started_after = started_after;
    report.full_because = full_because;
    report.chains = heads_after(&input, &stored);
    Ok(report)
}

/// The heads a previous verify stored, when this verify may start after them; else
/// why not (a stored head no longer on its chain is also a violation in `found`).
async fn usable_heads(
    conn: &mut Connection,
    head: &Head,
    found: &mut Vec<Violation>,
) -> Result<Result<Vec<VerifiedHead>, String>, StoreError> {
    let heads = verified_heads::read(conn).await?;
    if !heads.iter().any(|h| h.device_id == head.device_id) {
        return Ok(Err("no verified head stored (the first verify)".to_owned()));
    }
    if let Some(other) = heads.iter().find(|h| h.version != PROOF_VERSION) {
        return Ok(Err(format!(
            "the stored head was verified by version {}, this is {PROOF_VERSION}",
            other.version
        )));
    }
    let mut matches = true;
    for stored in &heads {
        if stored.seq == 0 {
            continue;
        }
        let seq = i64::try_from(stored.seq).unwrap_or(i64::MAX);
        let hash: Option<String> =
            sqlx::query_scalar("SELECT hash FROM consent_chain WHERE device_id = $1 AND seq = $2")
                .bind(&stored.device_id)
                .bind(seq)
                .fetch_optional(&mut *conn)
                .await?;
        if hash.as_deref() != Some(stored.hash.as_str()) {
            matches = false;
            found.push(Violation {
                entry: format!("{}#{}", stored.device_id, stored.seq),
                rule: ProofRule::ChainIntact,
                expected: format!(
                    "the head verified at {} (hash {}) still on the chain, found {} (the chain was cut or rewritten before it)",
                    stored.verified_at.map(timefmt::format).unwrap_or_default(),
                    stored.hash,
                    hash.as_deref().unwrap_or("no entry")
                ),
            });
        }
    }
    Ok(if matches {
        Ok(heads)
    } else {
        Err("the stored verified head is no longer on the chain".to_owned())
    })
}

/// Each chain's last entry in `input` (or its stored head when nothing came after),
/// and the highest audit record id seen: what a clean verify stores.
fn heads_after(input: &ProofInput, stored: &[VerifiedHead]) -> Vec<VerifiedHead> {
    let audit_id = input
        .audit
        .iter()
        .map(|row| row.id)
        .chain(stored.iter().map(|h| h.audit_id))
        .max()
        .unwrap_or(0);
    let mut last: BTreeMap<&str, (u64, &str)> = stored
        .iter()
        .map(|h| (h.device_id.as_str(), (h.seq, h.hash.as_str())))
        .collect();
    for entry in &input.entries {
        let at = last.entry(&entry.device_id).or_insert((0, GENESIS));
        if entry.seq > at.0 {
            *at = (entry.seq, &entry.hash);
        }
    }
    last.into_iter()
        .map(|(device, (seq, hash))| VerifiedHead {
            device_id: device.to_owned(),
            seq,
            hash: hash.to_owned(),
            audit_id,
            verified_at: None,
            version: PROOF_VERSION.to_owned(),
        })
        .collect()
}

/// Everything, for a full verify.
async fn full_input(conn: &mut Connection, head: &Head) -> Result<ProofInput, StoreError> {
    let agents = sqlx::query(
        "SELECT id, categories, rules, shadow_rules, tool_settings, rejection_memory FROM agents",
    )
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(chain::rules_content)
    .collect::<Result<Vec<_>, _>>()?;
    let run_keys = sqlx::query("SELECT id, run_key FROM change_sets")
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .filter_map(|row| {
            let id: String = row.try_get("id").ok()?;
            Some((Uuid::parse_str(&id).ok()?, row.try_get("run_key").ok()?))
        })
        .collect();
    let quorums = sqlx::query(
        "SELECT change_set_id, item_index, approvals_needed FROM change_items WHERE approvals_needed > 1",
    )
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .filter_map(|row| {
        let id: String = row.try_get("change_set_id").ok()?;
        let index: i64 = row.try_get("item_index").ok()?;
        let needed: i64 = row.try_get("approvals_needed").ok()?;
        Some((
            (Uuid::parse_str(&id).ok()?, usize::try_from(index).ok()?),
            u32::try_from(needed).ok()?,
        ))
    })
    .collect();
    Ok(ProofInput {
        device_id: head.device_id.clone(),
        entries: chain::entries(conn).await?,
        decisions: decisions::all_for_proof(conn).await?,
        audit: audit::all_for_proof(conn).await?,
        approvals: approvals::all_for_proof(conn).await?,
        jobs: jobs::all(conn).await?,
        agents,
        grants: delegation::all_for_proof(conn).await?,
        run_keys,
        quorums,
        verified: HashMap::new(),
    })
}

/// What an incremental verify reads: every entry after the stored heads, and of the
/// entries and rows before them exactly what the proof's rules read for the new ones
/// (each by its key, through the indexes): every entry and row of each subject a new
/// entry names, the agents' rules, the grants new effects name, every earlier run of
/// an operation that ran again, each touched item's decisions, approvals, quorum and
/// job, and every audit row above the last one verified (a row written around the
/// store has no entry). The rules then run over this as over the whole chain.
async fn incremental_input(
    conn: &mut Connection,
    head: &Head,
    heads: &[VerifiedHead],
    options: &VerifyOptions,
) -> Result<ProofInput, StoreError> {
    let verified: HashMap<String, (u64, String)> = heads
        .iter()
        .map(|h| (h.device_id.clone(), (h.seq, h.hash.clone())))
        .collect();
    let mut entries: BTreeMap<(String, u64), ChainEntry> = BTreeMap::new();
    let devices: Vec<String> = sqlx::query_scalar("SELECT DISTINCT device_id FROM consent_chain")
        .fetch_all(&mut *conn)
        .await?;
    for device in devices {
        let after = verified.get(&device).map_or(0, |(seq, _)| *seq);
        let rows = sqlx::query(
            "SELECT device_id, seq, kind, subject, content, prev, hash, created_at FROM consent_chain
             WHERE device_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(&device)
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
        for row in &rows {
            let entry = entry_row(row)?;
            entries.insert((entry.device_id.clone(), entry.seq), entry);
        }
    }

    // The keys of what the new entries need.
    let mut keys: BTreeSet<(String, String)> = BTreeSet::new();
    let mut items: BTreeSet<(String, i64)> = BTreeSet::new();
    let mut operations: BTreeSet<String> = BTreeSet::new();
    keys.insert((EntryKind::ChainBegins.as_str().to_owned(), String::new()));
    for entry in entries.values() {
        keys.insert((entry.kind.clone(), entry.subject.clone()));
        let Ok(content) = serde_json::from_str::<Value>(&entry.content) else {
            continue;
        };
        if let (Some(set), Some(index)) = (
            content["changeSetId"].as_str(),
            content["itemIndex"].as_i64(),
        ) {
            items.insert((set.to_owned(), index));
        }
        if entry.kind == EntryKind::Audit.as_str() {
            if let Some(agent) = content["agentId"].as_str() {
                keys.insert((EntryKind::Rules.as_str().to_owned(), agent.to_owned()));
            }
            if let Some(grant) = content["allowedBy"]["grant"].as_str() {
                keys.insert((EntryKind::Grant.as_str().to_owned(), grant.to_owned()));
            }
            if let Some(operation) = content["operationId"].as_str() {
                operations.insert(operation.to_owned());
            }
        }
    }
    let last_audit = heads.iter().map(|h| h.audit_id).max().unwrap_or(0);
    let mut audit_rows: BTreeMap<i64, audit::AuditRow> = BTreeMap::new();
    for row in sqlx::query("SELECT * FROM audit_records WHERE id > $1 ORDER BY id")
        .bind(last_audit)
        .fetch_all(&mut *conn)
        .await?
        .iter()
    {
        let row = audit_row(row)?;
        keys.insert((EntryKind::Audit.as_str().to_owned(), row.id.to_string()));
        audit_rows.insert(row.id, row);
    }
    for operation in &operations {
        let runs: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM audit_records WHERE operation_id = $1")
                .bind(operation)
                .fetch_all(&mut *conn)
                .await?;
        for id in runs {
            keys.insert((EntryKind::Audit.as_str().to_owned(), id.to_string()));
        }
        if let Some(row) = sqlx::query(
            "SELECT change_set_id, item_index FROM execution_jobs WHERE operation_id = $1",
        )
        .bind(operation)
        .fetch_optional(&mut *conn)
        .await?
        {
            items.insert((row.try_get("change_set_id")?, row.try_get("item_index")?));
        }
    }
    for (set, index) in &items {
        keys.insert((
            EntryKind::Quorum.as_str().to_owned(),
            format!("{set}:{index}"),
        ));
        for (kind, sql) in [
            (
                EntryKind::Decision,
                "SELECT id FROM decisions WHERE change_set_id = $1 AND item_index = $2",
            ),
            (
                EntryKind::Job,
                "SELECT id FROM execution_jobs WHERE change_set_id = $1 AND item_index = $2",
            ),
        ] {
            let ids: Vec<String> = sqlx::query_scalar(sql)
                .bind(set)
                .bind(*index)
                .fetch_all(&mut *conn)
                .await?;
            for id in ids {
                keys.insert((kind.as_str().to_owned(), id));
            }
        }
        let approved = sqlx::query(
            "SELECT change_set_id, item_index, revision, approved_by, args, created_at FROM approvals
             WHERE change_set_id = $1 AND item_index = $2",
        )
        .bind(set)
        .bind(*index)
        .fetch_all(&mut *conn)
        .await?;
        for row in &approved {
            let (subject, _) = approval_row(row)?;
            keys.insert((EntryKind::Approval.as_str().to_owned(), subject));
        }
    }
    let agents = sqlx::query(
        "SELECT id, categories, rules, shadow_rules, tool_settings, rejection_memory FROM agents",
    )
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(chain::rules_content)
    .collect::<Result<Vec<_>, _>>()?;
    for agent in &agents {
        if let Some(id) = agent["agent"].as_str() {
            keys.insert((EntryKind::Rules.as_str().to_owned(), id.to_owned()));
        }
    }

    // Every entry of every key, and the checkpoint's.
    for (kind, subject) in &keys {
        let rows = sqlx::query(
            "SELECT device_id, seq, kind, subject, content, prev, hash, created_at FROM consent_chain
             WHERE kind = $1 AND subject = $2",
        )
        .bind(kind)
        .bind(subject)
        .fetch_all(&mut *conn)
        .await?;
        for row in &rows {
            let entry = entry_row(row)?;
            entries.insert((entry.device_id.clone(), entry.seq), entry);
        }
    }
    if let Some(checkpoint) = &options.head {
        let rows = sqlx::query(
            "SELECT device_id, seq, kind, subject, content, prev, hash, created_at FROM consent_chain
             WHERE device_id = $1 AND hash = $2",
        )
        .bind(&head.device_id)
        .bind(checkpoint)
        .fetch_all(&mut *conn)
        .await?;
        for row in &rows {
            let entry = entry_row(row)?;
            entries.insert((entry.device_id.clone(), entry.seq), entry);
        }
    }

    // The rows of those keys.
    let mut input = ProofInput {
        device_id: head.device_id.clone(),
        agents,
        verified,
        ..ProofInput::default()
    };
    let mut sets: BTreeSet<String> = BTreeSet::new();
    let subjects: BTreeSet<(&str, &str)> = keys
        .iter()
        .map(|(k, s)| (k.as_str(), s.as_str()))
        .chain(
            entries
                .values()
                .map(|e| (e.kind.as_str(), e.subject.as_str())),
        )
        .collect();
    for (kind, subject) in subjects {
        match EntryKind::parse(kind) {
            Some(EntryKind::Decision) => {
                if let Some(row) = sqlx::query("SELECT * FROM decisions WHERE id = $1")
                    .bind(subject)
                    .fetch_optional(&mut *conn)
                    .await?
                {
                    let row = decision_row(&row)?;
                    sets.insert(row.decision.change_set_id.to_string());
                    input.decisions.push(row);
                }
            }
            Some(EntryKind::Audit) => {
                let Ok(id) = subject.parse::<i64>() else {
                    continue;
                };
                if audit_rows.contains_key(&id) {
                    continue;
                }
                if let Some(row) = sqlx::query("SELECT * FROM audit_records WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await?
                {
                    audit_rows.insert(id, audit_row(&row)?);
                }
            }
            Some(EntryKind::Approval) => {
                let mut parts = subject.splitn(4, ':');
                let (Some(set), Some(index), Some(revision), Some(by)) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                let (Ok(index), Ok(revision)) = (index.parse::<i64>(), revision.parse::<i64>())
                else {
                    continue;
                };
                if let Some(row) = sqlx::query(
                    "SELECT change_set_id, item_index, revision, approved_by, args, created_at FROM approvals
                     WHERE change_set_id = $1 AND item_index = $2 AND revision = $3 AND approved_by = $4",
                )
                .bind(set)
                .bind(index)
                .bind(revision)
                .bind(by)
                .fetch_optional(&mut *conn)
                .await?
                {
                    input.approvals.push(approval_row(&row)?);
                }
            }
            Some(EntryKind::Job) => {
                if let Some(row) = sqlx::query("SELECT * FROM execution_jobs WHERE id = $1")
                    .bind(subject)
                    .fetch_optional(&mut *conn)
                    .await?
                {
                    input.jobs.push(jobs::decode(&row)?);
                }
            }
            Some(EntryKind::Grant) => {
                if let Some(row) = sqlx::query("SELECT * FROM grants WHERE id = $1")
                    .bind(subject)
                    .fetch_optional(&mut *conn)
                    .await?
                {
                    input.grants.push(delegation::decode_grant(&row)?);
                }
            }
            Some(EntryKind::Quorum) => {
                let Some((set, index)) = subject.rsplit_once(':') else {
                    continue;
                };
                let Ok(index) = index.parse::<i64>() else {
                    continue;
                };
                let needed: Option<Option<i64>> = sqlx::query_scalar(
                    "SELECT approvals_needed FROM change_items WHERE change_set_id = $1 AND item_index = $2",
                )
                .bind(set)
                .bind(index)
                .fetch_optional(&mut *conn)
                .await?;
                if let (Some(Some(needed)), Ok(id), Ok(index)) =
                    (needed, Uuid::parse_str(set), usize::try_from(index))
                    && needed > 1
                {
                    input
                        .quorums
                        .insert((id, index), u32::try_from(needed).unwrap_or(u32::MAX));
                }
            }
            Some(EntryKind::ChainBegins | EntryKind::Rules) | None => {}
        }
    }
    for entry in entries.values() {
        if entry.kind == EntryKind::Decision.as_str()
            && let Ok(content) = serde_json::from_str::<Value>(&entry.content)
            && let Some(set) = content["changeSetId"].as_str()
        {
            sets.insert(set.to_owned());
        }
    }
    for set in sets {
        let run_key: Option<String> =
            sqlx::query_scalar("SELECT run_key FROM change_sets WHERE id = $1")
                .bind(&set)
                .fetch_optional(&mut *conn)
                .await?;
        if let (Some(run_key), Ok(id)) = (run_key, Uuid::parse_str(&set)) {
            input.run_keys.insert(id, run_key);
        }
    }
    input.audit = audit_rows.into_values().collect();
    input.entries = entries.into_values().collect();
    Ok(input)
}

/// A chain entry as stored.
fn entry_row(row: &sqlx::any::AnyRow) -> Result<ChainEntry, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    Ok(ChainEntry {
        device_id: row.try_get("device_id")?,
        seq: u64::try_from(seq)
            .map_err(|e| StoreError::corrupt("consent_chain", format!("seq {seq}: {e}")))?,
        kind: row.try_get("kind")?,
        subject: row.try_get("subject")?,
        content: row.try_get("content")?,
        prev: row.try_get("prev")?,
        hash: row.try_get("hash")?,
        created_at: row.try_get("created_at")?,
    })
}

/// A decision row as the proof reads it.
fn decision_row(row: &sqlx::any::AnyRow) -> Result<decisions::DecisionRow, StoreError> {
    let shadow: Option<String> = row.try_get("shadow")?;
    let shadow = shadow
        .map(|text| serde_json::from_str::<Value>(&text))
        .transpose()
        .map_err(|e| StoreError::corrupt("decisions", e.to_string()))?;
    Ok(decisions::DecisionRow {
        decision: decisions::decode(row)?,
        approval_digest: row.try_get("approval_digest")?,
        shadow,
        origin_host: row.try_get("origin_host")?,
    })
}

/// An audit row as the proof reads it.
fn audit_row(row: &sqlx::any::AnyRow) -> Result<audit::AuditRow, StoreError> {
    let host: Option<String> = row.try_get("origin_host")?;
    let origin_id: Option<i64> = row.try_get("origin_id")?;
    Ok(audit::AuditRow {
        id: row.try_get("id")?,
        record: audit::decode(row)?,
        origin: host.zip(origin_id),
    })
}

/// An approval row as `(subject, content)`.
fn approval_row(row: &sqlx::any::AnyRow) -> Result<(String, Value), StoreError> {
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
        approvals::approval_subject(set, index, revision, &by),
        approvals::chain_content(set, index, revision, &by, &args, &created_at),
    ))
}

/// An entry's place, as violations name it.
fn place(entry: &ChainEntry) -> String {
    format!("{}#{}", entry.device_id, entry.seq)
}

/// A decided item's run: what the chain says of one item.
#[derive(Default)]
struct ItemHistory<'a> {
    /// Decision entries of the item, with their position on the chain.
    decisions: Vec<(usize, Value)>,
    /// Approval contents of the item.
    approvals: Vec<&'a Value>,
}

/// Checks the proof's rules over `input` (pure).
pub fn check(input: &ProofInput, head: &Head, options: &VerifyOptions) -> Report {
    let mut violations = Vec::new();
    let (contents, own) = chain_intact(input, options, &mut violations);
    let begins = input
        .entries
        .iter()
        .zip(&contents)
        .find(|(e, _)| e.device_id == input.device_id && e.kind == EntryKind::ChainBegins.as_str())
        .and_then(|(_, c)| c.as_ref());
    let audit_floor = begins.and_then(|c| c["auditIdFloor"].as_i64()).unwrap_or(0);
    let new_database = begins.is_none_or(|c| c["reason"] == "newDatabase");

    rows_match(input, &contents, audit_floor, new_database, &mut violations);
    let entered = entered_quorums(input, &contents, &mut violations);
    let effects = effects_consented(
        input,
        &contents,
        &entered,
        audit_floor,
        options,
        &mut violations,
    );
    violations.sort_by(|a, b| a.entry.cmp(&b.entry));
    Report {
        verified: violations.is_empty(),
        device_id: head.device_id.clone(),
        entries: own,
        head: head.hash.clone(),
        effects_checked: effects.checked,
        client_answered: effects.client_answered,
        imported: effects.imported,
        violations,
        started_after: None,
        full_because: None,
        checked_entries: input
            .entries
            .iter()
            .filter(|e| !input.is_context(e))
            .count() as u64,
        chains: Vec::new(),
    }
}

/// Rule 1: positions, links and hashes, and the checkpoint head; returns each entry's
/// content parsed (once, for the other rules) and how many entries are this device's.
fn chain_intact(
    input: &ProofInput,
    options: &VerifyOptions,
    violations: &mut Vec<Violation>,
) -> (Vec<Option<Value>>, u64) {
    let mut own = 0u64;
    // Rule 1, and each entry's content parsed once.
    let mut contents: Vec<Option<Value>> = Vec::with_capacity(input.entries.len());
    let mut expected: Option<(&str, u64, String)> = None;
    for entry in &input.entries {
        if input.is_context(entry) {
            // Verified before: its links were checked then (only `--full` checks
            // them again); what the new entries read from it must still hash right.
            if entry.hash != entry.expected_hash() {
                violations.push(Violation {
                    entry: place(entry),
                    rule: ProofRule::ChainIntact,
                    expected: format!(
                        "hash {}, stored {} (the entry was edited after it was verified)",
                        entry.expected_hash(),
                        entry.hash
                    ),
                });
            }
            contents.push(serde_json::from_str(&entry.content).ok());
            continue;
        }
        let (seq, prev) = match (&expected, input.verified.get(&entry.device_id)) {
            (Some((device, seq, hash)), _) if *device == entry.device_id => (seq + 1, hash.clone()),
            (_, Some((seq, hash))) => (seq + 1, hash.clone()),
            _ => (1, GENESIS.to_owned()),
        };
        if entry.seq != seq {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::ChainIntact,
                expected: format!("position {seq} next (an entry is missing or out of order)"),
            });
        } else if entry.prev != prev {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::ChainIntact,
                expected: format!(
                    "prev {prev}, found {} (the entry before it was changed)",
                    entry.prev
                ),
            });
        }
        if entry.hash != entry.expected_hash() {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::ChainIntact,
                expected: format!(
                    "hash {}, stored {} (the entry was edited)",
                    entry.expected_hash(),
                    entry.hash
                ),
            });
        }
        if seq == 1 && entry.seq == 1 && entry.kind != EntryKind::ChainBegins.as_str() {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::ChainIntact,
                expected: format!("the chain to begin with chainBegins, found {}", entry.kind),
            });
        }
        if entry.device_id == input.device_id {
            own += 1;
        }
        expected = Some((&entry.device_id, entry.seq, entry.hash.clone()));
        contents.push(serde_json::from_str(&entry.content).ok());
    }
    if let Some(checkpoint) = &options.head
        && !input
            .entries
            .iter()
            .any(|e| e.device_id == input.device_id && &e.hash == checkpoint)
    {
        violations.push(Violation {
            entry: format!("{}#head", input.device_id),
            rule: ProofRule::ChainIntact,
            expected: format!(
                "the checkpoint head {checkpoint} on the chain (it was cut or rewritten)"
            ),
        });
    }

    if let Some((seq, _)) = input.verified.get(&input.device_id) {
        own += seq;
    }
    (contents, own)
}

/// Rule 2: every chained row still says what its latest entry says, every entry's row
/// exists, and rows written since the chain began have entries.
fn rows_match(
    input: &ProofInput,
    contents: &[Option<Value>],
    audit_floor: i64,
    new_database: bool,
    violations: &mut Vec<Violation>,
) {
    // Latest entry per (kind, subject), and each kind's entries in order.
    let mut latest: HashMap<(&str, &str), (usize, &Value)> = HashMap::new();
    for (i, (entry, content)) in input.entries.iter().zip(contents).enumerate() {
        let Some(content) = content else {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::ChainIntact,
                expected: "content that is JSON".into(),
            });
            continue;
        };
        latest.insert((&entry.kind, &entry.subject), (i, content));
    }
    let entry_of = |kind: EntryKind, subject: &str| latest.get(&(kind.as_str(), subject)).copied();
    let mismatch =
        |violations: &mut Vec<Violation>, i: usize, what: &str, row: &Value, entry: &Value| {
            if canonical_json(row) != canonical_json(entry) {
                violations.push(Violation {
                    entry: place(&input.entries[i]),
                    rule: ProofRule::RowMatchesEntry,
                    expected: format!("{what} as entered: {}", differences(entry, row)),
                });
            }
        };
    let missing_row = |violations: &mut Vec<Violation>, i: usize, what: &str| {
        violations.push(Violation {
            entry: place(&input.entries[i]),
            rule: ProofRule::RowMatchesEntry,
            expected: format!("{what} to exist (its row was removed)"),
        });
    };
    let no_entry = |violations: &mut Vec<Violation>, what: String| {
        violations.push(Violation {
            entry: what.clone(),
            rule: ProofRule::RowMatchesEntry,
            expected: format!("an entry on the chain for {what} (it was written around the store)"),
        });
    };

    // Rule 2: rows against entries.
    let mut seen: HashSet<(&str, String)> = HashSet::new();
    for row in &input.decisions {
        let subject = row.decision.id.to_string();
        match entry_of(EntryKind::Decision, &subject) {
            Some((i, content)) => mismatch(
                violations,
                i,
                &format!("decision {subject}"),
                &row.chain_content(),
                content,
            ),
            None if new_database => no_entry(violations, format!("decision {subject}")),
            None => {}
        }
        seen.insert((EntryKind::Decision.as_str(), subject));
    }
    for row in &input.audit {
        let subject = row.id.to_string();
        match entry_of(EntryKind::Audit, &subject) {
            Some((i, content)) => mismatch(
                violations,
                i,
                &format!("audit record {subject}"),
                &row.chain_content(),
                content,
            ),
            None if row.id > audit_floor => no_entry(violations, format!("audit record {subject}")),
            None => {}
        }
        seen.insert((EntryKind::Audit.as_str(), subject));
    }
    for (subject, row) in &input.approvals {
        match entry_of(EntryKind::Approval, subject) {
            Some((i, content)) => {
                mismatch(violations, i, &format!("approval {subject}"), row, content)
            }
            None if new_database => no_entry(violations, format!("approval {subject}")),
            None => {}
        }
        seen.insert((EntryKind::Approval.as_str(), subject.clone()));
    }
    // A job: its latest whole entry binds the action; its latest entry its status.
    let mut job_written: HashMap<&str, &Value> = HashMap::new();
    for (entry, content) in input.entries.iter().zip(contents) {
        if entry.kind == EntryKind::Job.as_str()
            && let Some(content) = content
            && content.get("operationId").is_some()
        {
            job_written.insert(&entry.subject, content);
        }
    }
    for job in &input.jobs {
        let subject = job.id.to_string();
        let Some((i, last)) = entry_of(EntryKind::Job, &subject) else {
            if new_database {
                no_entry(violations, format!("job {subject}"));
            }
            continue;
        };
        if let Some(written) = job_written.get(subject.as_str()) {
            let mut bound = (*written).clone();
            if let Some(map) = bound.as_object_mut() {
                map.remove("status");
                map.remove("dueAt");
            }
            mismatch(
                violations,
                i,
                &format!("job {subject}"),
                &jobs::chain_content(job),
                &bound,
            );
        }
        if last["status"] != job.status.as_str() {
            violations.push(Violation {
                entry: place(&input.entries[i]),
                rule: ProofRule::RowMatchesEntry,
                expected: format!(
                    "job {subject} {} as entered, the row now says {}",
                    last["status"],
                    job.status.as_str()
                ),
            });
        }
        seen.insert((EntryKind::Job.as_str(), subject));
    }
    for row in &input.agents {
        let subject = row["agent"].as_str().unwrap_or_default().to_owned();
        match entry_of(EntryKind::Rules, &subject) {
            Some((i, content)) => {
                let mut entered = content.clone();
                if let Some(map) = entered.as_object_mut() {
                    map.remove("by");
                    map.remove(crate::policy_file::CHAIN_KEY);
                }
                mismatch(
                    violations,
                    i,
                    &format!("agent {subject}'s rules"),
                    row,
                    &entered,
                );
            }
            None => no_entry(violations, format!("agent {subject}'s rules")),
        }
        seen.insert((EntryKind::Rules.as_str(), subject));
    }
    for grant in &input.grants {
        let subject = grant.id.to_string();
        let row = delegation::grant_chain_content(grant);
        match entry_of(EntryKind::Grant, &subject) {
            Some((i, content)) => {
                mismatch(violations, i, &format!("grant {subject}"), &row, content)
            }
            None if new_database => no_entry(violations, format!("grant {subject}")),
            None => {}
        }
        seen.insert((EntryKind::Grant.as_str(), subject));
    }
    for ((kind, subject), (i, _)) in &latest {
        let what = match EntryKind::parse(kind) {
            Some(EntryKind::ChainBegins | EntryKind::Quorum) | None => continue,
            Some(EntryKind::Decision) => "decision",
            Some(EntryKind::Approval) => "approval",
            Some(EntryKind::Audit) => "audit record",
            Some(EntryKind::Job) => "job",
            Some(EntryKind::Rules) => "agent",
            Some(EntryKind::Grant) => "grant",
        };
        if !seen.contains(&(*kind, (*subject).to_owned())) {
            missing_row(violations, *i, &format!("{what} {subject}"));
        }
    }
}

/// The quorum each item was proposed with, by its `quorum` entry: `(set, index) →
/// approvals needed`. An item row that asks for another number than it was proposed
/// with (lowered behind the store's back) breaks rule 2.
fn entered_quorums(
    input: &ProofInput,
    contents: &[Option<Value>],
    violations: &mut Vec<Violation>,
) -> HashMap<(String, u64), u32> {
    let mut entered = HashMap::new();
    for (entry, content) in input.entries.iter().zip(contents) {
        if entry.kind != EntryKind::Quorum.as_str() {
            continue;
        }
        let Some(content) = content else { continue };
        let key = item_key(content);
        let needed = content["approvalsNeeded"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(u32::MAX);
        let row = Uuid::parse_str(&key.0)
            .ok()
            .zip(usize::try_from(key.1).ok())
            .and_then(|k| input.quorums.get(&k))
            .copied()
            .unwrap_or(1);
        if row != needed {
            violations.push(Violation {
                entry: place(entry),
                rule: ProofRule::RowMatchesEntry,
                expected: format!(
                    "item {}:{} to need {needed} approvals as proposed, the row now says {row}",
                    key.0, key.1
                ),
            });
        }
        let at_least = entered.entry(key).or_insert(needed);
        *at_least = (*at_least).max(needed);
    }
    entered
}

/// What [`effects_consented`] counted.
struct Effects {
    checked: u64,
    client_answered: u64,
    imported: std::collections::BTreeMap<String, u64>,
}

/// Whether an effect run under session grant `grant` (its chain content) is within
/// it: the grant's agent and exact tool, the session the run names in its `allowedBy`,
/// and arguments the grant covers as the hook read them (`delegation::session_covers`).
fn within_session_grant(grant: &Value, allowed_by: &Value, record: &Value) -> bool {
    grant["agentId"] == record["agentId"]
        && grant["toolName"] == record["toolName"]
        && !grant["sessionId"].is_null()
        && grant["sessionId"] == allowed_by["session"]
        && delegation::session_covers(
            grant["callPattern"].as_str(),
            Some(&grant["argsPattern"]).filter(|a| !a.is_null()),
            record["toolName"].as_str().unwrap_or_default(),
            &record["args"],
            record["targetId"].as_str().unwrap_or_default(),
        )
}

/// Rules 3 to 6 over the chain's own record of what happened; returns how many effects
/// were checked.
fn effects_consented(
    input: &ProofInput,
    contents: &[Option<Value>],
    entered: &HashMap<(String, u64), u32>,
    audit_floor: i64,
    options: &VerifyOptions,
    violations: &mut Vec<Violation>,
) -> Effects {
    // Rules 3 to 6, over the chain's own record of what happened.
    let mut items: HashMap<(String, u64), ItemHistory<'_>> = HashMap::new();
    let mut by_operation: HashMap<String, (String, u64)> = HashMap::new();
    let mut jobs_by_operation: HashMap<&str, (&str, &Value)> = HashMap::new();
    let mut job_statuses: HashMap<&str, Vec<(usize, &str)>> = HashMap::new();
    let mut rules_history: HashMap<&str, Vec<(usize, &Value)>> = HashMap::new();
    let mut grants_history: HashMap<&str, Vec<(usize, &Value)>> = HashMap::new();
    for (i, (entry, content)) in input.entries.iter().zip(contents).enumerate() {
        let Some(content) = content else { continue };
        match EntryKind::parse(&entry.kind) {
            Some(EntryKind::Decision) => {
                let key = item_key(content);
                let ran_with = content
                    .get("editedArgs")
                    .filter(|v| !v.is_null())
                    .unwrap_or(&content["args"]);
                if let (Some(set), Some(index)) = (
                    content["changeSetId"]
                        .as_str()
                        .and_then(|s| Uuid::parse_str(s).ok()),
                    content["itemIndex"]
                        .as_u64()
                        .and_then(|i| usize::try_from(i).ok()),
                ) && let Some(run_key) = input.run_keys.get(&set)
                {
                    let operation = OperationId::for_proposal(
                        run_key,
                        content["toolName"].as_str().unwrap_or_default(),
                        ran_with,
                        content["targetId"].as_str().unwrap_or_default(),
                        set,
                        index,
                    );
                    by_operation.insert(operation.as_str().to_owned(), key.clone());
                }
                items
                    .entry(key)
                    .or_default()
                    .decisions
                    .push((i, content.clone()));
            }
            Some(EntryKind::Approval) => {
                items
                    .entry(item_key(content))
                    .or_default()
                    .approvals
                    .push(content);
            }
            Some(EntryKind::Job) => {
                if let Some(operation) = content["operationId"].as_str() {
                    jobs_by_operation.insert(operation, (&entry.subject, content));
                    by_operation.insert(operation.to_owned(), item_key(content));
                }
                if let Some(status) = content["status"].as_str() {
                    job_statuses
                        .entry(&entry.subject)
                        .or_default()
                        .push((i, status));
                }
            }
            Some(EntryKind::Rules) => rules_history
                .entry(&entry.subject)
                .or_default()
                .push((i, content)),
            Some(EntryKind::Grant) => grants_history
                .entry(&entry.subject)
                .or_default()
                .push((i, content)),
            _ => {}
        }
    }

    let mut effects = 0u64;
    let mut client_answered = 0u64;
    let mut imported: std::collections::BTreeMap<String, u64> = Default::default();
    let mut ran: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, (entry, content)) in input.entries.iter().zip(contents).enumerate() {
        let Some(record) = content else { continue };
        if entry.kind != EntryKind::Audit.as_str()
            || record["kind"] != AuditKind::Result.as_str()
            || record["success"] != Value::Bool(true)
            || record["id"].as_i64().is_none_or(|id| id <= audit_floor)
        {
            continue;
        }
        let at = record["createdAt"].as_str().unwrap_or_default();
        // An effect verified before is read for rule 5 only.
        let context = input.is_context(entry);
        if !record["originHost"].is_null() {
            if context {
                continue;
            }
            // Its consent is on the origin's chain, which this device does not hold:
            // unchecked here, and said so.
            if options
                .since
                .is_some_and(|since| at < timefmt::format(since).as_str())
            {
                continue;
            }
            let origin = match &record["originHost"] {
                Value::String(origin) => origin.clone(),
                other => other.to_string(),
            };
            *imported.entry(origin.clone()).or_default() += 1;
            if options.strict {
                violations.push(Violation {
                    entry: place(entry),
                    rule: ProofRule::Unchecked,
                    expected: format!(
                        "an effect this device can check (--strict): {} ran on device {origin} and was imported, its consent is on that device's chain",
                        record["toolName"].as_str().unwrap_or_default()
                    ),
                });
            }
            continue;
        }
        let operation = record["operationId"].as_str().unwrap_or_default();
        ran.entry(operation).or_default().push(i);
        if context {
            continue;
        }
        if let Some(since) = options.since
            && at < timefmt::format(since).as_str()
        {
            continue;
        }
        effects += 1;
        let fail = |violations: &mut Vec<Violation>, rule: ProofRule, expected: String| {
            violations.push(Violation {
                entry: place(entry),
                rule,
                expected,
            });
        };
        let agent = record["agentId"].as_str().unwrap_or_default();
        let tool = record["toolName"].as_str().unwrap_or_default();
        let allowed_by = &record["allowedBy"];
        let item = by_operation.get(operation);
        // A grant answered instead of a person, on an item or unasked.
        if let Some(grant) = allowed_by.get("grant") {
            let grant = grant.as_str().unwrap_or_default();
            let in_force = grants_history
                .get(grant)
                .and_then(|h| h.iter().rev().find(|(g, _)| *g < i).map(|(_, c)| *c));
            match in_force {
                // A session grant ("yes, for this session") covers only its agent's
                // calls of its tool in its session whose arguments it covers.
                Some(g)
                    if g["revokedAt"].is_null()
                        && g.get("sessionId").is_some_and(|s| !s.is_null())
                        && !within_session_grant(g, allowed_by, record) =>
                {
                    fail(
                        violations,
                        ProofRule::Consent,
                        format!(
                            "{tool} within session grant {grant}: agent {}, session {}, {}",
                            g["agentId"],
                            g["sessionId"],
                            g["callPattern"].as_str().map_or_else(
                                || format!("arguments {}", g["argsPattern"]),
                                str::to_owned
                            )
                        ),
                    );
                }
                Some(g)
                    if g["revokedAt"].is_null()
                        && name_matches(g["toolName"].as_str().unwrap_or_default(), tool) => {}
                Some(_) => fail(
                    violations,
                    ProofRule::Consent,
                    format!(
                        "grant {grant} in force for {tool} when it ran (it was revoked or is for another tool)"
                    ),
                ),
                None => fail(
                    violations,
                    ProofRule::Consent,
                    format!("grant {grant} on the chain before {tool} ran"),
                ),
            }
            continue;
        }
        let Some(item) = item else {
            // Ran unasked: the agent's rules in force then must have let it.
            let rules = rules_history
                .get(agent)
                .and_then(|h| h.iter().rev().find(|(r, _)| *r < i).map(|(_, c)| *c));
            let Some(rules) = rules else {
                fail(
                    violations,
                    ProofRule::Consent,
                    format!("agent {agent}'s rules on the chain before {tool} ran unasked"),
                );
                continue;
            };
            let home = options.home.as_deref().map(|home| PathsAsWritten { home });
            let call = CallContext::new(
                &record["args"],
                record["targetId"].as_str().unwrap_or_default(),
            )
            .with_paths(home.as_ref().map(|facts| facts as &dyn PathFacts));
            // Rules over the history are judged on the chain's audit entries before
            // this call, as the decision judged them on the audit trail.
            let rules = &conditions_judged(
                rules,
                contents[..i]
                    .iter()
                    .zip(&input.entries[..i])
                    .filter(|(_, e)| e.kind == EntryKind::Audit.as_str())
                    .filter_map(|(c, _)| c.as_ref()),
                record,
                call,
            );
            if let Some(problem) = unasked_problem(rules, allowed_by, tool, Some(call), at) {
                fail(violations, ProofRule::Consent, problem);
            }
            continue;
        };
        let history = items.get(item);
        let confirmed = history.and_then(|h| {
            h.decisions
                .iter()
                .find(|(_, d)| d["verdict"] == "confirmed")
        });
        let Some((_, decision)) = confirmed else {
            fail(
                violations,
                ProofRule::Consent,
                format!(
                    "a confirmation of item {}:{} on the chain ({tool} ran with none)",
                    item.0, item.1
                ),
            );
            continue;
        };
        let ran_with = decision
            .get("editedArgs")
            .filter(|v| !v.is_null())
            .unwrap_or(&decision["args"]);
        // Who consented: the decision's person, or the approvals of what ran.
        // The quorum it was proposed with (its chain entry), or its row's when that
        // asks for more: a row lowered later proves nothing.
        let needed = Uuid::parse_str(&item.0)
            .ok()
            .zip(usize::try_from(item.1).ok())
            .and_then(|key| input.quorums.get(&key))
            .copied()
            .unwrap_or(1)
            .max(entered.get(item).copied().unwrap_or(1));
        let job = jobs_by_operation.get(operation);
        if needed > 1 {
            let approvers: HashSet<&str> = history
                .map(|h| {
                    h.approvals
                        .iter()
                        .filter(|a| canonical_json(&a["args"]) == canonical_json(ran_with))
                        .filter_map(|a| a["approvedBy"].as_str())
                        // An answer in the client is nobody's: it counts for no one.
                        .filter(|by| !assent_domain::answered_in_client(by))
                        // One person across doors, as the engine's quorum counts them.
                        .map(assent_domain::person)
                        .filter(|by| *by != agent)
                        .collect()
                })
                .unwrap_or_default();
            if (approvers.len() as u64) < u64::from(needed) {
                fail(
                    violations,
                    ProofRule::Consent,
                    format!(
                        "{needed} distinct people (not the agent) approving the arguments that ran, found {}",
                        approvers.len()
                    ),
                );
            }
        } else {
            match decision["decidedBy"].as_str() {
                // The agent through any door (`--as triage`, `slack:U9 (triage)`) is
                // the agent.
                Some(by) if assent_domain::person(by) == agent || by.is_empty() => fail(
                    violations,
                    ProofRule::Consent,
                    format!("a person to confirm, not the agent {agent} (decided by {by:?})"),
                ),
                Some(by) if assent_domain::answered_in_client(by) => {
                    client_answered += 1;
                    if options.strict {
                        fail(
                            violations,
                            ProofRule::Unchecked,
                            format!(
                                "a person to confirm {tool} (--strict), not an answer in the agent's client ({by})"
                            ),
                        );
                    }
                }
                Some(_) => {}
                None if job.is_some_and(|(_, j)| {
                    j["approvedBy"].as_array().is_some_and(|a| !a.is_empty())
                }) => {}
                None => fail(
                    violations,
                    ProofRule::Consent,
                    format!(
                        "the confirmation of item {}:{} to name who confirmed",
                        item.0, item.1
                    ),
                ),
            }
        }
        // Rule 4: a rejection before the run.
        if let Some(history) = history
            && let Some((r, _)) = history.decisions.iter().find(|(r, d)| {
                *r < i && (d["verdict"] == "rejected" || d["verdict"] == "retracted")
            })
        {
            fail(
                violations,
                ProofRule::NoRunAfterRejection,
                format!(
                    "nothing to run after the rejection at {}",
                    place(&input.entries[*r])
                ),
            );
        }
        if let Some((job_id, job)) = job {
            if job["held"] == Value::Bool(true)
                && let Some(due) = job["dueAt"].as_str()
                && at < due
            {
                fail(
                    violations,
                    ProofRule::HoldWindow,
                    format!("the run after the hold window ended at {due}, it ran at {at}"),
                );
            }
            if let Some(statuses) = job_statuses.get(job_id)
                && statuses
                    .iter()
                    .any(|(s, status)| *s < i && *status == JobStatus::Retracted.as_str())
                && !statuses
                    .iter()
                    .any(|(s, status)| *s < i && *status == JobStatus::Running.as_str())
            {
                fail(
                    violations,
                    ProofRule::HoldWindow,
                    "no run of a cancelled job".into(),
                );
            }
            // Rule 6: the job ran what the decision approved.
            if !decision["approvalDigest"].is_null()
                && !job["approvalDigest"].is_null()
                && decision["approvalDigest"] != job["approvalDigest"]
            {
                fail(
                    violations,
                    ProofRule::ApprovedAction,
                    format!(
                        "approval digest {} of the decision, the job carried {}",
                        decision["approvalDigest"], job["approvalDigest"]
                    ),
                );
            }
            if canonical_json(&job["args"]) != canonical_json(ran_with) {
                fail(
                    violations,
                    ProofRule::ApprovedAction,
                    format!(
                        "the job to run the approved arguments {}, it carried {}",
                        canonical_json(ran_with),
                        canonical_json(&job["args"])
                    ),
                );
            }
        }
    }
    // Rule 5.
    for (operation, runs) in &ran {
        if runs.len() < 2 || runs.iter().all(|r| input.is_context(&input.entries[*r])) {
            continue;
        }
        let doubted = jobs_by_operation.get(operation).is_some_and(|(job, _)| {
            job_statuses.get(job).is_some_and(|s| {
                s.iter()
                    .any(|(_, status)| *status == JobStatus::InDoubt.as_str())
            })
        });
        if !doubted {
            violations.push(Violation {
                entry: place(&input.entries[runs[1]]),
                rule: ProofRule::AtMostOnce,
                expected: format!(
                    "operation {operation} to take effect once, it did {} times",
                    runs.len()
                ),
            });
        }
    }

    Effects {
        checked: effects,
        client_answered,
        imported,
    }
}

/// The fields where `row` differs from `entered`: `field: entered X, row Y; …`.
fn differences(entered: &Value, row: &Value) -> String {
    let (Some(entered), Some(row)) = (entered.as_object(), row.as_object()) else {
        return format!(
            "{}, the row says {}",
            canonical_json(entered),
            canonical_json(row)
        );
    };
    let mut fields: Vec<&String> = entered.keys().chain(row.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter(|f| entered.get(*f) != row.get(*f))
        .map(|f| {
            let shown = |v: Option<&Value>| v.map_or_else(|| "nothing".to_owned(), canonical_json);
            format!(
                "{f} {}, the row says {}",
                shown(entered.get(f)),
                shown(row.get(f))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `(set, index)` of an entry about an item.
fn item_key(content: &Value) -> (String, u64) {
    (
        content["changeSetId"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        content["itemIndex"].as_u64().unwrap_or(u64::MAX),
    )
}

/// The agent's `rules` entry as it stood for the unasked call `record` (with `call`):
/// each rule with a condition over the history ([`assent_tools::Condition`]) judged
/// on the `earlier` audit entries ([`crate::run_history::runs_on_chain`]) and left out
/// when it did not apply, as the decision point left it out. A condition that cannot
/// be read is kept as a rule that applies: an ask that asks, an allow that the proof
/// then finds (fail-closed for ask and deny; an allow so kept is what the record
/// names, or a stricter rule still wins).
fn conditions_judged<'a>(
    rules: &Value,
    earlier: impl Iterator<Item = &'a Value>,
    record: &Value,
    call: CallContext<'_>,
) -> Value {
    let Some(list) = rules["rules"].as_array() else {
        return rules.clone();
    };
    if list.iter().all(|rule| rule.get("condition").is_none()) {
        return rules.clone();
    }
    let Ok(now) = timefmt::parse(
        "audit_records",
        record["createdAt"].as_str().unwrap_or_default(),
    ) else {
        return rules.clone();
    };
    let runs = crate::run_history::runs_on_chain(
        earlier,
        record["agentId"].as_str().unwrap_or_default(),
        record["runKey"].as_str().unwrap_or_default(),
        record["operationId"].as_str().unwrap_or_default(),
    );
    let kept: Vec<Value> = list
        .iter()
        .filter(|rule| {
            let Some(condition) = rule.get("condition") else {
                return true;
            };
            let Ok(condition) =
                serde_json::from_value::<assent_tools::Condition>(condition.clone())
            else {
                return true;
            };
            let action = rule["action"]
                .as_str()
                .and_then(|a| a.parse::<assent_tools::RuleAction>().ok())
                .unwrap_or(assent_tools::RuleAction::Ask);
            let pattern = rule["pattern"].as_str().unwrap_or_default();
            let holds = condition.holds(pattern, Some(call), &runs, now);
            assent_tools::Condition::applies(action, holds)
        })
        .cloned()
        .collect();
    let mut judged = rules.clone();
    judged["rules"] = Value::Array(kept);
    judged
}

/// Whether a stored rule's action lets a call run without a person: `allow`, or
/// `audit` (issue 57: it runs as `allow` does, only recorded more prominently).
fn runs_unasked(action: &Value) -> bool {
    action == "allow" || action == "audit"
}

/// Why a call that ran unasked at `at` was not let through by the agent's `rules`
/// entry then in force, or `None` when it was: what the audit says allowed it (a rule
/// of that pattern, or the tool's own mode) must be in force, and no rule in force
/// may ask about or deny the tool (deny and ask win over allow).
fn unasked_problem(
    rules: &Value,
    allowed_by: &Value,
    tool: &str,
    call: Option<CallContext<'_>>,
    at: &str,
) -> Option<String> {
    let in_force = |rule: &&Value| {
        rule["expiresAt"]
            .as_str()
            .is_none_or(|expires| expires > at)
    };
    let list: Vec<&Value> = rules["rules"]
        .as_array()
        .map(|r| r.iter().filter(in_force).collect())
        .unwrap_or_default();
    let strictest = list
        .iter()
        // As the engine routes: a pattern that cannot tell (a chained command) counts
        // for ask and deny, never for allow.
        .filter(|r| {
            call_covers(r["pattern"].as_str().unwrap_or_default(), tool, call) != Coverage::No
        })
        .filter_map(|r| r["action"].as_str())
        .filter(|a| *a == "deny" || *a == "ask")
        .max_by_key(|a| *a == "deny");
    if let Some(action) = strictest {
        return Some(format!(
            "no rule to {action} {tool} when it ran unasked (one was in force)"
        ));
    }
    // A chained command whose parts were each allowed by a rule of its own (issue 53):
    // every rule named must be an allow in force, and together they must cover it.
    if let Some(named) = allowed_by.get("rules").and_then(Value::as_array) {
        let patterns: Vec<&str> = named.iter().filter_map(|r| r["pattern"].as_str()).collect();
        let in_force = patterns.iter().all(|pattern| {
            list.iter()
                .any(|r| r["pattern"] == *pattern && runs_unasked(&r["action"]))
        });
        let covered = in_force && assent_tools::allow_rules_cover(&patterns, tool, call);
        return (!covered).then(|| {
            format!("allow rules {patterns:?} for {tool}, covering every part of its command, in force when it ran")
        });
    }
    if let Some(rule) = allowed_by.get("rule") {
        let pattern = rule["pattern"].as_str().unwrap_or_default();
        let found = list.iter().any(|r| {
            r["pattern"] == pattern
                && runs_unasked(&r["action"])
                && call_covers(pattern, tool, call) == Coverage::Yes
        });
        return (!found).then(|| format!("an allow rule {pattern:?} for {tool} in force when it ran (the agent's rules then had none)"));
    }
    if allowed_by.get("mode").is_some() {
        return None;
    }
    Some(format!(
        "a record of what let {tool} run unasked (allowedBy is {allowed_by})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_run_under_an_audit_rule_had_consent_by_rule() {
        let rules = json!({"rules": [{"pattern": "add_*", "action": "audit", "source": "command", "setBy": "alice", "setAt": "2026-01-01T00:00:00Z"}]});
        let by_rule = json!({"rule": {"pattern": "add_*", "action": "audit", "source": "command"}, "audited": true});
        assert_eq!(
            unasked_problem(&rules, &by_rule, "add_item", None, "2026"),
            None
        );
        // An audit rule with a deny beside it: the deny wins, the run had no consent.
        let denied = json!({"rules": [{"pattern": "add_*", "action": "audit"}, {"pattern": "add_item", "action": "deny"}]});
        assert!(unasked_problem(&denied, &by_rule, "add_item", None, "2026").is_some());
        // An audit rule named by a record but not in force: no consent.
        assert!(
            unasked_problem(&json!({"rules": []}), &by_rule, "add_item", None, "2026").is_some()
        );
    }

    #[test]
    fn an_unasked_run_needs_its_allow_rule_in_force_and_no_stricter_one() {
        let rules = json!({"rules": [{"pattern": "add_*", "action": "allow"}]});
        let by_rule = json!({"rule": {"pattern": "add_*", "action": "allow"}});
        assert_eq!(
            unasked_problem(
                &rules,
                &by_rule,
                "add_item",
                None,
                "2026-01-01T00:00:00.000000Z"
            ),
            None
        );
        let other = json!({"rule": {"pattern": "del_*", "action": "allow"}});
        assert!(unasked_problem(&rules, &other, "add_item", None, "2026").is_some());
        let denied = json!({"rules": [{"pattern": "add_*", "action": "allow"}, {"pattern": "add_item", "action": "deny"}]});
        assert!(unasked_problem(&denied, &by_rule, "add_item", None, "2026").is_some());
        let mode = json!({"mode": "immediate"});
        assert_eq!(
            unasked_problem(&json!({"rules": []}), &mode, "x", None, "2026"),
            None
        );
        let asked = json!({"rules": [{"pattern": "*", "action": "ask"}]});
        assert!(unasked_problem(&asked, &mode, "x", None, "2026").is_some());
        let expired = json!({"rules": [{"pattern": "x", "action": "allow", "expiresAt": "2025-01-01T00:00:00.000000Z"}]});
        let by_x = json!({"rule": {"pattern": "x", "action": "allow"}});
        assert!(
            unasked_problem(&expired, &by_x, "x", None, "2026-01-01T00:00:00.000000Z").is_some()
        );
        assert!(unasked_problem(&rules, &Value::Null, "add_item", None, "2026").is_some());
    }

    #[test]
    fn a_home_rule_is_read_with_the_home_the_proof_is_given_and_unsure_without() {
        let rules = json!({"rules": [{"pattern": "Read(~/notes/**)", "action": "allow"}]});
        let by_rule = json!({"rule": {"pattern": "Read(~/notes/**)", "action": "allow"}});
        let inside = json!({"file_path": "/home/al/notes/a.md"});
        let outside = json!({"file_path": "/home/al/.ssh/id_rsa"});
        let home = PathsAsWritten { home: "/home/al" };
        let with_home =
            |args| Some(CallContext::new(args, "/work").with_paths(Some(&home as &dyn PathFacts)));
        assert_eq!(
            unasked_problem(&rules, &by_rule, "Read", with_home(&inside), "2026"),
            None
        );
        assert!(unasked_problem(&rules, &by_rule, "Read", with_home(&outside), "2026").is_some());
        let without_home = Some(CallContext::new(&inside, "/work"));
        assert!(
            unasked_problem(&rules, &by_rule, "Read", without_home, "2026").is_some(),
            "no home: the rule cannot be tied to the call"
        );
    }

    #[test]
    fn an_argument_pattern_allows_only_the_calls_it_covers() {
        let rules = json!({"rules": [{"pattern": "Bash(git status*)", "action": "allow"}]});
        let by_rule = json!({"rule": {"pattern": "Bash(git status*)", "action": "allow"}});
        let call = |command: &str| json!({"command": command});
        let (status, removal, chained) = (
            call("git status -s"),
            call("rm -rf /"),
            call("git status; rm -rf /"),
        );
        let context = |args| {
            Some(CallContext {
                args,
                target_id: "/work",
                paths: None,
            })
        };
        assert_eq!(
            unasked_problem(&rules, &by_rule, "Bash", context(&status), "2026"),
            None
        );
        assert!(unasked_problem(&rules, &by_rule, "Bash", context(&removal), "2026").is_some());
        assert!(unasked_problem(&rules, &by_rule, "Bash", context(&chained), "2026").is_some());
    }

    #[test]
    fn a_run_under_a_session_grant_is_within_it_only_for_its_agent_session_tool_and_pattern() {
        let grant = json!({"agentId": "coder", "toolName": "Bash", "sessionId": "s1",
            "callPattern": "Bash(git status*)", "argsPattern": {"command": "git status"}});
        let by = json!({"grant": "g", "session": "s1"});
        let run = |agent: &str, tool: &str, command: &str| {
            json!({"agentId": agent, "toolName": tool, "args": {"command": command},
                "targetId": "/w"})
        };
        assert!(within_session_grant(
            &grant,
            &by,
            &run("coder", "Bash", "git status -s")
        ));
        assert!(!within_session_grant(
            &grant,
            &json!({"grant": "g", "session": "s2"}),
            &run("coder", "Bash", "git status")
        ));
        assert!(!within_session_grant(
            &grant,
            &json!({"grant": "g"}),
            &run("coder", "Bash", "git status")
        ));
        assert!(!within_session_grant(
            &grant,
            &by,
            &run("other", "Bash", "git status")
        ));
        assert!(!within_session_grant(
            &grant,
            &by,
            &run("coder", "Shell", "git status")
        ));
        assert!(!within_session_grant(
            &grant,
            &by,
            &run("coder", "Bash", "git push")
        ));
        assert!(!within_session_grant(
            &grant,
            &by,
            &run("coder", "Bash", "git status && rm -rf /")
        ));
        let exact = json!({"agentId": "coder", "toolName": "Bash", "sessionId": "s1",
            "callPattern": null, "argsPattern": {"command": "git status"}});
        assert!(within_session_grant(
            &exact,
            &by,
            &run("coder", "Bash", "git status")
        ));
        assert!(!within_session_grant(
            &exact,
            &by,
            &run("coder", "Bash", "git status -s")
        ));
    }

    fn entry(seq: u64, prev: &str, kind: &str, subject: &str, content: &Value) -> ChainEntry {
        let content = canonical_json(content);
        let hash = chain::entry_hash(prev, "dev", seq, kind, subject, &content);
        ChainEntry {
            device_id: "dev".into(),
            seq,
            kind: kind.into(),
            subject: subject.into(),
            content,
            prev: prev.into(),
            hash,
            created_at: "2026-01-01T00:00:00.000000Z".into(),
        }
    }

    fn chain_of(contents: &[(&str, &str, Value)]) -> Vec<ChainEntry> {
        let mut prev = GENESIS.to_owned();
        contents
            .iter()
            .enumerate()
            .map(|(i, (kind, subject, content))| {
                let e = entry(i as u64 + 1, &prev, kind, subject, content);
                prev = e.hash.clone();
                e
            })
            .collect()
    }

    fn head_of(entries: &[ChainEntry]) -> Head {
        Head {
            device_id: "dev".into(),
            entries: entries.len() as u64,
            hash: entries
                .last()
                .map_or(GENESIS.to_owned(), |e| e.hash.clone()),
        }
    }

    fn rules_of(entries: &[ChainEntry]) -> ProofInput {
        ProofInput {
            device_id: "dev".into(),
            entries: entries.to_vec(),
            agents: vec![
                json!({"agent": "a", "categories": [], "rules": [], "shadowRules": [], "toolSettings": {}}),
            ],
            ..ProofInput::default()
        }
    }

    fn sample() -> Vec<ChainEntry> {
        chain_of(&[
            (
                "chainBegins",
                "",
                json!({"auditIdFloor": 0, "reason": "newDatabase"}),
            ),
            (
                "rules",
                "a",
                json!({"agent": "a", "categories": [], "rules": [], "shadowRules": [], "toolSettings": {}}),
            ),
        ])
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = sample();
        let report = check(
            &rules_of(&entries),
            &head_of(&entries),
            &VerifyOptions::default(),
        );
        assert_eq!(report.violations, vec![]);
        assert_eq!(report.entries, 2);
    }

    #[test]
    fn after_a_verified_head_only_the_new_entries_are_linked_and_the_old_ones_still_hash() {
        let entries = chain_of(&[
            (
                "chainBegins",
                "",
                json!({"auditIdFloor": 0, "reason": "newDatabase"}),
            ),
            (
                "rules",
                "a",
                json!({"agent": "a", "categories": [], "rules": [], "shadowRules": [], "toolSettings": {}}),
            ),
            (
                "rules",
                "a",
                json!({"agent": "a", "categories": [], "rules": [], "shadowRules": [], "toolSettings": {}}),
            ),
        ]);
        let since = |input: &mut ProofInput, seq: usize| {
            input
                .verified
                .insert("dev".into(), (seq as u64, entries[seq - 1].hash.clone()));
        };
        let mut input = rules_of(&entries);
        since(&mut input, 2);
        let report = check(&input, &head_of(&entries), &VerifyOptions::default());
        assert_eq!(report.violations, vec![]);
        assert_eq!((report.entries, report.checked_entries), (3, 1));

        // The first new entry must follow the stored head.
        let mut relinked = entries.clone();
        relinked[2] = entry(3, GENESIS, "rules", "a", &json!({"agent": "a"}));
        let mut input = rules_of(&relinked);
        since(&mut input, 2);
        let found = check(&input, &head_of(&relinked), &VerifyOptions::default());
        assert!(
            found.violations.iter().any(|v| v.entry == "dev#3"
                && v.rule == ProofRule::ChainIntact
                && v.expected.starts_with("prev ")),
            "{found:?}"
        );

        // An entry before the head is read as context: an edit of it still shows in
        // its hash; a recomputed one only `--full` finds, by the links after it.
        let mut edited = entries.clone();
        edited[1].content = edited[1].content.replace("[]", "[1]");
        let mut input = rules_of(&edited);
        since(&mut input, 2);
        let found = check(&input, &head_of(&edited), &VerifyOptions::default());
        assert!(
            found.violations.iter().any(|v| v.entry == "dev#2"),
            "{found:?}"
        );
    }

    /// Whether checking `entries` against the head of `intact` names a broken chain
    /// at `place` (any place when `None`).
    fn broken_at(entries: &[ChainEntry], intact: &[ChainEntry], place: Option<&str>) -> bool {
        check(
            &rules_of(entries),
            &head_of(intact),
            &VerifyOptions::default(),
        )
        .violations
        .iter()
        .any(|v| v.rule == ProofRule::ChainIntact && place.is_none_or(|p| v.entry == p))
    }

    #[test]
    fn an_edited_removed_or_reordered_entry_is_named() {
        let entries = sample();
        let mut edited = entries.clone();
        edited[1].content = edited[1].content.replace("[]", "[1]");
        assert!(broken_at(&edited, &entries, Some("dev#2")));
        assert!(broken_at(&[entries[1].clone()], &entries, Some("dev#2")));
        assert!(broken_at(
            &[entries[1].clone(), entries[0].clone()],
            &entries,
            None
        ));

        let checkpoint = VerifyOptions {
            head: Some("f".repeat(64)),
            ..VerifyOptions::default()
        };
        let report = check(&rules_of(&entries), &head_of(&entries), &checkpoint);
        assert!(report.violations.iter().any(|v| v.entry == "dev#head"));
    }

    /// A chain where item `S:0` of agent `a`, entered with a quorum of `needed`, was
    /// approved by `approvers`, confirmed by the last of them, and ran as operation
    /// `op` (`origin`: the device it was imported from).
    fn quorum_run(needed: u32, approvers: &[&str], origin: Option<&str>) -> Vec<ChainEntry> {
        let set = "00000000-0000-0000-0000-000000000001";
        let item = |more: Value| {
            let mut content = json!({"changeSetId": set, "itemIndex": 0, "args": {"x": 1}});
            content
                .as_object_mut()
                .expect("an object")
                .extend(more.as_object().expect("an object").clone());
            content
        };
        let mut contents = vec![
            (
                "chainBegins",
                String::new(),
                json!({"auditIdFloor": 0, "reason": "newDatabase"}),
            ),
            (
                "rules",
                "a".to_owned(),
                json!({"agent": "a", "categories": [], "rules": [], "shadowRules": [], "toolSettings": {}}),
            ),
            (
                "quorum",
                format!("{set}:0"),
                json!({"changeSetId": set, "itemIndex": 0, "toolName": "t", "approvalsNeeded": needed}),
            ),
        ];
        for by in approvers {
            contents.push((
                "approval",
                format!("{set}:0:0:{by}"),
                item(json!({"approvedBy": by})),
            ));
        }
        contents.push((
            "decision",
            "d".to_owned(),
            item(
                json!({"verdict": "confirmed", "decidedBy": approvers.last(),
                "toolName": "t", "targetId": "x"}),
            ),
        ));
        contents.push((
            "job",
            "j".to_owned(),
            item(json!({"operationId": "op", "status": "applied"})),
        ));
        contents.push((
            "audit",
            "1".to_owned(),
            json!({"id": 1, "kind": "result", "success": true, "operationId": "op",
                "agentId": "a", "toolName": "t", "args": {"x": 1},
                "createdAt": "2026-01-01T00:00:00.000000Z", "originHost": origin}),
        ));
        let borrowed: Vec<(&str, &str, Value)> = contents
            .iter()
            .map(|(kind, subject, content)| (*kind, subject.as_str(), content.clone()))
            .collect();
        chain_of(&borrowed)
    }

    /// The violations of `rule` the proof finds in `entries`, as `options` asks.
    fn broken(entries: &[ChainEntry], options: &VerifyOptions, rule: ProofRule) -> Vec<String> {
        check(&rules_of(entries), &head_of(entries), options)
            .violations
            .into_iter()
            .filter(|v| v.rule == rule)
            .map(|v| v.expected)
            .collect()
    }

    #[test]
    fn one_person_through_a_token_and_slack_is_one_approver_to_the_proof() {
        let options = VerifyOptions::default();
        let alice_twice = quorum_run(2, &["slack:U9 (alice)", "token:3fa9c1d2e4b5 (alice)"], None);
        let found = broken(&alice_twice, &options, ProofRule::Consent);
        assert!(
            found.iter().any(|e| e.contains("2 distinct people")),
            "{found:?}"
        );
        let alice_and_bob = quorum_run(2, &["slack:U9 (alice)", "token:3fa9c1d2e4b5 (bob)"], None);
        assert_eq!(
            broken(&alice_and_bob, &options, ProofRule::Consent),
            Vec::<String>::new()
        );
        // The agent through Slack, and an answer in the client, are nobody.
        for nobody in ["slack:U9 (a)", "mcp-client:claude-code"] {
            let with = quorum_run(2, &["token:3fa9c1d2e4b5 (bob)", nobody], None);
            assert!(
                !broken(&with, &options, ProofRule::Consent).is_empty(),
                "{nobody} counted"
            );
        }
    }

    #[test]
    fn the_quorum_entered_at_proposal_binds_whatever_the_row_says() {
        let options = VerifyOptions::default();
        let one = quorum_run(2, &["alice"], None);
        let found = broken(&one, &options, ProofRule::Consent);
        assert!(
            found.iter().any(|e| e.contains("2 distinct people")),
            "{found:?}"
        );
        // The row says 1 (no row asks for more): rule 2 names the quorum entry.
        let found = broken(&one, &options, ProofRule::RowMatchesEntry);
        assert!(
            found
                .iter()
                .any(|e| e.contains("to need 2 approvals as proposed, the row now says 1")),
            "{found:?}"
        );
    }

    #[test]
    fn a_client_answer_and_an_imported_effect_are_counted_apart_and_fail_under_strict() {
        let strict = VerifyOptions {
            strict: true,
            ..VerifyOptions::default()
        };
        // The gateway's own record of a client's answer is what the proof tells apart.
        assert!(assent_domain::answered_in_client(&format!(
            "{}claude-code",
            crate::decisions::MCP_CLIENT_PREFIX
        )));
        let client = quorum_run(1, &["mcp-client:claude-code"], None);
        let report = check(
            &rules_of(&client),
            &head_of(&client),
            &VerifyOptions::default(),
        );
        assert_eq!(report.client_answered, 1);
        assert!(
            !report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::Consent)
        );
        assert!(!broken(&client, &strict, ProofRule::Unchecked).is_empty());

        let imported = quorum_run(1, &["alice"], Some("device-b"));
        let report = check(
            &rules_of(&imported),
            &head_of(&imported),
            &VerifyOptions::default(),
        );
        assert_eq!(report.imported.get("device-b"), Some(&1));
        assert_eq!(report.effects_checked, 0);
        let found = broken(&imported, &strict, ProofRule::Unchecked);
        assert!(found.iter().any(|e| e.contains("device-b")), "{found:?}");

        let agent = quorum_run(1, &["slack:U9 (a)"], None);
        let found = broken(&agent, &VerifyOptions::default(), ProofRule::Consent);
        assert!(
            found.iter().any(|e| e.contains("not the agent a")),
            "{found:?}"
        );
    }

    #[test]
    fn a_row_that_differs_from_its_entry_is_named() {
        let entries = sample();
        let mut input = rules_of(&entries);
        input.agents[0]["rules"] = json!([{"pattern": "*", "action": "allow"}]);
        let report = check(&input, &head_of(&entries), &VerifyOptions::default());
        assert_eq!(report.violations.len(), 1);
        assert_eq!(report.violations[0].entry, "dev#2");
        assert_eq!(report.violations[0].rule, ProofRule::RowMatchesEntry);
    }
}
