//! Fail-closed execution policy (ADR 0004): may this agent run this tool on this
//! target, and should a person be asked first?

use crate::{ToolMode, ToolSpec, ToolsError};
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};

/// What a rule (or a tool's mode) says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleAction {
    /// Run without asking.
    Allow,
    /// Ask a person first (queue in a change set).
    Ask,
    /// Never run.
    Deny,
}

impl RuleAction {
    /// The stable name: `allow`, `ask` or `deny`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl std::str::FromStr for RuleAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Self::Allow),
            "ask" => Ok(Self::Ask),
            "deny" => Ok(Self::Deny),
            other => Err(format!(
                "unknown rule action {other:?} (expected allow, ask or deny)"
            )),
        }
    }
}

/// A per-agent rule: tools whose name matches `pattern` (`*` matches any run of
/// characters) get `action`, until `expires_at` when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    pattern: String,
    action: RuleAction,
    expires_at: Option<OffsetDateTime>,
}

impl ToolRule {
    /// A rule; the pattern must be non-empty and only `*` is special.
    pub fn new(pattern: impl Into<String>, action: RuleAction) -> Result<Self, ToolsError> {
        let pattern = pattern.into();
        if pattern.trim().is_empty() {
            return Err(ToolsError::InvalidPattern {
                pattern,
                reason: "a pattern must not be empty".into(),
            });
        }
        Ok(Self {
            pattern,
            action,
            expires_at: None,
        })
    }

    /// The same rule, in force until `expires_at` (exclusive) only.
    #[must_use]
    pub fn until(self, expires_at: OffsetDateTime) -> Self {
        Self {
            expires_at: Some(expires_at),
            ..self
        }
    }

    /// When the rule stops applying; `None` for a rule that never expires.
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        self.expires_at
    }

    /// Whether the rule still applies at `now`: it has no expiry, or `now` is before it.
    pub fn is_in_force(&self, now: OffsetDateTime) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }

    /// Whether the rule covers `tool_name` ([`name_matches`], as for every setting).
    pub fn matches(&self, tool_name: &str) -> bool {
        name_matches(&self.pattern, tool_name)
    }

    /// The pattern.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The rule's action.
    pub fn action(&self) -> RuleAction {
        self.action
    }
}

/// Whether a rule's or a tool setting's `pattern` covers the tool named `name`: the one
/// function that decides it for rules, quorums, holds and shadow rules alike, so a
/// setting can never be accepted for a pattern and then looked up by exact name.
/// `*` matches any run of characters; everything else matches itself.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    glob_matches(pattern, name)
}

/// `*`-only glob matching, iterative (no backtracking blow-up on long names).
fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// What is known about the category of the entity a call would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetCategory {
    /// The entity's category.
    Known(String),
    /// The entity has no category (or does not exist).
    Missing,
    /// Looking it up failed; treated as a denial.
    LookupFailed(String),
}

/// The verdict of the policy on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run it now.
    Allow,
    /// Queue it for a person.
    Ask,
    /// Refuse it, with the reason the agent and the audit trail see.
    Deny {
        /// E.g. `Category home not in allowed set`.
        reason: String,
    },
}

impl PolicyDecision {
    /// Whether the call may not run at all.
    pub fn is_deny(&self) -> bool {
        matches!(self, Self::Deny { .. })
    }
}

/// One agent's policy: which categories of entities it may touch, and rules by tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentPolicy {
    allowed_categories: BTreeSet<String>,
    rules: Vec<ToolRule>,
}

impl AgentPolicy {
    /// A policy allowing `categories` and no rules.
    pub fn new<I, S>(categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            allowed_categories: categories.into_iter().map(Into::into).collect(),
            rules: Vec::new(),
        }
    }

    /// The same policy with one more rule.
    #[must_use]
    pub fn with_rule(mut self, rule: ToolRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The same policy with `rule` as the rule for its pattern: in the place of the
    /// first rule for that pattern (any later ones go), or last when there was none.
    #[must_use]
    pub fn with_rule_replaced(mut self, rule: ToolRule) -> Self {
        let mut replaced = false;
        let mut rules = Vec::with_capacity(self.rules.len() + 1);
        for existing in self.rules.drain(..) {
            if existing.pattern() != rule.pattern() {
                rules.push(existing);
            } else if !replaced {
                rules.push(rule.clone());
                replaced = true;
            }
        }
        if !replaced {
            rules.push(rule);
        }
        self.rules = rules;
        self
    }

    /// The allowed categories.
    pub fn allowed_categories(&self) -> impl Iterator<Item = &str> {
        self.allowed_categories.iter().map(String::as_str)
    }

    /// The rules, in the order added.
    pub fn rules(&self) -> &[ToolRule] {
        &self.rules
    }

    /// The policy as it stands at `now`: the same categories, without the rules that
    /// expired by then (a tool they covered falls back to the other rules or its mode).
    #[must_use]
    pub fn in_force(&self, now: OffsetDateTime) -> Self {
        Self {
            allowed_categories: self.allowed_categories.clone(),
            rules: self
                .rules
                .iter()
                .filter(|rule| rule.is_in_force(now))
                .cloned()
                .collect(),
        }
    }

    /// What the rules alone say about a tool named `tool_name` (deny over ask over
    /// allow among the matching rules), or `None` when no rule matches: the tool's
    /// mode decides then.
    pub fn ruled(&self, tool_name: &str) -> Option<RuleAction> {
        self.rules
            .iter()
            .filter(|r| r.matches(tool_name))
            .map(ToolRule::action)
            .max()
    }

    /// What lets `tool` run without a person, for the audit trail (`allowedBy`): the
    /// allowing rule with its pattern and expiry, or the tool's mode when no rule
    /// covers it; `None` when the rules and mode would ask or deny.
    pub fn allowed_by(&self, tool: &ToolSpec) -> Option<serde_json::Value> {
        if self.route(tool) != RuleAction::Allow {
            return None;
        }
        let rule = self
            .rules
            .iter()
            .find(|rule| rule.action() == RuleAction::Allow && rule.matches(&tool.name));
        Some(match rule {
            Some(rule) => {
                let mut shown = serde_json::json!({"pattern": rule.pattern(), "action": "allow"});
                if let Some(at) = rule.expires_at()
                    && let Ok(at) = at.format(&time::format_description::well_known::Rfc3339)
                {
                    shown["expiresAt"] = serde_json::Value::String(at);
                }
                serde_json::json!({ "rule": shown })
            }
            None => serde_json::json!({"mode": "immediate"}),
        })
    }

    /// The category allowlist, fail-closed: unknown or failed lookups deny.
    pub fn check_category(&self, target: &TargetCategory) -> Result<(), String> {
        match target {
            TargetCategory::Known(category) if self.allowed_categories.contains(category) => Ok(()),
            TargetCategory::Known(category) => {
                Err(format!("Category {category} not in allowed set"))
            }
            TargetCategory::Missing => Err("Target entity has no category".to_owned()),
            TargetCategory::LookupFailed(why) => Err(format!("Category lookup failed: {why}")),
        }
    }

    /// The routing for `tool` from the rules alone: deny over ask over allow among the
    /// matching rules, else the tool's mode (deferred → ask, otherwise allow). A tool
    /// in [`ToolMode::Review`] is asked about even when a rule allows it.
    pub fn route(&self, tool: &ToolSpec) -> RuleAction {
        let ruled = self.ruled(&tool.name);
        match tool.mode {
            ToolMode::Review => ruled.map_or(RuleAction::Ask, |action| action.max(RuleAction::Ask)),
            ToolMode::Deferred => ruled.unwrap_or(RuleAction::Ask),
            ToolMode::Immediate | ToolMode::Local => ruled.unwrap_or(RuleAction::Allow),
        }
    }

    /// The full decision: the category check first (a denial there wins), then the
    /// rules. A denying rule names the tool.
    pub fn decide(&self, tool: &ToolSpec, target: &TargetCategory) -> PolicyDecision {
        if let Err(reason) = self.check_category(target) {
            return PolicyDecision::Deny { reason };
        }
        match self.route(tool) {
            RuleAction::Allow => PolicyDecision::Allow,
            RuleAction::Ask => PolicyDecision::Ask,
            RuleAction::Deny => PolicyDecision::Deny {
                reason: format!("Tool {} is denied by policy", tool.name),
            },
        }
    }
}

/// An agent's per-tool settings beyond allow/ask/deny (`assent agent ask … --approvals
/// N`, `assent agent hold`), each keyed by a name pattern matched as rules are
/// ([`name_matches`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolSettingsTable {
    entries: Vec<ToolSettingEntry>,
}

/// One pattern's settings: a quorum and a hold window, each absent when not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettingEntry {
    /// The tool name or pattern the settings cover.
    pub pattern: String,
    /// How many distinct people must confirm (none set: one).
    pub approvals: Option<u32>,
    /// The hold window in seconds (none set: no window).
    pub hold_seconds: Option<u32>,
}

/// What a call of one tool needs from people before it runs, by the settings in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirements {
    /// Distinct people who must confirm it (at least 1).
    pub approvals_needed: u32,
    /// How long a confirmation waits before it runs, when the tool is held.
    pub hold: Option<Duration>,
}

impl Default for Requirements {
    fn default() -> Self {
        Self {
            approvals_needed: 1,
            hold: None,
        }
    }
}

impl ToolSettingsTable {
    /// A table of `entries`.
    pub fn new(entries: Vec<ToolSettingEntry>) -> Self {
        Self { entries }
    }

    /// The entries, as stored.
    pub fn entries(&self) -> &[ToolSettingEntry] {
        &self.entries
    }

    /// What a call of `tool_name` needs: of every entry whose pattern covers it, the
    /// largest quorum and the longest hold (the strictest setting wins, as deny wins
    /// among rules).
    pub fn requirements(&self, tool_name: &str) -> Requirements {
        let covering = || {
            self.entries
                .iter()
                .filter(|entry| name_matches(&entry.pattern, tool_name))
        };
        Requirements {
            approvals_needed: covering()
                .filter_map(|entry| entry.approvals)
                .max()
                .unwrap_or(1)
                .max(1),
            hold: covering()
                .filter_map(|entry| entry.hold_seconds)
                .filter(|seconds| *seconds > 0)
                .max()
                .map(|seconds| Duration::seconds(i64::from(seconds))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_rule_keeps_the_first_place_of_its_pattern() {
        let rule = |pattern: &str, action| ToolRule::new(pattern, action).unwrap();
        let policy = AgentPolicy::new(["work"])
            .with_rule(rule("a", RuleAction::Allow))
            .with_rule(rule("b", RuleAction::Ask))
            .with_rule(rule("a", RuleAction::Deny));
        let replaced = policy.with_rule_replaced(rule("a", RuleAction::Ask));
        let shown: Vec<(&str, RuleAction)> = replaced
            .rules()
            .iter()
            .map(|r| (r.pattern(), r.action()))
            .collect();
        assert_eq!(shown, [("a", RuleAction::Ask), ("b", RuleAction::Ask)]);
        let added = replaced.with_rule_replaced(rule("c", RuleAction::Allow));
        assert_eq!(added.rules().last().map(ToolRule::pattern), Some("c"));
    }
    use serde_json::json;

    #[test]
    fn a_tool_under_review_is_asked_about_even_when_a_rule_allows_it() {
        let changed = tool("write_file", ToolMode::Review);
        let allowed = AgentPolicy::new(["mcp"])
            .with_rule(ToolRule::new("write_file", RuleAction::Allow).expect("a rule"));
        assert_eq!(allowed.route(&changed), RuleAction::Ask);
        assert_eq!(AgentPolicy::new(["mcp"]).route(&changed), RuleAction::Ask);
        let denied = AgentPolicy::new(["mcp"])
            .with_rule(ToolRule::new("write_*", RuleAction::Deny).expect("a rule"));
        assert_eq!(denied.route(&changed), RuleAction::Deny);
    }

    fn tool(name: &str, mode: ToolMode) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            args_schema: json!({"type": "object"}),
            mode,
            batch: None,
            summary: None,
            title: None,
            compensation: None,
        }
    }

    fn known(c: &str) -> TargetCategory {
        TargetCategory::Known(c.into())
    }

    #[test]
    fn an_expired_rule_no_longer_applies_and_the_mode_decides_again() {
        let at = |hour: u8| {
            time::macros::datetime!(2026-03-02 00:00 UTC) + time::Duration::hours(i64::from(hour))
        };
        let deferred = tool("set_task_status", ToolMode::Deferred);
        let rule = ToolRule::new("set_task_status", RuleAction::Allow)
            .expect("a rule")
            .until(at(12));
        assert_eq!(rule.expires_at(), Some(at(12)));
        assert!(rule.is_in_force(at(11)));
        assert!(!rule.is_in_force(at(12)), "the expiry is exclusive");
        let policy = AgentPolicy::new(["work"])
            .with_rule(rule)
            .with_rule(ToolRule::new("other", RuleAction::Deny).expect("a rule"));
        assert_eq!(policy.in_force(at(11)).route(&deferred), RuleAction::Allow);
        let later = policy.in_force(at(13));
        assert_eq!(later.route(&deferred), RuleAction::Ask);
        assert_eq!(later.rules().len(), 1, "the permanent rule stays");
        assert_eq!(later.ruled("other"), Some(RuleAction::Deny));
        assert_eq!(later.ruled("set_task_status"), None);
        assert_eq!(
            later.allowed_categories().collect::<Vec<_>>(),
            ["work"],
            "the categories stay"
        );
    }

    #[test]
    fn glob() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("set_task_*", "set_task_status"));
        assert!(glob_matches("*_task_*", "update_task_priority"));
        assert!(!glob_matches("set_task_*", "update_task_priority"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(ToolRule::new("  ", RuleAction::Deny).is_err());
    }

    #[test]
    fn category_allowlist_is_fail_closed() {
        let p = AgentPolicy::new(["work"]);
        let t = tool("set_task_title", ToolMode::Deferred);
        assert_eq!(p.decide(&t, &known("work")), PolicyDecision::Ask);
        assert_eq!(
            p.decide(&t, &known("home")),
            PolicyDecision::Deny {
                reason: "Category home not in allowed set".into()
            }
        );
        assert_eq!(
            p.decide(&t, &TargetCategory::Missing),
            PolicyDecision::Deny {
                reason: "Target entity has no category".into()
            }
        );
        assert!(
            p.decide(&t, &TargetCategory::LookupFailed("db down".into()))
                .is_deny()
        );
        assert!(AgentPolicy::default().decide(&t, &known("work")).is_deny());
    }

    #[test]
    fn deny_over_ask_over_allow_defaulting_to_mode() {
        let deferred = tool("set_task_status", ToolMode::Deferred);
        let immediate = tool("set_task_language", ToolMode::Immediate);
        let base = AgentPolicy::new(["work"]);
        assert_eq!(base.route(&deferred), RuleAction::Ask);
        assert_eq!(base.route(&immediate), RuleAction::Allow);

        let rule = |p: &str, a| ToolRule::new(p, a).expect("valid");
        let p = base
            .clone()
            .with_rule(rule("*", RuleAction::Allow))
            .with_rule(rule("set_task_*", RuleAction::Ask));
        assert_eq!(p.route(&immediate), RuleAction::Ask);
        let p = p.with_rule(rule("set_task_status", RuleAction::Deny));
        assert_eq!(p.route(&deferred), RuleAction::Deny);
        assert_eq!(
            p.decide(&deferred, &known("work")),
            PolicyDecision::Deny {
                reason: "Tool set_task_status is denied by policy".into()
            }
        );
        let allow_all = base.with_rule(rule("*", RuleAction::Allow));
        assert_eq!(allow_all.route(&deferred), RuleAction::Allow);
    }

    #[test]
    fn a_setting_on_a_pattern_covers_what_a_rule_on_it_covers() {
        let entry = |pattern: &str, approvals, hold_seconds| ToolSettingEntry {
            pattern: pattern.into(),
            approvals,
            hold_seconds,
        };
        let table = ToolSettingsTable::new(vec![
            entry("update_task_*", Some(2), None),
            entry("update_task_estimate", None, Some(30)),
            entry("*", Some(3), Some(0)),
        ]);
        let needs = table.requirements("update_task_estimate");
        assert_eq!(
            needs.approvals_needed, 3,
            "the strictest quorum covering it"
        );
        assert_eq!(needs.hold, Some(Duration::seconds(30)));
        let table = ToolSettingsTable::new(vec![entry("update_task_*", Some(2), Some(10))]);
        assert_eq!(
            table.requirements("update_task_priority"),
            Requirements {
                approvals_needed: 2,
                hold: Some(Duration::seconds(10))
            }
        );
        assert_eq!(table.requirements("set_title"), Requirements::default());
        assert_eq!(
            ToolSettingsTable::default().requirements("x"),
            Requirements::default()
        );
    }

    proptest::proptest! {
        /// The invariant of the decision point: a quorum set on a pattern binds exactly
        /// the tools a rule on that same pattern covers.
        #[test]
        fn settings_and_rules_match_names_the_same_way(
            pattern in "[a-c_*]{1,6}",
            name in "[a-c_]{0,6}",
        ) {
            let rule = ToolRule::new(pattern.clone(), RuleAction::Ask).expect("non-empty");
            let table = ToolSettingsTable::new(vec![ToolSettingEntry {
                pattern: pattern.clone(),
                approvals: Some(2),
                hold_seconds: None,
            }]);
            proptest::prop_assert_eq!(
                rule.matches(&name),
                table.requirements(&name).approvals_needed == 2
            );
        }
    }
}
