//! Items of a service's own transactional tool decided in a process that has none of
//! its code (the CLI, the review server, another service): the decision and a job
//! commit there, and the service's worker applies the job in its claim's transaction,
//! exactly once, even when the worker is killed at random; on SQLite and PostgreSQL.

use assent_confirm::ItemRef;
use assent_confirm::{ConfirmError, Engine, ExecutionOutcome, JobSettings};
use assent_domain::ChangeItemStatus;
use assent_store::jobs::{self, JobStatus};
use assent_store::{Store, agents, audit, change_sets};
use assent_tests::book::{self, AGENT, HOST};
use assent_tests::{Lcg, TestBackend, backends};
use assent_tools::{AgentPolicy, AuditKind};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use uuid::Uuid;

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// The book service's engine and a reviewer's engine on one fresh database.
async fn two_processes(backend: &TestBackend) -> (Store, Engine, Engine, tempfile::TempDir) {
    let (url, dir) = backend.fresh_database().await;
    let store = Store::open(&url).await.unwrap();
    let service = book::engine(
        store.clone(),
        book::host(Duration::ZERO, None),
        JobSettings::default(),
    )
    .await;
    let reviewer = book::elsewhere(store.clone()).await;
    (store, service, reviewer, dir)
}

fn queued_for(outcome: &ExecutionOutcome) -> &str {
    match outcome {
        ExecutionOutcome::Queued { host, .. } => host,
        other => panic!("expected a queued job, got {other:?}"),
    }
}

async fn item_status(store: &Store, set: Uuid, index: usize) -> ChangeItemStatus {
    let mut conn = store.read_connection().await.unwrap();
    change_sets::require(&mut conn, set).await.unwrap().items[index].status
}

async fn set_jobs(store: &Store, set: Uuid) -> Vec<jobs::Job> {
    let mut conn = store.read_connection().await.unwrap();
    jobs::for_change_set(&mut conn, set).await.unwrap()
}

#[tokio::test]
async fn an_item_of_another_host_is_confirmed_anywhere_and_applied_once_by_its_worker() {
    for backend in backends() {
        let (store, service, reviewer, _dir) = two_processes(&backend).await;
        let set = book::propose(&service, "L1", "run-1", &[100]).await;

        let confirmed = reviewer
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now())
            .await
            .unwrap();
        assert_eq!(queued_for(&confirmed.execution), HOST);
        assert_eq!(
            item_status(&store, set, 0).await,
            ChangeItemStatus::Confirmed
        );
        assert!(
            book::booked(&store).await.is_empty(),
            "nothing runs where it was decided"
        );
        let before = reviewer.confirmations().outcome(set).await.unwrap();
        assert!(!before.settled, "{before:?}");

        // The reviewer's process has no book handler: its executor leaves the job alone.
        assert_eq!(reviewer.run_due_jobs(now()).await.unwrap().claimed, 0);
        let run = service.worker().run_once(now(), false).await.unwrap();
        assert_eq!((run.claimed, run.applied), (1, 1), "{backend:?}");
        let booked = book::booked(&store).await;
        assert_eq!(booked.len(), 1);
        assert_eq!(booked[0].1, 1);
        let after = reviewer.confirmations().outcome(set).await.unwrap();
        assert!(after.settled, "{after:?}");
        assert_eq!(after.items[0].result.as_deref(), Some("Booked 100 cents."));
        let job = &set_jobs(&store, set).await[0];
        assert_eq!((job.status, job.attempts), (JobStatus::Applied, 1));
        assert_eq!(job.operation_id.as_str(), booked[0].0);

        // Applied means applied: another round, and another worker, do nothing.
        assert_eq!(
            service
                .worker()
                .run_once(now(), false)
                .await
                .unwrap()
                .claimed,
            0
        );
        assert_eq!(book::booked(&store).await.len(), 1);
        let history = reviewer
            .confirmations()
            .history(AGENT, None, 10)
            .await
            .unwrap()
            .unwrap();
        assert!(history.contains("— confirmed, ran"), "{history}");
        // The audit trail has the action and the handler's result, as in-process.
        let mut conn = store.read_connection().await.unwrap();
        let records = audit::list(&mut conn, &audit::AuditFilter::All, 10)
            .await
            .unwrap();
        assert!(records.iter().any(|r| r.kind == AuditKind::Action));
        assert!(
            records
                .iter()
                .any(|r| r.kind == AuditKind::Result && r.success == Some(true))
        );
    }
}

#[tokio::test]
async fn an_edit_elsewhere_is_checked_against_the_schema_the_host_stored() {
    for backend in backends() {
        let (store, service, reviewer, _dir) = two_processes(&backend).await;
        let set = book::propose(&service, "L1", "run-1", &[100]).await;
        let person = reviewer.confirmations();
        for wrong in [
            json!({"cents": -5}),
            json!({"cents": 7, "memo": "x"}),
            json!({}),
        ] {
            let error = person
                .edit_and_confirm(ItemRef::new(set, 0), wrong.clone(), now())
                .await
                .unwrap_err();
            assert!(
                matches!(error, ConfirmError::InvalidArgs { .. }),
                "{wrong}: {error}"
            );
        }
        assert_eq!(item_status(&store, set, 0).await, ChangeItemStatus::Pending);
        assert!(
            set_jobs(&store, set).await.is_empty(),
            "a refused edit writes nothing"
        );

        let edited = person
            .edit_and_confirm(ItemRef::new(set, 0), json!({"cents": 250}), now())
            .await
            .unwrap();
        assert_eq!(queued_for(&edited.execution), HOST);
        service.worker().run_once(now(), false).await.unwrap();
        let cents: i64 = sqlx::query_scalar("SELECT cents FROM book_entries")
            .fetch_one(
                store
                    .read_connection()
                    .await
                    .expect("a read connection")
                    .connection(),
            )
            .await
            .unwrap();
        assert_eq!(cents, 250, "the person's edit is what ran");
    }
}

#[tokio::test]
async fn an_item_of_a_host_that_never_registered_says_so() {
    let backend = TestBackend::Sqlite;
    let (url, _dir) = backend.fresh_database().await;
    let store = Store::open(&url).await.unwrap();
    // Built without `Engine::open`: its catalog never reached the database.
    let unregistered = Engine::new(
        store.clone(),
        std::sync::Arc::new(book::registry()),
        std::sync::Arc::new(book::host(Duration::ZERO, None)),
    );
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new([book::CATEGORY]), now())
        .await
        .unwrap();
    drop(conn);
    let set = book::propose(&unregistered, "L1", "run-1", &[100]).await;
    let reviewer = book::elsewhere(store.clone()).await;
    let error = reviewer
        .confirmations()
        .edit_and_confirm(ItemRef::new(set, 0), json!({"cents": 5}), now())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("host \"book\" has never registered its tools in this database"),
        "{text}"
    );
    assert_eq!(item_status(&store, set, 0).await, ChangeItemStatus::Pending);
    // Confirming it as proposed needs no schema: its job waits for the host.
    let confirmed = reviewer
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    assert_eq!(queued_for(&confirmed.execution), HOST);
}

#[tokio::test]
async fn the_hosts_own_process_still_applies_at_once() {
    let (store, service, _reviewer, _dir) = two_processes(&TestBackend::Sqlite).await;
    let set = book::propose(&service, "L1", "run-1", &[100]).await;
    let confirmed = service
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    assert!(
        matches!(confirmed.execution, ExecutionOutcome::Applied { .. }),
        "{:?}",
        confirmed.execution
    );
    assert_eq!(book::booked(&store).await.len(), 1);
    assert!(
        set_jobs(&store, set).await.is_empty(),
        "no job for an applied item"
    );
}

#[tokio::test]
async fn confirm_all_elsewhere_queues_every_item_and_the_worker_applies_them() {
    let (store, service, reviewer, _dir) = two_processes(&TestBackend::Sqlite).await;
    let set = book::propose(&service, "L1", "run-1", &[1, 2, 3]).await;
    let all = reviewer
        .confirmations()
        .confirm_all(set, now())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 3);
    assert_eq!(set_jobs(&store, set).await.len(), 3);
    let run = service.worker().run_once(now(), false).await.unwrap();
    assert_eq!(run.applied, 3);
    assert_eq!(book::booked(&store).await.len(), 3);
}

#[tokio::test]
async fn a_denial_at_run_time_fails_the_job_for_a_person_who_may_retry_it() {
    let (store, service, reviewer, _dir) = two_processes(&TestBackend::Sqlite).await;
    let set = book::propose(&service, "L1", "run-1", &[100]).await;
    reviewer
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new(["elsewhere"]), now())
        .await
        .unwrap();
    drop(conn);
    let run = service.worker().run_once(now(), false).await.unwrap();
    assert_eq!(run.failed, 1);
    let job = set_jobs(&store, set).await.remove(0);
    assert_eq!(job.status, JobStatus::Failed);
    assert!(
        job.last_error
            .as_deref()
            .unwrap_or_default()
            .starts_with("denied by policy"),
        "{job:?}"
    );
    assert!(book::booked(&store).await.is_empty());

    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(&mut conn, AGENT, &AgentPolicy::new([book::CATEGORY]), now())
        .await
        .unwrap();
    drop(conn);
    reviewer.retry_job(job.id, now()).await.unwrap();
    service.worker().run_once(now(), false).await.unwrap();
    assert_eq!(book::booked(&store).await.len(), 1);
}

#[tokio::test]
async fn the_agent_awaiting_the_outcome_learns_it_within_a_second_of_the_decision() {
    let (_store, service, reviewer, _dir) = two_processes(&TestBackend::Sqlite).await;
    let set = book::propose(&service, "L1", "run-1", &[100]).await;
    let stop = assent_confirm::CancellationToken::new();
    let worker = tokio::spawn({
        let worker = service.worker().poll_interval(Duration::from_millis(50));
        let stop = stop.clone();
        async move { worker.run(stop.cancelled()).await }
    });
    let agent = tokio::spawn({
        let confirmations = service.confirmations();
        async move {
            let outcome = confirmations
                .wait_outcome(set, Duration::from_secs(30))
                .await
                .unwrap();
            (outcome, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let decided = Instant::now();
    reviewer
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    let (outcome, returned) = agent.await.unwrap();
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert!(outcome.settled, "{outcome:?}");
    assert_eq!(
        outcome.items[0].result.as_deref(),
        Some("Booked 100 cents.")
    );
    assert!(
        returned.duration_since(decided) < Duration::from_secs(1),
        "the agent learnt it {:?} after the decision",
        returned.duration_since(decided)
    );
}

const ROUNDS: usize = 25;
const PAUSE_MS: u64 = 30;

/// Kills the book's worker process at a random moment `ROUNDS` times while it applies
/// jobs confirmed in another process, then checks every confirmed item was booked
/// exactly once, with no idempotency key: the handler's writes and the job's `applied`
/// commit together or not at all.
async fn crash_rounds(backend: &TestBackend, seed: u64) {
    let (url, dir) = backend.fresh_database().await;
    let store = Store::open(&url).await.unwrap();
    let drained_log = dir.path().join("drained.log");
    let service = book::engine(
        store.clone(),
        book::host(Duration::ZERO, Some(drained_log.clone())),
        JobSettings::default(),
    )
    .await;
    let reviewer = book::elsewhere(store.clone()).await;
    let started_log = dir.path().join("started.log");
    let worker = env!("CARGO_BIN_EXE_ledger-executor");
    let mut random = Lcg(seed);
    let lines = |path: &std::path::Path| {
        std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
    };
    for round in 0..ROUNDS {
        let set = book::propose(&service, "L1", &format!("run-{round}"), &[10, 20]).await;
        reviewer
            .confirmations()
            .by("reviewer")
            .confirm_all(set, now())
            .await
            .unwrap();
        let mut child = Command::new(worker)
            .args([
                "transactional",
                url.as_str(),
                &started_log.display().to_string(),
                &PAUSE_MS.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the worker starts");
        // The kill lands at a random moment after the worker started its first handler
        // (it logs each start, then pauses inside the handler's transaction): timed
        // from the spawn instead, a loaded machine started the worker after the kill.
        let before = lines(&started_log);
        let spawned = Instant::now();
        while lines(&started_log) == before && spawned.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(random.below(3 * PAUSE_MS))).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
    }
    // Drain with a worker that is not killed.
    let started = Instant::now();
    loop {
        service.run_due_jobs(now()).await.unwrap();
        let mut conn = store.read_connection().await.unwrap();
        let all = jobs::list(&mut conn, true, 10_000).await.unwrap();
        if all.len() == 2 * ROUNDS && all.iter().all(|j| j.status == JobStatus::Applied) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "jobs left: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let booked = book::booked(&store).await;
    assert_eq!(booked.len(), 2 * ROUNDS, "{backend:?}: every item booked");
    for (operation, count) in &booked {
        assert_eq!(*count, 1, "{backend:?}: {operation} booked {count} times");
    }
    let mut conn = store.read_connection().await.unwrap();
    let all = jobs::list(&mut conn, true, 10_000).await.unwrap();
    assert!(
        all.iter().all(|j| j.doubts == 0),
        "a transactional job is never in doubt"
    );
    // Some kills landed between a handler's start and its commit (otherwise the test
    // proves nothing): every start either booked its one entry or was killed.
    let starts = lines(&started_log) + lines(&drained_log);
    assert!(
        starts > booked.len(),
        "{backend:?}: no kill landed inside a handler's transaction ({starts} starts)"
    );
    assent_tests::assert_proven(&store, &format!("{backend:?}: workers killed at random")).await;
}

#[tokio::test]
async fn workers_killed_at_random_apply_each_item_exactly_once() {
    for (seed, backend) in backends().iter().enumerate() {
        crash_rounds(backend, 7 + seed as u64).await;
    }
}

#[tokio::test]
async fn the_worker_also_delivers_the_webhooks_its_decisions_raise() {
    use assent_store::webhooks::{self, NewSubscription};
    use assent_tests::receiver::{Receiver, python};
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let (store, service, reviewer, _dir) = two_processes(&TestBackend::Sqlite).await;
    let secret = assent_webhooks::generate_secret();
    let mut conn = store.read_connection().await.unwrap();
    let subscription = NewSubscription {
        url: receiver.url("worker"),
        events: vec![],
        format: "standard".to_owned(),
        agent_id: None,
        secret: secret.clone(),
    };
    webhooks::insert_subscription(&mut conn, &subscription, now())
        .await
        .unwrap();
    drop(conn);
    receiver.configure("worker", &secret, 0, 0, 0);

    let set = book::propose(&service, "L1", "run-1", &[100]).await;
    reviewer
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now())
        .await
        .unwrap();
    let stop = assent_confirm::CancellationToken::new();
    let worker = tokio::spawn({
        let worker = service
            .worker()
            .poll_interval(Duration::from_millis(50))
            .webhooks(assent_webhooks::SenderConfig {
                poll_interval: Duration::from_millis(50),
                ..assent_webhooks::SenderConfig::default()
            });
        let stop = stop.clone();
        async move { worker.run(stop.cancelled()).await }
    });
    let started = Instant::now();
    let types = loop {
        let types: Vec<String> = receiver
            .received_by("worker")
            .iter()
            .filter_map(|d| d["body"]["type"].as_str().map(str::to_owned))
            .collect();
        if types.len() >= 2 || started.elapsed() > Duration::from_secs(30) {
            break types;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert!(types.contains(&"changeSet.created".to_owned()), "{types:?}");
    assert!(
        types.contains(&"changeSet.resolved".to_owned()),
        "{types:?}"
    );
    assert_eq!(book::booked(&store).await.len(), 1, "and the job ran");
}

#[tokio::test]
async fn an_approval_made_for_another_definition_of_the_tool_does_not_run() {
    for backend in backends() {
        let (store, service, reviewer, _dir) = two_processes(&backend).await;
        let set = book::propose(&service, "L1", "run-1", &[100]).await;
        reviewer
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now())
            .await
            .unwrap();
        // The service is redeployed with the tool described anew before its worker ran
        // the job: the person approved the old definition, not this one.
        let mut tools = assent_tools::ToolRegistry::new();
        let schema = json!({"type": "object", "required": ["cents"],
            "properties": {"cents": {"type": "integer", "minimum": 1}}});
        tools
            .register(assent_tools::ToolSpec::new(
                book::TOOL,
                "Book an entry, and mail the customer.",
                assent_tools::ToolMode::Deferred,
                schema,
            ))
            .unwrap();
        let redeployed = Engine::open(
            store.clone(),
            std::sync::Arc::new(tools),
            std::sync::Arc::new(book::host(Duration::ZERO, None)),
        )
        .await
        .unwrap();
        let run = redeployed.run_due_jobs(now()).await.unwrap();
        assert_eq!(run.failed, 1, "{backend:?}: {run:?}");
        assert!(book::booked(&store).await.is_empty(), "nothing ran");
        let job = set_jobs(&store, set).await.remove(0);
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(
            job.last_error.as_deref(),
            Some(assent_confirm::APPROVAL_CHANGED)
        );
        let mut conn = store.read_connection().await.unwrap();
        let records = audit::list(&mut conn, &audit::AuditFilter::All, 20)
            .await
            .unwrap();
        assert!(
            records.iter().any(|r| r.kind == AuditKind::PolicyDenied
                && r.detail.as_deref() == Some(assent_confirm::APPROVAL_CHANGED)),
            "the refusal is audited"
        );
    }
}

/// Every item of `sets` is decided whole or not at all: its status, its one final
/// decision and its job together. Every confirmation a reviewer was answered (a line of
/// `confirmed_log`) is among the decided. Returns how many items are decided.
async fn whole_or_nothing(store: &Store, sets: &[Uuid], confirmed_log: &std::path::Path) -> usize {
    let answered = std::fs::read_to_string(confirmed_log).unwrap_or_default();
    let mut conn = store.read_connection().await.unwrap();
    let mut decided = 0;
    for &set in sets {
        let items = change_sets::require(&mut conn, set).await.unwrap().items;
        let decisions = assent_store::decisions::for_change_set(&mut conn, set)
            .await
            .unwrap();
        let jobs = jobs::for_change_set(&mut conn, set).await.unwrap();
        for (index, item) in items.iter().enumerate() {
            let confirmed = item.status == ChangeItemStatus::Confirmed;
            let decisions = decisions.iter().filter(|d| d.item_index == index).count();
            let jobs = jobs.iter().filter(|j| j.item_index == index).count();
            assert_eq!(
                (decisions, jobs),
                if confirmed { (1, 1) } else { (0, 0) },
                "item {index} of {set} is {:?} with {decisions} decision(s) and {jobs} job(s)",
                item.status
            );
            decided += usize::from(confirmed);
            if answered.contains(&format!("{set} {index}\n")) {
                assert!(confirmed, "item {index} of {set} was answered, then lost");
            }
        }
    }
    decided
}

#[tokio::test]
async fn reviewers_killed_while_confirming_at_once_keep_every_answered_decision_whole() {
    const SETS: usize = 8;
    const ITEMS: usize = 25;
    for (seed, backend) in backends().iter().enumerate() {
        let (url, dir) = backend.fresh_database().await;
        let store = Store::open(&url).await.unwrap();
        let service = book::engine(
            store.clone(),
            book::host(Duration::ZERO, None),
            JobSettings::default(),
        )
        .await;
        let amounts: Vec<i64> = (1..=ITEMS as i64).collect();
        let mut sets = Vec::new();
        for n in 0..SETS {
            sets.push(
                book::propose(&service, &format!("L{n}"), &format!("run-{n}"), &amounts).await,
            );
        }
        let log = dir.path().join("confirmed.log");
        let reviewer = || {
            Command::new(env!("CARGO_BIN_EXE_ledger-executor"))
                .args(["confirm", url.as_str(), &log.display().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the reviewer starts")
        };
        let mut random = Lcg(31 + seed as u64);
        let mut kills_midway = 0;
        for _ in 0..8 {
            let mut child = reviewer();
            // Wide enough that a kill lands after the first decisions on a loaded
            // machine too (a reviewer process starts, opens the store and decides), and
            // short of the whole run (200 items).
            tokio::time::sleep(Duration::from_millis(40 + random.below(260))).await;
            child.kill().expect("SIGKILL");
            child.wait().expect("reaped");
            let decided = whole_or_nothing(&store, &sets, &log).await;
            kills_midway += usize::from(decided > 0 && decided < SETS * ITEMS);
        }
        let status = reviewer().wait().expect("the last reviewer ends");
        assert!(status.success(), "{backend:?}: {status}");
        assert_eq!(
            whole_or_nothing(&store, &sets, &log).await,
            SETS * ITEMS,
            "{backend:?}: every item decided in the end"
        );
        // Otherwise the test proves nothing.
        assert!(
            kills_midway > 0,
            "{backend:?}: no kill landed while the reviewers were confirming"
        );
        assent_tests::assert_proven(&store, &format!("{backend:?}: reviewers killed")).await;
    }
}
