//! What an agent ran lately, for the rules over the session's history (issue 57): the
//! facts a rule's condition ([`assent_tools::Condition`]) is judged on, read from the
//! audit trail inside the decision's transaction, and the lock that orders two
//! decisions counting the same window.
//!
//! A call ran when its action record was written (before its handler, or when a
//! coding agent's hook let it through); it succeeded when its result record says so,
//! or, for a coding agent's call, when the agent's own after event (`PostToolUse`,
//! recorded with no `success`) does not report a failure.

use crate::{Backend, Connection, StoreError, timefmt};
use assent_tools::PastRun;
use serde_json::Value;
use sqlx::Row;
use std::collections::HashMap;
use time::OffsetDateTime;

/// The advisory lock class of an agent's history ("ASHI"), apart from the targets'.
const HISTORY_LOCK_CLASS: i32 = 0x4153_4849;

/// Orders the decisions of agent `agent_id` that read its history: on PostgreSQL a
/// transaction-scoped advisory lock on the agent, so two wakes of one agent (on any
/// targets) count the same window one after the other, each seeing the other's runs.
/// On SQLite the single writer orders them already.
pub async fn lock_agent(conn: &mut Connection, agent_id: &str) -> Result<(), StoreError> {
    if Backend::of(conn) == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(HISTORY_LOCK_CLASS)
            .bind(agent_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// The calls agent `agent_id` ran after `since`, oldest first: with `run_key_prefix`
/// (a coding agent's session, `hook:SESSION:`) only the calls of run keys starting
/// with it.
pub async fn runs_since(
    conn: &mut Connection,
    agent_id: &str,
    run_key_prefix: Option<&str>,
    since: OffsetDateTime,
) -> Result<Vec<PastRun>, StoreError> {
    let rows = sqlx::query(
        "SELECT operation_id, run_key, tool_name, target_id, kind, args, success, detail, created_at, origin_host
         FROM audit_records WHERE agent_id = $1 AND created_at > $2 AND kind IN ('action', 'result')
         ORDER BY id",
    )
    .bind(agent_id)
    .bind(timefmt::format(since))
    .fetch_all(&mut *conn)
    .await?;
    let corrupt = |e: String| StoreError::corrupt("audit_records", e);
    let mut records = Vec::with_capacity(rows.len());
    for row in &rows {
        let run_key: String = row.try_get("run_key")?;
        if run_key_prefix.is_some_and(|prefix| !run_key.starts_with(prefix)) {
            continue;
        }
        let args: String = row.try_get("args")?;
        let created_at: String = row.try_get("created_at")?;
        records.push(Record {
            operation_id: row.try_get("operation_id")?,
            run_key,
            tool_name: row.try_get("tool_name")?,
            target_id: row.try_get("target_id")?,
            action: row.try_get::<String, _>("kind")? == "action",
            args: serde_json::from_str(&args).map_err(|e| corrupt(e.to_string()))?,
            success: row
                .try_get::<Option<i64>, _>("success")?
                .map(|success| success != 0),
            detail: row.try_get("detail")?,
            at: timefmt::parse("audit_records", &created_at)?,
            here: row.try_get::<Option<String>, _>("origin_host")?.is_none(),
        });
    }
    Ok(runs(&records))
}

/// What the proof (`audit verify`) judges a conditional rule on: the runs of agent
/// `agent` the chain's audit entries `earlier` record (their contents, in chain order,
/// all before the checked call), scoped as the decision scoped them (a coding agent's
/// session when `run_key` is a hook's `hook:SESSION:ID`), leaving out `operation`'s
/// own records.
pub(crate) fn runs_on_chain<'a>(
    earlier: impl Iterator<Item = &'a Value>,
    agent: &str,
    run_key: &str,
    operation: &str,
) -> Vec<PastRun> {
    let prefix = session_prefix(run_key);
    let records: Vec<Record> = earlier
        .filter(|entry| entry["agentId"] == agent && entry["operationId"] != operation)
        .filter(|entry| {
            prefix.as_deref().is_none_or(|prefix| {
                entry["runKey"]
                    .as_str()
                    .is_some_and(|key| key.starts_with(prefix))
            })
        })
        .filter_map(|entry| {
            let kind = entry["kind"].as_str()?;
            if kind != "action" && kind != "result" {
                return None;
            }
            Some(Record {
                operation_id: entry["operationId"].as_str()?.to_owned(),
                run_key: entry["runKey"].as_str()?.to_owned(),
                tool_name: entry["toolName"].as_str()?.to_owned(),
                target_id: entry["targetId"].as_str()?.to_owned(),
                action: kind == "action",
                args: entry["args"].clone(),
                success: entry["success"].as_bool(),
                detail: entry["detail"].as_str().map(str::to_owned),
                at: timefmt::parse("audit_records", entry["createdAt"].as_str()?).ok()?,
                here: entry["originHost"].is_null(),
            })
        })
        .collect();
    runs(&records)
}

/// The run-key prefix of a coding agent's session a call of run key `run_key` was
/// decided in (`hook:SESSION:`), as the wake scopes it by the session's thread; `None`
/// for any other call (and a hook event that named no session, `hook:-:ID`).
fn session_prefix(run_key: &str) -> Option<String> {
    let rest = run_key.strip_prefix("hook:")?;
    let (session, _) = rest.rsplit_once(':')?;
    (!session.is_empty() && session != "-").then(|| format!("hook:{session}:"))
}

/// One action or result record, as read.
#[derive(Clone)]
struct Record {
    operation_id: String,
    run_key: String,
    tool_name: String,
    target_id: String,
    action: bool,
    args: Value,
    success: Option<bool>,
    detail: Option<String>,
    at: OffsetDateTime,
    here: bool,
}

/// The runs of `records`: each action record with whether it succeeded (the agent's
/// own report of a coding agent's call first, else Assent's result record).
fn runs(records: &[Record]) -> Vec<PastRun> {
    // The results by operation (Assent's own) and by run key (the agent's reports),
    // each the last written, so a long window is read in one pass.
    let mut ours: HashMap<&str, bool> = HashMap::new();
    let mut reported: HashMap<&str, Vec<&Record>> = HashMap::new();
    for result in records.iter().filter(|r| !r.action) {
        match result.success {
            Some(success) => {
                ours.insert(&result.operation_id, success);
            }
            None => reported.entry(&result.run_key).or_default().push(result),
        }
    }
    records
        .iter()
        .filter(|record| record.action)
        .map(|action| {
            let reported = reported
                .get(action.run_key.as_str())
                .into_iter()
                .flatten()
                .rev()
                .find(|r| r.tool_name == action.tool_name && r.args == action.args)
                .and_then(|r| r.detail.as_deref())
                .map(|detail| !agent_reported_failure(detail));
            let ours = ours.get(action.operation_id.as_str()).copied();
            // A coding agent's call (a hook's `hook:` run key) runs in the agent after
            // Assent let it: Assent's own result says only that it was let through,
            // the agent's after event whether it succeeded.
            let succeeded = if action.run_key.starts_with("hook:") {
                reported
            } else {
                reported.or(ours)
            };
            PastRun {
                tool_name: action.tool_name.clone(),
                args: action.args.clone(),
                target_id: action.target_id.clone(),
                at: action.at,
                succeeded,
                here: action.here,
            }
        })
        .collect()
}

/// Whether an after event's detail (`ran in KIND (failed): …`, as the hook writes
/// it) reports a failure.
fn agent_reported_failure(detail: &str) -> bool {
    detail
        .split_once(':')
        .is_none_or(|(head, _)| head.ends_with("(failed)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn record(
        operation: &str,
        run: &str,
        action: bool,
        success: Option<bool>,
        detail: Option<&str>,
    ) -> Record {
        Record {
            operation_id: operation.to_owned(),
            run_key: run.to_owned(),
            tool_name: "Bash".to_owned(),
            target_id: "/w".to_owned(),
            action,
            args: json!({"command": "cargo test"}),
            success,
            detail: detail.map(str::to_owned),
            at: datetime!(2026-03-02 12:00 UTC),
            here: true,
        }
    }

    #[test]
    fn the_agents_report_decides_whether_its_call_succeeded() {
        let allowed = [
            record("o1", "hook:s:1", true, None, None),
            record("o1", "hook:s:1", false, Some(true), Some("allowed")),
        ];
        // Let through, not yet reported run by the agent: not known to have succeeded.
        assert_eq!(runs(&allowed)[0].succeeded, None);
        let mut failed = allowed.to_vec();
        failed.push(record(
            "o2",
            "hook:s:1",
            false,
            None,
            Some("ran in claude-code (failed): exit 101"),
        ));
        assert_eq!(runs(&failed)[0].succeeded, Some(false));
        let mut passed = allowed.to_vec();
        passed.push(record(
            "o2",
            "hook:s:1",
            false,
            None,
            Some("ran in claude-code: ok"),
        ));
        assert_eq!(runs(&passed)[0].succeeded, Some(true));
        let engine = [
            record("o1", "run-1", true, None, None),
            record("o1", "run-1", false, Some(false), Some("boom")),
        ];
        assert_eq!(runs(&engine)[0].succeeded, Some(false));
        assert_eq!(runs(&engine[..1])[0].succeeded, None);
    }
}
