//! An invoicing service whose agent may refund invoices, but only once a person agrees.

use assent::changeset::parse_tool_calls;
use assent::confirm::{Engine, SimpleHost, WakeRequest, sqlx};
use assent::domain::{OffsetDateTime, Target};
use assent::store::{HostMigration, Store, agents, audit};
use assent::tools::{AgentPolicy, ToolMode, ToolOutcome, ToolRegistry, ToolSpec};
use serde_json::json;
use std::sync::Arc;

const INVOICES: &str = "CREATE TABLE invoices (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
    amount_cents BIGINT NOT NULL, refunded_cents BIGINT NOT NULL, category TEXT NOT NULL)";
const REFUND: &str = "UPDATE invoices SET refunded_cents = refunded_cents + $1 WHERE id = $2";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = HostMigration { version: 1, description: "invoices", sqlite: INVOICES, postgres: INVOICES };
    let host = SimpleHost::new("invoicing").migration(table)
        .handler("refund_invoice", |conn, call| Box::pin(async move {
            let cents = call.args["amountCents"].as_i64();
            let invoice = call.target.target.id.as_str();
            sqlx::query(REFUND).bind(cents).bind(invoice).execute(conn).await?;
            let message = format!("Refunded {} cents on {invoice}.", cents.unwrap_or_default());
            Ok(ToolOutcome { message, mutated: true })
        }))
        .category(|conn, invoice| Box::pin(async move {
            let sql = "SELECT category FROM invoices WHERE id = $1";
            Ok(sqlx::query_scalar(sql).bind(invoice.id.as_str()).fetch_optional(conn).await?)
        }));
    let mut tools = ToolRegistry::new();
    tools.register(ToolSpec {
        name: "refund_invoice".into(),
        description: "Refund part of an invoice.".into(),
        args_schema: json!({"type": "object", "required": ["amountCents"],
            "properties": {"amountCents": {"type": "integer", "minimum": 1}}}),
        mode: ToolMode::Deferred,
        batch: None,
        summary: Some(|args, _| format!("Refund {} cents", args["amountCents"])),
    })?;
    let store = Store::open("sqlite::memory:").await?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    let now = OffsetDateTime::now_utc();
    let policy = AgentPolicy::new(["billing"]);
    agents::upsert(&mut *store.pool().acquire().await?, "billing-agent", &policy, now).await?;
    sqlx::query("INSERT INTO invoices VALUES ('INV-1', 'ACME', 12000, 0, 'billing')")
        .execute(store.pool()).await?;

    let invoice = Target::new("invoice", "INV-1");
    let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "call_1",
        "name": "refund_invoice", "input": {"amountCents": 2500}}]))?;
    let request = WakeRequest::new("billing-agent", invoice.clone(), "run-1", calls);
    let wake = engine.wakes().wake(request, now).await?;
    println!("agent reads: {}", wake.responses[0].content);

    let set = wake.change_set.ok_or("nothing was queued")?;
    let confirmed = engine.confirmations().confirm_item(set.id, 0, now).await?;
    println!("person confirms: {}", confirmed.message());
    let row: (String, i64, i64) = sqlx::query_as("SELECT customer, amount_cents, refunded_cents FROM invoices")
        .fetch_one(store.pool()).await?;
    println!("invoice INV-1 now: {row:?}");
    let filter = audit::AuditFilter::Target(invoice.clone());
    for record in audit::list(&mut *store.pool().acquire().await?, &filter, 10).await? {
        println!("audit: {} {} {:?}", record.kind.as_str(), record.tool_name, record.detail);
    }
    let history = engine.confirmations().history("billing-agent", Some(&invoice), 10).await?;
    println!("{}", history.unwrap_or_default());
    Ok(())
}
