//! The reads a reviewer and an agent wake make, at scale, through the real store
//! functions: "pending sets of a task" (`change_sets::pending`), "recent 20 decisions
//! of an agent for a task" (`decisions::recent`) and the decision-history prompt
//! section (`ConfirmationService::history`, which reads and renders).
//!
//! Beside the first two, their anchor: the same SQL with the same parameters through
//! SQLite's C API (rusqlite, a cached prepared statement on the calling thread, every
//! column read into an owned value) on the same file in the same run, so the store's
//! cost over SQLite itself is a ratio, not an absolute time.

use crate::dataset::{self, AGENTS, Scale};
use crate::measure::{Memory, micros, percentile};
use anyhow::ensure;
use assent_confirm::{Engine, MAX_HISTORY_ENTRIES};
use assent_journal_host::JournalHost;
use assent_store::change_sets::{self, PendingFilter};
use assent_store::{Store, decisions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// p50 and p99 of one query, in microseconds.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Latency {
    fn of(samples: &[Duration]) -> Self {
        Self {
            p50_us: micros(percentile(samples, 50.0)),
            p99_us: micros(percentile(samples, 99.0)),
        }
    }
}

/// The queries at one stage of the history.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageResult {
    pub percent: usize,
    pub change_sets: usize,
    pub decisions: usize,
    pub samples: usize,
    pub pending_sets_of_task: Latency,
    pub recent_decisions_of_agent_for_task: Latency,
    pub render_history: Latency,
    /// The same reads as `pending_sets_of_task` (the sets, then their items) through
    /// SQLite's C API.
    pub pending_sets_of_task_c_api: Latency,
    /// The same read as `recent_decisions_of_agent_for_task` through SQLite's C API.
    pub recent_decisions_of_agent_for_task_c_api: Latency,
    /// The process's memory after this stage's queries.
    pub memory: Option<Memory>,
}

impl StageResult {
    /// The store's pending read's p50 ÷ the C API's.
    pub fn pending_to_c_api(&self) -> f64 {
        self.pending_sets_of_task.p50_us / self.pending_sets_of_task_c_api.p50_us
    }

    /// The store's recent read's p50 ÷ the C API's.
    pub fn recent_to_c_api(&self) -> f64 {
        self.recent_decisions_of_agent_for_task.p50_us
            / self.recent_decisions_of_agent_for_task_c_api.p50_us
    }
}

/// A deterministic walk over tasks and agents (a linear congruential generator), so
/// every run asks the same questions.
struct Picks(u64);

impl Picks {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % below.max(1) as u64) as usize
    }
}

/// Runs every query `samples` times (after `samples / 10` untimed) against the
/// database of one stage.
pub async fn measure(
    path: &Path,
    percent: usize,
    scale: Scale,
    samples: usize,
) -> anyhow::Result<StageResult> {
    let store = Store::open(&format!("sqlite://{}", path.display())).await?;
    let engine = Engine::new(
        store.clone(),
        Arc::new(assent_journal::catalog()),
        Arc::new(JournalHost::new("bench")),
    );
    let history = engine.confirmations();
    let mut conn = store.read_connection().await?;
    let c_api = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let (mut pending_c, mut recent_c) = (Vec::new(), Vec::new());
    let mut picks = Picks(percent as u64);
    let warmup = samples / 10;
    let (mut pending, mut recent, mut rendered) = (Vec::new(), Vec::new(), Vec::new());
    let (mut open_sets, mut full_histories) = (0, 0);
    for n in 0..warmup + samples {
        let target = assent_journal_host::task_target(dataset::task_id(picks.next(scale.tasks())));
        let agent = dataset::agent_id(picks.next(AGENTS));
        let filter = PendingFilter::all().target(target.clone());

        let start = Instant::now();
        let sets = change_sets::pending(&mut conn, &filter).await?;
        let pending_time = start.elapsed();

        let start = Instant::now();
        let found =
            decisions::recent(&mut conn, &agent, Some(&target), MAX_HISTORY_ENTRIES as u32).await?;
        let recent_time = start.elapsed();

        let start = Instant::now();
        let section = history
            .history(&agent, Some(&target), MAX_HISTORY_ENTRIES as u32)
            .await?;
        let render_time = start.elapsed();

        let start = Instant::now();
        let sets_c = pending_through_c_api(&c_api, &target)?;
        let pending_c_time = start.elapsed();

        let start = Instant::now();
        let recent_rows = recent_through_c_api(&c_api, &agent, &target)?;
        let recent_c_time = start.elapsed();

        ensure!(
            sets_c == sets.len() && recent_rows == found.len(),
            "the C API read {sets_c} sets and {recent_rows} decisions where the store read {} and {}",
            sets.len(),
            found.len()
        );
        ensure!(
            section.is_some() != found.is_empty(),
            "the history section and the decisions disagree for {agent} on {target}"
        );
        if n >= warmup {
            open_sets += sets.len();
            full_histories += usize::from(found.len() == MAX_HISTORY_ENTRIES);
            pending.push(pending_time);
            recent.push(recent_time);
            rendered.push(render_time);
            pending_c.push(pending_c_time);
            recent_c.push(recent_c_time);
        }
    }
    // Queries that found nothing would measure nothing.
    ensure!(open_sets > 0, "no pending sets found at {percent} %");
    ensure!(
        full_histories > 0,
        "no agent had a full history at {percent} %"
    );
    drop(conn);
    store.close().await;
    Ok(StageResult {
        percent,
        change_sets: scale.change_sets,
        decisions: scale.decisions,
        samples,
        pending_sets_of_task: Latency::of(&pending),
        recent_decisions_of_agent_for_task: Latency::of(&recent),
        render_history: Latency::of(&rendered),
        pending_sets_of_task_c_api: Latency::of(&pending_c),
        recent_decisions_of_agent_for_task_c_api: Latency::of(&recent_c),
        memory: Memory::now(),
    })
}

/// `change_sets::pending`'s SQL for a target (copied; `the_anchors_run_the_stores_sql`
/// checks the copy).
const PENDING_OF_TARGET: &str = "SELECT id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock FROM change_sets WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL AND target_kind = $1 AND target_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3";
/// `change_sets::with_items`' read of the items of the sets found.
const ITEMS_OF_SETS: &str = "SELECT change_set_id, tool_name, args, human_summary, status, before_value, fingerprint, stale_detail, approvals_needed, revision FROM change_items WHERE change_set_id IN ({}) ORDER BY change_set_id, item_index";
/// `decisions::recent`'s SQL for an agent and a target.
const RECENT_OF_AGENT_FOR_TARGET: &str = "SELECT id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason, edited_args, human_summary, args, created_at, vector_clock, decided_by FROM decisions WHERE agent_id = $1 AND target_kind = $2 AND target_id = $3
                 ORDER BY created_at DESC, rowid DESC LIMIT $4";

/// Every column of every row `rows` yields, as owned values (what a decode starts
/// from); the ids of the first column when `ids` is given.
fn read_all(
    mut rows: rusqlite::Rows<'_>,
    mut ids: Option<&mut Vec<String>>,
) -> anyhow::Result<usize> {
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let columns = row.as_ref().column_count();
        let values = (0..columns)
            .map(|i| row.get::<_, rusqlite::types::Value>(i))
            .collect::<Result<Vec<_>, _>>()?;
        if let (Some(ids), Some(rusqlite::types::Value::Text(id))) =
            (ids.as_deref_mut(), values.first())
        {
            ids.push(id.clone());
        }
        std::hint::black_box(values);
        count += 1;
    }
    Ok(count)
}

/// The open sets of `target` and their items, as `change_sets::pending` reads them.
fn pending_through_c_api(
    conn: &rusqlite::Connection,
    target: &assent_domain::Target,
) -> anyhow::Result<usize> {
    let mut sets = conn.prepare_cached(PENDING_OF_TARGET)?;
    let mut ids = Vec::new();
    let found = read_all(
        sets.query(rusqlite::params![target.kind, target.id, i64::MAX])?,
        Some(&mut ids),
    )?;
    if !ids.is_empty() {
        let params: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
        let sql = ITEMS_OF_SETS.replace("{}", &params.join(", "));
        let mut items = conn.prepare_cached(&sql)?;
        read_all(items.query(rusqlite::params_from_iter(&ids))?, None)?;
    }
    Ok(found)
}

/// `agent`'s recent decisions on `target`, as `decisions::recent` reads them.
fn recent_through_c_api(
    conn: &rusqlite::Connection,
    agent: &str,
    target: &assent_domain::Target,
) -> anyhow::Result<usize> {
    let mut recent = conn.prepare_cached(RECENT_OF_AGENT_FOR_TARGET)?;
    read_all(
        recent.query(rusqlite::params![
            agent,
            target.kind,
            target.id,
            MAX_HISTORY_ENTRIES as i64
        ])?,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The anchors run the store's own SQL: a copy that drifted would time another
    /// query.
    #[test]
    fn the_anchors_run_the_stores_sql() {
        let change_sets = include_str!("../../assent-store/src/change_sets.rs");
        let decisions = include_str!("../../assent-store/src/decisions.rs");
        let squeeze = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        // The store spells its SQL as `concat!` pieces: a column list macro
        // (`set_columns!`, `item_columns!`, `decision_columns!`), `open_sets!()` and the
        // rest of the statement.
        let (change_sets, decisions) = (squeeze(change_sets), squeeze(decisions));
        for (source, copy, pieces) in [
            (
                &change_sets,
                PENDING_OF_TARGET,
                &[
                    "SELECT ",
                    "id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock",
                    " FROM change_sets WHERE ",
                    "status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL",
                    " AND target_kind = $1 AND target_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3",
                ][..],
            ),
            (
                &change_sets,
                ITEMS_OF_SETS,
                &[
                    "SELECT ",
                    "change_set_id, tool_name, args, human_summary, status, before_value, fingerprint, stale_detail, approvals_needed, revision",
                    " FROM change_items WHERE change_set_id IN ({}) ORDER BY change_set_id, item_index",
                ],
            ),
            (
                &decisions,
                RECENT_OF_AGENT_FOR_TARGET,
                &[
                    "SELECT ",
                    "id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason, edited_args, human_summary, args, created_at, vector_clock, decided_by",
                    " FROM decisions WHERE agent_id = $1 AND target_kind = $2 AND target_id = $3 ORDER BY created_at DESC, rowid DESC LIMIT $4",
                ],
            ),
        ] {
            for piece in pieces {
                assert!(source.contains(&squeeze(piece)), "{piece}");
            }
            assert_eq!(squeeze(&pieces.concat()), squeeze(copy), "{copy}");
        }
    }
}
