//! The integrator's service of issue 54: a refund service that owns its database. It
//! brings its own pool and its own `sqlx::migrate` migrations into the database the
//! engine lives in (on PostgreSQL in a schema of the engine's own), binds a native
//! `UUID` in its handler, writes its rows inside a confirmation and a rejection (the
//! `_in` variants and `on_decided`), tells its business refusal from a database failure
//! by the handler's own error type, and runs twice to the same transcript with the
//! engine's clock and ids given at open.

use assent::changeset::parse_tool_calls;
use assent::confirm::{ConfirmError, FixedClock, SequentialIds};
use assent::domain::{OffsetDateTime, Target};
use assent::store::{Connection, StoreOptions};
use assent::tools::{ToolMode, ToolRegistry};
use assent::{Engine, ItemRef, SimpleHost, Store, ToolSpec, WakeRequest};
use serde_json::json;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::error::Error;
use std::sync::Arc;

/// The service's business refusal: a refund larger than the order. Its API answers
/// 422 for this, 500 for anything else.
#[derive(Debug)]
struct RefundTooLarge {
    asked: i64,
    paid: i64,
}

impl std::fmt::Display for RefundTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refund of {} exceeds the {} paid", self.asked, self.paid)
    }
}

impl Error for RefundTooLarge {}

const ORDER_A: &str = "0f8a4e51-2b7c-4d3e-9a10-5c6d7e8f9a01";
const ORDER_B: &str = "0f8a4e51-2b7c-4d3e-9a10-5c6d7e8f9a02";

/// The service's own migrations, in sqlx's default table (`_sqlx_migrations`).
fn service_migrations(postgres: bool) -> Migrator {
    let sql = if postgres {
        "CREATE TABLE orders (id UUID PRIMARY KEY, paid BIGINT NOT NULL, refunded BIGINT NOT NULL DEFAULT 0);
         CREATE TABLE refund_log (seq BIGSERIAL PRIMARY KEY, order_id TEXT NOT NULL, what TEXT NOT NULL)"
    } else {
        "CREATE TABLE orders (id TEXT PRIMARY KEY, paid BIGINT NOT NULL, refunded BIGINT NOT NULL DEFAULT 0);
         CREATE TABLE refund_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, what TEXT NOT NULL)"
    };
    Migrator::with_migrations(vec![Migration::new(
        1,
        "orders".into(),
        MigrationType::Simple,
        sqlx::SqlStr::from_static(sql),
        false,
    )])
}

/// Adds `refund` to order `order` on the handler's connection: a native `UUID` on
/// PostgreSQL, text on SQLite.
async fn add_refund(conn: &mut Connection, order: &str, refund: i64) -> Result<i64, Box<dyn Error + Send + Sync>> {
    let paid: i64 = if let Some(pg) = conn.as_postgres() {
        let id: uuid::Uuid = order.parse()?;
        sqlx::query("UPDATE orders SET refunded = refunded + $1 WHERE id = $2")
            .bind(refund)
            .bind(id)
            .execute(&mut *pg)
            .await?;
        sqlx::query_scalar("SELECT paid FROM orders WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *pg)
            .await?
    } else {
        sqlx::query("UPDATE orders SET refunded = refunded + $1 WHERE id = $2")
            .bind(refund)
            .bind(order)
            .execute(&mut *conn)
            .await?;
        sqlx::query_scalar("SELECT paid FROM orders WHERE id = $1")
            .bind(order)
            .fetch_one(&mut *conn)
            .await?
    };
    if refund > paid {
        return Err(Box::new(RefundTooLarge {
            asked: refund,
            paid,
        }));
    }
    Ok(paid)
}

/// One run of the service on the database at `url` (in `schema` on PostgreSQL): what
/// it saw, line by line.
async fn run(url: &str, schema: &str) -> Result<Vec<String>, Box<dyn Error>> {
    let postgres = url.starts_with("postgres");
    // The service's own pool and migrations, first: the engine comes into its database.
    let mut options = StoreOptions::default();
    options.device_id = "refund-service".into();
    let store = if postgres {
        let pool = sqlx::PgPool::connect(url).await?;
        service_migrations(true).run(&pool).await?;
        options.schema = Some(schema.to_owned());
        Store::from_pool(pool, options).await?
    } else {
        let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=rwc")).await?;
        service_migrations(false).run(&pool).await?;
        Store::from_pool(pool, options).await?
    };

    let host = SimpleHost::new("refunds")
        .handle("issue_refund", |tx, call| {
            Box::pin(async move {
                let refund = call.args["amount"].as_i64().ok_or("no amount")?;
                let paid = add_refund(tx, &call.target.target.id, refund).await?;
                Ok(format!("Refunded {refund} of {paid}."))
            })
        })
        .category(|_tx, _order| Box::pin(async { Ok(Some("refunds".to_owned())) }))
        // Every verdict on a refund, in the decision's own transaction.
        .on_decided(|tx, decided| {
            Box::pin(async move {
                let what = format!("{:?} by {}", decided.verdict, decided.decided_by.unwrap_or("?"));
                sqlx::query("INSERT INTO refund_log (order_id, what) VALUES ($1, $2)")
                    .bind(&decided.target.id)
                    .bind(what)
                    .execute(&mut *tx)
                    .await?;
                Ok(())
            })
        });
    let schema = json!({"type": "object", "required": ["order_id", "amount"],
        "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}}});
    let mut tools = ToolRegistry::new();
    tools.register(
        ToolSpec::new("issue_refund", "Refund part of an order.", ToolMode::Deferred, schema)
            .target_from("order", "/order_id"),
    )?;
    let start = OffsetDateTime::from_unix_timestamp(1_800_000_000)?;
    let engine = Engine::builder(store.clone(), Arc::new(tools), Arc::new(host))
        .clock(Arc::new(FixedClock(start)))
        .ids(Arc::new(SequentialIds::new(54)))
        .open()
        .await?;
    engine
        .set_categories("billing", &["refunds".to_owned()], engine.now())
        .await?;
    {
        let mut tx = store.begin_write().await?;
        for (order, paid) in [(ORDER_A, 100_i64), (ORDER_B, 40)] {
            insert_order(tx.connection(), order, paid).await?;
        }
        tx.commit().await?;
    }

    // One wake, two orders named in the arguments: one change set per order.
    let calls = parse_tool_calls(&json!([
        {"type": "tool_use", "id": "c1", "name": "issue_refund",
         "input": {"order_id": ORDER_A, "amount": 30}},
        {"type": "tool_use", "id": "c2", "name": "issue_refund",
         "input": {"order_id": ORDER_B, "amount": 90}},
    ]))?;
    let request = WakeRequest::new("billing", Target::new("order", ORDER_A), "run-1", calls);
    let wake = engine.wakes().wake_now(request).await?;
    let mut transcript: Vec<String> = wake
        .change_sets
        .iter()
        .map(|set| format!("set {} for {}", set.id, set.target_id))
        .collect();
    let set_of = |order: &str| {
        wake.change_sets
            .iter()
            .find(|set| set.target_id == order)
            .map(|set| ItemRef::new(set.id, 0))
            .ok_or("no set for the order")
    };
    let (a, b) = (set_of(ORDER_A)?, set_of(ORDER_B)?);

    // The service confirms A inside its own transaction, with its own row.
    let person = engine.confirmations();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO refund_log (order_id, what) VALUES ($1, 'approved at the desk')")
        .bind(ORDER_A)
        .execute(tx.connection())
        .await?;
    let confirmed = person.confirm_item_in(&mut tx, a, engine.now()).await?;
    tx.commit().await?;
    transcript.push(confirmed.message().to_owned());

    // B is more than was paid: the service's own refusal comes back as itself.
    let refused = person.confirm_item_now(b).await;
    match &refused {
        Err(ConfirmError::HandlerFailed { source, .. }) => {
            let too_large = source
                .downcast_ref::<RefundTooLarge>()
                .ok_or("the handler's own error is the source")?;
            transcript.push(format!("422: {too_large}"));
        }
        other => return Err(format!("expected the handler's refusal, got {other:?}").into()),
    }

    // So the service rejects B, in its transaction, with its row; then rolls one back.
    let mut tx = store.begin_write().await?;
    let rejected = person
        .reject_item_in(&mut tx, b, Some("more than was paid".into()), engine.now())
        .await?;
    tx.commit().await?;
    transcript.push(format!("decision {} {:?}", rejected.id, rejected.verdict));

    let mut conn = store.read_connection().await?;
    let log: Vec<(String, String)> =
        sqlx::query_as("SELECT order_id, what FROM refund_log ORDER BY seq")
            .fetch_all(&mut *conn)
            .await?;
    transcript.extend(log.into_iter().map(|(order, what)| format!("log {order}: {what}")));
    let refunded: Vec<i64> = sqlx::query_scalar("SELECT refunded FROM orders ORDER BY paid DESC")
        .fetch_all(&mut *conn)
        .await?;
    transcript.push(format!("refunded {refunded:?}"));
    drop(conn);
    let page = engine
        .decisions_since(assent::confirm::records::DecisionCursor::start(), 10)
        .await?;
    transcript.extend(page.decisions.iter().map(|entry| {
        let d = &entry.decision;
        format!("{} {} {:?} at {}", d.id, d.item_index, d.verdict, d.created_at)
    }));
    store.close().await;
    Ok(transcript)
}

async fn insert_order(conn: &mut Connection, order: &str, paid: i64) -> Result<(), Box<dyn Error>> {
    if let Some(pg) = conn.as_postgres() {
        sqlx::query("INSERT INTO orders (id, paid) VALUES ($1, $2)")
            .bind(order.parse::<uuid::Uuid>()?)
            .bind(paid)
            .execute(&mut *pg)
            .await?;
    } else {
        sqlx::query("INSERT INTO orders (id, paid) VALUES ($1, $2)")
            .bind(order)
            .bind(paid)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// The scenario: the service twice, in two new databases, to the same transcript.
pub async fn service_owns_its_database(url: &str) -> Result<(), Box<dyn Error>> {
    let postgres = url.starts_with("postgres");
    let second_url = if postgres {
        let server = std::env::var(crate::POSTGRES_URL_VAR)?;
        crate::fresh_postgres_database(&server, "owned_again").await?
    } else {
        format!("{}-again.db", url.trim_end_matches(".db"))
    };
    let first = run(url, "refunds").await?;
    let second = run(&second_url, "refunds").await?;
    if !postgres {
        let path = second_url.trim_start_matches("sqlite://");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }
    if first != second {
        return Err(format!("two runs differ:\n{first:#?}\n{second:#?}").into());
    }
    for expected in [
        "Refunded 30 of 100.",
        "422: refund of 90 exceeds the 40 paid",
        "refunded [30, 0]",
    ] {
        if !first.iter().any(|line| line == expected) {
            return Err(format!("no line {expected:?} in {first:#?}").into());
        }
    }
    let logged = first.iter().filter(|line| line.starts_with("log ")).count();
    if logged != 3 {
        return Err(format!("the service's row and both verdicts: {first:#?}").into());
    }
    Ok(())
}
