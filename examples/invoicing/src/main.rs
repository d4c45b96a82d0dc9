//! An invoicing service whose agent may refund invoices, but only once a person agrees.

use assent::changeset::parse_tool_calls;
use assent::confirm::{Engine, SimpleHost, WakeRequest, sqlx};
use assent::domain::{OffsetDateTime, Target};
use assent::store::{Store, agents, audit};
use assent::tools::{AgentPolicy, ToolMode::Deferred, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

const INVOICES: &str = "CREATE TABLE invoices (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
    amount_cents BIGINT NOT NULL, refunded_cents BIGINT NOT NULL, category TEXT NOT NULL)";
const REFUND: &str = "UPDATE invoices SET refunded_cents = refunded_cents + $1 WHERE id = $2";
const ROW: &str = "SELECT customer, amount_cents, refunded_cents FROM invoices WHERE id = 'INV-1'";
const AGENT: &str = "billing-agent";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = SimpleHost::new("invoicing")
        .migration("invoices", INVOICES, INVOICES)
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
    let store = Store::open("sqlite::memory:").await?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    let (now, policy) = (OffsetDateTime::now_utc(), AgentPolicy::new(["billing"]));
    agents::upsert(&mut *store.pool().acquire().await?, AGENT, &policy, now).await?;
    let seed = "INSERT INTO invoices VALUES ('INV-1', 'ACME', 12000, 0, 'billing')";
    sqlx::query(seed).execute(store.pool()).await?;

    let invoice = Target::new("invoice", "INV-1");
    let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "call_1",
        "name": "refund_invoice", "input": {"amountCents": 2500}}]))?;
    let request = WakeRequest::new(AGENT, invoice.clone(), "run-1", calls);
    let wake = engine.wakes().wake(request, now).await?;
    println!("agent reads: {}", wake.responses[0].content);

    let set = wake.change_set.ok_or("nothing queued")?;
    let person = engine.confirmations();
    person.confirm_item(set.id, 0, now).await?;
    let row: (String, i64, i64) = sqlx::query_as(ROW).fetch_one(store.pool()).await?;
    println!("after confirm (customer, amount, refunded): {row:?}");
    let filter = audit::AuditFilter::Target(invoice.clone());
    for record in audit::list(&mut *store.pool().acquire().await?, &filter, 10).await? {
        println!("audit: {:?} {:?}", record.kind, record.detail);
    }
    let history = person.history(AGENT, Some(&invoice), 10).await?;
    println!("{}", history.unwrap_or_default());
    Ok(())
}
