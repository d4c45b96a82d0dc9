//! `AssentHook` end to end: a rig agent, driven by a scripted model, calls an immediate
//! `get_invoice` and a deferred `refund_invoice` of a service on a temporary SQLite
//! database; a person decides from another engine on the same database.

mod support;

use assent_confirm::Engine;
use assent_confirm::ItemRef;
use assent_domain::OffsetDateTime;
use assent_rig::{Answer, AssentHook};
use assent_tools::{AgentPolicy, RuleAction, ToolRule};
use rig_agent::AgentBuilder;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::invoicing::{self, AGENT, Service};
use support::scripted::{Read, Scripted, Step};
use uuid::Uuid;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const REFUND_CALL: &str = "call_refund";

fn script() -> Scripted {
    Scripted::new([
        Step::Call {
            id: "call_get",
            tool: "get_invoice",
            args: json!({"invoice": "INV-1"}),
        },
        Step::Call {
            id: REFUND_CALL,
            tool: "refund_invoice",
            args: json!({"invoice": "INV-1", "amountCents": 2500}),
        },
        Step::Answer("Done:"),
    ])
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: String,
    runs: (Arc<AtomicUsize>, Arc<AtomicUsize>),
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = format!("sqlite://{}/invoicing.db", dir.path().display());
        Self {
            _dir: dir,
            db,
            runs: (Arc::default(), Arc::default()),
        }
    }

    async fn service(
        &self,
        policy: &AgentPolicy,
    ) -> Result<Service, Box<dyn std::error::Error + Send + Sync>> {
        invoicing::open(&self.db, policy, self.runs.clone()).await
    }

    fn runs(&self) -> (usize, usize) {
        (
            self.runs.0.load(Ordering::SeqCst),
            self.runs.1.load(Ordering::SeqCst),
        )
    }
}

fn billing() -> AgentPolicy {
    AgentPolicy::new(["billing"])
}

/// Runs the agent with `hook` to its final answer.
async fn run(
    service: &Service,
    hook: AssentHook,
    model: &Scripted,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let agent = AgentBuilder::new(model.model())
        .tool(service.get.clone())
        .tool(service.refund.clone())
        .add_hook(hook)
        .build();
    Ok(agent
        .prompt("Refund 25 EUR on INV-1.")
        .max_turns(6)
        .await?
        .output()
        .to_owned())
}

/// Waits until set `set` exists.
async fn queued(console: &Engine, set: Uuid) {
    while console.confirmations().outcome(set).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn read(text: &str, tool: &str) -> Read {
    Read {
        tool: tool.to_owned(),
        text: text.to_owned(),
    }
}

#[tokio::test]
async fn a_deferred_call_is_queued_and_the_model_reads_so() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let model = script();
    let hook =
        AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone()).run_key("conv-1");
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;

    let answer = run(&service, hook, &model).await?;

    assert_eq!(
        model.read(),
        [
            read("INV-1 for ACME: 12000 cents, 0 refunded.", "get_invoice"),
            read("Proposal queued for user review.", "refund_invoice"),
        ]
    );
    assert_eq!(answer, "Done: Proposal queued for user review.");
    let outcome = service.engine.confirmations().outcome(set).await?;
    assert!(!outcome.settled, "the refund waits for a person");
    assert_eq!(invoicing::refunded(&service.store).await?, (0, 0));
    assert_eq!(
        fixture.runs(),
        (1, 0),
        "the read ran once, through Assent; the refund not at all"
    );
    Ok(())
}

#[tokio::test]
async fn a_waiting_model_reads_the_result_of_a_refund_confirmed_elsewhere() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let console = invoicing::console(&fixture.db).await?;
    let model = script();
    let hook = AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_secs(30));
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;
    let person = tokio::spawn(async move {
        queued(&console, set).await;
        console
            .confirmations()
            .confirm_item(ItemRef::new(set, 0), OffsetDateTime::now_utc())
            .await
    });

    let answer = run(&service, hook, &model).await?;

    person.await??;
    assert_eq!(
        model.read_of("refund_invoice"),
        Some(read("Refunded 2500 cents on INV-1.", "refund_invoice"))
    );
    assert_eq!(answer, "Done: Refunded 2500 cents on INV-1.");
    assert_eq!(invoicing::refunded(&service.store).await?, (2500, 1));
    assert_eq!(fixture.runs(), (1, 1));
    Ok(())
}

#[tokio::test]
async fn a_waiting_model_reads_the_rejection_and_its_reason() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let console = invoicing::console(&fixture.db).await?;
    let model = script();
    let hook = AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_secs(30));
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;
    let person = tokio::spawn(async move {
        queued(&console, set).await;
        let reason = Some("ACME already got a credit note".to_owned());
        console
            .confirmations()
            .reject_item(ItemRef::new(set, 0), reason, OffsetDateTime::now_utc())
            .await
    });

    let again = hook.clone();
    let answer = run(&service, hook, &model).await?;

    person.await??;
    assert_eq!(
        model.read_of("refund_invoice"),
        Some(read(
            "Rejected by the user: ACME already got a credit note",
            "refund_invoice"
        ))
    );
    assert_eq!(
        answer,
        "Done: Rejected by the user: ACME already got a credit note"
    );
    assert_eq!(invoicing::refunded(&service.store).await?, (0, 0));
    let asked_again = again
        .answer("conv-1", REFUND_CALL, "refund_invoice", "{}")
        .await?;
    assert_eq!(
        asked_again,
        Answer {
            text: "Rejected by the user: ACME already got a credit note".into(),
            is_error: true
        },
        "a resumed run reads the decision again and rig marks it as an error"
    );
    assert_eq!(fixture.runs(), (1, 0));
    Ok(())
}

#[tokio::test]
async fn a_denied_call_is_skipped_with_the_refusal_text() -> TestResult {
    let fixture = Fixture::new();
    let policy = billing().with_rule(ToolRule::new("refund_*", RuleAction::Deny)?);
    let service = fixture.service(&policy).await?;
    let model = script();
    let hook =
        AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone()).run_key("conv-1");
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;

    let again = hook.clone();
    run(&service, hook, &model).await?;

    let refused = model
        .read_of("refund_invoice")
        .ok_or("the model read the refusal")?;
    assert!(
        refused.text.starts_with("Denied by policy: ")
            && refused.text.ends_with(". Nothing was queued or executed."),
        "{refused:?}"
    );
    assert!(
        service.engine.confirmations().outcome(set).await.is_err(),
        "nothing was queued"
    );
    let args = r#"{"invoice": "INV-1", "amountCents": 100}"#;
    let denied = again
        .answer("conv-1", "call_2", "refund_invoice", args)
        .await?;
    assert!(denied.is_error, "{denied:?}");
    assert_eq!(fixture.runs(), (1, 0));
    Ok(())
}

#[tokio::test]
async fn a_waiting_model_reads_the_result_of_the_call_as_the_person_edited_it() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let console = invoicing::console(&fixture.db).await?;
    let model = script();
    let hook = AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_secs(30));
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;
    let person = tokio::spawn(async move {
        queued(&console, set).await;
        let edited = json!({"invoice": "INV-1", "amountCents": 1000});
        console
            .confirmations()
            .edit_and_confirm(ItemRef::new(set, 0), edited, OffsetDateTime::now_utc())
            .await
    });

    let answer = run(&service, hook, &model).await?;

    person.await??;
    assert_eq!(answer, "Done: Refunded 1000 cents on INV-1.");
    assert_eq!(invoicing::refunded(&service.store).await?, (1000, 1));
    Ok(())
}

#[tokio::test]
async fn an_agent_restarted_mid_wait_resumes_and_nothing_runs_twice() -> TestResult {
    let fixture = Fixture::new();
    let console = invoicing::console(&fixture.db).await?;

    // The first life: it reads the invoice, proposes the refund, waits, and is killed.
    let first = fixture.service(&billing()).await?;
    let hook = AssentHook::new(first.engine.clone(), AGENT, first.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_secs(30));
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;
    let model = script();
    let life = tokio::spawn(async move { run(&first, hook, &model).await.map(|_| ()) });
    queued(&console, set).await;
    life.abort();
    assert!(life.await.is_err_and(|error| error.is_cancelled()));

    // The person confirms while no agent runs.
    let confirmed = console
        .confirmations()
        .confirm_item(ItemRef::new(set, 0), OffsetDateTime::now_utc())
        .await?;
    assert!(format!("{confirmed:?}").contains("job"), "{confirmed:?}");

    // The second life: a new engine and hook on the same database and run key replay
    // the same calls.
    let second = fixture.service(&billing()).await?;
    let hook = AssentHook::new(second.engine.clone(), AGENT, second.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_secs(30));
    let model = script();
    let answer = run(&second, hook, &model).await?;

    assert_eq!(
        model.read(),
        [
            read("INV-1 for ACME: 12000 cents, 0 refunded.", "get_invoice"),
            read("Refunded 2500 cents on INV-1.", "refund_invoice"),
        ],
        "the read is answered from its first run, the refund from the person's decision"
    );
    assert_eq!(answer, "Done: Refunded 2500 cents on INV-1.");
    assert_eq!(invoicing::refunded(&second.store).await?, (2500, 1));
    assert_eq!(fixture.runs(), (1, 1), "each tool body ran exactly once");
    Ok(())
}

#[tokio::test]
async fn the_streaming_surface_is_gated_the_same_way() -> TestResult {
    use futures_util::StreamExt;
    use rig_agent::agent::MultiTurnStreamItem;

    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let model = script();
    let hook =
        AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone()).run_key("conv-1");
    let agent = AgentBuilder::new(model.model())
        .tool(service.get.clone())
        .tool(service.refund.clone())
        .add_hook(hook)
        .build();

    let mut stream = agent
        .prompt("Refund 25 EUR on INV-1.")
        .max_turns(6)
        .stream();
    let mut answer = None;
    while let Some(item) = stream.next().await {
        if let MultiTurnStreamItem::FinalResponse(last) = item? {
            answer = Some(last.output().to_owned());
        }
    }

    assert_eq!(
        answer.as_deref(),
        Some("Done: Proposal queued for user review.")
    );
    assert_eq!(fixture.runs(), (1, 0));
    Ok(())
}

#[tokio::test]
async fn an_engine_error_stops_the_run_and_nothing_runs() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let model = script();
    let hook = AssentHook::new(service.engine.clone(), "nobody", service.invoice.clone());

    let stopped = run(&service, hook, &model).await;

    let error = stopped.err().ok_or("the run stops")?.to_string();
    assert!(error.contains("unknown agent"), "{error}");
    assert_eq!(model.read(), [], "the model read nothing");
    assert_eq!(fixture.runs(), (0, 0));
    Ok(())
}

#[tokio::test]
async fn a_wait_that_runs_out_reads_queued_and_the_proposal_stays() -> TestResult {
    let fixture = Fixture::new();
    let service = fixture.service(&billing()).await?;
    let model = script();
    let hook = AssentHook::new(service.engine.clone(), AGENT, service.invoice.clone())
        .run_key("conv-1")
        .wait(Duration::from_millis(300));
    let set = hook.change_set_id(REFUND_CALL).ok_or("a named run")?;

    let answer = run(&service, hook, &model).await?;

    assert_eq!(answer, "Done: Proposal queued for user review.");
    let outcome = service.engine.confirmations().outcome(set).await?;
    assert!(!outcome.settled, "still waiting for a person");
    assert_eq!(fixture.runs(), (1, 0));
    Ok(())
}
