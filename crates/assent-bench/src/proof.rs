//! What `assent audit verify` costs: a database of `entries` audit records (each an
//! effect that ran unasked under the tool's mode), every one on the consent chain, is
//! proven with [`assent_store::proof::verify`]; beside it, SQLite's own `PRAGMA
//! integrity_check` on the same file, in the same run. Then the verify's head is
//! stored (as a clean `audit verify` stores it), [`NEW_RECORDS`] more records are
//! written, and the incremental verify of only those is timed (issue 55: under 1 s on
//! top of a million).
//!
//! The data is written straight through rusqlite (rows and entries as the store writes
//! them, hashes computed the same way): generating a million entries through the
//! engine would take longer than the measurement.

use anyhow::{Context, bail};
use assent_domain::{OperationId, canonical_json};
use assent_store::proof::{self, VerifyOptions};
use assent_store::{Store, audit, chain, timefmt, verified_heads};
use assent_tools::{AuditKind, AuditRecord};
use serde_json::json;
use std::path::Path;
use std::time::Instant;
use time::OffsetDateTime;

/// Records written after the stored head, for the incremental verify.
pub const NEW_RECORDS: usize = 1_000;

/// The proof's figures.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProofResult {
    /// Audit records (each with its chain entry) in the database.
    pub audit_records: usize,
    /// Entries on the chain.
    pub entries: u64,
    /// Seconds `audit verify` took.
    pub verify_seconds: f64,
    /// Chain entries proven per second.
    pub entries_per_second: f64,
    /// Seconds `PRAGMA integrity_check` took on the same file.
    pub integrity_check_seconds: f64,
    /// `verify_seconds ÷ integrity_check_seconds`.
    pub ratio_to_integrity_check: f64,
    /// Entries written after the head the full verify stored.
    pub new_entries: u64,
    /// Seconds the incremental verify of those took.
    pub incremental_verify_seconds: f64,
}

/// Writes `records` audit records and their chain entries to a fresh database in
/// `dir`, then times the proof and `PRAGMA integrity_check` on it.
pub async fn measure(dir: &Path, records: usize) -> anyhow::Result<ProofResult> {
    let file = dir.join("proof.db");
    let url = format!("sqlite://{}", file.display());
    Store::open(&url).await?.close().await;
    generate(&file, 1, records)?;

    let store = Store::open(&url).await?;
    let mut conn = store.read_connection().await?;
    let started = Instant::now();
    let report = proof::verify(&mut conn, &VerifyOptions::default()).await?;
    let verify_seconds = started.elapsed().as_secs_f64();
    drop(conn);
    if !report.verified() || report.effects_checked != records as u64 {
        bail!(
            "the generated database does not verify ({} effects checked): {:?}",
            report.effects_checked,
            report.violations.first()
        );
    }
    let mut tx = store.begin_write().await?;
    verified_heads::save(tx.connection(), &report.chains, OffsetDateTime::now_utc()).await?;
    tx.commit().await?;
    store.close().await;

    generate(&file, records + 1, NEW_RECORDS)?;
    let store = Store::open(&url).await?;
    let mut conn = store.read_connection().await?;
    let started = Instant::now();
    let incremental = proof::verify(&mut conn, &VerifyOptions::default()).await?;
    let incremental_verify_seconds = started.elapsed().as_secs_f64();
    drop(conn);
    store.close().await;
    if !incremental.verified()
        || incremental.started_after.is_none()
        || incremental.effects_checked != NEW_RECORDS as u64
    {
        bail!(
            "the incremental verify did not verify the {NEW_RECORDS} new records alone ({} effects checked, {:?}): {:?}",
            incremental.effects_checked,
            incremental.full_because,
            incremental.violations.first()
        );
    }

    let sqlite = rusqlite::Connection::open(&file)?;
    let started = Instant::now();
    let answer: String = sqlite.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    let integrity_check_seconds = started.elapsed().as_secs_f64();
    if answer != "ok" {
        bail!("integrity_check says {answer}");
    }
    Ok(ProofResult {
        audit_records: records,
        entries: report.entries,
        verify_seconds,
        entries_per_second: report.entries as f64 / verify_seconds,
        integrity_check_seconds,
        ratio_to_integrity_check: verify_seconds / integrity_check_seconds,
        new_entries: incremental.checked_entries,
        incremental_verify_seconds,
    })
}

/// Effects `first..first + records` (each an audit record and its entry); on a fresh
/// chain (`first` 1) the agent, its rules entry and the chain's beginning first.
fn generate(file: &Path, first: usize, records: usize) -> anyhow::Result<()> {
    let mut sqlite = rusqlite::Connection::open(file)?;
    let device: String = sqlite
        .query_row(
            "SELECT host_id FROM sync_device WHERE singleton = 1",
            [],
            |row| row.get(0),
        )
        .context("the store wrote no device id")?;
    let at = OffsetDateTime::now_utc();
    let at_text = timefmt::format(at);
    let tx = sqlite.transaction()?;
    let (mut seq, mut prev) = if first == 1 {
        tx.execute(
            "INSERT INTO agents (id, categories, rules, created_at, updated_at) VALUES ('bench', '[\"work\"]', '[]', ?1, ?1)",
            [&at_text],
        )?;
        (0u64, chain::GENESIS.to_owned())
    } else {
        tx.query_row(
            "SELECT seq, hash FROM consent_chain WHERE device_id = ?1 ORDER BY seq DESC LIMIT 1",
            [&device],
            |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?)),
        )?
    };
    {
        let mut entry = tx.prepare(
            "INSERT INTO consent_chain (device_id, seq, kind, subject, content, prev, hash, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let mut row = tx.prepare(
            "INSERT INTO audit_records (id, operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args,
                                        success, detail, created_at, allowed_by)
             VALUES (?1, ?2, ?3, 'set_task_language', 'bench', 'task', ?4, 'result', ?5, 1, 'done', ?6, '{\"mode\":\"immediate\"}')",
        )?;
        let mut push =
            |kind: &str, subject: &str, content: &serde_json::Value| -> anyhow::Result<()> {
                seq += 1;
                let content = canonical_json(content);
                let hash = chain::entry_hash(&prev, &device, seq, kind, subject, &content);
                entry.execute(rusqlite::params![
                    device,
                    i64::try_from(seq)?,
                    kind,
                    subject,
                    content,
                    prev,
                    hash,
                    at_text
                ])?;
                prev = hash;
                Ok(())
            };
        if first == 1 {
            push(
                "chainBegins",
                "",
                &json!({"auditIdFloor": 0, "reason": "newDatabase"}),
            )?;
            push(
                "rules",
                "bench",
                &json!({"agent": "bench", "categories": ["work"], "rules": [], "shadowRules": [], "toolSettings": {}}),
            )?;
        }
        for n in first..first + records {
            let id = i64::try_from(n)?;
            let run = format!("run-{n}");
            let target = format!("task-{}", n % 1_000);
            let args = json!({"language": "en", "n": n});
            let record = AuditRecord {
                operation_id: OperationId::derive(
                    &run,
                    "set_task_language",
                    &args,
                    &[target.as_str()],
                ),
                run_key: run,
                tool_name: "set_task_language".into(),
                agent_id: "bench".into(),
                target_kind: "task".into(),
                target_id: target,
                kind: AuditKind::Result,
                args,
                success: Some(true),
                detail: Some("done".into()),
                vector_clock: None,
                created_at: at,
                allowed_by: Some(json!({"mode": "immediate"})),
                refused_by: None,
                decided_by: None,
            };
            row.execute(rusqlite::params![
                id,
                record.operation_id.as_str(),
                record.run_key,
                record.target_id,
                record.args.to_string(),
                at_text
            ])?;
            push(
                "audit",
                &id.to_string(),
                &audit::chain_content(id, &record, None),
            )?;
        }
    }
    tx.commit()?;
    Ok(())
}
