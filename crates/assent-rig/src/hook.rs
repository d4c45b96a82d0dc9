//! [`AssentHook`]: rig's dispatch boundary routed through an Assent engine.
//!
//! Every tool call the model makes is one wake of the engine (`run key/call id` as its
//! run key), so the agent's policy, batch tools, redundancy and duplicate filters and
//! the decision history work as for every other dialect. The call's rig body never
//! runs beside the engine: the dispatch is withheld (`DispatchAction::skip`) and the
//! engine's reply becomes the tool result the model reads (`on_outcome`), a success
//! unless it refuses the call. Each call is its own wake, so each deferred call is its
//! own change set (with its own id, a function of the run and the call: a resumed run
//! finds it). What runs, runs through the engine's audited executor:
//! the host's handler, which for a rig tool registered with
//! [`RigToolHost::rig_tool`](crate::RigToolHost::rig_tool) is the rig tool itself.

use crate::RigError;
use crate::replies;
use assent_changeset::{ToolArguments, ToolCall, reply};
use assent_confirm::{ConfirmError, DEFAULT_WORKER_POLL, Engine, SetOutcome, WakeRequest};
use assent_domain::{OffsetDateTime, OperationId, Target};
use rig_agent::agent::{
    AgentHook, DispatchAction, DispatchEvent, HookContext, OutcomeAction, OutcomeEvent,
};
use rig_core::effect::{EffectId, Outcome};
use rig_core::tool::{ToolOutput, ToolResult};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use std::time::Instant;
use uuid::Uuid;

/// What the model reads about one call, and whether it says the call did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The text of the tool result.
    pub text: String,
    /// The call was refused, rejected, failed or is in doubt: the rig tool result is
    /// then a skipped one (`ToolResult::is_skipped`, what later hooks and telemetry
    /// see), any other answer a success. rig 0.43's messages carry the text only.
    pub is_error: bool,
}

impl Answer {
    /// An engine reply, an error when it refuses the call (`reply::is_refusal`).
    fn said(text: String) -> Self {
        let is_error = reply::is_refusal(&text);
        Self { text, is_error }
    }
}

/// A rig [`AgentHook`] that puts a person between the agent and its tools: see the
/// module documentation. Pass it to `AgentBuilder::add_hook`.
///
/// - An immediate call runs now, through the engine; the model reads its result.
/// - A denied call (policy, unknown tool, invalid arguments) is skipped with the
///   engine's refusal text (`Denied by policy: …`).
/// - A deferred call becomes a change set. The model reads `Proposal queued for user
///   review.` at once, or, with [`AssentHook::wait`], what the person decided: the
///   handler's result (of the edited call when the person edited it), or `Rejected by
///   the user: REASON`.
///
/// An engine error stops the run (`DispatchAction::stop`): nothing runs unchecked.
#[derive(Clone)]
pub struct AssentHook {
    engine: Engine,
    agent_id: String,
    target: Target,
    run_key: Option<String>,
    wait: Option<Duration>,
}

impl std::fmt::Debug for AssentHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssentHook")
            .field("host", &self.engine.host().name())
            .field("agent_id", &self.agent_id)
            .field("target", &self.target)
            .field("run_key", &self.run_key)
            .field("wait", &self.wait)
            .finish()
    }
}

impl AssentHook {
    /// The hook of `agent_id` (an agent the engine's store knows) working on `target`
    /// (a target of the engine's host). Without [`AssentHook::run_key`] each rig run is
    /// its own run; without [`AssentHook::wait`] deferred calls are answered at once.
    pub fn new(engine: Engine, agent_id: impl Into<String>, target: Target) -> Self {
        Self {
            engine,
            agent_id: agent_id.into(),
            target,
            run_key: None,
            wait: None,
        }
    }

    /// Names the run (a conversation, a job): part of every call's run key, operation
    /// id and change-set id. An agent restarted with the same key and replaying the
    /// same calls (rig's transcript keeps their ids) resumes: a call queued before is
    /// awaited, not proposed again, and nothing that ran runs again.
    pub fn run_key(mut self, key: impl Into<String>) -> Self {
        self.run_key = Some(key.into());
        self
    }

    /// Awaits the person's decision on each deferred call for up to `timeout`; the model
    /// then reads the outcome instead of `Proposal queued for user review.` (which it
    /// still reads when the time runs out; the proposal stays queued). While it waits
    /// the hook also runs its host's due jobs ([`assent_confirm::Worker::run_once`]),
    /// so a call confirmed in another process (`assent confirm`, the review page) is
    /// applied here, exactly once, even when no worker runs beside the agent.
    pub fn wait(mut self, timeout: Duration) -> Self {
        self.wait = Some(timeout);
        self
    }

    /// The id of the change set that call `call_id` is (or would be) queued in, when
    /// the run is named ([`AssentHook::run_key`]).
    pub fn change_set_id(&self, call_id: &str) -> Option<Uuid> {
        let run = self.run_key.as_deref()?;
        Some(self.set_id(&call_run_key(run, call_id)))
    }

    /// Answers one call of run `run` (a run key): what the hook's `on_dispatch` does,
    /// for callers that drive rig's run loop themselves.
    pub async fn answer(
        &self,
        run: &str,
        call_id: &str,
        tool: &str,
        args: &str,
    ) -> Result<Answer, RigError> {
        let run_key = call_run_key(run, call_id);
        let set_id = self.set_id(&run_key);
        // Resumed after a restart: the call was queued before. Await or report it,
        // never propose it again.
        match self.engine.confirmations().outcome(set_id).await {
            Ok(outcome) => return self.settle(outcome, reply::QUEUED.to_owned()).await,
            Err(ConfirmError::ChangeSetNotFound(_)) => {}
            Err(error) => return Err(error.into()),
        }
        let call = ToolCall::new(
            call_id.to_owned(),
            tool.to_owned(),
            ToolArguments::Text(args.to_owned()),
        );
        let mut request =
            WakeRequest::new(&self.agent_id, self.target.clone(), run_key, vec![call]);
        request.change_set_id = Some(set_id);
        let wake = self
            .engine
            .wakes()
            .wake(request, OffsetDateTime::now_utc())
            .await?;
        let said = wake
            .responses
            .into_iter()
            .next()
            .map(|response| response.content)
            .unwrap_or_default();
        match wake.change_set {
            Some(set) if self.wait.is_some() => {
                let outcome = self.engine.confirmations().outcome(set.id).await?;
                self.settle(outcome, said).await
            }
            _ => Ok(Answer::said(said)),
        }
    }

    /// What the model reads about a queued set: `queued` unless the hook waits, else
    /// the decisions once the set settles (or `queued` when the time runs out).
    async fn settle(&self, outcome: SetOutcome, queued: String) -> Result<Answer, RigError> {
        let Some(timeout) = self.wait else {
            return Ok(replies::of_outcome(&outcome).unwrap_or(Answer::said(queued)));
        };
        let deadline = Instant::now() + timeout;
        let confirmations = self.engine.confirmations();
        let worker = self.engine.worker().expire_after(None);
        let mut outcome = outcome;
        loop {
            if outcome.settled {
                return Ok(replies::of_outcome(&outcome).unwrap_or(Answer::said(queued)));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Answer::said(queued));
            }
            // Apply what a person confirmed elsewhere: the host's jobs, claimed exactly
            // once whichever worker gets them.
            worker.run_once(OffsetDateTime::now_utc(), false).await?;
            outcome = confirmations
                .wait_outcome(outcome.change_set_id, left.min(DEFAULT_WORKER_POLL))
                .await?;
        }
    }

    /// A change-set id that is a function of the agent, the target and the call's run
    /// key, so that a resumed run finds the set its call was queued in.
    fn set_id(&self, run_key: &str) -> Uuid {
        let target = format!("{}:{}", self.target.kind, self.target.id);
        let key = OperationId::derive(
            run_key,
            "assent-rig/change-set",
            &json!({"agent": self.agent_id}),
            &[target],
        );
        // The operation id is 64 hex digits; its first 128 bits make a version-8 UUID.
        let bits = key
            .as_str()
            .get(..32)
            .and_then(|hex| u128::from_str_radix(hex, 16).ok())
            .unwrap_or_default();
        uuid::Builder::from_custom_bytes(bits.to_be_bytes()).into_uuid()
    }

    fn run_of(&self, ctx: &HookContext) -> String {
        self.run_key
            .clone()
            .unwrap_or_else(|| format!("rig-{}", ctx.run_id()))
    }
}

/// The run key of one call's wake.
fn call_run_key(run: &str, call_id: &str) -> String {
    format!("{run}/{call_id}")
}

/// Successful answers waiting for their `on_outcome`, by dispatch (run-scoped: kept in
/// the run's scratchpad).
#[derive(Debug, Clone, Default)]
struct Answered(HashMap<EffectId, String>);

impl AgentHook for AssentHook {
    fn name(&self) -> Option<String> {
        Some(format!(
            "assent({}, {}, {})",
            self.engine.host().name(),
            self.agent_id,
            self.target
        ))
    }

    async fn on_dispatch(&self, ctx: &HookContext, event: DispatchEvent<'_>) -> DispatchAction {
        // Not a tool call (a completion, memory, retrieval): not ours to gate.
        let (Some(tool), Some(args)) = (event.tool_name(), event.tool_args()) else {
            return DispatchAction::Proceed;
        };
        // A tool call the model did not make has no call id: it is gated all the same,
        // under the dispatch's own id.
        let call_id = event
            .call_id
            .map_or_else(|| format!("dispatch-{:?}", event.id), ToString::to_string);
        let run = self.run_of(ctx);
        match self.answer(&run, &call_id, tool, args).await {
            Ok(answer) => {
                if !answer.is_error {
                    let text = answer.text.clone();
                    ctx.scratchpad().update(|answered: &mut Answered| {
                        answered.0.insert(event.id, text);
                    });
                }
                DispatchAction::skip(answer.text)
            }
            Err(error) => {
                tracing::error!(%error, tool, "assent could not decide a tool call; stopping the run");
                DispatchAction::stop(format!("assent: {error}"))
            }
        }
    }

    async fn on_outcome(&self, ctx: &HookContext, event: OutcomeEvent<'_>) -> OutcomeAction {
        let answered = ctx
            .scratchpad()
            .update(|answered: &mut Answered| answered.0.remove(&event.id));
        match answered {
            Some(text) => OutcomeAction::replace(Ok(Outcome::ToolResult {
                result: ToolResult::success(ToolOutput::text(text)),
            })),
            None => OutcomeAction::Proceed,
        }
    }
}
