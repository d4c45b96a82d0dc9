//! Proof of consent (issue 38): after a random mix of proposals, confirmations (some
//! edited), rejections, quorums, holds, cancels, undos, confirm-all, rule changes and
//! sync between two devices, `audit verify` holds on both devices and both backends;
//! and editing any one row of decisions, approvals, audit records, jobs or rules, or
//! removing or reordering an entry of the chain, makes it fail naming the entry.
//!
//! The run is a seeded generator ([`Lcg`]): a seed that fails is added to [`SEEDS`] as
//! a regression case once understood.

use assent_confirm::ItemRef;
use assent_confirm::{RuleChange, WakeRequest};
use assent_journal_host::task_target;
use assent_store::proof::{self, ProofRule, Report, VerifyOptions};
use assent_store::{Connection, agents, audit};
use assent_tests::{Lcg, NOW, TestApp, TestBackend, backends, tool_calls};
use assent_tools::RuleAction;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// The seeds every run tries.
const SEEDS: &[u64] = &[1, 38, 2026];
/// Steps per seed.
const STEPS: u64 = 40;
const PEOPLE: &[&str] = &["alice", "bob", "carol"];

async fn verify(app: &TestApp) -> Report {
    let mut conn = app.store.read_connection().await.unwrap();
    proof::verify(&mut conn, &VerifyOptions::default())
        .await
        .unwrap()
}

fn call(rng: &mut Lcg, n: u64) -> (&'static str, Value) {
    match rng.below(4) {
        0 => (
            "update_task_priority",
            json!({"priority": format!("P{}", rng.below(4))}),
        ),
        1 => ("add_checklist_item", json!({"title": format!("Step {n}")})),
        2 => ("set_task_title", json!({"title": format!("Title {n}")})),
        _ => ("set_task_language", json!({"language": "en"})),
    }
}

/// `(set, index)` of `app`'s items in one of `statuses` (SQL string literals).
async fn items_in(app: &TestApp, statuses: &str) -> Vec<(Uuid, usize)> {
    let mut conn = app.store.read_connection().await.unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT change_set_id, item_index FROM change_items WHERE status IN ({statuses}) ORDER BY change_set_id, item_index"
    )))
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, index)| (Uuid::parse_str(&id).unwrap(), index as usize))
        .collect()
}

/// Items a person may still decide.
async fn open_items(app: &TestApp) -> Vec<(Uuid, usize)> {
    items_in(app, "'pending', 'deferred'").await
}

/// Confirmed items, for undo.
async fn confirmed_items(app: &TestApp) -> Vec<(Uuid, usize)> {
    items_in(app, "'confirmed'").await
}

fn pick<T: Copy>(rng: &mut Lcg, items: &[T]) -> Option<T> {
    (!items.is_empty()).then(|| items[rng.below(items.len() as u64) as usize])
}

/// One random step on `app` (or, for sync, between `app` and `peer`) at `now`.
async fn step(
    rng: &mut Lcg,
    app: &TestApp,
    peer: &TestApp,
    task: &str,
    n: u64,
    now: OffsetDateTime,
) {
    let person = PEOPLE[rng.below(PEOPLE.len() as u64) as usize];
    let confirmations = app.engine.confirmations().by(person);
    match rng.below(11) {
        0..=2 => {
            let calls: Vec<(&str, Value)> =
                (0..=rng.below(3)).map(|i| call(rng, n * 10 + i)).collect();
            let request = WakeRequest::new(
                "agent-1",
                task_target(task),
                Uuid::new_v4().to_string(),
                tool_calls(&calls),
            );
            let _ = app.engine.wakes().wake(request, now).await;
        }
        3 | 4 => {
            if let Some((set, index)) = pick(rng, &open_items(app).await) {
                let _ = confirmations
                    .confirm_item(ItemRef::new(set, index), now)
                    .await;
            }
        }
        5 => {
            if let Some((set, index)) = pick(rng, &open_items(app).await) {
                let _ = confirmations
                    .edit_and_confirm(ItemRef::new(set, index), json!({"priority": "P2"}), now)
                    .await;
            }
        }
        6 => {
            if let Some((set, index)) = pick(rng, &open_items(app).await) {
                let _ = confirmations
                    .reject_item(
                        ItemRef::new(set, index),
                        Some(format!("not now ({person})")),
                        now,
                    )
                    .await;
            }
        }
        7 => {
            if let Some((set, _)) = pick(rng, &open_items(app).await) {
                let _ = confirmations.confirm_all(set, now).await;
            }
        }
        8 => {
            let tool = ["update_task_*", "add_checklist_item", "set_task_title", "*"]
                [rng.below(4) as usize];
            let action = [
                RuleAction::Allow,
                RuleAction::Ask,
                RuleAction::Ask,
                RuleAction::Deny,
            ][rng.below(4) as usize];
            let approvals = (action == RuleAction::Ask).then(|| 1 + rng.below(2) as u32);
            let change = RuleChange {
                approvals,
                ..RuleChange::new(tool, action)
            };
            let _ = app.engine.change_rule("agent-1", &change, now).await;
            if rng.below(3) == 0 {
                let mut conn = app.store.read_connection().await.unwrap();
                let seconds = [0, 30][rng.below(2) as usize];
                let _ =
                    agents::set_hold(&mut conn, "agent-1", "update_task_priority", seconds, now)
                        .await;
            }
        }
        9 => {
            if let Some((set, index)) = pick(rng, &confirmed_items(app).await) {
                let _ = confirmations.undo(ItemRef::new(set, index), now).await;
            }
            let _ = app.engine.run_due_jobs(now).await;
        }
        _ => {
            app.send_to(peer).await;
            peer.send_to(app).await;
        }
    }
}

/// The audit trail of `app`, to explain a failing seed.
async fn trail(app: &TestApp) -> String {
    let mut conn = app.store.read_connection().await.unwrap();
    audit::list(&mut conn, &audit::AuditFilter::All, 10_000)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {:?} run {}",
                r.operation_id.as_str(),
                r.tool_name,
                r.kind.as_str(),
                r.success,
                r.run_key
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The violations of `report`, for a failure message.
fn listed(report: &Report) -> String {
    report
        .violations
        .iter()
        .map(|v| format!("{} [{}] {}", v.entry, v.rule.as_str(), v.expected))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn run(backend: &TestBackend, seed: u64) -> (TestApp, TestApp) {
    let a = TestApp::device_on(backend, "device-a").await;
    let b = TestApp::device_on(backend, "device-b").await;
    let task = a.scene().await;
    b.agent("agent-1", &["work"]).await;
    a.send_to(&b).await;
    let mut rng = Lcg(seed);
    for n in 0..STEPS {
        let now = NOW + Duration::minutes(n as i64);
        // Most steps on device A, some on B (its copy of the task once synced).
        if rng.below(4) == 0 {
            step(&mut rng, &b, &a, &task, n, now).await;
        } else {
            step(&mut rng, &a, &b, &task, n, now).await;
        }
    }
    let end = NOW + Duration::minutes(STEPS as i64 + 5);
    let _ = a.engine.run_due_jobs(end).await;
    let _ = b.engine.run_due_jobs(end).await;
    (a, b)
}

#[tokio::test]
async fn a_random_mix_of_every_path_verifies_on_every_device_and_backend() {
    for backend in backends() {
        for &seed in SEEDS {
            let (a, b) = run(&backend, seed).await;
            for (name, app) in [("device-a", &a), ("device-b", &b)] {
                let report = verify(app).await;
                if !report.verified() {
                    panic!(
                        "seed {seed} on {backend:?}, {name}: the proof does not hold:\n{}\nthe audit trail:\n{}",
                        listed(&report),
                        trail(app).await
                    );
                }
                assert!(report.entries > 0, "{name}: an empty chain");
            }
        }
    }
}

/// Runs `sql` in a transaction, verifies inside it, and rolls back: the report, or
/// `None` when `sql` changed nothing (the run left no such row).
async fn tampered(app: &TestApp, sql: &str) -> Option<Report> {
    let mut tx = app.store.begin_write().await.unwrap();
    let mut changed = 0;
    for statement in sql.split(';') {
        changed += sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(tx.connection())
            .await
            .unwrap()
            .rows_affected();
    }
    let conn: &mut Connection = tx.connection();
    let report = proof::verify(conn, &VerifyOptions::default())
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    (changed > 0).then_some(report)
}

#[tokio::test]
async fn editing_any_one_row_or_entry_is_caught_and_named() {
    for backend in backends() {
        let (a, _b) = run(&backend, 38).await;
        // A quorum and a held job, so that every table has rows to tamper with.
        let task = a.scene().await;
        let quorum = RuleChange {
            approvals: Some(2),
            ..RuleChange::new("add_checklist_item", RuleAction::Ask)
        };
        let now = NOW + Duration::hours(2);
        a.engine.change_rule("agent-1", &quorum, now).await.unwrap();
        let mut conn = a.store.read_connection().await.unwrap();
        agents::set_hold(&mut conn, "agent-1", "update_task_priority", 30, now)
            .await
            .unwrap();
        drop(conn);
        let set = a
            .wake(
                &task,
                &[
                    ("add_checklist_item", json!({"title": "Quorum"})),
                    ("update_task_priority", json!({"priority": "P3"})),
                ],
            )
            .await
            .change_set
            .expect("queued")
            .id;
        let people = a.engine.confirmations();
        people
            .clone()
            .by("alice")
            .confirm_item(ItemRef::new(set, 0), now)
            .await
            .unwrap();
        people
            .clone()
            .by("bob")
            .confirm_item(ItemRef::new(set, 0), now)
            .await
            .unwrap();
        people
            .by("carol")
            .confirm_item(ItemRef::new(set, 1), now)
            .await
            .unwrap();
        a.engine
            .run_due_jobs(now + Duration::minutes(1))
            .await
            .unwrap();
        let clean = verify(&a).await;
        assert!(clean.verified(), "{backend:?}: {}", listed(&clean));

        let row_edits = [
            (
                "decisions",
                "UPDATE decisions SET reason = 'tampered' WHERE id = (SELECT MIN(id) FROM decisions)",
            ),
            (
                "approvals",
                "UPDATE approvals SET approved_by = 'mallory' WHERE approved_by = 'bob'",
            ),
            (
                "audit_records",
                "UPDATE audit_records SET args = '{}' WHERE id = (SELECT MAX(id) FROM audit_records)",
            ),
            (
                "execution_jobs",
                "UPDATE execution_jobs SET status = CASE WHEN status = 'applied' THEN 'failed' ELSE 'applied' END WHERE id = (SELECT MIN(id) FROM execution_jobs)",
            ),
            (
                "agents",
                "UPDATE agents SET rules = '[{\"pattern\":\"*\",\"action\":\"allow\"}]' WHERE id = 'agent-1'",
            ),
        ];
        for (table, sql) in row_edits {
            let report = tampered(&a, sql)
                .await
                .unwrap_or_else(|| panic!("no row of {table} to edit"));
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == ProofRule::RowMatchesEntry && v.entry.contains('#')),
                "{backend:?}: an edit of {table} was not named: {}",
                listed(&report)
            );
        }
        let device = clean.device_id.clone();
        let entry_edits = [
            (
                "an edited entry",
                format!(
                    "UPDATE consent_chain SET content = REPLACE(content, 'alice', 'mallory') WHERE device_id = '{device}' AND content LIKE '%alice%'"
                ),
            ),
            (
                "a removed entry",
                format!("DELETE FROM consent_chain WHERE device_id = '{device}' AND seq = 3"),
            ),
            (
                "reordered entries",
                format!(
                    "UPDATE consent_chain SET seq = 1000000 WHERE device_id = '{device}' AND seq = 4;\
                 UPDATE consent_chain SET seq = 4 WHERE device_id = '{device}' AND seq = 5;\
                 UPDATE consent_chain SET seq = 5 WHERE device_id = '{device}' AND seq = 1000000"
                ),
            ),
        ];
        for (what, sql) in entry_edits {
            let report = tampered(&a, &sql)
                .await
                .unwrap_or_else(|| panic!("{what}: nothing changed"));
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == ProofRule::ChainIntact),
                "{backend:?}: {what} was not caught: {}",
                listed(&report)
            );
        }
        // A head written down before catches a tail cut off.
        let cut = format!(
            "DELETE FROM consent_chain WHERE device_id = '{device}' AND seq = {}",
            clean.entries
        );
        let mut tx = a.store.begin_write().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(cut))
            .execute(tx.connection())
            .await
            .unwrap();
        let conn: &mut Connection = tx.connection();
        let checkpoint = VerifyOptions {
            head: Some(clean.head.clone()),
            ..VerifyOptions::default()
        };
        let report = proof::verify(conn, &checkpoint).await.unwrap();
        tx.rollback().await.unwrap();
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::ChainIntact),
            "{}",
            listed(&report)
        );
    }
}

#[tokio::test]
async fn a_rule_change_is_entered_with_who_made_it_and_still_verifies() {
    let app = TestApp::spawn().await;
    app.scene().await;
    let change = RuleChange {
        by: Some("alice".into()),
        ..RuleChange::new("update_task_*", RuleAction::Allow)
    };
    assert!(
        app.engine
            .change_rule("agent-1", &change, NOW)
            .await
            .unwrap()
    );
    let mut conn = app.store.read_connection().await.unwrap();
    let last: String = sqlx::query_scalar(
        "SELECT content FROM consent_chain WHERE kind = 'rules' ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    drop(conn);
    let last: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["by"], "alice", "{last}");
    assert_eq!(last["rules"][0]["pattern"], "update_task_*", "{last}");
    let report = verify(&app).await;
    assert!(report.verified(), "{}", listed(&report));
}

/// Puts `update_task_priority` of `agent-1` under a quorum of `approvals` at `now`.
async fn quorum_of(app: &TestApp, approvals: u32, now: OffsetDateTime) {
    let change = RuleChange {
        approvals: Some(approvals),
        ..RuleChange::new("update_task_priority", RuleAction::Ask)
    };
    app.engine
        .change_rule("agent-1", &change, now)
        .await
        .unwrap();
}

/// Runs `sql` around the store, committed (an attacker with the file).
async fn around_the_store(app: &TestApp, sql: &str) {
    let mut tx = app.store.begin_write().await.unwrap();
    let changed = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(tx.connection())
        .await
        .unwrap()
        .rows_affected();
    tx.commit().await.unwrap();
    assert!(changed > 0, "{sql} changed nothing");
}

#[tokio::test]
async fn a_quorum_lowered_after_the_proposal_does_not_verify_nor_against_an_earlier_head() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        quorum_of(&app, 2, NOW).await;
        let before = app.engine.admin().chain_head().await.unwrap();
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P3"}))],
            )
            .await
            .change_set
            .expect("queued")
            .id;
        // The rule lowered through the store (on the chain), the item's row around it.
        quorum_of(&app, 1, NOW + Duration::minutes(1)).await;
        around_the_store(
            &app,
            &format!(
                "UPDATE change_items SET approvals_needed = NULL WHERE change_set_id = '{set}'"
            ),
        )
        .await;
        app.engine
            .confirmations()
            .by("alice")
            .confirm_item(ItemRef::new(set, 0), NOW + Duration::minutes(2))
            .await
            .unwrap();
        assert_eq!(
            app.load(&task).await.priority.as_deref(),
            Some("P3"),
            "{backend:?}: one person applied a two-person item"
        );
        for head in [None, Some(before.hash.clone())] {
            let mut conn = app.store.read_connection().await.unwrap();
            let options = VerifyOptions {
                head: head.clone(),
                ..VerifyOptions::default()
            };
            let report = proof::verify(&mut conn, &options).await.unwrap();
            assert!(!report.verified(), "{backend:?} {head:?}: it verified");
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == ProofRule::Consent
                        && v.expected.contains("2 distinct people")),
                "{backend:?}: {}",
                listed(&report)
            );
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.rule == ProofRule::RowMatchesEntry
                        && v.expected
                            .contains("to need 2 approvals as proposed, the row now says 1")),
                "{backend:?}: {}",
                listed(&report)
            );
        }
    }
}

#[tokio::test]
async fn the_agent_through_any_door_is_the_agent_and_a_client_answer_is_counted_apart() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let ask = RuleChange::new("update_task_priority", RuleAction::Ask);
        app.engine.change_rule("agent-1", &ask, NOW).await.unwrap();
        let propose = |to: &'static str| {
            let (app, task) = (&app, &task);
            async move {
                app.wake(task, &[("update_task_priority", json!({"priority": to}))])
                    .await
                    .change_set
                    .expect("queued")
                    .id
            }
        };
        // An answer in the agent's MCP client: not a person's consent, counted apart.
        let set = propose("P3").await;
        app.engine
            .confirmations()
            .by("mcp-client:claude-code")
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        let report = verify(&app).await;
        assert!(report.verified(), "{backend:?}: {}", listed(&report));
        assert_eq!(report.client_answered, 1, "{backend:?}");
        let mut conn = app.store.read_connection().await.unwrap();
        let strict = VerifyOptions {
            strict: true,
            ..VerifyOptions::default()
        };
        let report = proof::verify(&mut conn, &strict).await.unwrap();
        drop(conn);
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::Unchecked
                    && v.expected.contains("mcp-client:claude-code")),
            "{backend:?}: --strict fails it: {}",
            listed(&report)
        );

        // The agent mapped as a Slack user: the agent, as `--as agent-1` is.
        let set = propose("P0").await;
        app.engine
            .confirmations()
            .by(assent_domain::slack_reviewer("U9", "agent-1"))
            .confirm_item(ItemRef::new(set, 0), NOW)
            .await
            .unwrap();
        let report = verify(&app).await;
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::Consent
                    && v.expected.contains("not the agent agent-1")),
            "{backend:?}: the agent confirmed through Slack: {}",
            listed(&report)
        );
    }
}

#[tokio::test]
async fn imported_effects_are_counted_by_origin_device_and_fail_under_strict() {
    let a = TestApp::device("device-a").await;
    let b = TestApp::device("device-b").await;
    let task = a.scene().await;
    b.agent("agent-1", &["work"]).await;
    let ask = RuleChange::new("update_task_priority", RuleAction::Ask);
    a.engine.change_rule("agent-1", &ask, NOW).await.unwrap();
    let set = a
        .wake(
            &task,
            &[("update_task_priority", json!({"priority": "P3"}))],
        )
        .await
        .change_set
        .expect("queued")
        .id;
    a.engine
        .confirmations()
        .by("alice")
        .confirm_item(ItemRef::new(set, 0), NOW)
        .await
        .unwrap();
    a.send_to(&b).await;
    let report = verify(&b).await;
    assert!(report.verified(), "{}", listed(&report));
    assert_eq!(
        report.imported.get("device-a"),
        Some(&1),
        "the imported effect is counted by its origin: {report:?}"
    );
    let mut conn = b.store.read_connection().await.unwrap();
    let strict = VerifyOptions {
        strict: true,
        ..VerifyOptions::default()
    };
    let report = proof::verify(&mut conn, &strict).await.unwrap();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.rule == ProofRule::Unchecked && v.expected.contains("device-a")),
        "{}",
        listed(&report)
    );
}

#[tokio::test]
async fn a_chain_removed_after_use_is_not_begun_again_by_the_next_open() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let task = app.scene().await;
        let ask = RuleChange::new("update_task_priority", RuleAction::Ask);
        app.engine.change_rule("agent-1", &ask, NOW).await.unwrap();
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P3"}))],
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
        around_the_store(&app, "DELETE FROM consent_chain").await;
        // The next open finds history since the upgrade: it begins no chain to hide it.
        let reopened = assent_store::Store::open(&app.url()).await.unwrap();
        let mut conn = reopened.read_connection().await.unwrap();
        let report = proof::verify(&mut conn, &VerifyOptions::default())
            .await
            .unwrap();
        assert_eq!(report.entries, 0, "{backend:?}: a chain was begun again");
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.expected.contains("written around the store")),
            "{backend:?}: {}",
            listed(&report)
        );
    }
}

/// The whole chain verified, nothing stored (`--full`).
async fn verify_full(app: &TestApp) -> Report {
    let mut conn = app.store.read_connection().await.unwrap();
    let full = VerifyOptions {
        full: true,
        ..VerifyOptions::default()
    };
    proof::verify(&mut conn, &full).await.unwrap()
}

/// What a verify says, whichever entries it read: the verdict, every violation, the
/// head and the number of entries.
fn verdict(report: &Report) -> (bool, String, String, u64) {
    (
        report.verified(),
        listed(report),
        report.head.clone(),
        report.entries,
    )
}

/// The head `audit verify` stored for `app`'s own chain: `(seq, hash)`.
async fn stored_head(app: &TestApp, device: &str) -> Option<(i64, String)> {
    let mut conn = app.store.read_connection().await.unwrap();
    sqlx::query_as("SELECT seq, hash FROM verified_heads WHERE device_id = $1")
        .bind(device)
        .fetch_optional(&mut *conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_incremental_verify_after_a_full_one_gives_the_same_verdict() {
    for backend in backends() {
        for &seed in SEEDS {
            let a = TestApp::device_on(&backend, "device-a").await;
            let b = TestApp::device_on(&backend, "device-b").await;
            let task = a.scene().await;
            b.agent("agent-1", &["work"]).await;
            a.send_to(&b).await;
            let mut rng = Lcg(seed);
            // Half the steps, a verify on each device that stores its head, then the
            // other half: held jobs confirmed before the head run after it, items
            // decided before it are rejected or undone after it.
            for n in 0..STEPS {
                if n == STEPS / 2 {
                    for app in [&a, &b] {
                        let first = app
                            .engine
                            .admin()
                            .verify_proof(&VerifyOptions::default())
                            .await
                            .unwrap();
                        assert!(first.verified(), "seed {seed}: {}", listed(&first));
                        assert!(first.started_after.is_none(), "the first verify is full");
                    }
                }
                let now = NOW + Duration::minutes(n as i64);
                if rng.below(4) == 0 {
                    step(&mut rng, &b, &a, &task, n, now).await;
                } else {
                    step(&mut rng, &a, &b, &task, n, now).await;
                }
            }
            let end = NOW + Duration::minutes(STEPS as i64 + 5);
            let _ = a.engine.run_due_jobs(end).await;
            let _ = b.engine.run_due_jobs(end).await;
            for (name, app) in [("device-a", &a), ("device-b", &b)] {
                let incremental = app
                    .engine
                    .admin()
                    .verify_proof(&VerifyOptions::default())
                    .await
                    .unwrap();
                let started = incremental
                    .started_after
                    .clone()
                    .unwrap_or_else(|| panic!("{name}: {:?}", incremental.full_because));
                assert!(incremental.checked_entries < incremental.entries);
                let full = verify_full(app).await;
                assert_eq!(
                    verdict(&incremental),
                    verdict(&full),
                    "seed {seed} on {backend:?}, {name}: incremental and full differ"
                );
                assert!(full.verified(), "seed {seed}, {name}: {}", listed(&full));
                // The clean incremental verify moved the head to the chain's end.
                let (seq, hash) = stored_head(app, &full.device_id).await.unwrap();
                assert!(seq as u64 > started.seq);
                assert_eq!((seq as u64, hash), (full.entries, full.head.clone()));
            }
        }
    }
}

/// `app` with one confirmed and run item, verified (its head stored), then a second
/// confirmed and run item after the head: the set decided before the head, and the
/// one after it.
async fn verified_then_more(app: &TestApp) -> (Uuid, Uuid, u64) {
    let task = app.scene().await;
    let ask = RuleChange::new("update_task_priority", RuleAction::Ask);
    app.engine.change_rule("agent-1", &ask, NOW).await.unwrap();
    let mut sets = Vec::new();
    let mut head = 0;
    for (n, priority) in ["P3", "P2"].into_iter().enumerate() {
        let woken = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": priority}))],
            )
            .await;
        let set = woken
            .change_set
            .clone()
            .unwrap_or_else(|| panic!("queued: {woken:?}"))
            .id;
        app.engine
            .confirmations()
            .by("alice")
            .confirm_item(ItemRef::new(set, 0), NOW + Duration::minutes(n as i64))
            .await
            .unwrap();
        sets.push(set);
        if n == 0 {
            let first = app
                .engine
                .admin()
                .verify_proof(&VerifyOptions::default())
                .await
                .unwrap();
            assert!(first.verified(), "{}", listed(&first));
            head = first.entries;
        }
    }
    (sets[0], sets[1], head)
}

#[tokio::test]
async fn tampering_after_the_head_is_found_incrementally_and_before_it_only_by_full() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        let (before, after, head_before) = verified_then_more(&app).await;
        let clean = app
            .engine
            .admin()
            .verify_proof(&VerifyOptions::default())
            .await
            .unwrap();
        assert!(clean.verified(), "{backend:?}: {}", listed(&clean));
        assert!(
            clean.started_after.is_some(),
            "{backend:?}: not incremental"
        );
        // The head before the second set stored again: the second set is new (its
        // audit rows are read by their entries: the stored last audit id is above them).
        let (first, _) = stored_head(&app, &clean.device_id).await.unwrap();
        let device = clean.device_id.clone();
        assert!(head_before > 0 && first as u64 > head_before);
        around_the_store(
            &app,
            &format!(
                "UPDATE verified_heads SET seq = {head_before}, hash = (SELECT hash FROM consent_chain WHERE device_id = '{device}' AND seq = {head_before}) WHERE device_id = '{device}'"
            ),
        )
        .await;

        // After the head: a row and an entry of the second set, found incrementally.
        let after_edits = [
            (
                ProofRule::RowMatchesEntry,
                format!("UPDATE decisions SET reason = 'tampered' WHERE change_set_id = '{after}'"),
            ),
            (
                ProofRule::RowMatchesEntry,
                "UPDATE audit_records SET args = '{}' WHERE id = (SELECT MAX(id) FROM audit_records)".to_owned(),
            ),
            (
                ProofRule::ChainIntact,
                format!(
                    "UPDATE consent_chain SET content = REPLACE(content, 'alice', 'mallory') WHERE device_id = '{device}' AND seq > {head_before} AND content LIKE '%alice%'"
                ),
            ),
        ];
        for (rule, sql) in after_edits {
            let report = tampered(&app, &sql)
                .await
                .unwrap_or_else(|| panic!("{sql}: nothing changed"));
            assert!(
                report.started_after.is_some(),
                "{backend:?}: {sql}: not incremental"
            );
            assert!(
                report.violations.iter().any(|v| v.rule == rule),
                "{backend:?}: {sql} was not found incrementally: {}",
                listed(&report)
            );
        }

        // Before the head: a row of the first set. An incremental verify does not read
        // it (the guide says so); `--full` finds it.
        let sql =
            format!("UPDATE decisions SET reason = 'tampered' WHERE change_set_id = '{before}'");
        let report = tampered(&app, &sql).await.expect("a decision edited");
        assert!(report.started_after.is_some());
        // FIXME-free by design: only `--full` reads what was verified before the head.
        assert!(report.verified(), "{backend:?}: {}", listed(&report));
        let mut tx = app.store.begin_write().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(tx.connection())
            .await
            .unwrap();
        let full = VerifyOptions {
            full: true,
            ..VerifyOptions::default()
        };
        let report = proof::verify(tx.connection(), &full).await.unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(report.full_because.as_deref(), Some("--full"));
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::RowMatchesEntry),
            "{backend:?}: --full missed an edit before the head: {}",
            listed(&report)
        );
    }
}

#[tokio::test]
async fn a_stored_head_no_longer_on_the_chain_is_a_violation_and_a_full_verify() {
    for backend in backends() {
        let app = TestApp::on(&backend).await;
        verified_then_more(&app).await;
        let device = app.engine.admin().chain_head().await.unwrap().device_id;
        let (seq, hash) = stored_head(&app, &device).await.unwrap();
        // The chain rewritten under the stored head (its entry's hash changed).
        around_the_store(
            &app,
            &format!(
                "UPDATE consent_chain SET hash = '{}' WHERE device_id = '{device}' AND seq = {seq}",
                "0".repeat(64)
            ),
        )
        .await;
        let report = app
            .engine
            .admin()
            .verify_proof(&VerifyOptions::default())
            .await
            .unwrap();
        assert!(!report.verified());
        assert!(
            report.started_after.is_none(),
            "{backend:?}: not a full verify"
        );
        assert_eq!(
            report.full_because.as_deref(),
            Some("the stored verified head is no longer on the chain")
        );
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.rule == ProofRule::ChainIntact && v.entry == format!("{device}#{seq}")),
            "{backend:?}: {}",
            listed(&report)
        );
        // A verify that found anything never moves the stored head.
        assert_eq!(stored_head(&app, &device).await, Some((seq, hash)));
    }
}
