//! [`SimpleHost`]: a [`Host`] built from closures, for a service that gates a few tools
//! of its own without writing three trait impls of boxed futures.
//!
//! Each closure gets the engine's connection (inside its transaction, so what it writes
//! commits with the decision) and returns `Box::pin(async move { ... })`. Errors are
//! boxed, so `?` works on any error (a query, a parse); a handler's error becomes
//! [`ToolsError::HandlerFailed`] and rolls back what it wrote, a resolver's error
//! denies the call (fail-closed). [`SimpleHost::on_decided`] writes the service's rows
//! in every decision's transaction (a rejection's too). Such a host keeps no vector clocks, has no local
//! tools, syncs no entities, and keeps every proposal (it has no state to compare
//! with); a service that needs those implements [`Host`] itself.

use crate::{Decided, Effect, ExternalHandler, Host};
use assent_domain::{Target, VectorClock};
use assent_store::{Connection, HostMigration};
use assent_tools::{
    BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
use std::marker::PhantomData;

/// Any error a closure of a [`SimpleHost`] returns; its text is what the person and the
/// audit trail read, and the error itself comes back as the source of
/// [`crate::ConfirmError::HandlerFailed`] (downcast it to tell its kinds apart).
pub type HostError = assent_tools::HandlerError;

/// What a handler closure of a [`SimpleHost`] returns: a [`ToolOutcome`], or just its
/// message (a `String` or `&'static str`) for a handler that changed something.
pub trait IntoToolOutcome: Send {
    /// The outcome reported to the executor.
    fn into_outcome(self) -> ToolOutcome;
}

impl IntoToolOutcome for ToolOutcome {
    fn into_outcome(self) -> ToolOutcome {
        self
    }
}

impl IntoToolOutcome for String {
    fn into_outcome(self) -> ToolOutcome {
        ToolOutcome::changed(self)
    }
}

impl IntoToolOutcome for &'static str {
    fn into_outcome(self) -> ToolOutcome {
        self.to_owned().into_outcome()
    }
}

/// The closure of [`SimpleHost::on_decided`].
type DecidedHook = Box<
    dyn for<'a> Fn(&'a mut Connection, Decided<'a>) -> BoxFuture<'a, Result<(), HostError>>
        + Send
        + Sync,
>;

/// A host assembled from its name, migrations, one closure per tool and one that
/// answers a target's category: see the module documentation.
pub struct SimpleHost {
    name: String,
    migrations: Vec<HostMigration>,
    handlers: Vec<(String, Box<dyn ToolHandler<Connection>>)>,
    externals: Vec<(String, bool, Box<dyn ExternalHandler>)>,
    resolver: Box<dyn CategoryResolver<Connection>>,
    on_decided: Option<DecidedHook>,
}

impl std::fmt::Debug for SimpleHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.handlers.iter().map(|(t, _)| t.as_str()).collect();
        let externals: Vec<&str> = self.externals.iter().map(|(t, _, _)| t.as_str()).collect();
        f.debug_struct("SimpleHost")
            .field("name", &self.name)
            .field("migrations", &self.migrations.len())
            .field("tools", &tools)
            .field("externals", &externals)
            .finish_non_exhaustive()
    }
}

impl SimpleHost {
    /// A host named `name` (ASCII letters, digits, underscores: it names the table of
    /// its migrations) with no tables and no tools, whose targets have no category
    /// until [`SimpleHost::category`] says otherwise (so every call is denied).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            migrations: Vec::new(),
            handlers: Vec::new(),
            externals: Vec::new(),
            resolver: Box::new(ClosureResolver(no_category)),
            on_decided: None,
        }
    }

    /// Adds the next migration of the host's own tables: `sqlite` runs on SQLite,
    /// `postgres` on PostgreSQL (often the same text). Its version is its place in the
    /// order of calls, so keep them append-only like the engine's own.
    pub fn migration(
        mut self,
        description: &'static str,
        sqlite: &'static str,
        postgres: &'static str,
    ) -> Self {
        let version = i64::try_from(self.migrations.len()).map_or(i64::MAX, |n| n + 1);
        self.migrations.push(HostMigration {
            version,
            description,
            sqlite,
            postgres,
        });
        self
    }

    /// Handles calls of `tool` (a tool of the engine's registry, once confirmed, or at
    /// once when immediate) with `handler`; a later handler of the same tool replaces
    /// it.
    ///
    /// ```
    /// use assent::prelude::*;
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// const NOTES: &str = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)";
    /// const SEED: &str = "INSERT INTO notes VALUES ('n1', 'draft')";
    /// let host = SimpleHost::new("notes")
    ///     .migration("notes", NOTES, NOTES)
    ///     .migration("a note", SEED, SEED)
    ///     // Runs once a person confirms, on the decision's own transaction: the note and the
    ///     // decision are written together or not at all.
    ///     .handle("set_body", |tx, call| {
    ///         Box::pin(async move {
    ///             let body = call.args["body"].as_str().ok_or("no body")?;
    ///             sqlx::query("UPDATE notes SET body = $1 WHERE id = $2")
    ///                 .bind(body)
    ///                 .bind(&call.target.target.id)
    ///                 .execute(tx)
    ///                 .await?;
    ///             Ok(format!("Body set to {body}."))
    ///         })
    ///     })
    ///     .category(|_tx, _note| Box::pin(async { Ok(Some("notes".to_owned())) }));
    /// # let mut tools = ToolRegistry::new();
    /// # let schema = json!({"type": "object"});
    /// # tools.register(ToolSpec::new("set_body", "Set a note's body.", ToolMode::Deferred, schema))?;
    /// # let store = Store::open("sqlite::memory:").await?;
    /// # let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host)).await?;
    /// # let now = OffsetDateTime::now_utc();
    /// # engine.set_categories("scribe", &["notes".to_owned()], now).await?;
    /// # let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
    /// #     "name": "set_body", "input": {"body": "final"}}]))?;
    /// # let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
    /// # let set = engine.wakes().wake(request, now).await?.change_set.ok_or("nothing queued")?;
    /// # engine.confirmations().confirm_item(ItemRef::new(set.id, 0), now).await?;
    /// # let body: String = sqlx::query_scalar("SELECT body FROM notes WHERE id = 'n1'")
    /// #     .fetch_one(&mut *store.read_connection().await?)
    /// #     .await?;
    /// # assert_eq!(body, "final");
    /// # Ok(())
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// #     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// #     runtime.block_on(demo())
    /// # }
    /// ```
    pub fn handle<F, O>(mut self, tool: impl Into<String>, handler: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut Connection,
                &'a ToolInvocation,
            ) -> BoxFuture<'a, Result<O, HostError>>
            + Send
            + Sync
            + 'static,
        O: IntoToolOutcome + 'static,
    {
        let tool = tool.into();
        self.handlers.retain(|(name, _)| *name != tool);
        let handler = ClosureHandler(handler, PhantomData);
        self.handlers.push((tool, Box::new(handler)));
        self
    }

    /// Runs `tool` outside the database with `handler` (an HTTP call, an e-mail): a
    /// confirmed call becomes a job of the execution ledger, run by
    /// [`Engine::run_due_jobs`](crate::Engine::run_due_jobs) with the operation id as
    /// idempotency key. `idempotent`: running it twice with one key has the effect of
    /// running it once (a job in doubt is then simply retried).
    pub fn external(
        mut self,
        tool: impl Into<String>,
        idempotent: bool,
        handler: impl ExternalHandler + 'static,
    ) -> Self {
        let tool = tool.into();
        self.externals.retain(|(name, _, _)| *name != tool);
        self.externals.push((tool, idempotent, Box::new(handler)));
        self
    }

    /// Answers a target's category (checked against the agent's allowlist when a call
    /// is proposed and again before it runs): `Ok(None)` when the target has none or
    /// does not exist, and the call is denied.
    pub fn category<F>(mut self, category: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut Connection,
                &'a Target,
            ) -> BoxFuture<'a, Result<Option<String>, HostError>>
            + Send
            + Sync
            + 'static,
    {
        self.resolver = Box::new(ClosureResolver(category));
        self
    }

    /// Runs `hook` in the transaction of every decision this engine records on the
    /// host's items ([`Host::on_decided`]: confirmed, edited, rejected, dismissed,
    /// deferred, retracted), after a confirmed handler ran: what it writes on the
    /// connection commits with the decision, and its error rolls the decision back
    /// ([`crate::ConfirmError::DecisionHookFailed`]). A later hook replaces an earlier
    /// one.
    ///
    /// ```
    /// use assent_confirm::SimpleHost;
    /// use assent_domain::Verdict;
    ///
    /// let host = SimpleHost::new("invoicing").on_decided(|tx, decided| {
    ///     Box::pin(async move {
    ///         if decided.verdict == Verdict::Rejected {
    ///             sqlx::query("UPDATE invoices SET disputed = 0 WHERE id = $1")
    ///                 .bind(&decided.target.id)
    ///                 .execute(tx)
    ///                 .await?;
    ///         }
    ///         Ok(())
    ///     })
    /// });
    /// ```
    pub fn on_decided<F>(mut self, hook: F) -> Self
    where
        F: for<'a> Fn(&'a mut Connection, Decided<'a>) -> BoxFuture<'a, Result<(), HostError>>
            + Send
            + Sync
            + 'static,
    {
        self.on_decided = Some(Box::new(hook));
        self
    }
}

impl Host for SimpleHost {
    fn name(&self) -> &str {
        &self.name
    }

    fn migrations(&self) -> &[HostMigration] {
        &self.migrations
    }

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        self.handlers
            .iter()
            .find(|(name, _)| name == tool_name)
            .map(|(_, handler)| handler.as_ref())
    }

    /// Its handlers' tools; `None` (nothing checked) for a host of no handlers at all,
    /// one that only proposes (the engine of a review surface, a test).
    fn handled_tools(&self) -> Option<Vec<String>> {
        if self.handlers.is_empty() {
            return None;
        }
        Some(self.handlers.iter().map(|(name, _)| name.clone()).collect())
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        self.resolver.as_ref()
    }

    fn effect(&self, tool_name: &str) -> Effect {
        self.externals
            .iter()
            .find(|(name, _, _)| name == tool_name)
            .map_or(Effect::Transactional, |&(_, idempotent, _)| {
                Effect::External { idempotent }
            })
    }

    fn external(&self, tool_name: &str) -> Option<&dyn ExternalHandler> {
        self.externals
            .iter()
            .find(|(name, _, _)| name == tool_name)
            .map(|(_, _, handler)| handler.as_ref())
    }

    fn on_decided<'a>(
        &'a self,
        conn: &'a mut Connection,
        decided: Decided<'a>,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        match &self.on_decided {
            Some(hook) => hook(conn, decided),
            None => Box::pin(async { Ok(()) }),
        }
    }
}

/// A handler closure and the type its future yields.
struct ClosureHandler<F, O>(F, PhantomData<fn() -> O>);

impl<F, O> ToolHandler<Connection> for ClosureHandler<F, O>
where
    F: for<'a> Fn(&'a mut Connection, &'a ToolInvocation) -> BoxFuture<'a, Result<O, HostError>>
        + Send
        + Sync,
    O: IntoToolOutcome,
{
    fn execute<'a>(
        &'a self,
        ctx: &'a mut Connection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        let run = (self.0)(ctx, invocation);
        Box::pin(async move {
            match run.await {
                Ok(output) => Ok(output.into_outcome()),
                Err(error) => Err(ToolsError::handler_failed(&invocation.tool_name, error)),
            }
        })
    }
}

/// The category of every target of a host nobody told otherwise: none.
fn no_category<'a>(
    _conn: &'a mut Connection,
    _target: &'a Target,
) -> BoxFuture<'a, Result<Option<String>, HostError>> {
    Box::pin(async { Ok(None) })
}

/// A category closure; the host keeps no vector clocks.
struct ClosureResolver<F>(F);

impl<F> CategoryResolver<Connection> for ClosureResolver<F>
where
    F: for<'a> Fn(
            &'a mut Connection,
            &'a Target,
        ) -> BoxFuture<'a, Result<Option<String>, HostError>>
        + Send
        + Sync,
{
    fn category_of<'a>(
        &'a self,
        ctx: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let lookup = (self.0)(ctx, target);
        Box::pin(async move { lookup.await.map_err(|error| error.to_string()) })
    }

    fn vector_clock_of<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async { Ok(None) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfirmError, Engine, WakeRequest};
    use assent_changeset::parse_tool_calls;
    use assent_domain::{ChangeItemStatus, OffsetDateTime, Uuid};
    use assent_store::{Store, agents, change_sets};
    use assent_tools::{AgentPolicy, ToolMode, ToolRegistry, ToolSpec};
    use serde_json::json;
    use std::sync::Arc;

    const NOTES: &str =
        "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL, category TEXT NOT NULL)";
    const SEED: &str = "INSERT INTO notes VALUES ('n1', 'draft', 'notes')";

    /// A notes host whose `set_body` writes the body, then fails when it is `fail`.
    /// A business refusal of the notes service, its own error type.
    #[derive(Debug, thiserror::Error)]
    #[error("the note is locked by {by}")]
    struct NoteLocked {
        by: String,
    }

    fn notes_host() -> SimpleHost {
        SimpleHost::new("notes")
            .migration("notes", NOTES, NOTES)
            .handle("set_body", |tx, call| {
                Box::pin(async move {
                    let body = call.args["body"].as_str().ok_or("no body")?;
                    sqlx::query("UPDATE notes SET body = $1 WHERE id = $2")
                        .bind(body)
                        .bind(&call.target.target.id)
                        .execute(tx)
                        .await?;
                    if body == "fail" {
                        return Err("the body may not be fail".into());
                    }
                    if body == "locked" {
                        return Err(NoteLocked { by: "ana".into() }.into());
                    }
                    Ok(format!("Body set to {body}."))
                })
            })
    }

    fn with_category(host: SimpleHost) -> SimpleHost {
        host.category(|tx, note| {
            Box::pin(async move {
                let query = sqlx::query_scalar("SELECT category FROM notes WHERE id = $1");
                Ok(query.bind(&note.id).fetch_optional(tx).await?)
            })
        })
    }

    async fn engine(host: SimpleHost) -> (Store, Engine) {
        engine_in(host, ToolMode::Deferred).await
    }

    /// [`engine`] with `set_body` in `mode`.
    async fn engine_in(host: SimpleHost, mode: ToolMode) -> (Store, Engine) {
        let mut tools = ToolRegistry::new();
        tools
            .register(ToolSpec::new(
                "set_body",
                "Replace a note's body.",
                mode,
                json!({"type": "object", "required": ["body"],
                    "properties": {"body": {"type": "string"}}}),
            ))
            .expect("the tool registers");
        let store = Store::open("sqlite::memory:").await.expect("store");
        let engine = Engine::open(store.clone(), Arc::new(tools), Arc::new(host))
            .await
            .expect("engine");
        let now = OffsetDateTime::now_utc();
        let mut conn = store.read_connection().await.expect("connection");
        agents::upsert(&mut conn, "scribe", &AgentPolicy::new(["notes"]), now)
            .await
            .expect("agent");
        sqlx::query(SEED).execute(&mut *conn).await.expect("seed");
        (store, engine)
    }

    async fn propose(engine: &Engine, body: &str) -> crate::WakeOutcome {
        let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
            "name": "set_body", "input": {"body": body}}]))
        .expect("calls");
        let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
        engine
            .wakes()
            .wake(request, OffsetDateTime::now_utc())
            .await
            .expect("wake")
    }

    async fn body(store: &Store) -> String {
        sqlx::query_scalar("SELECT body FROM notes WHERE id = 'n1'")
            .fetch_one(
                store
                    .read_connection()
                    .await
                    .expect("a read connection")
                    .connection(),
            )
            .await
            .expect("body")
    }

    #[tokio::test]
    async fn a_confirmed_proposal_runs_the_closure_on_the_hosts_table() {
        let (store, engine) = engine(with_category(notes_host())).await;
        let wake = propose(&engine, "final").await;
        let set = wake.change_set.expect("a change set");
        assert_eq!(set.items[0].status, ChangeItemStatus::Pending);
        assert_eq!(
            body(&store).await,
            "draft",
            "nothing runs before a person agrees"
        );

        let outcome = engine
            .confirmations()
            .confirm_item(
                assent_domain::ItemRef::new(set.id, 0),
                OffsetDateTime::now_utc(),
            )
            .await
            .expect("confirmed");
        assert_eq!(outcome.message(), "Body set to final.");
        assert!(matches!(
            outcome.execution,
            crate::ExecutionOutcome::Applied {
                mutated: true,
                vector_clock: None,
                ..
            }
        ));
        assert_eq!(body(&store).await, "final");
    }

    #[tokio::test]
    async fn an_engine_given_its_clock_and_ids_decides_the_same_way_twice() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let mut decided = Vec::new();
        for _ in 0..2 {
            let (_store, engine) = engine(with_category(notes_host())).await;
            let engine = engine
                .with_clock(Arc::new(crate::FixedClock(at)))
                .with_ids(Arc::new(crate::SequentialIds::new(7)));
            let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
                "name": "set_body", "input": {"body": "final"}}]))
            .expect("calls");
            let request = WakeRequest::new("scribe", Target::new("note", "n1"), "run-1", calls);
            let wake = engine.wakes().wake(request, engine.now()).await;
            let set = wake.expect("wake").change_set.expect("a change set");
            let confirmed = engine
                .confirmations()
                .confirm_item(assent_domain::ItemRef::new(set.id, 0), engine.now())
                .await
                .expect("confirmed");
            let decision = confirmed.decision;
            decided.push((set.id, decision.id, decision.created_at));
        }
        assert_eq!(decided[0], decided[1], "the same inputs, the same rows");
        assert_eq!(decided[0].0.as_u64_pair(), (7, 1));
        assert_eq!(
            decided[0].1.as_u64_pair(),
            (7, 2),
            "the decision's id is the next"
        );
        assert_eq!(decided[0].2, at);
    }

    /// Counts its calls and answers with the idempotency key it got.
    struct Mailer(std::sync::atomic::AtomicU32);

    impl ExternalHandler for Mailer {
        fn call<'a>(
            &'a self,
            call: crate::ExternalCall<'a>,
        ) -> BoxFuture<'a, Result<String, crate::ExternalError>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let key = call.operation_id.as_str().to_owned();
            Box::pin(async move { Ok(format!("sent with key {key}")) })
        }
    }

    /// An immediate external call commits its action record before it runs unless
    /// its re-run is harmless: then the record lands with its outcome, one commit.
    #[tokio::test]
    async fn an_idempotent_immediate_call_commits_once_with_its_outcome() {
        for idempotent in [false, true] {
            let committed_before = Arc::new(std::sync::Mutex::new(None));
            let seen = committed_before.clone();
            let host = with_category(SimpleHost::new("notes").migration("notes", NOTES, NOTES))
                .handle("set_body", move |conn, _call| {
                    let seen = seen.clone();
                    Box::pin(async move {
                        let records: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_records")
                            .fetch_one(conn)
                            .await?;
                        *seen.lock().expect("not poisoned") = Some(records);
                        Ok("done")
                    })
                })
                .external("set_body", idempotent, Mailer(0.into()));
            let (store, engine) = engine_in(host, ToolMode::Immediate).await;
            let wake = propose(&engine, "now").await;
            assert!(wake.change_set.is_none(), "ran at once");
            assert_eq!(wake.responses[0].content, "done");
            let expected = if idempotent { 0 } else { 1 };
            assert_eq!(
                *committed_before.lock().expect("not poisoned"),
                Some(expected),
                "records committed before the call (idempotent: {idempotent})"
            );
            let kinds: Vec<String> =
                sqlx::query_scalar("SELECT kind FROM audit_records ORDER BY id")
                    .fetch_all(
                        store
                            .read_connection()
                            .await
                            .expect("a read connection")
                            .connection(),
                    )
                    .await
                    .expect("records");
            assert_eq!(kinds, ["action", "result"], "idempotent: {idempotent}");
            let mut conn = store.read_connection().await.expect("connection");
            let report = assent_store::proof::verify(&mut conn, &Default::default())
                .await
                .expect("verified");
            assert!(report.verified, "{:?}", report.violations);
            assert_eq!(report.effects_checked, 1);
        }
    }

    #[tokio::test]
    async fn an_external_tool_is_confirmed_into_a_job_and_run_by_the_executor() {
        let host = with_category(notes_host()).external("set_body", true, Mailer(0.into()));
        assert_eq!(
            host.effect("set_body"),
            Effect::External { idempotent: true }
        );
        assert_eq!(host.effect("other"), Effect::Transactional);
        let (store, engine) = engine(host).await;
        let set = propose(&engine, "final").await.change_set.expect("a set");
        let now = OffsetDateTime::now_utc();
        let outcome = engine
            .confirmations()
            .confirm_item(assent_domain::ItemRef::new(set.id, 0), now)
            .await
            .expect("confirmed");
        assert!(
            matches!(outcome.execution, crate::ExecutionOutcome::Queued { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            body(&store).await,
            "draft",
            "the transactional handler never runs"
        );
        let run = engine.run_due_jobs(now).await.expect("runs");
        assert_eq!((run.claimed, run.applied), (1, 1), "{run:?}");
        let mut conn = store.read_connection().await.expect("connection");
        let job = assent_store::jobs::for_item(&mut conn, set.id, 0)
            .await
            .expect("read")
            .expect("a job");
        assert_eq!(
            job.result,
            Some(format!("sent with key {}", job.operation_id.as_str()))
        );
    }

    #[tokio::test]
    async fn a_failing_closure_keeps_nothing_it_wrote_and_the_item_pending() {
        let (store, engine) = engine(with_category(notes_host())).await;
        let set = propose(&engine, "fail")
            .await
            .change_set
            .expect("a change set");
        let error = engine
            .confirmations()
            .confirm_item(
                assent_domain::ItemRef::new(set.id, 0),
                OffsetDateTime::now_utc(),
            )
            .await
            .expect_err("the handler fails");
        match &error {
            ConfirmError::HandlerFailed { tool, error, .. } => {
                assert_eq!(tool, "set_body");
                assert!(error.contains("the body may not be fail"), "{error}");
            }
            other => panic!("expected a handler failure, got {other:?}"),
        }
        assert_eq!(
            error.to_string(),
            "set_body failed: set_body failed: the body may not be fail; the item is still pending",
            "the text reads as it always did"
        );
        assert_eq!(body(&store).await, "draft");
        let mut conn = store.read_connection().await.expect("connection");
        let set = change_sets::load(&mut conn, set.id)
            .await
            .expect("read")
            .expect("the set");
        assert_eq!(set.items[0].status, ChangeItemStatus::Pending);
    }

    #[tokio::test]
    async fn without_a_category_closure_every_call_is_denied() {
        let (store, engine) = engine(notes_host()).await;
        let wake = propose(&engine, "final").await;
        assert!(wake.change_set.is_none());
        assert!(
            wake.responses[0].content.starts_with("Denied by policy"),
            "{}",
            wake.responses[0].content
        );
        assert_eq!(body(&store).await, "draft");
    }

    #[tokio::test]
    async fn migrations_are_numbered_in_order_and_run_once() {
        let host = notes_host().migration(
            "tags",
            "CREATE TABLE tags (note TEXT NOT NULL)",
            "CREATE TABLE tags (note TEXT NOT NULL)",
        );
        let versions: Vec<i64> = host.migrations().iter().map(|m| m.version).collect();
        assert_eq!(versions, [1, 2]);
        let store = Store::open("sqlite::memory:").await.expect("store");
        let host = Arc::new(host);
        let mut registry = ToolRegistry::new();
        let schema = json!({"type": "object"});
        registry
            .register(ToolSpec::new(
                "set_body",
                "Set.",
                ToolMode::Deferred,
                schema,
            ))
            .expect("registers");
        let registry = Arc::new(registry);
        for _ in 0..2 {
            Engine::open(store.clone(), registry.clone(), host.clone())
                .await
                .expect("opens, and opens again");
        }
        sqlx::query("INSERT INTO tags VALUES ('n1')")
            .execute(
                store
                    .read_connection()
                    .await
                    .expect("a read connection")
                    .connection(),
            )
            .await
            .expect("the second migration ran");
    }

    #[tokio::test]
    async fn a_later_handler_of_a_tool_replaces_the_earlier_one() {
        let host = notes_host().handle("set_body", |_, _| Box::pin(async { Ok("Nothing to do.") }));
        let more = notes_host().handle("archive", |_, _| Box::pin(async { Ok("Archived.") }));
        assert!(more.handler("archive").is_some());
        assert!(more.handler("delete").is_none());
        assert_eq!(
            format!("{more:?}"),
            r#"SimpleHost { name: "notes", migrations: 1, tools: ["set_body", "archive"], externals: [], .. }"#
        );
        assert_eq!(host.handled_tools(), Some(vec!["set_body".to_owned()]));
        let (store, engine) = engine(with_category(host)).await;
        let set = propose(&engine, "final")
            .await
            .change_set
            .expect("a change set");
        let outcome = engine
            .confirmations()
            .confirm_item(
                assent_domain::ItemRef::new(set.id, 0),
                OffsetDateTime::now_utc(),
            )
            .await
            .expect("confirmed");
        assert_eq!(outcome.message(), "Nothing to do.");
        assert_eq!(body(&store).await, "draft", "the first handler never ran");
    }

    #[tokio::test]
    async fn a_handlers_own_error_comes_back_as_the_source_of_the_failure() {
        let (store, engine) = engine(with_category(notes_host())).await;
        let set = propose(&engine, "locked").await.change_set.expect("a set");
        let error = engine
            .confirmations()
            .confirm_item(
                assent_domain::ItemRef::new(set.id, 0),
                OffsetDateTime::now_utc(),
            )
            .await
            .expect_err("the handler refuses");
        let source = std::error::Error::source(&error).expect("the handler's error");
        let locked = source
            .downcast_ref::<NoteLocked>()
            .expect("the service's own type, not a text");
        assert_eq!(locked.by, "ana");
        assert!(!error.is_busy(), "a refusal is not a busy database");
        assert_eq!(
            error.to_string(),
            "set_body failed: set_body failed: the note is locked by ana; the item is still pending"
        );
        assert_eq!(body(&store).await, "draft", "nothing it wrote is kept");
    }

    #[tokio::test]
    async fn open_refuses_a_tool_without_a_handler_and_a_handler_without_a_tool() {
        let refund = || {
            let mut tools = ToolRegistry::new();
            let schema = json!({"type": "object"});
            tools
                .register(ToolSpec::new(
                    "issue_refund",
                    "Refund.",
                    ToolMode::Deferred,
                    schema,
                ))
                .expect("registers");
            Arc::new(tools)
        };
        let misspelt = || {
            Arc::new(
                SimpleHost::new("billing").handle("issue_refnd", |_tx, _call| {
                    Box::pin(async { Ok("refunded") })
                }),
            )
        };
        let store = Store::open("sqlite::memory:").await.expect("store");
        let error = Engine::open(store.clone(), refund(), misspelt())
            .await
            .err()
            .expect("refused");
        assert_eq!(
            error.to_string(),
            "tool issue_refund has no handler in host billing (handlers: issue_refnd)"
        );
        // The other way round: every tool handled, one handler too many.
        let extra = SimpleHost::new("billing")
            .handle("issue_refund", |_tx, _call| {
                Box::pin(async { Ok("refunded") })
            })
            .handle("issue_refnd", |_tx, _call| {
                Box::pin(async { Ok("refunded") })
            });
        let error = Engine::open(store.clone(), refund(), Arc::new(extra))
            .await
            .err()
            .expect("refused");
        assert_eq!(
            error.to_string(),
            "host billing has a handler for issue_refnd, which names no tool of the registry (tools: issue_refund)"
        );
        // An external tool runs through its own handler, not a transactional one.
        let external = SimpleHost::new("billing").external("issue_refund", true, Mailer(0.into()));
        Engine::open(store, refund(), Arc::new(external))
            .await
            .expect("an external tool needs no transactional handler");
    }

    /// Everything a run writes, read back from the store: sets, decisions, audit
    /// records and the catalog, with their ids and times.
    async fn written(store: &Store) -> Vec<Vec<String>> {
        let mut conn = store.read_connection().await.expect("connection");
        let mut all = Vec::new();
        for query in [
            "SELECT id || ' ' || created_at || ' ' || COALESCE(resolved_at, '-') FROM change_sets ORDER BY created_at, id",
            "SELECT id || ' ' || change_set_id || ' ' || verdict || ' ' || created_at FROM decisions ORDER BY created_at, id",
            "SELECT kind || ' ' || operation_id || ' ' || created_at FROM audit_records ORDER BY id",
            "SELECT tool_name || ' ' || first_seen_at || ' ' || updated_at FROM host_tools ORDER BY tool_name",
        ] {
            let rows: Vec<String> = sqlx::query_scalar(query)
                .fetch_all(conn.connection())
                .await
                .expect(query);
            all.push(rows);
        }
        all
    }

    #[tokio::test]
    async fn an_engine_built_with_its_clock_and_ids_writes_the_same_rows_twice() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let mut runs = Vec::new();
        for _ in 0..2 {
            let mut tools = ToolRegistry::new();
            let schema = json!({"type": "object", "required": ["body"],
                "properties": {"body": {"type": "string"}}});
            tools
                .register(ToolSpec::new(
                    "set_body",
                    "Set.",
                    ToolMode::Deferred,
                    schema,
                ))
                .expect("registers");
            let store = Store::open("sqlite::memory:").await.expect("store");
            // Given at open, nothing replaced afterwards: the catalog is stamped with it.
            let engine = Engine::builder(
                store.clone(),
                Arc::new(tools),
                Arc::new(with_category(notes_host())),
            )
            .clock(Arc::new(crate::FixedClock(at)))
            .ids(Arc::new(crate::SequentialIds::new(7)))
            .open()
            .await
            .expect("opens");
            let mut conn = store.read_connection().await.expect("connection");
            agents::upsert(&mut conn, "scribe", &AgentPolicy::new(["notes"]), at)
                .await
                .expect("agent");
            sqlx::query(SEED).execute(&mut *conn).await.expect("seed");
            drop(conn);
            let mut sets = Vec::new();
            for (run, body) in [("run-1", "final"), ("run-2", "other")] {
                let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
                    "name": "set_body", "input": {"body": body}}]))
                .expect("calls");
                let request = WakeRequest::new("scribe", Target::new("note", "n1"), run, calls);
                let wake = engine.wakes().wake_now(request).await.expect("wake");
                sets.push(wake.change_set.expect("a set").id);
            }
            let confirmations = engine.confirmations();
            confirmations
                .confirm_item_now(assent_domain::ItemRef::new(sets[0], 0))
                .await
                .expect("confirmed");
            confirmations
                .reject_item_now(assent_domain::ItemRef::new(sets[1], 0), Some("no".into()))
                .await
                .expect("rejected");
            runs.push(written(&store).await);
        }
        assert_eq!(runs[0], runs[1], "the same inputs, the same rows");
        let stamp = assent_store::timefmt::format(at);
        let [sets, decisions, records, catalog] = &runs[0][..] else {
            panic!("four tables")
        };
        assert_eq!(sets.len(), 2);
        assert!(
            sets[0].starts_with(&Uuid::from_u64_pair(7, 1).to_string()),
            "{sets:?}"
        );
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert!(!records.is_empty());
        assert_eq!(
            catalog,
            &[format!("set_body {stamp} {stamp}")],
            "stamped at open"
        );
        for row in sets.iter().chain(decisions).chain(records) {
            assert!(row.contains(&stamp), "{row} is at the engine's clock");
        }
    }
}
