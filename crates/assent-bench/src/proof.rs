//! What `assent audit verify` costs: a database of `entries` audit records (each an
//! effect that ran unasked under the tool's mode), every one on the consent chain, is
//! proven with [`assent_store::proof::verify`]; beside it, SQLite's own `PRAGMA
//! integrity_check` on the same file, in the same run.
//!
//! The data is written straight through rusqlite (rows and entries as the store writes
//! them, hashes computed the same way): generating a million entries through the
//! engine would take longer than the measurement.

use anyhow::{Context, bail};
use assent_domain::{OperationId, canonical_json};
use assent_store::proof::{self, VerifyOptions};
use assent_store::{Store, audit, chain, timefmt};
use assent_tools::{AuditKind, AuditRecord};
use serde_json::json;
use std::path::Path;
use std::time::Instant;
use time::OffsetDateTime;

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
}

/// Writes `records` audit records and their chain entries to a fresh database in
/// `dir`, then times the proof and `PRAGMA integrity_check` on it.
pub async fn measure(dir: &Path, records: usize) -> anyhow::Result<ProofResult> {
    let file = dir.join("proof.db");
    let url = format!("sqlite://{}", file.display());
    Store::open(&url).await?.close().await;
    generate(&file, records)?;

    let store = Store::open(&url).await?;
    let mut conn = store.read_connection().await?;
    let started = Instant::now();
    let report = proof::verify(&mut conn, &VerifyOptions::default()).await?;
    let verify_seconds = started.elapsed().as_secs_f64();
    drop(conn);
    store.close().await;
    if !report.verified() || report.effects_checked != records as u64 {
        bail!(
            "the generated database does not verify ({} effects checked): {:?}",
            report.effects_checked,
            report.violations.first()
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
    })
}

/// The agent, its rules entry, the chain's beginning, then `records` effects.
fn generate(file: &Path, records: usize) -> anyhow::Result<()> {
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
    tx.execute(
        "INSERT INTO agents (id, categories, rules, created_at, updated_at) VALUES ('bench', '[\"work\"]', '[]', ?1, ?1)",
        [&at_text],
    )?;
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
        let mut prev = chain::GENESIS.to_owned();
        let mut seq = 0u64;
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
        for n in 1..=records {
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
