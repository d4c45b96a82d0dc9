//! A service's own rows in the decision's transaction (issue 54, point 3), on every
//! backend: the `_in` variants decide in the caller's write transaction (commit: the
//! decision and the service's rows stand together; roll back: neither), the host's
//! `on_decided` is told every verdict there and its failure rolls the decision back,
//! and the plain methods under the service's own write transaction end in `WriterBusy`.

use assent_confirm::{
    ConfirmError, Decided, Engine, ExternalCall, ExternalError, ExternalHandler, ItemRef,
    ItemResult, SimpleHost, WakeRequest,
};
use assent_domain::{ChangeItemStatus, Target, Uuid, Verdict};
use assent_store::{Store, StoreError, StoreOptions, change_sets};
use assent_tests::{NOW, TestBackend, backends, tool_calls};
use assent_tools::{BoxFuture, ToolMode, ToolRegistry, ToolSpec};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const INVOICES: &str = "CREATE TABLE invoices (id TEXT PRIMARY KEY, category TEXT NOT NULL, \
    refunded_cents BIGINT NOT NULL)";
const SEED: &str = "INSERT INTO invoices VALUES ('INV-1', 'billing', 0), ('INV-2', 'billing', 0)";
/// The service's own rows, written by the caller beside a decision.
const DISPUTES: &str = "CREATE TABLE disputes (invoice TEXT NOT NULL, note TEXT NOT NULL)";
/// What the host's `on_decided` writes.
const DECIDED: &str = "CREATE TABLE decided_log (item TEXT NOT NULL, verdict TEXT NOT NULL, \
    tool TEXT NOT NULL, args TEXT NOT NULL, edited BIGINT NOT NULL, decided_by TEXT, \
    reason TEXT)";
const AGENT: &str = "billing-agent";
const HOST: &str = "invoicing";

/// An external handler that is never asked (the immediate call runs through the
/// host's handler after the commit); it marks `notify_customer` as external.
struct Outside;

impl ExternalHandler for Outside {
    fn call<'a>(&'a self, _call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        Box::pin(async { Ok("notified".to_owned()) })
    }
}

/// An invoicing service on a fresh database: `refund_invoice` (deferred, in the
/// database) and `notify_customer` (immediate, outside it, counted in `outside`); its
/// `on_decided` logs each decision, then fails while `fail` is set.
struct Service {
    _dir: tempfile::TempDir,
    store: Store,
    engine: Engine,
    fail: Arc<AtomicBool>,
    outside: Arc<AtomicUsize>,
}

impl Service {
    async fn on(backend: &TestBackend, busy_timeout: Option<Duration>) -> Self {
        let (url, dir) = backend.fresh_database().await;
        let mut options = StoreOptions::new(url);
        if let Some(timeout) = busy_timeout {
            options.busy_timeout = timeout;
        }
        let store = Store::open_with(options).await.expect("store opens");
        let fail = Arc::new(AtomicBool::new(false));
        let outside = Arc::new(AtomicUsize::new(0));
        let (failing, counted) = (fail.clone(), outside.clone());
        let host = SimpleHost::new(HOST)
            .migration("invoices", INVOICES, INVOICES)
            .migration("the invoices of the test", SEED, SEED)
            .migration("disputes", DISPUTES, DISPUTES)
            .migration("decided_log", DECIDED, DECIDED)
            .handle("refund_invoice", |tx, call| {
                Box::pin(async move {
                    let cents = call.args["amountCents"].as_i64().ok_or("no amount")?;
                    sqlx::query(
                        "UPDATE invoices SET refunded_cents = refunded_cents + $1 WHERE id = $2",
                    )
                    .bind(cents)
                    .bind(&call.target.target.id)
                    .execute(tx)
                    .await?;
                    Ok(format!("Refunded {cents} cents."))
                })
            })
            .handle("notify_customer", move |_conn, _call| {
                let counted = counted.clone();
                Box::pin(async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    Ok("notified")
                })
            })
            .external("notify_customer", true, Outside)
            .category(|tx, invoice| {
                Box::pin(async move {
                    let query = sqlx::query_scalar("SELECT category FROM invoices WHERE id = $1");
                    Ok(query.bind(&invoice.id).fetch_optional(tx).await?)
                })
            })
            .on_decided(move |tx, decided| {
                let failing = failing.load(Ordering::SeqCst);
                Box::pin(async move {
                    log_decision(tx, decided).await?;
                    if failing {
                        return Err("the ledger is closed for the night".into());
                    }
                    Ok(())
                })
            });
        let mut tools = ToolRegistry::new();
        let refund = json!({"type": "object", "required": ["amountCents"],
            "properties": {"amountCents": {"type": "integer", "minimum": 1}}});
        tools
            .register(ToolSpec::new(
                "refund_invoice",
                "Refund an invoice.",
                ToolMode::Deferred,
                refund,
            ))
            .unwrap();
        tools
            .register(ToolSpec::new(
                "notify_customer",
                "Tell the customer.",
                ToolMode::Immediate,
                json!({"type": "object"}),
            ))
            .unwrap();
        let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
            .await
            .expect("engine opens");
        engine
            .set_categories(AGENT, &["billing".to_owned()], NOW)
            .await
            .unwrap();
        Self {
            _dir: dir,
            store,
            engine,
            fail,
            outside,
        }
    }

    fn request(&self, invoice: &str, amounts: &[i64]) -> WakeRequest {
        let calls: Vec<(&str, Value)> = amounts
            .iter()
            .map(|cents| ("refund_invoice", json!({"amountCents": cents})))
            .collect();
        WakeRequest::new(
            AGENT,
            Target::new("invoice", invoice),
            format!("run-{}", Uuid::new_v4()),
            tool_calls(&calls),
        )
    }

    /// A set proposing a refund of each of `amounts` on `invoice`.
    async fn propose(&self, invoice: &str, amounts: &[i64]) -> Uuid {
        let wakes = self.engine.wakes();
        let wake = wakes.wake(self.request(invoice, amounts), NOW).await;
        let set = wake.unwrap().change_set.expect("a set");
        assert_eq!(set.items.len(), amounts.len());
        set.id
    }

    async fn number(&self, sql: &'static str) -> i64 {
        let mut conn = self.store.read_connection().await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut *conn).await.unwrap()
    }

    async fn refunded(&self, invoice: &str) -> i64 {
        let mut conn = self.store.read_connection().await.unwrap();
        sqlx::query_scalar("SELECT refunded_cents FROM invoices WHERE id = $1")
            .bind(invoice)
            .fetch_one(&mut *conn)
            .await
            .unwrap()
    }

    async fn disputes(&self) -> i64 {
        self.number("SELECT COUNT(*) FROM disputes").await
    }

    async fn logged(&self) -> i64 {
        self.number("SELECT COUNT(*) FROM decided_log").await
    }

    async fn status(&self, set: Uuid, index: usize) -> ChangeItemStatus {
        let mut conn = self.store.read_connection().await.unwrap();
        let set = change_sets::require(&mut conn, set).await.unwrap();
        set.items[index].status
    }

    /// `on_decided`'s rows, sorted.
    async fn log(&self) -> Vec<Logged> {
        let mut conn = self.store.read_connection().await.unwrap();
        let mut rows: Vec<Logged> =
            sqlx::query_as("SELECT verdict, args, edited, decided_by, reason FROM decided_log")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        rows.sort();
        rows
    }
}

/// A row of `on_decided`'s log: verdict, arguments, edited, decided by, reason.
type Logged = (String, String, i64, Option<String>, Option<String>);

/// What the host's hook writes: one row per decision it is told of.
async fn log_decision(
    tx: &mut assent_store::Connection,
    decided: Decided<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO decided_log (item, verdict, tool, args, edited, decided_by, reason) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(decided.item.to_string())
    .bind(decided.verdict.to_string())
    .bind(decided.tool_name)
    .bind(decided.args.to_string())
    .bind(i64::from(decided.edited))
    .bind(decided.decided_by)
    .bind(decided.reason)
    .execute(tx)
    .await
    .map(drop)
}

/// The service's own row, written on the caller's transaction.
async fn dispute(tx: &mut assent_store::WriteTx, note: &str) {
    sqlx::query("INSERT INTO disputes (invoice, note) VALUES ('INV-1', $1)")
        .bind(note)
        .execute(tx.connection())
        .await
        .unwrap();
}

fn is_hook_failure(error: &ConfirmError) -> bool {
    matches!(error, ConfirmError::DecisionHookFailed { host, source }
        if host == HOST && source.to_string() == "the ledger is closed for the night")
}

#[tokio::test]
async fn a_rejection_and_the_services_rows_commit_together_or_not_at_all() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let target = Target::new("invoice", "INV-1");
        let people = service.engine.confirmations();

        let set = service.propose("INV-1", &[2500]).await;
        let mut tx = service.store.begin_write_on(&target).await.unwrap();
        dispute(&mut tx, "before the rejection").await;
        let decision = people
            .reject_item_in(
                &mut tx,
                ItemRef::new(set, 0),
                Some("wrong customer".into()),
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(decision.verdict, Verdict::Rejected);
        dispute(&mut tx, "after the rejection").await;
        tx.commit().await.unwrap();
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Rejected);
        assert_eq!(service.disputes().await, 2, "{backend:?}");
        assert_eq!(
            service.logged().await,
            1,
            "on_decided wrote in the same commit"
        );

        // Rolled back: neither the rejection nor the service's row.
        let set = service.propose("INV-1", &[300]).await;
        let mut tx = service.store.begin_write().await.unwrap();
        dispute(&mut tx, "rolled back").await;
        people
            .reject_item_in(&mut tx, ItemRef::new(set, 0), None, NOW)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Pending);
        assert_eq!(service.disputes().await, 2, "{backend:?}");
        assert_eq!(service.logged().await, 1);

        // A deferral and a dismissal, the same way.
        let mut tx = service.store.begin_write_on(&target).await.unwrap();
        people
            .defer_item_in(&mut tx, ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Deferred);
        let mut tx = service.store.begin_write_on(&target).await.unwrap();
        let dismissed = people
            .dismiss_in(&mut tx, set, Some("not now".into()), NOW)
            .await
            .unwrap();
        dispute(&mut tx, "dismissed").await;
        tx.commit().await.unwrap();
        assert_eq!(dismissed.len(), 1);
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Rejected);
        assert_eq!(service.disputes().await, 3);
        assert_eq!(service.logged().await, 3);
    }
}

#[tokio::test]
async fn a_confirmation_in_the_callers_transaction_runs_the_handler_there() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let people = service.engine.confirmations();
        let set = service.propose("INV-1", &[2500]).await;

        let mut tx = service.store.begin_write().await.unwrap();
        let outcome = people
            .confirm_item_in(&mut tx, ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        assert_eq!(outcome.message(), "Refunded 2500 cents.");
        dispute(&mut tx, "refunded").await;
        tx.rollback().await.unwrap();
        assert_eq!(service.refunded("INV-1").await, 0, "{backend:?}");
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Pending);
        assert_eq!((service.disputes().await, service.logged().await), (0, 0));

        let mut tx = service.store.begin_write().await.unwrap();
        dispute(&mut tx, "refunded").await;
        people
            .edit_and_confirm_in(
                &mut tx,
                ItemRef::new(set, 0),
                json!({"amountCents": 2000}),
                NOW,
            )
            .await
            .unwrap();
        // One yes, one run: a second confirmation in the same transaction finds the
        // item decided.
        let again = people
            .confirm_item_in(&mut tx, ItemRef::new(set, 0), NOW)
            .await
            .unwrap_err();
        assert!(again.is_conflict(), "{again:?}");
        tx.commit().await.unwrap();
        assert_eq!(service.refunded("INV-1").await, 2000, "{backend:?}");
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Confirmed);
        assert_eq!((service.disputes().await, service.logged().await), (1, 1));
    }
}

#[tokio::test]
async fn on_decided_is_told_every_verdict_with_the_args_as_they_ran() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let alice = service.engine.confirmations().by("alice");
        let confirmed = service.propose("INV-1", &[100]).await;
        alice
            .confirm_item(ItemRef::new(confirmed, 0), NOW)
            .await
            .unwrap();
        let edited = service.propose("INV-1", &[200]).await;
        alice
            .edit_and_confirm(ItemRef::new(edited, 0), json!({"amountCents": 150}), NOW)
            .await
            .unwrap();
        let rejected = service.propose("INV-2", &[300]).await;
        alice
            .reject_item(ItemRef::new(rejected, 0), Some("too much".into()), NOW)
            .await
            .unwrap();
        let deferred = service.propose("INV-2", &[400]).await;
        alice
            .defer_item(ItemRef::new(deferred, 0), NOW)
            .await
            .unwrap();
        let dismissed = service.propose("INV-2", &[500, 600]).await;
        alice
            .dismiss(dismissed, Some("all wrong".into()), NOW)
            .await
            .unwrap();
        let retracted = service.propose("INV-2", &[700]).await;
        service
            .engine
            .confirmations()
            .withdraw_item(
                ItemRef::new(retracted, 0),
                "the agent changed its mind",
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(service.refunded("INV-1").await, 250);
        let row =
            |verdict: &str, cents: i64, edited: i64, by: Option<&str>, reason: Option<&str>| {
                (
                    verdict.to_owned(),
                    json!({"amountCents": cents}).to_string(),
                    edited,
                    by.map(str::to_owned),
                    reason.map(str::to_owned),
                )
            };
        let mut expected = vec![
            row("confirmed", 100, 0, Some("alice"), None),
            row("confirmed", 150, 1, Some("alice"), None),
            row("rejected", 300, 0, Some("alice"), Some("too much")),
            row("deferred", 400, 0, Some("alice"), None),
            row("rejected", 500, 0, Some("alice"), Some("all wrong")),
            row("rejected", 600, 0, Some("alice"), Some("all wrong")),
            row(
                "retracted",
                700,
                0,
                None,
                Some("the agent changed its mind"),
            ),
        ];
        expected.sort();
        assert_eq!(service.log().await, expected, "{backend:?}");
    }
}

#[tokio::test]
async fn a_failing_on_decided_rolls_the_decision_back() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let people = service.engine.confirmations();
        let set = service.propose("INV-1", &[2500]).await;
        let item = ItemRef::new(set, 0);
        service.fail.store(true, Ordering::SeqCst);

        let error = people.confirm_item(item, NOW).await.unwrap_err();
        assert!(is_hook_failure(&error), "{backend:?}: {error:?}");
        assert!(
            error.to_string().contains("host invoicing refused"),
            "{error}"
        );
        assert_eq!(
            service.refunded("INV-1").await,
            0,
            "the handler's write is undone"
        );
        let error = people.reject_item(item, None, NOW).await.unwrap_err();
        assert!(is_hook_failure(&error), "{error:?}");
        let all = people.confirm_all(set, NOW).await.unwrap();
        assert!(
            matches!(&all.items[0].result, ItemResult::Failed(error) if is_hook_failure(error)),
            "{:?}",
            all.items[0].result
        );

        // In the caller's transaction: the decision goes, the caller's rows stay usable.
        let mut tx = service.store.begin_write().await.unwrap();
        dispute(&mut tx, "before").await;
        let error = people
            .confirm_item_in(&mut tx, item, NOW)
            .await
            .unwrap_err();
        assert!(is_hook_failure(&error), "{error:?}");
        let error = people
            .dismiss_in(&mut tx, set, None, NOW)
            .await
            .unwrap_err();
        assert!(is_hook_failure(&error), "{error:?}");
        dispute(&mut tx, "after").await;
        tx.commit().await.unwrap();
        assert_eq!(service.disputes().await, 2, "{backend:?}");
        assert_eq!(service.refunded("INV-1").await, 0);
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Pending);
        assert_eq!(service.logged().await, 0, "the hook's own write went too");

        service.fail.store(false, Ordering::SeqCst);
        people.confirm_item(item, NOW).await.unwrap();
        assert_eq!(service.refunded("INV-1").await, 2500);
        assert_eq!(service.logged().await, 1);
    }
}

#[tokio::test]
async fn a_wake_in_the_callers_transaction_runs_nothing_outside_before_the_commit() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let calls = tool_calls(&[
            ("refund_invoice", json!({"amountCents": 2500})),
            ("notify_customer", json!({})),
        ]);
        let request = WakeRequest::new(AGENT, Target::new("invoice", "INV-1"), "run-w", calls);

        let mut tx = service.store.begin_write().await.unwrap();
        let pending = service
            .engine
            .wakes()
            .wake_in(&mut tx, request.clone(), NOW)
            .await
            .unwrap();
        let set = pending.change_set().expect("a set").id;
        assert_eq!(pending.to_run_after_commit(), 1);
        dispute(&mut tx, &format!("proposed in {set}")).await;
        tx.rollback().await.unwrap();
        drop(pending);
        let mut conn = service.store.read_connection().await.unwrap();
        let stored = change_sets::load(&mut conn, set).await.unwrap();
        drop(conn);
        assert!(stored.is_none(), "{backend:?}: rolled back, no set");
        assert_eq!(service.outside.load(Ordering::SeqCst), 0, "nothing ran");

        let mut tx = service.store.begin_write().await.unwrap();
        let pending = service
            .engine
            .wakes()
            .wake_in(&mut tx, request, NOW)
            .await
            .unwrap();
        assert_eq!(
            service.outside.load(Ordering::SeqCst),
            0,
            "not under the lock"
        );
        dispute(&mut tx, "proposed").await;
        tx.commit().await.unwrap();
        assert_eq!(
            service.outside.load(Ordering::SeqCst),
            0,
            "not before asked"
        );
        let outcome = pending.after_commit().await.unwrap();
        assert_eq!(service.outside.load(Ordering::SeqCst), 1, "{backend:?}");
        let replies: Vec<&str> = outcome
            .responses
            .iter()
            .map(|r| r.content.as_str())
            .collect();
        assert_eq!(replies, ["Proposal queued for user review.", "notified"]);
        let set = outcome.change_set.expect("a set").id;
        assert_eq!(service.status(set, 0).await, ChangeItemStatus::Pending);
        assert_eq!(service.disputes().await, 1);
    }
}

#[tokio::test]
async fn a_host_is_told_only_of_decisions_on_its_own_items() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        // Another service on the same database, proposing under the same tool name.
        let other = SimpleHost::new("other")
            .handle("refund_invoice", |_, _| {
                Box::pin(async { Ok("done elsewhere") })
            })
            .category(|_, _| Box::pin(async { Ok(Some("billing".to_owned())) }));
        let mut tools = ToolRegistry::new();
        let schema = json!({"type": "object"});
        let spec = ToolSpec::new("refund_invoice", "Refund.", ToolMode::Deferred, schema);
        tools.register(spec).unwrap();
        let engine = Engine::open(service.store.clone(), Arc::new(tools), Arc::new(other))
            .await
            .unwrap();
        let wakes = engine.wakes();
        let wake = wakes.wake(service.request("INV-2", &[100]), NOW).await;
        let theirs = wake.unwrap().change_set.expect("a set").id;
        let people = service.engine.confirmations();
        people
            .reject_item(ItemRef::new(theirs, 0), None, NOW)
            .await
            .unwrap();
        assert_eq!(
            service.logged().await,
            0,
            "{backend:?}: not this host's item"
        );
        let ours = service.propose("INV-2", &[200]).await;
        people
            .reject_item(ItemRef::new(ours, 0), None, NOW)
            .await
            .unwrap();
        assert_eq!(service.logged().await, 1);
    }
}

#[tokio::test]
async fn a_held_confirmation_tells_the_host_when_its_window_ends_or_it_is_cancelled() {
    for backend in backends() {
        let service = Service::on(&backend, None).await;
        let engine = &service.engine;
        engine
            .admin()
            .set_hold(AGENT, "refund_invoice", 60, NOW)
            .await
            .unwrap();
        let people = engine.confirmations();
        let (ran, cancelled) = (
            service.propose("INV-1", &[100]).await,
            service.propose("INV-1", &[200]).await,
        );
        let mut jobs = Vec::new();
        for set in [ran, cancelled] {
            let outcome = people
                .confirm_item(ItemRef::new(set, 0), NOW)
                .await
                .unwrap();
            match outcome.execution {
                assent_confirm::ExecutionOutcome::Scheduled { job_id, .. } => jobs.push(job_id),
                other => panic!("expected a held job, got {other:?}"),
            }
        }
        assert_eq!(
            service.logged().await,
            0,
            "{backend:?}: nothing decided yet"
        );
        engine.cancel_job(jobs[1], NOW).await.unwrap();
        let later = NOW + time::Duration::seconds(61);
        let run = engine.run_due_jobs(later).await.unwrap();
        assert_eq!(run.applied, 1, "{run:?}");
        assert_eq!(service.refunded("INV-1").await, 100);
        let verdicts: Vec<String> = service.log().await.into_iter().map(|row| row.0).collect();
        assert_eq!(verdicts, ["confirmed", "rejected"], "{backend:?}");
    }
}

/// Holding the service's own write transaction, a plain engine method waits for the
/// writer lock that transaction holds: `WriterBusy` after the busy timeout.
async fn plain_reject_under_the_services_transaction(backend: &TestBackend) {
    let busy = Duration::from_millis(300);
    let service = Service::on(backend, Some(busy)).await;
    let set = service.propose("INV-1", &[2500]).await;
    let mut tx = service.store.begin_write().await.unwrap();
    dispute(&mut tx, "held").await;
    let people = service.engine.confirmations();
    let reject = people.reject_item(ItemRef::new(set, 0), None, NOW);
    let ended = tokio::time::timeout(Duration::from_secs(20), reject)
        .await
        .expect("bounded by the busy timeout, never a hang");
    assert!(
        matches!(ended, Err(ConfirmError::Store(StoreError::WriterBusy(waited))) if waited == busy),
        "{backend:?}: {ended:?}"
    );
    tx.rollback().await.unwrap();
    assert_eq!(service.status(set, 0).await, ChangeItemStatus::Pending);
}

#[tokio::test]
async fn the_plain_method_under_the_services_own_write_transaction_is_writer_busy_on_sqlite() {
    plain_reject_under_the_services_transaction(&TestBackend::Sqlite).await;
}

#[tokio::test]

async fn the_plain_method_under_the_services_own_write_transaction_is_writer_busy_on_postgres() {
    for backend in backends() {
        if matches!(backend, TestBackend::Postgres(_)) {
            plain_reject_under_the_services_transaction(&backend).await;
        }
    }
}
