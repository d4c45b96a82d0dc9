//! Rules over the session's history (issue 57): a condition on a rule over what the
//! same agent (for a coding agent's hook, the same session) ran before, read from the
//! audit trail by the store and judged here, purely: a function of the rule, the call,
//! the past runs and `now`.
//!
//! - a rate, [`When::After`]: the rule applies once `count` calls it covers ran in the
//!   window before (`assent agent ask A TOOL --after 5/1h`);
//! - a sequence, [`When::OnlyAfter`]: the rule applies only when a call covered by
//!   another pattern ran (and, with `succeeded`, succeeded) within the window before
//!   (`--only-after 'Bash(cargo test:*)' --within 15m --succeeded`);
//! - a running total, [`When::Total`]: the rule applies once the sum of one argument
//!   over the calls it covers in the window, this call included, exceeds a bound
//!   (`--total /cents --over 50000 --per 1d`).
//!
//! A rule whose condition does not hold does not apply: the next rule or the tool's
//! mode decides. What cannot be told (a call without the summed argument, a past call
//! a pattern is unsure of) counts the fail-closed way: for a rule that asks or denies
//! as if the condition held, for one that allows as if it did not.

use crate::policy::{CallContext, Coverage, call_covers};
use crate::{RuleAction, ToolsError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::{Duration, OffsetDateTime};

/// The longest window a condition may look back: a year.
pub const MAX_WINDOW_SECONDS: u32 = 366 * 86_400;

/// A rule's condition over the history: when it holds, and the quorum the rule needs
/// once it does.
///
/// Its JSON (in the `agents` table's `rules`, and in an audit record's `allowedBy`):
/// `{"when": {"kind": "after", "count": 5, "windowSeconds": 3600}, "approvals": 2}`,
/// `{"when": {"kind": "onlyAfter", "pattern": "Bash(cargo test:*)", "withinSeconds":
/// 900, "succeeded": true}}`, `{"when": {"kind": "total", "pointer": "/cents", "over":
/// 50000, "perSeconds": 86400}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// When it holds.
    pub when: When,
    /// With an `ask` rule: how many distinct people confirm a call once the condition
    /// holds (`--approvals N` beside the condition); `None` for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<u32>,
}

/// What a condition looks for in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum When {
    /// At least `count` calls the rule covers ran in the `window_seconds` before.
    After {
        /// How many.
        count: u32,
        /// The window, in seconds.
        window_seconds: u32,
    },
    /// A call covered by `pattern` ran (with `succeeded`, and succeeded) in the
    /// `within_seconds` before.
    OnlyAfter {
        /// The pattern of the call that must come first.
        pattern: String,
        /// The window, in seconds.
        within_seconds: u32,
        /// Whether it must have succeeded.
        #[serde(default)]
        succeeded: bool,
    },
    /// The sum of the argument at `pointer` over the calls the rule covers in the
    /// `per_seconds` before, this call included, is above `over`.
    Total {
        /// A JSON pointer into the arguments (`/cents`).
        pointer: String,
        /// The bound.
        over: i64,
        /// The window, in seconds.
        per_seconds: u32,
    },
}

/// One call that ran, as the audit trail records it: what the conditions read.
#[derive(Debug, Clone, PartialEq)]
pub struct PastRun {
    /// The tool.
    pub tool_name: String,
    /// Its arguments.
    pub args: Value,
    /// Its target's id (the workspace, for a coding agent's call).
    pub target_id: String,
    /// When it ran (its action record's time).
    pub at: OffsetDateTime,
    /// Whether it succeeded, when known.
    pub succeeded: Option<bool>,
    /// Whether it was written on this device (a synced record from another device is
    /// never what lets a call run).
    pub here: bool,
}

impl Condition {
    /// A condition, checked: a window from one second to [`MAX_WINDOW_SECONDS`], a
    /// count above zero, a pattern that can match, a JSON pointer, an approvals count
    /// above zero.
    pub fn new(when: When, approvals: Option<u32>) -> Result<Self, ToolsError> {
        let bad = |reason: String| Err(ToolsError::InvalidCondition { reason });
        let window = match &when {
            When::After {
                count,
                window_seconds,
            } => {
                if *count == 0 {
                    return bad("--after needs a count above zero (N/SPAN, e.g. 5/1h)".into());
                }
                *window_seconds
            }
            When::OnlyAfter {
                pattern,
                within_seconds,
                ..
            } => {
                crate::ToolRule::new(pattern.clone(), RuleAction::Allow).map_err(|e| {
                    ToolsError::InvalidCondition {
                        reason: format!("--only-after {pattern:?}: {e}"),
                    }
                })?;
                *within_seconds
            }
            When::Total {
                pointer,
                per_seconds,
                ..
            } => {
                if !pointer.starts_with('/') {
                    return bad(format!(
                        "--total {pointer:?} is not a JSON pointer (it starts with /, e.g. /cents)"
                    ));
                }
                *per_seconds
            }
        };
        if window == 0 || window > MAX_WINDOW_SECONDS {
            return bad(format!(
                "a condition's window is from 1s to 366d, got {window} seconds"
            ));
        }
        if approvals == Some(0) {
            return bad("--approvals is at least 1".into());
        }
        Ok(Self { when, approvals })
    }

    /// How far back the condition looks.
    pub fn window(&self) -> Duration {
        Duration::seconds(i64::from(match &self.when {
            When::After { window_seconds, .. } => *window_seconds,
            When::OnlyAfter { within_seconds, .. } => *within_seconds,
            When::Total { per_seconds, .. } => *per_seconds,
        }))
    }

    /// Whether the condition of a rule with `pattern` holds for a call (with `call`,
    /// its arguments, when known) at `now`, given the `runs` before it: `Yes`, `No`, or
    /// `Unsure` when it cannot be told (counted by [`Condition::applies`] the
    /// fail-closed way). Runs outside the window (`now - window`, `now`] are not read.
    pub fn holds(
        &self,
        pattern: &str,
        call: Option<CallContext<'_>>,
        runs: &[PastRun],
        now: OffsetDateTime,
    ) -> Coverage {
        let since = now - self.window();
        let in_window = runs.iter().filter(|run| run.at > since && run.at <= now);
        let covered = |pattern: &str, run: &PastRun| {
            call_covers(
                pattern,
                &run.tool_name,
                Some(CallContext::new(&run.args, &run.target_id)),
            )
        };
        match &self.when {
            When::After { count, .. } => {
                let (mut sure, mut maybe) = (0u64, 0u64);
                for run in in_window {
                    match covered(pattern, run) {
                        Coverage::Yes => {
                            sure += 1;
                            maybe += 1;
                        }
                        Coverage::Unsure => maybe += 1,
                        Coverage::No => {}
                    }
                }
                if sure >= u64::from(*count) {
                    Coverage::Yes
                } else if maybe >= u64::from(*count) {
                    Coverage::Unsure
                } else {
                    Coverage::No
                }
            }
            When::OnlyAfter {
                pattern: first,
                succeeded,
                ..
            } => {
                // Only a run written here, sure to be covered, (and known to have
                // succeeded) lets the rule apply: what it gates is usually an allow.
                let found = in_window.filter(|run| run.here).any(|run| {
                    covered(first, run) == Coverage::Yes
                        && (!succeeded || run.succeeded == Some(true))
                });
                if found { Coverage::Yes } else { Coverage::No }
            }
            When::Total { pointer, over, .. } => {
                let Some(this) = call
                    .and_then(|call| call.args.pointer(pointer))
                    .and_then(number)
                else {
                    return Coverage::Unsure;
                };
                let mut sum = this;
                let mut unsure = false;
                for run in in_window {
                    match covered(pattern, run) {
                        Coverage::No => {}
                        coverage => match run.args.pointer(pointer).and_then(number) {
                            Some(value) if coverage == Coverage::Yes => sum += value,
                            _ => unsure = true,
                        },
                    }
                }
                // Whole numbers (cents) add exactly in an i128; anything else is
                // summed as written, and the bound read as a number.
                if sum.gt(Number::Int(i128::from(*over))) {
                    Coverage::Yes
                } else if unsure {
                    Coverage::Unsure
                } else {
                    Coverage::No
                }
            }
        }
    }

    /// Whether a rule with this condition applies, given what [`Condition::holds`]
    /// found: it does when the condition holds; when it cannot be told, a rule that
    /// allows does not and one that asks or denies does (fail-closed).
    pub fn applies(action: RuleAction, holds: Coverage) -> bool {
        match holds {
            Coverage::Yes => true,
            Coverage::No => false,
            // Unsure: a rule that would run the call unasked (allow, audit) does not
            // apply; one that asks or denies does.
            Coverage::Unsure => !action.runs_unasked(),
        }
    }

    /// How the condition reads on the command line: `--after 5/3600s`,
    /// `--only-after 'Bash(cargo test:*)' --within 900s --succeeded`, `--total /cents
    /// --over 50000 --per 86400s`, with ` --approvals N` when it sets a quorum.
    pub fn describe(&self) -> String {
        let span = |seconds: u32| describe_span(seconds);
        let mut text = match &self.when {
            When::After {
                count,
                window_seconds,
            } => format!("--after {count}/{}", span(*window_seconds)),
            When::OnlyAfter {
                pattern,
                within_seconds,
                succeeded,
            } => format!(
                "--only-after {pattern} --within {}{}",
                span(*within_seconds),
                if *succeeded { " --succeeded" } else { "" }
            ),
            When::Total {
                pointer,
                over,
                per_seconds,
            } => format!(
                "--total {pointer} --over {over} --per {}",
                span(*per_seconds)
            ),
        };
        if let Some(n) = self.approvals {
            text.push_str(&format!(" --approvals {n}"));
        }
        text
    }
}

/// The decided `calls` a rule with a condition would have covered: those at whose
/// decision its condition applied, judged on the `runs` before it
/// ([`Condition::holds`]); every call for a rule without one. What a shadow report of
/// a conditional rule compares ([`crate::shadow_report`] over these).
pub fn calls_under_condition(
    calls: &[crate::PastCall],
    runs: &[PastRun],
    rule: &crate::ToolRule,
) -> Vec<crate::PastCall> {
    if rule.condition().is_none() {
        return calls.to_vec();
    }
    calls
        .iter()
        .filter(|call| {
            let context = CallContext::new(&call.args, &call.target_id);
            applies_at(rule, context, runs, call.at)
        })
        .cloned()
        .collect()
}

/// Whether `rule` would have applied to a call (`call`) decided at `at`, its condition
/// judged on the `runs` before `at` ([`Condition::holds`], [`Condition::applies`]):
/// always for a rule without one. What a shadow report counts
/// ([`calls_under_condition`]) and a confirmation's shadow verdict reads, one call at
/// a time.
pub fn applies_at(
    rule: &crate::ToolRule,
    call: CallContext<'_>,
    runs: &[PastRun],
    at: OffsetDateTime,
) -> bool {
    let Some(condition) = rule.condition() else {
        return true;
    };
    let before: Vec<PastRun> = runs.iter().filter(|run| run.at < at).cloned().collect();
    let holds = condition.holds(rule.pattern(), Some(call), &before, at);
    Condition::applies(rule.action(), holds)
}

/// [`crate::backtest`] of a rule with a condition: only the calls at whose decision
/// the condition applied ([`calls_under_condition`], judged on the agent's `runs`
/// before each) are replayed, as the decision point would have judged them. A rule
/// without one is replayed on every call it covers.
pub fn backtest_given(
    calls: &[crate::PastCall],
    runs: &[PastRun],
    agent: &str,
    rule: &crate::ToolRule,
) -> crate::Backtest {
    crate::backtest(&calls_under_condition(calls, runs, rule), agent, rule)
}

/// `3600` as `1h`, `90` as `90s`: the largest unit that divides it.
fn describe_span(seconds: u32) -> String {
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds.is_multiple_of(size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// A summed value: whole numbers exactly, others as floating point.
#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl std::ops::AddAssign for Number {
    fn add_assign(&mut self, other: Self) {
        *self = match (*self, other) {
            (Self::Int(a), Self::Int(b)) => Self::Int(a.saturating_add(b)),
            (a, b) => Self::Float(a.as_f64() + b.as_f64()),
        };
    }
}

impl Number {
    #[allow(clippy::cast_precision_loss)]
    fn as_f64(self) -> f64 {
        match self {
            Self::Int(n) => n as f64,
            Self::Float(f) => f,
        }
    }
}

/// The number a value holds (a JSON number, or a string holding one), or `None`.
fn number(value: &Value) -> Option<Number> {
    let parse = |n: &serde_json::Number| {
        n.as_i64()
            .map(|i| Number::Int(i128::from(i)))
            .or_else(|| n.as_u64().map(|u| Number::Int(i128::from(u))))
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(Number::Float))
    };
    match value {
        Value::Number(n) => parse(n),
        Value::String(text) => text
            .trim()
            .parse::<serde_json::Number>()
            .ok()
            .and_then(|n| parse(&n)),
        _ => None,
    }
}

impl Number {
    /// Whether it is above `other`, by value, whole or not.
    fn gt(self, other: Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a > b,
            (a, b) => a.as_f64() > b.as_f64(),
        }
    }
}

/// Parses a rate as typed: `N/SPAN` (`5/1h`), the span read by `parse_span`.
pub fn parse_rate(
    text: &str,
    parse_span: impl Fn(&str) -> Result<Duration, String>,
) -> Result<(u32, Duration), String> {
    let bad = || format!("expected N/SPAN such as 5/1h, got {text:?}");
    let (count, span) = text.trim().split_once('/').ok_or_else(bad)?;
    let count: u32 = count.trim().parse().map_err(|_| bad())?;
    if count == 0 {
        return Err(bad());
    }
    let span = parse_span(span.trim()).map_err(|e| format!("{} ({e})", bad()))?;
    Ok((count, span))
}

/// A span as a condition's window in seconds, or why it cannot be one.
pub fn window_seconds(span: Duration) -> Result<u32, String> {
    let seconds = span.whole_seconds();
    u32::try_from(seconds)
        .ok()
        .filter(|s| *s > 0 && *s <= MAX_WINDOW_SECONDS && span.subsec_nanoseconds() == 0)
        .ok_or_else(|| format!("a condition's window is from 1s to 366d, got {seconds} seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-02 12:00 UTC);

    fn run(tool: &str, args: Value, ago: i64, succeeded: Option<bool>) -> PastRun {
        PastRun {
            tool_name: tool.to_owned(),
            args,
            target_id: "/w".to_owned(),
            at: NOW - Duration::seconds(ago),
            succeeded,
            here: true,
        }
    }

    fn after(count: u32, window_seconds: u32) -> Condition {
        Condition::new(
            When::After {
                count,
                window_seconds,
            },
            None,
        )
        .expect("a condition")
    }

    #[test]
    fn its_json_is_the_documented_shape() {
        let total = Condition::new(
            When::Total {
                pointer: "/cents".into(),
                over: 50_000,
                per_seconds: 86_400,
            },
            Some(2),
        )
        .expect("a condition");
        let json = serde_json::to_value(&total).expect("json");
        assert_eq!(
            json,
            json!({"when": {"kind": "total", "pointer": "/cents", "over": 50000, "perSeconds": 86400}, "approvals": 2})
        );
        assert_eq!(
            serde_json::from_value::<Condition>(json).expect("read back"),
            total
        );
        let only: Condition = serde_json::from_value(json!({"when": {"kind": "onlyAfter",
            "pattern": "Bash(cargo test:*)", "withinSeconds": 900, "succeeded": true}}))
        .expect("read");
        assert_eq!(
            only.describe(),
            "--only-after Bash(cargo test:*) --within 15m --succeeded"
        );
        assert!(
            serde_json::from_value::<Condition>(json!({"when": {"kind": "sometimes"}})).is_err()
        );
    }

    #[test]
    fn bad_conditions_are_refused() {
        for (when, approvals) in [
            (
                When::After {
                    count: 0,
                    window_seconds: 60,
                },
                None,
            ),
            (
                When::After {
                    count: 1,
                    window_seconds: 0,
                },
                None,
            ),
            (
                When::Total {
                    pointer: "cents".into(),
                    over: 1,
                    per_seconds: 60,
                },
                None,
            ),
            (
                When::OnlyAfter {
                    pattern: "Bash(".into(),
                    within_seconds: 60,
                    succeeded: false,
                },
                None,
            ),
            (
                When::After {
                    count: 1,
                    window_seconds: 60,
                },
                Some(0),
            ),
        ] {
            assert!(Condition::new(when.clone(), approvals).is_err(), "{when:?}");
        }
        let span = |s: &str| match s {
            "1h" => Ok(Duration::hours(1)),
            other => Err(format!("bad {other}")),
        };
        assert_eq!(parse_rate("5/1h", span), Ok((5, Duration::hours(1))));
        for bad in ["5", "0/1h", "x/1h", "5/1x", "-1/1h"] {
            assert!(parse_rate(bad, span).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sequence_needs_a_run_in_the_window_that_succeeded_here() {
        let only = Condition::new(
            When::OnlyAfter {
                pattern: "Bash(cargo test:*)".into(),
                within_seconds: 900,
                succeeded: true,
            },
            None,
        )
        .expect("a condition");
        let push = json!({"command": "git push"});
        let holds = |runs: &[PastRun]| {
            only.holds(
                "Bash(git push:*)",
                Some(CallContext::new(&push, "/w")),
                runs,
                NOW,
            )
        };
        let test = json!({"command": "cargo test"});
        assert_eq!(holds(&[]), Coverage::No);
        assert_eq!(
            holds(&[run("Bash", test.clone(), 60, Some(true))]),
            Coverage::Yes
        );
        assert_eq!(
            holds(&[run("Bash", test.clone(), 60, Some(false))]),
            Coverage::No
        );
        assert_eq!(holds(&[run("Bash", test.clone(), 60, None)]), Coverage::No);
        assert_eq!(
            holds(&[run("Bash", test.clone(), 901, Some(true))]),
            Coverage::No
        );
        // A chained command is not the test that must come first.
        assert_eq!(
            holds(&[run(
                "Bash",
                json!({"command": "cargo test; rm -rf x"}),
                60,
                Some(true)
            )]),
            Coverage::No
        );
        let mut synced = run("Bash", test, 60, Some(true));
        synced.here = false;
        assert_eq!(holds(&[synced]), Coverage::No);
    }

    #[test]
    fn a_total_counts_this_call_and_is_unsure_without_its_argument() {
        let total = Condition::new(
            When::Total {
                pointer: "/cents".into(),
                over: 50_000,
                per_seconds: 86_400,
            },
            None,
        )
        .expect("a condition");
        let holds = |args: Value, runs: &[PastRun]| {
            total.holds("refund", Some(CallContext::new(&args, "o1")), runs, NOW)
        };
        let past = [
            run("refund", json!({"cents": 30_000}), 3_600, Some(true)),
            run("refund", json!({"cents": 30_000}), 90_000, Some(true)),
            run("other", json!({"cents": 90_000}), 60, Some(true)),
        ];
        assert_eq!(holds(json!({"cents": 20_000}), &past), Coverage::No);
        assert_eq!(holds(json!({"cents": 20_001}), &past), Coverage::Yes);
        assert_eq!(holds(json!({"cents": "20001"}), &past), Coverage::Yes);
        assert_eq!(holds(json!({}), &past), Coverage::Unsure);
        assert_eq!(holds(json!({"cents": "lots"}), &past), Coverage::Unsure);
        assert_eq!(holds(json!({"cents": 50_001}), &[]), Coverage::Yes);
        assert!(Condition::applies(RuleAction::Ask, Coverage::Unsure));
        assert!(!Condition::applies(RuleAction::Allow, Coverage::Unsure));
        assert!(!Condition::applies(RuleAction::Audit, Coverage::Unsure));
    }

    proptest! {
        /// A rate counts exactly the covered runs in (now - window, now]: the rule
        /// applies from the `count`-th such run on, whatever else ran around them.
        #[test]
        fn a_rate_counts_the_window_exactly(
            ages in proptest::collection::vec((0i64..7_200, any::<bool>()), 0..40),
            count in 1u32..10,
            window in 1u32..3_600,
        ) {
            let runs: Vec<PastRun> = ages
                .iter()
                .map(|(ago, ours)| run(if *ours { "send" } else { "read" }, json!({}), *ago, Some(true)))
                .collect();
            let expected = ages
                .iter()
                .filter(|(ago, ours)| *ours && *ago < i64::from(window))
                .count();
            let holds = after(count, window).holds("send", None, &runs, NOW);
            let want = if expected >= count as usize { Coverage::Yes } else { Coverage::No };
            prop_assert_eq!(holds, want);
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;
    use crate::{AgentPolicy, ToolMode, ToolRule, ToolSpec};
    use serde_json::json;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-02 12:00 UTC);

    /// A conditional rule counts the fail-closed way until judged, and as judged after.
    #[test]
    fn a_conditional_rule_is_judged_per_call() {
        let send = ToolSpec::new(
            "send",
            "Send.",
            ToolMode::Immediate,
            json!({"type": "object"}),
        );
        let rate = Condition::new(
            When::After {
                count: 1,
                window_seconds: 3_600,
            },
            Some(2),
        )
        .expect("a condition");
        let ask = ToolRule::new("send", RuleAction::Ask)
            .expect("a rule")
            .when(rate);
        let policy = AgentPolicy::new(["c"]).with_rule(ask);
        // Not judged: an ask counts.
        assert_eq!(policy.route(&send), RuleAction::Ask);
        let args = json!({});
        let call = Some(CallContext::new(&args, "t"));
        let first = policy.given(&[], call, NOW);
        assert_eq!(first.route_call(&send, call), RuleAction::Allow);
        assert_eq!(first.condition_approvals("send", call), None);
        let ran = [PastRun {
            tool_name: "send".into(),
            args: json!({}),
            target_id: "t".into(),
            at: NOW - Duration::minutes(5),
            succeeded: Some(true),
            here: true,
        }];
        let second = policy.given(&ran, call, NOW);
        assert_eq!(second.route_call(&send, call), RuleAction::Ask);
        assert_eq!(second.condition_approvals("send", call), Some(2));

        // An allow after a sequence: not judged, it does not allow; judged, as found.
        let push = ToolSpec::new(
            "Bash",
            "Shell.",
            ToolMode::Deferred,
            json!({"type": "object"}),
        );
        let only = Condition::new(
            When::OnlyAfter {
                pattern: "Bash(cargo test:*)".into(),
                within_seconds: 900,
                succeeded: false,
            },
            None,
        )
        .expect("a condition");
        let allow = ToolRule::new("Bash(git push:*)", RuleAction::Allow)
            .expect("a rule")
            .when(only);
        let policy = AgentPolicy::new(["c"]).with_rule(allow);
        let args = json!({"command": "git push"});
        let call = Some(CallContext::new(&args, "/w"));
        assert_eq!(policy.route_call(&push, call), RuleAction::Ask);
        assert_eq!(
            policy.given(&[], call, NOW).route_call(&push, call),
            RuleAction::Ask
        );
        let tested = [PastRun {
            tool_name: "Bash".into(),
            args: json!({"command": "cargo test --all"}),
            target_id: "/w".into(),
            at: NOW - Duration::minutes(5),
            succeeded: None,
            here: true,
        }];
        let given = policy.given(&tested, call, NOW);
        assert_eq!(given.route_call(&push, call), RuleAction::Allow);
        let by = given.allowed_by_call(&push, call).expect("allowed");
        assert_eq!(by["rule"]["condition"]["when"]["kind"], "onlyAfter");
    }

    /// A backtest of a conditional rule replays only the calls at whose decision its
    /// condition applied, judged on the runs strictly before each (a run at the same
    /// instant, the call's own, does not count).
    #[test]
    fn a_backtest_judges_the_condition_per_past_call() {
        let only = Condition::new(
            When::OnlyAfter {
                pattern: "set_title".into(),
                within_seconds: 900,
                succeeded: false,
            },
            None,
        )
        .expect("a condition");
        let allow = ToolRule::new("send", RuleAction::Allow)
            .expect("a rule")
            .when(only);
        let call = |minute: i64, outcome| crate::PastCall {
            decision_id: format!("d{minute}"),
            change_set_id: format!("s{minute}"),
            item_index: 0,
            agent_id: "a".into(),
            tool_name: "send".into(),
            outcome,
            undone: false,
            reason: None,
            reviewer: Some("ann".into()),
            at: NOW + Duration::minutes(minute),
            automatic: false,
            definition: None,
            args: json!({}),
            target_id: "t".into(),
        };
        let calls = [
            call(0, crate::PastOutcome::ConfirmedUnchanged),
            call(5, crate::PastOutcome::Rejected),
            call(10, crate::PastOutcome::ConfirmedUnchanged),
            call(30, crate::PastOutcome::Rejected),
        ];
        let title = PastRun {
            tool_name: "set_title".into(),
            args: json!({}),
            target_id: "t".into(),
            at: NOW + Duration::minutes(5),
            succeeded: Some(true),
            here: true,
        };
        let result = backtest_given(&calls, std::slice::from_ref(&title), "a", &allow);
        // Not at 0 (nothing before) nor at 5 (the title at the same instant), at 10,
        // not at 30 (out of the window).
        assert_eq!(
            (result.calls, result.would_run_unasked),
            (1, 1),
            "{result:?}"
        );
        assert!(result.let_through.is_empty(), "{result:?}");
        let context = CallContext::new(&calls[2].args, "t");
        assert!(applies_at(
            &allow,
            context,
            std::slice::from_ref(&title),
            calls[2].at
        ));
        assert!(!applies_at(&allow, context, &[title], calls[1].at));
        let plain = ToolRule::new("send", RuleAction::Allow).expect("a rule");
        assert_eq!(backtest_given(&calls, &[], "a", &plain).calls, 4);
    }
}
