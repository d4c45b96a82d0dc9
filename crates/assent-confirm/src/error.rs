//! The one error type of the engine services.

use assent_domain::DomainError;
use assent_store::StoreError;
use uuid::Uuid;

/// Why a wake or a decision was refused. Nothing was changed, except that policy
/// denials and handler failures are recorded in the audit trail.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    /// No change set with this id.
    #[error("no change set {0}")]
    ChangeSetNotFound(Uuid),
    /// The index does not name an item.
    #[error("change set {change_set_id} has no item {index} (it has {len} item(s))")]
    ItemNotFound {
        /// The set.
        change_set_id: Uuid,
        /// The index asked for.
        index: usize,
        /// How many items it has.
        len: usize,
    },
    /// The item or set is not in a state that allows this (already decided, decided
    /// concurrently, expired). Retrying changes nothing.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A person's reason cannot be kept as given (too long).
    #[error("invalid reason: {0}")]
    InvalidReason(String),
    /// Edited arguments do not satisfy the tool's schema.
    #[error("invalid arguments for {tool}: {problems}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// The violations.
        problems: String,
    },
    /// The policy refused to run the tool (audited).
    #[error("denied by policy: {0}")]
    PolicyDenied(String),
    /// The handler failed; the item stays pending and can be retried (audited).
    #[error("{tool} failed: {error}; the item is still pending")]
    HandlerFailed {
        /// The tool.
        tool: String,
        /// What went wrong.
        error: String,
    },
    /// No agent with this id.
    #[error("unknown agent {0:?} (create it first)")]
    UnknownAgent(String),
    /// An item's agent is not on this database (its set came from another device):
    /// nothing is decided here, since no rules of its own could be checked.
    #[error("no agent {0:?} on this database")]
    AgentNotHere(String),
    /// The host has no such target (reads e.g. `unknown task "t1"`).
    #[error("unknown {} {:?}", .0.kind, .0.id)]
    UnknownTarget(assent_domain::Target),
    /// The item names a tool the catalog does not know.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The wake's tool calls could not be read.
    #[error("{0}")]
    Calls(#[from] assent_changeset::ChangesetError),
    /// A storage failure.
    #[error(transparent)]
    Store(StoreError),
    /// A confirmation request without a correlation id (refused, nothing asked).
    #[error("confirmation request has no correlation id")]
    MissingCorrelationId,
    /// A confirmation request whose correlation id is already waiting for an answer.
    #[error("confirmation request {0} is already waiting for an answer")]
    DuplicateCorrelationId(String),
    /// An answer for no waiting request: unknown, already answered, timed out or
    /// cancelled.
    #[error(
        "no confirmation request {0} is waiting (unknown, already answered, timed out or cancelled)"
    )]
    UnknownCorrelationId(String),
    /// A sub-agent name that is empty, padded or contains `/`.
    #[error("invalid agent name {0:?}: it must be non-empty, unpadded and contain no '/'")]
    InvalidAgentName(String),
    /// A call needs a person, and this session has neither a person nor a parent to ask.
    #[error("confirmation required but no interactive session or delegation available")]
    NoInteractiveSession,
    /// A confirmed call did not finish within its own execution timeout (nothing was
    /// committed).
    #[error("{tool} did not finish within {seconds} s; nothing was changed")]
    ExecutionTimedOut {
        /// The tool.
        tool: String,
        /// The execution timeout.
        seconds: u64,
    },
    /// No execution job with this id.
    #[error("no job {0}")]
    JobNotFound(Uuid),
    /// No grant with this id.
    #[error("no grant {0}")]
    GrantNotFound(Uuid),
    /// The fields the item touches changed since it was proposed: nothing ran, and the
    /// item (still open) now shows the target as it is; confirming it again applies to
    /// that. The text is `target changed since proposed: …; review and confirm again`.
    #[error("{0}")]
    TargetChanged(String),
    /// An applied item whose tool declares no compensation (or none that what was
    /// recorded allows) cannot be undone through Assent.
    #[error("{0}")]
    NoCompensation(String),
    /// A rule that cannot be set as given (a blank pattern, approvals without `ask`):
    /// nothing was written.
    #[error("invalid rule: {0}")]
    InvalidRule(String),
    /// A "yes, for this session" answer that cannot be given as asked (no session, a
    /// pattern of another tool or that does not cover the call, a quorum or a hold):
    /// nothing was written.
    #[error("invalid session grant: {0}")]
    InvalidGrant(String),
    /// A worker's settings were refused (the webhook sender's, say).
    #[error("invalid worker settings: {0}")]
    InvalidWorker(String),
}

impl ConfirmError {
    /// Whether this is a state conflict (exit code 3 on the command line).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }

    pub(crate) fn from_domain(error: DomainError) -> Self {
        match error {
            DomainError::ItemOutOfRange {
                change_set_id,
                index,
                len,
            } => Self::ItemNotFound {
                change_set_id,
                index,
                len,
            },
            too_long @ DomainError::ReasonTooLong { .. } => {
                Self::InvalidReason(too_long.to_string())
            }
            other @ (DomainError::AlreadyDecided { .. }
            | DomainError::InvalidTransition { .. }
            | DomainError::SetExpired { .. }
            | DomainError::EmptyChangeSet { .. }) => Self::Conflict(other.to_string()),
        }
    }
}

impl From<sqlx::Error> for ConfirmError {
    fn from(error: sqlx::Error) -> Self {
        // A unique-index violation on decisions means another writer decided the item
        // first: a conflict, not an internal error.
        if let sqlx::Error::Database(db) = &error
            && db.is_unique_violation()
        {
            return Self::Conflict(format!("changed concurrently: {}", db.message()));
        }
        Self::Store(StoreError::Database(error))
    }
}

impl From<DomainError> for ConfirmError {
    fn from(error: DomainError) -> Self {
        Self::from_domain(error)
    }
}

impl From<StoreError> for ConfirmError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Database(e) => Self::from(e),
            StoreError::ChangeSetNotFound(id) => Self::ChangeSetNotFound(id),
            other => Self::Store(other),
        }
    }
}
