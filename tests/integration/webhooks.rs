//! Webhooks end to end: events written with the change sets' own writes, delivered by
//! the sender to a real receiver on loopback that verifies every signature with the
//! `standardwebhooks` package (not Assent's code); retries after 500s and timeouts with
//! the same `webhook-id`, a receiver down across a restart, dead letters and their
//! redelivery, no second delivery after a 2xx (two senders racing, on every backend),
//! a decision that does not wait for ten hanging receivers, and `item.failed` /
//! `item.inDoubt` written with the ledger's own moves of a job.

use assent_confirm::ItemRef;
use assent_confirm::{Engine, JobSettings};
use assent_domain::{Target, Uuid};
use assent_store::Store;
use assent_store::jobs;
use assent_store::webhooks::{self, Delivery, NewSubscription, event};
use assent_tests::external::{self, CATEGORY, HttpHost, TOOL};
use assent_tests::receiver::{Receiver, python};
use assent_tests::{NOW, TestApp, backends, tool_calls};
use assent_tools::AgentPolicy;
use assent_webhooks::{Sender, SenderConfig, generate_secret, slack_body};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// Bounds the wait for something that should happen within seconds; measures nothing.
const PATIENCE: Duration = Duration::from_secs(30);
const PUBLIC_URL: &str = "https://assent.example";

async fn subscribe(store: &Store, url: &str, events: &[&str], format: &str) -> (Uuid, String) {
    let secret = generate_secret();
    let new = NewSubscription {
        url: url.to_owned(),
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        format: format.to_owned(),
        agent_id: None,
        secret: secret.clone(),
    };
    let mut conn = store.read_connection().await.unwrap();
    let added = webhooks::insert_subscription(&mut conn, &new, NOW)
        .await
        .unwrap();
    (added.id, secret)
}

fn sender(store: &Store, config: SenderConfig) -> Sender {
    Sender::new(
        store.clone(),
        SenderConfig {
            public_url: Some(PUBLIC_URL.to_owned()),
            poll_interval: Duration::from_millis(100),
            ..config
        },
    )
    .unwrap()
}

async fn deliveries(store: &Store) -> Vec<Delivery> {
    let mut conn = store.read_connection().await.unwrap();
    webhooks::deliveries(&mut conn, false, 1000).await.unwrap()
}

/// Runs one-shot passes until `done` holds for the deliveries (or patience runs out).
async fn deliver_until(sender: &Sender, store: &Store, done: impl Fn(&[Delivery]) -> bool) {
    let start = Instant::now();
    loop {
        sender.deliver_due().await.unwrap();
        let rows = deliveries(store).await;
        if done(&rows) {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "deliveries never settled: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn all_delivered(rows: &[Delivery]) -> bool {
    !rows.is_empty() && rows.iter().all(|d| d.status == "delivered")
}

async fn propose(app: &TestApp, task: &str, title: &str) -> Uuid {
    app.wake(task, &[("set_task_title", json!({"title": title}))])
        .await
        .change_set
        .expect("a set")
        .id
}

#[tokio::test]
async fn every_event_reaches_a_verifying_receiver_with_its_set_and_a_link() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let app = TestApp::spawn().await;
    let (_, secret) = subscribe(&app.store, &receiver.url("all"), &[], "standard").await;
    receiver.configure("all", &secret, 0, 0, 0);
    let (slack_id, slack_secret) = subscribe(
        &app.store,
        &receiver.url("slack"),
        &[event::CHANGE_SET_CREATED],
        "slack",
    )
    .await;
    receiver.configure("slack", &slack_secret, 0, 0, 0);
    let task = app.scene().await;

    let resolved = propose(&app, &task, "First title").await;
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(resolved, 0), NOW)
        .await
        .unwrap();
    let expiring = propose(&app, &task, "Second title").await;
    // Sets were made at NOW, long before today: the second is inside its last day.
    let ttl = time::Duration::days(7);
    let sender = sender(
        &app.store,
        SenderConfig {
            expiry: Some((time::Duration::days(30_000), time::Duration::days(29_999))),
            ..SenderConfig::default()
        },
    );
    deliver_until(&sender, &app.store, all_delivered).await;
    app.engine
        .confirmations()
        .expire(OffsetDateTime::now_utc(), ttl)
        .await
        .unwrap();
    deliver_until(&sender, &app.store, |rows| {
        all_delivered(rows)
            && rows
                .iter()
                .any(|d| d.event_type == event::CHANGE_SET_EXPIRED)
    })
    .await;
    // A set is announced as expiring once.
    sender.deliver_due().await.unwrap();

    // Deliveries run concurrently, so they arrive in any order.
    let all = receiver.received_by("all");
    let mut types: Vec<(&str, &str)> = all
        .iter()
        .map(|r| {
            (
                r["body"]["type"].as_str().unwrap(),
                r["body"]["data"]["changeSetId"].as_str().unwrap(),
            )
        })
        .collect();
    types.sort_unstable();
    let (resolved, expiring) = (resolved.to_string(), expiring.to_string());
    let mut expected = vec![
        (event::CHANGE_SET_CREATED, resolved.as_str()),
        (event::CHANGE_SET_RESOLVED, resolved.as_str()),
        (event::CHANGE_SET_CREATED, expiring.as_str()),
        (event::CHANGE_SET_EXPIRING, expiring.as_str()),
        (event::CHANGE_SET_EXPIRED, expiring.as_str()),
    ];
    expected.sort_unstable();
    assert_eq!(types, expected, "{all:#?}");
    for record in &all {
        assert_eq!(record["verified"], true, "{record}");
        let data = &record["body"]["data"];
        assert_eq!(data["agentId"], "agent-1");
        assert_eq!(data["target"]["taskId"], task.as_str());
        assert_eq!(data["items"][0]["toolName"], "set_task_title");
        assert!(
            data["items"][0]["summary"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
        assert_eq!(
            data["reviewUrl"],
            format!(
                "{PUBLIC_URL}/#change-set-{}",
                data["changeSetId"].as_str().unwrap()
            )
        );
    }
    let warned = all
        .iter()
        .find(|r| r["body"]["type"] == event::CHANGE_SET_EXPIRING)
        .unwrap();
    assert!(warned["body"]["data"]["expiresAt"].is_string(), "{warned}");
    assert_eq!(
        warned["body"]["data"]["items"][0]["args"],
        json!({"title": "Second title"}),
        "machines get every argument whole"
    );
    let ids: std::collections::BTreeSet<&str> =
        all.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), all.len(), "one id per event");

    let slack = receiver.received_by("slack");
    assert_eq!(slack.len(), 2, "{slack:#?}");
    for record in &slack {
        assert_eq!(record["verified"], true, "{record}");
        let body = &record["body"];
        assert_eq!(
            body["blocks"][0]["text"]["text"],
            "*Agent agent-1 suggests 1 change*"
        );
        let item = body["blocks"][1]["text"]["text"].as_str().unwrap();
        assert!(item.starts_with("• "), "{item}");
        assert!(
            item.contains("\n    ◦ title: "),
            "arguments are shown: {item}"
        );
        assert!(
            body["blocks"][2]["elements"][0]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with(PUBLIC_URL))
        );
    }
    // A Slack URL is listed masked, yet deliveries and tests go to the whole one.
    let mut conn = app.store.read_connection().await.unwrap();
    let listed = webhooks::subscription(&mut conn, slack_id)
        .await
        .unwrap()
        .unwrap();
    drop(conn);
    assert_ne!(listed.url, receiver.url("slack"));
    assert!(listed.url.contains("/…"), "{}", listed.url);
    let tested = sender.test(slack_id).await.unwrap();
    assert!(tested.ok, "{tested:?}");
    assert_eq!(receiver.received_by("slack").len(), 3);
}

#[tokio::test]
async fn failures_and_timeouts_are_retried_with_the_same_id_and_shown_escaped() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let app = TestApp::spawn().await;
    let (flaky, secret) = subscribe(&app.store, &receiver.url("flaky"), &[], "standard").await;
    receiver.configure("flaky", &secret, 2, 0, 0);
    let (slow, slow_secret) = subscribe(&app.store, &receiver.url("slow"), &[], "standard").await;
    receiver.configure("slow", &slow_secret, 0, 1, 5);
    let task = app.scene().await;
    propose(&app, &task, "Retried title").await;
    let sender = sender(
        &app.store,
        SenderConfig {
            timeout: Duration::from_secs(1),
            ..SenderConfig::default()
        },
    );

    let first = sender.deliver_due().await.unwrap();
    assert_eq!(first.retrying, 2, "{first:?}");
    let rows = deliveries(&app.store).await;
    let failed = rows.iter().find(|d| d.subscription_id == flaky).unwrap();
    assert_eq!(failed.last_status, Some(500));
    let error = failed.last_error.as_deref().unwrap();
    assert!(
        error.starts_with("HTTP 500: boom\\n\\u{1b}[31mred"),
        "{error}"
    );
    assert!(!error.chars().any(char::is_control), "{error:?}");
    let timed_out = rows.iter().find(|d| d.subscription_id == slow).unwrap();
    assert_eq!(timed_out.last_error.as_deref(), Some("timed out"));
    assert_eq!(timed_out.last_status, None);
    // The first retry is due within 5 s.
    for row in &rows {
        assert!(row.next_attempt_at <= OffsetDateTime::now_utc() + time::Duration::seconds(5));
    }

    deliver_until(&sender, &app.store, all_delivered).await;
    let rows = deliveries(&app.store).await;
    let attempts: BTreeMap<Uuid, i64> = rows
        .iter()
        .map(|d| (d.subscription_id, d.attempts))
        .collect();
    assert_eq!(attempts, BTreeMap::from([(flaky, 3), (slow, 2)]));
    for (name, count) in [("flaky", 3), ("slow", 2)] {
        let received = receiver.received_by(name);
        assert_eq!(received.len(), count, "{received:#?}");
        assert!(
            received
                .iter()
                .all(|r| r["verified"] == true && r["id"] == received[0]["id"])
        );
        assert_eq!(received[0]["id"].as_str(), Some(rows[0].event_id.as_str()));
    }
}

#[tokio::test]
async fn a_receiver_down_across_a_restart_gets_the_event_afterwards_with_the_same_id() {
    let Some(python) = python() else { return };
    let port = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap().port()
    };
    let app = TestApp::spawn().await;
    let url = format!("http://127.0.0.1:{port}/hook/late");
    let (_, secret) = subscribe(&app.store, &url, &[], "standard").await;
    let task = app.scene().await;
    propose(&app, &task, "Delivered later").await;
    {
        let before = sender(&app.store, SenderConfig::default());
        let report = before.deliver_due().await.unwrap();
        assert_eq!(report.retrying, 1, "{report:?}");
    }
    let queued = deliveries(&app.store).await;
    assert_eq!(queued[0].last_error.as_deref(), Some("cannot connect"));

    // The process stops; a new one opens the database; the receiver comes up.
    app.store.close().await;
    let restarted = Store::open(&app.url()).await.unwrap();
    let receiver = Receiver::start(&python, port);
    receiver.configure("late", &secret, 0, 0, 0);
    let after = sender(&restarted, SenderConfig::default());
    deliver_until(&after, &restarted, all_delivered).await;
    let received = receiver.received_by("late");
    assert_eq!(received.len(), 1, "{received:#?}");
    assert_eq!(received[0]["verified"], true);
    assert_eq!(
        received[0]["id"].as_str(),
        Some(queued[0].event_id.as_str())
    );
}

#[tokio::test]
async fn out_of_attempts_is_dead_lettered_visible_and_redeliverable() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let app = TestApp::spawn().await;
    let (_, secret) = subscribe(&app.store, &receiver.url("dead"), &[], "standard").await;
    receiver.configure("dead", &secret, 1000, 0, 0);
    let task = app.scene().await;
    propose(&app, &task, "Never accepted").await;
    let sender = sender(
        &app.store,
        SenderConfig {
            max_attempts: 2,
            ..SenderConfig::default()
        },
    );
    deliver_until(&sender, &app.store, |rows| {
        rows.iter().all(|d| d.status == "dead")
    })
    .await;
    let dead = {
        let mut conn = app.store.read_connection().await.unwrap();
        webhooks::deliveries(&mut conn, true, 10).await.unwrap()
    };
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].attempts, dead[0].last_status), (2, Some(500)));
    assert!(
        dead[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("\\u{1b}"))
    );
    // Nothing more is attempted on its own.
    sender.deliver_due().await.unwrap();
    assert_eq!(receiver.received_by("dead").len(), 2);

    receiver.configure("dead", &secret, 0, 0, 0);
    {
        let mut conn = app.store.read_connection().await.unwrap();
        assert!(
            webhooks::redeliver(&mut conn, dead[0].id, NOW)
                .await
                .unwrap()
        );
        assert!(!webhooks::redeliver(&mut conn, 999_999, NOW).await.unwrap());
    }
    deliver_until(&sender, &app.store, all_delivered).await;
    let received = receiver.received_by("dead");
    assert_eq!(received.len(), 3);
    assert!(
        received
            .iter()
            .all(|r| r["id"].as_str() == Some(dead[0].event_id.as_str()))
    );
    assert_eq!(received[2]["verified"], true);
}

#[tokio::test]
async fn two_senders_on_every_backend_deliver_each_event_once() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let name = format!("once-{}", Uuid::new_v4().simple());
        let (_, secret) = subscribe(&app.store, &receiver.url(&name), &[], "standard").await;
        receiver.configure(&name, &secret, 0, 0, 0);
        let task = app.scene().await;
        for i in 0..6 {
            propose(&app, &task, &format!("Title {i}")).await;
        }
        // Two processes' senders, each on a pool of its own, racing for the same rows.
        let other = Store::open(&app.url()).await.unwrap();
        let (one, two) = (
            sender(&app.store, SenderConfig::default()),
            sender(&other, SenderConfig::default()),
        );
        let (a, b) = tokio::join!(one.deliver_due(), two.deliver_due());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.delivered + b.delivered, 6, "{backend:?}: {a:?} {b:?}");
        // Running on, they find nothing more to send.
        let stop = tokio::time::sleep(Duration::from_millis(600));
        tokio::join!(one.clone().run(stop), async {
            two.deliver_due().await.unwrap();
        });
        let received = receiver.received_by(&name);
        assert_eq!(received.len(), 6, "{backend:?}: {received:#?}");
        let ids: std::collections::BTreeSet<&str> =
            received.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), 6);
        assert!(deliveries(&app.store).await.iter().all(|d| d.attempts == 1));
    }
}

/// A proposal to add checklist item `title`: eight of them on one task are each
/// confirmed as proposed (eight title changes would find the title changed under all
/// but the first: the stale-target guard).
async fn add_item(app: &TestApp, task: &str, title: &str) -> Uuid {
    app.wake(task, &[("add_checklist_item", json!({"title": title}))])
        .await
        .change_set
        .expect("a set")
        .id
}

/// Confirms the single item of each of `sets`; returns each decision's latency.
async fn decide(app: &TestApp, sets: &[Uuid]) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(sets.len());
    for &set in sets {
        let start = Instant::now();
        app.engine
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        latencies.push(start.elapsed());
    }
    latencies
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[tokio::test]
async fn a_decision_does_not_wait_for_ten_hanging_receivers() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    const DECISIONS: usize = 8;

    // The same decisions without any subscription: the baseline.
    let quiet = TestApp::spawn().await;
    let task = quiet.scene().await;
    let mut sets = Vec::new();
    for i in 0..DECISIONS {
        sets.push(add_item(&quiet, &task, &format!("Quiet {i}")).await);
    }
    let baseline = decide(&quiet, &sets).await;

    let app = TestApp::spawn().await;
    for i in 0..10 {
        let name = format!("hang-{i}");
        let (_, secret) = subscribe(&app.store, &receiver.url(&name), &[], "standard").await;
        receiver.configure(&name, &secret, 0, 1000, 60);
    }
    let task = app.scene().await;
    let mut sets = Vec::new();
    for i in 0..DECISIONS {
        sets.push(add_item(&app, &task, &format!("Loud {i}")).await);
    }
    let sender = sender(
        &app.store,
        SenderConfig {
            timeout: Duration::from_secs(60),
            ..SenderConfig::default()
        },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(sender.run(async {
        let _ = stopped.await;
    }));
    // Every receiver is holding a delivery open before the first decision.
    let hanging = receiver
        .wait_for(PATIENCE, |r| {
            r.iter().filter(|r| r["action"] == "hang").count() >= 10
        })
        .await;
    assert!(hanging.len() >= 10, "{hanging:#?}");
    let loaded = decide(&app, &sets).await;
    let _ = stop.send(());
    running.await.unwrap();

    // Each decision wrote its resolved event and ten deliveries, and none waited for
    // a receiver: the slowest is far below the receivers' minute, and the typical one
    // is of the baseline's order.
    assert_eq!(
        deliveries(&app.store)
            .await
            .iter()
            .filter(|d| d.event_type == event::CHANGE_SET_RESOLVED)
            .count(),
        10 * DECISIONS
    );
    let slowest = loaded.iter().max().copied().unwrap();
    assert!(
        slowest < Duration::from_secs(2),
        "slowest decision {slowest:?}"
    );
    let (loaded, baseline) = (median(loaded), median(baseline));
    assert!(
        loaded <= baseline * 4 + Duration::from_millis(50),
        "median decision {loaded:?} with hanging receivers, {baseline:?} without"
    );
}

#[tokio::test]
async fn events_nobody_wants_write_nothing_and_filters_apply() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    propose(&app, &task, "Unwatched").await;
    let mut conn = app.store.read_connection().await.unwrap();
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_events")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(events, 0);

    // Only resolved events, only of another agent: a new set is not for it.
    let secret = generate_secret();
    let other_agent = NewSubscription {
        url: "https://example.invalid/hook".into(),
        events: vec![event::CHANGE_SET_CREATED.into()],
        format: "standard".into(),
        agent_id: Some("someone-else".into()),
        secret: secret.clone(),
    };
    let resolved_only = NewSubscription {
        events: vec![event::CHANGE_SET_RESOLVED.into()],
        agent_id: None,
        ..other_agent.clone()
    };
    webhooks::insert_subscription(&mut conn, &other_agent, NOW)
        .await
        .unwrap();
    let resolved_sub = webhooks::insert_subscription(&mut conn, &resolved_only, NOW)
        .await
        .unwrap();
    drop(conn);
    let set = propose(&app, &task, "Still unwatched").await;
    assert!(deliveries(&app.store).await.is_empty());
    app.engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    let rows = deliveries(&app.store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].subscription_id, rows[0].event_type.as_str()),
        (resolved_sub.id, event::CHANGE_SET_RESOLVED)
    );

    // The secret is stored for signing but listed nowhere.
    let mut conn = app.store.read_connection().await.unwrap();
    let listed = serde_json::to_string(&webhooks::subscriptions(&mut conn).await.unwrap()).unwrap();
    assert!(!listed.contains(&secret) && !listed.contains("whsec_"));
    assert_eq!(
        webhooks::signing_secret(&mut conn, resolved_sub.id)
            .await
            .unwrap(),
        Some(secret)
    );
    // Removing a subscription drops its queued deliveries.
    assert!(
        webhooks::remove_subscription(&mut conn, resolved_sub.id)
            .await
            .unwrap()
    );
    assert!(
        !webhooks::remove_subscription(&mut conn, resolved_sub.id)
            .await
            .unwrap()
    );
    drop(conn);
    assert!(deliveries(&app.store).await.is_empty());
}

#[tokio::test]
async fn a_dead_workers_claim_runs_out_and_concurrent_claims_are_disjoint_on_every_backend() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        subscribe(&app.store, "https://example.invalid/hook", &[], "standard").await;
        let task = app.scene().await;
        for i in 0..4 {
            propose(&app, &task, &format!("Claimed {i}")).await;
        }
        let now = OffsetDateTime::now_utc();
        let lease = time::Duration::seconds(60);
        // Two workers at once: on PostgreSQL the second skips the first's locked rows
        // instead of waiting for them; on SQLite the writer lock puts it after.
        let other = Store::open(&app.url()).await.unwrap();
        let mut first = app.store.begin_claim().await.unwrap();
        let mine = webhooks::claim_due(first.connection(), 2, now, lease)
            .await
            .unwrap();
        let theirs = match backend {
            assent_tests::TestBackend::Postgres(_) => {
                let mut second = other.begin_claim().await.unwrap();
                let theirs = webhooks::claim_due(second.connection(), 10, now, lease)
                    .await
                    .unwrap();
                second.commit().await.unwrap();
                first.commit().await.unwrap();
                theirs
            }
            assent_tests::TestBackend::Sqlite => {
                first.commit().await.unwrap();
                let mut second = other.begin_claim().await.unwrap();
                let theirs = webhooks::claim_due(second.connection(), 10, now, lease)
                    .await
                    .unwrap();
                second.commit().await.unwrap();
                theirs
            }
        };
        assert_eq!((mine.len(), theirs.len()), (2, 2), "{backend:?}");
        assert!(mine.iter().all(|m| theirs.iter().all(|t| t.id != m.id)));
        // Nothing is left while the leases hold; once they run out (the workers died
        // without a word), the same deliveries are claimed again with the same ids.
        let mut conn = app.store.read_connection().await.unwrap();
        assert!(!webhooks::any_due(&mut conn, now).await.unwrap());
        drop(conn);
        let later = now + lease + time::Duration::seconds(1);
        let mut tx = app.store.begin_claim().await.unwrap();
        let again = webhooks::claim_due(tx.connection(), 10, later, lease)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let ids = |claims: &[webhooks::ClaimedDelivery]| {
            let mut ids: Vec<(i64, String)> =
                claims.iter().map(|c| (c.id, c.event_id.clone())).collect();
            ids.sort();
            ids
        };
        let before = ids(&[mine, theirs].concat());
        assert_eq!(ids(&again), before, "{backend:?}");
        // A late answer from the first owner no longer counts once it is reclaimed
        // and delivered by the second.
        let mut conn = app.store.read_connection().await.unwrap();
        assert!(
            webhooks::record_delivered(&mut conn, again[0].id, 204, later)
                .await
                .unwrap()
        );
        assert!(
            !webhooks::record_delivered(&mut conn, again[0].id, 204, later)
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn events_another_process_writes_are_delivered_by_the_running_sender() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let app = TestApp::spawn().await;
    let (_, secret) = subscribe(&app.store, &receiver.url("poll"), &[], "standard").await;
    receiver.configure("poll", &secret, 0, 0, 0);
    // The server's sender runs on its own pool...
    let serving = Store::open(&app.url()).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        Sender::new(serving, SenderConfig::default())
            .unwrap()
            .run(async {
                let _ = stopped.await;
            }),
    );
    // ...while another "process" (the app's own pool) proposes a change.
    let task = app.scene().await;
    let set = propose(&app, &task, "From elsewhere").await;
    let received = receiver
        .wait_for(Duration::from_secs(5), |r| !r.is_empty())
        .await;
    let _ = stop.send(());
    running.await.unwrap();
    assert_eq!(received.len(), 1, "not delivered within 5 s: {received:#?}");
    assert_eq!(received[0]["body"]["data"]["changeSetId"], set.to_string());
    assert_eq!(received[0]["verified"], true);
}

#[tokio::test]
async fn delivered_webhooks_are_forgotten_after_the_retention_and_nothing_else_is() {
    let app = TestApp::spawn().await;
    subscribe(&app.store, "https://receiver.example/hook", &[], "standard").await;
    let task = app.scene().await;
    propose(&app, &task, "Delivered long ago").await;
    {
        let mut tx = app.store.begin_write().await.unwrap();
        let claimed = webhooks::claim_due(tx.connection(), 10, NOW, time::Duration::minutes(5))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert!(
            webhooks::record_delivered(tx.connection(), claimed[0].id, 204, NOW)
                .await
                .unwrap()
        );
        tx.commit().await.unwrap();
    }
    // Written after the claim: still pending when the sender prunes.
    propose(&app, &task, "Not yet delivered").await;
    let sender = sender(&app.store, SenderConfig::default());

    // Within the retention nothing goes.
    assert_eq!(
        sender.prune(NOW + time::Duration::days(29)).await.unwrap(),
        0
    );
    assert_eq!(deliveries(&app.store).await.len(), 2);

    assert_eq!(
        sender.prune(NOW + time::Duration::days(31)).await.unwrap(),
        1
    );
    let left = deliveries(&app.store).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].status, "pending");
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhook_events")
        .fetch_one(
            app.store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await
        .unwrap();
    assert_eq!(events, 1, "the delivered event went with its delivery");

    let keep_all = Sender::new(
        app.store.clone(),
        SenderConfig {
            retention: None,
            ..SenderConfig::default()
        },
    )
    .unwrap();
    assert_eq!(
        keep_all
            .prune(NOW + time::Duration::days(3650))
            .await
            .unwrap(),
        0
    );
}

/// The events written so far: type and payload, oldest first.
async fn written_events(store: &Store) -> Vec<(String, Value)> {
    let mut conn = store.read_connection().await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT event_type, payload FROM webhook_events ORDER BY created_at, id")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(kind, payload)| (kind, serde_json::from_str(&payload).unwrap()))
        .collect()
}

/// An HTTP endpoint that refuses every request with a 400: a permanent error.
fn refusing_endpoint() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nno such box",
            );
        }
    });
    url
}

/// An HTTP host's engine on `store` posting to `url`, and a confirmed external item of
/// agent `poster`: its set.
async fn confirmed_note(store: &Store, url: &str, lease_ms: i64, text: &str) -> (Engine, Uuid) {
    let engine = external::engine(
        store.clone(),
        HttpHost::new(url, false, false),
        JobSettings {
            lease: time::Duration::milliseconds(lease_ms),
            attempt_limit: 2,
            backoff: time::Duration::minutes(10),
            max_backoff: time::Duration::minutes(10),
        },
    )
    .await;
    let mut conn = store.read_connection().await.unwrap();
    assent_store::agents::upsert(
        &mut conn,
        "poster",
        &AgentPolicy::new([CATEGORY]),
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
    drop(conn);
    let now = OffsetDateTime::now_utc();
    let request = assent_confirm::WakeRequest::new(
        "poster",
        Target::new("endpoint", "e1"),
        format!("run-{text}"),
        tool_calls(&[(TOOL, json!({ "text": text }))]),
    );
    let set = engine
        .wakes()
        .wake(request, now)
        .await
        .unwrap()
        .change_set
        .expect("queued")
        .id;
    engine
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), now)
        .await
        .unwrap();
    (engine, set)
}

/// Subscriptions to the ledger's events: one to both (standard), one only to doubts
/// (Slack), one to everything about another agent. Their ids, in that order.
async fn job_subscribers(store: &Store) -> (Uuid, Uuid, Uuid) {
    let (both, _) = subscribe(
        store,
        "https://example.invalid/all",
        &[event::ITEM_FAILED, event::ITEM_IN_DOUBT],
        "standard",
    )
    .await;
    let (doubts, _) = subscribe(
        store,
        "https://hooks.slack.com/services/T/B/x",
        &[event::ITEM_IN_DOUBT],
        "slack",
    )
    .await;
    let other_agent = NewSubscription {
        url: "https://example.invalid/other".into(),
        events: vec![],
        format: "standard".into(),
        agent_id: Some("someone-else".into()),
        secret: generate_secret(),
    };
    let mut conn = store.read_connection().await.unwrap();
    let other = webhooks::insert_subscription(&mut conn, &other_agent, NOW)
        .await
        .unwrap();
    (both, doubts, other.id)
}

#[tokio::test]
async fn a_job_that_fails_for_good_is_announced_as_item_failed_and_a_retry_is_not() {
    let app = TestApp::spawn().await;
    let (both, _, _) = job_subscribers(&app.store).await;

    // A retryable error is retried, not announced; a 400 fails the job for good.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (retrying, _) = confirmed_note(&app.store, &closed_url, 30_000, "later").await;
    let run = retrying
        .run_due_jobs(OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(run.retried, 1, "{run:?}");
    assert!(written_events(&app.store).await.is_empty());
    let (refused, failed_set) =
        confirmed_note(&app.store, &refusing_endpoint(), 30_000, "refused").await;
    let mut conn = app.store.read_connection().await.unwrap();
    let job = jobs::for_item(&mut conn, failed_set, 0)
        .await
        .unwrap()
        .unwrap();
    drop(conn);
    // Only the refused note is due now (the other waits out its backoff).
    let run = refused
        .run_due_jobs(OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!((run.claimed, run.failed), (1, 1), "{run:?}");

    let events = written_events(&app.store).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let (kind, failed) = &events[0];
    assert_eq!(kind, event::ITEM_FAILED);
    let data = &failed["data"];
    assert_eq!(data["changeSetId"], failed_set.to_string());
    assert_eq!(data["jobId"], job.id.to_string());
    assert_eq!(
        (&data["itemIndex"], &data["agentId"], &data["toolName"]),
        (&json!(0), &json!("poster"), &json!(TOOL))
    );
    assert_eq!(data["args"], json!({"text": "refused"}));
    assert_eq!(data["summary"], "Post \"refused\"");
    assert_eq!(
        (&data["status"], &data["attempts"]),
        (&json!("failed"), &json!(1))
    );
    assert_eq!(data["lastError"], "400: no such box");
    assert_eq!(data["target"], json!({"kind": "endpoint", "id": "e1"}));
    let rows = deliveries(&app.store).await;
    let to: Vec<Uuid> = rows.iter().map(|d| d.subscription_id).collect();
    assert_eq!(to, [both], "only the subscription that wants failures");
    let slack = slack_body(failed, None)["blocks"].to_string();
    assert!(slack.contains("failed: post_note"), "{slack}");
    assert!(slack.contains("assent jobs retry"), "{slack}");
}

#[tokio::test]
async fn a_job_that_goes_in_doubt_is_announced_as_item_in_doubt_once() {
    let app = TestApp::spawn().await;
    let (both, doubts, _) = job_subscribers(&app.store).await;

    // A call that outlives its lease is in doubt at once.
    let slow = external::Receiver::start(false, Duration::from_secs(2));
    let (executor, outlived_set) = confirmed_note(&app.store, &slow.url, 300, "slow").await;
    let run = executor
        .run_due_jobs(OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(run.in_doubt, 1, "{run:?}");
    // An executor that dies after its claim leaves a job found in doubt later.
    let (_, lapsed_set) = confirmed_note(&app.store, &slow.url, 300, "lapsed").await;
    let now = OffsetDateTime::now_utc();
    let mut tx = app.store.begin_claim().await.unwrap();
    let claimed = jobs::claim_next(
        tx.connection(),
        external::HOST,
        now,
        time::Duration::seconds(1),
    )
    .await
    .unwrap()
    .expect("claimed");
    tx.commit().await.unwrap();
    assert_eq!(claimed.change_set_id, lapsed_set);
    let later = now + time::Duration::seconds(2);
    let run = executor.run_due_jobs(later).await.unwrap();
    assert_eq!(run.in_doubt, 1, "{run:?}");
    // Asked again, the host still cannot tell: still in doubt, not announced again.
    executor
        .run_due_jobs(later + time::Duration::minutes(5))
        .await
        .unwrap();

    let events = written_events(&app.store).await;
    let about: Vec<(&str, &Value)> = events
        .iter()
        .map(|(kind, payload)| (kind.as_str(), &payload["data"]["changeSetId"]))
        .collect();
    assert_eq!(
        about,
        [
            (event::ITEM_IN_DOUBT, &json!(outlived_set.to_string())),
            (event::ITEM_IN_DOUBT, &json!(lapsed_set.to_string())),
        ],
        "{events:#?}"
    );
    let why = |index: usize| {
        events[index].1["data"]["lastError"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        why(0).contains("did not finish within the lease"),
        "{}",
        why(0)
    );
    assert!(why(1).contains("executor stopped"), "{}", why(1));
    assert_eq!(events[1].1["data"]["status"], "inDoubt");
    let rows = deliveries(&app.store).await;
    let mut to: Vec<Uuid> = rows.iter().map(|d| d.subscription_id).collect();
    to.sort_unstable();
    let mut expected = vec![both, both, doubts, doubts];
    expected.sort_unstable();
    assert_eq!(to, expected, "the other agent's subscription gets none");
    assert!(rows.iter().all(|d| !d.url.contains("/services/")), "masked");
    let slack = slack_body(&events[1].1, None)["blocks"].to_string();
    assert!(slack.contains("is in doubt"), "{slack}");
    assert!(slack.contains("◦ text: lapsed"), "{slack}");
    assert!(slack.contains("assent jobs resolve"), "{slack}");
}

#[tokio::test]
async fn the_consent_chains_head_is_sent_when_it_moved_at_most_once_an_hour() {
    let app = TestApp::spawn().await;
    let mut conn = app.store.read_connection().await.unwrap();
    let new = NewSubscription {
        url: "https://example.invalid/heads".into(),
        events: vec![event::AUDIT_HEAD.to_owned()],
        format: "standard".into(),
        agent_id: None,
        secret: generate_secret(),
    };
    webhooks::insert_subscription(&mut conn, &new, NOW)
        .await
        .unwrap();
    drop(conn);
    app.scene().await;
    let sent = |at: OffsetDateTime| {
        let store = app.store.clone();
        async move {
            let mut tx = store.begin_write().await.unwrap();
            let due = webhooks::head_event_due(tx.connection(), at).await.unwrap();
            if let Some(head) = &due {
                webhooks::enqueue_head_event(tx.connection(), head, at)
                    .await
                    .unwrap();
            }
            tx.commit().await.unwrap();
            due
        }
    };
    let first = sent(NOW).await.expect("a head to send");
    assert!(first.entries > 0);
    assert_eq!(
        sent(NOW + time::Duration::minutes(30)).await,
        None,
        "within the hour"
    );
    assert_eq!(
        sent(NOW + time::Duration::hours(2)).await,
        None,
        "the head did not move"
    );
    let task = app.scene().await;
    let set = app
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P0"}))],
        )
        .await
        .change_set
        .expect("queued")
        .id;
    app.engine
        .confirmations()
        .by("alice")
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    let moved = sent(NOW + time::Duration::hours(3))
        .await
        .expect("the head moved");
    assert_ne!(moved.hash, first.hash);
    let mut conn = app.store.read_connection().await.unwrap();
    let payloads: Vec<String> = sqlx::query_scalar(
        "SELECT payload FROM webhook_events WHERE event_type = 'audit.head' ORDER BY created_at",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(payloads.len(), 2);
    let last: Value = serde_json::from_str(&payloads[1]).unwrap();
    assert_eq!(last["data"]["head"], moved.hash.as_str());
}
