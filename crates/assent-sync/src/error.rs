//! Why a batch cannot be merged; a refused batch changes nothing.

use uuid::Uuid;

/// A batch that cannot be merged into local state, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// The batch was written by a newer (or unknown) format.
    #[error(
        "sync batch format {found} is not supported (this build reads formats {oldest} to {supported})"
    )]
    UnsupportedFormat {
        /// The batch's format.
        found: u32,
        /// The oldest this build reads.
        oldest: u32,
        /// The newest this build reads (and writes).
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
    /// An item effect or a job of the execution ledger is malformed or refers to an
    /// item neither device has.
    #[error("{what} of the execution ledger is invalid: {problem}")]
    InvalidLedgerRow {
        /// Which row (`job ID`, `the effect of item N of change set ID`).
        what: String,
        /// What is wrong.
        problem: String,
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
    /// A change set holds more items than a wake may propose.
    #[error("change set {change_set_id} has {items} items; a change set holds at most {max}")]
    TooManyItems {
        /// The set.
        change_set_id: Uuid,
        /// How many items it has.
        items: usize,
        /// [`assent_domain::MAX_ITEMS_PER_SET`].
        max: usize,
    },
    /// A change set new to this device is about a synced entity (of a kind some host
    /// syncs) that neither this device nor the batch has.
    #[error(
        "change set {change_set_id} is about {target_kind} {target_id:?}, which neither this device nor the batch has"
    )]
    UnknownTarget {
        /// The set.
        change_set_id: Uuid,
        /// The kind of its target.
        target_kind: String,
        /// Its target.
        target_id: String,
    },
    /// An item of the batch is decided, but no decision on it is known: an item is only
    /// ever decided by a person's decision, which travels with it.
    #[error(
        "item {item_index} of change set {change_set_id} is {status}, but neither this device nor the batch has a decision on it"
    )]
    UndecidedItem {
        /// The set.
        change_set_id: Uuid,
        /// The item.
        item_index: usize,
        /// Its status in the batch.
        status: String,
    },
    /// A vector clock claims writes that cannot have happened: more writes of this
    /// device than it has made, or an absurd counter.
    #[error("{what} has vector clock entry {host:?} = {counter}: {problem}")]
    ImplausibleClock {
        /// Where (a change set, a decision, an audit record, an entity).
        what: String,
        /// The clock entry's host.
        host: String,
        /// Its counter.
        counter: u64,
        /// Why it cannot be.
        problem: String,
    },
    /// A decision's reason is longer than a person may give one here.
    #[error("decision {decision_id} has a reason of {chars} characters; at most {max} are kept")]
    ReasonTooLong {
        /// The decision.
        decision_id: uuid::Uuid,
        /// How long its reason is.
        chars: usize,
        /// [`assent_domain::MAX_REASON_CHARS`].
        max: usize,
    },
    /// A time is before [`crate::EARLIEST_TIME`] or further ahead of this device's
    /// clock than [`crate::MAX_CLOCK_SKEW`].
    #[error("{what} has {field} {value}: {problem}")]
    ImplausibleTime {
        /// Where (the batch header, a change set, a decision, ...).
        what: String,
        /// The field.
        field: String,
        /// Its value (RFC 3339).
        value: String,
        /// Why it cannot be.
        problem: String,
    },
    /// A host entity's version carries a write that no audit record accounts for:
    /// every write of a task after its creation is a tool call, audited with the
    /// task's clock.
    #[error(
        "{entity_type} {entity_id:?} carries write {counter} of host {host:?}, which no audit record of that host accounts for"
    )]
    UnauditedWrite {
        /// The entity's type.
        entity_type: String,
        /// Its id.
        entity_id: String,
        /// The host the write is attributed to.
        host: String,
        /// The write's counter in the entity's clock.
        counter: u64,
    },
}
