//! The reads a reviewer and an agent wake make, at scale, through the real store
//! functions: "pending sets of a task" (`change_sets::pending`), "recent 20 decisions
//! of an agent for a task" (`decisions::recent`) and the decision-history prompt
//! section (`ConfirmationService::history`, which reads and renders).

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
    /// The process's memory after this stage's queries.
    pub memory: Option<Memory>,
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
    let mut conn = store.pool().acquire().await?;
    let mut picks = Picks(percent as u64);
    let warmup = samples / 10;
    let (mut pending, mut recent, mut rendered) = (Vec::new(), Vec::new(), Vec::new());
    let (mut open_sets, mut full_histories) = (0, 0);
    for n in 0..warmup + samples {
        let target = assent_journal_host::task_target(dataset::task_id(picks.next(scale.tasks())));
        let agent = dataset::agent_id(picks.next(AGENTS));
        let filter = PendingFilter {
            target: Some(target.clone()),
            ..PendingFilter::default()
        };

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
        memory: Memory::now(),
    })
}
