//! What a person's past decisions say about a rule (issue 29): grant suggestions from
//! calls confirmed unchanged, a backtest of a rule against the calls it would have
//! decided, and a shadow rule's agreement with the people who did decide. Pure: the store loads the [`PastCall`]s, `now` is an argument, and the same
//! input gives the same output in the same order.

use crate::policy::{RuleAction, ToolRule};
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
            (Verdict::Deferred | Verdict::Retracted, _) => None,
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

/// What the history says about one agent's calls of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantEvidence {
    /// Calls confirmed with the agent's own arguments.
    pub confirmed_unchanged: u32,
    /// Calls confirmed after a person changed the arguments.
    pub edited: u32,
    /// Calls rejected.
    pub rejected: u32,
    /// Confirmed calls a person undid afterwards.
    pub undone: u32,
    /// Distinct known deciders among these calls.
    pub reviewers: u32,
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
    /// The rule proposed: `allow`.
    pub rule: &'static str,
    /// When the rule would expire if applied now.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// Why.
    pub evidence: GrantEvidence,
}

/// The evidence of every (agent, tool) pair in `calls`, by agent then tool.
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
                    first_at: call.at,
                    last_at: call.at,
                };
                (evidence, BTreeSet::new())
            });
        match call.outcome {
            PastOutcome::ConfirmedUnchanged => evidence.confirmed_unchanged += 1,
            PastOutcome::Edited => evidence.edited += 1,
            PastOutcome::Rejected => evidence.rejected += 1,
        }
        evidence.undone += u32::from(call.undone);
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
/// window is the caller's choice), by agent then tool.
pub fn suggest_grants(calls: &[PastCall], options: &SuggestOptions) -> Vec<GrantSuggestion> {
    evidence(calls)
        .into_iter()
        .filter(|(_, e)| {
            e.confirmed_unchanged >= options.min_confirmed.max(1)
                && e.edited == 0
                && e.rejected == 0
                && e.undone == 0
        })
        .map(|((agent, tool), evidence)| GrantSuggestion {
            id: suggestion_id(agent, tool),
            agent: agent.to_owned(),
            tool: tool.to_owned(),
            rule: RuleAction::Allow.as_str(),
            expires_at: options.now + options.expiry,
            evidence,
        })
        .collect()
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
        RuleAction::Allow => {
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
        RuleAction::Allow => let_through_why(outcome, undone),
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
            })
            .collect()
    }

    fn options(min: u32) -> SuggestOptions {
        SuggestOptions {
            min_confirmed: min,
            expiry: Duration::days(30),
            now: T0 + Duration::days(1),
        }
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
        let suggested = suggest_grants(&history, &options(5));
        assert_eq!(suggested.len(), 1, "{suggested:?}");
        let s = &suggested[0];
        assert_eq!(
            (s.agent.as_str(), s.tool.as_str(), s.rule),
            ("a", "set_title", "allow")
        );
        assert_eq!(s.id, suggestion_id("a", "set_title"));
        assert_eq!(s.expires_at, T0 + Duration::days(31));
        assert_eq!(
            s.evidence,
            GrantEvidence {
                confirmed_unchanged: 6,
                edited: 0,
                rejected: 0,
                undone: 0,
                reviewers: 2,
                first_at: T0,
                last_at: T0 + Duration::minutes(11),
            }
        );
        // Not enough at a higher bar; the same answer from the history in another order.
        assert!(suggest_grants(&history, &options(7)).is_empty());
        history.reverse();
        assert_eq!(suggest_grants(&history, &options(5)), suggested);
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
        let suggested = suggest_grants(&history, &options(5));
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
}
