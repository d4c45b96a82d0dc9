//! A sub-agent's tool call confirmed by its parent's session over the confirmation bus.
//!
//! The parent owns the root bus and listens; the sub-agent runs headless with a bus
//! derived from it, so every question it asks carries the path `lead/researcher`, not
//! whatever it claims. Its call is queued as a change-set item first (nothing is lost),
//! then put to the parent, who confirms it; the confirmation runs through the same
//! policy-enforcing, audited executor as a person's. Run it with
//! `cargo run -p assent --example subagent`.

// An example talks to a person: printing is its job.
#![allow(clippy::print_stdout)]

use assent::changeset::parse_tool_calls;
use assent::confirm::{
    BusConfig, CancellationToken, ConfirmationBus, ConfirmationOutcome, Engine, Scheduler, Session,
    WakeRequest,
};
use assent::domain::{OffsetDateTime, Uuid};
use assent::journal_host::{JournalHost, NewTask, create_task, load_task, task_target};
use assent::store::Store;
use serde_json::json;
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(&format!("sqlite://{}/subagent.db", dir.path().display())).await?;
    let now = OffsetDateTime::now_utc();
    // `Engine::open` creates the journal's tables (its own migrations) on first use.
    let engine = Engine::open(
        store.clone(),
        Arc::new(assent::journal::catalog()),
        Arc::new(JournalHost::new(store.device_id())),
    )
    .await?;

    // The sub-agent's policy and a task it may change.
    let task_id = Uuid::new_v4().to_string();
    engine
        .set_categories("researcher", &["work".to_owned()], now)
        .await?;
    let mut tx = store.begin_write().await?;
    let new = NewTask {
        title: "Fix login bug".to_owned(),
        category: Some("work".to_owned()),
        priority: Some("P2".to_owned()),
        ..NewTask::default()
    };
    create_task(tx.connection(), &task_id, &new, store.device_id(), now).await?;
    tx.commit().await?;

    // The parent's interactive session: it listens, shows each question, and confirms.
    let parent = ConfirmationBus::new("lead", BusConfig::default())?;
    let mut questions = parent.subscribe();
    let answering = {
        let parent = parent.clone();
        tokio::spawn(async move {
            let question = questions.recv().await?;
            println!(
                "The parent is asked:\n{}\n",
                serde_json::to_string_pretty(&question).ok()?
            );
            let id = question.correlation_id?;
            parent.respond(&id, ConfirmationOutcome::ProceedOnce).ok()
        })
    };

    // The headless sub-agent wakes with one call that needs a person.
    let calls = parse_tool_calls(&json!([{"id": "call_1", "type": "function",
        "function": {"name": "update_task_priority", "arguments": "{\"priority\":\"P0\"}"}}]))?;
    let session = Session::Delegated(parent.derive("researcher")?);
    let reader = engine.clone();
    let scheduled = Scheduler::new(engine, session)
        .wake(
            WakeRequest::new("researcher", task_target(&task_id), "run-1", calls),
            &CancellationToken::new(),
            now,
        )
        .await?;
    answering.await?;

    for call in &scheduled.calls {
        println!("The sub-agent is told: {}", call.reply());
    }
    let mut conn = store.read_connection().await?;
    let task = load_task(&mut conn, &task_id).await?;
    println!(
        "The task's priority is now {}",
        task.and_then(|t| t.priority).unwrap_or_default()
    );
    if let Some(set) = &scheduled.wake.change_set {
        for decision in reader.decisions_of(set.id).await? {
            println!(
                "Recorded: {} {} by {} (decision {})",
                decision.tool_name,
                decision.verdict,
                decision.decided_by.as_deref().unwrap_or("nobody named"),
                decision.id
            );
        }
    }
    drop(conn);
    store.close().await;
    Ok(())
}
