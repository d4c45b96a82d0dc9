//! Routing the tool calls of one wake (ADR 0006, ADR 0009), as a pure function of the
//! calls and the state handed in.

use crate::{AddOutcome, ChangeSetBuilder, ToolArguments, ToolCall, reply};
use assent_domain::{
    ChangeDecision, ChangeItem, OffsetDateTime, Target, Uuid, Verdict, canonical_json,
};
use assent_tools::{
    AgentPolicy, CallContext, PastRun, PolicyDecision, Redundancy, SummaryContext, TargetCategory,
    TargetState, ToolMode, ToolRegistry, ToolSpec, ToolsError,
};
use serde_json::Value;
use time::Duration;

/// Tunables of the planner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannerConfig {
    /// A proposal identical to one the user rejected within this window is skipped.
    pub rejection_window: Duration,
    /// Arguments larger than this (as JSON text) are refused before parsing.
    pub max_args_bytes: usize,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            rejection_window: Duration::days(7),
            max_args_bytes: 64 * 1024,
        }
    }
}

/// What the host does with one call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallPlan {
    /// Nothing to run: hand this text back to the model (queued, skipped, refused or an
    /// error).
    Reply(String),
    /// Run now through the audited executor, one invocation per element for exploded
    /// batches; the executor's outcome is the reply.
    Execute {
        /// `(tool name, validated args)`, in order.
        invocations: Vec<(String, Value)>,
        /// Batch elements that failed the singular tool's schema and will not run.
        malformed: usize,
    },
    /// The agent's own output (report, observations): the host handles it.
    HandleLocally {
        /// Validated args.
        args: Value,
    },
}

/// One call of the wake and what to do with it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    /// The model's id for the call.
    pub tool_call_id: String,
    /// The tool it named.
    pub tool_name: String,
    /// What to do.
    pub plan: CallPlan,
    /// The proposals of the call refused because a person rejected exactly them before
    /// (a batch call may hold several): the host records each refusal, so it shows in
    /// the trail and to reviewers, never only to the agent.
    pub refused_again: Vec<RefusedAgain>,
    /// When the policy refused the call (a rule, the category): what decided so, for
    /// the host to record the refusal (`policyDenied`, with `decidedBy`). `None` for
    /// every other plan.
    pub policy_denied: Option<PolicyDenied>,
}

/// A call the policy refused: its arguments as read, and what decided so (the
/// record's `decidedBy`: the rule with where it came from, the tool's mode, or
/// `{"category": REASON}`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PolicyDenied {
    /// The call's arguments.
    pub args: Value,
    /// What decided the refusal.
    pub decided_by: Value,
}

/// A proposal refused without asking anyone: a person rejected exactly it before, and
/// that rejection is still remembered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RefusedAgain {
    /// The remembered rejection.
    pub decision_id: Uuid,
    /// The tool of the refused proposal.
    pub tool_name: String,
    /// Its arguments.
    pub args: Value,
    /// What the agent is told.
    pub reply: String,
}

/// Plans a wake's calls against a registry, a policy and the task's current state.
#[derive(Debug, Clone)]
pub struct WakePlanner<'a> {
    registry: &'a ToolRegistry,
    policy: &'a AgentPolicy,
    category: TargetCategory,
    snapshot: Option<&'a dyn TargetState>,
    decisions: &'a [ChangeDecision],
    now: OffsetDateTime,
    config: PlannerConfig,
    runs: &'a [PastRun],
}

/// Tallies of a batch call, turned into its reply.
#[derive(Default)]
struct BatchTally {
    queued: usize,
    malformed: usize,
    redundant: Vec<String>,
    invented: Vec<String>,
    duplicates: usize,
    rejected: Vec<Option<String>>,
    refused_by_cap: usize,
}

impl BatchTally {
    fn reply(&self, cap: usize) -> String {
        let mut lines = vec![reply::batch_queued(self.queued)];
        if self.malformed > 0 {
            lines.push(reply::malformed_skipped(self.malformed));
        }
        if !self.redundant.is_empty() {
            lines.push(reply::redundant_skipped(&self.redundant));
        }
        if !self.invented.is_empty() {
            lines.push(reply::invented_ids(&self.invented));
        }
        if self.duplicates > 0 {
            lines.push(reply::duplicates_skipped(self.duplicates));
        }
        if !self.rejected.is_empty() {
            lines.push(reply::rejected_skipped(&self.rejected));
        }
        if self.refused_by_cap > 0 {
            lines.push(reply::cap_reached(cap, self.refused_by_cap));
        }
        lines.join("\n")
    }
}

/// Why one proposal was not queued.
enum NotQueued {
    AlreadyTrue(String),
    Invented(String),
    RecentlyRejected(Box<RefusedAgain>, Option<String>),
    Duplicate,
    CapReached,
}

impl<'a> WakePlanner<'a> {
    /// A planner with no snapshot (every proposal kept), no decision history and the
    /// default configuration.
    pub fn new(
        registry: &'a ToolRegistry,
        policy: &'a AgentPolicy,
        category: TargetCategory,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            registry,
            policy,
            category,
            snapshot: None,
            decisions: &[],
            now,
            config: PlannerConfig::default(),
            runs: &[],
        }
    }

    /// The same planner, judging the rules' conditions over the history
    /// ([`AgentPolicy::given`]) on `runs`, what the agent (and session) ran before,
    /// and on the calls of this wake planned to run before each call.
    #[must_use]
    pub fn with_runs(mut self, runs: &'a [PastRun]) -> Self {
        self.runs = runs;
        self
    }

    /// The same planner, comparing proposals with `snapshot` (`None`: it is missing or
    /// failed to load, so every proposal is kept).
    #[must_use]
    pub fn with_snapshot(mut self, snapshot: Option<&'a dyn TargetState>) -> Self {
        self.snapshot = snapshot;
        self
    }

    /// The same planner, skipping proposals the user rejected recently.
    #[must_use]
    pub fn with_decisions(mut self, decisions: &'a [ChangeDecision]) -> Self {
        self.decisions = decisions;
        self
    }

    /// The same planner with other tunables.
    #[must_use]
    pub fn with_config(mut self, config: PlannerConfig) -> Self {
        self.config = config;
        self
    }

    /// Plans every call, in order; deferred proposals go into `builder`. Exactly one
    /// [`PlannedCall`] per call.
    pub fn plan(&self, calls: &[ToolCall], builder: &mut ChangeSetBuilder) -> Vec<PlannedCall> {
        // What ran before each call: the history handed in, then this wake's calls
        // planned to run, in order (only read when a rule has a condition).
        let conditional = self.policy.has_conditions();
        let mut ran: Vec<PastRun> = if conditional {
            self.runs.to_vec()
        } else {
            Vec::new()
        };
        calls
            .iter()
            .map(|call| {
                let mut refused_again = Vec::new();
                let mut policy_denied = None;
                let plan =
                    self.plan_one(call, builder, &mut refused_again, &mut policy_denied, &ran);
                if conditional && let CallPlan::Execute { invocations, .. } = &plan {
                    ran.extend(invocations.iter().map(|(tool_name, args)| PastRun {
                        tool_name: tool_name.clone(),
                        args: args.clone(),
                        target_id: builder.target().id.clone(),
                        at: self.now,
                        succeeded: None,
                        here: true,
                    }));
                }
                PlannedCall {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    plan,
                    refused_again,
                    policy_denied,
                }
            })
            .collect()
    }

    fn plan_one(
        &self,
        call: &ToolCall,
        builder: &mut ChangeSetBuilder,
        refused_again: &mut Vec<RefusedAgain>,
        policy_denied: &mut Option<PolicyDenied>,
        ran: &[PastRun],
    ) -> CallPlan {
        let Some(spec) = self.registry.get(&call.name) else {
            return CallPlan::Reply(reply::unknown_tool(&call.name));
        };
        let args = match self.parse_args(&call.arguments) {
            Ok(args) => args,
            Err(problem) => return CallPlan::Reply(reply::invalid_args(&spec.name, &problem)),
        };
        if let Err(e) = self.registry.validate_args(&spec.name, &args) {
            return CallPlan::Reply(reply::invalid_args(&spec.name, &problems(&e)));
        }
        if spec.mode == ToolMode::Local {
            return CallPlan::HandleLocally { args };
        }
        let call = CallContext {
            args: &args,
            target_id: &builder.target().id,
            paths: self.snapshot.and_then(|state| state.paths()),
        };
        let given;
        let policy = if self.policy.has_conditions() {
            given = self.policy.given(ran, Some(call), self.now);
            &given
        } else {
            self.policy
        };
        match policy.decide_call(spec, Some(call), &self.category) {
            PolicyDecision::Deny { reason } => {
                // A category refusal names no rule: nothing to quote.
                let (ruling, decided_by) = match &reason {
                    assent_tools::Denial::Category(why) => {
                        (None, serde_json::json!({ "category": why }))
                    }
                    _ => (
                        self.policy.ruling(&spec.name, Some(call)),
                        policy.decided_by_call(spec, Some(call)),
                    ),
                };
                *policy_denied = Some(PolicyDenied {
                    args: args.clone(),
                    decided_by,
                });
                CallPlan::Reply(reply::denied_by_rule(&reason, ruling.as_ref()))
            }
            PolicyDecision::Allow => {
                let (invocations, malformed) = self.explode(spec, &args);
                CallPlan::Execute {
                    invocations,
                    malformed,
                }
            }
            PolicyDecision::Ask => CallPlan::Reply(match &spec.batch {
                None => match self.queue(builder, &spec.name, args) {
                    Ok(()) => reply::QUEUED.to_owned(),
                    Err(NotQueued::AlreadyTrue(detail)) => reply::skipped(&detail),
                    Err(NotQueued::Invented(id)) => reply::invented_ids(&[id]),
                    Err(NotQueued::RecentlyRejected(refused, reason)) => {
                        let said = reply::recently_rejected(reason.as_deref());
                        refused_again.push(RefusedAgain {
                            reply: said.clone(),
                            ..*refused
                        });
                        said
                    }
                    Err(NotQueued::Duplicate) => reply::DUPLICATE.to_owned(),
                    Err(NotQueued::CapReached) => reply::cap_reached(builder.max_items(), 1),
                },
                Some(_) => {
                    let (elements, malformed) = self.explode(spec, &args);
                    let mut tally = BatchTally {
                        malformed,
                        ..BatchTally::default()
                    };
                    for (tool_name, element) in elements {
                        match self.queue(builder, &tool_name, element) {
                            Ok(()) => tally.queued += 1,
                            Err(NotQueued::AlreadyTrue(detail)) => tally.redundant.push(detail),
                            Err(NotQueued::Invented(id)) => tally.invented.push(id),
                            Err(NotQueued::RecentlyRejected(refused, reason)) => {
                                refused_again.push(RefusedAgain {
                                    reply: reply::recently_rejected(reason.as_deref()),
                                    ..*refused
                                });
                                tally.rejected.push(reason);
                            }
                            Err(NotQueued::Duplicate) => tally.duplicates += 1,
                            Err(NotQueued::CapReached) => tally.refused_by_cap += 1,
                        }
                    }
                    tally.reply(builder.max_items())
                }
            }),
        }
    }

    fn parse_args(&self, arguments: &ToolArguments) -> Result<Value, String> {
        let limit = self.config.max_args_bytes;
        let value = match arguments {
            ToolArguments::Text(text) => {
                if text.len() > limit {
                    return Err(format!(
                        "arguments are {} bytes; the limit is {limit}",
                        text.len()
                    ));
                }
                if text.trim().is_empty() {
                    Value::Object(serde_json::Map::new())
                } else {
                    serde_json::from_str(text)
                        .map_err(|e| format!("arguments are not valid JSON ({e})"))?
                }
            }
            ToolArguments::Value(value) => {
                let size = canonical_json(value).len();
                if size > limit {
                    return Err(format!("arguments are {size} bytes; the limit is {limit}"));
                }
                value.clone()
            }
        };
        if value.is_object() {
            Ok(value)
        } else {
            Err("arguments must be a JSON object".to_owned())
        }
    }

    /// Splits a validated batch call into `(singular tool, element args)` pairs that
    /// pass the singular tool's schema, counting the elements that do not.
    fn explode(&self, spec: &ToolSpec, args: &Value) -> (Vec<(String, Value)>, usize) {
        let Some(batch) = &spec.batch else {
            return (vec![(spec.name.clone(), args.clone())], 0);
        };
        let elements = args.get(&batch.array_key).and_then(Value::as_array);
        let mut valid = Vec::new();
        let mut malformed = 0;
        for element in elements.into_iter().flatten() {
            let element_args = match (element, &batch.element_key) {
                (Value::Object(_), _) => Some(element.clone()),
                (scalar, Some(key)) => Some(serde_json::json!({ key.as_str(): scalar })),
                (_, None) => None,
            };
            match element_args {
                Some(a)
                    if self
                        .registry
                        .validate_args(&batch.singular_tool, &a)
                        .is_ok() =>
                {
                    valid.push((batch.singular_tool.clone(), a));
                }
                _ => malformed += 1,
            }
        }
        (valid, malformed)
    }

    fn queue(
        &self,
        builder: &mut ChangeSetBuilder,
        tool_name: &str,
        args: Value,
    ) -> Result<(), NotQueued> {
        let verdict = self
            .snapshot
            .map_or(Redundancy::Keep, |state| state.redundancy(tool_name, &args));
        match verdict {
            Redundancy::Keep => {}
            Redundancy::AlreadyTrue(detail) => return Err(NotQueued::AlreadyTrue(detail)),
            Redundancy::InventedId(id) => return Err(NotQueued::Invented(id)),
        }
        if let Some(rejection) = self.recent_rejection(builder.target(), tool_name, &args) {
            let refused = RefusedAgain {
                decision_id: rejection.id,
                tool_name: tool_name.to_owned(),
                args,
                reply: String::new(),
            };
            return Err(NotQueued::RecentlyRejected(
                Box::new(refused),
                rejection.reason.clone(),
            ));
        }
        let context = self.snapshot.map(|s| s as &dyn SummaryContext);
        let summary = self.registry.summarize(tool_name, &args, context);
        let before = self.snapshot.and_then(|s| s.before(tool_name, &args));
        let fingerprint = self.snapshot.and_then(|s| s.fingerprint(tool_name, &args));
        let item = ChangeItem::new(tool_name, args, summary)
            .with_before(before)
            .with_fingerprint(fingerprint);
        match builder.add(item) {
            AddOutcome::Added => Ok(()),
            AddOutcome::Duplicate => Err(NotQueued::Duplicate),
            AddOutcome::CapReached => Err(NotQueued::CapReached),
        }
    }

    /// The newest rejection of exactly this proposal on this target within the window.
    fn recent_rejection(
        &self,
        target: &Target,
        tool_name: &str,
        args: &Value,
    ) -> Option<&'a ChangeDecision> {
        let canonical = canonical_json(args);
        let since = self.now - self.config.rejection_window;
        self.decisions
            .iter()
            .filter(|d| {
                d.verdict == Verdict::Rejected
                    && d.target_id == target.id
                    && d.target_kind == target.kind
                    && d.tool_name == tool_name
                    && d.created_at >= since
                    && canonical_json(&d.args) == canonical
            })
            .max_by_key(|d| d.created_at)
    }
}

fn problems(error: &ToolsError) -> String {
    match error {
        ToolsError::InvalidArgs { problems, .. } => assent_tools::ArgProblem::join(problems),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
