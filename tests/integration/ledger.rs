//! The execution ledger: external tools run through jobs, exactly once or visibly in
//! doubt, on SQLite and PostgreSQL, including executor processes killed at random.

use assent_confirm::ItemRef;
use assent_confirm::{
    ConfirmError, ConflictKind, Engine, ExecutionOutcome, JobSettings, Resolution,
};
use assent_domain::Target;
use assent_store::jobs::{self, Job, JobStatus};
use assent_store::{Store, agents, audit, change_feed};
use assent_tests::external::{self, CATEGORY, HttpHost, Receiver, TOOL};
use assent_tests::{Lcg, TestApp, TestBackend, backends, tool_calls};
use assent_tools::{AgentPolicy, AuditKind};
use serde_json::json;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration as StdDuration, Instant};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const AGENT: &str = "poster";

fn settings(lease_ms: i64) -> JobSettings {
    JobSettings {
        lease: Duration::milliseconds(lease_ms),
        attempt_limit: 2,
        backoff: Duration::seconds(1),
        max_backoff: Duration::seconds(1),
    }
}

async fn allow(store: &Store, categories: &[&str]) {
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(
        &mut conn,
        AGENT,
        &AgentPolicy::new(categories.iter().copied()),
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
}

/// A wake of the HTTP host proposing one note per text; the set's id.
async fn propose(engine: &Engine, run_key: &str, texts: &[&str], now: OffsetDateTime) -> Uuid {
    let calls: Vec<_> = texts
        .iter()
        .map(|text| (TOOL, json!({ "text": text })))
        .collect();
    let request = assent_confirm::WakeRequest::new(
        AGENT,
        Target::new("endpoint", "e1"),
        run_key,
        tool_calls(&calls),
    );
    let outcome = engine.wakes().wake(request, now).await.unwrap();
    outcome.change_set.expect("queued").id
}

/// Every effect the receiver has seen, counting repeats.
fn effects_so_far(receiver: &Receiver) -> usize {
    receiver.effects.lock().unwrap().values().sum()
}

async fn all_jobs(store: &Store) -> Vec<Job> {
    let mut conn = store.read_connection().await.unwrap();
    jobs::list(&mut conn, true, 10_000).await.unwrap()
}

async fn job(store: &Store, id: Uuid) -> Job {
    let mut conn = store.read_connection().await.unwrap();
    jobs::load(&mut conn, id).await.unwrap().expect("job")
}

/// The decision history the agent's next wake is shown.
async fn said(engine: &Engine) -> String {
    engine
        .confirmations()
        .history(AGENT, None, 20)
        .await
        .unwrap()
        .unwrap_or_default()
}

fn queued(outcome: &ExecutionOutcome) -> Uuid {
    match outcome {
        ExecutionOutcome::Queued { job_id, host } => {
            assert_eq!(host, external::HOST);
            *job_id
        }
        other => panic!("expected a queued job, got {other:?}"),
    }
}

#[tokio::test]
async fn a_process_without_the_host_confirms_and_the_host_runs_it_once() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::start(false, StdDuration::ZERO);
    let http = external::engine(
        app.store.clone(),
        HttpHost::new(&receiver.url, false, false),
        settings(30_000),
    )
    .await;
    allow(&app.store, &[CATEGORY]).await;
    let now = OffsetDateTime::now_utc();
    let set = propose(&http, "run-1", &["hello"], now).await;

    // The journal's engine knows neither the tool nor the host: it only records.
    let outcome = app
        .engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now)
        .await
        .unwrap();
    let id = queued(&outcome.execution);
    assert!(
        outcome.message().contains("Approved"),
        "{}",
        outcome.message()
    );
    assert_eq!(job(&app.store, id).await.status, JobStatus::Approved);
    assert_eq!(receiver.effects.lock().unwrap().len(), 0, "nothing ran yet");
    let history = |engine: &Engine| {
        let engine = engine.clone();
        async move {
            engine
                .confirmations()
                .history(AGENT, None, 20)
                .await
                .unwrap()
                .unwrap_or_default()
        }
    };
    let said = history(&app.engine).await;
    assert!(said.contains("— confirmed, not run yet"), "{said}");
    let again = app
        .engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now)
        .await;
    assert!(
        matches!(&again, Err(e) if e.conflict_kind() == Some(ConflictKind::AlreadyDecided)),
        "{again:?}"
    );

    // Another host's executor does not touch it.
    assert_eq!(app.engine.run_due_jobs(now).await.unwrap().claimed, 0);

    let mut conn = app.store.read_connection().await.unwrap();
    let before = change_feed::latest(&mut conn).await.unwrap();
    drop(conn);
    let run = http.run_due_jobs(now).await.unwrap();
    assert_eq!((run.claimed, run.applied), (1, 1), "{run:?}");
    let mut conn = app.store.read_connection().await.unwrap();
    let (written, _) = change_feed::since(&mut conn, before, 100).await.unwrap();
    assert_eq!(written, [set], "open pages learn of the run");
    drop(conn);
    let done = job(&app.store, id).await;
    assert_eq!(done.status, JobStatus::Applied);
    assert_eq!(done.result.as_deref(), Some("receiver said posted"));
    assert_eq!(done.attempts, 1);
    assert_eq!(receiver.count(done.operation_id.as_str()), 1);
    let said = history(&app.engine).await;
    assert!(said.contains("— confirmed, ran"), "{said}");
    assert_eq!(http.run_due_jobs(now).await.unwrap(), Default::default());
    assert_eq!(receiver.count(done.operation_id.as_str()), 1, "once");

    let mut conn = app.store.read_connection().await.unwrap();
    let records = audit::list(&mut conn, &audit::AuditFilter::Run("run-1".into()), 10)
        .await
        .unwrap();
    let kinds: Vec<_> = records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [AuditKind::Action, AuditKind::Result], "{records:?}");
    assert_eq!(records[1].success, Some(true));
}

#[tokio::test]
async fn a_lapsed_lease_is_in_doubt_until_a_person_settles_it() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::start(false, StdDuration::ZERO);
    let http = external::engine(
        app.store.clone(),
        HttpHost::new(&receiver.url, false, false),
        settings(1_000),
    )
    .await;
    allow(&app.store, &[CATEGORY]).await;
    let now = OffsetDateTime::now_utc();
    let set = propose(&http, "run-1", &["a", "b"], now).await;
    let result = http.confirmations().confirm_all(set, now).await.unwrap();
    assert_eq!(result.items.len(), 2);
    // An executor claims both and dies before any outcome.
    for _ in 0..2 {
        let mut tx = app.store.begin_claim().await.unwrap();
        let claimed = jobs::claim_next(tx.connection(), external::HOST, now, Duration::seconds(1))
            .await
            .unwrap();
        assert!(claimed.is_some());
        tx.commit().await.unwrap();
    }
    assert_eq!(
        http.run_due_jobs(now).await.unwrap(),
        Default::default(),
        "leased"
    );
    let later = now + Duration::seconds(2);
    let run = http.run_due_jobs(later).await.unwrap();
    assert_eq!((run.in_doubt, run.claimed), (2, 0), "{run:?}");
    let doubtful = all_jobs(&app.store).await;
    assert!(
        doubtful
            .iter()
            .all(|j| j.status == JobStatus::InDoubt && j.doubts == 1)
    );
    assert!(
        doubtful[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("may have happened")
    );
    assert_eq!(receiver.effects.lock().unwrap().len(), 0);
    let history = said(&app.engine).await;
    assert_eq!(
        history.matches("— confirmed, in doubt").count(),
        2,
        "{history}"
    );

    let happened = app
        .engine
        .resolve_job(doubtful[0].id, Resolution::Happened, later)
        .await
        .unwrap();
    assert_eq!(happened.status, JobStatus::Applied);
    let rerun = app
        .engine
        .resolve_job(doubtful[1].id, Resolution::Rerun, later)
        .await
        .unwrap();
    assert_eq!(rerun.status, JobStatus::Approved);
    let not_in_doubt = app
        .engine
        .resolve_job(doubtful[0].id, Resolution::Rerun, later)
        .await
        .unwrap_err();
    assert_eq!(
        not_in_doubt.conflict_kind(),
        Some(ConflictKind::NotInDoubt),
        "{not_in_doubt}"
    );
    let unknown = app
        .engine
        .resolve_job(Uuid::nil(), Resolution::Rerun, later)
        .await;
    assert!(
        matches!(unknown, Err(ConfirmError::JobNotFound(_))),
        "{unknown:?}"
    );

    let run = http.run_due_jobs(later).await.unwrap();
    assert_eq!((run.claimed, run.applied), (1, 1), "{run:?}");
    assert_eq!(
        receiver.count(doubtful[0].operation_id.as_str()),
        0,
        "a person said it happened"
    );
    assert_eq!(receiver.count(doubtful[1].operation_id.as_str()), 1);
}

#[tokio::test]
async fn an_idempotent_tool_in_doubt_is_reconciled_or_retried() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::start(true, StdDuration::ZERO);
    let http = external::engine(
        app.store.clone(),
        HttpHost::new(&receiver.url, true, true),
        settings(1_000),
    )
    .await;
    allow(&app.store, &[CATEGORY]).await;
    let now = OffsetDateTime::now_utc();
    let set = propose(&http, "run-1", &["a"], now).await;
    let id = queued(
        &http
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now)
            .await
            .unwrap()
            .execution,
    );
    let mut tx = app.store.begin_claim().await.unwrap();
    jobs::claim_next(tx.connection(), external::HOST, now, Duration::seconds(1))
        .await
        .unwrap()
        .expect("claimed");
    tx.commit().await.unwrap();
    // Reconciled: the receiver never saw it, so it runs again, once.
    let run = http.run_due_jobs(now + Duration::seconds(2)).await.unwrap();
    assert_eq!((run.in_doubt, run.rerun, run.applied), (1, 1, 1), "{run:?}");
    let done = job(&app.store, id).await;
    assert_eq!(
        (done.status, done.attempts, done.doubts),
        (JobStatus::Applied, 2, 1)
    );
    assert_eq!(receiver.count(done.operation_id.as_str()), 1);
}

#[tokio::test]
async fn retryable_errors_back_off_then_fail_and_a_person_retries_or_retracts() {
    let app = TestApp::spawn().await;
    // Nobody listens there: every call is a retryable connection error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let http = external::engine(
        app.store.clone(),
        HttpHost::new(&url, false, false),
        settings(30_000),
    )
    .await;
    allow(&app.store, &[CATEGORY]).await;
    let now = OffsetDateTime::now_utc();
    let set = propose(&http, "run-1", &["a"], now).await;
    let id = queued(
        &http
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), now)
            .await
            .unwrap()
            .execution,
    );

    let run = http.run_due_jobs(now).await.unwrap();
    assert_eq!((run.claimed, run.retried), (1, 1), "{run:?}");
    let waiting = job(&app.store, id).await;
    assert_eq!(waiting.status, JobStatus::Approved);
    assert!(
        waiting
            .last_error
            .as_deref()
            .unwrap()
            .contains("cannot connect"),
        "{waiting:?}"
    );
    assert_eq!(
        http.run_due_jobs(now).await.unwrap().claimed,
        0,
        "backing off"
    );
    let run = http.run_due_jobs(now + Duration::seconds(1)).await.unwrap();
    assert_eq!((run.claimed, run.failed), (1, 1), "{run:?}");
    assert_eq!(job(&app.store, id).await.status, JobStatus::Failed);

    let not_failed = app
        .engine
        .resolve_job(id, Resolution::Happened, now)
        .await
        .unwrap_err();
    assert_eq!(
        not_failed.conflict_kind(),
        Some(ConflictKind::NotInDoubt),
        "{not_failed}"
    );
    let retried = app.engine.retry_job(id, now).await.unwrap();
    assert_eq!(
        (retried.status, retried.attempt_limit),
        (JobStatus::Approved, 2 + 5)
    );
    let run = http.run_due_jobs(now + Duration::seconds(2)).await.unwrap();
    assert_eq!(
        (run.claimed, run.retried),
        (1, 1),
        "a fresh budget: {run:?}"
    );
    let not_failed = app.engine.retract_job(id, now).await.unwrap_err();
    assert_eq!(not_failed.conflict_kind(), Some(ConflictKind::NotFailed));
    // The text a person reads is kept as it was (the CLI and the API print it).
    assert_eq!(
        not_failed.to_string(),
        format!("conflict: job {id} is approved, not failed")
    );

    // A policy that no longer allows the endpoint fails the job at its claim, audited.
    allow(&app.store, &["other"]).await;
    let run = http.run_due_jobs(now + Duration::seconds(5)).await.unwrap();
    assert_eq!((run.claimed, run.failed), (1, 1), "{run:?}");
    let denied = job(&app.store, id).await;
    assert_eq!(denied.status, JobStatus::Failed);
    assert!(
        denied
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("denied by policy"),
        "{denied:?}"
    );
    let history = said(&app.engine).await;
    assert!(
        history.contains("— confirmed, failed: denied by policy"),
        "{history}"
    );
    let retracted = app.engine.retract_job(id, now).await.unwrap();
    assert_eq!(retracted.status, JobStatus::Retracted);
    let history = said(&app.engine).await;
    assert!(
        history.contains("— confirmed, retracted: will not run"),
        "{history}"
    );
    let mut conn = app.store.read_connection().await.unwrap();
    assert!(jobs::list(&mut conn, false, 10).await.unwrap().is_empty());
    assert_eq!(
        http.run_due_jobs(now + Duration::days(1))
            .await
            .unwrap()
            .claimed,
        0
    );
}

const ROUNDS: usize = 25;
const LEASE_MS: i64 = 400;

/// Kills an executor process at a random moment `ROUNDS` times while it runs jobs,
/// then checks every confirmed item took effect: exactly once with a deduping receiver
/// (an idempotent tool the host can reconcile), at least once with one that does not
/// dedupe, and then never more often than a person re-ran it from in doubt.
async fn crash_rounds(backend: &TestBackend, dedupe: bool, seed: u64) -> (usize, u32) {
    let receiver = Receiver::start(dedupe, StdDuration::from_millis(25));
    let (url, _dir) = backend.fresh_database().await;
    let store = Store::open(&url).await.unwrap();
    let engine = external::engine(
        store.clone(),
        HttpHost::new(&receiver.url, dedupe, dedupe),
        settings(LEASE_MS),
    )
    .await;
    allow(&store, &[CATEGORY]).await;
    let executor = env!("CARGO_BIN_EXE_ledger-executor");
    let mut random = Lcg(seed);
    let mut reruns: HashMap<Uuid, usize> = HashMap::new();
    let mut confirmed = 0;
    let settle_in_doubt = |reruns: &mut HashMap<Uuid, usize>, doubtful: Vec<Job>| {
        let engine = engine.clone();
        let mut ids = Vec::new();
        for job in doubtful {
            *reruns.entry(job.id).or_default() += 1;
            ids.push(job.id);
        }
        async move {
            for id in ids {
                engine
                    .resolve_job(id, Resolution::Rerun, OffsetDateTime::now_utc())
                    .await
                    .unwrap();
            }
        }
    };
    for round in 0..ROUNDS {
        let now = OffsetDateTime::now_utc();
        let texts = [format!("r{round}a"), format!("r{round}b")];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let set = propose(&engine, &format!("run-{round}"), &texts, now).await;
        engine
            .confirmations()
            .by("reviewer")
            .confirm_all(set, now)
            .await
            .unwrap();
        confirmed += 2;
        let effects_before = effects_so_far(&receiver);
        let mut child = Command::new(executor)
            .args([
                url.as_str(),
                receiver.url.as_str(),
                if dedupe { "1" } else { "0" },
                if dedupe { "1" } else { "0" },
                &LEASE_MS.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the executor starts");
        // The kill lands at a random moment after the executor's first call took
        // effect (the receiver answers 25 ms later): timed from the spawn instead, a
        // loaded machine started the executor after the kill, and no job went in doubt.
        let spawned = Instant::now();
        while effects_so_far(&receiver) == effects_before
            && spawned.elapsed() < StdDuration::from_secs(10)
        {
            tokio::time::sleep(StdDuration::from_millis(2)).await;
        }
        tokio::time::sleep(StdDuration::from_millis(random.below(40))).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        // The person: whatever is shown in doubt is run again (the worst choice when
        // it had happened, so every double effect below was shown in doubt first).
        let doubtful: Vec<Job> = all_jobs(&store)
            .await
            .into_iter()
            .filter(|j| j.status == JobStatus::InDoubt && !j.idempotent)
            .collect();
        settle_in_doubt(&mut reruns, doubtful).await;
    }
    // Drain: an executor that is not killed, until every job is applied.
    let started = Instant::now();
    loop {
        engine
            .run_due_jobs(OffsetDateTime::now_utc())
            .await
            .unwrap();
        let all = all_jobs(&store).await;
        let doubtful: Vec<Job> = all
            .iter()
            .filter(|j| j.status == JobStatus::InDoubt && !j.idempotent)
            .cloned()
            .collect();
        settle_in_doubt(&mut reruns, doubtful).await;
        if all.len() == confirmed && all.iter().all(|j| j.status == JobStatus::Applied) {
            break;
        }
        assert!(
            started.elapsed() < StdDuration::from_secs(60),
            "jobs left: {all:?}"
        );
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
    let all = all_jobs(&store).await;
    assert_eq!(all.len(), confirmed, "no approved job is lost");
    assent_tests::assert_proven(&store, "executors killed at random").await;
    let mut doubts = 0;
    for job in &all {
        let effects = receiver.count(job.operation_id.as_str());
        let shown = reruns.get(&job.id).copied().unwrap_or(0);
        doubts += job.doubts;
        if dedupe {
            assert_eq!(effects, 1, "exactly once: {job:?}");
        } else {
            assert!(effects >= 1, "at least once: {job:?}");
            assert!(
                effects <= 1 + shown,
                "{effects} effects but re-run from in doubt only {shown} time(s): {job:?}"
            );
        }
    }
    (all.len(), doubts)
}

#[tokio::test]
async fn executors_killed_at_random_lose_nothing_and_never_run_twice_silently() {
    for backend in backends() {
        let (jobs, doubts) = crash_rounds(&backend, true, 7).await;
        assert_eq!(jobs, 2 * ROUNDS);
        let (jobs, more_doubts) = crash_rounds(&backend, false, 11).await;
        assert_eq!(jobs, 2 * ROUNDS);
        // The kills did land inside the window (otherwise the test proves nothing).
        assert!(
            doubts > 0 && more_doubts > 0,
            "{backend:?}: kills left {doubts} and {more_doubts} jobs in doubt"
        );
    }
}

/// Devices A and B, each with the HTTP host's engine, and a note proposed on A and
/// synced to B; B rejects it first, A confirms it later. Returns A, B, A's engine, B's
/// engine, the set and A's job.
async fn a_confirms_what_b_rejected_earlier(
    receiver: &Receiver,
) -> (TestApp, TestApp, Engine, Engine, Uuid, Uuid) {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let host = || HttpHost::new(&receiver.url, false, false);
    let on_a = external::engine(a.store.clone(), host(), settings(30_000)).await;
    let on_b = external::engine(b.store.clone(), host(), settings(30_000)).await;
    allow(&a.store, &[CATEGORY]).await;
    allow(&b.store, &[CATEGORY]).await;
    let start = assent_tests::NOW;
    let set = propose(&on_a, "run-sync", &["pay"], start).await;
    a.send_to(&b).await;
    on_b.confirmations()
        .reject_item(
            ItemRef::new(set, 0),
            Some("not this one".into()),
            start + Duration::minutes(1),
        )
        .await
        .expect("B rejects");
    let confirmed = on_a
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), start + Duration::minutes(2))
        .await
        .expect("A confirms");
    let id = queued(&confirmed.execution);
    (a, b, on_a, on_b, set, id)
}

#[tokio::test]
async fn a_rejection_that_wins_a_sync_conflict_retracts_the_job_before_it_runs() {
    let receiver = Receiver::start(false, StdDuration::ZERO);
    let (a, b, on_a, _on_b, set, id) = a_confirms_what_b_rejected_earlier(&receiver).await;

    let report = b.send_to(&a).await;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(report.jobs_stopped, 1, "{report:?}");
    let stopped = job(&a.store, id).await;
    assert_eq!(stopped.status, JobStatus::Retracted);
    assert!(
        stopped
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("rejected") && e.contains("device-b")),
        "{stopped:?}"
    );
    // A's executor never runs it, now or later.
    let later = assent_tests::NOW + Duration::hours(1);
    assert_eq!(on_a.run_due_jobs(later).await.unwrap().claimed, 0);
    assert_eq!(receiver.effects.lock().unwrap().len(), 0, "never ran");
    let mut conn = a.store.read_connection().await.unwrap();
    let shown = assent_store::change_sets::require(&mut conn, set)
        .await
        .unwrap();
    assert_eq!(shown.items[0].status.as_str(), "rejected");
    let trail = audit::list(&mut conn, &audit::AuditFilter::Run("run-sync".into()), 10)
        .await
        .unwrap();
    assert!(
        trail.iter().any(|r| r.kind == AuditKind::Result
            && r.success == Some(false)
            && r.detail
                .as_deref()
                .is_some_and(|d| d.starts_with("not run:"))),
        "audited: {trail:?}"
    );
    drop(conn);

    // B learns that the item is external, and how its job stands; B never runs it.
    a.send_to(&b).await;
    let mut conn = b.store.read_connection().await.unwrap();
    let external = jobs::external_item(&mut conn, set, 0).await.unwrap();
    assert_eq!(external.map(|e| e.host), Some(external::HOST.to_owned()));
    let copy = jobs::load(&mut conn, id).await.unwrap().expect("a copy");
    assert_eq!(copy.status, JobStatus::Retracted);
    assert_eq!(copy.owner_device.as_deref(), Some("device-a"));
}

#[tokio::test]
async fn a_job_that_ran_before_the_losing_sync_goes_in_doubt_and_never_runs_again() {
    let receiver = Receiver::start(false, StdDuration::ZERO);
    let (a, b, on_a, on_b, set, id) = a_confirms_what_b_rejected_earlier(&receiver).await;
    let ran = on_a
        .run_due_jobs(assent_tests::NOW + Duration::minutes(2))
        .await
        .unwrap();
    assert_eq!(ran.applied, 1, "{ran:?}");

    b.send_to(&a).await;
    let doubted = job(&a.store, id).await;
    assert_eq!(doubted.status, JobStatus::InDoubt, "{doubted:?}");
    let later = assent_tests::NOW + Duration::hours(1);
    let run = on_a.run_due_jobs(later).await.unwrap();
    assert_eq!((run.claimed, run.rerun), (0, 0), "{run:?}");
    let rerun = on_a.resolve_job(id, Resolution::Rerun, later).await;
    assert!(
        matches!(&rerun, Err(e) if e.conflict_kind() == Some(ConflictKind::NoLongerConfirmed)),
        "{rerun:?}"
    );
    assert_eq!(
        receiver.count(doubted.operation_id.as_str()),
        1,
        "ran once, never again"
    );
    // It did happen: a person may say so.
    let settled = on_a
        .resolve_job(id, Resolution::Happened, later)
        .await
        .unwrap();
    assert_eq!(settled.status, JobStatus::Applied);

    // On B the copy is shown but cannot be settled there.
    a.send_to(&b).await;
    let elsewhere = on_b.resolve_job(id, Resolution::Happened, later).await;
    assert!(
        matches!(&elsewhere, Err(e) if e.conflict_kind() == Some(ConflictKind::RunByOtherDevice)
            && e.to_string().contains("device-a")),
        "{elsewhere:?}"
    );
    let mut conn = b.store.read_connection().await.unwrap();
    let shown = assent_store::change_sets::require(&mut conn, set)
        .await
        .unwrap();
    assert_eq!(shown.items[0].status.as_str(), "rejected");
}
