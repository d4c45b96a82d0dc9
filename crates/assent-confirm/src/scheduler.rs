//! The scheduler: where the confirmation strategy of a call is chosen.
//!
//! A wake runs as usual ([`crate::WakeService`]): every call that needs a person is
//! first written as a change-set item, so nothing is lost whatever happens next. Then,
//! for each item, the scheduler picks the strategy — a standing grant of the agent for
//! that tool and arguments: [`AutoApprove`]; otherwise by session: interactive
//! [`DeferToChangeSet`], sub-agent [`Delegated`] (ask the parent over the bus),
//! headless [`NonInteractive`] (refused) — and applies the outcome through the
//! [`crate::ConfirmationService`], so a delegated confirmation runs through the same
//! policy-enforcing, audited executor and writes the same decision as a person's, linked
//! to the asking agent path in the same transaction.
//!
//! An unanswered question (nobody listening, timeout, the parent leaving) and a
//! cancelled one leave the item pending for review with the reason recorded: nothing
//! runs, and no rejection the person never made enters the agent's history.

use crate::attribution::Attribution;
use crate::bus::{AgentBus, ConfirmationOutcome, ToolCallRequest};
use crate::strategy::{
    AutoApprove, ConfirmationDetails, ConfirmationStrategy, DeferToChangeSet, Delegated,
    NonInteractive,
};
use crate::{CancellationToken, ConfirmError, ConfirmOutcome, Engine, WakeOutcome, WakeRequest};
use assent_changeset::reply;
use assent_domain::{ChangeDecision, ChangeItemStatus, ChangeSet};
use assent_store::delegation::{self, Delegation, Grant};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// A confirmed call's own time limit, by default. The wait for the person is not part
/// of it.
pub const DEFAULT_EXECUTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How often one call is put to the parent: the first question and re-prompts after
/// edits that failed validation.
pub const MAX_PROMPTS_PER_CALL: usize = 3;

/// Who, if anyone, can answer this session's confirmations.
#[derive(Debug, Clone)]
pub enum Session {
    /// A person reviews change sets: calls wait in theirs.
    Interactive,
    /// A sub-agent: its parent's session is asked over this bus.
    Delegated(AgentBus),
    /// Nobody can be asked: calls that need a person are refused.
    Headless,
}

/// What became of one queued call.
#[derive(Debug)]
// One value per call, returned and matched at once, never stored in bulk: boxing the
// decision would only change the public shape.
#[allow(clippy::large_enum_variant)]
pub enum CallResult {
    /// Confirmed and run.
    Applied(Box<ConfirmOutcome>),
    /// Rejected; the decision is recorded.
    Rejected(ChangeDecision),
    /// Not decided (deferred, cancelled, unanswered): the item stays pending.
    Waiting {
        /// Why it was not decided, when there is more to say than the outcome.
        reason: Option<String>,
    },
    /// Could not be confirmed or run (headless session, policy denial, handler
    /// failure, execution timeout, edits that never validated): the item stays pending.
    Refused(ConfirmError),
}

/// One queued call after its strategy answered.
#[derive(Debug)]
pub struct ScheduledCall {
    /// The item.
    pub item_index: usize,
    /// The tool.
    pub tool_name: String,
    /// The strategy chosen.
    pub strategy: &'static str,
    /// The grant that answered instead of the parent, if any.
    pub grant_id: Option<Uuid>,
    /// The last outcome (`None` when the strategy refused to decide).
    pub outcome: Option<ConfirmationOutcome>,
    /// One fresh correlation id per prompt, in order.
    pub correlation_ids: Vec<String>,
    /// What happened.
    pub result: CallResult,
}

impl ScheduledCall {
    /// The text for the model about this call.
    pub fn reply(&self) -> String {
        match &self.result {
            CallResult::Applied(outcome) if self.grant_id.is_some() => {
                reply::granted_applied(&outcome.message())
            }
            CallResult::Applied(outcome) => reply::delegated_applied(&outcome.message()),
            CallResult::Rejected(decision) => reply::delegated_rejected(decision.reason.as_deref()),
            CallResult::Waiting { reason } => match (&self.outcome, reason) {
                (Some(ConfirmationOutcome::Deferred { .. }), _) => reply::QUEUED.to_owned(),
                (_, Some(reason)) => reply::delegated_not_run(reason),
                (_, None) => reply::delegated_not_run("the confirmation was cancelled"),
            },
            CallResult::Refused(error) => reply::delegated_not_run(&error.to_string()),
        }
    }
}

/// A wake and what became of each queued call.
#[derive(Debug)]
pub struct ScheduledWake {
    /// The wake itself (immediate replies, the change set).
    pub wake: WakeOutcome,
    /// One entry per pending item of the change set, in order.
    pub calls: Vec<ScheduledCall>,
}

/// Runs an agent's wakes and gets its queued calls confirmed the way its session allows.
#[derive(Clone)]
pub struct Scheduler {
    engine: Engine,
    session: Session,
    execution_timeout: Duration,
}

/// One step of a call's prompting loop.
enum Step {
    Done(Option<ConfirmationOutcome>, Box<CallResult>),
    AskAgain(ConfirmationOutcome, String),
}

impl Scheduler {
    /// A scheduler of `engine`'s wakes for `session`.
    pub fn new(engine: Engine, session: Session) -> Self {
        Self {
            engine,
            session,
            execution_timeout: DEFAULT_EXECUTION_TIMEOUT,
        }
    }

    /// Sets a confirmed call's own time limit (the wait for the person excluded).
    pub fn with_execution_timeout(mut self, limit: Duration) -> Self {
        self.execution_timeout = limit;
        self
    }

    /// Who the session's agent is: the bus path of a sub-agent (never what it claims),
    /// else the agent id.
    pub fn agent_path<'a>(&'a self, agent_id: &'a str) -> &'a str {
        match &self.session {
            Session::Delegated(bus) => bus.path(),
            Session::Interactive | Session::Headless => agent_id,
        }
    }

    fn session_strategy(&self) -> Box<dyn ConfirmationStrategy> {
        match &self.session {
            Session::Interactive => Box::new(DeferToChangeSet),
            Session::Delegated(bus) => Box::new(Delegated::new(bus.clone())),
            Session::Headless => Box::new(NonInteractive),
        }
    }

    /// Runs the wake, then confirms each queued call with the strategy chosen for it.
    #[tracing::instrument(skip_all, fields(agent = %request.agent_id, path = %self.agent_path(&request.agent_id)))]
    pub async fn wake(
        &self,
        request: WakeRequest,
        cancel: &CancellationToken,
        now: OffsetDateTime,
    ) -> Result<ScheduledWake, ConfirmError> {
        let wake = self.engine.wakes().wake(request, now).await?;
        // One set per target the wake's calls named (see `WakeService::wake`).
        let mut calls = Vec::new();
        for set in &wake.change_sets {
            calls.extend(self.confirm_pending(set, cancel, now).await?);
        }
        Ok(ScheduledWake { wake, calls })
    }

    /// Confirms every pending item of `set` in order, each with the strategy chosen
    /// for it (for a caller that announces the set before its questions are asked).
    pub async fn confirm_pending(
        &self,
        set: &ChangeSet,
        cancel: &CancellationToken,
        now: OffsetDateTime,
    ) -> Result<Vec<ScheduledCall>, ConfirmError> {
        let mut calls = Vec::new();
        for (index, item) in set.items.iter().enumerate() {
            if item.status == ChangeItemStatus::Pending {
                calls.push(self.confirm_item(set, index, cancel, now).await?);
            }
        }
        Ok(calls)
    }

    /// Confirms item `index` of `set` with the strategy chosen for it. `Err` only for
    /// storage failures; every other ending is a [`CallResult`].
    #[tracing::instrument(skip(self, set, cancel), fields(change_set = %set.id))]
    pub async fn confirm_item(
        &self,
        set: &ChangeSet,
        index: usize,
        cancel: &CancellationToken,
        now: OffsetDateTime,
    ) -> Result<ScheduledCall, ConfirmError> {
        let item = set.items.get(index).ok_or(ConfirmError::ItemNotFound {
            change_set_id: set.id,
            index,
            len: set.items.len(),
        })?;
        let agent_path = self.agent_path(&set.agent_id).to_owned();
        let call = ToolCallRequest {
            name: item.tool_name.clone(),
            args: item.args.clone(),
        };
        let grant = {
            let mut conn = self.engine.store().read_connection().await?;
            delegation::covering_grant(
                &mut conn,
                &set.agent_id,
                &agent_path,
                &call.name,
                &call.args,
            )
            .await?
        };
        let strategy: Box<dyn ConfirmationStrategy> = match &grant {
            Some(_) => Box::new(AutoApprove),
            None => self.session_strategy(),
        };
        // Who answers is recorded for delegated questions and grants; a person at the
        // review screen is already on record through the decision itself.
        let recorded = grant.is_some() || matches!(self.session, Session::Delegated(_));
        let grant_id = grant.as_ref().map(|g| g.id);
        let mut scheduled = ScheduledCall {
            item_index: index,
            tool_name: call.name.clone(),
            strategy: strategy.name(),
            grant_id,
            outcome: None,
            correlation_ids: Vec::new(),
            result: CallResult::Waiting { reason: None },
        };
        let mut note = None;
        for prompt in 1..=MAX_PROMPTS_PER_CALL {
            let correlation_id = self.engine.new_id().to_string();
            scheduled.correlation_ids.push(correlation_id.clone());
            let details = ConfirmationDetails {
                correlation_id: correlation_id.clone(),
                summary: item.human_summary.clone(),
                change_set_id: set.id,
                item_index: index,
                agent_id: set.agent_id.clone(),
                target_kind: set.target_kind.clone(),
                target_id: set.target_id.clone(),
                task_id: (set.target_kind == assent_domain::LEGACY_TARGET_KIND)
                    .then(|| set.target_id.clone()),
                note: note.take(),
            };
            let attribution = Attribution {
                agent_path: agent_path.clone(),
                correlation_id,
                outcome: "",
                grant_id,
            };
            let (asked, step) = ask_then_run(
                strategy.as_ref(),
                &call,
                &details,
                cancel,
                self.execution_timeout,
                |outcome| {
                    self.apply(
                        set,
                        index,
                        outcome,
                        attribution.clone(),
                        recorded,
                        prompt,
                        now,
                    )
                },
            )
            .await;
            match step {
                Ok(Step::Done(outcome, result)) => {
                    scheduled.outcome = outcome;
                    scheduled.result = *result;
                    break;
                }
                Ok(Step::AskAgain(outcome, problems)) => {
                    scheduled.outcome = Some(outcome);
                    note = Some(format!("The edited arguments were invalid: {problems}"));
                }
                Err(error @ ConfirmError::Store(_)) => return Err(error),
                Err(error) => {
                    // The answer came but running it failed before anything was
                    // recorded (the execution timeout): record why.
                    if let (true, Some(outcome)) = (recorded, &asked) {
                        let attribution = Attribution {
                            outcome: recorded_kind(grant_id, outcome),
                            ..attribution
                        };
                        let why = error.to_string();
                        match self
                            .record_undecided(set, index, &attribution, Some(&why), now)
                            .await
                        {
                            // The run committed its decision (and this record) just
                            // as the limit struck: the record already says what happened.
                            Err(conflict) if conflict.is_conflict() => {
                                tracing::warn!(%conflict, "timed-out run had already committed");
                            }
                            other => other?,
                        }
                    }
                    scheduled.outcome = asked;
                    scheduled.result = CallResult::Refused(error);
                    break;
                }
            }
        }
        tracing::info!(
            strategy = scheduled.strategy,
            outcome = scheduled
                .outcome
                .as_ref()
                .map_or("none", ConfirmationOutcome::kind),
            "delegated call settled"
        );
        Ok(scheduled)
    }

    /// Applies one outcome to the item. A decision answering a recorded question is
    /// linked to it in the decision's own transaction; an outcome that decides nothing
    /// is recorded on its own.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        set: &ChangeSet,
        index: usize,
        outcome: ConfirmationOutcome,
        mut attribution: Attribution,
        recorded: bool,
        prompt: usize,
        now: OffsetDateTime,
    ) -> Result<Step, ConfirmError> {
        attribution.outcome = recorded_kind(attribution.grant_id, &outcome);
        // Who answered: the session the question went to (the parent of the agent
        // path), named so that the decision says who consented (`audit verify`).
        let session = attribution
            .agent_path
            .split('/')
            .next()
            .unwrap_or(&attribution.agent_path);
        let service = self.engine.confirmations().by(format!("session:{session}"));
        let service = if recorded {
            service.attributed(attribution.clone())
        } else {
            service
        };
        let applied = |result: Result<ConfirmOutcome, ConfirmError>| match result {
            Ok(done) => Ok(CallResult::Applied(Box::new(done))),
            Err(error @ ConfirmError::Store(_)) => Err(error),
            Err(error) => Ok(CallResult::Refused(error)),
        };
        let result = match &outcome {
            ConfirmationOutcome::ProceedOnce => applied(
                service
                    .confirm_item(assent_domain::ItemRef::new(set.id, index), now)
                    .await,
            )?,
            ConfirmationOutcome::ProceedAlways { args_pattern } => {
                let result = applied(
                    service
                        .confirm_item(assent_domain::ItemRef::new(set.id, index), now)
                        .await,
                )?;
                if matches!(result, CallResult::Applied(_)) {
                    self.store_grant(set, index, &attribution, args_pattern.clone(), now)
                        .await?;
                }
                result
            }
            ConfirmationOutcome::ProceedWithEdits { args } => {
                match service
                    .edit_and_confirm(
                        assent_domain::ItemRef::new(set.id, index),
                        args.clone(),
                        now,
                    )
                    .await
                {
                    Err(ConfirmError::InvalidArgs { problems, .. })
                        if prompt < MAX_PROMPTS_PER_CALL =>
                    {
                        let problems = assent_tools::ArgProblem::join(&problems);
                        if recorded {
                            self.record_undecided(set, index, &attribution, Some(&problems), now)
                                .await?;
                        }
                        return Ok(Step::AskAgain(outcome, problems));
                    }
                    result => applied(result)?,
                }
            }
            ConfirmationOutcome::Reject { reason } => {
                match service
                    .reject_item(
                        assent_domain::ItemRef::new(set.id, index),
                        reason.clone(),
                        now,
                    )
                    .await
                {
                    Ok(decision) => CallResult::Rejected(decision),
                    Err(error @ ConfirmError::Store(_)) => return Err(error),
                    Err(error) => CallResult::Refused(error),
                }
            }
            ConfirmationOutcome::Deferred { .. } | ConfirmationOutcome::Cancelled => {
                CallResult::Waiting { reason: None }
            }
            ConfirmationOutcome::Unanswered { reason } => CallResult::Waiting {
                reason: Some(reason.clone()),
            },
        };
        if recorded {
            let undecided_reason = match &result {
                CallResult::Applied(_) | CallResult::Rejected(_) => None,
                CallResult::Waiting { reason } => Some(reason.clone()),
                CallResult::Refused(error) => Some(Some(error.to_string())),
            };
            if let Some(reason) = undecided_reason {
                self.record_undecided(set, index, &attribution, reason.as_deref(), now)
                    .await?;
            }
        }
        Ok(Step::Done(Some(outcome), Box::new(result)))
    }

    async fn store_grant(
        &self,
        set: &ChangeSet,
        index: usize,
        attribution: &Attribution,
        args_pattern: Option<Value>,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let grant = Grant {
            id: self.engine.new_id(),
            agent_id: Some(set.agent_id.clone()),
            agent_path: attribution.agent_path.clone(),
            tool_name: set.items[index].tool_name.clone(),
            args_pattern,
            correlation_id: attribution.correlation_id.clone(),
            created_at: now,
            revoked_at: None,
            session_id: None,
            call_pattern: None,
        };
        let mut tx = self.engine.store().begin_write().await?;
        delegation::insert_grant(tx.connection(), &grant, now).await?;
        tx.commit().await?;
        tracing::info!(grant = %grant.id, "standing grant stored");
        Ok(())
    }

    async fn record_undecided(
        &self,
        set: &ChangeSet,
        index: usize,
        attribution: &Attribution,
        reason: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store().begin_write().await?;
        let record = attribution.record(set.id, index, &set.items[index].tool_name, now);
        delegation::record(
            tx.connection(),
            &Delegation {
                reason: reason.map(str::to_owned),
                ..record
            },
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The outcome as recorded: a grant's answer is `granted`, whatever the strategy said.
fn recorded_kind(grant_id: Option<Uuid>, outcome: &ConfirmationOutcome) -> &'static str {
    if grant_id.is_some() {
        "granted"
    } else {
        outcome.kind()
    }
}

/// Asks `strategy`, then runs what follows from the answer within `limit`. The limit's
/// clock starts when the answer arrives: the time a person takes to decide is not the
/// tool's execution time. Returns the answer (when there was one) beside the result.
async fn ask_then_run<T, Run, Fut>(
    strategy: &dyn ConfirmationStrategy,
    call: &ToolCallRequest,
    details: &ConfirmationDetails,
    cancel: &CancellationToken,
    limit: Duration,
    run: Run,
) -> (Option<ConfirmationOutcome>, Result<T, ConfirmError>)
where
    Run: FnOnce(ConfirmationOutcome) -> Fut,
    Fut: Future<Output = Result<T, ConfirmError>>,
{
    let outcome = if cancel.is_cancelled() {
        // Cancelled before asking: no strategy decides, not even a grant.
        ConfirmationOutcome::Cancelled
    } else {
        match strategy.confirm(call, details, cancel).await {
            Ok(outcome) => outcome,
            Err(error) => return (None, Err(error)),
        }
    };
    let result = tokio::time::timeout(limit, run(outcome.clone()))
        .await
        .unwrap_or_else(|_| {
            tracing::warn!(tool = %call.name, ?limit, "confirmed call ran out of time; rolled back");
            Err(ConfirmError::ExecutionTimedOut {
                tool: call.name.clone(),
                seconds: limit.as_secs(),
            })
        });
    (Some(outcome), result)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::ConfirmationBus;
    use crate::bus::BusConfig;
    use serde_json::json;
    use tokio::time::{Instant, sleep};

    /// A parent who takes 100 s to decide, then a run of `run_for` under a 10 s
    /// execution limit. Returns the total time and the run's result.
    async fn slow_parent_then_run(run_for: Duration) -> (Duration, Result<(), ConfirmError>) {
        let bus = ConfirmationBus::new(
            "lead",
            BusConfig {
                wait_timeout: Duration::from_secs(600),
            },
        )
        .unwrap();
        let strategy = Delegated::new(bus.derive("researcher").unwrap());
        let mut parent = bus.subscribe();
        tokio::spawn(async move {
            let request = parent.recv().await.unwrap();
            sleep(Duration::from_secs(100)).await;
            bus.respond(
                request.correlation_id.as_deref().unwrap(),
                ConfirmationOutcome::ProceedOnce,
            )
            .unwrap();
            // Stay subscribed until the run is over.
            parent.recv().await
        });
        let details = crate::strategy::tests::details();
        let call = ToolCallRequest {
            name: "update_task_priority".into(),
            args: json!({"priority": "P0"}),
        };
        let started = Instant::now();
        let (asked, result) = ask_then_run(
            &strategy,
            &call,
            &details,
            &CancellationToken::new(),
            Duration::from_secs(10),
            |outcome| async move {
                assert_eq!(outcome, ConfirmationOutcome::ProceedOnce);
                sleep(run_for).await;
                Ok(())
            },
        )
        .await;
        assert_eq!(asked, Some(ConfirmationOutcome::ProceedOnce));
        (started.elapsed(), result)
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_the_person_does_not_count_against_the_execution_timeout() {
        let (elapsed, result) = slow_parent_then_run(Duration::from_secs(5)).await;
        assert_eq!(elapsed, Duration::from_secs(105));
        result.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_execution_timeout_still_bounds_the_run_itself() {
        let (elapsed, result) = slow_parent_then_run(Duration::from_secs(15)).await;
        assert_eq!(elapsed, Duration::from_secs(110));
        assert!(
            matches!(result, Err(ConfirmError::ExecutionTimedOut { ref tool, seconds: 10 }) if tool == "update_task_priority"),
            "{result:?}"
        );
    }
}
