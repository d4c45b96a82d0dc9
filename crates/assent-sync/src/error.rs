//! Why a batch cannot be merged; a refused batch changes nothing.

use uuid::Uuid;

/// A batch that cannot be merged into local state, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The batch was written by a newer (or unknown) format.
    #[error("sync batch format {found} is not supported (this build reads format {supported})")]
    UnsupportedFormat {
        /// The batch's format.
        found: u32,
        /// The one this build reads.
        supported: u32,
    },
    /// The batch claims to come from this device: either it is this device's own
    /// export, or two devices share a host id, which would corrupt their clocks.
    #[error("sync batch {batch_id} comes from host {host:?}, which is this device's own host id")]
    FromThisHost {
        /// The batch.
        batch_id: Uuid,
        /// The shared host id.
        host: String,
    },
    /// A host id is blank.
    #[error("sync batch {batch_id} has a blank host id in {what}")]
    BlankHost {
        /// The batch.
        batch_id: Uuid,
        /// Where (the batch header, a decision, an audit record).
        what: String,
    },
    /// The same row appears twice in one batch.
    #[error("sync batch lists {what} twice")]
    Duplicate {
        /// Which row.
        what: String,
    },
    /// A decision points at a change set neither side has, or at an item it lacks.
    #[error(
        "decision {decision_id} refers to item {item_index} of change set {change_set_id}, which {problem}"
    )]
    DanglingDecision {
        /// The decision.
        decision_id: Uuid,
        /// Its set.
        change_set_id: Uuid,
        /// Its item.
        item_index: usize,
        /// What is wrong (unknown set, index out of range).
        problem: String,
    },
    /// Both sides have a decision with this id but with different content: decisions
    /// are facts that never change, so one side is corrupt.
    #[error("decision {decision_id} differs from the local one with the same id")]
    DivergentDecision {
        /// The decision.
        decision_id: Uuid,
    },
    /// Both sides have a change set with this id but with different proposals: the
    /// proposals of a set never change after it is written, so one side is corrupt.
    #[error("change set {change_set_id} differs from the local one in {field}")]
    DivergentChangeSet {
        /// The set.
        change_set_id: Uuid,
        /// The first differing immutable field.
        field: String,
    },
    /// A host entity of the batch is malformed.
    #[error("entity {entity_type} {entity_id:?} is invalid: {problem}")]
    InvalidEntity {
        /// Its type.
        entity_type: String,
        /// Its id.
        entity_id: String,
        /// What is wrong.
        problem: String,
    },
}
