//! An invoicing service whose agent may refund invoices, but only once a person agrees.
//!
//! `invoicing`: the agent proposes a refund and awaits the answer, which a person gives
//! anywhere (`assent confirm` in another terminal, the review page, the API); this
//! service's worker then applies it. `invoicing work`: only the worker, until Ctrl-C.

use assent::changeset::parse_tool_calls;
use assent::domain::{OffsetDateTime, Target};
use assent::tools::{ToolMode::Deferred, ToolRegistry};
use assent::{Engine, SimpleHost, Store, ToolSpec, WakeRequest};
use serde_json::json;
use std::{sync::Arc, time::Duration};

const INVOICES: &str = "CREATE TABLE invoices (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
    amount_cents BIGINT NOT NULL, refunded_cents BIGINT NOT NULL, category TEXT NOT NULL)";
const SEED: &str = "INSERT INTO invoices VALUES ('INV-1', 'ACME', 12000, 0, 'billing')";
const REFUND: &str = "UPDATE invoices SET refunded_cents = refunded_cents + $1 WHERE id = $2";
const REFUNDED: &str = "SELECT refunded_cents FROM invoices WHERE id = 'INV-1'";
const AGENT: &str = "billing-agent";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = std::env::var("ASSENT_DATABASE_URL").unwrap_or("sqlite://invoicing.db".into());
    let host = SimpleHost::new("invoicing")
        .migration("invoices", INVOICES, INVOICES)
        .migration("the invoice of the demo", SEED, SEED)
        .handle("refund_invoice", |tx, call| {
            Box::pin(async move {
                let cents = call.args["amountCents"].as_i64().ok_or("no amount")?;
                let id = &call.target.target.id;
                sqlx::query(REFUND).bind(cents).bind(id).execute(tx).await?;
                Ok(format!("Refunded {cents} cents on {id}."))
            })
        })
        .category(|tx, invoice| {
            Box::pin(async move {
                let query = sqlx::query_scalar("SELECT category FROM invoices WHERE id = $1");
                Ok(query.bind(&invoice.id).fetch_optional(tx).await?)
            })
        });
    let schema = json!({"type": "object", "required": ["amountCents"],
        "properties": {"amountCents": {"type": "integer", "minimum": 1}}});
    let spec = ToolSpec::new("refund_invoice", "Refund an invoice.", Deferred, schema);
    let mut tools = ToolRegistry::new();
    tools.register(spec.with_summary(|args, _| format!("Refund {} cents", args["amountCents"])))?;
    let store = Store::open(&db).await?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    let (now, categories) = (OffsetDateTime::now_utc(), ["billing".to_owned()]);
    engine.set_categories(AGENT, &categories, now).await?;

    // The service's side: applies what people confirm, wherever they do it.
    let stop = async { tokio::signal::ctrl_c().await.unwrap_or_default() };
    let worker = tokio::spawn(engine.worker().run(stop));
    if std::env::args().nth(1).as_deref() == Some("work") {
        return Ok(worker.await??);
    }
    let invoice = Target::new("invoice", "INV-1");
    let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "call_1",
        "name": "refund_invoice", "input": {"amountCents": 2500}}]))?;
    let request = WakeRequest::new(AGENT, invoice.clone(), "run-1", calls);
    let wake = engine.wakes().wake(request, now).await?;
    println!("agent reads: {}", wake.responses[0].content);
    let set = wake.change_set.ok_or("nothing queued")?.id;
    println!("a person answers, e.g. in another terminal:");
    let short = &set.simple().to_string()[..8];
    println!("  assent --db {db} confirm {short} 0");

    // The agent awaits the person; a confirmed refund is applied by the worker first.
    let person = engine.confirmations();
    let outcome = person.wait_outcome(set, Duration::from_secs(3600)).await?;
    let item = &outcome.items[0];
    let said = item.waited_reply().unwrap_or_default();
    println!("agent learns: {} ({said})", item.status);
    let mut read = store.read_connection().await?;
    let refunded: i64 = sqlx::query_scalar(REFUNDED).fetch_one(&mut *read).await?;
    println!("INV-1 refunded so far: {refunded} cents");
    let history = person.history(AGENT, Some(&invoice), 10).await?;
    println!("{}", history.unwrap_or_default());
    Ok(())
}
