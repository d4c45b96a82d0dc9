//! Confirmation strategies: how a call that needs a person gets its answer.
//!
//! Tools do not know how they are confirmed. The [`crate::Scheduler`] chooses a
//! strategy per call from its session (interactive, delegated, headless) and the
//! agent's grants, and applies the outcome through the [`crate::ConfirmationService`].

use crate::bus::{AgentBus, ConfirmationOutcome, ConfirmationRequest, ToolCallRequest};
use crate::{CancellationToken, ConfirmError};
use assent_tools::BoxFuture;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a person needs to see to decide about a call: plain data, no callbacks, so it
/// can cross the bus and be rendered anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationDetails {
    /// The question's correlation id; every prompt gets a fresh one.
    pub correlation_id: String,
    /// One line for a person.
    pub summary: String,
    /// The change set holding the call.
    pub change_set_id: Uuid,
    /// Its item.
    pub item_index: usize,
    /// The agent whose policy applies.
    pub agent_id: String,
    /// The kind of target the call changes.
    #[serde(default = "assent_domain::legacy_target_kind")]
    pub target_kind: String,
    /// The target the call changes.
    pub target_id: String,
    /// The target's id when it is a journal task: the field the bus's details and the
    /// `confirmation.requested` webhook have carried since release 0.1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Why the person is asked again (an edit that failed validation), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Decides about one call that needs confirmation.
pub trait ConfirmationStrategy: Send + Sync {
    /// A short name for logs (`deferToChangeSet`, `delegated`, ...).
    fn name(&self) -> &'static str;

    /// The outcome for `call`. `Err` means the call cannot be confirmed this way at
    /// all (it is never run); a wait ends early with `Cancelled` when `cancel` fires.
    fn confirm<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        details: &'a ConfirmationDetails,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ConfirmationOutcome, ConfirmError>>;
}

/// The interactive default: the call waits in its change set for a person's review.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferToChangeSet;

impl ConfirmationStrategy for DeferToChangeSet {
    fn name(&self) -> &'static str {
        "deferToChangeSet"
    }

    fn confirm<'a>(
        &'a self,
        _call: &'a ToolCallRequest,
        details: &'a ConfirmationDetails,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ConfirmationOutcome, ConfirmError>> {
        Box::pin(async move {
            Ok(ConfirmationOutcome::Deferred {
                change_set_id: details.change_set_id,
            })
        })
    }
}

/// Policy (or a person's earlier "always") says allow: proceed once. The executor still
/// enforces the agent's category allowlist, so this never widens it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

impl ConfirmationStrategy for AutoApprove {
    fn name(&self) -> &'static str {
        "autoApprove"
    }

    fn confirm<'a>(
        &'a self,
        _call: &'a ToolCallRequest,
        _details: &'a ConfirmationDetails,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ConfirmationOutcome, ConfirmError>> {
        Box::pin(async move { Ok(ConfirmationOutcome::ProceedOnce) })
    }
}

/// A headless session with nobody to ask: refuses at once, never waits, never allows.
#[derive(Debug, Clone, Copy, Default)]
pub struct NonInteractive;

impl ConfirmationStrategy for NonInteractive {
    fn name(&self) -> &'static str {
        "nonInteractive"
    }

    fn confirm<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        _details: &'a ConfirmationDetails,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ConfirmationOutcome, ConfirmError>> {
        Box::pin(async move {
            tracing::warn!(tool = %call.name, "confirmation required in a headless session; refused");
            Err(ConfirmError::NoInteractiveSession)
        })
    }
}

/// Asks the parent's session over the sub-agent's bus.
#[derive(Debug, Clone)]
pub struct Delegated {
    bus: AgentBus,
}

impl Delegated {
    /// Asks through `bus` (the sub-agent's own, derived bus).
    pub fn new(bus: AgentBus) -> Self {
        Self { bus }
    }
}

impl ConfirmationStrategy for Delegated {
    fn name(&self) -> &'static str {
        "delegated"
    }

    fn confirm<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        details: &'a ConfirmationDetails,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ConfirmationOutcome, ConfirmError>> {
        Box::pin(async move {
            // Plain strings and numbers: serializing cannot fail.
            let mut extra = serde_json::to_value(details).unwrap_or_default();
            if let Some(extra) = extra.as_object_mut() {
                // Carried at the top of the request already.
                extra.remove("correlationId");
                extra.remove("summary");
            }
            let request = ConfirmationRequest {
                correlation_id: Some(details.correlation_id.clone()),
                tool_call: call.clone(),
                agent_path: String::new(),
                summary: details.summary.clone(),
                details: extra,
                forced_outcome: None,
            };
            self.bus.ask(request, cancel).await
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::ConfirmationBus;
    use crate::bus::BusConfig;
    use serde_json::json;
    use std::time::Duration;
    use tokio::time::Instant;

    fn call() -> ToolCallRequest {
        ToolCallRequest {
            name: "update_task_priority".into(),
            args: json!({"priority": "P0"}),
        }
    }

    /// Details of a priority change, with fresh ids (shared with the scheduler's tests).
    pub(crate) fn details() -> ConfirmationDetails {
        ConfirmationDetails {
            correlation_id: Uuid::new_v4().to_string(),
            summary: "Set priority to P0".into(),
            change_set_id: Uuid::new_v4(),
            item_index: 0,
            agent_id: "researcher".into(),
            target_kind: "task".into(),
            target_id: "t1".into(),
            task_id: Some("t1".into()),
            note: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_strategy_answers_as_its_session_allows() {
        let cancel = CancellationToken::new();
        let details = details();
        assert_eq!(
            DeferToChangeSet
                .confirm(&call(), &details, &cancel)
                .await
                .unwrap(),
            ConfirmationOutcome::Deferred {
                change_set_id: details.change_set_id
            }
        );
        assert_eq!(
            AutoApprove
                .confirm(&call(), &details, &cancel)
                .await
                .unwrap(),
            ConfirmationOutcome::ProceedOnce
        );
        let started = Instant::now();
        let refused = NonInteractive.confirm(&call(), &details, &cancel).await;
        assert!(matches!(refused, Err(ConfirmError::NoInteractiveSession)));
        assert_eq!(started.elapsed(), Duration::ZERO, "refused without waiting");
        assert_eq!(
            ConfirmError::NoInteractiveSession.to_string(),
            "confirmation required but no interactive session or delegation available"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delegated_asks_the_parent_with_the_details_and_their_correlation_id() {
        let bus = ConfirmationBus::new("lead", BusConfig::default()).unwrap();
        let mut parent = bus.subscribe();
        let strategy = Delegated::new(bus.derive("researcher").unwrap());
        let details = details();
        let expected_id = details.correlation_id.clone();
        let answering = tokio::spawn(async move {
            let request = parent.recv().await.unwrap();
            bus.respond(
                request.correlation_id.as_deref().unwrap(),
                ConfirmationOutcome::ProceedOnce,
            )
            .unwrap();
            request
        });
        let outcome = strategy
            .confirm(&call(), &details, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(outcome, ConfirmationOutcome::ProceedOnce);
        let request = answering.await.unwrap();
        assert_eq!(
            request.correlation_id.as_deref(),
            Some(expected_id.as_str())
        );
        assert_eq!(request.agent_path, "lead/researcher");
        assert_eq!(request.tool_call, call());
        assert_eq!(request.summary, "Set priority to P0");
        assert!(request.details.get("correlationId").is_none());
        assert_eq!(request.details["changeSetId"], json!(details.change_set_id));
    }
}
