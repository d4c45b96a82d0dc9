//! Audit records: what the executor writes before and after every tool call.

use assent_domain::{OperationId, VectorClock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

/// Which step of an execution a record documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AuditKind {
    /// Written before the handler runs.
    Action,
    /// Written after the handler returned (success or error).
    Result,
    /// The policy refused the call; the handler never ran.
    PolicyDenied,
}

impl AuditKind {
    /// The stable wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Action => "action",
            Self::Result => "result",
            Self::PolicyDenied => "policyDenied",
        }
    }
}

impl std::str::FromStr for AuditKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "action" => Ok(Self::Action),
            "result" => Ok(Self::Result),
            "policyDenied" => Ok(Self::PolicyDenied),
            other => Err(format!("unknown audit kind {other:?}")),
        }
    }
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// Deterministic id of the operation (ADR 0004).
    pub operation_id: OperationId,
    /// The wake run the operation came from.
    pub run_key: String,
    /// The tool.
    pub tool_name: String,
    /// The agent on whose behalf it ran.
    pub agent_id: String,
    /// The kind of entity it targeted.
    #[serde(default = "assent_domain::legacy_target_kind")]
    pub target_kind: String,
    /// The entity it targeted (`taskId` in batches of release 0.1.0).
    #[serde(alias = "taskId")]
    pub target_id: String,
    /// Which step this is.
    pub kind: AuditKind,
    /// The arguments.
    pub args: Value,
    /// For results: whether the handler succeeded.
    pub success: Option<bool>,
    /// The handler's message, the error, or the denial reason.
    pub detail: Option<String>,
    /// The mutated entity's clock after a successful mutation.
    pub vector_clock: Option<VectorClock>,
    /// When it was written.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// For a call that ran without a person: what let it run (`{"rule": {"pattern",
    /// "action", "expiresAt"?}}`, `{"mode": "immediate"}`, `{"grant": ID}`). Absent for
    /// a call a person confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<Value>,
    /// For a call refused without asking anyone: what refused it
    /// (`{"rejectedBefore": DECISION_ID}`: a person rejected exactly this call before,
    /// and the agent's rejections are remembered). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<Value>,
    /// For a call refused by the policy, or one that waited for a person: what decided
    /// so, in the shape `allowedBy` names a rule (`{"rule": {"pattern", "action",
    /// "decided", "expiresAt"?, "condition"?, "source", "sha256"?, "setBy"?,
    /// "setAt"?}}`), or `{"mode": MODE}` when no rule but the tool's mode decided,
    /// `{"category": REASON}` when the category allowlist refused it, `{"arguments":
    /// REASON}` when its arguments were refused, `{"approval": REASON}` when a person's
    /// approval no longer binds the call. Absent on the records of a call that ran
    /// unasked (`allowedBy` says why) and on records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Value>,
}
