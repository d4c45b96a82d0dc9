//! The one error type of the engine services.

use assent_domain::{DomainError, ItemRef};
use assent_store::StoreError;
use assent_tools::{ArgProblem, HandlerError};
use uuid::Uuid;

/// Why a wake or a decision was refused. Nothing was changed, except that policy
/// denials and handler failures are recorded in the audit trail. New variants may be
/// added: a `match` needs a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The item, set or job is not in a state that allows this (already decided,
    /// decided concurrently, expired, held): `kind` says which case, `message` says it
    /// to a person. Retrying changes nothing. Built with [`ConfirmError::conflict`].
    #[error("conflict: {message}")]
    #[non_exhaustive]
    Conflict {
        /// Which state refused it.
        kind: ConflictKind,
        /// The text after `conflict: `, for a person.
        message: String,
    },
    /// A person's reason cannot be kept as given (too long).
    #[error("invalid reason: {0}")]
    InvalidReason(String),
    /// Edited arguments do not satisfy the tool's schema.
    #[error("invalid arguments for {tool}: {}", ArgProblem::join(problems))]
    #[non_exhaustive]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// The violations, each naming its argument (a JSON pointer) when it has one.
        problems: Vec<ArgProblem>,
    },
    /// The policy refused to run the tool (audited).
    #[error("{}", assent_changeset::reply::denied_at_run(reason))]
    #[non_exhaustive]
    PolicyDenied {
        /// The tool refused.
        tool: String,
        /// Why, as the rule says it (`rule deny issue_*`).
        reason: String,
    },
    /// The handler failed; the item stays pending and can be retried (audited). Its
    /// own error is the [`std::error::Error::source`]: `downcast_ref::<MyError>()`
    /// tells a service's refusal (a 422) from a database failure (a 500).
    #[error("{tool} failed: {error}; the item is still pending")]
    #[non_exhaustive]
    HandlerFailed {
        /// The tool.
        tool: String,
        /// What went wrong, as text.
        error: String,
        /// The handler's own error, as it returned it (its `ToolsError` when it gave
        /// no other, the panic's text when it panicked).
        source: HandlerError,
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
    #[error("{detail}")]
    #[non_exhaustive]
    TargetChanged {
        /// The item refreshed.
        item: ItemRef,
        /// Its new revision: a confirmation bound to it applies to the target as it is.
        revision: u32,
        /// The line a person reads.
        detail: String,
    },
    /// An applied item whose tool declares no compensation (or none that what was
    /// recorded allows) cannot be undone through Assent.
    #[error("{0}")]
    NoCompensation(String),
    /// A rule that cannot be set as given (a blank pattern, approvals without `ask`):
    /// nothing was written.
    #[error("invalid rule: {0}")]
    InvalidRule(String),
    /// An agent setting that cannot be set as given (a blank agent id or tool, no
    /// category, a hold on an argument pattern): nothing was written.
    #[error("invalid setting: {0}")]
    InvalidSetting(String),
    /// A policy file (`assent policy plan|apply`) that cannot be read, or that says
    /// something no setting can hold: what is wrong, at which line and column
    /// (1-based, 0 when the problem has no place in the file). Nothing was written.
    #[error("invalid policy file at line {line}, column {column}: {message}")]
    InvalidPolicyFile {
        /// The line of the first thing wrong.
        line: usize,
        /// Its column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A "yes, for this session" answer that cannot be given as asked (no session, a
    /// pattern of another tool or that does not cover the call, a quorum or a hold):
    /// nothing was written.
    #[error("invalid session grant: {0}")]
    InvalidGrant(String),
    /// A worker's settings were refused (the webhook sender's, say).
    #[error("invalid worker settings: {0}")]
    InvalidWorker(String),
    /// Text that is no decision cursor (see `records::DecisionCursor`'s `Display`).
    #[error("invalid decision cursor {0:?}: expected one a decision page gave (dc-N)")]
    InvalidCursor(String),
    /// A person's edit names another target than the call's set is about (the tool
    /// takes its target from its arguments, `ToolSpec::target_from`): nothing was
    /// decided. Confirm the call as proposed, or reject it and let the agent propose
    /// the other target's call.
    #[error(
        "an edit cannot move the call to another target: {tool} acts on {proposed}, the edit names {edited}"
    )]
    EditMovesTarget {
        /// The tool.
        tool: String,
        /// The target the call was proposed for (its set's).
        proposed: assent_domain::Target,
        /// The target the edited arguments name (empty id when they name none).
        edited: assent_domain::Target,
    },
    /// A tool of the registry that runs in the database (deferred or immediate, its
    /// effect [`crate::Effect::Transactional`]) has no handler in the host: refused at
    /// [`crate::Engine::open`], before anyone is asked to confirm a call that cannot run.
    #[error(
        "tool {tool} has no handler in host {host} (handlers: {})",
        list(handlers)
    )]
    #[non_exhaustive]
    MissingHandler {
        /// The tool.
        tool: String,
        /// The host.
        host: String,
        /// The tools the host has handlers for.
        handlers: Vec<String>,
    },
    /// The host has a handler for a tool the registry does not have (a misspelt name):
    /// refused at [`crate::Engine::open`].
    #[error(
        "host {host} has a handler for {handler}, which names no tool of the registry (tools: {})",
        list(tools)
    )]
    #[non_exhaustive]
    HandlerWithoutTool {
        /// The handler's tool name.
        handler: String,
        /// The host.
        host: String,
        /// The tools of the registry.
        tools: Vec<String>,
    },
    /// No remembered rejection has this id (or id prefix): nothing was forgotten.
    #[error(
        "no remembered rejection {0:?} (`assent rejections` lists them; an id, or its first 8 or more hex digits)"
    )]
    RejectionNotFound(String),
    /// The host's [`crate::Host::on_decided`] failed: the decision was rolled back with
    /// everything its transaction wrote for it (a confirmed handler's rows too), and the
    /// item stands as before. `source` is the host's error, as it returned it.
    #[error("host {host} refused to record the decision: {source}; nothing was decided")]
    DecisionHookFailed {
        /// The host's name.
        host: String,
        /// What the host's hook returned.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Names for a message, `none` for no name.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Which state refused a request ([`ConfirmError::Conflict`]), so that a caller tells
/// the cases apart without reading the text. New kinds may be added: a `match` needs a
/// wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConflictKind {
    /// The item was decided already (a decision is final).
    AlreadyDecided,
    /// The item was deferred already and cannot be deferred again.
    AlreadyDeferred,
    /// The set expired: nothing in it can be decided.
    Expired,
    /// The set would have had no items.
    EmptySet,
    /// Another writer decided (or wrote) the same thing first.
    ChangedConcurrently,
    /// The item is confirmed and waits out its hold window: cancel its job to take it
    /// back.
    Held,
    /// The item's revision moved past the one the person was shown.
    RevisionMoved,
    /// The tool needs approvals by distinct people and nobody said who approves.
    ApproverNotNamed,
    /// The same person approved the item's revision already.
    SamePersonTwice,
    /// The item was edited more times than a revision number holds.
    TooManyRevisions,
    /// The set has no open item left (dismissing it).
    NothingOpen,
    /// The job no longer waits out a hold window (claimed, ran, cancelled or settled):
    /// it cannot be cancelled.
    HoldEnded,
    /// The job is run by another device: it is settled there.
    RunByOtherDevice,
    /// The job's confirmation lost a sync conflict to an earlier decision: it cannot run
    /// again.
    NoLongerConfirmed,
    /// The job is not in doubt (resolving it).
    NotInDoubt,
    /// The job has not failed (retrying or retracting it).
    NotFailed,
    /// The item is not applied: only an applied change can be undone.
    NotApplied,
    /// A grant suggestion was not applied: it would weaken a deny, quorum or hold in
    /// force, or accept a changed definition (the message says which).
    SuggestionRefused,
    /// The session that asked for the call has ended (its chat closed, the hook that
    /// waited for it stopped) and nothing else will run it: the confirmation was refused
    /// and the item withdrawn.
    SessionEnded,
}

impl ConflictKind {
    /// Its name in JSON (`revisionMoved`): the HTTP API's `conflictKind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlreadyDecided => "alreadyDecided",
            Self::AlreadyDeferred => "alreadyDeferred",
            Self::Expired => "expired",
            Self::EmptySet => "emptySet",
            Self::ChangedConcurrently => "changedConcurrently",
            Self::Held => "held",
            Self::RevisionMoved => "revisionMoved",
            Self::ApproverNotNamed => "approverNotNamed",
            Self::SamePersonTwice => "samePersonTwice",
            Self::TooManyRevisions => "tooManyRevisions",
            Self::NothingOpen => "nothingOpen",
            Self::HoldEnded => "holdEnded",
            Self::RunByOtherDevice => "runByOtherDevice",
            Self::NoLongerConfirmed => "noLongerConfirmed",
            Self::NotInDoubt => "notInDoubt",
            Self::NotFailed => "notFailed",
            Self::NotApplied => "notApplied",
            Self::SuggestionRefused => "suggestionRefused",
            Self::SessionEnded => "sessionEnded",
        }
    }
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ConfirmError {
    /// A conflict of `kind`, reading `conflict: {message}`.
    pub fn conflict(kind: ConflictKind, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
        }
    }

    /// Whether this is a state conflict (exit code 3 on the command line).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// Whether no write could start in time because other writers held the database
    /// ([`StoreError::WriterBusy`], here or anywhere down the chain of sources, a
    /// handler's own included): worth retrying later (a 503, not a 500).
    pub fn is_busy(&self) -> bool {
        if let Self::Store(StoreError::WriterBusy(_)) = self {
            return true;
        }
        let mut next = std::error::Error::source(self);
        while let Some(error) = next {
            if let Some(StoreError::WriterBusy(_)) = error.downcast_ref::<StoreError>() {
                return true;
            }
            if let Some(inner) = error.downcast_ref::<ConfirmError>()
                && inner.is_busy()
            {
                return true;
            }
            next = error.source();
        }
        false
    }

    /// Which state refused it, when this is a conflict.
    pub fn conflict_kind(&self) -> Option<ConflictKind> {
        match self {
            Self::Conflict { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The engine's word for a refusal of the pure core. Exhaustive on purpose: a new
    /// refusal there gets its own error or conflict kind here, chosen, not defaulted.
    pub(crate) fn from_domain(error: DomainError) -> Self {
        let kind = match error {
            DomainError::ItemOutOfRange {
                change_set_id,
                index,
                len,
            } => {
                return Self::ItemNotFound {
                    change_set_id,
                    index,
                    len,
                };
            }
            DomainError::ReasonTooLong { .. } => return Self::InvalidReason(error.to_string()),
            DomainError::AlreadyDecided { .. } => ConflictKind::AlreadyDecided,
            // The one transition the core refuses of an open item: deferring it again.
            DomainError::InvalidTransition { .. } => ConflictKind::AlreadyDeferred,
            DomainError::SetExpired { .. } => ConflictKind::Expired,
            DomainError::EmptyChangeSet { .. } => ConflictKind::EmptySet,
        };
        Self::conflict(kind, error.to_string())
    }
}

impl From<sqlx::Error> for ConfirmError {
    fn from(error: sqlx::Error) -> Self {
        // A unique-index violation on decisions means another writer decided the item
        // first: a conflict, not an internal error.
        if let sqlx::Error::Database(db) = &error
            && db.is_unique_violation()
        {
            return Self::conflict(
                ConflictKind::ChangedConcurrently,
                format!("changed concurrently: {}", db.message()),
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{ChangeItemStatus, Verdict};

    #[test]
    fn a_conflict_reads_as_before_and_names_its_kind() {
        let error = ConfirmError::conflict(ConflictKind::NotFailed, "job j is applied, not failed");
        assert_eq!(error.to_string(), "conflict: job j is applied, not failed");
        assert!(error.is_conflict());
        assert_eq!(error.conflict_kind(), Some(ConflictKind::NotFailed));
        assert_eq!(ConflictKind::NotFailed.as_str(), "notFailed");
        let other = ConfirmError::UnknownTool("t".into());
        assert_eq!((other.is_conflict(), other.conflict_kind()), (false, None));
    }

    #[test]
    fn busy_is_found_however_the_writer_busy_error_is_wrapped() {
        let busy = || StoreError::WriterBusy(std::time::Duration::from_secs(5));
        assert!(ConfirmError::from(busy()).is_busy());
        let in_handler = ConfirmError::HandlerFailed {
            tool: "refund".into(),
            error: "refund failed: busy".into(),
            source: Box::new(busy()),
        };
        assert!(in_handler.is_busy());
        let deeper = ConfirmError::HandlerFailed {
            tool: "refund".into(),
            error: "refund failed: busy".into(),
            source: Box::new(assent_tools::ToolsError::handler_failed("refund", busy())),
        };
        assert!(deeper.is_busy());
        assert!(!ConfirmError::from(StoreError::GroupCommitFailed("x".into())).is_busy());
        assert!(!ConfirmError::UnknownTool("t".into()).is_busy());
    }

    #[test]
    fn the_cores_refusals_keep_their_text_and_get_a_kind() {
        let id = Uuid::nil();
        let refusals = [
            (
                DomainError::AlreadyDecided {
                    change_set_id: id,
                    index: 0,
                    status: ChangeItemStatus::Confirmed,
                },
                ConflictKind::AlreadyDecided,
            ),
            (
                DomainError::InvalidTransition {
                    change_set_id: id,
                    index: 0,
                    from: ChangeItemStatus::Deferred,
                    verdict: Verdict::Deferred,
                },
                ConflictKind::AlreadyDeferred,
            ),
            (
                DomainError::SetExpired { change_set_id: id },
                ConflictKind::Expired,
            ),
            (
                DomainError::EmptyChangeSet { change_set_id: id },
                ConflictKind::EmptySet,
            ),
        ];
        for (refusal, kind) in refusals {
            let text = format!("conflict: {refusal}");
            let error = ConfirmError::from(refusal);
            assert_eq!(error.to_string(), text);
            assert_eq!(error.conflict_kind(), Some(kind), "{error}");
        }
    }
}
