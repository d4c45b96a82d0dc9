//! What a change set is about: one entity of a host, named by the host's kind and the
//! entity's id (the journal's tasks are kind `task`; an MCP server's tools are kind
//! `mcp`, id the server's name).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind every row written before targets had kinds is about: they were all the
/// journal's tasks (JSON without a `targetKind`, e.g. a sync batch of release 0.1.0).
pub const LEGACY_TARGET_KIND: &str = "task";

/// The serde default of a missing `targetKind`.
pub fn legacy_target_kind() -> String {
    LEGACY_TARGET_KIND.to_owned()
}

/// One entity of a host: its kind and its id within that kind. Two targets are the
/// same only when both match, so a billing host's `customer:42` and a journal's
/// `task:42` never mix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Target {
    /// The host's name for the kind of entity, e.g. `task`.
    pub kind: String,
    /// The entity's id within its kind.
    pub id: String,
}

impl Target {
    /// The entity `id` of `kind`.
    pub fn new(kind: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            id: id.into(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.id)
    }
}
