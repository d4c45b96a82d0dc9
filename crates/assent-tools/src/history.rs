//! What a person's past decisions say about a rule (issue 29): grant suggestions from
//! calls confirmed unchanged, a backtest of a rule against the calls it would have
//! decided, and a shadow rule's agreement with the people who did decide. Pure: the store loads the [`PastCall`]s, `now` is an argument, and the same
//! input gives the same output in the same order.

use crate::policy::{AgentPolicy, RuleAction, ToolRule};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use time::{Duration, OffsetDateTime};

/// How a person decided one past call of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PastOutcome {
    /// Confirmed with the agent's own arguments.
    ConfirmedUnchanged,
    /// Confirmed after a person changed the arguments.
    Edited,
    /// Rejected.
    Rejected,
}

impl PastOutcome {
    /// The outcome of a final decision `verdict` (edited when it changed the
    /// arguments); `None` for a verdict no person's outcome is (deferred, retracted).
    pub fn of(verdict: assent_domain::Verdict, edited: bool) -> Option<Self> {
        use assent_domain::Verdict;
        match (verdict, edited) {
            (Verdict::Rejected, _) => Some(Self::Rejected),
            (Verdict::Confirmed, true) => Some(Self::Edited),
            (Verdict::Confirmed, false) => Some(Self::ConfirmedUnchanged),
            // Deferred, retracted, or a verdict this build does not know: no
            // person's final outcome to count as evidence.
            _ => None,
        }
    }
}

/// One decided call of an agent, as the history holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastCall {
    /// The decision's id.
    pub decision_id: String,
    /// The set of the item decided.
    pub change_set_id: String,
    /// The item's index in its set.
    pub item_index: usize,
    /// The agent that proposed the call.
    pub agent_id: String,
    /// The tool it called.
    pub tool_name: String,
    /// How a person decided it.
    pub outcome: PastOutcome,
    /// Whether a confirmed undo reversed it after it ran.
    pub undone: bool,
    /// The person's reason, when they gave one.
    pub reason: Option<String>,
    /// Who (or, while decisions carry no person, where) decided it; `None` when not
    /// known.
    pub reviewer: Option<String>,
    /// When it was decided.
    pub at: OffsetDateTime,
    /// Whether no person decided it: a standing grant (an "always" answer) approved
    /// it. Grant suggestions report such calls beside a person's decisions and never
    /// count them as one (issue 37).
    pub automatic: bool,
    /// The definition of the call's tool in force now, when its host recorded one.
    pub definition: Option<ToolDefinition>,
    /// The arguments the agent proposed (`null` when not known): for a tool whose
    /// calls hold a command or a path, a suggestion is an argument pattern they
    /// support, never the bare tool.
    pub args: serde_json::Value,
    /// The id of the call's target (for a coding agent, its workspace).
    pub target_id: String,
}

/// The definition of a host's tool in force now, as the host's catalog records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDefinition {
    /// Since when the host lists this definition: decisions made before it were
    /// about another one.
    pub since: OffsetDateTime,
    /// Whether a person accepted it (false: it changed since, `agent show` marks it
    /// CHANGED and every call of it is asked about).
    pub accepted: bool,
}

impl PastCall {
    /// Whether the decision was made about the tool's definition in force now (or its
    /// host records no definition).
    fn of_current_definition(&self) -> bool {
        self.definition.is_none_or(|d| self.at >= d.since)
    }
}

/// The stable id of the suggestion to allow `tool` for `agent`: the same pair gives the
/// same id in every run and on every device (FNV-1a, 64 bits, as hex after `sg_`).
pub fn suggestion_id(agent: &str, tool: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in agent.bytes().chain([0]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("sg_{hash:016x}")
}

/// The knobs of [`suggest_grants`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuggestOptions {
    /// How many unchanged confirmations a tool needs at least.
    pub min_confirmed: u32,
    /// How long a suggested rule lasts once applied.
    pub expiry: Duration,
    /// The time the suggestion is made at (its expiry counts from here).
    pub now: OffsetDateTime,
}

/// What the history says about one agent's calls of one tool. Only decisions a person
/// made about the tool's current definition are counted as theirs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantEvidence {
    /// Calls a person confirmed with the agent's own arguments.
    pub confirmed_unchanged: u32,
    /// Calls confirmed after a person changed the arguments.
    pub edited: u32,
    /// Calls rejected.
    pub rejected: u32,
    /// Confirmed calls a person undid afterwards.
    pub undone: u32,
    /// Distinct known deciders among these calls.
    pub reviewers: u32,
    /// Calls of the current definition no person decided (a standing grant approved
    /// them): reported, never counted as confirmations.
    pub automatic: u32,
    /// Decisions about an earlier definition of the tool (its host redefined it
    /// since): not counted at all.
    pub before_definition: u32,
    /// The first decision.
    #[serde(with = "time::serde::rfc3339")]
    pub first_at: OffsetDateTime,
    /// The last decision.
    #[serde(with = "time::serde::rfc3339")]
    pub last_at: OffsetDateTime,
}

/// A rule the history suggests, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantSuggestion {
    /// [`suggestion_id`] of the agent and tool.
    pub id: String,
    /// The agent.
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// The rule's pattern when it is not the bare tool: for a tool whose calls hold a
    /// command or a path, the argument pattern every counted call fits
    /// (`Bash(git status:*)`); absent for the tool's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The rule proposed: `allow`.
    pub rule: &'static str,
    /// When the rule would expire if applied now.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// What is in force for the tool now, which the rule would replace (`null` when
    /// nothing is: the tool's mode decides).
    pub replaces: Option<InForce>,
    /// Why applying it is refused, when it is: it would weaken a deny, quorum or hold
    /// in force, change nothing, or accept a changed definition.
    pub refused: Option<String>,
    /// Why.
    pub evidence: GrantEvidence,
}

/// What is in force for one agent's tool: what an `allow` suggestion would replace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InForce {
    /// The action of the rules that decide the tool (deny over ask over allow), when a
    /// rule does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// The pattern of the first rule with that action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// How many distinct people must confirm a call (a quorum, above 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<u32>,
    /// The hold window a confirmed call waits out, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u32>,
    /// Whether the tool's definition changed since a person accepted it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub definition_changed: bool,
}

impl InForce {
    /// What `policy` (the rules in force) and the tool's settings (its quorum
    /// `approvals_needed`, its `hold` in seconds) say about `tool`.
    pub fn of(policy: &AgentPolicy, tool: &str, approvals_needed: u32, hold: Option<u32>) -> Self {
        // `audit` kept apart from `allow`: an allow suggestion would weaken it.
        let action = policy.ruled_call_audited(tool, None);
        // Among the rules that decide, one of another pattern first: an allow of the
        // tool alone would replace only its own rule, and leave that one deciding.
        let pattern = action.and_then(|action| {
            let deciding = || {
                policy
                    .rules()
                    .iter()
                    .filter(move |r| r.action() == action && r.matches(tool))
            };
            deciding()
                .find(|r| r.pattern() != tool)
                .or_else(|| deciding().next())
                .map(|r| r.pattern().to_owned())
        });
        Self {
            rule: action.map(RuleAction::as_str),
            pattern,
            approvals: (approvals_needed > 1).then_some(approvals_needed),
            hold_seconds: hold.filter(|s| *s > 0),
            definition_changed: false,
        }
    }

    fn is_nothing(&self) -> bool {
        *self == Self::default()
    }

    /// Why an `allow` of exactly `tool` may not replace this, or `None` when it may:
    /// a suggestion never weakens a deny, a quorum or a hold, never accepts a changed
    /// definition (a person allows that explicitly), and is not applied when a rule
    /// of another pattern would still decide the tool.
    pub fn refusal(&self, agent: &str, tool: &str) -> Option<String> {
        self.refusal_of(agent, tool, None)
    }

    /// [`InForce::refusal`] of an `allow` of `rule_pattern` (an argument pattern of
    /// `tool`) when given: an ask rule of the tool, whatever its pattern, would still
    /// decide its calls, so it is refused too.
    pub fn refusal_of(
        &self,
        agent: &str,
        tool: &str,
        rule_pattern: Option<&str>,
    ) -> Option<String> {
        if let Some(rule_pattern) = rule_pattern
            && self.rule == Some(RuleAction::Ask.as_str())
            && self.approvals.is_none()
            && self.hold_seconds.is_none()
            && !self.definition_changed
        {
            let pattern = self.pattern.as_deref().unwrap_or(tool);
            return Some(format!(
                "agent {agent}'s ask rule for {pattern} would still decide {tool} (deny over ask over allow): an allow of {rule_pattern} changes nothing"
            ));
        }
        let pattern = self.pattern.as_deref().unwrap_or(tool);
        if self.rule == Some(RuleAction::Deny.as_str()) {
            return Some(format!(
                "agent {agent} has a deny rule for {pattern} in force; a suggestion never weakens it"
            ));
        }
        if self.rule == Some(RuleAction::Audit.as_str()) {
            return Some(format!(
                "agent {agent} has an audit rule for {pattern} in force; a suggestion never weakens it (an allow would stop marking its calls for the audit digest)"
            ));
        }
        if let Some(needed) = self.approvals {
            return Some(format!(
                "{tool} of agent {agent} needs {needed} approvals; a suggestion never weakens a quorum (change it with `assent agent ask {agent} {tool} --approvals N` first)"
            ));
        }
        if let Some(seconds) = self.hold_seconds {
            return Some(format!(
                "{tool} of agent {agent} is held {seconds} s after a confirmation; a suggestion never weakens a hold (remove it with `assent agent hold {agent} {tool} 0` first)"
            ));
        }
        if self.definition_changed {
            return Some(format!(
                "the definition of {tool} changed since a person accepted it; a suggestion never accepts it (review it with `assent agent show {agent}`, then `assent agent allow {agent} {tool}`)"
            ));
        }
        if self.rule == Some(RuleAction::Ask.as_str()) && pattern != tool {
            return Some(format!(
                "agent {agent}'s ask rule for {pattern} would still decide {tool} (deny over ask over allow): an allow of {tool} alone changes nothing"
            ));
        }
        None
    }
}

/// The evidence of every (agent, tool) pair in `calls`, by agent then tool: a call
/// about an earlier definition of its tool counts only as `before_definition`, an
/// automatic one as `automatic` (and its undo, a person's word, as `undone`).
fn evidence(calls: &[PastCall]) -> BTreeMap<(&str, &str), GrantEvidence> {
    let mut by_pair: BTreeMap<(&str, &str), (GrantEvidence, BTreeSet<&str>)> = BTreeMap::new();
    for call in calls {
        let (evidence, reviewers) = by_pair
            .entry((call.agent_id.as_str(), call.tool_name.as_str()))
            .or_insert_with(|| {
                let evidence = GrantEvidence {
                    confirmed_unchanged: 0,
                    edited: 0,
                    rejected: 0,
                    undone: 0,
                    reviewers: 0,
                    automatic: 0,
                    before_definition: 0,
                    first_at: call.at,
                    last_at: call.at,
                };
                (evidence, BTreeSet::new())
            });
        if !call.of_current_definition() {
            evidence.before_definition += 1;
            continue;
        }
        evidence.undone += u32::from(call.undone);
        if call.automatic {
            evidence.automatic += 1;
            continue;
        }
        match call.outcome {
            PastOutcome::ConfirmedUnchanged => evidence.confirmed_unchanged += 1,
            PastOutcome::Edited => evidence.edited += 1,
            PastOutcome::Rejected => evidence.rejected += 1,
        }
        if evidence.confirmed_unchanged + evidence.edited + evidence.rejected == 1 {
            (evidence.first_at, evidence.last_at) = (call.at, call.at);
        }
        evidence.first_at = evidence.first_at.min(call.at);
        evidence.last_at = evidence.last_at.max(call.at);
        if let Some(reviewer) = &call.reviewer {
            reviewers.insert(reviewer);
        }
    }
    by_pair
        .into_iter()
        .map(|(pair, (mut evidence, reviewers))| {
            evidence.reviewers = u32::try_from(reviewers.len()).unwrap_or(u32::MAX);
            (pair, evidence)
        })
        .collect()
}

/// `allow` rules for the tools whose calls a person confirmed unchanged at least
/// `min_confirmed` times and never edited, rejected or undid, among `calls` (the
/// window is the caller's choice), by agent then tool. Only a person's decisions about
/// the tool's definition in force count (automatic approvals and decisions about an
/// earlier definition are reported, not counted). `in_force` says what is in force
/// for an (agent, tool) pair now (nothing when it has no answer): each suggestion
/// names it as what it `replaces`, and says why applying it is `refused` when it
/// would weaken it or accept a changed definition.
pub fn suggest_grants(
    calls: &[PastCall],
    options: &SuggestOptions,
    in_force: impl Fn(&str, &str) -> InForce,
) -> Vec<GrantSuggestion> {
    let changed: BTreeSet<(&str, &str)> = calls
        .iter()
        .filter(|c| c.definition.is_some_and(|d| !d.accepted))
        .map(|c| (c.agent_id.as_str(), c.tool_name.as_str()))
        .collect();
    evidence(calls)
        .into_iter()
        .filter(|(_, e)| {
            e.confirmed_unchanged >= options.min_confirmed.max(1)
                && e.edited == 0
                && e.rejected == 0
                && e.undone == 0
        })
        .filter_map(|((agent, tool), evidence)| {
            let counted: Vec<&PastCall> = calls
                .iter()
                .filter(|c| c.agent_id == agent && c.tool_name == tool)
                .filter(|c| c.of_current_definition() && !c.automatic)
                .collect();
            let pattern = match supported_pattern(tool, &counted) {
                Supported::Tool => None,
                Supported::Pattern(pattern) => Some(pattern),
                Supported::Nothing => return None,
            };
            let mut now = in_force(agent, tool);
            now.definition_changed |= changed.contains(&(agent, tool));
            Some(GrantSuggestion {
                id: suggestion_id(agent, pattern.as_deref().unwrap_or(tool)),
                agent: agent.to_owned(),
                tool: tool.to_owned(),
                refused: now.refusal_of(agent, tool, pattern.as_deref()),
                pattern,
                rule: RuleAction::Allow.as_str(),
                expires_at: options.now + options.expiry,
                replaces: (!now.is_nothing()).then_some(now),
                evidence,
            })
        })
        .collect()
}

/// What the evidence of a tool supports ([`supported_pattern`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Supported {
    /// The bare tool: its calls hold no command and no path.
    Tool,
    /// This argument pattern of the tool.
    Pattern(String),
    /// No rule: the calls hold commands or paths no pattern covers without covering
    /// what the evidence says nothing about.
    Nothing,
}

/// Fewer leading words than this, shared by different commands, support no pattern:
/// `rm a` and `rm b` say nothing about `rm -rf ~`.
const MIN_SHARED_WORDS: usize = 2;

/// The pattern the `calls` of `tool` (a person's, of its current definition) support
/// (issue 52: three harmless commands once gave `allow Bash`, which then allowed
/// `rm -rf ~`). Calls that hold no command and no path support the bare tool. For
/// commands: the exact command when every call ran the same one, else the first words
/// they all share (at least [`MIN_SHARED_WORDS`]) as `Tool(git status:*)`. For paths:
/// the exact path when every call named the same one, else their deepest common
/// folder as `Tool(/abs/folder/**)`, when it lies strictly inside the call's target
/// folder. Anything else (a chained command, a `*` a glob cannot say, a `..`, a mix
/// of commands and paths, different targets) supports nothing.
fn supported_pattern(tool: &str, calls: &[&PastCall]) -> Supported {
    use crate::policy::{COMMAND_KEYS, PATH_KEYS};
    let text = |call: &PastCall, keys: &[&str]| -> Vec<String> {
        keys.iter()
            .filter_map(|key| call.args.get(*key).and_then(serde_json::Value::as_str))
            .map(str::to_owned)
            .collect()
    };
    let commands: Vec<Vec<String>> = calls.iter().map(|c| text(c, &COMMAND_KEYS)).collect();
    let paths: Vec<Vec<String>> = calls.iter().map(|c| text(c, &PATH_KEYS)).collect();
    let any = |all: &[Vec<String>]| all.iter().any(|found| !found.is_empty());
    let (any_command, any_path) = (any(&commands), any(&paths));
    if !any_command && !any_path {
        return Supported::Tool;
    }
    // One kind, one value in every call: a pattern of the other kind, or a call
    // without any, says nothing the pattern could cover.
    let single = |all: Vec<Vec<String>>| -> Option<Vec<String>> {
        all.into_iter()
            .map(|found| {
                (found.len() == 1)
                    .then(|| found.into_iter().next())
                    .flatten()
            })
            .collect()
    };
    let pattern = match (any_command, any_path) {
        (true, false) => single(commands).and_then(|commands| command_pattern(&commands)),
        (false, true) => {
            let same_target = calls.windows(2).all(|w| w[0].target_id == w[1].target_id);
            let target = calls
                .first()
                .map(|c| c.target_id.as_str())
                .unwrap_or_default();
            single(paths)
                .filter(|_| same_target)
                .and_then(|paths| path_pattern(&paths, target))
        }
        _ => None,
    };
    match pattern {
        Some(argument) => Supported::Pattern(format!("{tool}({argument})")),
        None => Supported::Nothing,
    }
}

/// The command pattern `commands` support: see [`supported_pattern`].
fn command_pattern(commands: &[String]) -> Option<String> {
    use crate::policy::SHELL_CHAINS;
    let plain = |command: &String| {
        !command.contains('*')
            && !command.contains('(')
            && !command.contains(')')
            && !SHELL_CHAINS.iter().any(|chain| command.contains(chain))
    };
    if commands.is_empty() || !commands.iter().all(plain) {
        return None;
    }
    let words: Vec<Vec<&str>> = commands
        .iter()
        .map(|c| c.split_whitespace().collect())
        .collect();
    if words.windows(2).all(|w| w[0] == w[1]) {
        return Some(words[0].join(" ")).filter(|c| !c.is_empty());
    }
    let shared = (0..)
        .take_while(|&at| {
            words[0]
                .get(at)
                .is_some_and(|word| words.iter().all(|w| w.get(at) == Some(word)))
        })
        .count();
    (shared >= MIN_SHARED_WORDS).then(|| format!("{}:*", words[0][..shared].join(" ")))
}

/// The path pattern `paths` (of calls on target `target`) support: see
/// [`supported_pattern`].
fn path_pattern(paths: &[String], target: &str) -> Option<String> {
    let segments = |p: &str| -> Option<Vec<String>> {
        let parts: Vec<String> = p
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let plain = parts.iter().all(|s| {
            s != "." && s != ".." && !s.contains('*') && !s.contains('(') && !s.contains(')')
        });
        plain.then_some(parts)
    };
    // A target that is no folder (an MCP gateway's) supports exact absolute paths only.
    let root = segments(target).filter(|_| target.starts_with('/'));
    let absolute: Vec<Vec<String>> = paths
        .iter()
        .map(|p| {
            let parts = segments(p)?;
            if p.starts_with('/') {
                Some(parts)
            } else {
                Some(root.as_ref()?.iter().cloned().chain(parts).collect())
            }
        })
        .collect::<Option<_>>()?;
    let first = absolute.first()?;
    if absolute.windows(2).all(|w| w[0] == w[1]) {
        return Some(format!("/{}", first.join("/")));
    }
    let root = root?;
    let shared = (0..)
        .take_while(|&at| {
            first.get(at).is_some_and(|part| {
                absolute
                    .iter()
                    .all(|p| p.len() > at + 1 && p.get(at) == Some(part))
            })
        })
        .count();
    let folder = &first[..shared];
    (folder.len() > root.len() && folder.starts_with(&root))
        .then(|| format!("/{}/**", folder.join("/")))
}

/// A past call a rule treats otherwise than the person did: one a backtested rule
/// would have let run though a person stopped, changed or reversed it
/// ([`LetThrough`]), or one a shadow rule disagreed with ([`Disagreement`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallAgainstRule {
    /// The decision's id.
    pub decision_id: String,
    /// The set of the item.
    pub change_set_id: String,
    /// The item's index.
    pub item_index: usize,
    /// The tool called.
    pub tool: String,
    /// What the person did: `confirmed`, `rejected`, `edited` or `undone`.
    pub outcome: &'static str,
    /// Why it counts: what the person did and the rule would have done, in words.
    pub reason: String,
    /// The reason the person gave, when they gave one.
    pub person_reason: Option<String>,
    /// When it was decided.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

impl CallAgainstRule {
    fn of(call: &PastCall, outcome: &'static str, reason: &str) -> Self {
        Self {
            decision_id: call.decision_id.clone(),
            change_set_id: call.change_set_id.clone(),
            item_index: call.item_index,
            tool: call.tool_name.clone(),
            outcome,
            reason: reason.to_owned(),
            person_reason: call.reason.clone(),
            at: call.at,
        }
    }
}

/// A past call a backtested rule would have let run (`outcome`: `rejected`, `edited`
/// or `undone`).
pub type LetThrough = CallAgainstRule;

/// A decision a shadow rule disagreed with.
pub type Disagreement = CallAgainstRule;

/// A rule replayed against an agent's past calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Backtest {
    /// The agent.
    pub agent: String,
    /// The tool or pattern of the rule.
    pub tool: String,
    /// The rule: `allow`, `ask` or `deny`.
    pub rule: &'static str,
    /// Past decided calls the rule covers.
    pub calls: u32,
    /// How many of them would have run without asking anyone.
    pub would_run_unasked: u32,
    /// How many would still have waited for a person.
    pub would_ask: u32,
    /// How many would have been refused, those a person confirmed included.
    pub would_refuse: u32,
    /// How many a person confirmed that the rule would have refused.
    pub confirmed_but_refused: u32,
    /// Every rejected, edited or undone call the rule would have let run, oldest first.
    pub let_through: Vec<LetThrough>,
}

/// Replays `rule` against agent `agent`'s calls among `calls`, as if it had been in
/// force (and the only rule) when they were made. Tools under review (a changed
/// definition) are not known here: the replay trusts the rule.
pub fn backtest(calls: &[PastCall], agent: &str, rule: &ToolRule) -> Backtest {
    let mut covered: Vec<&PastCall> = calls
        .iter()
        .filter(|call| call.agent_id == agent && rule.matches(&call.tool_name))
        .collect();
    covered.sort_by(|a, b| (a.at, &a.decision_id).cmp(&(b.at, &b.decision_id)));
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut result = Backtest {
        agent: agent.to_owned(),
        tool: rule.pattern().to_owned(),
        rule: rule.action().as_str(),
        calls: count(covered.len()),
        would_run_unasked: 0,
        would_ask: 0,
        would_refuse: 0,
        confirmed_but_refused: 0,
        let_through: Vec::new(),
    };
    match rule.action() {
        RuleAction::Ask => result.would_ask = result.calls,
        RuleAction::Deny => {
            result.would_refuse = result.calls;
            result.confirmed_but_refused = count(
                covered
                    .iter()
                    .filter(|c| c.outcome != PastOutcome::Rejected)
                    .count(),
            );
        }
        // An audit rule lets the calls run unasked, as an allow does.
        RuleAction::Allow | RuleAction::Audit => {
            result.would_run_unasked = result.calls;
            result.let_through = covered
                .iter()
                .filter_map(|call| let_through(call))
                .collect();
        }
    }
    result
}

/// The call as a [`LetThrough`], when a person stopped, changed or reversed it.
fn let_through(call: &PastCall) -> Option<LetThrough> {
    let (outcome, reason) = let_through_why(call.outcome, call.undone)?;
    Some(CallAgainstRule::of(call, outcome, reason))
}

/// Why an `allow` would have let a call decided `outcome` (and `undone` or not)
/// through against the person's word, or `None` when they agree.
fn let_through_why(outcome: PastOutcome, undone: bool) -> Option<(&'static str, &'static str)> {
    Some(match (outcome, undone) {
        (PastOutcome::Rejected, _) => ("rejected", "a person rejected it; it would have run"),
        (PastOutcome::Edited, _) => (
            "edited",
            "a person changed its arguments before it ran; it would have run as the agent proposed it",
        ),
        (PastOutcome::ConfirmedUnchanged, true) => (
            "undone",
            "a person confirmed it, then undid it; it would have run without the first look",
        ),
        (PastOutcome::ConfirmedUnchanged, false) => return None,
    })
}

/// Why a `deny` would have refused a call decided `outcome` against the person's word,
/// or `None` when they agree.
fn refused_why(outcome: PastOutcome, undone: bool) -> Option<(&'static str, &'static str)> {
    Some(match (outcome, undone) {
        (PastOutcome::Rejected, _) | (PastOutcome::ConfirmedUnchanged, true) => return None,
        (PastOutcome::ConfirmedUnchanged, false) => (
            "confirmed",
            "a person confirmed it; it would have been refused",
        ),
        (PastOutcome::Edited, _) => (
            "edited",
            "a person confirmed it with changed arguments; it would have been refused",
        ),
    })
}

/// Why rule `action` disagrees with a person's decision `outcome` (and a later undo),
/// or `None` when it agrees (an `ask` always does: it asks).
fn disagreement_why(
    action: RuleAction,
    outcome: PastOutcome,
    undone: bool,
) -> Option<(&'static str, &'static str)> {
    match action {
        RuleAction::Ask => None,
        RuleAction::Allow | RuleAction::Audit => let_through_why(outcome, undone),
        RuleAction::Deny => refused_why(outcome, undone),
    }
}

/// Whether a shadow rule `action` agrees with a decision `outcome` as it is made
/// (nothing undone yet): what the decision records beside itself. The shadow report
/// also counts an undo that comes later.
pub fn shadow_agrees(action: RuleAction, outcome: PastOutcome) -> bool {
    disagreement_why(action, outcome, false).is_none()
}

/// A shadow rule measured against the decisions people made while it was set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowReport {
    /// The tool or pattern of the rule.
    pub tool: String,
    /// The rule: `allow`, `ask` or `deny`.
    pub rule: &'static str,
    /// Since when it has been set.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// Decided calls it covers since then.
    pub decisions: u32,
    /// How many of them it agreed with.
    pub agreed: u32,
    /// `agreed / decisions`, or `None` before the first decision.
    pub agreement_rate: Option<f64>,
    /// Every decision it disagreed with, oldest first.
    pub disagreements: Vec<Disagreement>,
}

/// How `rule`, had it been in force, compares with what people decided about agent
/// `agent`'s calls among `calls` made at or after `since`. An `allow` agrees with a
/// confirmation of the agent's own arguments that was not undone; a `deny` with a
/// rejection; an `ask` with every decision (asking is what happened).
pub fn shadow_report(
    calls: &[PastCall],
    agent: &str,
    rule: &ToolRule,
    since: OffsetDateTime,
) -> ShadowReport {
    let mut covered: Vec<&PastCall> = calls
        .iter()
        .filter(|c| c.agent_id == agent && c.at >= since && rule.matches(&c.tool_name))
        .collect();
    covered.sort_by(|a, b| (a.at, &a.decision_id).cmp(&(b.at, &b.decision_id)));
    let disagreements: Vec<Disagreement> = covered
        .iter()
        .filter_map(|call| disagreement(call, rule.action()))
        .collect();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let decisions = count(covered.len());
    let agreed = decisions - count(disagreements.len());
    ShadowReport {
        tool: rule.pattern().to_owned(),
        rule: rule.action().as_str(),
        since,
        decisions,
        agreed,
        agreement_rate: (decisions > 0).then(|| f64::from(agreed) / f64::from(decisions)),
        disagreements,
    }
}

/// The call as a [`Disagreement`] with a rule of `action`, when it is one.
fn disagreement(call: &PastCall, action: RuleAction) -> Option<Disagreement> {
    let (outcome, reason) = disagreement_why(action, call.outcome, call.undone)?;
    Some(CallAgainstRule::of(call, outcome, reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-01 09:00 UTC);

    /// A generated history: `n` calls of `tool` by `agent`, each `outcome`, a minute
    /// apart from `start` minutes after T0, decided by `reviewer`.
    fn calls(
        agent: &str,
        tool: &str,
        outcome: PastOutcome,
        start: i64,
        n: i64,
        reviewer: &str,
    ) -> Vec<PastCall> {
        (start..start + n)
            .map(|minute| PastCall {
                decision_id: format!("d-{agent}-{tool}-{minute}"),
                change_set_id: format!("s-{minute}"),
                item_index: 0,
                agent_id: agent.to_owned(),
                tool_name: tool.to_owned(),
                outcome,
                undone: false,
                reason: None,
                reviewer: Some(reviewer.to_owned()),
                at: T0 + Duration::minutes(minute),
                automatic: false,
                definition: None,
                args: serde_json::json!({"title": "t"}),
                target_id: "t1".to_owned(),
            })
            .collect()
    }

    /// `calls` of `tool` by agent `a` confirmed unchanged, with these arguments, on
    /// workspace `/w`.
    fn with_args(tool: &str, args: &[serde_json::Value]) -> Vec<PastCall> {
        args.iter()
            .enumerate()
            .map(|(at, args)| PastCall {
                args: args.clone(),
                target_id: "/w".to_owned(),
                ..calls(
                    "a",
                    tool,
                    PastOutcome::ConfirmedUnchanged,
                    at as i64,
                    1,
                    "ann",
                )
                .remove(0)
            })
            .collect()
    }

    /// Issue 52: three different harmless commands once gave `allow Bash`, and then
    /// `rm -rf ~` ran. A tool of commands or paths gets only the argument pattern the
    /// evidence supports, or nothing; never the bare tool.
    #[test]
    fn commands_and_paths_are_suggested_as_the_patterns_they_support_or_not_at_all() {
        use serde_json::json;
        let cmd = |c: &str| json!({"command": c});
        let path = |p: &str| json!({"file_path": p, "content": "x"});
        let cases: &[(&str, Vec<serde_json::Value>, Option<&str>)] = &[
            ("Bash", vec![cmd("ls"), cmd("pwd"), cmd("whoami")], None),
            (
                "Bash",
                vec![
                    cmd("git status"),
                    cmd("git status -s"),
                    cmd("git status --short"),
                ],
                Some("Bash(git status:*)"),
            ),
            ("Bash", vec![cmd("rm a"), cmd("rm b"), cmd("rm c")], None),
            (
                "Bash",
                vec![cmd("cargo test"), cmd("cargo test"), cmd("cargo test")],
                Some("Bash(cargo test)"),
            ),
            ("Bash", vec![cmd("git status; rm -rf ~"); 3], None),
            ("Bash", vec![cmd("ls *.rs"); 3], None),
            (
                "Edit",
                vec![path("/w/src/a.rs"), path("src/b/c.rs"), path("/w/src/d.rs")],
                Some("Edit(/w/src/**)"),
            ),
            (
                "Edit",
                vec![path("/w/a.rs"), path("/w/src/b.rs"), path("/w/c")],
                None,
            ),
            ("Edit", vec![path("/w/a.rs"); 3], Some("Edit(/w/a.rs)")),
            (
                "Edit",
                vec![path("/elsewhere/a.rs"); 3],
                Some("Edit(/elsewhere/a.rs)"),
            ),
            (
                "Edit",
                vec![path("/etc/a"), path("/etc/b"), path("/etc/c")],
                None,
            ),
            ("Edit", vec![path("/w/src/../../etc/x"); 3], None),
            (
                "Bash",
                vec![cmd("git status"), path("/w/src/a"), cmd("git status")],
                None,
            ),
            (
                "create_issue",
                vec![
                    json!({"repo": "a"}),
                    json!({"repo": "b"}),
                    json!({"repo": "c"}),
                ],
                Some("create_issue"),
            ),
        ];
        for (tool, args, expected) in cases {
            let found = suggest(&with_args(tool, args), 3);
            let shown: Option<String> = found
                .first()
                .map(|s| s.pattern.clone().unwrap_or_else(|| s.tool.clone()));
            assert_eq!(shown.as_deref(), *expected, "{tool} {args:?}");
            if let Some(s) = found.first() {
                let rule = ToolRule::new(shown.unwrap(), RuleAction::Allow).expect("a rule");
                for call in args {
                    assert_eq!(
                        rule.covers(tool, Some(crate::CallContext::new(call, "/w"))),
                        crate::Coverage::Yes,
                        "the suggested rule covers its evidence: {call}"
                    );
                }
                assert_eq!(
                    s.id,
                    suggestion_id("a", s.pattern.as_deref().unwrap_or(tool))
                );
            }
        }
    }

    proptest::proptest! {
        /// Issue 52: a suggestion for a shell tool is never the bare tool, and never
        /// covers a command that shares fewer than two leading words with its evidence.
        #[test]
        fn a_shell_suggestion_is_never_the_whole_shell(
            commands in proptest::collection::vec("[a-c]{1,2}( [a-c]{1,2}){0,3}", 1..5),
            other in "[a-c]{1,2}( [a-c]{1,2}){0,3}",
        ) {
            let args: Vec<serde_json::Value> =
                commands.iter().map(|c| serde_json::json!({"command": c})).collect();
            for s in suggest(&with_args("Bash", &args), 1) {
                let pattern = s.pattern.clone().expect("never the bare tool");
                let rule = ToolRule::new(pattern, RuleAction::Allow).expect("a rule");
                let call = serde_json::json!({"command": other});
                if rule.covers("Bash", Some(crate::CallContext::new(&call, "/w"))) == crate::Coverage::Yes {
                    let words: Vec<&str> = other.split_whitespace().collect();
                    proptest::prop_assert!(commands.iter().any(|c| {
                        let theirs: Vec<&str> = c.split_whitespace().collect();
                        theirs == words
                            || (theirs.len() >= 2 && other.starts_with(&theirs[..2].join(" ")))
                    }), "{other} covered by evidence {commands:?}");
                }
            }
        }
    }

    fn options(min: u32) -> SuggestOptions {
        SuggestOptions {
            min_confirmed: min,
            expiry: Duration::days(30),
            now: T0 + Duration::days(1),
        }
    }

    /// The suggestions from `history` at `min`, with nothing in force for any tool.
    fn suggest(history: &[PastCall], min: u32) -> Vec<GrantSuggestion> {
        suggest_grants(history, &options(min), |_, _| InForce::default())
    }

    #[test]
    fn ids_are_stable_and_tell_pairs_apart() {
        assert_eq!(suggestion_id("a", "t"), suggestion_id("a", "t"));
        assert_ne!(suggestion_id("a", "bt"), suggestion_id("ab", "t"));
        assert_eq!(suggestion_id("a", "t").len(), 19);
    }

    #[test]
    fn six_unchanged_confirmations_are_suggested_and_a_rejected_tool_is_not() {
        let mut history = calls(
            "a",
            "set_title",
            PastOutcome::ConfirmedUnchanged,
            0,
            4,
            "ann",
        );
        history.extend(calls(
            "a",
            "set_title",
            PastOutcome::ConfirmedUnchanged,
            10,
            2,
            "bob",
        ));
        history.extend(calls(
            "a",
            "delete",
            PastOutcome::ConfirmedUnchanged,
            0,
            9,
            "ann",
        ));
        history.extend(calls("a", "delete", PastOutcome::Rejected, 20, 1, "ann"));
        let suggested = suggest(&history, 5);
        assert_eq!(suggested.len(), 1, "{suggested:?}");
        let s = &suggested[0];
        assert_eq!(
            (s.agent.as_str(), s.tool.as_str(), s.rule),
            ("a", "set_title", "allow")
        );
        assert_eq!(s.id, suggestion_id("a", "set_title"));
        assert_eq!((&s.replaces, &s.refused), (&None, &None));
        assert_eq!(s.expires_at, T0 + Duration::days(31));
        assert_eq!(
            s.evidence,
            GrantEvidence {
                confirmed_unchanged: 6,
                edited: 0,
                rejected: 0,
                undone: 0,
                reviewers: 2,
                automatic: 0,
                before_definition: 0,
                first_at: T0,
                last_at: T0 + Duration::minutes(11),
            }
        );
        // Not enough at a higher bar; the same answer from the history in another order.
        assert!(suggest(&history, 7).is_empty());
        history.reverse();
        assert_eq!(suggest(&history, 5), suggested);
    }

    #[test]
    fn an_edit_or_an_undo_spoils_a_tool_and_agents_are_apart() {
        let mut history = calls("a", "t", PastOutcome::ConfirmedUnchanged, 0, 5, "ann");
        history.extend(calls(
            "b",
            "t",
            PastOutcome::ConfirmedUnchanged,
            0,
            5,
            "ann",
        ));
        history.extend(calls(
            "c",
            "t",
            PastOutcome::ConfirmedUnchanged,
            0,
            5,
            "ann",
        ));
        history.extend(calls("b", "t", PastOutcome::Edited, 9, 1, "ann"));
        history[12].undone = true; // one of c's
        let suggested = suggest(&history, 5);
        let agents: Vec<&str> = suggested.iter().map(|s| s.agent.as_str()).collect();
        assert_eq!(agents, ["a"]);
        let all = evidence(&history);
        assert_eq!(all[&("b", "t")].edited, 1);
        assert_eq!(all[&("c", "t")].undone, 1);
        assert_eq!(all[&("c", "t")].confirmed_unchanged, 5);
    }

    #[test]
    fn a_backtested_allow_lists_what_a_person_stopped_changed_or_undid() {
        let mut history = calls(
            "a",
            "set_title",
            PastOutcome::ConfirmedUnchanged,
            0,
            3,
            "ann",
        );
        history.extend(calls("a", "set_title", PastOutcome::Rejected, 5, 1, "ann"));
        history[3].reason = Some("wrong task".into());
        history.extend(calls("a", "set_title", PastOutcome::Edited, 6, 1, "ann"));
        history[1].undone = true;
        history.extend(calls("a", "delete", PastOutcome::Rejected, 7, 1, "ann"));
        history.extend(calls("b", "set_title", PastOutcome::Rejected, 7, 1, "ann"));
        let allow = ToolRule::new("set_*", RuleAction::Allow).expect("a rule");
        let result = backtest(&history, "a", &allow);
        assert_eq!((result.calls, result.would_run_unasked), (5, 5));
        let listed: Vec<(&str, i64)> = result
            .let_through
            .iter()
            .map(|l| (l.outcome, (l.at - T0).whole_minutes()))
            .collect();
        assert_eq!(listed, [("undone", 1), ("rejected", 5), ("edited", 6)]);
        assert_eq!(
            result.let_through[1].person_reason.as_deref(),
            Some("wrong task")
        );
        assert!(
            result.let_through[1]
                .reason
                .starts_with("a person rejected it")
        );

        let deny = ToolRule::new("set_title", RuleAction::Deny).expect("a rule");
        let denied = backtest(&history, "a", &deny);
        assert_eq!(
            (
                denied.would_run_unasked,
                denied.would_refuse,
                denied.confirmed_but_refused
            ),
            (0, 5, 4)
        );
        assert!(denied.let_through.is_empty());
        let ask = ToolRule::new("set_title", RuleAction::Ask).expect("a rule");
        let asked = backtest(&history, "a", &ask);
        assert_eq!((asked.would_ask, asked.would_run_unasked), (5, 0));
        assert_eq!(backtest(&history, "nobody", &allow).calls, 0);
    }

    #[test]
    fn a_shadow_allow_agrees_with_unchanged_confirmations_only_since_it_was_set() {
        let mut history = calls(
            "a",
            "set_title",
            PastOutcome::ConfirmedUnchanged,
            0,
            3,
            "ann",
        );
        history.extend(calls(
            "a",
            "set_title",
            PastOutcome::ConfirmedUnchanged,
            10,
            3,
            "ann",
        ));
        history.extend(calls("a", "set_title", PastOutcome::Rejected, 20, 1, "ann"));
        history[4].undone = true;
        let since = T0 + Duration::minutes(10);
        let allow = ToolRule::new("set_title", RuleAction::Allow).expect("a rule");
        let report = shadow_report(&history, "a", &allow, since);
        assert_eq!((report.decisions, report.agreed), (4, 2));
        assert_eq!(report.agreement_rate, Some(0.5));
        let outcomes: Vec<&str> = report.disagreements.iter().map(|d| d.outcome).collect();
        assert_eq!(outcomes, ["undone", "rejected"]);

        let deny = ToolRule::new("set_*", RuleAction::Deny).expect("a rule");
        let report = shadow_report(&history, "a", &deny, since);
        assert_eq!(
            (report.decisions, report.agreed),
            (4, 2),
            "the rejection and the undo"
        );
        let ask = ToolRule::new("set_title", RuleAction::Ask).expect("a rule");
        assert_eq!(shadow_report(&history, "a", &ask, since).agreed, 4);
        let none = shadow_report(&history, "a", &allow, T0 + Duration::days(1));
        assert_eq!((none.decisions, none.agreement_rate), (0, None));
    }

    #[test]
    fn a_shadow_verdict_at_decision_time_agrees_as_the_report_does_before_any_undo() {
        use PastOutcome::{ConfirmedUnchanged, Edited, Rejected};
        for outcome in [ConfirmedUnchanged, Edited, Rejected] {
            assert!(shadow_agrees(RuleAction::Ask, outcome), "ask always agrees");
        }
        assert!(shadow_agrees(RuleAction::Allow, ConfirmedUnchanged));
        assert!(!shadow_agrees(RuleAction::Allow, Edited));
        assert!(!shadow_agrees(RuleAction::Allow, Rejected));
        assert!(shadow_agrees(RuleAction::Deny, Rejected));
        assert!(!shadow_agrees(RuleAction::Deny, ConfirmedUnchanged));
        assert!(!shadow_agrees(RuleAction::Deny, Edited));
    }

    #[test]
    fn automatic_approvals_are_reported_and_never_counted_as_a_persons() {
        // Two narrow "always" answers by a person, then six calls a grant approved.
        let mut history = calls("a", "send", PastOutcome::ConfirmedUnchanged, 0, 2, "ann");
        let mut granted = calls("a", "send", PastOutcome::ConfirmedUnchanged, 10, 6, "ann");
        for call in &mut granted {
            call.automatic = true;
            call.reviewer = None;
        }
        history.extend(granted);
        let all = evidence(&history);
        let e = &all[&("a", "send")];
        assert_eq!((e.confirmed_unchanged, e.automatic, e.reviewers), (2, 6, 1));
        assert_eq!(
            (e.first_at, e.last_at),
            (T0, T0 + Duration::minutes(1)),
            "a person's decisions only"
        );
        assert!(
            suggest(&history, 3).is_empty(),
            "two of a person's, not eight"
        );
        assert_eq!(suggest(&history, 2)[0].evidence.automatic, 6);
        // A person's undo of an automatic call is a person's word: it spoils the tool.
        history[5].undone = true;
        assert!(suggest(&history, 2).is_empty());
    }

    #[test]
    fn decisions_about_an_earlier_definition_do_not_count_and_a_changed_one_is_refused() {
        let mut history = calls(
            "a",
            "send_money",
            PastOutcome::ConfirmedUnchanged,
            0,
            3,
            "ann",
        );
        let redefined = ToolDefinition {
            since: T0 + Duration::minutes(5),
            accepted: false,
        };
        for call in &mut history {
            call.definition = Some(redefined);
        }
        let all = evidence(&history);
        assert_eq!(
            (
                all[&("a", "send_money")].confirmed_unchanged,
                all[&("a", "send_money")].before_definition
            ),
            (0, 3)
        );
        assert!(
            suggest(&history, 1).is_empty(),
            "the old evidence does not count"
        );
        // Confirmations of the new definition count, but it is not accepted yet: the
        // suggestion is listed and refused, naming the changed definition.
        let mut fresh = calls(
            "a",
            "send_money",
            PastOutcome::ConfirmedUnchanged,
            10,
            2,
            "ann",
        );
        for call in &mut fresh {
            call.definition = Some(redefined);
        }
        history.extend(fresh);
        let suggested = suggest(&history, 2);
        assert_eq!(suggested.len(), 1);
        assert_eq!(suggested[0].evidence.before_definition, 3);
        assert_eq!(suggested[0].evidence.first_at, T0 + Duration::minutes(10));
        assert!(
            suggested[0]
                .replaces
                .as_ref()
                .is_some_and(|r| r.definition_changed)
        );
        let why = suggested[0].refused.as_deref().expect("refused");
        assert!(why.contains("definition of send_money changed"), "{why}");
        // Accepted by a person: no longer refused.
        for call in &mut history {
            call.definition = Some(ToolDefinition {
                accepted: true,
                ..redefined
            });
        }
        assert_eq!(suggest(&history, 2)[0].refused, None);
    }

    #[test]
    fn a_suggestion_names_what_it_replaces_and_never_weakens_a_deny_quorum_or_hold() {
        let history = calls(
            "a",
            "send_money",
            PastOutcome::ConfirmedUnchanged,
            0,
            1,
            "ann",
        );
        let rule = |pattern: &str, action| ToolRule::new(pattern, action).expect("a rule");
        let with = |policy: AgentPolicy, approvals: u32, hold: Option<u32>| {
            let suggested = suggest_grants(&history, &options(1), |_, tool| {
                InForce::of(&policy, tool, approvals, hold)
            });
            let s = suggested.into_iter().next().expect("one suggestion");
            (s.replaces, s.refused)
        };
        let none = AgentPolicy::new(["work"]);
        assert_eq!(with(none.clone(), 1, None), (None, None));

        let ask = none.clone().with_rule(rule("send_money", RuleAction::Ask));
        let (replaces, refused) = with(ask.clone(), 1, None);
        let replaces = replaces.expect("the ask rule");
        assert_eq!(
            (replaces.rule, replaces.pattern.as_deref()),
            (Some("ask"), Some("send_money"))
        );
        assert_eq!(
            refused, None,
            "a plain ask of the tool is what a suggestion replaces"
        );

        let (replaces, refused) = with(ask.clone(), 2, None);
        assert_eq!(replaces.expect("the quorum").approvals, Some(2));
        assert!(refused.expect("refused").contains("needs 2 approvals"));

        let (replaces, refused) = with(ask, 1, Some(30));
        assert_eq!(replaces.expect("the hold").hold_seconds, Some(30));
        assert!(refused.expect("refused").contains("held 30 s"));

        let deny = none.clone().with_rule(rule("send_*", RuleAction::Deny));
        let (replaces, refused) = with(deny, 1, None);
        assert_eq!(
            replaces.expect("the deny").pattern.as_deref(),
            Some("send_*")
        );
        assert!(refused.expect("refused").contains("deny rule for send_*"));

        let pattern_ask = none.with_rule(rule("send_*", RuleAction::Ask));
        let (_, refused) = with(pattern_ask.clone(), 1, None);
        assert!(refused.expect("refused").contains("changes nothing"));
        // Its own ask and a pattern's: the pattern's would still decide.
        let both = pattern_ask.with_rule(rule("send_money", RuleAction::Ask));
        let (replaces, refused) = with(both, 1, None);
        assert_eq!(
            replaces.expect("the asks").pattern.as_deref(),
            Some("send_*")
        );
        assert!(refused.expect("refused").contains("changes nothing"));
    }
}
