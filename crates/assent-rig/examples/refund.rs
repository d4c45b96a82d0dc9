//! A rig agent with a person in its loop, end to end on a temporary SQLite database,
//! with no network and no API key: `cargo run -p assent-rig --example refund`.
//!
//! The agent (a scripted completion model standing in for an LLM) reads invoice INV-1
//! with the immediate `get_invoice` and proposes `refund_invoice`, a deferred tool.
//! Both are plain rig tools that run through Assent's audited executor. The hook waits
//! for the person, who confirms from another task through an engine that has none of
//! the service's code, as `assent confirm SET 0` in another terminal would. The hook
//! then applies the refund (the host's job, exactly once) and the model reads its
//! result.
#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use assent_confirm::Engine;
use assent_domain::OffsetDateTime;
use assent_rig::AssentHook;
use assent_store::change_sets::{self, PendingFilter};
use assent_tools::AgentPolicy;
use rig_agent::AgentBuilder;
use serde_json::json;
use std::time::Duration;
use support::invoicing::{self, AGENT};
use support::scripted::{Scripted, Step};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = format!("sqlite://{}/invoicing.db", dir.path().display());
    let policy = AgentPolicy::new(["billing"]);
    let service = invoicing::open(&db, &policy, Default::default()).await?;
    let person = tokio::spawn(person(invoicing::console(&db).await?));

    // The agent: its model, its rig tools, and Assent between them.
    let model = Scripted::new([
        Step::Call {
            id: "call_1",
            tool: "get_invoice",
            args: json!({"invoice": "INV-1"}),
        },
        Step::Call {
            id: "call_2",
            tool: "refund_invoice",
            args: json!({"invoice": "INV-1", "amountCents": 2500}),
        },
        Step::Answer("I asked for the refund; billing says:"),
    ]);
    let hook = AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone())
        .run_key("ticket-4711")
        .wait(Duration::from_secs(60));
    let agent = AgentBuilder::new(model.model())
        .tool(service.get.clone())
        .tool(service.refund.clone())
        .add_hook(hook)
        .build();
    let answer = agent
        .prompt("ACME was charged 25 EUR too much on INV-1. Refund it.")
        .max_turns(6)
        .await?;

    person.await??;
    for read in model.read() {
        println!("model read from {}: {}", read.tool, read.text);
    }
    println!("agent answers: {}", answer.output());
    let refund = model
        .read_of("refund_invoice")
        .ok_or("the model read no refund")?;
    if !answer.output().contains(&refund.text) {
        return Err(format!("the answer lacks the refund's result: {answer}").into());
    }
    let (cents, refunds) = invoicing::refunded(&service.store).await?;
    println!("INV-1 refunded so far: {cents} cents in {refunds} refund(s)");
    let history = service.engine.confirmations();
    let history = history.history(AGENT, Some(&service.invoice), 10).await?;
    println!("{}", history.unwrap_or_default());
    Ok(())
}

/// A person at a console without the service's code: waits for the proposal and
/// confirms it, as `assent confirm SET 0` would.
async fn person(console: Engine) -> Result<(), Error> {
    loop {
        let pending = {
            let mut conn = console.store().read_connection().await?;
            change_sets::pending(&mut conn, &PendingFilter::default()).await?
        };
        if let Some(set) = pending.first() {
            let item = &set.items[0];
            println!("person sees: {} ({})", item.human_summary, item.tool_name);
            let now = OffsetDateTime::now_utc();
            console
                .confirmations()
                .confirm_item(assent_confirm::ItemRef::new(set.id, 0), now)
                .await?;
            println!("person confirms it");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
