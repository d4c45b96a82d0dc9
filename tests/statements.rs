//! Statements per decision and per wake item on SQLite, counted from the events sqlx
//! emits for every statement it runs (target `sqlx::query`), and held under stated
//! bounds: a change that adds round trips to the hot paths fails here, and one that
//! removes them lowers the bound (issue 26). The figures are printed for the report.

// The figures (and, with `SHOW_STATEMENTS`, each statement) are this test's report.
#![allow(clippy::print_stdout)]

use assent_changeset::{ToolArguments, ToolCall};
use assent_confirm::{
    Engine, ExternalCall, ExternalError, ExternalHandler, SimpleHost, WakeRequest,
};
use assent_confirm::{ExecutionOutcome, ItemRef};
use assent_domain::Target;
use assent_store::{Store, agents};
use assent_tests::{TestApp, TestBackend};
use assent_tools::{AgentPolicy, BoxFuture, ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use time::OffsetDateTime;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Statements one confirmation of a transactional journal item may take (28 today:
/// `BEGIN` and `COMMIT`, the set and its items re-read under the lock, the item's host
/// and hold, the agent's policy and tool settings in one read, the journal's read of
/// the task for the stale check, the category, the applied-operation check, two audit
/// records with their outbox messages, the handler in its savepoint (the task, the
/// checklist's next position, the insert, the task with its clock in one read, the
/// clock's update, the task's outbox message), the applied operation, the clock for
/// the result record, the decision and its message, the statuses, and the item's and
/// the set's messages in one insert). `BEGIN` and `COMMIT` are counted since group
/// commit runs them as statements of its own; before, sqlx's transaction manager ran
/// them unseen, and the same confirmation counted 33, with two savepoints per audit
/// record (SQLite does not need them), two more reads of the task in the journal's
/// `touch` and one outbox statement per message. Next: the task read three times
/// (stale check, category, handler) and the clock read after the handler.
///
/// 34 since the consent chain (issue 38): the decision and the two audit records were
/// each entered on the chain with a read of its head and an insert (6 more). 26 since
/// the write plan (issue 42, `assent_store::plan`): the audit rows, the chain entries
/// (one head read) and the outbox messages of the engine are written at the end, one
/// statement per table. 25 since the set and its items are read in one statement, 24
/// since the journal's checklist insert finds its position itself. Then, one at a
/// time: 23 since who serves each item (its host, its effect, a job holding it) is
/// read with the set, 21 since the handler runs in the confirmation's clean scope
/// without a savepoint of its own (a failed handler rolls the scope back), 20 since the
/// policy is checked against the category the re-check's state holds
/// (`TargetState::category`), 19 since the agent's rules are read with the set too
/// (`change_sets::load_for_decision`: one read before the host is asked anything).
/// Left: `BEGIN`, that read, the applied-operation check, the applied operation, the
/// decision, the set's and the item's status, the plan's 4 and `COMMIT` (12, the
/// engine's), and the host's 7: its 2 reads of the task (its state for the stale
/// check, its clock after the handler) and the handler's 5. 18 since the handler
/// reports the task's new clock in its `ToolOutcome` (issue 55): the host's read of it
/// after the handler is gone. Still 18 since the confirmation reads once and applies
/// once (issue 55, point 3): the applied-operation check moved into the decision's read
/// (a second statement under its lock), the applied operation, the statuses and a
/// quorum's approval into the plan (the chain last): the same statements, fewer round
/// trips (below). What is left: `BEGIN`, the read's 2, the host's 6 (its state, the
/// handler's 5), the plan's 8 (the chain's head, the decision, the audit rows, the
/// set's and the items' statuses, the applied operation, the outbox, the chain) and
/// `COMMIT`. 17 since the decision's read takes the chain's head with the set (in
/// the same statement, under the write lock `BEGIN IMMEDIATE` took) and the plan
/// appends after it with an insert that checks it is still the head
/// (`chain::insert_after_checked`; a transaction that appended since reads it again).
/// 16 since the journal's handler ticks the task's clock with an `UPDATE … RETURNING`
/// the task's new state (from the clock it read before the write, as no writer but the
/// tick changes it): its read of the task after the write is gone. What is left:
/// `BEGIN`, the read's 2 (the set with everything, the applied-operation check, whose
/// key is a hash of the item's arguments and so cannot join the first), the host's 5
/// (its state, the handler's 4), the plan's 7 (the decision, the audit rows, the set's
/// and the items' statuses, the applied operation, the outbox, the chain: one
/// statement per table) and `COMMIT`.
const PER_CONFIRMATION: usize = 16;
/// Round trips a confirmation of the same item may take between the engine's task and
/// sqlx's worker thread (issue 55): the statements above, less those run together
/// under one lock through SQLite's C API (the write plan's four and the `COMMIT` of a
/// lone writer, one trip): 13. 9 since a confirmation reads once and applies once
/// (issue 55, point 3): `BEGIN`, the read (one lock), the host's 6 through sqlx, and
/// the plan with the `COMMIT` (one lock); the engine's own trips are 3. 8 since the
/// journal's handler reads the task once (above).
const TRIPS_PER_CONFIRMATION: usize = 8;
/// Statements confirm-all of the 20 items left may take in all (646 before the write
/// plan, 389 with it and the changes above: 19 per item, whose plan is written once
/// for the whole set). 252 since the agent's rules are read once per tool, who serves
/// each item with the set, the decisions are rows of the plan (one multi-row insert),
/// the set's and the items' statuses are written once at the end (one statement for
/// all the items), and the handler runs in the item's savepoint; 232 since the
/// category comes with the state, 231 since the agent's rules come with the set: 11.6
/// per item, of which the host's 7 (the handler's 5 and its 2 reads of the task) and
/// the item's savepoint and its release, the applied-operation check and the applied
/// operation. 211 since the handlers report the task's clock (one read fewer per item).
/// 173 since confirm-all reads whether each item's operation was applied with the set
/// (one statement for all) and plans the applied operations (one multi-row insert):
/// 8.7 per item, of which the host's 6 and the item's savepoint and its release. 172
/// since the chain's head comes with the set; 152 since the journal's handler reads
/// the task once (7.6 per item).
const CONFIRM_ALL_OF_20: usize = 152;
/// Statements a confirmation of a held tool's item may take when it meets a quorum of
/// two (issue 55, point 3): its approval, its job and their chain entries planned and
/// applied with the `COMMIT`, the approvers named from the decision's read: `BEGIN`,
/// the read's 2, the host's state, the tool's recorded definition (for the approval's
/// digest), whether the item has a retracted job to revive, the webhook subscribers,
/// then the approval, the job, the chain and `COMMIT` under one lock. 11; before, the
/// approval was written at once (with a read of the chain's head and an insert), read
/// back for the job's approvers, and the job written at once too (with the chain's
/// head and an insert): 16, counted from that code.
const HELD_QUORUM: usize = 11;
/// Statements a wake of 25 deferred calls may take in all (10 before issue 55: `BEGIN`,
/// the agent, the task with its category (its category read on its own before the
/// host's state held it: 11), the open sets and recent decisions, then the set, its 25
/// items in one multi-row insert, its outbox message, the webhook subscribers' read and
/// `COMMIT`). 8 since the wake reads once and applies once (issue 55): `BEGIN`, the
/// host's state, one read of the agent's rules with whether it has open sets there,
/// whether any webhook subscription exists and whether the calls it may run at once
/// were applied (`decisions::wake::read`), its recent decisions (a wake that queues),
/// then the set, its items and its outbox message written with the `COMMIT` (the
/// wake's `WritePlan`). The open sets are read only when there are some.
const WAKE_OF_25: usize = 8;
/// Round trips a wake of the same 25 calls may take (issue 55): `BEGIN`, the host's
/// state through sqlx, the engine's read (one lock) and the plan with the `COMMIT`
/// (one lock).
const TRIPS_OF_WAKE: usize = 4;

/// Statements an allowed call of an idempotent external tool may take, as the MCP
/// gateway makes it (issue 42), on an in-memory database (whose transactions sqlx
/// begins and commits unseen): the wake (the agent, the target's category, the
/// category again for the executor's check, the applied-operation check; the open
/// sets and recent decisions are read only by a wake that queues) and, after the
/// call, one commit of its outcome (the applied operation; the two audit records, the
/// chain's head and entries and their outbox messages through the write plan: 4
/// statements where they were 8). 15 before the write plan and the two-pass wake; 8
/// since the executor's check takes the category the wake read (no handler ran in
/// its transaction since). 7 since the wake reads once (issue 55, point 5): the
/// host's category, then one statement for the agent's rules and whether the call's
/// operation was applied; no transaction is open while the call runs; then its
/// outcome, planned (the chain's head, the audit rows, the applied operation, the
/// outbox, the chain) and applied once with the commit.
const EXTERNAL_CALL: usize = 7;
/// Round trips the same call may take (issue 55): the host's category through sqlx,
/// the engine's read (one lock), and the outcome's plan (one lock).
const TRIPS_OF_EXTERNAL_CALL: usize = 3;

/// Counts sqlx's statement events (and the store's through the C API).
struct Statements(Arc<AtomicUsize>);

/// The count of [`Statements`], installed as the process's subscriber by the first test
/// that asks (one subscriber serves both tests of this binary).
fn counter() -> Arc<AtomicUsize> {
    static COUNTED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    COUNTED
        .get_or_init(|| {
            let counted = Arc::new(AtomicUsize::new(0));
            let subscriber = tracing_subscriber::registry().with(Statements(counted.clone()));
            tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
            counted
        })
        .clone()
}

/// Held by each test for its whole run: the counters are process-wide, so the two
/// tests of this binary (SQLite, PostgreSQL) count one at a time.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The text of every statement run through sqlx while [`NOTING`] is set: how many
/// distinct texts a path prepares (issue 55: on PostgreSQL a multi-row write is one
/// text whatever its row count).
static TEXTS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static NOTING: AtomicBool = AtomicBool::new(false);

/// A statement event's whole text: `db.statement` (sqlx leaves it empty when the
/// summary is the whole statement), else `summary`.
#[derive(Default)]
struct Text {
    summary: String,
    statement: String,
}

impl tracing::field::Visit for Text {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_owned(),
            "db.statement" => self.statement = value.trim().to_owned(),
            _ => {}
        }
    }
}

/// Round trips between the engine's task and sqlx's SQLite worker thread: one per sqlx
/// statement, one per lock of a connection for the C API (issue 55), whatever it ran.
static TRIPS: AtomicUsize = AtomicUsize::new(0);

/// Every way into the store, in order, while [`WALKING`] is set: `lock` for a lock of
/// a connection for the C API, `c SQL` for a statement run under it, `sqlx SQL` for a
/// statement through sqlx (issue 55: "a walk of a confirmation").
static WALK: Mutex<Vec<String>> = Mutex::new(Vec::new());
static WALKING: AtomicBool = AtomicBool::new(false);

/// The `summary` field of a statement event (its first words).
struct Summary(String);

impl tracing::field::Visit for Summary {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = format!("{value:?}");
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "summary" {
            self.0 = value.to_owned();
        }
    }
}

impl<S: Subscriber> Layer<S> for Statements {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        // sqlx's statements, and the store's own through SQLite's C API (issue 55).
        let target = event.metadata().target();
        if target == "sqlx::query" || target == "assent_store::c_api::lock" {
            TRIPS.fetch_add(1, Ordering::SeqCst);
        }
        if WALKING.load(Ordering::SeqCst) {
            let mut summary = Summary(String::new());
            event.record(&mut summary);
            let step = match target {
                "assent_store::c_api::lock" => Some("lock".to_owned()),
                "assent_store::c_api" => Some(format!("c {}", summary.0)),
                "sqlx::query" => Some(format!("sqlx {}", summary.0)),
                _ => None,
            };
            if let Some(step) = step {
                WALK.lock().unwrap_or_else(|p| p.into_inner()).push(step);
            }
        }
        if target == "sqlx::query" && NOTING.load(Ordering::SeqCst) {
            let mut text = Text::default();
            event.record(&mut text);
            let text = if text.statement.is_empty() {
                text.summary
            } else {
                text.statement
            };
            TEXTS.lock().unwrap_or_else(|p| p.into_inner()).push(text);
        }
        if target == "sqlx::query" || target == "assent_store::c_api" {
            self.0.fetch_add(1, Ordering::SeqCst);
            // `SHOW_STATEMENTS=1 cargo test --test statements -- --nocapture` lists them.
            if std::env::var_os("SHOW_STATEMENTS").is_some() {
                let mut summary = Summary(String::new());
                event.record(&mut summary);
                println!("SQL {}", summary.0);
            }
        }
    }
}

/// The middle of `samples` (the upper one of an even count).
fn median(samples: &[usize]) -> usize {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

fn priority(n: usize) -> ToolCall {
    let arguments = json!({"title": format!("Step {n}")}).to_string();
    ToolCall::new(
        format!("call_{n}"),
        "add_checklist_item",
        ToolArguments::Text(arguments),
    )
}

#[tokio::test]
async fn a_confirmation_and_a_wake_item_stay_within_their_statements() {
    let _alone = ALONE.lock().await;
    let counted = counter();
    let statements = |during: usize| counted.load(Ordering::SeqCst) - during;

    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let calls: Vec<ToolCall> = (0..25).map(priority).collect();

    let before = counted.load(Ordering::SeqCst);
    let trips_before = TRIPS.load(Ordering::SeqCst);
    WALK.lock().unwrap_or_else(|p| p.into_inner()).clear();
    WALKING.store(true, Ordering::SeqCst);
    let wake = app.wake_calls(&task, calls).await.expect("woke");
    WALKING.store(false, Ordering::SeqCst);
    let wake_statements = statements(before);
    let wake_trips = TRIPS.load(Ordering::SeqCst) - trips_before;
    if std::env::var_os("SHOW_STATEMENTS").is_some() {
        println!(
            "the walk of a wake: {:#?}",
            WALK.lock().unwrap_or_else(|p| p.into_inner())
        );
    }
    println!("round trips to sqlx's worker: a wake of 25 deferred calls {wake_trips}");
    assert!(
        wake_trips <= TRIPS_OF_WAKE,
        "a wake of 25 calls took {wake_trips} round trips (bound {TRIPS_OF_WAKE})"
    );
    let set = wake.change_set.expect("queued");
    assert_eq!(set.items.len(), 25);

    let mut per_confirmation = Vec::new();
    let mut trips_per_confirmation = Vec::new();
    let mut walks = Vec::new();
    for index in 0..5 {
        let before = counted.load(Ordering::SeqCst);
        let trips_before = TRIPS.load(Ordering::SeqCst);
        WALK.lock().unwrap_or_else(|p| p.into_inner()).clear();
        WALKING.store(true, Ordering::SeqCst);
        app.engine
            .confirmations()
            .confirm_item(ItemRef::new(set.id, index), OffsetDateTime::now_utc())
            .await
            .expect("confirmed");
        WALKING.store(false, Ordering::SeqCst);
        walks.push(std::mem::take(
            &mut *WALK.lock().unwrap_or_else(|p| p.into_inner()),
        ));
        per_confirmation.push(statements(before));
        trips_per_confirmation.push(TRIPS.load(Ordering::SeqCst) - trips_before);
    }
    if std::env::var_os("SHOW_STATEMENTS").is_some() {
        println!("the walk of a confirmation: {:#?}", walks[0]);
    }
    // A walk of a confirmation shows one read, one decide, one apply (issue 55): the
    // engine enters the store twice through the C API, once to read (after `BEGIN`,
    // before its host is asked anything) and once to apply its plan and commit (after
    // the host's last statement); everything through sqlx in between is the host's
    // (its state for the stale check, its handler). The typical walk, as above.
    let shapes: Vec<Result<(), String>> =
        walks.iter().map(|walk| one_read_one_apply(walk)).collect();
    let good = shapes.iter().filter(|shape| shape.is_ok()).count();
    assert!(
        good * 2 > shapes.len(),
        "a confirmation's walk is not read, decide, apply: {shapes:?} in {walks:#?}"
    );
    println!("round trips to sqlx's worker: one confirmation {trips_per_confirmation:?}");
    // The counters are process-wide: the pool's own upkeep (a connection opened or
    // checked) now and then lands inside one sample (CI once saw [13, 13, 13, 13, 15]).
    // The engine's own work is the same in every confirmation, so the typical one, the
    // median, is held to the bound: a regression shows in all five.
    let trips = median(&trips_per_confirmation);
    assert!(
        trips <= TRIPS_PER_CONFIRMATION,
        "a confirmation took {trips} round trips (median of {trips_per_confirmation:?}; bound {TRIPS_PER_CONFIRMATION})"
    );
    let before = counted.load(Ordering::SeqCst);
    let all = app
        .engine
        .confirmations()
        .confirm_all(set.id, OffsetDateTime::now_utc())
        .await
        .expect("confirmed the rest");
    let confirm_all = statements(before);
    let rest = all.items.len() - 5;

    println!(
        "statements: wake of 25 deferred calls {wake_statements} ({:.1} per call); one confirmation {per_confirmation:?}; confirm-all of {rest} items {confirm_all} ({:.1} per item)",
        wake_statements as f64 / 25.0,
        confirm_all as f64 / rest as f64
    );
    assert!(
        per_confirmation.iter().all(|&n| n > 10),
        "the counter sees sqlx's statements ({per_confirmation:?})"
    );
    assert!(
        wake_statements <= WAKE_OF_25,
        "a wake of 25 calls took {wake_statements} statements (bound {WAKE_OF_25})"
    );
    let count = median(&per_confirmation);
    assert!(
        count <= PER_CONFIRMATION,
        "a confirmation took {count} statements (median of {per_confirmation:?}; bound {PER_CONFIRMATION})"
    );
    let gateway = external_tool_engine().await;
    let before = counted.load(Ordering::SeqCst);
    let trips_before = TRIPS.load(Ordering::SeqCst);
    WALK.lock().unwrap_or_else(|p| p.into_inner()).clear();
    WALKING.store(true, Ordering::SeqCst);
    let request = WakeRequest::new(
        "scribe",
        Target::new("note", "n1"),
        "run-1",
        vec![ToolCall::new(
            "c1",
            "send",
            ToolArguments::Text(json!({"body": "hello"}).to_string()),
        )],
    );
    let ran = gateway
        .wakes()
        .wake(request, OffsetDateTime::now_utc())
        .await
        .expect("ran");
    WALKING.store(false, Ordering::SeqCst);
    let external_call = statements(before);
    let external_trips = TRIPS.load(Ordering::SeqCst) - trips_before;
    assert_eq!(ran.responses[0].content, "sent");
    if std::env::var_os("SHOW_STATEMENTS").is_some() {
        println!(
            "the walk of an external call: {:#?}",
            WALK.lock().unwrap_or_else(|p| p.into_inner())
        );
    }
    println!(
        "statements: one allowed call of an idempotent external tool {external_call}, {external_trips} round trips"
    );
    assert!(
        external_trips <= TRIPS_OF_EXTERNAL_CALL,
        "an external call took {external_trips} round trips (bound {TRIPS_OF_EXTERNAL_CALL})"
    );
    assert!(
        external_call <= EXTERNAL_CALL,
        "an external call took {external_call} statements (bound {EXTERNAL_CALL})"
    );

    assert_eq!(rest, 20);
    assert!(
        confirm_all <= CONFIRM_ALL_OF_20,
        "confirm-all of {rest} items took {confirm_all} statements (bound {CONFIRM_ALL_OF_20})"
    );

    // A held tool under a quorum of two: the second person's confirmation meets it and
    // schedules the held job. Its approval, the job and their chain entries are
    // planned (issue 55, point 3): between the read and the apply nothing writes the
    // engine's approvals or chain, and the job names both approvers.
    let mut conn = app.store.read_connection().await.expect("connection");
    let now = OffsetDateTime::now_utc();
    agents::set_hold(&mut conn, "agent-1", "add_checklist_item", 30, now)
        .await
        .expect("held")
        .expect("agent-1 exists");
    agents::set_approvals_needed(&mut conn, "agent-1", "add_checklist_item", 2, now)
        .await
        .expect("quorum")
        .expect("agent-1 exists");
    drop(conn);
    let held = app
        .wake_calls(&task, vec![priority(100)])
        .await
        .expect("woke")
        .change_set
        .expect("queued");
    let confirmations = app.engine.confirmations();
    let first = confirmations
        .clone()
        .by("alice")
        .confirm_item(ItemRef::new(held.id, 0), OffsetDateTime::now_utc())
        .await
        .expect("alice approved");
    assert!(
        matches!(first.execution, ExecutionOutcome::AwaitingApprovals { .. }),
        "{first:?}"
    );
    let before = counted.load(Ordering::SeqCst);
    WALK.lock().unwrap_or_else(|p| p.into_inner()).clear();
    WALKING.store(true, Ordering::SeqCst);
    let second = confirmations
        .by("bob")
        .confirm_item(ItemRef::new(held.id, 0), OffsetDateTime::now_utc())
        .await
        .expect("bob met the quorum");
    WALKING.store(false, Ordering::SeqCst);
    let hold = statements(before);
    let walk = std::mem::take(&mut *WALK.lock().unwrap_or_else(|p| p.into_inner()));
    if std::env::var_os("SHOW_STATEMENTS").is_some() {
        println!("the walk of a held confirmation meeting its quorum: {walk:#?}");
    }
    let ExecutionOutcome::Scheduled { job_id, .. } = second.execution else {
        panic!("expected a held job, got {second:?}");
    };
    let mut conn = app.store.read_connection().await.expect("connection");
    let job = assent_store::jobs::load(&mut conn, job_id)
        .await
        .expect("read")
        .expect("the held job");
    assert_eq!(job.approved_by, ["alice", "bob"]);
    drop(conn);
    held_walk(&walk).unwrap_or_else(|why| panic!("{why} in {walk:#?}"));
    println!("statements: a held confirmation meeting its quorum {hold}");
    assert!(
        hold <= HELD_QUORUM,
        "a held confirmation meeting its quorum took {hold} statements (bound {HELD_QUORUM})"
    );
}

/// Whether `walk` (a held confirmation's ways into the store) reads first, writes its
/// approval, job and chain entries only in its one apply (the last lock, with the
/// `COMMIT`), and between them writes none of the engine's consent rows at once.
fn held_walk(walk: &[String]) -> Result<(), String> {
    let locks: Vec<usize> = (0..walk.len()).filter(|&i| walk[i] == "lock").collect();
    let [read, apply] = locks[..] else {
        return Err(format!("{} locks for the C API, not 2", locks.len()));
    };
    if walk[..read] != ["sqlx BEGIN IMMEDIATE"] {
        return Err(format!("before the read: {:?}", &walk[..read]));
    }
    let written_at_once = |step: &&String| {
        let words: Vec<&str> = step.split_whitespace().collect();
        matches!(words.get(1), Some(&"INSERT") | Some(&"UPDATE"))
            && words.iter().any(|word| {
                ["approvals", "consent_chain", "execution_jobs"]
                    .iter()
                    .any(|table| word.starts_with(table))
            })
    };
    if let Some(step) = walk[read..apply].iter().find(written_at_once) {
        return Err(format!("written before the apply: {step}"));
    }
    let applied = &walk[apply + 1..];
    if applied.last().map(String::as_str) != Some("c COMMIT") {
        return Err(format!("the apply ran {applied:?}"));
    }
    for table in ["approvals", "execution_jobs", "consent_chain"] {
        if !applied.iter().any(|step| step.contains(table)) {
            return Err(format!("the apply wrote no {table}: {applied:?}"));
        }
    }
    Ok(())
}

/// Whether `walk` (a confirmation's ways into the store, in order) is `BEGIN`, one lock
/// for the C API that only reads, the host's statements through sqlx, and one lock that
/// writes the plan and commits: `Err` says where it is not.
fn one_read_one_apply(walk: &[String]) -> Result<(), String> {
    let locks: Vec<usize> = (0..walk.len()).filter(|&i| walk[i] == "lock").collect();
    let [read, apply] = locks[..] else {
        return Err(format!("{} locks for the C API, not 2", locks.len()));
    };
    if walk[..read] != ["sqlx BEGIN IMMEDIATE"] {
        return Err(format!("before the read: {:?}", &walk[..read]));
    }
    let reads = &walk[read + 1..];
    let reads = &reads[..reads
        .iter()
        .take_while(|step| step.starts_with("c "))
        .count()];
    if reads.is_empty() || reads.iter().any(|step| !step.starts_with("c SELECT")) {
        return Err(format!("the read ran {reads:?}"));
    }
    let host = &walk[read + 1 + reads.len()..apply];
    // The engine's own tables: none of them is the host's to read or write.
    let engine = [
        "applied_operations",
        "change_sets",
        "change_items",
        "decisions",
        "audit_records",
        "consent_chain",
        "approvals",
        "agents",
    ];
    if host.iter().any(|step| {
        !step.starts_with("sqlx ")
            || step
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| engine.contains(&word))
    }) {
        return Err(format!("between the read and the apply: {host:?}"));
    }
    let applied = &walk[apply + 1..];
    if applied.last().map(String::as_str) != Some("c COMMIT")
        || applied.iter().any(|step| !step.starts_with("c "))
    {
        return Err(format!("the apply ran {applied:?}"));
    }
    Ok(())
}

/// An engine whose one tool, `send`, is external, idempotent and allowed at once.
async fn external_tool_engine() -> Engine {
    struct Sender;
    impl ExternalHandler for Sender {
        fn call<'a>(&'a self, _: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
            Box::pin(async { Ok("sent".to_owned()) })
        }
    }
    const NOTES: &str = "CREATE TABLE notes (id TEXT PRIMARY KEY, category TEXT NOT NULL)";
    let host = SimpleHost::new("notes")
        .migration("notes", NOTES, NOTES)
        .category(|tx, note| {
            Box::pin(async move {
                let query = sqlx::query_scalar("SELECT category FROM notes WHERE id = $1");
                Ok(query.bind(&note.id).fetch_optional(tx).await?)
            })
        })
        .handle("send", |_, _| Box::pin(async { Ok("sent") }))
        .external("send", true, Sender);
    let mut tools = ToolRegistry::new();
    tools
        .register(ToolSpec::new(
            "send",
            "Send a note.",
            ToolMode::Immediate,
            json!({"type": "object"}),
        ))
        .expect("the tool registers");
    let store = Store::open("sqlite::memory:").await.expect("store");
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
        .await
        .expect("engine");
    let mut conn = store.read_connection().await.expect("connection");
    agents::upsert(
        &mut conn,
        "scribe",
        &AgentPolicy::new(["notes"]),
        OffsetDateTime::now_utc(),
    )
    .await
    .expect("agent");
    sqlx::query("INSERT INTO notes VALUES ('n1', 'notes')")
        .execute(&mut *conn)
        .await
        .expect("seed");
    engine
}

/// Statements one confirmation of the same journal item may take on PostgreSQL, where
/// each is a round trip to the server (sqlx runs them one at a time): 21, the SQLite
/// figure's 18 without its `BEGIN` (sqlx's PostgreSQL driver sends it unseen) and with
/// four of PostgreSQL's own: the read of the set's target before its lock, the
/// transaction's `lock_timeout`, the writer's and the target's advisory locks (one
/// statement), the consent chain's lock. Issue 55 wrote the plan's multi-row writes
/// with arrays (`UNNEST`): the same statements, each prepared once per connection
/// whatever its count of rows. 20 since the journal's handler reads the task once.
const PG_PER_CONFIRMATION: usize = 20;
/// Statements confirm-all of the 20 items left may take on PostgreSQL: 176; 156 since
/// the journal's handler reads the task once.
const PG_CONFIRM_ALL_OF_20: usize = 156;
/// Statements a wake of 25 deferred calls may take on PostgreSQL: 10 since the set and
/// its items are one statement there (a `WITH` inserting the set, then the items from
/// arrays; 11 before issue 55).
const PG_WAKE_OF_25: usize = 10;

/// The start of the wake's one read (see the FIXME below).
const WAKE_READ: &str = "SELECT a.categories AS categories, a.rules AS rules";
/// The start of the read of applied operations by id (see the FIXME below).
const APPLIED_READ: &str =
    "SELECT operation_id, message FROM applied_operations WHERE operation_id IN";

/// The distinct texts noted while `run` ran (see [`TEXTS`]).
async fn texts_of<T>(run: impl std::future::Future<Output = T>) -> (T, BTreeSet<String>) {
    TEXTS.lock().unwrap_or_else(|p| p.into_inner()).clear();
    NOTING.store(true, Ordering::SeqCst);
    let out = run.await;
    NOTING.store(false, Ordering::SeqCst);
    let texts = std::mem::take(&mut *TEXTS.lock().unwrap_or_else(|p| p.into_inner()));
    (out, texts.into_iter().collect())
}

/// The same paths on PostgreSQL (issue 55): a confirmation, confirm-all of 20 and a
/// wake of 25, each statement a round trip to the server, held under bounds measured
/// here; and each path prepares the same statement texts whatever its row count (a
/// wake of 5 and of 25, confirm-all of 4 and of 20): its multi-row writes bind arrays
/// (`UNNEST`), not a `VALUES` list per count. Runs when `ASSENT_TEST_POSTGRES_URL` is
/// set (and fails without it under `CI=true`, as the conformance suite does).
#[tokio::test]
async fn on_postgres_a_confirmation_and_a_wake_item_stay_within_their_statements() {
    let Some(server) = assent_tests::backends()
        .into_iter()
        .find_map(|backend| match backend {
            TestBackend::Postgres(url) => Some(url),
            TestBackend::Sqlite => None,
        })
    else {
        return;
    };
    let _alone = ALONE.lock().await;
    let counted = counter();
    let statements = |during: usize| counted.load(Ordering::SeqCst) - during;
    let app = TestApp::on(&TestBackend::Postgres(server)).await;
    let task = app.scene().await;

    let before = counted.load(Ordering::SeqCst);
    let (wake, wake_texts) = texts_of(app.wake_calls(&task, (0..25).map(priority).collect())).await;
    let wake_statements = statements(before);
    let set = wake.expect("woke").change_set.expect("queued");
    assert_eq!(set.items.len(), 25);

    let mut per_confirmation = Vec::new();
    for index in 0..5 {
        let before = counted.load(Ordering::SeqCst);
        app.engine
            .confirmations()
            .confirm_item(ItemRef::new(set.id, index), OffsetDateTime::now_utc())
            .await
            .expect("confirmed");
        per_confirmation.push(statements(before));
    }
    let before = counted.load(Ordering::SeqCst);
    let (all, all_texts) = texts_of(
        app.engine
            .confirmations()
            .confirm_all(set.id, OffsetDateTime::now_utc()),
    )
    .await;
    let confirm_all = statements(before);
    assert_eq!(all.expect("confirmed the rest").items.len() - 5, 20);

    // The same paths with fewer rows: a wake of 5, confirm-all of the 4 left after one.
    let (small_wake, small_wake_texts) =
        texts_of(app.wake_calls(&task, (25..30).map(priority).collect())).await;
    let small = small_wake.expect("woke").change_set.expect("queued");
    assert_eq!(small.items.len(), 5);
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(small.id, 0), OffsetDateTime::now_utc())
        .await
        .expect("confirmed");
    let (small_all, small_all_texts) = texts_of(
        app.engine
            .confirmations()
            .confirm_all(small.id, OffsetDateTime::now_utc()),
    )
    .await;
    small_all.expect("confirmed the rest");

    println!(
        "PostgreSQL statements (each a round trip): wake of 25 deferred calls {wake_statements}; one confirmation {per_confirmation:?}; confirm-all of 20 items {confirm_all} ({:.1} per item); distinct texts: wake of 25 {}, of 5 {}; confirm-all of 20 {}, of 4 {}",
        confirm_all as f64 / 20.0,
        wake_texts.len(),
        small_wake_texts.len(),
        all_texts.len(),
        small_all_texts.len(),
    );
    if std::env::var_os("SHOW_STATEMENTS").is_some() {
        println!("texts of confirm-all of 20: {all_texts:#?}");
    }
    for (path, many, few) in [
        ("a wake", &wake_texts, &small_wake_texts),
        ("confirm-all", &all_texts, &small_all_texts),
    ] {
        // FIXME: confirm-all's read of which operations were applied
        // (`change_sets::load_for_decision_with`) is still `IN ($1, …)`, a text per
        // count of items, on PostgreSQL; `= ANY($1)` of an array would make it one.
        // FIXME: likewise the wake's one read (`decisions::wake::read`) joins the
        // operations it may run at once with `IN ($4, …)`.
        let known =
            |text: &&String| !text.starts_with(APPLIED_READ) && !text.starts_with(WAKE_READ);
        let only_many: Vec<_> = many.difference(few).filter(known).collect();
        let only_few: Vec<_> = few.difference(many).filter(known).collect();
        assert!(
            only_many.is_empty() && only_few.is_empty(),
            "{path}'s statement texts depend on its count of rows: with more rows {only_many:#?}, with fewer {only_few:#?}"
        );
    }
    assert!(
        wake_statements <= PG_WAKE_OF_25,
        "a wake of 25 calls took {wake_statements} statements on PostgreSQL (bound {PG_WAKE_OF_25})"
    );
    let count = median(&per_confirmation);
    assert!(
        count <= PG_PER_CONFIRMATION,
        "a confirmation took {count} statements on PostgreSQL (median of {per_confirmation:?}; bound {PG_PER_CONFIRMATION})"
    );
    assert!(
        confirm_all <= PG_CONFIRM_ALL_OF_20,
        "confirm-all of 20 items took {confirm_all} statements on PostgreSQL (bound {PG_CONFIRM_ALL_OF_20})"
    );
}
