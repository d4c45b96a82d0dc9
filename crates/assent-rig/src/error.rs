//! The crate's one error type: what can go wrong between a rig agent and the engine.

use assent_confirm::ConfirmError;

/// Why the adapter could not answer a tool call.
///
/// Per-call problems the model should read (an unknown tool, bad arguments, a denial,
/// a rejection) are not errors: they are reply texts. An error here means nothing was
/// decided for the call, and [`crate::AssentHook`] stops the run rather than let the
/// call through.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RigError {
    /// The engine failed (the database, a conflict, an unknown agent or target).
    #[error(transparent)]
    Engine(#[from] ConfirmError),
}
