//! A person's verdict on one item, kept as history for the agent's next prompt.

use crate::{VectorClock, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// One decision about one item of one change set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeDecision {
    /// Unique id.
    pub id: Uuid,
    /// The set the item belongs to.
    pub change_set_id: Uuid,
    /// The item's index within the set.
    pub item_index: usize,
    /// The agent that proposed it (denormalised for history queries).
    pub agent_id: String,
    /// The kind of entity it concerned (denormalised for history queries).
    #[serde(default = "crate::target::legacy_target_kind")]
    pub target_kind: String,
    /// The entity it concerned (`taskId` in batches of release 0.1.0).
    #[serde(alias = "taskId")]
    pub target_id: String,
    /// The item's tool.
    pub tool_name: String,
    /// What was decided.
    pub verdict: Verdict,
    /// Why, when the person said (rejections, dismissals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The args actually applied when the person edited them before confirming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_args: Option<Value>,
    /// The item's summary, as the person saw it.
    pub human_summary: String,
    /// The args the agent proposed.
    pub args: Value,
    /// When it was decided.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Causality for cross-device sync.
    #[serde(default)]
    pub vector_clock: VectorClock,
    /// Who decided (a token's id, `--as`, the OS user), when known: every view of a
    /// decision names the person. It travels with the decision, so another device's
    /// trail says who decided there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

impl ChangeDecision {
    /// The args that took effect: the edited ones if any, else the proposal.
    pub fn applied_args(&self) -> &Value {
        self.edited_args.as_ref().unwrap_or(&self.args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #[test]
        fn decision_json_round_trips(
            index in 0usize..100,
            verdict in prop::sample::select(Verdict::ALL.to_vec()),
            reason in proptest::option::of("[a-zA-Z \"é✓]{0,20}"),
            edited in proptest::option::of(0i64..1000),
            secs in 0i64..4_000_000_000,
        ) {
            let decision = ChangeDecision {
                id: Uuid::from_u128(index as u128 + 1),
                change_set_id: Uuid::from_u128(7),
                item_index: index,
                agent_id: "agent".into(),
                target_kind: "task".into(),
                target_id: "task".into(),
                tool_name: "update_task_estimate".into(),
                verdict,
                reason,
                edited_args: edited.map(|m| json!({"minutes": m})),
                human_summary: "Set estimate to 60 minutes".into(),
                args: json!({"minutes": 60}),
                created_at: OffsetDateTime::from_unix_timestamp(secs).expect("in range"),
                vector_clock: VectorClock::default(),
                decided_by: None,
            };
            let v = serde_json::to_value(&decision).expect("serialises");
            prop_assert!(v.get("changeSetId").is_some() && v.get("itemIndex").is_some());
            let back: ChangeDecision = serde_json::from_value(v).expect("deserialises");
            prop_assert_eq!(back, decision);
        }
    }
}

/// The longest reason a person may give for a decision, in characters. Reasons are
/// shown on every screen and in the agent's next prompt; one of a megabyte would
/// crowd out everything else there, and in every stream that carries it.
pub const MAX_REASON_CHARS: usize = 4096;

/// A person's reason, trimmed; a blank one is no reason, one over
/// [`MAX_REASON_CHARS`] is refused.
pub fn clean_reason(reason: Option<String>) -> Result<Option<String>, crate::DomainError> {
    let Some(reason) = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
    else {
        return Ok(None);
    };
    let chars = reason.chars().count();
    if chars > MAX_REASON_CHARS {
        return Err(crate::DomainError::ReasonTooLong { chars });
    }
    Ok(Some(reason))
}

#[cfg(test)]
mod reason_tests {
    use super::*;

    #[test]
    fn reasons_are_trimmed_and_bounded() {
        assert_eq!(clean_reason(None), Ok(None));
        assert_eq!(clean_reason(Some("  ".into())), Ok(None));
        assert_eq!(clean_reason(Some(" no ".into())), Ok(Some("no".into())));
        let longest = "é".repeat(MAX_REASON_CHARS);
        assert_eq!(clean_reason(Some(longest.clone())), Ok(Some(longest)));
        assert_eq!(
            clean_reason(Some("x".repeat(MAX_REASON_CHARS + 1))),
            Err(crate::DomainError::ReasonTooLong {
                chars: MAX_REASON_CHARS + 1
            })
        );
    }
}
