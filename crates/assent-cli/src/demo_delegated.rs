//! `assent demo --delegated`: a headless sub-agent's tool calls confirmed by its
//! parent's session over the confirmation bus — a confirmation that becomes a standing
//! grant, a rejection with a reason, the grant used on the next call, a question nobody
//! is left to answer, and the records this leaves (grants, decisions, audit trail).
//!
//! The parent's person is scripted here; `assent serve` will put a real one behind the
//! same bus.

use crate::context::engine;
use crate::demo::{DEMO_START, Story, call, on_fresh_store};
use crate::{CliError, render};
use assent_changeset::parse_tool_calls;
use assent_confirm::grants::GrantFilter;
use assent_confirm::history::AuditFilter;
use assent_confirm::{
    AgentBus, BusConfig, CancellationToken, ConfirmationBus, ConfirmationOutcome, ScheduledWake,
    Scheduler, Session, WakeRequest,
};
use assent_domain::{OffsetDateTime, Uuid};
use assent_journal_host::{NewTask, create_task, task_target};
use assent_store::Store;
use serde_json::{Value, json};

/// The sub-agent's policy id.
const AGENT: &str = "researcher";

/// Runs the story on a fresh temporary database; returns it as text.
pub async fn run(start: Option<OffsetDateTime>) -> Result<String, CliError> {
    on_fresh_store(async |store| tell(store, start.unwrap_or(DEMO_START)).await).await
}

async fn new_task(store: &Store, title: &str, now: OffsetDateTime) -> Result<String, CliError> {
    let id = Uuid::new_v4().to_string();
    let mut tx = store.begin_write().await?;
    let new = NewTask {
        title: title.to_owned(),
        category: Some("work".to_owned()),
        priority: Some("P2".to_owned()),
        ..NewTask::default()
    };
    create_task(tx.connection(), &id, &new, store.device_id(), now).await?;
    tx.commit().await?;
    Ok(id)
}

async fn sub_agent_wake(
    store: &Store,
    bus: &AgentBus,
    task_id: &str,
    calls: &Value,
    now: OffsetDateTime,
) -> Result<ScheduledWake, CliError> {
    let calls = parse_tool_calls(calls).map_err(|e| CliError::failed(e.to_string()))?;
    let request = WakeRequest::new(
        AGENT,
        task_target(task_id),
        Uuid::new_v4().to_string(),
        calls,
    );
    Ok(Scheduler::new(
        engine(store.clone()).await?,
        Session::Delegated(bus.clone()),
    )
    .wake(request, &CancellationToken::new(), now)
    .await?)
}

fn replies(s: &mut Story, scheduled: &ScheduledWake) {
    for call in &scheduled.calls {
        s.block(format!(
            "{} ({}): {}",
            call.tool_name,
            call.strategy,
            call.reply()
        ));
    }
}

async fn tell(store: &Store, start: OffsetDateTime) -> Result<String, CliError> {
    let now = start;
    let mut s = Story::default();
    s.say("Assent demo, delegated: a headless sub-agent asks its parent's session.");

    s.heading("A parent session and its sub-agent");
    let parent = ConfirmationBus::new("lead", BusConfig::default())?;
    let researcher = parent.derive(AGENT)?;
    engine(store.clone())
        .await?
        .set_categories(AGENT, &["work".to_owned()], now)
        .await?;
    let task_id = new_task(store, "Prepare the Q1 board report", now).await?;
    s.say(format!(
        "The parent session owns the bus \"lead\"; the sub-agent only gets a bus derived from it, \
         so every question it asks says it comes from {:?}, whatever it claims.",
        researcher.path()
    ));

    s.heading("The sub-agent's calls, answered by the parent");
    let mut subscription = parent.subscribe();
    let answering = {
        let parent = parent.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(request) = subscription.recv().await {
                // The scripted person: "always" for raising the priority to P0, "no"
                // to blocking the task.
                let outcome = match request.tool_call.name.as_str() {
                    "update_task_priority" => ConfirmationOutcome::ProceedAlways {
                        args_pattern: Some(json!({"priority": "P0"})),
                    },
                    _ => ConfirmationOutcome::reject("Waiting on finance is not a blocker"),
                };
                let answered = parent.respond(
                    request.correlation_id.as_deref().unwrap_or_default(),
                    outcome.clone(),
                );
                seen.push((request, outcome, answered.is_ok()));
                if seen.len() == 2 {
                    break;
                }
            }
            seen
        })
    };
    let first = sub_agent_wake(
        store,
        &researcher,
        &task_id,
        &json!([
            call("call_1", "update_task_priority", json!({"priority": "P0"})),
            call("call_2", "set_task_status", json!({"status": "BLOCKED"})),
        ]),
        now,
    )
    .await?;
    let seen = answering
        .await
        .map_err(|e| CliError::failed(format!("the parent session failed: {e}")))?;
    for (request, outcome, answered) in &seen {
        s.say("The parent's session receives:");
        s.block(serde_json::to_string_pretty(request).unwrap_or_default());
        s.say(format!(
            "and answers {}{}",
            serde_json::to_string(outcome).unwrap_or_default(),
            if *answered { "" } else { " (too late)" }
        ));
        s.gap();
    }
    s.say("What the sub-agent is told:");
    replies(&mut s, &first);

    s.heading("The next call: the grant answers, nobody is asked");
    let second_task = new_task(store, "Book the board meeting room", now).await?;
    let second = sub_agent_wake(
        store,
        &researcher,
        &second_task,
        &json!([call(
            "call_3",
            "update_task_priority",
            json!({"priority": "P0"})
        )]),
        now,
    )
    .await?;
    replies(&mut s, &second);

    s.heading("Nobody listening: fail closed, at once");
    let third = sub_agent_wake(
        store,
        &researcher,
        &second_task,
        &json!([call(
            "call_4",
            "set_task_status",
            json!({"status": "ON HOLD"})
        )]),
        now,
    )
    .await?;
    replies(&mut s, &third);

    s.heading("The grants (assent grants; revoke with assent grants revoke ID)");
    let engine = engine(store.clone()).await?;
    let grants = engine.admin().grants(&GrantFilter::default()).await?;
    s.block(render::grants(&grants));

    s.heading("The audit trail: delegated confirmations run through the same executor");
    let mut records = engine
        .admin()
        .audit_trail(&AuditFilter::Target(task_target(task_id)), 100)
        .await?;
    records.extend(
        engine
            .admin()
            .audit_trail(&AuditFilter::Target(task_target(second_task)), 100)
            .await?,
    );
    s.block(render::audit(&records));
    Ok(s.text)
}
