//! A target's state as its host sees it, and what the host says about a proposal
//! given that state: whether it would change anything (ADR 0009's redundancy rules)
//! and what value it would replace (the review page's "before").
//!
//! The rules belong to the host that knows its data (the journal's are in
//! `assent-journal`); the planner and the confirmation service only ask. A host with
//! no rules keeps every proposal.

use crate::{PathFacts, SummaryContext, TargetCategory};
use serde_json::Value;
use std::fmt;

/// What a host concluded about one proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redundancy {
    /// It would change something (or the host cannot tell): keep it.
    Keep,
    /// It is already true; the detail reads e.g. `priority is already P1`.
    AlreadyTrue(String),
    /// It names a sub-entity that does not exist (the model invented the id); the
    /// text is that id.
    InventedId(String),
}

/// One target's current state, loaded by its host inside the engine's transaction;
/// summaries may look things up in it ([`SummaryContext`]).
pub trait TargetState: SummaryContext + fmt::Debug + Send + Sync {
    /// Whether `tool_name(args)` (one exploded, validated proposal) would change this
    /// state. The default keeps everything.
    fn redundancy(&self, tool_name: &str, args: &Value) -> Redundancy {
        let _ = (tool_name, args);
        Redundancy::Keep
    }

    /// The value the proposal would replace, shown beside the new one for review.
    fn before(&self, tool_name: &str, args: &Value) -> Option<Value> {
        let _ = (tool_name, args);
        None
    }

    /// What the fields `tool_name(args)` would touch hold now: taken when the call is
    /// proposed, stored with the item, and compared again when it is confirmed and when
    /// its job runs; a difference means the target changed meanwhile and the item is
    /// not applied to what it has become. Fields, not whole objects (an unrelated edit
    /// of the same target changes nothing here), and content, not timestamps. An
    /// object keyed by field name gives the clearest message (`priority was P2, now
    /// P1`). `None`: nothing to guard. The default is [`TargetState::before`].
    fn fingerprint(&self, tool_name: &str, args: &Value) -> Option<Value> {
        self.before(tool_name, args)
    }

    /// Whether this state holds what `tool_name(args)` touches, so its
    /// [`TargetState::fingerprint`] may be compared with the one stored at the proposal.
    /// A state that sees only what was read for calls being proposed (an MCP gateway
    /// reads a file through its upstream before queueing a write) says no for every
    /// other call: an absent reading is no evidence of a change. The default is yes.
    fn observed(&self, tool_name: &str, args: &Value) -> bool {
        let _ = (tool_name, args);
        true
    }

    /// The target's category as this state holds it (what the host's
    /// [`CategoryResolver::category_of`] would answer in the same transaction), or `None`
    /// when the state does not hold it. A state loaded in the deciding transaction
    /// before anything ran there saves the engine a read of the category: the policy
    /// is then checked against this answer. The default is `None` (the resolver is
    /// asked).
    ///
    /// [`CategoryResolver::category_of`]: crate::CategoryResolver::category_of
    fn category(&self) -> Option<TargetCategory> {
        None
    }

    /// What the machine says of this target's paths (where a path leads, what `~/`
    /// stands for), read by path rules ([`crate::CallContext::paths`]); `None` (the
    /// default) for a target with no files on this machine.
    fn paths(&self) -> Option<&dyn PathFacts> {
        None
    }
}

/// The state of a target whose host keeps none the engine could compare with (every
/// proposal is kept, no "before" is shown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stateless;

impl SummaryContext for Stateless {
    fn title_of(&self, _entity_id: &str) -> Option<String> {
        None
    }
}

impl TargetState for Stateless {}
