//! The durable write paths, each against its baseline: the same SQLite driver (sqlx)
//! writing the same number and kinds of rows per transaction with nothing else — no
//! policy, no serialization of domain values, no checks, no reads.
//!
//! - **wake persistence**: a change set of 25 items and its outbox row, through
//!   `assent_store::change_sets::insert`, one transaction each.
//! - **confirmation**: `ConfirmationService::confirm_item` end to end (claim, policy,
//!   journal handler, decision, item and set status, audit action and result, applied
//!   operation, outbox), one transaction each.
//!
//! Both sides of a pair run on fresh databases of their own, opened by the same
//! `Store` (same schema, same durability), and alternate operation by operation so
//! that both see the same load; every round checks that both wrote the same rows.

use crate::baseline::{
    AGENT, BaselineItem, CONFIRM_ITEM, ENQUEUE, INSERT_APPLIED, INSERT_AUDIT,
    INSERT_CHECKLIST_ITEM, INSERT_DECISION, INSERT_ITEM, INSERT_SET, SET_STATUS, TOUCH_TASK,
    summary,
};
use crate::measure::{median, quartiles};
use crate::raw::Raw;
use anyhow::{Context, ensure};
use assent_changeset::{DEFAULT_MAX_ITEMS_PER_SET, ToolArguments, ToolCall};
use assent_confirm::{Engine, ExecutionOutcome, WakeRequest};
use assent_domain::{ChangeItem, ChangeSet, NewChangeSet, Uuid};
use assent_journal::tool;
use assent_journal_host::{JournalHost, NewTask, create_task};
use assent_store::Connection;
use assent_store::{Durability, Store, StoreOptions, timefmt};
use assent_tools::AgentPolicy;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use time::OffsetDateTime;
use time::macros::datetime;

const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);
const HOST: &str = "device-a";
const ITEMS: usize = DEFAULT_MAX_ITEMS_PER_SET;

/// Every table either side writes, for the same-rows check.
const TABLES: &[&str] = &[
    "tasks",
    "checklist_items",
    "change_sets",
    "change_items",
    "decisions",
    "audit_records",
    "applied_operations",
    "outbox",
];

/// One pair's figures over all rounds.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairResult {
    pub durability: &'static str,
    pub rounds: usize,
    pub operations_per_round: usize,
    pub assent_per_second: f64,
    pub baseline_per_second: f64,
    /// Median over rounds of `assent ops/s ÷ baseline ops/s`, with its quartiles.
    pub ratio: f64,
    pub ratio_q1: f64,
    pub ratio_q3: f64,
    /// The limit: raw SQLite (rusqlite, prepared statements) doing the same writes.
    pub raw_sqlite_per_second: f64,
    /// Median over rounds of `assent ops/s ÷ raw SQLite ops/s`, with its quartiles.
    pub ratio_to_raw_sqlite: f64,
    pub ratio_to_raw_sqlite_q1: f64,
    pub ratio_to_raw_sqlite_q3: f64,
}

impl PairResult {
    fn from_rounds(durability: Durability, operations: usize, rounds: &[Times]) -> Self {
        let assent: Vec<Duration> = rounds.iter().map(|r| r.assent).collect();
        let baseline: Vec<Duration> = rounds.iter().map(|r| r.sqlx).collect();
        let raw: Vec<Duration> = rounds.iter().map(|r| r.raw).collect();
        let ratios = |side: fn(&Times) -> Duration| -> [f64; 3] {
            let ratios: Vec<f64> = rounds
                .iter()
                .map(|r| side(r).as_secs_f64() / r.assent.as_secs_f64())
                .collect();
            quartiles(&ratios)
        };
        let [q1, mid, q3] = ratios(|r| r.sqlx);
        let [raw_q1, raw_mid, raw_q3] = ratios(|r| r.raw);
        Self {
            durability: durability.as_str(),
            rounds: rounds.len(),
            operations_per_round: operations,
            assent_per_second: crate::measure::per_second(median(&assent)),
            baseline_per_second: crate::measure::per_second(median(&baseline)),
            ratio: mid,
            ratio_q1: q1,
            ratio_q3: q3,
            raw_sqlite_per_second: crate::measure::per_second(median(&raw)),
            ratio_to_raw_sqlite: raw_mid,
            ratio_to_raw_sqlite_q1: raw_q1,
            ratio_to_raw_sqlite_q3: raw_q3,
        }
    }
}

/// The median time of one operation in a round, per side.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    assent: Duration,
    sqlx: Duration,
    raw: Duration,
}

/// A fresh database in its own directory (deleted on drop), with the benchmark's agent.
struct Db {
    dir: TempDir,
    store: Store,
}

impl Db {
    async fn open(durability: Durability) -> anyhow::Result<Self> {
        Self::open_with(durability, true).await
    }

    async fn open_with(durability: Durability, group_commit: bool) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("temporary directory")?;
        let url = format!("sqlite://{}/bench.db", dir.path().display());
        let store = Store::open_with({
            let mut options = StoreOptions::new(url);
            options.device_id = HOST.into();
            options.durability = durability;
            options.group_commit = group_commit;
            options
        })
        .await?;
        store
            .migrate_host("journal", assent_journal_host::MIGRATIONS)
            .await?;
        let mut tx = store.begin_write().await?;
        assent_store::agents::upsert(tx.connection(), AGENT, &AgentPolicy::new(["work"]), NOW)
            .await?;
        tx.commit().await?;
        Ok(Self { dir, store })
    }

    /// A raw SQLite connection to this database (for the raw side of a pair).
    fn raw(&self, durability: Durability) -> anyhow::Result<Raw> {
        Raw::open(&self.dir.path().join("bench.db"), durability)
    }

    async fn task(&self) -> anyhow::Result<String> {
        let id = Uuid::new_v4().to_string();
        let mut tx = self.store.begin_write().await?;
        let new = NewTask {
            title: "Plan the release".into(),
            category: Some("work".into()),
            ..NewTask::default()
        };
        create_task(tx.connection(), &id, &new, HOST, NOW).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The journal's engine; the bench's stores are opened through [`Self::open`],
    /// which runs the journal's migrations once.
    fn engine(&self) -> Engine {
        Engine::new(
            self.store.clone(),
            Arc::new(assent_journal::catalog()),
            Arc::new(JournalHost::new(HOST)),
        )
    }

    async fn payload_bytes(&self) -> anyhow::Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM outbox")
                .fetch_one(self.store.read_connection().await?.connection())
                .await?,
        )
    }

    async fn row_counts(&self) -> anyhow::Result<Vec<(&'static str, i64)>> {
        let mut counts = Vec::with_capacity(TABLES.len());
        for &table in TABLES {
            let count: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                    .fetch_one(self.store.read_connection().await?.connection())
                    .await?;
            counts.push((table, count));
        }
        Ok(counts)
    }
}

/// Fails unless both sides wrote the same number of rows to every table, and outbox
/// payloads of about the same size (within 20 %): a baseline that writes less would
/// flatter it, one that writes more would flatter Assent.
async fn same_rows(assent: &Db, baseline: &Db) -> anyhow::Result<()> {
    let (a, b) = (assent.row_counts().await?, baseline.row_counts().await?);
    ensure!(
        a == b,
        "the baseline wrote other rows than Assent: assent {a:?}, baseline {b:?}"
    );
    let (a, b) = (
        assent.payload_bytes().await?,
        baseline.payload_bytes().await?,
    );
    let ratio = b as f64 / a.max(1) as f64;
    ensure!(
        (0.8..=1.2).contains(&ratio),
        "the baseline's outbox payloads are {b} bytes, Assent's {a}"
    );
    Ok(())
}

fn titles(set: usize) -> Vec<String> {
    (0..ITEMS).map(|i| format!("Set {set} step {i}")).collect()
}

/// Alternates `assent`, the sqlx `baseline` and the `raw` SQLite side operation by
/// operation (the order reverses every time) and keeps the timings after `warmup`.
async fn alternate<A, B, R>(
    operations: usize,
    warmup: usize,
    mut assent: A,
    mut baseline: B,
    mut raw: R,
) -> anyhow::Result<Times>
where
    A: AsyncFnMut(usize) -> anyhow::Result<Duration>,
    B: AsyncFnMut(usize) -> anyhow::Result<Duration>,
    R: FnMut(usize) -> anyhow::Result<Duration>,
{
    let (mut a_times, mut b_times, mut r_times) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..warmup + operations {
        let (a, b, r) = if n % 2 == 0 {
            let a = assent(n).await?;
            let b = baseline(n).await?;
            (a, b, raw(n)?)
        } else {
            let r = raw(n)?;
            let b = baseline(n).await?;
            (assent(n).await?, b, r)
        };
        if n >= warmup {
            a_times.push(a);
            b_times.push(b);
            r_times.push(r);
        }
    }
    Ok(Times {
        assent: median(&a_times),
        sqlx: median(&b_times),
        raw: median(&r_times),
    })
}

// ---------------------------------------------------------------------------------
// Wake persistence.

fn change_set(set: usize) -> anyhow::Result<ChangeSet> {
    let items = titles(set)
        .into_iter()
        .map(|title| {
            ChangeItem::new(
                tool::ADD_CHECKLIST_ITEM,
                json!({ "title": title }),
                summary(&title),
            )
        })
        .collect();
    let run = Uuid::new_v4().to_string();
    Ok(ChangeSet::new(NewChangeSet {
        id: Uuid::new_v4(),
        agent_id: AGENT.into(),
        target: assent_journal_host::task_target("task-1"),
        thread_id: run.clone(),
        run_key: run,
        items,
        created_at: NOW,
    })?)
}

/// `sets` change sets of 25 items per round, through the store and through the bare
/// driver.
pub async fn persistence(
    durability: Durability,
    rounds: usize,
    sets: usize,
) -> anyhow::Result<PairResult> {
    let mut results = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (assent_db, baseline_db) = (Db::open(durability).await?, Db::open(durability).await?);
        let raw_db = Db::open(durability).await?;
        let mut raw_conn = raw_db.raw(durability)?;
        let store = &assent_db.store;
        let raw = |n: usize| {
            let titles = titles(n);
            let (set, run) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
            let payload = set_payload(&set, "task-1", &run, &titles);
            raw_conn.insert_set(&set, &run, &titles, &payload, &timefmt::format(NOW))
        };
        let assent = async |n: usize| {
            let set = change_set(n)?;
            let start = Instant::now();
            let mut tx = store.begin_write().await?;
            assent_store::change_sets::insert(tx.connection(), &set, NOW).await?;
            tx.commit().await?;
            Ok(start.elapsed())
        };
        let baseline_store = &baseline_db.store;
        let baseline = async |n: usize| {
            let titles = titles(n);
            let (set, run) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
            let payload = set_payload(&set, "task-1", &run, &titles);
            let start = Instant::now();
            let mut tx = baseline_store.begin_write().await?;
            insert_set(tx.connection(), &set, "task-1", &run, &titles, &payload).await?;
            tx.commit().await?;
            Ok(start.elapsed())
        };
        results.push(alternate(sets, sets / 10, assent, baseline, raw).await?);
        same_rows(&assent_db, &baseline_db).await?;
        same_rows(&assent_db, &raw_db).await?;
    }
    Ok(PairResult::from_rounds(durability, sets, &results))
}

async fn enqueue(
    conn: &mut Connection,
    entity_type: &str,
    entity_id: &str,
    payload: &str,
    now: &str,
) -> anyhow::Result<()> {
    sqlx::query(ENQUEUE)
        .bind(entity_type)
        .bind(entity_id)
        .bind(payload)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// The outbox payload of a change set as Assent replicates it (every field of the set
/// and of each item), written out by hand: the baseline writes as many bytes, without
/// serializing a domain value.
fn set_payload(set: &str, task: &str, run: &str, titles: &[String]) -> String {
    let now = timefmt::format(NOW);
    let items: Vec<String> = titles
        .iter()
        .map(|title| {
            format!(
                r#"{{"toolName":"add_checklist_item","args":{{"title":"{title}"}},"humanSummary":"{}","status":"pending","before":null}}"#,
                summary(title).replace('"', "\\\""),
            )
        })
        .collect();
    format!(
        r#"{{"id":"{set}","agentId":"{AGENT}","taskId":"{task}","threadId":"{run}","runKey":"{run}","status":"pending","items":[{}],"createdAt":"{now}","resolvedAt":null,"vectorClock":{{"{HOST}":1}}}}"#,
        items.join(",")
    )
}

/// The rows of one change set with an `add_checklist_item` item per title, and one
/// outbox row carrying the set with its items (`payload`, from [`set_payload`]).
async fn insert_set(
    conn: &mut Connection,
    set: &str,
    task: &str,
    run: &str,
    titles: &[String],
    payload: &str,
) -> anyhow::Result<()> {
    let now = timefmt::format(NOW);
    sqlx::query(INSERT_SET)
        .bind(set)
        .bind(AGENT)
        .bind(task)
        .bind(run)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
    for (index, title) in titles.iter().enumerate() {
        sqlx::query(INSERT_ITEM)
            .bind(set)
            .bind(index as i64)
            .bind(format!(r#"{{"title":"{title}"}}"#))
            .bind(summary(title))
            .execute(&mut *conn)
            .await?;
    }
    enqueue(conn, "changeSet", set, payload, &now).await
}

// ---------------------------------------------------------------------------------
// Confirmation.

/// `sets` × 25 items confirmed per round, Assent against the bare driver.
pub async fn confirmation(
    durability: Durability,
    rounds: usize,
    sets: usize,
) -> anyhow::Result<PairResult> {
    let operations = sets * ITEMS;
    let mut results = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (assent_db, baseline_db) = (Db::open(durability).await?, Db::open(durability).await?);
        let raw_db = Db::open(durability).await?;
        let engine = assent_db.engine();
        let mut assent_items = Vec::with_capacity(operations);
        let mut baseline_items = Vec::with_capacity(operations);
        let mut raw_items = Vec::with_capacity(operations);
        for set in 0..sets {
            assent_items.extend(queue(&assent_db, &engine, set).await?);
            baseline_items.extend(queue_baseline(&baseline_db, set).await?);
            raw_items.extend(queue_baseline(&raw_db, set).await?);
        }
        let mut raw_conn = raw_db.raw(durability)?;
        let now = timefmt::format(NOW);
        let raw = |n: usize| raw_conn.confirm(&[&raw_items[n]], &now);
        let engine = &engine;
        let assent = async |n: usize| {
            let (set, index) = assent_items[n];
            let start = Instant::now();
            confirm_applied(engine, set, index).await?;
            Ok(start.elapsed())
        };
        let baseline_store = &baseline_db.store;
        let baseline_items = &baseline_items;
        let baseline = async |n: usize| confirm_baseline(baseline_store, &baseline_items[n]).await;
        let warmup = ITEMS.min(operations / 5);
        results.push(alternate(operations - warmup, warmup, assent, baseline, raw).await?);
        same_rows(&assent_db, &baseline_db).await?;
        same_rows(&assent_db, &raw_db).await?;
    }
    Ok(PairResult::from_rounds(durability, operations, &results))
}

/// Confirms item `index` of `set`; an error unless it applied and changed the task.
async fn confirm_applied(engine: &Engine, set: Uuid, index: usize) -> anyhow::Result<()> {
    let outcome = engine
        .confirmations()
        .confirm_item(assent_confirm::ItemRef::new(set, index), NOW)
        .await?;
    ensure!(
        matches!(
            outcome.execution,
            ExecutionOutcome::Applied { mutated: true, .. }
        ),
        "confirmation did not apply: {:?}",
        outcome.execution
    );
    Ok(())
}

/// Assent: a wake on a fresh task queues 25 `add_checklist_item` proposals (a batch).
async fn queue(db: &Db, engine: &Engine, set: usize) -> anyhow::Result<Vec<(Uuid, usize)>> {
    let task = db.task().await?;
    let items: Vec<_> = titles(set).iter().map(|t| json!({ "title": t })).collect();
    let call = ToolCall::new(
        "call_0",
        tool::ADD_MULTIPLE_CHECKLIST_ITEMS,
        ToolArguments::Text(json!({ "items": items }).to_string()),
    );
    let outcome = engine
        .wakes()
        .wake(
            WakeRequest::new(
                AGENT,
                assent_journal_host::task_target(&task),
                Uuid::new_v4().to_string(),
                vec![call],
            ),
            NOW,
        )
        .await?;
    let set = outcome.change_set.context("the wake queued nothing")?;
    ensure!(
        set.items.len() == ITEMS,
        "the wake queued {} items",
        set.items.len()
    );
    Ok((0..ITEMS).map(|index| (set.id, index)).collect())
}

/// The baseline: the same rows as a wake, on a fresh task.
async fn queue_baseline(db: &Db, set: usize) -> anyhow::Result<Vec<BaselineItem>> {
    let task = db.task().await?;
    let id = Uuid::new_v4().to_string();
    let titles = titles(set);
    let run = Uuid::new_v4().to_string();
    let set_payload: Arc<str> = set_payload(&id, &task, &run, &titles).into();
    let mut tx = db.store.begin_write().await?;
    insert_set(tx.connection(), &id, &task, &run, &titles, &set_payload).await?;
    tx.commit().await?;
    let now = timefmt::format(NOW);
    let mut checklist = Vec::with_capacity(titles.len());
    let mut items = Vec::with_capacity(titles.len());
    for (index, title) in titles.into_iter().enumerate() {
        let checklist_item = Uuid::new_v4().to_string();
        let operation = Uuid::new_v4().to_string();
        let decision = Uuid::new_v4().to_string();
        let clock = format!(r#"{{"{HOST}":{}}}"#, index + 2);
        let args = format!(r#"{{"title":"{title}"}}"#);
        let quoted_summary = summary(&title).replace('"', "\\\"");
        checklist.push(format!(
            r#"{{"id":"{checklist_item}","title":"{title}","isChecked":false}}"#
        ));
        let task_payload = format!(
            r#"{{"id":"{task}","title":"Plan the release","status":"OPEN","priority":null,"estimateMinutes":null,"dueDate":null,"language":null,"category":"work","labels":[],"checklist":[{}],"vectorClock":{clock},"statusReason":null}}"#,
            checklist.join(",")
        );
        let audit = |kind: &str, rest: &str| {
            format!(
                r#"{{"operationId":"{operation}","runKey":"{run}","toolName":"add_checklist_item","agentId":"{AGENT}","targetKind":"task","targetId":"{task}","kind":"{kind}","args":{args},{rest}"createdAt":"{now}"}}"#
            )
        };
        let audit_payloads = [
            audit(
                "action",
                r#""success":null,"detail":null,"vectorClock":null,"#,
            ),
            audit(
                "result",
                &format!(
                    r#""success":true,"detail":"Checklist item \"{title}\" added.","vectorClock":{clock},"#
                ),
            ),
        ];
        let decision_payload = format!(
            r#"{{"id":"{decision}","changeSetId":"{id}","itemIndex":{index},"agentId":"{AGENT}","targetKind":"task","targetId":"{task}","toolName":"add_checklist_item","verdict":"confirmed","reason":null,"editedArgs":null,"humanSummary":"{quoted_summary}","args":{args},"createdAt":"{now}","vectorClock":{clock}}}"#
        );
        let item_payload =
            format!(r#"{{"changeSetId":"{id}","itemIndex":{index},"status":"confirmed"}}"#);
        items.push(BaselineItem {
            summary: summary(&title),
            clock,
            set_status: if index + 1 == ITEMS {
                "resolved"
            } else {
                "partiallyResolved"
            },
            args,
            task: task.clone(),
            set: id.clone(),
            index,
            title,
            run_key: run.clone(),
            checklist_item,
            operation,
            decision,
            task_payload,
            audit_payloads,
            decision_payload,
            item_payload,
            set_payload: Arc::clone(&set_payload),
        });
    }
    Ok(items)
}

/// The writes of one confirmation, and nothing else: the checklist row, the task's
/// clock, two audit records, the applied operation, the decision, the item and set
/// statuses, and their outbox rows.
async fn confirm_baseline(store: &Store, item: &BaselineItem) -> anyhow::Result<Duration> {
    let now = timefmt::format(NOW);
    let (args, clock, status) = (&item.args, &item.clock, item.set_status);
    let index = item.index as i64;
    let task = item.task.as_str();
    let set = item.set.as_str();
    let start = Instant::now();
    let mut tx = store.begin_write().await?;
    sqlx::query(INSERT_CHECKLIST_ITEM)
        .bind(&item.checklist_item)
        .bind(task)
        .bind(index)
        .bind(&item.title)
        .execute(tx.connection())
        .await?;
    sqlx::query(TOUCH_TASK)
        .bind(clock)
        .bind(&now)
        .bind(task)
        .execute(tx.connection())
        .await?;
    enqueue(tx.connection(), "task", task, &item.task_payload, &now).await?;
    for ((kind, success), payload) in [("action", None), ("result", Some(true))]
        .into_iter()
        .zip(&item.audit_payloads)
    {
        let id: i64 = sqlx::query_scalar(INSERT_AUDIT)
            .bind(&item.operation)
            .bind(&item.run_key)
            .bind(AGENT)
            .bind(task)
            .bind(kind)
            .bind(args)
            .bind(success)
            .bind(&now)
            .fetch_one(tx.connection())
            .await?;
        enqueue(
            tx.connection(),
            "auditRecord",
            &id.to_string(),
            payload,
            &now,
        )
        .await?;
    }
    sqlx::query(INSERT_APPLIED)
        .bind(&item.operation)
        .bind(task)
        .bind(&now)
        .execute(tx.connection())
        .await?;
    sqlx::query(INSERT_DECISION)
        .bind(&item.decision)
        .bind(set)
        .bind(index)
        .bind(AGENT)
        .bind(task)
        .bind(&item.summary)
        .bind(args)
        .bind(&now)
        .bind(clock)
        .execute(tx.connection())
        .await?;
    enqueue(
        tx.connection(),
        "changeDecision",
        &item.decision,
        &item.decision_payload,
        &now,
    )
    .await?;
    sqlx::query(CONFIRM_ITEM)
        .bind(set)
        .bind(index)
        .execute(tx.connection())
        .await?;
    enqueue(
        tx.connection(),
        "changeItem",
        &format!("{set}:{index}"),
        &item.item_payload,
        &now,
    )
    .await?;
    sqlx::query(SET_STATUS)
        .bind(status)
        .bind(clock)
        .bind(set)
        .execute(tx.connection())
        .await?;
    enqueue(tx.connection(), "changeSet", set, &item.set_payload, &now).await?;
    tx.commit().await?;
    Ok(start.elapsed())
}

// ---------------------------------------------------------------------------------
// Confirm-all.

/// Confirm-all of sets of 25 items: items confirmed per second, Assent against raw
/// SQLite writing the same confirmations of a set in one transaction.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmAllResult {
    pub durability: &'static str,
    pub rounds: usize,
    pub sets_per_round: usize,
    pub items_per_set: usize,
    pub items_per_second: f64,
    pub raw_sqlite_items_per_second: f64,
    /// Median over rounds of `assent items/s ÷ raw SQLite items/s`.
    pub ratio_to_raw_sqlite: f64,
}

/// `sets` sets of 25 items confirmed with `confirm_all` per round, set by set
/// alternating with raw SQLite.
pub async fn confirm_all(
    durability: Durability,
    rounds: usize,
    sets: usize,
) -> anyhow::Result<ConfirmAllResult> {
    let (mut assent_times, mut raw_times, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (assent_db, raw_db) = (Db::open(durability).await?, Db::open(durability).await?);
        let engine = assent_db.engine();
        let (mut assent_sets, mut raw_sets) = (Vec::new(), Vec::new());
        for set in 0..sets {
            assent_sets.push(queue(&assent_db, &engine, set).await?[0].0);
            raw_sets.push(queue_baseline(&raw_db, set).await?);
        }
        let mut raw_conn = raw_db.raw(durability)?;
        let now = timefmt::format(NOW);
        let (mut a_round, mut r_round) = (Vec::new(), Vec::new());
        for (n, (set, raw_items)) in assent_sets.iter().zip(&raw_sets).enumerate() {
            let raw_items: Vec<&BaselineItem> = raw_items.iter().collect();
            let raw = if n % 2 == 1 {
                Some(raw_conn.confirm(&raw_items, &now)?)
            } else {
                None
            };
            let start = Instant::now();
            let result = engine.confirmations().confirm_all(*set, NOW).await?;
            a_round.push(start.elapsed());
            let confirmed = result
                .items
                .iter()
                .filter(|item| matches!(item.result, assent_confirm::ItemResult::Confirmed(_)))
                .count();
            ensure!(
                confirmed == ITEMS,
                "confirm-all confirmed {confirmed} items"
            );
            r_round.push(match raw {
                Some(raw) => raw,
                None => raw_conn.confirm(&raw_items, &now)?,
            });
        }
        same_rows(&assent_db, &raw_db).await?;
        let (a, r) = (median(&a_round), median(&r_round));
        ratios.push(r.as_secs_f64() / a.as_secs_f64());
        assent_times.push(a);
        raw_times.push(r);
    }
    let per_second = |t: &[Duration]| ITEMS as f64 * crate::measure::per_second(median(t));
    Ok(ConfirmAllResult {
        durability: durability.as_str(),
        rounds,
        sets_per_round: sets,
        items_per_set: ITEMS,
        items_per_second: per_second(&assent_times),
        raw_sqlite_items_per_second: per_second(&raw_times),
        ratio_to_raw_sqlite: quartiles(&ratios)[1],
    })
}

// ---------------------------------------------------------------------------------
// Concurrent confirmations (group commit).

/// How many confirmations run at once in [`concurrent_confirmations`].
pub const CONCURRENT_WRITERS: [usize; 4] = [1, 2, 4, 8];

/// Confirmations of different sets at once on one SQLite file, `FULL`: 1, 2, 4 and 8
/// writers, each confirming the items of a set of its own one by one.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentResult {
    pub durability: &'static str,
    pub rounds: usize,
    pub items_per_writer: usize,
    pub with_group_commit: Vec<Concurrency>,
    /// The same with each confirmation committing on its own (`group_commit: false`).
    pub without_group_commit: Vec<Concurrency>,
    /// Confirmations per second of 8 writers ÷ of 1 writer, with group commit.
    pub eight_writers_vs_one: f64,
}

/// One number of concurrent writers, medians over rounds.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Concurrency {
    pub writers: usize,
    pub confirmations_per_second: f64,
    /// `COMMIT`s per confirmation: each one sync of the WAL at `FULL` (checkpoints add
    /// their own, not counted). `None` without group commit, which does not count them
    /// (one per confirmation).
    pub fsyncs_per_decision: Option<f64>,
}

/// 1, 2, 4 and 8 writers confirming `items` items each, with and without group
/// commit, alternating per round.
pub async fn concurrent_confirmations(
    durability: Durability,
    rounds: usize,
    items: usize,
) -> anyhow::Result<ConcurrentResult> {
    let items = items.min(ITEMS);
    let mut grouped: Vec<Vec<(f64, f64)>> = vec![Vec::new(); CONCURRENT_WRITERS.len()];
    let mut alone: Vec<Vec<f64>> = vec![Vec::new(); CONCURRENT_WRITERS.len()];
    for _ in 0..rounds {
        for (slot, &writers) in CONCURRENT_WRITERS.iter().enumerate() {
            for group_commit in [true, false] {
                let (rate, fsyncs) =
                    confirm_concurrently(durability, group_commit, writers, items).await?;
                if group_commit {
                    grouped[slot].push((rate, fsyncs.unwrap_or(f64::NAN)));
                } else {
                    alone[slot].push(rate);
                }
            }
        }
    }
    let median_of = |values: Vec<f64>| quartiles(&values)[1];
    let with_group_commit: Vec<Concurrency> = CONCURRENT_WRITERS
        .iter()
        .zip(grouped)
        .map(|(&writers, runs)| Concurrency {
            writers,
            confirmations_per_second: median_of(runs.iter().map(|r| r.0).collect()),
            fsyncs_per_decision: Some(median_of(runs.iter().map(|r| r.1).collect())),
        })
        .collect();
    let without_group_commit = CONCURRENT_WRITERS
        .iter()
        .zip(alone)
        .map(|(&writers, runs)| Concurrency {
            writers,
            confirmations_per_second: median_of(runs),
            fsyncs_per_decision: None,
        })
        .collect();
    let rate = |writers: usize| {
        with_group_commit
            .iter()
            .find(|c| c.writers == writers)
            .map_or(f64::NAN, |c| c.confirmations_per_second)
    };
    Ok(ConcurrentResult {
        durability: durability.as_str(),
        rounds,
        items_per_writer: items,
        eight_writers_vs_one: rate(8) / rate(1),
        with_group_commit,
        without_group_commit,
    })
}

/// One run: `writers` tasks on a fresh database, each confirming `items` items of its
/// own set; confirmations per second and (with group commit) commits per confirmation.
async fn confirm_concurrently(
    durability: Durability,
    group_commit: bool,
    writers: usize,
    items: usize,
) -> anyhow::Result<(f64, Option<f64>)> {
    let db = Db::open_with(durability, group_commit).await?;
    let engine = db.engine();
    let mut sets = Vec::with_capacity(writers);
    for set in 0..writers {
        sets.push(queue(&db, &engine, set).await?[0].0);
    }
    let before = db.store.group_commits();
    let start = Instant::now();
    let tasks: Vec<_> = sets
        .into_iter()
        .map(|set| {
            let engine = engine.clone();
            tokio::spawn(async move {
                for index in 0..items {
                    confirm_applied(&engine, set, index).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await.context("a writer stopped")??;
    }
    let elapsed = start.elapsed();
    let decisions = (writers * items) as f64;
    let fsyncs = match (before, db.store.group_commits()) {
        (Some(before), Some(after)) => Some((after.commits - before.commits) as f64 / decisions),
        _ => None,
    };
    Ok((decisions / elapsed.as_secs_f64(), fsyncs))
}
