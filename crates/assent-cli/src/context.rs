//! What every command shares: the open engine (the CLI is where the journal is composed
//! with it), the command's clock and output mode, and what it prints ([`Output`]).

use crate::CliError;
use assent_confirm::Engine;
use assent_domain::OffsetDateTime;
use assent_store::Store;
use serde::Serialize;

/// What a command prints on stdout, and whether it still failed.
#[derive(Debug)]
pub struct Output {
    /// The text for stdout (a trailing newline is added when missing).
    pub stdout: String,
    /// Set when the command did its work but must exit non-zero anyway (`confirm
    /// --all` with failed items).
    pub failure: Option<CliError>,
}

impl Output {
    pub(crate) fn text(stdout: String) -> Self {
        Self {
            stdout,
            failure: None,
        }
    }

    pub(crate) fn json(value: &impl Serialize) -> Result<Self, CliError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
        Ok(Self::text(text))
    }

    /// JSON with `--json`, otherwise the rendered text.
    pub(crate) fn either(
        json: bool,
        value: &impl Serialize,
        text: impl FnOnce() -> String,
    ) -> Result<Self, CliError> {
        if json {
            Self::json(value)
        } else {
            Ok(Self::text(text()))
        }
    }
}

/// An open database with the journal as host, the time of the command, and the
/// output mode.
pub struct Ctx {
    /// The engine over the database.
    pub engine: Engine,
    /// The clock of this command.
    pub now: OffsetDateTime,
    /// Whether to print JSON.
    pub json: bool,
}

impl Ctx {
    /// Opens (creating and migrating when missing) the database at `url`.
    pub async fn open(url: &str, now: OffsetDateTime, json: bool) -> Result<Self, CliError> {
        let store = crate::database::open_store(url).await?;
        Ok(Self {
            engine: engine(store).await?,
            now,
            json,
        })
    }

    pub(crate) fn store(&self) -> &Store {
        self.engine.store()
    }

    /// A pooled connection for reads and single statements.
    pub(crate) async fn connection(
        &self,
    ) -> Result<impl std::ops::DerefMut<Target = assent_store::Connection>, CliError> {
        Ok(self.store().read_connection().await?)
    }
}

/// The engine over `store`: the journal's catalog, the journal as host (its tables
/// migrated on first use). The CLI is where the journal is composed with the engine.
pub async fn engine(store: Store) -> Result<Engine, CliError> {
    // A person confirming a coding agent's call here (any door: the CLI, the page, the
    // API, Slack) has its workspace read on this machine: the rules see where its paths
    // lead, and a file changed since the proposal is found before anything is recorded.
    // The CLI's expiry, stated in `assent expire --help`: open sets expire after seven
    // days (a service that embeds the engine chooses its own; the engine's default is
    // never).
    Ok(assent_journal_host::journal_engine(store)
        .await?
        .with_foreign_targets(std::sync::Arc::new(assent_hook::Workspaces))
        .with_expiry(assent_confirm::Expiry::After(
            assent_confirm::DEFAULT_EXPIRY_TTL,
        )))
}

/// The identity a quorum counts for a decision made here: `--as NAME`, else the OS
/// user (`USER`, `USERNAME`), else `local` (here, so every command module can name
/// its person without importing the command line's definitions).
pub fn reviewer(named: Option<&str>) -> String {
    named
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("USERNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "local".to_owned())
}
