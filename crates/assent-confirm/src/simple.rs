//! [`SimpleHost`]: a [`Host`] built from closures, for a service that gates a few tools
//! of its own without writing three trait impls of boxed futures.
//!
//! Each closure gets the engine's connection (inside its transaction, so what it writes
//! commits with the decision) and returns `Box::pin(async move { ... })`. Errors are
//! boxed, so `?` works on any error (a query, a parse); a handler's error becomes
//! [`ToolsError::HandlerFailed`] and rolls back what it wrote, a resolver's error
//! denies the call (fail-closed). Such a host keeps no vector clocks, has no local
//! tools, syncs no entities, and keeps every proposal (it has no state to compare
//! with); a service that needs those implements [`Host`] itself.

use crate::Host;
use assent_domain::{Target, VectorClock};
use assent_store::{AnyConnection, HostMigration};
use assent_tools::{
    BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
use std::marker::PhantomData;

/// Any error a closure of a [`SimpleHost`] returns; its text is what the person and the
/// audit trail read.
pub type HostError = Box<dyn std::error::Error + Send + Sync>;

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
        ToolOutcome {
            message: self,
            mutated: true,
        }
    }
}

impl IntoToolOutcome for &'static str {
    fn into_outcome(self) -> ToolOutcome {
        self.to_owned().into_outcome()
    }
}

/// A host assembled from its name, migrations, one closure per tool and one that
/// answers a target's category: see the module documentation.
pub struct SimpleHost {
    name: String,
    migrations: Vec<HostMigration>,
    handlers: Vec<(String, Box<dyn ToolHandler<AnyConnection>>)>,
    resolver: Box<dyn CategoryResolver<AnyConnection>>,
}

impl std::fmt::Debug for SimpleHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.handlers.iter().map(|(t, _)| t.as_str()).collect();
        f.debug_struct("SimpleHost")
            .field("name", &self.name)
            .field("migrations", &self.migrations.len())
            .field("tools", &tools)
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
            resolver: Box::new(ClosureResolver(no_category)),
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
    pub fn handler<F, O>(mut self, tool: impl Into<String>, handler: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut AnyConnection,
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

    /// Answers a target's category (checked against the agent's allowlist when a call
    /// is proposed and again before it runs): `Ok(None)` when the target has none or
    /// does not exist, and the call is denied.
    pub fn category<F>(mut self, category: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut AnyConnection,
                &'a Target,
            ) -> BoxFuture<'a, Result<Option<String>, HostError>>
            + Send
            + Sync
            + 'static,
    {
        self.resolver = Box::new(ClosureResolver(category));
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

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<AnyConnection>> {
        self.handlers
            .iter()
            .find(|(name, _)| name == tool_name)
            .map(|(_, handler)| handler.as_ref())
    }

    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection> {
        self.resolver.as_ref()
    }
}

/// A handler closure and the type its future yields.
struct ClosureHandler<F, O>(F, PhantomData<fn() -> O>);

impl<F, O> ToolHandler<AnyConnection> for ClosureHandler<F, O>
where
    F: for<'a> Fn(&'a mut AnyConnection, &'a ToolInvocation) -> BoxFuture<'a, Result<O, HostError>>
        + Send
        + Sync,
    O: IntoToolOutcome,
{
    fn execute<'a>(
        &'a self,
        ctx: &'a mut AnyConnection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        let run = (self.0)(ctx, invocation);
        Box::pin(async move {
            match run.await {
                Ok(output) => Ok(output.into_outcome()),
                Err(error) => Err(ToolsError::HandlerFailed {
                    tool: invocation.tool_name.clone(),
                    message: error.to_string(),
                }),
            }
        })
    }
}

/// The category of every target of a host nobody told otherwise: none.
fn no_category<'a>(
    _conn: &'a mut AnyConnection,
    _target: &'a Target,
) -> BoxFuture<'a, Result<Option<String>, HostError>> {
    Box::pin(async { Ok(None) })
}

/// A category closure; the host keeps no vector clocks.
struct ClosureResolver<F>(F);

impl<F> CategoryResolver<AnyConnection> for ClosureResolver<F>
where
    F: for<'a> Fn(
            &'a mut AnyConnection,
            &'a Target,
        ) -> BoxFuture<'a, Result<Option<String>, HostError>>
        + Send
        + Sync,
{
    fn category_of<'a>(
        &'a self,
        ctx: &'a mut AnyConnection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let lookup = (self.0)(ctx, target);
        Box::pin(async move { lookup.await.map_err(|error| error.to_string()) })
    }

    fn vector_clock_of<'a>(
        &'a self,
        _ctx: &'a mut AnyConnection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async { Ok(None) })
    }
}
