//! `assent-bench`: one run, one report. Measures the engine against the physical limit
//! of this machine, side by side, and prints a table for people and writes
//! `target/bench/results.json` for machines.
//!
//! 1. wake planning (the pure core): tool calls planned per second, one core;
//! 2. wake persistence: change sets of 25 items written per second, against the bare
//!    driver writing the same rows;
//! 3. and 4. the confirmation path, end to end, against the bare driver writing the same
//!    rows, with the durability Assent ships (`synchronous = FULL`) and with `NORMAL`;
//! 5. queries at scale (p50/p99), as the history grows to the full data set;
//! 6. the process's peak memory while loading and querying;
//! 7. concurrent confirmations on one SQLite file (1, 2, 4, 8 writers), with and without
//!    group commit, and the WAL syncs (fsyncs) per decision;
//! 8. the MCP gateway's cost: an immediate call through it against the same call made
//!    directly to the upstream, over stdio (`mcpGateway`) and over Streamable HTTP
//!    (`mcpGatewayHttp`); skipped with a note when the fixture server is not built
//!    beside this binary;
//! 8. what the SQLite driver costs per statement (`drivers`): a point read and an insert
//!    in a transaction through sqlx's `Any` pool (the store today), a held `Any`
//!    connection, sqlx's native SQLite pool and connection, and rusqlite;
//! 9. LangGraph's interrupt/resume decisions per second with its SQLite checkpointer,
//!    installed from PyPI into `DIR/langgraph-venv` (`langgraph`; skipped with a note
//!    when Python, venv or pip fails, and in `--quick`), beside Assent's confirmations
//!    at `synchronous = FULL`.
//!
//! Shared 2-core machines drift from run to run, so the claims are ratios measured in
//! the same run; absolute figures describe this machine at this moment only.
//! `--quick` is a small run for CI: it asserts nothing about speed, only that every
//! measurement ran and measured something.
//!
//! Usage: `assent-bench [--quick] [--out DIR] [--only PART,...]` (default `DIR`: the
//! workspace's `target/bench`). `--only` runs some parts of the report (of `planning`,
//! `persistence`, `confirmation` (with confirm-all), `concurrent`, `postgres`, `gateway`, `queries`,
//! `drivers`, `langgraph`, `proof`) and judges no targets. `cargo xtask bench` runs it in the
//! release profile.

// A benchmark report is for a person at a terminal.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod baseline;
mod dataset;
mod drivers;
mod gateway;
mod langgraph;
mod measure;
mod postgres;
mod proof;
mod queries;
mod raw;
mod writes;

use anyhow::{Context, bail};
use assent_bench::{PlanningFixture, WAKE_CALLS};
use assent_store::Durability;
use measure::{Memory, median};
use std::path::Path;
use std::time::Instant;

/// How much work a run does.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    quick: bool,
    /// Timed samples of wake planning, each `planning_wakes` wakes.
    planning_samples: usize,
    planning_wakes: usize,
    rounds: usize,
    /// Change sets persisted per round and side.
    persisted_sets: usize,
    /// Change sets of 25 items confirmed per round and side.
    confirmed_sets: usize,
    scale: dataset::Scale,
    query_samples: usize,
    /// Immediate MCP calls timed per side (after as many again to warm up).
    gateway_calls: usize,
    /// Items each writer confirms in the concurrent-confirmation measurement.
    concurrent_items: usize,
    /// The SQLite drivers' statements.
    drivers: drivers::Counts,
    /// LangGraph resumes timed (0: not run).
    langgraph_decisions: usize,
    /// Audit records (each an entry of the consent chain) `audit verify` proves.
    proof_records: usize,
}

impl Config {
    const FULL: Self = Self {
        quick: false,
        planning_samples: 15,
        planning_wakes: 200,
        rounds: 7,
        persisted_sets: 60,
        confirmed_sets: 8,
        scale: dataset::Scale::new(100_000),
        query_samples: 2_000,
        gateway_calls: 1_000,
        concurrent_items: 25,
        drivers: drivers::Counts::FULL,
        langgraph_decisions: 2_000,
        proof_records: 1_000_000,
    };
    const QUICK: Self = Self {
        quick: true,
        planning_samples: 3,
        planning_wakes: 10,
        rounds: 1,
        persisted_sets: 10,
        confirmed_sets: 8,
        scale: dataset::Scale::new(1_000),
        query_samples: 100,
        gateway_calls: 20,
        concurrent_items: 5,
        drivers: drivers::Counts::QUICK,
        // PyPI is no dependency of CI's smoke run.
        langgraph_decisions: 0,
        proof_records: 2_000,
    };
}

/// Wake planning's figures.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Planning {
    calls_per_wake: usize,
    wake_us: f64,
    calls_per_second: f64,
    /// `calls_per_second ÷ 100,000` (the target).
    ratio_to_target: f64,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    commit: String,
    cores: usize,
    /// `/proc/loadavg` before and after the run: how busy the shared machine was.
    load_before: Option<String>,
    load_after: Option<String>,
    config: Config,
    /// The parts run when `--only` chose some (absent: all of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    only: Option<Vec<&'static str>>,
    // A part left out by `--only` is absent from results.json.
    #[serde(skip_serializing_if = "Option::is_none")]
    planning: Option<Planning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persistence: Option<writes::PairResult>,
    confirmation: Vec<writes::PairResult>,
    /// Confirm-all of 25-item sets, synchronous = FULL.
    #[serde(skip_serializing_if = "Option::is_none")]
    confirm_all: Option<writes::ConfirmAllResult>,
    /// 1, 2, 4 and 8 confirmations at once on one SQLite file, with and without group
    /// commit, with the WAL syncs per decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrent_confirmation: Option<writes::ConcurrentResult>,
    /// Concurrent writers on PostgreSQL; `None` when no server was given.
    postgres: Option<postgres::PostgresResult>,
    /// Why the PostgreSQL part did not run, when it did not.
    postgres_skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dataset_generated_now: Option<bool>,
    /// Memory once the data set was generated or found.
    memory_after_load: Option<Memory>,
    queries: Vec<queries::StageResult>,
    /// The MCP gateway's cost per immediate call over stdio; `None` when skipped.
    mcp_gateway: Option<gateway::GatewayResult>,
    /// The same over Streamable HTTP (`assent mcp --http`); `None` when skipped.
    mcp_gateway_http: Option<gateway::GatewayResult>,
    /// Why the gateway was not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp_gateway_skipped: Option<String>,
    /// What the SQLite driver costs per statement; `None` when left out by `--only`.
    #[serde(skip_serializing_if = "Option::is_none")]
    drivers: Option<drivers::DriversResult>,
    /// LangGraph's interrupt/resume decisions per second; `None` when skipped.
    langgraph: Option<langgraph::LangGraphResult>,
    /// Why LangGraph was not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    langgraph_skipped: Option<String>,
    /// What `audit verify` costs, beside `PRAGMA integrity_check`.
    #[serde(skip_serializing_if = "Option::is_none")]
    proof: Option<proof::ProofResult>,
    /// Judged only when every part ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    targets: Option<Targets>,
    seconds: f64,
}

/// The parts of the report, as `--only` names them.
const PARTS: &[&str] = &[
    "planning",
    "persistence",
    "confirmation",
    "concurrent",
    "postgres",
    "gateway",
    "queries",
    "drivers",
    "langgraph",
    "proof",
];

/// The parts a run does: all, or those `--only` named.
#[derive(Debug, Clone)]
struct Parts(Option<Vec<&'static str>>);

impl Parts {
    fn parse(list: &str) -> anyhow::Result<Self> {
        let mut parts = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some(part) = PARTS.iter().find(|p| **p == name) else {
                bail!("unknown part `{name}` (parts: {})", PARTS.join(", "));
            };
            parts.push(*part);
        }
        if parts.is_empty() {
            bail!("--only needs parts (of {})", PARTS.join(", "));
        }
        Ok(Self(Some(parts)))
    }

    fn has(&self, part: &str) -> bool {
        self.0.as_ref().is_none_or(|p| p.contains(&part))
    }
}

/// Where the run stands against the targets.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Targets {
    /// Confirmations ≥ 0.5 of the baseline, at every durability.
    confirmation_half_of_baseline: bool,
    /// A confirmation at FULL ≥ 0.5 of raw SQLite doing the same writes.
    confirmation_half_of_raw_sqlite: bool,
    /// A wake of 25 calls persisted ≥ 0.7 of raw SQLite doing the same writes.
    persistence_within_70_percent_of_raw_sqlite: bool,
    /// Confirm-all of a 25-item set at FULL ≥ 5,000 items per second.
    confirm_all_items_per_second: bool,
    /// SQLite, FULL: 8 concurrent confirmations of different sets ≥ 4x one's rate.
    eight_confirmations_four_times_one: bool,
    /// PostgreSQL: 8 writers on distinct targets ≥ 6x one writer (`None`: not run).
    postgres_eight_writers_six_times_one: Option<bool>,
    /// PostgreSQL: 8 concurrent wakes on distinct targets ≥ 6x one (`None`: not run).
    postgres_eight_wakes_six_times_one: Option<bool>,
    /// Wake planning ≥ 100,000 calls per second.
    planning_calls_per_second: bool,
    /// Every query's p99 ≤ 1 ms on the full data set.
    query_p99_within_1ms: bool,
    /// On the full data set, the pending and recent reads' p50 ≤ 1.5x the same reads
    /// through SQLite's C API in the same run (issue 42).
    query_p50_within_one_and_a_half_c_api: bool,
    /// Every query's p99 ≤ 250 µs on the full data set (issue 42).
    query_p99_within_250us: bool,
    /// The MCP gateway adds ≤ 1 ms at p50 to an immediate read-only call over stdio
    /// (`None`: not measured).
    gateway_adds_within_1ms_over_stdio: Option<bool>,
    /// The same over Streamable HTTP (issue 42).
    gateway_adds_within_1ms_over_http: Option<bool>,
    /// Resident memory after the full data set's queries ÷ after the first stage's.
    memory_growth: Option<f64>,
}

impl Targets {
    fn of(
        planning: &Planning,
        persistence: &writes::PairResult,
        confirmation: &[writes::PairResult],
        confirm_all: &writes::ConfirmAllResult,
        concurrent: &writes::ConcurrentResult,
        postgres: Option<&postgres::PostgresResult>,
        stages: &[queries::StageResult],
    ) -> Self {
        let full = stages.last();
        let p99s = full.map(|s| {
            [
                &s.pending_sets_of_task,
                &s.recent_decisions_of_agent_for_task,
                &s.render_history,
            ]
            .map(|l| l.p99_us)
        });
        let current = |s: Option<&queries::StageResult>| {
            s.and_then(|s| s.memory).map(|m| m.current_kib as f64)
        };
        Self {
            confirmation_half_of_baseline: confirmation.iter().all(|r| r.ratio >= 0.5),
            confirmation_half_of_raw_sqlite: confirmation
                .iter()
                .filter(|r| r.durability == Durability::Full.as_str())
                .all(|r| r.ratio_to_raw_sqlite >= 0.5),
            persistence_within_70_percent_of_raw_sqlite: persistence.ratio_to_raw_sqlite >= 0.7,
            confirm_all_items_per_second: confirm_all.items_per_second >= 5_000.0,
            eight_confirmations_four_times_one: concurrent.eight_writers_vs_one >= 4.0,
            postgres_eight_writers_six_times_one: postgres.and_then(|p| {
                let eight = p.writers.iter().find(|w| w.writers == 8)?;
                Some(eight.ratio_to_one_writer >= 6.0)
            }),
            postgres_eight_wakes_six_times_one: postgres.and_then(|p| {
                let eight = p.wake_writers.iter().find(|w| w.writers == 8)?;
                Some(eight.ratio_to_one_writer >= 6.0)
            }),
            planning_calls_per_second: planning.calls_per_second >= PLANNING_TARGET,
            query_p99_within_1ms: p99s.is_some_and(|p| p.iter().all(|&us| us <= 1_000.0)),
            query_p50_within_one_and_a_half_c_api: full
                .is_some_and(|s| s.pending_to_c_api() <= 1.5 && s.recent_to_c_api() <= 1.5),
            query_p99_within_250us: p99s.is_some_and(|p| p.iter().all(|&us| us <= 250.0)),
            gateway_adds_within_1ms_over_stdio: None,
            gateway_adds_within_1ms_over_http: None,
            memory_growth: current(full)
                .zip(current(stages.first()))
                .map(|(l, f)| l / f),
        }
    }
}

impl Targets {
    /// The same, judging the MCP gateway over stdio and over Streamable HTTP.
    fn with_gateway(mut self, [stdio, http]: [Option<&gateway::GatewayResult>; 2]) -> Self {
        self.gateway_adds_within_1ms_over_stdio = stdio.map(gateway::GatewayResult::within_target);
        self.gateway_adds_within_1ms_over_http = http.map(gateway::GatewayResult::within_target);
        self
    }
}

const PLANNING_TARGET: f64 = 100_000.0;

fn main() -> anyhow::Result<()> {
    let mut quick = false;
    let mut parts = Parts(None);
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let mut out = workspace.join("target/bench");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--out" => out = args.next().context("--out needs a directory")?.into(),
            "--only" => parts = Parts::parse(&args.next().context("--only needs parts")?)?,
            // `cargo test --benches`/`cargo bench` may pass this; it changes nothing.
            "--bench" => {}
            other => {
                bail!(
                    "unknown argument `{other}` (usage: assent-bench [--quick] [--out DIR] [--only PART,...]; parts: {})",
                    PARTS.join(", ")
                )
            }
        }
    }
    let config = if quick { Config::QUICK } else { Config::FULL };
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let report = runtime.block_on(run(config, &parts, &out, started))?;
    print_table(&report);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let json = out.join("results.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", json.display()))?;
    println!("wrote {}", json.display());
    Ok(())
}

async fn run(
    config: Config,
    parts: &Parts,
    out: &Path,
    started: Instant,
) -> anyhow::Result<Report> {
    const LEFT_OUT: &str = "not in --only";
    let load_before = load_average();
    let planning = if parts.has("planning") {
        eprintln!("wake planning ...");
        Some(planning(config)?)
    } else {
        None
    };
    let persistence = if parts.has("persistence") {
        eprintln!("wake persistence ...");
        Some(writes::persistence(Durability::Full, config.rounds, config.persisted_sets).await?)
    } else {
        None
    };
    let mut confirmation = Vec::new();
    let mut confirm_all = None;
    if parts.has("confirmation") {
        for durability in [Durability::Full, Durability::Normal] {
            eprintln!("confirmation, synchronous = {} ...", durability.as_str());
            confirmation.push(
                writes::confirmation(durability, config.rounds, config.confirmed_sets).await?,
            );
        }
        eprintln!("confirm-all, synchronous = FULL ...");
        confirm_all = Some(
            writes::confirm_all(Durability::Full, config.rounds, config.confirmed_sets).await?,
        );
    }
    let concurrent_confirmation = if parts.has("concurrent") {
        eprintln!("concurrent confirmations (group commit), synchronous = FULL ...");
        Some(
            writes::concurrent_confirmations(
                Durability::Full,
                config.rounds,
                config.concurrent_items,
            )
            .await?,
        )
    } else {
        None
    };
    let (postgres, postgres_skipped) = match std::env::var(postgres::URL_VAR) {
        _ if config.quick => (None, Some("--quick".to_owned())),
        _ if !parts.has("postgres") => (None, Some(LEFT_OUT.to_owned())),
        Ok(url) if !url.is_empty() => {
            eprintln!("PostgreSQL, 1 to 8 writers ...");
            (Some(postgres::writers(&url, 20).await?), None)
        }
        _ => (
            None,
            Some(format!(
                "{} is not set (`source .ci/postgres.sh` starts a server)",
                postgres::URL_VAR
            )),
        ),
    };
    let (mcp_gateway, mcp_gateway_http, mcp_gateway_skipped) = match gateway::fixture_beside_me() {
        _ if !parts.has("gateway") => (None, None, Some(LEFT_OUT.to_owned())),
        Some(fixture) => {
            let calls = config.gateway_calls;
            eprintln!("the MCP gateway against its upstream, over stdio ...");
            let stdio = gateway::measure(&fixture, calls, calls).await?;
            eprintln!("the MCP gateway against its upstream, over Streamable HTTP ...");
            let http = gateway::measure_http(&fixture, calls, calls).await?;
            (Some(stdio), Some(http), None)
        }
        None => (
            None,
            None,
            Some(
                "assent-mcp-fixture is not built beside assent-bench (cargo xtask bench builds it)"
                    .to_owned(),
            ),
        ),
    };
    let mut dataset_generated_now = None;
    let mut memory_after_load = None;
    let mut stages = Vec::new();
    if parts.has("queries") {
        let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/sqlite");
        let data = dataset::ensure(&out.join("data"), config.scale, &migrations).await?;
        dataset_generated_now = Some(data.generated);
        memory_after_load = Memory::now();
        for (percent, path) in &data.stages {
            eprintln!("queries at {percent} % of the history ...");
            let scale = config.scale.stage(*percent);
            stages.push(queries::measure(path, *percent, scale, config.query_samples).await?);
        }
    }
    let drivers = if parts.has("drivers") {
        eprintln!("SQLite drivers, per statement ...");
        Some(drivers::measure(config.drivers).await?)
    } else {
        None
    };
    let (langgraph, langgraph_skipped) = if config.langgraph_decisions == 0 {
        (None, Some("--quick".to_owned()))
    } else if !parts.has("langgraph") {
        (None, Some(LEFT_OUT.to_owned()))
    } else {
        eprintln!("LangGraph interrupt/resume (a virtual environment from PyPI) ...");
        match langgraph::measure(out, config.langgraph_decisions) {
            Ok(mut result) => {
                let full = confirmation
                    .iter()
                    .find(|r| r.durability == Durability::Full.as_str());
                result.assent_confirmations_per_second = full.map(|r| r.assent_per_second);
                result.ratio_assent_to_langgraph =
                    full.map(|r| r.assent_per_second / result.decisions_per_second);
                (Some(result), None)
            }
            Err(error) => {
                eprintln!("  LangGraph skipped: {error:#}");
                (None, Some(format!("{error:#}")))
            }
        }
    };
    let proof = if parts.has("proof") {
        eprintln!(
            "audit verify over {} chained audit records ...",
            config.proof_records
        );
        let dir = tempfile::tempdir()?;
        Some(proof::measure(dir.path(), config.proof_records).await?)
    } else {
        None
    };
    let targets = match (
        &planning,
        &persistence,
        &confirm_all,
        &concurrent_confirmation,
        parts.0.is_none(),
    ) {
        (Some(planning), Some(persistence), Some(confirm_all), Some(concurrent), true) => Some(
            Targets::of(
                planning,
                persistence,
                &confirmation,
                confirm_all,
                concurrent,
                postgres.as_ref(),
                &stages,
            )
            .with_gateway([mcp_gateway.as_ref(), mcp_gateway_http.as_ref()]),
        ),
        _ => None,
    };
    Ok(Report {
        commit: commit(),
        cores: std::thread::available_parallelism().map_or(1, usize::from),
        load_before,
        load_after: load_average(),
        config,
        only: parts.0.clone(),
        planning,
        persistence,
        confirmation,
        confirm_all,
        concurrent_confirmation,
        postgres,
        postgres_skipped,
        dataset_generated_now,
        memory_after_load,
        queries: stages,
        mcp_gateway,
        mcp_gateway_http,
        mcp_gateway_skipped,
        drivers,
        langgraph,
        langgraph_skipped,
        proof,
        targets,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn planning(config: Config) -> anyhow::Result<Planning> {
    let fixture = PlanningFixture::new();
    let expected = fixture.plan_counted()?;
    if expected.calls != WAKE_CALLS || expected.queued == 0 {
        bail!("the planning fixture planned {expected:?}");
    }
    let mut samples = Vec::with_capacity(config.planning_samples);
    for _ in 0..=config.planning_samples {
        let start = Instant::now();
        for _ in 0..config.planning_wakes {
            std::hint::black_box(fixture.plan()?);
        }
        samples.push(start.elapsed() / config.planning_wakes as u32);
    }
    // The first sample warms the caches.
    samples.remove(0);
    let wake = median(&samples);
    let calls_per_second = WAKE_CALLS as f64 / wake.as_secs_f64();
    Ok(Planning {
        calls_per_wake: WAKE_CALLS,
        wake_us: measure::micros(wake),
        calls_per_second,
        ratio_to_target: calls_per_second / PLANNING_TARGET,
    })
}

/// The 1, 5 and 15 minute load averages (Linux).
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The commit measured (`git rev-parse HEAD`), or `unknown` outside a repository.
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned())
}

fn kib(memory: Option<Memory>) -> String {
    memory.map_or_else(
        || "n/a".to_owned(),
        |m| {
            format!(
                "peak {:.1} MiB, now {:.1} MiB",
                m.peak_kib as f64 / 1024.0,
                m.current_kib as f64 / 1024.0
            )
        },
    )
}

fn print_table(report: &Report) {
    let quick = if report.config.quick {
        " (--quick: a smoke run, not a measurement)"
    } else {
        ""
    };
    println!();
    println!(
        "Assent benchmarks at {} on {} core(s){quick}",
        &report.commit[..report.commit.len().min(12)],
        report.cores
    );
    if let Some(only) = &report.only {
        println!("only: {}", only.join(", "));
    }
    if let Some(p) = &report.planning {
        println!();
        println!(
            "{:<44} {:>12.0} calls/s  {:>6.2}x the target (100,000)  ({:.1} µs per wake of {})",
            "wake planning, one core",
            p.calls_per_second,
            p.ratio_to_target,
            p.wake_us,
            p.calls_per_wake
        );
    }
    if report.persistence.is_some() || !report.confirmation.is_empty() {
        print_writes(report);
    }
    if let Some(c) = &report.concurrent_confirmation {
        println!();
        for (grouped, alone) in c.with_group_commit.iter().zip(&c.without_group_commit) {
            println!(
                "{:<40} {:>9.0} confirmations/s, {:.2} fsyncs per decision; without group commit {:.0}/s",
                format!(
                    "SQLite, {} concurrent confirmation(s), sync {}",
                    grouped.writers, c.durability
                ),
                grouped.confirmations_per_second,
                grouped.fsyncs_per_decision.unwrap_or(f64::NAN),
                alone.confirmations_per_second,
            );
        }
    }
    match (&report.postgres, &report.postgres_skipped) {
        (Some(p), _) => {
            println!();
            for w in &p.writers {
                println!(
                    "{:<40} {:>9.0} confirmations/s  {:>5.2}x one writer",
                    format!(
                        "PostgreSQL, {} writer(s), {} ms handler",
                        w.writers, p.handler_ms
                    ),
                    w.confirmations_per_second,
                    w.ratio_to_one_writer
                );
            }
            for w in &p.wake_writers {
                println!(
                    "{:<40} {:>9.0} wakes/s          {:>5.2}x one writer",
                    format!("PostgreSQL, {} concurrent wake(s)", w.writers),
                    w.wakes_per_second,
                    w.ratio_to_one_writer
                );
            }
        }
        (None, why) => println!(
            "PostgreSQL writers skipped: {}",
            why.as_deref().unwrap_or("no server")
        ),
    }
    if let Some(generated) = report.dataset_generated_now {
        println!();
        println!(
            "{:<24} {:>18} {:>18} {:>18} {:>22}  memory after the stage",
            "queries, p50 / p99 µs",
            "pending of task",
            "recent 20 (agent)",
            "history section",
            "p50 ÷ C API (pend/rec)"
        );
        for s in &report.queries {
            let l = |l: &queries::Latency| format!("{:.0} / {:.0}", l.p50_us, l.p99_us);
            println!(
                "{:<24} {:>18} {:>18} {:>18} {:>22}  {}",
                format!("{} sets, {} decisions", s.change_sets, s.decisions),
                l(&s.pending_sets_of_task),
                l(&s.recent_decisions_of_agent_for_task),
                l(&s.render_history),
                format!("{:.2} / {:.2}", s.pending_to_c_api(), s.recent_to_c_api()),
                kib(s.memory)
            );
        }
        println!(
            "data set {}; memory once loaded: {}",
            if generated {
                "generated now"
            } else {
                "from the cache"
            },
            kib(report.memory_after_load)
        );
    }
    let met = |ok: bool| match (report.config.quick, ok) {
        // A dev-profile smoke run says nothing about the targets.
        (true, _) => "not judged (--quick)",
        (false, true) => "met",
        (false, false) => "missed",
    };
    let gateways: Vec<_> = [&report.mcp_gateway, &report.mcp_gateway_http]
        .into_iter()
        .flatten()
        .collect();
    for g in &gateways {
        println!(
            "MCP gateway, immediate call over {} ({} calls each, gateway database at synchronous = {}): direct p50 {:.0} µs p99 {:.0} µs; through the gateway p50 {:.0} µs p99 {:.0} µs; added p50 {:.0} µs (target ≤ {:.0} µs: {}), p99 {:.0} µs",
            g.over,
            g.calls,
            g.synchronous,
            g.direct_p50_us,
            g.direct_p99_us,
            g.gateway_p50_us,
            g.gateway_p99_us,
            g.added_p50_us,
            gateway::ADDED_P50_TARGET_US,
            met(g.within_target()),
            g.added_p99_us,
        );
    }
    if gateways.is_empty() {
        println!(
            "MCP gateway: not measured ({})",
            report.mcp_gateway_skipped.as_deref().unwrap_or("skipped")
        );
    }
    if let Some(d) = &report.drivers {
        print_drivers(d, met);
    }
    print_langgraph(report);
    if let Some(p) = &report.proof {
        println!();
        println!(
            "{:<40} {:>9.0} entries/s ({} entries in {:.2} s; PRAGMA integrity_check on the same file {:.2} s: {:.1}x its time)",
            "audit verify, the consent chain",
            p.entries_per_second,
            p.entries,
            p.verify_seconds,
            p.integrity_check_seconds,
            p.ratio_to_integrity_check,
        );
        println!(
            "{:<40} {:>9.3} s ({} new entries on top of {} verified; target < 1 s)",
            "audit verify, incremental", p.incremental_verify_seconds, p.new_entries, p.entries,
        );
    }
    if let Some(t) = &report.targets {
        println!(
            "targets: confirmation ≥ 0.50 of raw SQLite {}; wake ≥ 0.70 of raw SQLite {}; confirm-all ≥ 5,000 items/s {}; SQLite 8 concurrent confirmations ≥ 4x one {}; PostgreSQL 8 writers ≥ 6x one {}, 8 wakes ≥ 6x one {}; confirmation ≥ 0.50 of sqlx {}; planning ≥ 100,000 calls/s {}; query p99 ≤ 1 ms {}; query p50 ≤ 1.5x the C API {}, p99 ≤ 250 µs {}; MCP gateway adds ≤ 1 ms at p50 over stdio {}, over Streamable HTTP {}; memory 10 % → 100 %: {}",
            met(t.confirmation_half_of_raw_sqlite),
            met(t.persistence_within_70_percent_of_raw_sqlite),
            met(t.confirm_all_items_per_second),
            met(t.eight_confirmations_four_times_one),
            t.postgres_eight_writers_six_times_one
                .map_or("not run", met),
            t.postgres_eight_wakes_six_times_one.map_or("not run", met),
            met(t.confirmation_half_of_baseline),
            met(t.planning_calls_per_second),
            met(t.query_p99_within_1ms),
            met(t.query_p50_within_one_and_a_half_c_api),
            met(t.query_p99_within_250us),
            t.gateway_adds_within_1ms_over_stdio.map_or("not run", met),
            t.gateway_adds_within_1ms_over_http.map_or("not run", met),
            t.memory_growth
                .map_or_else(|| "n/a".to_owned(), |g| format!("{g:.2}x")),
        );
    }
    println!(
        "({:.0} s in all; load average {} before, {} after; absolute figures describe this machine now, the ratios are the result)",
        report.seconds,
        report.load_before.as_deref().unwrap_or("n/a"),
        report.load_after.as_deref().unwrap_or("n/a"),
    );
}

/// The write paths against sqlx and raw SQLite.
fn print_writes(report: &Report) {
    println!();
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>18} {:>18}",
        "per second (median of rounds)",
        "assent",
        "sqlx",
        "raw",
        "assent/sqlx",
        "assent/raw SQLite"
    );
    let pair = |name: String, r: &writes::PairResult| {
        println!(
            "{name:<40} {:>9.0} {:>9.0} {:>9.0} {:>5.2} ({:.2}–{:.2}) {:>5.2} ({:.2}–{:.2})",
            r.assent_per_second,
            r.baseline_per_second,
            r.raw_sqlite_per_second,
            r.ratio,
            r.ratio_q1,
            r.ratio_q3,
            r.ratio_to_raw_sqlite,
            r.ratio_to_raw_sqlite_q1,
            r.ratio_to_raw_sqlite_q3
        );
    };
    if let Some(p) = &report.persistence {
        pair(
            format!("wake persisted (25 items), sync {}", p.durability),
            p,
        );
    }
    for r in &report.confirmation {
        pair(format!("item confirmed, sync {}", r.durability), r);
    }
    if let Some(c) = &report.confirm_all {
        println!(
            "{:<40} {:>9.0} {:>9} {:>9.0} {:>18} {:>5.2}",
            format!(
                "items, confirm-all of {}, sync {}",
                c.items_per_set, c.durability
            ),
            c.items_per_second,
            "",
            c.raw_sqlite_items_per_second,
            "",
            c.ratio_to_raw_sqlite
        );
    }
    println!(
        "(ratio: median over {} round(s), quartiles in brackets; raw: rusqlite, prepared statements, the same rows and bytes)",
        report.config.rounds
    );
}

/// The SQLite drivers, per statement, and the read target.
fn print_drivers(d: &drivers::DriversResult, met: impl Fn(bool) -> &'static str) {
    let c = &d.counts;
    println!();
    println!(
        "{:<40} {:>26} {:>34}",
        "SQLite driver, per statement",
        format!("point read ({} rows)", c.rows),
        format!("insert, {} per transaction", c.inserts_per_transaction),
    );
    println!(
        "{:<40} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>8}",
        format!(
            "(journal {}, synchronous {})",
            d.journal_mode, d.synchronous
        ),
        "p50 µs",
        "p99 µs",
        "per s",
        "p50 µs",
        "p99 µs",
        "per s",
        "÷ raw"
    );
    let raw = drivers::DriversResult::of(&d.insert_in_transaction, "rusqlite");
    for (read, insert) in d.point_read.iter().zip(&d.insert_in_transaction) {
        println!(
            "{:<40} {:>8.1} {:>8.1} {:>9.0} {:>8.1} {:>8.1} {:>9.0} {:>8.2}",
            drivers::label(read.driver),
            read.p50_us,
            read.p99_us,
            read.per_second,
            insert.p50_us,
            insert.p99_us,
            insert.per_second,
            raw.map_or(f64::NAN, |r| r.per_second / insert.per_second),
        );
    }
    let store = drivers::DriversResult::of(&d.point_read, "anyPool");
    let native = drivers::DriversResult::of(&d.point_read, "sqlitePool");
    let judge = |r: Option<&drivers::DriverLatency>| {
        r.map_or("n/a", |r| met(r.p50_us <= READ_P50_TARGET_US))
    };
    println!(
        "(reads: {} per driver over {} round(s), the drivers taking turns; inserts: {} per driver; ÷ raw: rusqlite's inserts/s ÷ the driver's) read p50 ≤ 50 µs: AnyPool {}, SqlitePool {}",
        c.reads * c.rounds,
        c.rounds,
        c.transactions * c.inserts_per_transaction * c.rounds,
        judge(store),
        judge(native),
    );
}

/// The target for a read's p50, in µs.
const READ_P50_TARGET_US: f64 = 50.0;

/// LangGraph's decisions beside Assent's confirmations at FULL.
fn print_langgraph(report: &Report) {
    println!();
    match (&report.langgraph, &report.langgraph_skipped) {
        (Some(l), _) => {
            println!(
                "{:<40} {:>9.0} decisions/s (resume p50 {:.0} µs, p99 {:.0} µs; {} decisions; LangGraph {}, SqliteSaver {}, SQLite {}: journal {}, synchronous {}, durability \"{}\")",
                "LangGraph interrupt/resume, SqliteSaver",
                l.decisions_per_second,
                l.resume_p50_us,
                l.resume_p99_us,
                l.decisions,
                l.langgraph_version,
                l.checkpoint_sqlite_version,
                l.sqlite_version,
                l.journal_mode,
                l.synchronous,
                l.durability,
            );
            match (
                l.assent_confirmations_per_second,
                l.ratio_assent_to_langgraph,
            ) {
                (Some(assent), Some(ratio)) => println!(
                    "{:<40} {:>9.0} confirmations/s  {ratio:.2}x LangGraph",
                    "Assent item confirmed, sync FULL", assent
                ),
                _ => println!("Assent's confirmations did not run: no ratio"),
            }
        }
        (None, why) => println!(
            "LangGraph: not measured ({})",
            why.as_deref().unwrap_or("skipped")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_short_duration_is_many_operations_per_second() {
        assert_eq!(measure::per_second(Duration::from_millis(2)), 500.0);
    }
}
