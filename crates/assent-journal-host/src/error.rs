//! The one error type of the journal host's own API.

/// A journal operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// No task has this id.
    #[error("task {0} does not exist")]
    TaskNotFound(String),
    /// A task with this id exists already.
    #[error("task {0} already exists")]
    TaskExists(String),
    /// A new task's input is not acceptable.
    #[error("invalid new task: {field} {reason}")]
    InvalidTask {
        /// The offending field of [`crate::NewTask`].
        field: &'static str,
        /// Why, e.g. `must not be blank`.
        reason: String,
    },
    /// A stored value could not be decoded (corrupt or written by a newer version).
    #[error("corrupt row in {table}: {reason}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What could not be decoded.
        reason: String,
    },
    /// The store failed (e.g. enqueueing the outbox message).
    #[error(transparent)]
    Store(#[from] assent_store::StoreError),
    /// Any other database error.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl JournalError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidTask {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(table: &'static str, reason: impl std::fmt::Display) -> Self {
        Self::Corrupt {
            table,
            reason: reason.to_string(),
        }
    }
}
