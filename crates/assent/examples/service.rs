//! A service gates its tool `set_body`: the agent's call waits for a person, and the
//! handler runs once the person confirms, in the transaction that records the decision.
//! Written as a service outside this workspace writes it (only `assent::…` paths, plus
//! its own sqlx, tokio and serde_json): the facade's front page shows this file, and CI
//! compiles and runs it as such a dependent (`tests/dependent`).

use assent::changeset::parse_tool_calls;
use assent::domain::Target;
use assent::tools::{ToolMode, ToolRegistry};
use assent::{Engine, ItemRef, SimpleHost, Store, ToolSpec, WakeRequest};
use serde_json::json;
use std::sync::Arc;

const NOTES: &str = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)";
const SEED: &str = "INSERT INTO notes VALUES ('n1', 'draft')";

/// The service on the database at `url`: opens the engine, lets agent `scribe` change
/// notes, and has a person confirm the agent's call.
pub async fn service(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let host = SimpleHost::new("notes")
        // The service's own tables come with its migrations (SQLite, PostgreSQL).
        .migration("notes", NOTES, NOTES)
        .migration("the first note", SEED, SEED)
        .handle("set_body", |tx, call| {
            Box::pin(async move {
                let body = call.args["body"].as_str().ok_or("no body")?;
                sqlx::query("UPDATE notes SET body = $1 WHERE id = $2")
                    .bind(body)
                    .bind(&call.target.target.id)
                    .execute(tx)
                    .await?;
                Ok(format!("Body set to {body}."))
            })
        })
        // Every note is in category `notes` (a real service reads it from its table).
        .category(|_tx, _note| Box::pin(async { Ok(Some("notes".to_owned())) }));
    let schema = json!({"type": "object", "required": ["body"],
        "properties": {"body": {"type": "string"}}});
    let mut tools = ToolRegistry::new();
    let spec = ToolSpec::new(
        "set_body",
        "Replace a note's body.",
        ToolMode::Deferred,
        schema,
    );
    tools.register(spec)?;

    let store = Store::open(url).await?;
    let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    // What agent `scribe` may do: change targets of category `notes`. (Time is the
    // engine's clock: `Engine::builder(…).clock(…)` fixes it in a test.)
    engine
        .set_categories("scribe", &["notes".to_owned()], engine.now())
        .await?;

    let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
        "name": "set_body", "input": {"body": "final"}}]))?;
    let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
    let wake = engine.wakes().wake_now(request).await?;
    // The call waits for a person; the agent reads that it was queued.
    assert_eq!(wake.responses[0].content, assent::changeset::reply::QUEUED);

    let set = wake.change_set.ok_or("nothing queued")?;
    let person = engine.confirmations();
    let confirmed = person.confirm_item_now(ItemRef::new(set.id, 0)).await?;
    assert_eq!(confirmed.message(), "Body set to final.");
    let body: String = sqlx::query_scalar("SELECT body FROM notes WHERE id = 'n1'")
        .fetch_one(&mut *store.read_connection().await?)
        .await?;
    assert_eq!(body, "final");
    Ok(())
}

/// Runs [`service`] on a new SQLite file in the temporary directory.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join(format!("assent-service-{}.db", std::process::id()));
    let url = format!("sqlite://{}", path.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(service(&url));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    result
}
