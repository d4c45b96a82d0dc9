//! The policy file (`assent policy export|plan|apply`, issue 57): every agent's
//! settings as one TOML document a team reviews in a pull request, read and written
//! here, and the plan that turns the settings in force into the file's, computed here
//! too. Pure: the store reads the settings in force into [`AgentEntry`]s and applies a
//! [`PolicyPlan`]'s changes; nothing here touches a database or a clock.
//!
//! The format (version 1), one `[[agents]]` table per agent:
//!
//! ```toml
//! version = 1
//!
//! [[agents]]
//! id = "claude"
//! categories = ["work"]
//! remember_rejections = "7d"          # how long a rejected call is refused again; "0": never
//! idempotent = ["send_invoice"]       # run again when a crash left a call in doubt
//! run_after_disconnect = ["mcp__*"]   # MCP calls confirmed after their chat ended may run
//!
//! [agents.quorums]                    # tool -> how many distinct people confirm each call
//! send_invoice = 2
//!
//! [agents.holds]                      # tool -> seconds a confirmed call waits, cancellable
//! deploy = 300
//!
//! [[agents.rules]]
//! tool = "Bash(git status:*)"
//! action = "allow"
//! expires = "2026-04-01T09:00:00Z"    # absolute RFC 3339; left out: for good
//!
//! [[agents.rules]]                    # a rule over the session's history
//! tool = "refund"
//! action = "ask"
//! condition = { when = { kind = "total", pointer = "/cents", over = 50000, perSeconds = 86400 }, approvals = 2 }
//!
//! [[agents.shadow_rules]]             # tried without effect (`assent agent shadow-report`)
//! tool = "Read"
//! action = "allow"
//! ```
//!
//! A rule's (and a shadow rule's) `condition` is [`Condition`]'s own JSON shape in TOML
//! (`kind` `after` with `count` and `windowSeconds`, `onlyAfter` with `pattern`,
//! `withinSeconds` and `succeeded`, `total` with `pointer`, `over` and `perSeconds`;
//! `approvals` beside `when`), checked as the command line's `--after`, `--only-after`
//! and `--total` are; a deny takes none.
//!
//! Extension point: a rule's `action` is parsed by [`RuleAction`]'s own `FromStr`, so
//! an action added there is accepted here with no change; a new key of a rule is a new
//! optional field of [`RuleEntry`], compared in [`plan`] with the rest of the rule.
//! Unknown keys are an error naming the key, its line and column.

use crate::{Condition, RuleAction, ToolRule, ToolsError};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// The one version of the format this build reads and writes.
pub const POLICY_FILE_VERSION: u32 = 1;

/// A whole policy file: its version and its agents, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawFile")]
pub struct PolicyFile {
    /// The format's version: [`POLICY_FILE_VERSION`].
    pub version: u32,
    /// Each agent's settings; an agent the file does not name is left as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: u32,
    #[serde(default)]
    agents: Vec<AgentEntry>,
}

impl TryFrom<RawFile> for PolicyFile {
    type Error = String;
    fn try_from(raw: RawFile) -> Result<Self, String> {
        if raw.version != POLICY_FILE_VERSION {
            return Err(format!(
                "version {} is not one this build reads (expected {POLICY_FILE_VERSION})",
                raw.version
            ));
        }
        let mut seen = BTreeSet::new();
        for agent in &raw.agents {
            if !seen.insert(agent.id.as_str()) {
                return Err(format!("agent {:?} is named twice", agent.id));
            }
        }
        Ok(Self {
            version: raw.version,
            agents: raw.agents,
        })
    }
}

/// One agent's settings as the file says them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawAgent")]
pub struct AgentEntry {
    /// The agent's id.
    pub id: String,
    /// The task categories it may change.
    pub categories: Vec<String>,
    /// How long a call a person rejected is refused without asking (`7d`, `12h`, `0`
    /// never); left out: as it is (7 days for an agent that never set it).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "span_out"
    )]
    pub remember_rejections: Option<Duration>,
    /// The tools whose calls left in doubt may simply run again, by name.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub idempotent: BTreeSet<String>,
    /// The tools (names or `*` patterns) whose MCP calls confirmed after their chat
    /// ended may run in a later gateway session.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub run_after_disconnect: BTreeSet<String>,
    /// Quorums: tool name or `*` pattern to how many distinct people (2 or more)
    /// confirm each call.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quorums: BTreeMap<String, u32>,
    /// Hold windows: tool name or `*` pattern to seconds a confirmed call waits,
    /// cancellable, before it runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub holds: BTreeMap<String, u32>,
    /// Its rules, one per pattern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleEntry>,
    /// Its shadow rules, one per pattern, tried without effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow_rules: Vec<ShadowEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    id: String,
    categories: Vec<String>,
    #[serde(default, deserialize_with = "span_in")]
    remember_rejections: Option<Duration>,
    #[serde(default)]
    idempotent: BTreeSet<String>,
    #[serde(default)]
    run_after_disconnect: BTreeSet<String>,
    #[serde(default)]
    quorums: BTreeMap<String, u32>,
    #[serde(default)]
    holds: BTreeMap<String, u32>,
    #[serde(default)]
    rules: Vec<RuleEntry>,
    #[serde(default)]
    shadow_rules: Vec<ShadowEntry>,
}

impl TryFrom<RawAgent> for AgentEntry {
    type Error = String;
    fn try_from(raw: RawAgent) -> Result<Self, String> {
        let id = raw.id.trim().to_owned();
        if id.is_empty() {
            return Err("an agent's id must not be blank".to_owned());
        }
        let categories: Vec<String> = raw
            .categories
            .iter()
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect();
        if categories.is_empty() {
            return Err(format!(
                "agent {id}: categories needs at least one category"
            ));
        }
        let names = |set: BTreeSet<String>, what: &str| -> Result<BTreeSet<String>, String> {
            set.into_iter()
                .map(|tool| setting_tool(&id, tool, what))
                .collect()
        };
        let idempotent = names(raw.idempotent, "idempotent")?;
        let run_after_disconnect = names(raw.run_after_disconnect, "run_after_disconnect")?;
        let numbers = |map: BTreeMap<String, u32>,
                       what: &str,
                       least: u32|
         -> Result<BTreeMap<String, u32>, String> {
            map.into_iter()
                .map(|(tool, n)| {
                    let tool = setting_tool(&id, tool, what)?;
                    if n < least {
                        return Err(format!(
                            "agent {id}: {what} of {tool} must be at least {least}, got {n}"
                        ));
                    }
                    Ok((tool, n))
                })
                .collect()
        };
        let quorums = numbers(raw.quorums, "quorums", 2)?;
        let holds = numbers(raw.holds, "holds", 1)?;
        for (what, patterns) in [
            (
                "rules",
                raw.rules.iter().map(|r| r.rule.pattern()).collect(),
            ),
            (
                "shadow_rules",
                raw.shadow_rules
                    .iter()
                    .map(|r| r.rule.pattern())
                    .collect::<Vec<_>>(),
            ),
        ] {
            let mut seen = BTreeSet::new();
            if let Some(twice) = patterns.into_iter().find(|p| !seen.insert(*p)) {
                return Err(format!(
                    "agent {id}: {what} names {twice} twice (one rule per pattern)"
                ));
            }
        }
        Ok(Self {
            id,
            categories,
            remember_rejections: raw.remember_rejections,
            idempotent,
            run_after_disconnect,
            quorums,
            holds,
            rules: raw.rules,
            shadow_rules: raw.shadow_rules,
        })
    }
}

/// A per-tool setting's tool: a name or `*` pattern, trimmed, one that can match a
/// name (as a rule's would be), and no argument pattern, which a setting kept per tool
/// would keep and never apply.
fn setting_tool(agent: &str, tool: String, what: &str) -> Result<String, String> {
    let tool = tool.trim().to_owned();
    if tool.contains(['(', ')']) {
        return Err(format!(
            "agent {agent}: {what} are kept per tool name or * pattern, not for an argument pattern ({tool})"
        ));
    }
    ToolRule::new(tool.as_str(), RuleAction::Allow)
        .map_err(|e| format!("agent {agent}: {what}: {e}"))?;
    Ok(tool)
}

/// One rule: its tool pattern, action and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    /// The rule, its expiry included.
    pub rule: ToolRule,
    /// Keep the rule even when it names no tool the agent's coding agent sends
    /// (`--any-name`); only read, never written by an export.
    pub any_name: bool,
}

#[derive(Serialize)]
struct RawRule {
    tool: String,
    action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    any_name: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    condition: Option<Condition>,
}

/// A rule as read: each field checked as it is read, so that an error names the
/// value's own line and column.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadRule {
    #[serde(deserialize_with = "pattern_in")]
    tool: String,
    #[serde(deserialize_with = "action_in")]
    action: RuleAction,
    #[serde(default, deserialize_with = "time_in")]
    expires: Option<OffsetDateTime>,
    #[serde(default)]
    any_name: bool,
    #[serde(default, deserialize_with = "condition_in")]
    condition: Option<Condition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadShadow {
    #[serde(deserialize_with = "pattern_in")]
    tool: String,
    #[serde(deserialize_with = "action_in")]
    action: RuleAction,
    #[serde(default, deserialize_with = "condition_in")]
    condition: Option<Condition>,
}

/// A condition over the history, checked as [`Condition::new`] checks one set from the
/// command line, so that a bad count, window or pointer is refused at its own line.
fn condition_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Condition>, D::Error> {
    let read = Condition::deserialize(deserializer)?;
    Condition::new(read.when, read.approvals)
        .map(Some)
        .map_err(D::Error::custom)
}

/// `rule` with `condition`, refused on a deny (a person's later confirmation re-checks
/// the rules without the history, so a conditional deny could not hold).
fn with_condition<E: serde::de::Error>(
    rule: ToolRule,
    condition: Option<Condition>,
) -> Result<ToolRule, E> {
    match condition {
        None => Ok(rule),
        Some(_) if rule.action() == RuleAction::Deny => Err(E::custom(format!(
            "rule {:?}: a condition over the history goes with allow or ask, not deny",
            rule.pattern()
        ))),
        Some(condition) => Ok(rule.when(condition)),
    }
}

fn pattern_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let tool = String::deserialize(deserializer)?.trim().to_owned();
    ToolRule::new(tool.as_str(), RuleAction::Allow).map_err(D::Error::custom)?;
    Ok(tool)
}

/// A rule's action, read by [`RuleAction`]'s own parser: an action added there is
/// read here too.
fn action_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RuleAction, D::Error> {
    String::deserialize(deserializer)?
        .trim()
        .parse()
        .map_err(D::Error::custom)
}

fn time_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<OffsetDateTime>, D::Error> {
    let text = String::deserialize(deserializer)?;
    OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map(Some)
        .map_err(|e| {
            D::Error::custom(format!(
                "expires {text:?} is not an RFC 3339 time such as 2026-04-01T09:00:00Z ({e})"
            ))
        })
}

/// The rule `action` for `tool` (checked as read, so this does not fail).
fn rule_of<E: serde::de::Error>(tool: String, action: RuleAction) -> Result<ToolRule, E> {
    ToolRule::new(tool, action).map_err(E::custom)
}

impl Serialize for RuleEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawRule {
            tool: self.rule.pattern().to_owned(),
            action: self.rule.action().as_str().to_owned(),
            expires: self.rule.expires_at().map(rfc3339),
            any_name: self.any_name,
            condition: self.rule.condition().cloned(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RuleEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = ReadRule::deserialize(deserializer)?;
        let rule = with_condition::<D::Error>(
            rule_of::<D::Error>(read.tool, read.action)?,
            read.condition,
        )?;
        Ok(Self {
            rule: match read.expires {
                Some(at) => rule.until(at),
                None => rule,
            },
            any_name: read.any_name,
        })
    }
}

/// One shadow rule: its tool pattern and action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowEntry {
    /// The rule tried without effect (no expiry).
    pub rule: ToolRule,
}

#[derive(Serialize)]
struct RawShadow {
    tool: String,
    action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    condition: Option<Condition>,
}

impl Serialize for ShadowEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawShadow {
            tool: self.rule.pattern().to_owned(),
            action: self.rule.action().as_str().to_owned(),
            condition: self.rule.condition().cloned(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ShadowEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = ReadShadow::deserialize(deserializer)?;
        Ok(Self {
            rule: with_condition::<D::Error>(
                rule_of::<D::Error>(read.tool, read.action)?,
                read.condition,
            )?,
        })
    }
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// A span as the file writes it: `0`, or whole days, hours, minutes or seconds
/// (`7d`, `12h`, `90m`, `45s`).
pub fn format_span(span: Duration) -> String {
    let seconds = span.whole_seconds();
    match seconds {
        0 => "0".to_owned(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A span as the file reads it: `0`, or a whole number followed by `d`, `h`, `m` or
/// `s`.
pub fn parse_span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let bad = || format!("{text:?} is not a span such as 7d, 12h, 90m, 45s or 0");
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: i64 = number.parse().map_err(|_| bad())?;
    let unit = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => return Err(bad()),
    };
    match n.checked_mul(unit) {
        Some(seconds) if seconds >= 0 => Ok(Duration::seconds(seconds)),
        _ => Err(bad()),
    }
}

fn span_out<S: Serializer>(span: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    match span {
        Some(span) => serializer.serialize_str(&format_span(*span)),
        None => serializer.serialize_none(),
    }
}

fn span_in<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_span(&text)
        .map(Some)
        .map_err(|e| D::Error::custom(format!("remember_rejections: {e}")))
}

impl PolicyFile {
    /// The file `text` says, or [`ToolsError::InvalidPolicyFile`] naming the line and
    /// column of the first thing wrong (an unknown key, a bad action or pattern, a
    /// setting that could match nothing).
    pub fn parse(text: &str) -> Result<Self, ToolsError> {
        toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map_or((1, 1), |span| line_and_column(text, span.start));
            ToolsError::InvalidPolicyFile {
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })
    }

    /// The file as TOML text, agents in the order given (an export sorts them by id).
    pub fn to_toml(&self) -> String {
        // Plain strings, numbers, arrays and tables: serialising cannot fail.
        toml::to_string(self).unwrap_or_default()
    }
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}

/// One change a policy file makes to an agent's settings in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "camelCase")]
#[non_exhaustive]
pub enum PolicyChange {
    /// A new agent, with its categories.
    CreateAgent {
        /// The agent.
        agent: String,
        /// Its categories.
        categories: Vec<String>,
    },
    /// New categories for an agent.
    Categories {
        /// The agent.
        agent: String,
        /// What it had.
        from: Vec<String>,
        /// What it gets.
        to: Vec<String>,
    },
    /// A rule set, or the rule for its pattern replaced.
    SetRule {
        /// The agent.
        agent: String,
        /// The rule it had for that pattern, if any.
        #[serde(serialize_with = "rule_json_opt")]
        from: Option<ToolRule>,
        /// The rule it gets.
        #[serde(serialize_with = "rule_json")]
        to: ToolRule,
        /// Kept even when it names no tool the agent's coding agent sends.
        #[serde(skip)]
        any_name: bool,
    },
    /// A rule the file does not name, removed (`--prune`).
    RemoveRule {
        /// The agent.
        agent: String,
        /// The rule removed.
        #[serde(serialize_with = "rule_json")]
        rule: ToolRule,
    },
    /// A shadow rule set, or the one for its pattern replaced.
    SetShadowRule {
        /// The agent.
        agent: String,
        /// The shadow rule it had for that pattern, if any.
        #[serde(serialize_with = "rule_json_opt")]
        from: Option<ToolRule>,
        /// The shadow rule it gets.
        #[serde(serialize_with = "rule_json")]
        to: ToolRule,
    },
    /// A shadow rule the file does not name, removed (`--prune`).
    RemoveShadowRule {
        /// The agent.
        agent: String,
        /// The shadow rule removed.
        #[serde(serialize_with = "rule_json")]
        rule: ToolRule,
    },
    /// A quorum changed (1: none).
    Quorum {
        /// The agent.
        agent: String,
        /// The tool name or pattern.
        tool: String,
        /// How many people it needed.
        from: u32,
        /// How many it needs.
        to: u32,
    },
    /// A hold window changed (0: none).
    Hold {
        /// The agent.
        agent: String,
        /// The tool name or pattern.
        tool: String,
        /// The seconds it had.
        from: u32,
        /// The seconds it gets.
        to: u32,
    },
    /// The word that a tool is idempotent, given or taken back.
    Idempotent {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// Given (true) or taken back.
        on: bool,
    },
    /// The word that a tool's calls may run after their chat ended, given or taken
    /// back.
    RunAfterDisconnect {
        /// The agent.
        agent: String,
        /// The tool name or pattern.
        tool: String,
        /// Given (true) or taken back.
        on: bool,
    },
    /// How long rejected calls are remembered.
    RememberRejections {
        /// The agent.
        agent: String,
        /// The window it had (`None`: the default).
        #[serde(serialize_with = "span_json_opt")]
        from: Option<Duration>,
        /// The window it gets.
        #[serde(serialize_with = "span_json")]
        to: Duration,
    },
}

fn rule_json<S: Serializer>(rule: &ToolRule, serializer: S) -> Result<S::Ok, S::Error> {
    RuleEntry {
        rule: rule.clone(),
        any_name: false,
    }
    .serialize(serializer)
}

fn rule_json_opt<S: Serializer>(rule: &Option<ToolRule>, serializer: S) -> Result<S::Ok, S::Error> {
    match rule {
        Some(rule) => rule_json(rule, serializer),
        None => serializer.serialize_none(),
    }
}

fn span_json<S: Serializer>(span: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_span(*span))
}

fn span_json_opt<S: Serializer>(span: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    span_out(span, serializer)
}

impl PolicyChange {
    /// The agent it changes.
    pub fn agent(&self) -> &str {
        match self {
            Self::CreateAgent { agent, .. }
            | Self::Categories { agent, .. }
            | Self::SetRule { agent, .. }
            | Self::RemoveRule { agent, .. }
            | Self::SetShadowRule { agent, .. }
            | Self::RemoveShadowRule { agent, .. }
            | Self::Quorum { agent, .. }
            | Self::Hold { agent, .. }
            | Self::Idempotent { agent, .. }
            | Self::RunAfterDisconnect { agent, .. }
            | Self::RememberRejections { agent, .. } => agent,
        }
    }

    /// The change in one line, as `assent policy plan` prints it (`+` added, `~`
    /// changed, `-` removed).
    pub fn line(&self) -> String {
        let rule = |r: &ToolRule| {
            let until = r
                .expires_at()
                .map_or_else(String::new, |at| format!(" until {}", rfc3339(at)));
            format!("{} {}{until}", r.action().as_str(), r.pattern())
        };
        let on = |on: bool| if on { "+" } else { "-" };
        match self {
            Self::CreateAgent { agent, categories } => {
                format!("+ agent {agent} (categories {})", categories.join(", "))
            }
            Self::Categories { agent, from, to } => format!(
                "~ agent {agent}: categories {} -> {}",
                from.join(", "),
                to.join(", ")
            ),
            Self::SetRule {
                agent, from, to, ..
            } => match from {
                Some(from) => format!("~ agent {agent}: rule {} -> {}", rule(from), rule(to)),
                None => format!("+ agent {agent}: rule {}", rule(to)),
            },
            Self::RemoveRule { agent, rule: r } => format!("- agent {agent}: rule {}", rule(r)),
            Self::SetShadowRule { agent, from, to } => match from {
                Some(from) => format!(
                    "~ agent {agent}: shadow rule {} -> {}",
                    rule(from),
                    rule(to)
                ),
                None => format!("+ agent {agent}: shadow rule {}", rule(to)),
            },
            Self::RemoveShadowRule { agent, rule: r } => {
                format!("- agent {agent}: shadow rule {}", rule(r))
            }
            Self::Quorum {
                agent,
                tool,
                from,
                to,
            } => format!("~ agent {agent}: quorum of {tool} {from} -> {to} people"),
            Self::Hold {
                agent,
                tool,
                from,
                to,
            } => format!("~ agent {agent}: hold of {tool} {from} s -> {to} s"),
            Self::Idempotent { agent, tool, on: o } => {
                format!("{} agent {agent}: idempotent {tool}", on(*o))
            }
            Self::RunAfterDisconnect { agent, tool, on: o } => {
                format!("{} agent {agent}: run after disconnect {tool}", on(*o))
            }
            Self::RememberRejections { agent, from, to } => format!(
                "~ agent {agent}: remember rejections {} -> {}",
                from.map_or_else(|| "default".to_owned(), format_span),
                format_span(*to)
            ),
        }
    }
}

/// What applying a file would change, in the order it is applied.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PolicyPlan {
    /// The changes; empty when the file says what is in force.
    pub changes: Vec<PolicyChange>,
}

impl PolicyPlan {
    /// Whether the file changes nothing.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// What turns `current` (the settings in force of the agents there are, as an export
/// would write them) into what `file` says. Without `prune`, rules, shadow rules,
/// quorums, holds and marks the file does not name stay; with it they are removed. An
/// agent the file does not name is never touched. Changes come agent by agent in the
/// file's order: categories, rules, shadow rules, quorums, holds, marks, rejections.
pub fn plan(current: &[AgentEntry], file: &PolicyFile, prune: bool) -> PolicyPlan {
    let mut changes = Vec::new();
    for wanted in &file.agents {
        let agent = wanted.id.clone();
        let had = current.iter().find(|a| a.id == wanted.id);
        let empty = AgentEntry {
            id: agent.clone(),
            categories: Vec::new(),
            remember_rejections: None,
            idempotent: BTreeSet::new(),
            run_after_disconnect: BTreeSet::new(),
            quorums: BTreeMap::new(),
            holds: BTreeMap::new(),
            rules: Vec::new(),
            shadow_rules: Vec::new(),
        };
        match had {
            None => changes.push(PolicyChange::CreateAgent {
                agent: agent.clone(),
                categories: wanted.categories.clone(),
            }),
            Some(had) if had.categories != wanted.categories => {
                changes.push(PolicyChange::Categories {
                    agent: agent.clone(),
                    from: had.categories.clone(),
                    to: wanted.categories.clone(),
                });
            }
            Some(_) => {}
        }
        let had = had.unwrap_or(&empty);

        let rule_for = |rules: &[RuleEntry], pattern: &str| {
            rules
                .iter()
                .find(|r| r.rule.pattern() == pattern)
                .map(|r| r.rule.clone())
        };
        let mut set_patterns = BTreeSet::new();
        for entry in &wanted.rules {
            let from = rule_for(&had.rules, entry.rule.pattern());
            if from.as_ref() != Some(&entry.rule) {
                set_patterns.insert(entry.rule.pattern().to_owned());
                changes.push(PolicyChange::SetRule {
                    agent: agent.clone(),
                    from,
                    to: entry.rule.clone(),
                    any_name: entry.any_name,
                });
            }
        }
        if prune {
            for entry in &had.rules {
                if rule_for(&wanted.rules, entry.rule.pattern()).is_none() {
                    changes.push(PolicyChange::RemoveRule {
                        agent: agent.clone(),
                        rule: entry.rule.clone(),
                    });
                }
            }
        }

        let shadow_for = |rules: &[ShadowEntry], pattern: &str| {
            rules
                .iter()
                .find(|r| r.rule.pattern() == pattern)
                .map(|r| r.rule.clone())
        };
        for entry in &wanted.shadow_rules {
            let from = shadow_for(&had.shadow_rules, entry.rule.pattern());
            // Setting a rule for real removes the shadow rule of its pattern (it
            // promotes it): one the file keeps is set again after it.
            if from.as_ref() != Some(&entry.rule) || set_patterns.contains(entry.rule.pattern()) {
                changes.push(PolicyChange::SetShadowRule {
                    agent: agent.clone(),
                    from,
                    to: entry.rule.clone(),
                });
            }
        }
        if prune {
            for entry in &had.shadow_rules {
                if shadow_for(&wanted.shadow_rules, entry.rule.pattern()).is_none()
                    && !set_patterns.contains(entry.rule.pattern())
                {
                    changes.push(PolicyChange::RemoveShadowRule {
                        agent: agent.clone(),
                        rule: entry.rule.clone(),
                    });
                }
            }
        }

        for (tool, from, to) in numbered(&had.quorums, &wanted.quorums, prune, 1) {
            changes.push(PolicyChange::Quorum {
                agent: agent.clone(),
                tool,
                from,
                to,
            });
        }
        for (tool, from, to) in numbered(&had.holds, &wanted.holds, prune, 0) {
            changes.push(PolicyChange::Hold {
                agent: agent.clone(),
                tool,
                from,
                to,
            });
        }
        for (tool, on) in marks(&had.idempotent, &wanted.idempotent, prune) {
            changes.push(PolicyChange::Idempotent {
                agent: agent.clone(),
                tool,
                on,
            });
        }
        for (tool, on) in marks(
            &had.run_after_disconnect,
            &wanted.run_after_disconnect,
            prune,
        ) {
            changes.push(PolicyChange::RunAfterDisconnect {
                agent: agent.clone(),
                tool,
                on,
            });
        }
        if let Some(to) = wanted.remember_rejections
            && had.remember_rejections != Some(to)
        {
            changes.push(PolicyChange::RememberRejections {
                agent: agent.clone(),
                from: had.remember_rejections,
                to,
            });
        }
    }
    PolicyPlan { changes }
}

/// The per-tool numbers that change from `had` to `wanted` (`none` meaning unset), by
/// tool: `(tool, from, to)`.
fn numbered(
    had: &BTreeMap<String, u32>,
    wanted: &BTreeMap<String, u32>,
    prune: bool,
    none: u32,
) -> Vec<(String, u32, u32)> {
    let tools: BTreeSet<&String> = had.keys().chain(wanted.keys()).collect();
    tools
        .into_iter()
        .filter_map(|tool| {
            let from = had.get(tool).copied().unwrap_or(none);
            let to = match wanted.get(tool) {
                Some(to) => *to,
                None if prune => none,
                None => from,
            };
            (from != to).then(|| (tool.clone(), from, to))
        })
        .collect()
}

/// The marks given (true) or taken back from `had` to `wanted`, by tool.
fn marks(had: &BTreeSet<String>, wanted: &BTreeSet<String>, prune: bool) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = wanted
        .difference(had)
        .map(|tool| (tool.clone(), true))
        .collect();
    if prune {
        out.extend(had.difference(wanted).map(|tool| (tool.clone(), false)));
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use time::macros::datetime;

    const EXAMPLE: &str = r#"version = 1

[[agents]]
id = "claude"
categories = ["work"]
remember_rejections = "12h"
idempotent = ["send_invoice"]
run_after_disconnect = ["mcp__*"]

[agents.quorums]
send_invoice = 2

[agents.holds]
deploy = 300

[[agents.rules]]
tool = "Bash(git status:*)"
action = "allow"
expires = "2026-04-01T09:00:00Z"

[[agents.rules]]
tool = "send_invoice"
action = "ask"

[[agents.shadow_rules]]
tool = "Read"
action = "allow"
"#;

    fn parsed() -> PolicyFile {
        PolicyFile::parse(EXAMPLE).expect("the example parses")
    }

    fn invalid(text: &str) -> (usize, usize, String) {
        match PolicyFile::parse(text) {
            Err(ToolsError::InvalidPolicyFile {
                line,
                column,
                message,
            }) => (line, column, message),
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn the_example_parses_and_writes_back_the_same() {
        let file = parsed();
        let agent = &file.agents[0];
        assert_eq!(agent.id, "claude");
        assert_eq!(agent.remember_rejections, Some(Duration::hours(12)));
        assert_eq!(agent.quorums["send_invoice"], 2);
        assert_eq!(agent.holds["deploy"], 300);
        assert_eq!(
            agent.rules[0].rule.expires_at(),
            Some(datetime!(2026-04-01 09:00 UTC))
        );
        assert_eq!(agent.shadow_rules[0].rule.action(), RuleAction::Allow);
        let again = PolicyFile::parse(&file.to_toml()).expect("written text parses");
        assert_eq!(again, file);
        assert!(plan(&file.agents, &file, true).is_empty());
    }

    #[test]
    fn a_condition_over_the_history_reads_writes_back_and_is_checked_where_it_is() {
        let with = |condition: &str| {
            EXAMPLE.replace(
                "tool = \"send_invoice\"\naction = \"ask\"",
                &format!("tool = \"send_invoice\"\naction = \"ask\"\ncondition = {condition}"),
            )
        };
        let text = with(
            r#"{ when = { kind = "total", pointer = "/cents", over = 50000, perSeconds = 86400 }, approvals = 2 }"#,
        );
        let file = PolicyFile::parse(&text).expect("a total parses");
        let rule = &file.agents[0].rules[1].rule;
        let condition = rule.condition().expect("the condition is kept");
        assert_eq!(condition.approvals, Some(2));
        assert!(matches!(
            condition.when,
            crate::When::Total { over: 50_000, .. }
        ));
        let again = PolicyFile::parse(&file.to_toml()).expect("written text parses");
        assert_eq!(again, file, "{}", file.to_toml());
        // The same rule without its condition is a change the plan shows.
        assert_eq!(plan(&parsed().agents, &file, false).changes.len(), 1);
        let (line, _, message) = invalid(&with(
            r#"{ when = { kind = "after", count = 0, windowSeconds = 60 } }"#,
        ));
        assert!(message.contains("count above zero"), "{message}");
        assert_eq!(line, 24, "{message}");
        let (_, _, message) = invalid(&with(r#"{ when = { kind = "sometimes" } }"#));
        assert!(message.contains("sometimes"), "{message}");
        let (_, _, message) = invalid(&with(
            r#"{ when = { kind = "after", count = 2, windowSeconds = 60 }, extra = 1 }"#,
        ));
        assert!(message.contains("extra"), "{message}");
        let deny = with(r#"{ when = { kind = "after", count = 2, windowSeconds = 60 } }"#).replace(
            "action = \"ask\"\ncondition",
            "action = \"deny\"\ncondition",
        );
        let (_, _, message) = invalid(&deny);
        assert!(message.contains("not deny"), "{message}");
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line_and_column() {
        let text = EXAMPLE.replace("action = \"ask\"", "action = \"ask\"\napprovals = 2");
        let (line, column, message) = invalid(&text);
        assert!(message.contains("approvals"), "{message}");
        assert_eq!((line, column), (24, 1), "{message}");
        let (line, _, message) = invalid(&EXAMPLE.replace("id = \"claude\"", "name = \"x\""));
        assert!(message.contains("name"), "{message}");
        assert_eq!(line, 4);
    }

    #[test]
    fn a_bad_value_is_refused_where_it_is() {
        let (line, _, message) = invalid(&EXAMPLE.replace("\"ask\"", "\"maybe\""));
        assert!(message.contains("unknown rule action"), "{message}");
        assert_eq!(line, 23, "{message}");
        let (_, _, message) = invalid(&EXAMPLE.replace("2026-04-01T09:00:00Z", "tomorrow"));
        assert!(message.contains("RFC 3339"), "{message}");
        let (_, _, message) = invalid(&EXAMPLE.replace("deploy = 300", "\"Bash(rm *)\" = 300"));
        assert!(message.contains("argument pattern"), "{message}");
        let (_, _, message) = invalid(&EXAMPLE.replace("send_invoice = 2", "send_invoice = 1"));
        assert!(message.contains("at least 2"), "{message}");
        let (_, _, message) = invalid(&EXAMPLE.replace("\"12h\"", "\"soon\""));
        assert!(message.contains("remember_rejections"), "{message}");
        let (_, _, message) = invalid(&EXAMPLE.replace("version = 1", "version = 2"));
        assert!(message.contains("version 2"), "{message}");
        let (_, _, message) =
            invalid(&EXAMPLE.replace("\"send_invoice\"\naction", "\"Bash(git status:*)\"\naction"));
        assert!(message.contains("twice"), "{message}");
        let (_, _, message) =
            invalid("version = 1\n[[agents]]\nid = \" \"\ncategories = [\"w\"]\n");
        assert!(message.contains("blank"), "{message}");
    }

    #[test]
    fn a_plan_lists_what_changes_and_prune_removes_what_the_file_does_not_name() {
        let current = parsed().agents;
        let mut file = parsed();
        let agent = &mut file.agents[0];
        agent.rules.remove(0);
        agent.rules[0].rule = ToolRule::new("send_invoice", RuleAction::Deny).expect("rule");
        agent.quorums.clear();
        agent.idempotent.insert("refund".to_owned());
        let kept = plan(&current, &file, false);
        assert_eq!(
            kept.changes
                .iter()
                .map(PolicyChange::line)
                .collect::<Vec<_>>(),
            [
                "~ agent claude: rule ask send_invoice -> deny send_invoice",
                "+ agent claude: idempotent refund",
            ]
        );
        let pruned = plan(&current, &file, true);
        assert_eq!(
            pruned
                .changes
                .iter()
                .map(PolicyChange::line)
                .collect::<Vec<_>>(),
            [
                "~ agent claude: rule ask send_invoice -> deny send_invoice",
                "- agent claude: rule allow Bash(git status:*) until 2026-04-01T09:00:00Z",
                "~ agent claude: quorum of send_invoice 2 -> 1 people",
                "+ agent claude: idempotent refund",
            ]
        );
        // A new agent; the agents the file does not name are left alone.
        let other =
            PolicyFile::parse("version = 1\n[[agents]]\nid = \"b\"\ncategories = [\"x\"]\n")
                .expect("parses");
        let created = plan(&current, &other, true);
        assert_eq!(
            created.changes,
            [PolicyChange::CreateAgent {
                agent: "b".to_owned(),
                categories: vec!["x".to_owned()]
            }]
        );
    }

    #[test]
    fn a_rule_set_again_keeps_the_shadow_rule_of_its_pattern() {
        let text = "version = 1\n[[agents]]\nid = \"a\"\ncategories = [\"w\"]\n[[agents.rules]]\ntool = \"Read\"\naction = \"ask\"\n[[agents.shadow_rules]]\ntool = \"Read\"\naction = \"allow\"\n";
        let file = PolicyFile::parse(text).expect("parses");
        let mut current = file.agents.clone();
        current[0].rules[0].rule = ToolRule::new("Read", RuleAction::Deny).expect("rule");
        let lines: Vec<String> = plan(&current, &file, false)
            .changes
            .iter()
            .map(PolicyChange::line)
            .collect();
        assert_eq!(
            lines,
            [
                "~ agent a: rule deny Read -> ask Read",
                "~ agent a: shadow rule allow Read -> allow Read"
            ]
        );
    }

    #[test]
    fn spans_read_what_they_write() {
        for (text, seconds) in [
            ("0", 0),
            ("7d", 604_800),
            ("12h", 43_200),
            ("90m", 5_400),
            ("45s", 45),
        ] {
            assert_eq!(parse_span(text), Ok(Duration::seconds(seconds)));
            assert_eq!(
                parse_span(&format_span(Duration::seconds(seconds))),
                Ok(Duration::seconds(seconds))
            );
        }
        for bad in ["", "d", "7", "7w", "-1d", "1.5h"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
    }

    fn arb_rule() -> impl Strategy<Value = ToolRule> {
        (
            "[a-z_]{1,8}(\\*)?",
            prop_oneof![
                Just(RuleAction::Allow),
                Just(RuleAction::Ask),
                Just(RuleAction::Deny)
            ],
            proptest::option::of(0i64..4_000_000_000),
        )
            .prop_map(|(pattern, action, at)| {
                let rule = ToolRule::new(pattern, action).expect("a rule");
                match at {
                    Some(at) => rule.until(OffsetDateTime::from_unix_timestamp(at).expect("time")),
                    None => rule,
                }
            })
    }

    fn arb_agent() -> impl Strategy<Value = AgentEntry> {
        (
            "[a-z]{1,6}",
            proptest::collection::vec("[a-z]{1,5}", 1..3),
            proptest::option::of((0i64..400).prop_map(|h| Duration::hours(h))),
            proptest::collection::btree_set("[a-z_]{1,6}", 0..3),
            proptest::collection::btree_map("[a-z_]{1,6}\\*?", 2u32..5, 0..3),
            proptest::collection::btree_map("[a-z_]{1,6}", 1u32..9999, 0..3),
            proptest::collection::vec(arb_rule(), 0..4),
        )
            .prop_map(|(id, categories, remember, marks, quorums, holds, rules)| {
                let mut seen = BTreeSet::new();
                let rules: Vec<RuleEntry> = rules
                    .into_iter()
                    .filter(|r| seen.insert(r.pattern().to_owned()))
                    .map(|rule| RuleEntry {
                        rule,
                        any_name: false,
                    })
                    .collect();
                let shadow_rules = rules
                    .iter()
                    .take(1)
                    .map(|r| ShadowEntry {
                        rule: ToolRule::new(r.rule.pattern(), RuleAction::Deny).expect("rule"),
                    })
                    .collect();
                AgentEntry {
                    id,
                    categories,
                    remember_rejections: remember,
                    idempotent: marks.clone(),
                    run_after_disconnect: marks,
                    quorums,
                    holds,
                    rules,
                    shadow_rules,
                }
            })
    }

    proptest! {
        #[test]
        fn what_is_written_reads_back_the_same(agents in proptest::collection::vec(arb_agent(), 0..3)) {
            let mut seen = BTreeSet::new();
            let agents: Vec<AgentEntry> = agents.into_iter().filter(|a| seen.insert(a.id.clone())).collect();
            let file = PolicyFile { version: POLICY_FILE_VERSION, agents };
            let text = file.to_toml();
            let again = PolicyFile::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(&again, &file);
            prop_assert!(plan(&file.agents, &again, true).is_empty());
        }
    }
}
