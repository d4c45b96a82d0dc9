//! [`HookError`]: what went wrong answering a hook event.

use assent_confirm::ConfirmError;
use assent_store::StoreError;
use assent_tools::ToolsError;

/// Why a hook event got no decision (the hook then blocks the call).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The agent kind is not one Assent answers.
    #[error(
        "unknown agent kind {0:?} (expected claude-code, codex, cursor, copilot, vscode or gemini)"
    )]
    UnknownKind(String),
    /// The event is not what the agent's hook sends.
    #[error("malformed hook event: {0}")]
    Malformed(String),
    /// The engine refused or failed.
    #[error(transparent)]
    Confirm(#[from] ConfirmError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The tool could not be registered.
    #[error(transparent)]
    Tools(#[from] ToolsError),
}
