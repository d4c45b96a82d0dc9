//! A small invoicing service whose two rig tools run through Assent: `get_invoice`
//! (immediate) and `refund_invoice` (deferred, confirmed by a person), on a temporary
//! SQLite database, and the "person" (another engine on the same database, standing in
//! for `assent confirm`).

use assent_confirm::{Engine, SimpleHost};
use assent_domain::{OffsetDateTime, Target};
use assent_rig::{AssentOperation, RigToolHost, tool_spec};
use assent_store::{Store, StoreError, agents};
use assent_tools::{AgentPolicy, ToolMode, ToolRegistry};
use rig_core::tool::{Tool, ToolContext};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const INVOICES: &str = "CREATE TABLE invoices (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
    amount_cents BIGINT NOT NULL, refunded_cents BIGINT NOT NULL, category TEXT NOT NULL)";
const REFUNDS: &str = "CREATE TABLE refunds (operation_id TEXT PRIMARY KEY, \
    invoice TEXT NOT NULL, cents BIGINT NOT NULL)";
const SEED: &str = "INSERT INTO invoices VALUES ('INV-1', 'ACME', 12000, 0, 'billing') \
    ON CONFLICT DO NOTHING";

/// The agent.
pub const AGENT: &str = "billing-agent";

/// A tool failure, as text.
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

impl From<sqlx::Error> for Failed {
    fn from(error: sqlx::Error) -> Self {
        Self(error.to_string())
    }
}

impl From<StoreError> for Failed {
    fn from(error: StoreError) -> Self {
        Self(error.to_string())
    }
}

/// Which invoice.
#[derive(Debug, Deserialize)]
pub struct InvoiceArgs {
    /// Its id.
    pub invoice: String,
}

/// Reads an invoice; counts its runs.
#[derive(Clone)]
pub struct GetInvoice {
    /// The service's database.
    pub store: Store,
    /// How often the body ran.
    pub runs: Arc<AtomicUsize>,
}

impl Tool for GetInvoice {
    const NAME: &'static str = "get_invoice";
    type Args = InvoiceArgs;
    type Output = String;
    type Error = Failed;

    fn description(&self) -> String {
        "Read an invoice: its customer, amount and what was refunded.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["invoice"],
            "properties": {"invoice": {"type": "string"}}})
    }

    async fn call(&self, _context: &mut ToolContext, args: InvoiceArgs) -> Result<String, Failed> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let query = "SELECT customer, amount_cents, refunded_cents FROM invoices WHERE id = $1";
        let (customer, amount, refunded): (String, i64, i64) = sqlx::query_as(query)
            .bind(&args.invoice)
            .fetch_one(self.store.read_connection().await?.connection())
            .await?;
        Ok(format!(
            "{} for {customer}: {amount} cents, {refunded} refunded.",
            args.invoice
        ))
    }
}

/// A refund.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundArgs {
    /// Which invoice.
    pub invoice: String,
    /// How much.
    pub amount_cents: i64,
}

/// Refunds an invoice, once per operation id (its idempotency key).
#[derive(Clone)]
pub struct RefundInvoice {
    /// The service's database.
    pub store: Store,
    /// How often the body ran.
    pub runs: Arc<AtomicUsize>,
}

impl Tool for RefundInvoice {
    const NAME: &'static str = "refund_invoice";
    type Args = RefundArgs;
    type Output = String;
    type Error = Failed;

    fn description(&self) -> String {
        "Refund part of an invoice.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["invoice", "amountCents"],
            "properties": {"invoice": {"type": "string"},
                "amountCents": {"type": "integer", "minimum": 1}}})
    }

    async fn call(&self, context: &mut ToolContext, args: RefundArgs) -> Result<String, Failed> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let key = context
            .require::<AssentOperation>()
            .map_err(|error| Failed(error.to_string()))?
            .operation_id;
        // The service's own write, after the engine's commit: it queues on the writer.
        let mut tx = self.store.begin_write().await?;
        let booked = sqlx::query("INSERT INTO refunds VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(&key)
            .bind(&args.invoice)
            .bind(args.amount_cents)
            .execute(tx.connection())
            .await?;
        if booked.rows_affected() == 1 {
            sqlx::query("UPDATE invoices SET refunded_cents = refunded_cents + $1 WHERE id = $2")
                .bind(args.amount_cents)
                .bind(&args.invoice)
                .execute(tx.connection())
                .await?;
        }
        tx.commit().await?;
        Ok(format!(
            "Refunded {} cents on {}.",
            args.amount_cents, args.invoice
        ))
    }
}

/// The service: its store, engine, tools and the invoice the agent works on.
pub struct Service {
    /// The store.
    pub store: Store,
    /// The engine of the invoicing host.
    pub engine: Engine,
    /// The read tool (for the agent's builder).
    pub get: GetInvoice,
    /// The refund tool (for the agent's builder).
    pub refund: RefundInvoice,
    /// INV-1.
    pub invoice: Target,
}

/// Opens the service on `db` (an SQLite URL) for an agent with `policy`.
pub async fn open(
    db: &str,
    policy: &AgentPolicy,
    runs: (Arc<AtomicUsize>, Arc<AtomicUsize>),
) -> Result<Service, Box<dyn std::error::Error + Send + Sync>> {
    let store = Store::open(db).await?;
    let get = GetInvoice {
        store: store.clone(),
        runs: runs.0,
    };
    let refund = RefundInvoice {
        store: store.clone(),
        runs: runs.1,
    };
    let mut tools = ToolRegistry::new();
    tools.register(tool_spec(&get, ToolMode::Immediate))?;
    tools.register(
        tool_spec(&refund, ToolMode::Deferred)
            .with_summary(|args, _| format!("Refund {} cents", args["amountCents"])),
    )?;
    let host = SimpleHost::new("invoicing")
        .migration("invoices", INVOICES, INVOICES)
        .migration("refunds", REFUNDS, REFUNDS)
        .category(|tx, invoice| {
            Box::pin(async move {
                let query = sqlx::query_scalar("SELECT category FROM invoices WHERE id = $1");
                Ok(query.bind(&invoice.id).fetch_optional(tx).await?)
            })
        })
        .rig_tool(get.clone(), true)
        .rig_tool(refund.clone(), true);
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    let mut tx = store.begin_write().await?;
    agents::upsert(tx.connection(), AGENT, policy, OffsetDateTime::now_utc()).await?;
    sqlx::query(SEED).execute(tx.connection()).await?;
    tx.commit().await?;
    Ok(Service {
        store,
        engine,
        get,
        refund,
        invoice: Target::new("invoice", "INV-1"),
    })
}

/// A person's console on the same database: an engine of another host that has none
/// of the service's code, as `assent confirm` is.
pub async fn console(db: &str) -> Result<Engine, Box<dyn std::error::Error + Send + Sync>> {
    let store = Store::open(db).await?;
    Ok(Engine::new(
        store,
        Arc::new(ToolRegistry::new()),
        Arc::new(SimpleHost::new("console")),
    ))
}

/// What INV-1 has been refunded, and how many refunds were booked.
pub async fn refunded(store: &Store) -> Result<(i64, i64), sqlx::Error> {
    let cents = sqlx::query_scalar("SELECT refunded_cents FROM invoices WHERE id = 'INV-1'")
        .fetch_one(
            store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await?;
    let booked = sqlx::query_scalar("SELECT COUNT(*) FROM refunds")
        .fetch_one(
            store
                .read_connection()
                .await
                .expect("a read connection")
                .connection(),
        )
        .await?;
    Ok((cents, booked))
}
