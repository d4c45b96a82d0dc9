//! The domain model of Assent: what an agent proposed, what a person decided, and the
//! pure rules that connect the two.
//!
//! This crate is the bottom of the dependency graph. It knows nothing about storage,
//! async runtimes, tools or prompts: every function takes `now`, ids and the current
//! state as arguments and returns values or [`DomainError`]s, so each rule is a plain
//! unit or property test.
//!
//! - [`ChangeSet`] / [`ChangeItem`]: the proposals of one agent wake, and their
//!   statuses; [`derive_set_status`] is the single rule deriving a set's status from
//!   its items.
//! - [`Target`]: what a change set is about, a host's entity (kind and id).
//! - [`ChangeDecision`]: a person's verdict on one item, kept as history.
//! - [`VectorClock`]: causality between devices for sync.
//! - [`OperationId`] and [`canonical_json`]: deterministic operation ids (ADR 0004).
//! - [`head_and_tail`] and [`one_line`]: agent text as a reviewer sees it, cut at both
//!   ends and on one line, never hidden.
//! - [`person`]: the person behind a decision's `by`, one across doors (a mapped
//!   Slack user is the person they are mapped to), for quorums and the proof.
//! - [`stored_result`]: a tool's result text as it is stored (audit trail, applied
//!   operations, jobs), at most [`MAX_STORED_RESULT_BYTES`], a cut marked with the
//!   whole text's size and SHA-256.
//! - [`format_time`] and [`shown_url`]: a time and a receiver's URL as listings show
//!   them (fixed-width UTC; a URL's credentials redacted, a secret one masked).
//!
//! Two devices that each changed a task without seeing the other's change:
//!
//! ```
//! use assent_domain::{ClockOrdering, VectorClock};
//!
//! let mut laptop = VectorClock::default();
//! laptop.tick("laptop");
//! let mut phone = laptop.clone();
//! phone.tick("phone");
//! laptop.tick("laptop");
//! assert_eq!(laptop.compare(&phone), ClockOrdering::Concurrent);
//! let merged = laptop.merge(&phone);
//! assert_eq!((merged.get("laptop"), merged.get("phone")), (2, 1));
//! ```

mod approval;
mod canonical;
mod change_set;
mod decision;
mod diff;
mod error;
mod hex;
mod listed;
mod operation_id;
mod person;
mod shown;
mod status;
mod stored;
mod target;
mod vector_clock;

pub use approval::approval_digest;
pub use canonical::canonical_json;
pub use change_set::{
    ChangeItem, ChangeSet, ItemRef, MAX_ITEMS_PER_SET, NewChangeSet, stale_detail,
};
pub use decision::{ChangeDecision, MAX_REASON_CHARS, clean_reason};
pub use diff::{ChangedLines, changed_lines};
pub use error::DomainError;
pub use hex::lower_hex;
pub use listed::{format_time, is_secret_url, masked_url, redacted_url, shown_url};
pub use operation_id::OperationId;
pub use person::{
    answered_in_client, person, phone_reviewer, slack_reviewer, telegram_reviewer, token_reviewer,
};
pub use shown::{head_and_tail, misleads, named_summary, one_line};
pub use status::{
    ChangeItemStatus, ChangeSetStatus, DerivedStatus, UnknownName, Verdict, derive_set_status,
};
pub use stored::{MAX_STORED_RESULT_BYTES, stored_result};
pub use target::{LEGACY_TARGET_KIND, Target, legacy_target_kind};
pub use vector_clock::{ClockOrdering, VectorClock};

/// Re-exported so that dependants name the same time and id types as the domain.
pub use time::OffsetDateTime;
pub use uuid::Uuid;
