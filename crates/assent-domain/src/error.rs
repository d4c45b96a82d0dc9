//! The one error type of the domain crate.

use crate::{ChangeItemStatus, Verdict};
use uuid::Uuid;

/// A rule of the domain model was broken; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// A change set must hold at least one item.
    #[error("change set {change_set_id} has no items")]
    EmptyChangeSet {
        /// The set that would have been empty.
        change_set_id: Uuid,
    },
    /// A person's reason is longer than [`crate::MAX_REASON_CHARS`].
    #[error("the reason is {chars} characters long; at most {max} are kept", max = crate::MAX_REASON_CHARS)]
    ReasonTooLong {
        /// How long the reason given was.
        chars: usize,
    },
    /// The index does not name an item of the set.
    #[error("change set {change_set_id} has no item {index} (it has {len} item(s))")]
    ItemOutOfRange {
        /// The set addressed.
        change_set_id: Uuid,
        /// The index asked for.
        index: usize,
        /// How many items the set has.
        len: usize,
    },
    /// The item was already decided; a decision is final.
    #[error("item {index} of change set {change_set_id} is already {status}")]
    AlreadyDecided {
        /// The set addressed.
        change_set_id: Uuid,
        /// The item addressed.
        index: usize,
        /// The final status it already has.
        status: ChangeItemStatus,
    },
    /// The item cannot take this verdict from its current status.
    #[error("item {index} of change set {change_set_id} cannot go from {from} to {verdict}")]
    InvalidTransition {
        /// The set addressed.
        change_set_id: Uuid,
        /// The item addressed.
        index: usize,
        /// Its current status.
        from: ChangeItemStatus,
        /// The verdict that was refused.
        verdict: Verdict,
    },
    /// Nothing can be decided in an expired set.
    #[error("change set {change_set_id} has expired; its items can no longer be decided")]
    SetExpired {
        /// The expired set.
        change_set_id: Uuid,
    },
}
