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

/// Any error a closure of a [`SimpleHost`] returns; its text is what the person and the
/// audit trail read.
pub type HostError = Box<dyn std::error::Error + Send + Sync>;

type HandlerFn = dyn for<'a> Fn(
        &'a mut AnyConnection,
        &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, HostError>>
    + Send
    + Sync;

type CategoryFn = dyn for<'a> Fn(&'a mut AnyConnection, &'a Target) -> BoxFuture<'a, Result<Option<String>, HostError>>
    + Send
    + Sync;

/// A host assembled from its name, migrations, one closure per tool and one that
/// answers a target's category: see the module documentation.
pub struct SimpleHost {
    name: String,
    migrations: Vec<HostMigration>,
    handlers: Vec<(String, ClosureHandler)>,
    resolver: ClosureResolver,
}

impl std::fmt::Debug for SimpleHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleHost")
            .field("name", &self.name)
            .field("migrations", &self.migrations.len())
            .field(
                "tools",
                &self.handlers.iter().map(|(t, _)| t).collect::<Vec<_>>(),
            )
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
            resolver: ClosureResolver(Box::new(|_, _| Box::pin(async { Ok(None) }))),
        }
    }

    /// Adds a migration of the host's own tables (versions increasing from 1).
    pub fn migration(mut self, migration: HostMigration) -> Self {
        self.migrations.push(migration);
        self
    }

    /// Handles calls of `tool` (a confirmed or immediate call of a tool in the
    /// registry) with `handler`; a later handler of the same tool replaces it.
    pub fn handler<F>(mut self, tool: impl Into<String>, handler: F) -> Self
    where
        F: for<'a> Fn(
                &'a mut AnyConnection,
                &'a ToolInvocation,
            ) -> BoxFuture<'a, Result<ToolOutcome, HostError>>
            + Send
            + Sync
            + 'static,
    {
        let tool = tool.into();
        self.handlers.retain(|(name, _)| *name != tool);
        self.handlers.push((tool, ClosureHandler(Box::new(handler))));
        self
    }

    /// Answers a target's category (checked against the agent's allowlist before a
    /// call is queued and again before it runs): `Ok(None)` when the target has none or
    /// does not exist.
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
        self.resolver = ClosureResolver(Box::new(category));
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
            .map(|(_, handler)| handler as &dyn ToolHandler<AnyConnection>)
    }

    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection> {
        &self.resolver
    }
}

struct ClosureHandler(Box<HandlerFn>);

impl ToolHandler<AnyConnection> for ClosureHandler {
    fn execute<'a>(
        &'a self,
        ctx: &'a mut AnyConnection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        let run = (self.0)(ctx, invocation);
        Box::pin(async move {
            run.await.map_err(|error| ToolsError::HandlerFailed {
                tool: invocation.tool_name.clone(),
                message: error.to_string(),
            })
        })
    }
}

struct ClosureResolver(Box<CategoryFn>);

impl CategoryResolver<AnyConnection> for ClosureResolver {
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
