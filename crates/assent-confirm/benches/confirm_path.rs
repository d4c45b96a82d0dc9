//! Benchmark: what Assent's bookkeeping costs on the durable write path, as a ratio to
//! raw SQLite doing the writes a hand-rolled implementation minimally must do.
//!
//! Two pairs, each side on its own fresh temporary database opened by
//! `assent_store::Store` (so the same migrated schema and the same durability: WAL,
//! `synchronous = FULL`, foreign keys), run side by side in every round:
//!
//! 1. **confirm one item.** Assent: wakes queue `add_checklist_item` proposals (≤ 25 per
//!    set), then `ConfirmationService::confirm_item` confirms each, one after another.
//!    Raw: per item one `BEGIN IMMEDIATE` transaction that inserts the checklist row,
//!    updates the task row, inserts the decision, updates the item's status, inserts
//!    the action and result audit records, and one outbox row per write (six).
//! 2. **wake with 25 deferred calls.** Assent: `WakeService::wake` with 25
//!    `add_checklist_item` calls on a fresh task. Raw: one transaction inserting the
//!    change set, its 25 items and one outbox row carrying the set with its items
//!    (Assent, too, replicates a new set as one message; an outbox row per insert
//!    would make the raw side the slower one).
//!
//! Assent's confirmation loads the task (with its whole checklist) and replicates its
//! full state, so its cost grows with the checklist: the ratio of pair 1 depends on
//! how many items the task already has (25 to 225 here).
//!
//! Absolute times on a shared machine are noise; the ratio `assent / raw`, measured
//! in the same run on the same disk, is the result. Each round opens both sides and
//! alternates their operations one by one, so both run under the same load; it times
//! every operation on its own and keeps each side's median. The table shows each
//! side's median over rounds, the median of the per-round ratios, and their middle
//! half (quartiles). Whole rounds can be off: on a busy machine one side's database
//! (its connection's worker thread) is now and then slower by a millisecond per
//! operation for a round, which is why there are many short rounds on fresh
//! databases rather than one long one.
//!
//! Run with `cargo xtask bench` (or `cargo bench -p assent-confirm --bench
//! confirm_path`). `ASSENT_BENCH_QUICK=1`, or running the binary without `--bench`
//! (as `cargo test --benches` does), makes a short smoke run.

// A benchmark reports on stdout: printing the table is its job.
#![allow(clippy::print_stdout)]

use assent_changeset::{DEFAULT_MAX_ITEMS_PER_SET, PlannerConfig, ToolArguments, ToolCall};
use assent_confirm::{Engine, WakeRequest};
use assent_domain::Uuid;
use assent_journal::tool;
use assent_journal_host::{JournalHost, NewTask, create_task};
use assent_store::{ExecutionOutcome, Store, StoreOptions, timefmt};
use assent_tools::AgentPolicy;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use time::OffsetDateTime;
use time::macros::datetime;

/// The fixed clock of the benchmark.
const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);
const HOST: &str = "device-a";
const AGENT: &str = "agent-1";

/// How much work a run does.
#[derive(Debug, Clone, Copy)]
struct Config {
    rounds: usize,
    /// Items confirmed untimed before the timed ones, per round and side.
    warmup_items: usize,
    /// Items confirmed and timed, per round and side.
    items: usize,
    /// Wakes run untimed before the timed ones, per round and side.
    warmup_wakes: usize,
    /// Wakes run and timed, per round and side.
    wakes: usize,
}

impl Config {
    const FULL: Self = Self {
        rounds: 11,
        warmup_items: 25,
        items: 200,
        warmup_wakes: 5,
        wakes: 30,
    };
    const QUICK: Self = Self {
        rounds: 1,
        warmup_items: 5,
        items: 25,
        warmup_wakes: 1,
        wakes: 3,
    };

    fn from_env() -> Self {
        let quick = std::env::var("ASSENT_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
        let benching = std::env::args().any(|a| a == "--bench");
        if quick || !benching {
            Self::QUICK
        } else {
            Self::FULL
        }
    }
}

/// A fresh database in its own directory (deleted on drop), with the benchmark's agent.
struct Db {
    _dir: TempDir,
    store: Store,
}

impl Db {
    async fn open() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}/bench.db", dir.path().display());
        let store = Store::open_with(StoreOptions {
            host_id: HOST.into(),
            ..StoreOptions::new(url)
        })
        .await
        .expect("store opens");
        let mut tx = store.begin_write().await.expect("begin");
        assent_store::agents::upsert(&mut tx, AGENT, &AgentPolicy::new(["work"]), NOW)
            .await
            .expect("agent");
        tx.commit().await.expect("commit");
        Self { _dir: dir, store }
    }

    async fn task(&self, title: &str) -> String {
        let id = Uuid::new_v4().to_string();
        let mut tx = self.store.begin_write().await.expect("begin");
        let new = NewTask {
            title: title.into(),
            category: Some("work".into()),
            ..NewTask::default()
        };
        create_task(&mut tx, &id, &new, HOST, NOW)
            .await
            .expect("task");
        tx.commit().await.expect("commit");
        id
    }

    fn engine(&self) -> Engine {
        Engine::new(
            self.store.clone(),
            Arc::new(assent_journal::catalog()),
            Arc::new(JournalHost::new(HOST)),
        )
    }

    async fn count(&self, table: &'static str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(self.store.pool())
            .await
            .expect("count")
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// The quartiles (25 %, 50 %, 75 %) of `values`.
fn quartiles(mut values: Vec<f64>) -> [f64; 3] {
    assert!(!values.is_empty(), "no values");
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len();
    [values[n / 4], values[n / 2], values[(3 * n) / 4]]
}

fn titles(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix} step {i}")).collect()
}

fn wake_request(task_id: &str, calls: Vec<ToolCall>) -> WakeRequest {
    let run = Uuid::new_v4().to_string();
    WakeRequest {
        agent_id: AGENT.into(),
        task_id: task_id.into(),
        thread_id: run.clone(),
        run_key: run,
        calls,
        change_set_id: Uuid::new_v4(),
        planner: PlannerConfig::default(),
        max_items: DEFAULT_MAX_ITEMS_PER_SET,
    }
}

/// 25 single `add_checklist_item` calls, OpenAI style.
fn single_calls(titles: &[String]) -> Vec<ToolCall> {
    titles
        .iter()
        .enumerate()
        .map(|(i, title)| ToolCall {
            id: format!("call_{i}"),
            name: tool::ADD_CHECKLIST_ITEM.into(),
            arguments: ToolArguments::Text(json!({ "title": title }).to_string()),
        })
        .collect()
}

/// Pair 1, Assent: queues `n` `add_checklist_item` proposals on a fresh task, in
/// wakes of at most 25.
async fn assent_queue(db: &Db, engine: &Engine, n: usize) -> Vec<(Uuid, usize)> {
    let task = db.task("Plan the release").await;
    let mut queued = Vec::with_capacity(n);
    for chunk in titles("assent", n).chunks(DEFAULT_MAX_ITEMS_PER_SET) {
        let items: Vec<_> = chunk.iter().map(|t| json!({ "title": t })).collect();
        let call = ToolCall {
            id: "call_0".into(),
            name: tool::ADD_MULTIPLE_CHECKLIST_ITEMS.into(),
            arguments: ToolArguments::Text(json!({ "items": items }).to_string()),
        };
        let outcome = engine
            .wakes()
            .wake(wake_request(&task, vec![call]), NOW)
            .await
            .expect("wake");
        let set = outcome.change_set.expect("items queued");
        assert_eq!(set.items.len(), chunk.len(), "every proposal queued");
        queued.extend((0..set.items.len()).map(|index| (set.id, index)));
    }
    queued
}

/// Pair 1, Assent: one timed confirmation.
async fn assent_confirm(engine: &Engine, (set, index): (Uuid, usize)) -> Duration {
    let start = Instant::now();
    let outcome = engine
        .confirmations()
        .confirm_item(set, index, NOW)
        .await
        .expect("confirms");
    let elapsed = start.elapsed();
    assert!(
        matches!(
            outcome.execution,
            ExecutionOutcome::Applied { mutated: true, .. }
        ),
        "{:?}",
        outcome.execution
    );
    elapsed
}

/// Pair 1, raw: the same change sets as rows, on a fresh task.
async fn raw_queue(db: &Db, n: usize) -> (String, Vec<(String, usize, String)>) {
    let task = db.task("Plan the release").await;
    let mut queued = Vec::with_capacity(n);
    for chunk in titles("raw", n).chunks(DEFAULT_MAX_ITEMS_PER_SET) {
        let set = Uuid::new_v4().to_string();
        let mut tx = db.store.begin_write().await.expect("begin");
        insert_set(&mut tx, &set, &task, chunk).await;
        tx.commit().await.expect("commit");
        queued.extend(
            chunk
                .iter()
                .enumerate()
                .map(|(i, t)| (set.clone(), i, t.clone())),
        );
    }
    (task, queued)
}

/// Pair 1: both sides on fresh databases, confirming item after item alternately,
/// so both run under the same load. Returns the median of each side.
async fn confirm_round(config: Config) -> (Duration, Duration) {
    let total = config.warmup_items + config.items;
    let (assent_db, raw_db) = (Db::open().await, Db::open().await);
    let engine = assent_db.engine();
    let assent_items = assent_queue(&assent_db, &engine, total).await;
    let (task, raw_items) = raw_queue(&raw_db, total).await;
    let now = timefmt::format(NOW);
    let run_key = Uuid::new_v4().to_string();
    let (mut assent, mut raw) = (Vec::new(), Vec::new());
    for (n, (&assent_item, (set, index, title))) in assent_items.iter().zip(&raw_items).enumerate()
    {
        let raw_item = RawItem {
            task: &task,
            set,
            index: *index,
            title,
            run_key: &run_key,
            clock: n + 2,
            now: &now,
        };
        let (a, r) = if n % 2 == 0 {
            let a = assent_confirm(&engine, assent_item).await;
            (a, raw_confirm(&raw_db.store, raw_item).await)
        } else {
            let r = raw_confirm(&raw_db.store, raw_item).await;
            (assent_confirm(&engine, assent_item).await, r)
        };
        if n >= config.warmup_items {
            assent.push(a);
            raw.push(r);
        }
    }
    assert_eq!(
        assent_db.count("checklist_items").await,
        raw_db.count("checklist_items").await,
        "both sides added the same checklist items"
    );
    (median(assent), median(raw))
}

const ENQUEUE: &str =
    "INSERT INTO outbox (entity_type, entity_id, payload, status, attempts, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4)
     ON CONFLICT (entity_type, entity_id) WHERE status = 'pending'
     DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at";

async fn enqueue(
    conn: &mut sqlx::SqliteConnection,
    entity_type: &str,
    entity_id: &str,
    payload: serde_json::Value,
    now: &str,
) {
    sqlx::query(ENQUEUE)
        .bind(entity_type)
        .bind(entity_id)
        .bind(payload.to_string())
        .bind(now)
        .execute(conn)
        .await
        .expect("outbox row");
}

/// Raw rows of one change set with an `add_checklist_item` item per title, and one
/// outbox row carrying the set with its items (as Assent replicates a new set).
async fn insert_set(conn: &mut sqlx::SqliteConnection, set: &str, task: &str, titles: &[String]) {
    let now = timefmt::format(NOW);
    let run = Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO change_sets (id, agent_id, task_id, thread_id, run_key, status, created_at, vector_clock)
         VALUES (?1, ?2, ?3, ?4, ?4, 'pending', ?5, '{}')",
    )
    .bind(set)
    .bind(AGENT)
    .bind(task)
    .bind(&run)
    .bind(&now)
    .execute(&mut *conn)
    .await
    .expect("set row");
    let mut items = Vec::with_capacity(titles.len());
    for (index, title) in titles.iter().enumerate() {
        let args = json!({ "title": title });
        let summary = format!("Add checklist item \"{title}\"");
        sqlx::query(
            "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status)
             VALUES (?1, ?2, 'add_checklist_item', ?3, ?4, 'pending')",
        )
        .bind(set)
        .bind(index as i64)
        .bind(args.to_string())
        .bind(&summary)
        .execute(&mut *conn)
        .await
        .expect("item row");
        items.push(json!({"toolName": "add_checklist_item", "args": args,
            "humanSummary": summary, "status": "pending"}));
    }
    let payload = json!({"id": set, "agentId": AGENT, "taskId": task, "threadId": run,
        "runKey": run, "status": "pending", "items": items, "createdAt": now});
    enqueue(conn, "changeSet", set, payload, &now).await;
}

/// One queued item of the raw side, and what its confirmation writes alongside.
struct RawItem<'a> {
    task: &'a str,
    set: &'a str,
    index: usize,
    title: &'a str,
    run_key: &'a str,
    /// The task's clock after this confirmation.
    clock: usize,
    now: &'a str,
}

/// The writes of one confirmation, by hand: checklist row, task row, decision, item
/// status, two audit records, and an outbox row for each of the six.
async fn raw_confirm(store: &Store, item: RawItem<'_>) -> Duration {
    let RawItem {
        task,
        set,
        index,
        title,
        run_key,
        clock,
        now,
    } = item;
    let start = Instant::now();
    let mut tx = store.begin_write().await.expect("begin");
    let args = json!({ "title": title }).to_string();
    let item_id = Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO checklist_items (id, task_id, position, title, is_checked)
         VALUES (?1, ?2, (SELECT COALESCE(MAX(position) + 1, 0) FROM checklist_items WHERE task_id = ?2), ?3, 0)",
    )
    .bind(&item_id)
    .bind(task)
    .bind(title)
    .execute(&mut *tx)
    .await
    .expect("checklist row");
    enqueue(
        &mut tx,
        "checklistItem",
        &item_id,
        json!({"id": item_id, "taskId": task, "title": title, "isChecked": false}),
        now,
    )
    .await;
    let clock = json!({ HOST: clock }).to_string();
    sqlx::query("UPDATE tasks SET vector_clock = ?1, updated_at = ?2 WHERE id = ?3")
        .bind(&clock)
        .bind(now)
        .bind(task)
        .execute(&mut *tx)
        .await
        .expect("task row");
    enqueue(
        &mut tx,
        "task",
        task,
        json!({"id": task, "vectorClock": clock, "updatedAt": now}),
        now,
    )
    .await;
    let decision = Uuid::new_v4().to_string();
    let summary = format!("Add checklist item \"{title}\"");
    sqlx::query(
        "INSERT INTO decisions (id, change_set_id, item_index, agent_id, task_id, tool_name, verdict,
                                human_summary, args, created_at, vector_clock)
         VALUES (?1, ?2, ?3, ?4, ?5, 'add_checklist_item', 'confirmed', ?6, ?7, ?8, ?9)",
    )
    .bind(&decision)
    .bind(set)
    .bind(index as i64)
    .bind(AGENT)
    .bind(task)
    .bind(&summary)
    .bind(&args)
    .bind(now)
    .bind(&clock)
    .execute(&mut *tx)
    .await
    .expect("decision row");
    enqueue(
        &mut tx,
        "changeDecision",
        &decision,
        json!({"id": decision, "changeSetId": set, "itemIndex": index, "verdict": "confirmed",
            "humanSummary": summary, "args": args, "createdAt": now}),
        now,
    )
    .await;
    sqlx::query(
        "UPDATE change_items SET status = 'confirmed' WHERE change_set_id = ?1 AND item_index = ?2",
    )
    .bind(set)
    .bind(index as i64)
    .execute(&mut *tx)
    .await
    .expect("item status");
    enqueue(
        &mut tx,
        "changeItem",
        &format!("{set}:{index}"),
        json!({"changeSetId": set, "itemIndex": index, "status": "confirmed"}),
        now,
    )
    .await;
    let operation = Uuid::new_v4().to_string();
    for (kind, success, detail) in [
        ("action", None, None),
        ("result", Some(true), Some("Checklist item added.")),
    ] {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO audit_records (operation_id, run_key, tool_name, agent_id, task_id, kind, args,
                                        success, detail, created_at)
             VALUES (?1, ?2, 'add_checklist_item', ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id",
        )
        .bind(&operation)
        .bind(run_key)
        .bind(AGENT)
        .bind(task)
        .bind(kind)
        .bind(&args)
        .bind(success)
        .bind(detail)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .expect("audit row");
        enqueue(
            &mut tx,
            "auditRecord",
            &id.to_string(),
            json!({"operationId": operation, "kind": kind, "args": args, "success": success,
                "detail": detail, "createdAt": now}),
            now,
        )
        .await;
    }
    tx.commit().await.expect("commit");
    start.elapsed()
}

/// Pair 2, Assent: one timed wake of 25 `add_checklist_item` calls on a fresh task
/// (so every wake plans against the same state).
async fn assent_wake(db: &Db, engine: &Engine, n: usize) -> Duration {
    let task = db.task(&format!("Task {n}")).await;
    let calls = single_calls(&titles("wake", DEFAULT_MAX_ITEMS_PER_SET));
    let request = wake_request(&task, calls);
    let start = Instant::now();
    let outcome = engine.wakes().wake(request, NOW).await.expect("wake");
    let elapsed = start.elapsed();
    let queued = outcome.change_set.map_or(0, |s| s.items.len());
    assert_eq!(queued, DEFAULT_MAX_ITEMS_PER_SET, "every call queued");
    elapsed
}

/// Pair 2, raw: one timed transaction inserting a set, its items and its outbox row.
async fn raw_wake(db: &Db, n: usize) -> Duration {
    let task = db.task(&format!("Task {n}")).await;
    let titles = titles("wake", DEFAULT_MAX_ITEMS_PER_SET);
    let start = Instant::now();
    let set = Uuid::new_v4().to_string();
    let mut tx = db.store.begin_write().await.expect("begin");
    insert_set(&mut tx, &set, &task, &titles).await;
    tx.commit().await.expect("commit");
    start.elapsed()
}

/// Pair 2: both sides on fresh databases, waking alternately. Returns the median of
/// each side.
async fn wake_round(config: Config) -> (Duration, Duration) {
    let (assent_db, raw_db) = (Db::open().await, Db::open().await);
    let engine = assent_db.engine();
    let (mut assent, mut raw) = (Vec::new(), Vec::new());
    for n in 0..config.warmup_wakes + config.wakes {
        let (a, r) = if n % 2 == 0 {
            let a = assent_wake(&assent_db, &engine, n).await;
            (a, raw_wake(&raw_db, n).await)
        } else {
            let r = raw_wake(&raw_db, n).await;
            (assent_wake(&assent_db, &engine, n).await, r)
        };
        if n >= config.warmup_wakes {
            assent.push(a);
            raw.push(r);
        }
    }
    assert_eq!(
        assent_db.count("change_items").await,
        raw_db.count("change_items").await,
        "both sides queued the same items"
    );
    (median(assent), median(raw))
}

/// The medians of one pair over the rounds.
#[derive(Default)]
struct Pair {
    assent: Vec<Duration>,
    raw: Vec<Duration>,
}

impl Pair {
    fn record(&mut self, (assent, raw): (Duration, Duration)) {
        self.assent.push(assent);
        self.raw.push(raw);
    }

    fn row(&self, name: &str) -> String {
        let ratios: Vec<f64> = self
            .assent
            .iter()
            .zip(&self.raw)
            .map(|(a, r)| a.as_secs_f64() / r.as_secs_f64())
            .collect();
        let [low, mid, high] = quartiles(ratios);
        format!(
            "{name:<34} {:>10} {:>10} {mid:>9.1}x   {low:.1}x – {high:.1}x",
            millis(median(self.assent.clone())),
            millis(median(self.raw.clone())),
        )
    }
}

fn millis(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let config = Config::from_env();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    let (confirms, wakes) = runtime.block_on(async {
        let mut confirms = Pair::default();
        let mut wakes = Pair::default();
        for _ in 0..config.rounds {
            confirms.record(confirm_round(config).await);
            wakes.record(wake_round(config).await);
        }
        (confirms, wakes)
    });
    println!(
        "confirm_path: {} round(s); per round and side {} items confirmed, {} wakes of {} calls (after {} and {} untimed)",
        config.rounds,
        config.items,
        config.wakes,
        DEFAULT_MAX_ITEMS_PER_SET,
        config.warmup_items,
        config.warmup_wakes
    );
    println!(
        "{:<34} {:>10} {:>10} {:>10}   ratio, middle half of rounds",
        "median per operation", "assent", "raw", "assent/raw"
    );
    println!("{}", confirms.row("confirm one item"));
    println!(
        "{}",
        wakes.row(&format!("wake, {DEFAULT_MAX_ITEMS_PER_SET} deferred calls"))
    );
    println!(
        "(times are medians of per-round medians and only describe this machine now; the ratio is the result; {:.1} s in all)",
        started.elapsed().as_secs_f64()
    );
}
