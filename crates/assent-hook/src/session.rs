//! A call a person already allowed for the rest of its session ("yes, for this
//! session": `assent confirm … --for-session`, the API's `forSession`, the page's
//! button): run unasked under the grant, through the audited executor, with the grant
//! and the session on its audit records so the proof (`assent audit verify`) can check
//! the run against the grant.
//!
//! Only a call the rules would ask about is granted: a deny rule still denies and an
//! allow rule still allows (in the wake), and a tool that needs a quorum or a hold is
//! asked as before, whatever grant a person gave.

use crate::{Answer, HookError, HookEvent};
use assent_confirm::agents;
use assent_confirm::grants;
use assent_confirm::{AuditedExecutor, Engine, ExecutionOutcome, ExecutionRequest};
use assent_domain::{OffsetDateTime, OperationId, Target};
use assent_store::StoreAuditSink;
use assent_tools::{
    CallContext, Coverage, ExecutionTarget, RuleAction, ToolInvocation, call_covers,
};
use serde_json::json;

/// The answer for `event` of agent `agent` on `target` when a session grant covers it
/// and the rules would ask; `None` when the call goes the usual way (no session, no
/// covering grant, or rules that do not ask).
pub(crate) async fn granted(
    engine: &Engine,
    agent: &str,
    target: &Target,
    event: &HookEvent,
    run_key: &str,
) -> Result<Option<Answer>, HookError> {
    let Some(session) = event.session_id.as_deref() else {
        return Ok(None);
    };
    let now = OffsetDateTime::now_utc();
    // Read and run in one write transaction on the target, so a revocation committed
    // before it is seen, and one after it finds the run already recorded.
    let mut tx = engine.store().begin_write_on(target).await?;
    let Some(grant) = grants::covering_session_grant(
        tx.connection(),
        agent,
        session,
        &event.tool_name,
        &event.tool_input,
        &target.id,
    )
    .await?
    else {
        return Ok(None);
    };
    let Some((policy, settings)) = agents::rules_at(tx.connection(), agent, now).await? else {
        return Ok(None);
    };
    let Some(spec) = engine.registry().get(&event.tool_name) else {
        return Ok(None);
    };
    // The grant's pattern was matched as written; read it again with where the paths
    // lead (a symlink out of the workspace leaves it unsure, so the call is asked).
    let workspace = crate::workspace::Workspace::new(std::path::PathBuf::from(&target.id));
    let call = CallContext::new(&event.tool_input, &target.id)
        .with_paths(Some(&workspace as &dyn assent_tools::PathFacts));
    if let Some(pattern) = &grant.call_pattern
        && call_covers(pattern, &event.tool_name, Some(call)) != Coverage::Yes
    {
        return Ok(None);
    }
    let needs = settings.requirements(&event.tool_name);
    // A quorum a rule over the history sets once its condition holds counts as one:
    // a grant is one person's yes.
    let conditional_quorum = policy.rules().iter().any(|rule| {
        rule.condition().is_some_and(|c| c.approvals.is_some())
            && rule.covers(&event.tool_name, Some(call)) != Coverage::No
    });
    if policy.route_call(spec, Some(call)) != RuleAction::Ask
        || needs.approvals_needed > 1
        || needs.hold.is_some()
        || conditional_quorum
    {
        return Ok(None);
    }
    let invocation = ToolInvocation::new(
        event.tool_name.clone(),
        event.tool_input.clone(),
        run_key.to_owned(),
        OperationId::for_call(run_key, &event.tool_name, &event.tool_input, &target.id, 0),
        ExecutionTarget {
            agent_id: agent.to_owned(),
            target: target.clone(),
        },
        now,
    );
    let executor = AuditedExecutor::new(engine.host().resolver(), &StoreAuditSink);
    let outcome = executor
        .execute(
            &mut tx,
            ExecutionRequest {
                policy: &policy,
                spec,
                handler: engine.host().handler(&event.tool_name),
                invocation,
                // The person's "yes, for this session" is the confirmation.
                confirmed_by_person: true,
                already_true: None,
                now,
                allowed_by: Some(json!({"grant": grant.id, "session": session})),
            },
        )
        .await?;
    tx.commit().await?;
    let covered = grant
        .call_pattern
        .clone()
        .unwrap_or_else(|| "these exact arguments".to_owned());
    Ok(Some(match outcome {
        outcome if outcome.is_success() => {
            tracing::info!(grant = %grant.id, "allowed for this session by a person's grant");
            Answer::Allow {
                updated_input: None,
                reason: Some(format!(
                    "Allowed for this session in Assent: a person said yes to {covered} for the rest of this session (grant {})",
                    grant.id
                )),
            }
        }
        ExecutionOutcome::Denied { reason } => Answer::Deny { reason },
        other => Answer::Deny {
            reason: format!(
                "Assent refused the call: a person's session grant {} covers it, but Assent could not record its run ({}), so it did not run; retry the same call",
                grant.id,
                outcome_words(&other)
            ),
        },
    }))
}

/// An outcome of the audited executor other than a success, in words for the model
/// (not a Rust debug dump).
fn outcome_words(outcome: &ExecutionOutcome) -> String {
    match outcome {
        ExecutionOutcome::Denied { reason } => reason.clone(),
        ExecutionOutcome::Failed { error } => format!("it failed: {error}"),
        ExecutionOutcome::Queued { .. } | ExecutionOutcome::Scheduled { .. } => {
            "it was queued instead of allowed".to_owned()
        }
        ExecutionOutcome::AwaitingApprovals { approvals, needed } => {
            format!("it needs {needed} approvals and has {approvals}")
        }
        _ => "it ended in a way the hook has no words for".to_owned(),
    }
}
