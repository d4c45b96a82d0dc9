//! Fail-closed execution policy (ADR 0004): may this agent run this tool on this
//! target, and should a person be asked first?

use crate::provenance::RuleProvenance;
use crate::{Condition, PastRun, ToolMode, ToolSpec, ToolsError};
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};

/// What a rule (or a tool's mode) says about a call. The order is the strictness:
/// among the rules covering a call the strictest wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleAction {
    /// Run without asking.
    Allow,
    /// Run without asking, as `allow` routes it, but record the call prominently (its
    /// audit record's `allowedBy.audited`, `assent audit digest`). Stricter than
    /// `allow`, so an audit rule and an allow rule covering one call audit it; never
    /// weaker than `ask` or `deny`.
    Audit,
    /// Ask a person first (queue in a change set).
    Ask,
    /// Never run.
    Deny,
}

impl RuleAction {
    /// The stable name: `allow`, `audit`, `ask` or `deny`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Audit => "audit",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl RuleAction {
    /// How a call is routed under this action: `audit` runs as `allow` does (only its
    /// record differs), every other action is itself.
    pub const fn routes_as(self) -> Self {
        match self {
            Self::Audit => Self::Allow,
            other => other,
        }
    }

    /// Whether a call runs without asking under this action (`allow` or `audit`).
    pub const fn runs_unasked(self) -> bool {
        matches!(self.routes_as(), Self::Allow)
    }
}

impl std::str::FromStr for RuleAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Self::Allow),
            "audit" => Ok(Self::Audit),
            "ask" => Ok(Self::Ask),
            "deny" => Ok(Self::Deny),
            other => Err(format!(
                "unknown rule action {other:?} (expected allow, ask or deny, or audit)"
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
    /// A condition over the history ([`Condition`]); while not judged for a call
    /// ([`AgentPolicy::given`]) the rule counts the fail-closed way.
    condition: Option<Condition>,
    /// Whether [`AgentPolicy::given`] found the condition holding for the call at hand.
    condition_met: bool,
    provenance: Origin,
}

/// Where a rule came from, kept beside what it says but not part of it: two rules
/// that say the same are equal whoever set them, so setting a rule again changes
/// nothing (and keeps its first origin).
#[derive(Debug, Clone, Default)]
struct Origin(Option<RuleProvenance>);

impl PartialEq for Origin {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Origin {}

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
        if let Err(reason) = parse_pattern(&pattern) {
            return Err(ToolsError::InvalidPattern { pattern, reason });
        }
        Ok(Self {
            pattern,
            action,
            expires_at: None,
            condition: None,
            condition_met: false,
            provenance: Origin::default(),
        })
    }

    /// The same rule, applying only while `condition` holds ([`Condition`](crate::Condition)).
    #[must_use]
    pub fn when(self, condition: Condition) -> Self {
        Self {
            condition: Some(condition),
            condition_met: false,
            ..self
        }
    }

    /// The same rule, with where it came from ([`RuleProvenance`]): who set it, when,
    /// and how (a command, a policy file and its hash, a suggestion, a session grant).
    #[must_use]
    pub fn with_provenance(self, provenance: RuleProvenance) -> Self {
        Self {
            provenance: Origin(Some(provenance)),
            ..self
        }
    }

    /// The rule's condition over the history, when it has one.
    pub fn condition(&self) -> Option<&Condition> {
        self.condition.as_ref()
    }

    /// Where the rule came from; `None` for a rule stored before provenance was
    /// recorded.
    pub fn provenance(&self) -> Option<&RuleProvenance> {
        self.provenance.0.as_ref()
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

    /// Whether the rule covers a call of `tool_name` ([`call_covers`]): with the call,
    /// an argument pattern is read against its arguments; without, it covers nothing.
    pub fn covers(&self, tool_name: &str, call: Option<CallContext<'_>>) -> Coverage {
        call_covers(&self.pattern, tool_name, call)
    }

    /// What this rule says of a call, and for a chained command which part it found:
    /// a sure match counts as its action; an unsure one ([`Coverage::Unsure`]) only
    /// for a rule that asks or denies (fail-closed); a command that cannot be read
    /// (`shell::split_command`) makes a rule that asks or denies ask, never deny.
    fn counts_as(
        &self,
        tool_name: &str,
        call: Option<CallContext<'_>>,
    ) -> Option<(RuleAction, Option<PartRef>)> {
        // A condition not judged for this call: an allow does not count (it may not
        // hold), an ask or a deny does (it may).
        if self.condition.is_some() && !self.condition_met && self.action.runs_unasked() {
            return None;
        }
        let found = covers_call(&self.pattern, tool_name, call);
        let action = match found.coverage {
            Coverage::Yes => self.action,
            Coverage::No => return None,
            Coverage::Unsure if self.action.runs_unasked() => return None,
            Coverage::Unsure if found.unreadable => RuleAction::Ask,
            Coverage::Unsure => self.action,
        };
        Some((action, found.part))
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

/// Whether allow rules of `patterns` (in force; the caller checked that no rule asks
/// about or denies the call) let a call of `name` run: one covers it all, or each part
/// of its chained command is covered by one of them, as [`AgentPolicy::ruled_call`]
/// decides. The proof re-checks an audit record's `allowedBy.rules` with it.
pub fn allow_rules_cover(patterns: &[&str], name: &str, call: Option<CallContext<'_>>) -> bool {
    let policy = patterns
        .iter()
        .filter_map(|pattern| ToolRule::new(*pattern, RuleAction::Allow).ok())
        .fold(AgentPolicy::default(), AgentPolicy::with_rule);
    policy.ruled_call(name, call) == Some(RuleAction::Allow)
}

/// Whether a rule's or a tool setting's `pattern` covers the tool named `name`: the one
/// function that decides it for rules, quorums, holds and shadow rules alike, so a
/// setting can never be accepted for a pattern and then looked up by exact name.
/// `*` matches any run of characters; everything else matches itself. It is
/// [`call_covers`] without a call: an argument pattern (`Bash(git status*)`) covers no
/// name on its own.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    call_covers(pattern, name, None) == Coverage::Yes
}

/// What an argument pattern reads of a call: its arguments, the id of its target (for
/// a coding agent's call, the workspace a relative path pattern starts from), and what
/// the machine says of its paths when the target has files ([`PathFacts`]).
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The call's arguments.
    pub args: &'a serde_json::Value,
    /// Its target's id.
    pub target_id: &'a str,
    /// Where its paths lead and what `~/` stands for, found by the target's host
    /// ([`crate::TargetState::paths`]); `None` when the target has no files here (a
    /// path is then judged as written, and a `~/` path pattern is unsure of it).
    pub paths: Option<&'a dyn PathFacts>,
}

impl<'a> CallContext<'a> {
    /// The context of a call with `args` on target `target_id`, with no path facts.
    pub fn new(args: &'a serde_json::Value, target_id: &'a str) -> Self {
        Self {
            args,
            target_id,
            paths: None,
        }
    }

    /// The same context with the path facts of the call's target.
    #[must_use]
    pub fn with_paths(self, paths: Option<&'a dyn PathFacts>) -> Self {
        Self { paths, ..self }
    }
}

/// What the machine says of a call's paths: found by the shell that owns the files
/// (the coding agents' workspace host), read by the pure matcher, so a path rule judges
/// where a path leads and not only how it is written.
pub trait PathFacts: std::fmt::Debug + Send + Sync {
    /// The home folder a `~/` path pattern stands for (the agents' own reading of
    /// `~`), when known.
    fn home(&self) -> Option<&str>;

    /// Where `path` (absolute, or relative to the target's folder) leads: its longest
    /// existing prefix with every symlink followed, then the rest as written; a path
    /// inside the target's folder is given under the folder as the target names it.
    /// `Err` with the reason when it cannot be told (a dangling symlink, an unreadable
    /// folder): the matcher is then unsure.
    fn resolve(&self, path: &str) -> Result<String, String>;
}

/// How surely a pattern covers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// It covers it.
    Yes,
    /// It does not.
    No,
    /// It cannot tell (a shell command with more than one command in it, a path with
    /// `..`, no argument to read): counted for rules that ask or deny, never for one
    /// that allows.
    Unsure,
}

/// The arguments an argument pattern is read against, in the order looked for: a
/// command-like tool's command, a file tool's path.
pub(crate) const COMMAND_KEYS: [&str; 2] = ["command", "cmd"];
pub(crate) const PATH_KEYS: [&str; 3] = ["file_path", "path", "notebook_path"];

/// Whether `pattern` covers a call of tool `name` (with `call`, when the call is
/// known): the one matcher of rules and settings. A plain pattern matches the name
/// (`*` any run of characters). An argument pattern `Tool(ARG)`, in the syntax of the
/// coding agents' own permission rules, also reads the call: for a command-like tool
/// (`command`, `cmd`) `ARG` is a glob over the whole command (`*` any run, a trailing
/// `:*` any rest), unsure when the command chains others (`;`, `&`, `|`, `` ` ``,
/// `$(`, redirections, a line break); for a file tool (`file_path`, `path`,
/// `notebook_path`) a path glob (`*` within a segment, `**` across them), read from the
/// target's id (the workspace) when relative, unsure for a path with `.` or `..`
/// segments; for any other tool named top-level arguments (`create_issue(repo=acme/web)`,
/// several joined by `,`) or a glob over the arguments' canonical JSON, sure only of a
/// match at the top level (`create_issue(*"repo":"acme/web"*)`, unsure when only a
/// nested copy matches). A call holding several of these is covered
/// only when every command and path is, and not covered only when none is and the
/// whole arguments are not either: anything between is unsure.
pub fn call_covers(pattern: &str, name: &str, call: Option<CallContext<'_>>) -> Coverage {
    covers_call(pattern, name, call).coverage
}

/// A part of a chained command a rule found: its place and its text, for the words
/// that name the rule ([`Ruling`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartRef {
    /// Its place, from 1.
    pub index: usize,
    /// How many parts the command has.
    pub of: usize,
    /// The part as written.
    pub text: String,
}

/// [`call_covers`] with what the rule words need: which part of a chained command
/// it found, and whether it is unsure only because a command cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    coverage: Coverage,
    /// Unsure only because a command holds a part that cannot be read.
    unreadable: bool,
    part: Option<PartRef>,
}

impl Found {
    fn plain(coverage: Coverage) -> Self {
        Self {
            coverage,
            unreadable: false,
            part: None,
        }
    }
}

fn covers_call(pattern: &str, name: &str, call: Option<CallContext<'_>>) -> Found {
    let Ok(parsed) = parse_pattern(pattern) else {
        return Found::plain(Coverage::No);
    };
    let Some((tool, argument)) = parsed else {
        return Found::plain(if glob_matches(pattern, name) {
            Coverage::Yes
        } else {
            Coverage::No
        });
    };
    if !glob_matches(tool, name) {
        return Found::plain(Coverage::No);
    }
    let Some(call) = call else {
        return Found::plain(Coverage::No);
    };
    // Every command and path the call holds is read, and the whole arguments too, so
    // an argument the agent adds can only make a call less allowed and more denied.
    let text = |key: &&str| call.args.get(*key).and_then(serde_json::Value::as_str);
    let specific: Vec<Found> = COMMAND_KEYS
        .iter()
        .filter_map(|key| text(key).map(|command| command_covers(argument, command)))
        .chain(PATH_KEYS.iter().filter_map(|key| {
            text(key)
                .map(|path| Found::plain(path_covers(argument, path, call.target_id, call.paths)))
        }))
        .collect();
    let whole = arguments_cover(argument, call.args);
    if specific.is_empty() {
        return Found::plain(whole);
    }
    let part = specific.iter().find_map(|found| found.part.clone());
    let coverage = if specific.iter().all(|f| f.coverage == Coverage::Yes) {
        Coverage::Yes
    } else if whole == Coverage::No && specific.iter().all(|f| f.coverage == Coverage::No) {
        Coverage::No
    } else {
        Coverage::Unsure
    };
    // Unsure only because of what cannot be read: nothing read matched.
    let unreadable = coverage == Coverage::Unsure
        && whole == Coverage::No
        && specific
            .iter()
            .all(|f| f.coverage == Coverage::No || f.unreadable);
    Found {
        coverage,
        unreadable,
        part,
    }
}

/// What an argument pattern says of the whole arguments: named top-level arguments
/// (`repo=acme/web`, several joined by `,`: [`named_arguments`]) cover a call whose
/// every named argument is there and matches its glob (over its string value, or its
/// canonical JSON when it is no string); any other pattern is a glob over the
/// arguments' canonical JSON, sure only of what it finds at the top level: it covers
/// (`Yes`) when it matches the arguments with every nested object's and array's
/// contents hidden ([`top_level_json`]), and is unsure when it matches only with them
/// (`{"repo":"acme/evil","x":{"repo":"acme/web"}}` for `*"repo":"acme/web"*`), so a
/// nested copy of an allowed value never allows.
fn arguments_cover(argument: &str, args: &serde_json::Value) -> Coverage {
    if let Some(named) = named_arguments(argument) {
        let covered = named.iter().all(|(key, glob)| {
            args.get(*key).is_some_and(|value| match value {
                serde_json::Value::String(text) => glob_matches(glob, text),
                other => glob_matches(glob, &assent_domain::canonical_json(other)),
            })
        });
        return if covered { Coverage::Yes } else { Coverage::No };
    }
    if glob_matches(argument, &top_level_json(args)) {
        Coverage::Yes
    } else if glob_matches(argument, &assent_domain::canonical_json(args)) {
        Coverage::Unsure
    } else {
        Coverage::No
    }
}

/// What stands for a nested object or array in [`top_level_json`], whatever it holds: control
/// characters, which canonical JSON never holds unescaped, so no glob written to find a
/// value can find it there.
const NESTED: &str = "\u{1}\u{1}";

/// The canonical JSON of `args` with every object and array inside it replaced by
/// [`NESTED`] (`{"repo":"acme/evil","x":␁␁}`): what lies at its top level.
fn top_level_json(args: &serde_json::Value) -> String {
    let serde_json::Value::Object(map) = args else {
        return match args {
            serde_json::Value::Array(_) => NESTED.to_owned(),
            other => assent_domain::canonical_json(other),
        };
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let fields: Vec<String> = keys
        .into_iter()
        .map(|key| {
            let value = match &map[key] {
                serde_json::Value::Object(_) | serde_json::Value::Array(_) => NESTED.to_owned(),
                other => assent_domain::canonical_json(other),
            };
            format!("{}:{value}", serde_json::Value::String(key.clone()))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The named top-level arguments of an argument pattern `KEY=GLOB[,KEY=GLOB…]`, or
/// `None` when it is not one (a key is a letter or `_`, then letters, digits, `_`, `-`;
/// a `,` starts the next pair only when a key and `=` follow it, so a glob may hold
/// commas: `title=a,b` names one argument).
fn named_arguments(argument: &str) -> Option<Vec<(&str, &str)>> {
    fn key_len(text: &str) -> Option<usize> {
        let mut chars = text.char_indices();
        let (_, first) = chars.next()?;
        if !(first.is_ascii_alphabetic() || first == '_') {
            return None;
        }
        for (at, c) in chars {
            if c == '=' {
                return Some(at);
            }
            if !(c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return None;
            }
        }
        None
    }
    let mut pairs = Vec::new();
    let mut rest = argument;
    loop {
        let key = key_len(rest)?;
        let value_start = key + 1;
        let next = rest[value_start..]
            .match_indices(',')
            .map(|(at, _)| value_start + at)
            .find(|&comma| key_len(&rest[comma + 1..]).is_some());
        match next {
            Some(comma) => {
                pairs.push((&rest[..key], &rest[value_start..comma]));
                rest = &rest[comma + 1..];
            }
            None => {
                pairs.push((&rest[..key], &rest[value_start..]));
                return Some(pairs);
            }
        }
    }
}

/// A pattern split into its tool and argument parts (`None` for a plain pattern), or
/// why it can match nothing.
fn parse_pattern(pattern: &str) -> Result<Option<(&str, &str)>, String> {
    let Some(open) = pattern.find('(') else {
        if pattern.contains(')') {
            return Err("a \")\" without \"(\" matches no tool name".into());
        }
        return Ok(None);
    };
    if pattern.chars().any(char::is_control) {
        return Err("a pattern holds no control characters".into());
    }
    let tool = &pattern[..open];
    let Some(argument) = pattern[open + 1..].strip_suffix(')') else {
        return Err("an argument pattern is written TOOL(ARGUMENT), ending with \")\"".into());
    };
    if tool.trim().is_empty() {
        return Err("an argument pattern names its tool before \"(\"".into());
    }
    if argument.trim().is_empty() {
        return Err(format!(
            "the argument pattern of {tool} is empty and would match no call (write {tool} for every call)"
        ));
    }
    Ok(Some((tool, argument)))
}

/// The characters that chain or redirect shell commands: a command holding one is not
/// judged by a pattern for its first command.
pub(crate) const SHELL_CHAINS: [&str; 8] = [";", "&", "|", "`", "$(", ">", "<", "\n"];

/// `ARG` against a command line, split into the commands it runs
/// ([`crate::split_command`]): it covers the line when it covers every part surely; it
/// is unsure of it when it finds a part (so a deny or ask rule counts, an allow does
/// not), and unsure as unreadable when it finds none but a part cannot be read (asked,
/// never denied).
fn command_covers(argument: &str, command: &str) -> Found {
    let parts = crate::split_command(command);
    if parts.is_empty() {
        return Found::plain(text_covers(argument, command.trim()));
    }
    let of = parts.len();
    let mut every = true;
    let mut found: Option<(Coverage, PartRef)> = None;
    let mut unreadable = false;
    for (index, part) in parts.iter().enumerate() {
        if part.unparseable().is_some() {
            every = false;
            unreadable = true;
            continue;
        }
        let readings = part.readings();
        let sure = part.is_plain()
            && readings
                .first()
                .is_some_and(|words| text_covers(argument, words) == Coverage::Yes);
        let any = readings
            .iter()
            .any(|reading| text_covers(argument, reading) == Coverage::Yes);
        every &= sure;
        if any && found.is_none() {
            let coverage = if sure {
                Coverage::Yes
            } else {
                Coverage::Unsure
            };
            found = Some((
                coverage,
                PartRef {
                    index: index + 1,
                    of,
                    text: part.text().to_owned(),
                },
            ));
        }
    }
    let part = found
        .as_ref()
        .filter(|_| of > 1)
        .map(|(_, part)| part.clone());
    if every {
        return Found {
            coverage: Coverage::Yes,
            unreadable: false,
            part,
        };
    }
    match found {
        Some(_) => Found {
            coverage: Coverage::Unsure,
            unreadable: false,
            part,
        },
        None if unreadable => Found {
            coverage: Coverage::Unsure,
            unreadable: true,
            part: None,
        },
        None => Found::plain(Coverage::No),
    }
}

/// `ARG` against one reading of one command: a glob over the whole command; `PREFIX:*`
/// is the command `PREFIX` alone or followed by a word boundary (white space) and
/// anything, as in Claude Code's own rules: `Bash(ls:*)` covers `ls -la`, never
/// `lsof -i`.
fn text_covers(argument: &str, command: &str) -> Coverage {
    let command = command.trim();
    let covered = match argument.strip_suffix(":*") {
        Some(prefix) => {
            // Any white space ends the word (a tab as much as a space), so a deny rule
            // is not got around by the character between the words.
            let spaced: String = command
                .chars()
                .map(|c| if c.is_whitespace() { ' ' } else { c })
                .collect();
            glob_matches(prefix, command) || glob_matches(&format!("{prefix} *"), &spaced)
        }
        None => glob_matches(argument, command),
    };
    if covered { Coverage::Yes } else { Coverage::No }
}

/// A path pattern against a call's path: as written, and, when the target's host says
/// where it leads ([`PathFacts::resolve`]), against that too; sure only when both
/// readings agree (a symlink `src/keys -> ~/.ssh` leaves `Edit(src/**)` unsure of
/// `src/keys/id_rsa`, and lets `Read(~/.ssh/**)` count for it). A pattern starting
/// with `~/` is read from the home folder the facts name, and is unsure without one.
fn path_covers(
    argument: &str,
    path: &str,
    workspace: &str,
    facts: Option<&dyn PathFacts>,
) -> Coverage {
    let home_pattern;
    let argument = match argument.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let Some(home) = facts.and_then(|facts| facts.home()) else {
                return Coverage::Unsure;
            };
            home_pattern = format!("{}{rest}", home.trim_end_matches('/'));
            home_pattern.as_str()
        }
        _ => argument,
    };
    let written = path_covers_as_written(argument, path, workspace);
    let Some(facts) = facts else {
        return written;
    };
    if written == Coverage::Unsure {
        return written;
    }
    match facts.resolve(path) {
        Ok(resolved) if path_covers_as_written(argument, &resolved, workspace) == written => {
            written
        }
        Ok(_) | Err(_) => Coverage::Unsure,
    }
}

fn path_covers_as_written(argument: &str, path: &str, workspace: &str) -> Coverage {
    let segments = |p: &str| -> Option<Vec<String>> {
        let parts: Vec<String> = p
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        (!parts.iter().any(|s| s == "." || s == "..")).then_some(parts)
    };
    let Some(path) = segments(path).map(|p| (path.starts_with('/'), p)) else {
        return Coverage::Unsure;
    };
    // Claude Code's forms: `//abs/path` and `/abs` absolute, anything else relative to
    // the workspace.
    let pattern_absolute = argument.starts_with('/');
    let Some(pattern) = segments(argument) else {
        return Coverage::No;
    };
    let relative: Vec<String> = match (pattern_absolute, path) {
        (true, (true, path)) => return segments_match(&pattern, &path),
        // A relative path lies in the workspace: read from it when it is absolute.
        (true, (false, path)) => {
            let Some(mut root) = segments(workspace).filter(|_| workspace.starts_with('/')) else {
                return Coverage::Unsure;
            };
            root.extend(path);
            return segments_match(&pattern, &root);
        }
        (false, (false, path)) => path,
        (false, (true, path)) => {
            let Some(root) = segments(workspace).filter(|_| workspace.starts_with('/')) else {
                return Coverage::Unsure;
            };
            match path.strip_prefix(root.as_slice()) {
                Some(rest) => rest.to_vec(),
                None => return Coverage::No,
            }
        }
    };
    segments_match(&pattern, &relative)
}

/// Path segments against pattern segments: `**` any number of segments, `*` within one.
fn segments_match(pattern: &[String], path: &[String]) -> Coverage {
    fn walk(pattern: &[String], path: &[String]) -> bool {
        match pattern.split_first() {
            None => path.is_empty(),
            Some((first, rest)) if first == "**" => {
                (0..=path.len()).any(|skip| walk(rest, &path[skip..]))
            }
            Some((first, rest)) => path
                .split_first()
                .is_some_and(|(segment, tail)| glob_matches(first, segment) && walk(rest, tail)),
        }
    }
    if walk(pattern, path) {
        Coverage::Yes
    } else {
        Coverage::No
    }
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
    /// Refuse it, with the reason the agent and the audit trail see (worded by
    /// `assent_changeset::reply::denial`).
    Deny {
        /// Why.
        reason: Denial,
    },
}

/// Why the policy refuses a call. Its words for the agent are the reply module's
/// (`assent_changeset::reply::denial`), so they are defined once, beside every other
/// reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// The target's category is not allowed, e.g. `Category home not in allowed set`
    /// ([`AgentPolicy::check_category`]).
    Category(String),
    /// A rule denies the tool.
    Rule {
        /// The tool.
        tool: String,
    },
    /// A rule other than the tool's own name denies the call: an argument pattern
    /// (`Bash(rm -rf *)`) or a name pattern (`set_task_*`), named with the part of a
    /// chained command it found.
    NamedRule {
        /// The tool.
        tool: String,
        /// The rule, and the part.
        ruling: Ruling,
    },
}

/// Which rule decided a call, and for a chained command which of its parts the rule
/// found: `denied by rule deny Bash(rm -rf *) (part 2 of 3: rm -rf build)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ruling {
    /// The rule's pattern.
    pub pattern: String,
    /// The rule's own action.
    pub action: RuleAction,
    /// What it made of the call (a deny rule asks about a command it cannot read).
    pub decided: RuleAction,
    /// The part of a chained command it found, when the command has several.
    pub part: Option<PartRef>,
    /// Where the rule came from, when recorded: quoted to the agent after the whole
    /// refusal (`assent_changeset::reply::rule_origin`), so the words before it stay
    /// as they were, and the agent and the person know whom to ask.
    pub provenance: Option<RuleProvenance>,
}

impl std::fmt::Display for Ruling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = match self.decided {
            RuleAction::Allow => "allowed",
            RuleAction::Audit => "allowed and audited",
            RuleAction::Ask => "asked",
            RuleAction::Deny => "denied",
        };
        write!(
            f,
            "{verb} by rule {} {}",
            self.action.as_str(),
            self.pattern
        )?;
        match &self.part {
            Some(part) => write!(f, " (part {} of {}: {})", part.index, part.of, part.text),
            None if self.decided != self.action => {
                write!(f, " (a part of the command cannot be read)")
            }
            None => Ok(()),
        }
    }
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

    /// The same policy without its rules for exactly `pattern` (`assent agent unset`):
    /// a call the removed rule decided is decided by the remaining rules, or asked.
    #[must_use]
    pub fn without_rule(mut self, pattern: &str) -> Self {
        self.rules.retain(|rule| rule.pattern() != pattern);
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

    /// Whether any rule has a condition over the history: only then does the decision
    /// point read the history (and, on PostgreSQL, lock the agent's row for it).
    pub fn has_conditions(&self) -> bool {
        self.rules.iter().any(|rule| rule.condition.is_some())
    }

    /// How far back the conditions of the rules look: the history to read.
    pub fn history_window(&self) -> Option<Duration> {
        self.rules
            .iter()
            .filter_map(|rule| rule.condition.as_ref().map(Condition::window))
            .max()
    }

    /// The policy for one call (with `call`, its arguments) at `now`, given the `runs`
    /// of the same agent (and session) before it: every rule with a condition judged
    /// ([`Condition::holds`], [`Condition::applies`]), kept as holding when it applies,
    /// left out when it does not (the next rule or the tool's mode decides). The one
    /// function every door's decision reads conditions through; the proof
    /// (`audit verify`) calls it again with the chain's history.
    #[must_use]
    pub fn given(
        &self,
        runs: &[PastRun],
        call: Option<CallContext<'_>>,
        now: OffsetDateTime,
    ) -> Self {
        let rules = self
            .rules
            .iter()
            .filter_map(|rule| match &rule.condition {
                None => Some(rule.clone()),
                Some(condition) => {
                    let holds = condition.holds(&rule.pattern, call, runs, now);
                    Condition::applies(rule.action, holds).then(|| ToolRule {
                        condition_met: true,
                        ..rule.clone()
                    })
                }
            })
            .collect();
        Self {
            allowed_categories: self.allowed_categories.clone(),
            rules,
        }
    }

    /// The quorum the rules whose condition held ([`AgentPolicy::given`]) set for a
    /// call of `tool_name` they ask about: the largest, or `None`.
    pub fn condition_approvals(
        &self,
        tool_name: &str,
        call: Option<CallContext<'_>>,
    ) -> Option<u32> {
        self.rules
            .iter()
            .filter(|rule| rule.condition_met && rule.action == RuleAction::Ask)
            .filter(|rule| rule.covers(tool_name, call) != Coverage::No)
            .filter_map(|rule| rule.condition.as_ref()?.approvals)
            .max()
    }

    /// What the rules alone say about a tool named `tool_name` (deny over ask over
    /// allow among the matching rules), or `None` when no rule matches: the tool's
    /// mode decides then.
    pub fn ruled(&self, tool_name: &str) -> Option<RuleAction> {
        self.ruled_call(tool_name, None)
    }

    /// [`AgentPolicy::ruled`] for one call: argument patterns read `call` too
    /// ([`call_covers`]; an unsure one counts only for asking or denying).
    pub fn ruled_call(&self, tool_name: &str, call: Option<CallContext<'_>>) -> Option<RuleAction> {
        self.ruled_call_audited(tool_name, call)
            .map(RuleAction::routes_as)
    }

    /// [`AgentPolicy::ruled_call`] keeping `audit` apart from `allow`: `Audit` when
    /// the strictest rule covering the call audits it, or when it is allowed part by
    /// part and an audit rule covers one of its parts.
    pub fn ruled_call_audited(
        &self,
        tool_name: &str,
        call: Option<CallContext<'_>>,
    ) -> Option<RuleAction> {
        let ruled = self
            .rules
            .iter()
            .filter_map(|r| r.counts_as(tool_name, call))
            .map(|(action, _)| action)
            .max();
        match ruled {
            None => self.allowed_part_by_part(tool_name, call).map(|rules| {
                rules
                    .iter()
                    .map(|rule| rule.action)
                    .max()
                    .unwrap_or(RuleAction::Allow)
            }),
            ruled => ruled,
        }
    }

    /// The allow rules that together cover a chained command when no one rule covers
    /// it all and none asks about or denies any of it: each part (every one plain,
    /// [`crate::ShellPart::is_plain`]) covered surely by an allow rule of its own
    /// (`ls | wc -l` under `Bash(ls:*)` and `Bash(wc:*)`). `None` for a call with
    /// more than one command or path, or a command of one part.
    fn allowed_part_by_part(
        &self,
        tool_name: &str,
        call: Option<CallContext<'_>>,
    ) -> Option<Vec<&ToolRule>> {
        let call = call?;
        let mut commands = COMMAND_KEYS
            .iter()
            .filter_map(|key| Some((*key, call.args.get(*key)?.as_str()?)));
        let (key, command) = commands.next()?;
        if commands.next().is_some() || PATH_KEYS.iter().any(|k| call.args.get(*k).is_some()) {
            return None;
        }
        let parts = crate::split_command(command);
        if parts.len() < 2 || !parts.iter().all(crate::ShellPart::is_plain) {
            return None;
        }
        let mut allowing: Vec<&ToolRule> = Vec::new();
        for part in &parts {
            let mut args = call.args.clone();
            args[key] = serde_json::Value::String(part.text().to_owned());
            let one = CallContext {
                args: &args,
                ..call
            };
            // An audit rule first: a part it covers is audited even when an allow rule
            // covers it too. A conditional rule counts only where its condition held.
            let covering = |rule: &&ToolRule| {
                (rule.condition.is_none() || rule.condition_met)
                    && rule.covers(tool_name, Some(one)) == Coverage::Yes
            };
            let rule = self
                .rules
                .iter()
                .filter(|rule| rule.action == RuleAction::Audit)
                .find(covering)
                .or_else(|| {
                    self.rules
                        .iter()
                        .filter(|rule| rule.action == RuleAction::Allow)
                        .find(covering)
                })?;
            if !allowing.contains(&rule) {
                allowing.push(rule);
            }
        }
        Some(allowing)
    }

    /// Which rule decides a call, as [`AgentPolicy::ruled_call`] decides it: the first
    /// rule, in the order added, that counts for what the rules say, with the part of a
    /// chained command it found; `None` when no rule covers the call.
    pub fn ruling(&self, tool_name: &str, call: Option<CallContext<'_>>) -> Option<Ruling> {
        let counted: Vec<(&ToolRule, RuleAction, Option<PartRef>)> = self
            .rules
            .iter()
            .filter_map(|r| r.counts_as(tool_name, call).map(|(a, part)| (r, a, part)))
            .collect();
        let decided = counted.iter().map(|(_, action, _)| *action).max()?;
        let (rule, _, part) = counted
            .into_iter()
            .find(|(_, action, _)| *action == decided)?;
        Some(Ruling {
            pattern: rule.pattern.clone(),
            action: rule.action,
            decided,
            part,
            provenance: rule.provenance().cloned(),
        })
    }

    /// The rules that together allow a chained command part by part, when no one rule
    /// covers it all (`ls | wc -l` under `Bash(ls:*)` and `Bash(wc:*)`); empty
    /// otherwise.
    pub fn covering_parts(&self, tool_name: &str, call: Option<CallContext<'_>>) -> Vec<&ToolRule> {
        self.allowed_part_by_part(tool_name, call)
            .unwrap_or_default()
    }

    /// Every rule covering a call, in the order added, with what it made of it (as
    /// [`AgentPolicy::ruling`] counts them): the one deciding and those it outranked.
    pub fn covering(
        &self,
        tool_name: &str,
        call: Option<CallContext<'_>>,
    ) -> Vec<(&ToolRule, RuleAction)> {
        self.rules
            .iter()
            .filter_map(|r| r.counts_as(tool_name, call).map(|(action, _)| (r, action)))
            .collect()
    }

    /// What lets `tool` run without a person, for the audit trail (`allowedBy`): the
    /// allowing rule with its pattern and expiry, or the tool's mode when no rule
    /// covers it; `None` when the rules and mode would ask or deny.
    pub fn allowed_by(&self, tool: &ToolSpec) -> Option<serde_json::Value> {
        self.allowed_by_call(tool, None)
    }

    /// [`AgentPolicy::allowed_by`] for one call (argument patterns read it).
    pub fn allowed_by_call(
        &self,
        tool: &ToolSpec,
        call: Option<CallContext<'_>>,
    ) -> Option<serde_json::Value> {
        if self.route_call(tool, call) != RuleAction::Allow {
            return None;
        }
        // The rule with where it came from (`source`, `setBy`, `setAt`), so the record
        // says who let the call run unasked.
        let shown = recorded_rule;
        let audited = self.ruled_call_audited(&tool.name, call) == Some(RuleAction::Audit);
        let mark = |mut allowed: serde_json::Value| {
            if audited {
                allowed["audited"] = serde_json::Value::Bool(true);
            }
            allowed
        };
        // An audit rule first: a call it covers is audited even when an allow rule
        // covers it too. A conditional rule counts only where its condition held.
        let covering = |rule: &&ToolRule| {
            (rule.condition.is_none() || rule.condition_met)
                && rule.covers(&tool.name, call) == Coverage::Yes
        };
        let rule = self
            .rules
            .iter()
            .filter(|rule| audited && rule.action() == RuleAction::Audit)
            .find(covering)
            .or_else(|| {
                self.rules
                    .iter()
                    .filter(|rule| rule.action() == RuleAction::Allow)
                    .find(covering)
            });
        if let Some(rule) = rule {
            return Some(mark(serde_json::json!({ "rule": shown(rule) })));
        }
        // A chained command whose parts are each allowed by a rule: every one named.
        if let Some(rules) = self.allowed_part_by_part(&tool.name, call) {
            let rules: Vec<serde_json::Value> = rules.into_iter().map(shown).collect();
            return Some(mark(serde_json::json!({ "rules": rules })));
        }
        Some(serde_json::json!({"mode": "immediate"}))
    }

    /// What decides a call that does not run unasked, for the audit trail (`decidedBy`:
    /// a refusal's record, and the action record of a call that waited for a person):
    /// the deciding rule as [`AgentPolicy::allowed_by_call`] names one (pattern,
    /// action, expiry, condition, where it came from), with what it made of the call
    /// (`decided`) and the part of a chained command it found (`part`); or
    /// `{"mode": MODE}` when no rule covers the call, or the tool's mode overrides the
    /// rules (a tool under review is asked about whatever a rule allows). The category
    /// check is the caller's: its refusal is `{"category": REASON}`.
    pub fn decided_by_call(
        &self,
        tool: &ToolSpec,
        call: Option<CallContext<'_>>,
    ) -> serde_json::Value {
        let routed = self.route_call(tool, call);
        let deciding = self.ruling(&tool.name, call).and_then(|ruling| {
            let rule = self
                .rules
                .iter()
                .find(|rule| rule.pattern == ruling.pattern && rule.action == ruling.action)?;
            (ruling.decided == routed).then_some((ruling, rule))
        });
        match deciding {
            Some((ruling, rule)) => {
                let mut shown = recorded_rule(rule);
                shown["decided"] = serde_json::json!(ruling.decided.as_str());
                if let Some(part) = &ruling.part {
                    shown["part"] =
                        serde_json::json!({"index": part.index, "of": part.of, "text": part.text});
                }
                serde_json::json!({ "rule": shown })
            }
            None => serde_json::json!({ "mode": mode_name(tool.mode) }),
        }
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
        self.route_call(tool, None)
    }

    /// [`AgentPolicy::route`] for one call: argument patterns read `call` too.
    pub fn route_call(&self, tool: &ToolSpec, call: Option<CallContext<'_>>) -> RuleAction {
        let ruled = self.ruled_call(&tool.name, call);
        match tool.mode {
            ToolMode::Review => ruled.map_or(RuleAction::Ask, |action| action.max(RuleAction::Ask)),
            ToolMode::Deferred => ruled.unwrap_or(RuleAction::Ask),
            ToolMode::Immediate | ToolMode::Local => ruled.unwrap_or(RuleAction::Allow),
        }
    }

    /// The full decision: the category check first (a denial there wins), then the
    /// rules. A denying rule names the tool.
    pub fn decide(&self, tool: &ToolSpec, target: &TargetCategory) -> PolicyDecision {
        self.decide_call(tool, None, target)
    }

    /// [`AgentPolicy::decide`] for one call: argument patterns read `call` too.
    pub fn decide_call(
        &self,
        tool: &ToolSpec,
        call: Option<CallContext<'_>>,
        target: &TargetCategory,
    ) -> PolicyDecision {
        if let Err(reason) = self.check_category(target) {
            return PolicyDecision::Deny {
                reason: Denial::Category(reason),
            };
        }
        match self.route_call(tool, call) {
            RuleAction::Allow | RuleAction::Audit => PolicyDecision::Allow,
            RuleAction::Ask => PolicyDecision::Ask,
            RuleAction::Deny => PolicyDecision::Deny {
                reason: self.denial(&tool.name, call),
            },
        }
    }

    /// Why a call the rules deny is denied: a rule on the tool's own name is the tool
    /// (`Tool Bash is denied by policy`, as ever); any other names the rule, and the
    /// part of a chained command it found ([`Ruling`]).
    pub fn denial(&self, tool_name: &str, call: Option<CallContext<'_>>) -> Denial {
        match self.ruling(tool_name, call) {
            Some(ruling) if ruling.pattern != tool_name => Denial::NamedRule {
                tool: tool_name.to_owned(),
                ruling,
            },
            _ => Denial::Rule {
                tool: tool_name.to_owned(),
            },
        }
    }
}

/// A rule as an audit record names it (`allowedBy.rule`, `decidedBy.rule`): its
/// pattern, action, expiry and condition, and where it came from (`source`, `setBy`,
/// `setAt`), so the record says who set the rule that decided.
fn recorded_rule(rule: &ToolRule) -> serde_json::Value {
    let mut shown =
        serde_json::json!({"pattern": rule.pattern(), "action": rule.action().as_str()});
    if let Some(at) = rule.expires_at()
        && let Ok(at) = at.format(&time::format_description::well_known::Rfc3339)
    {
        shown["expiresAt"] = serde_json::Value::String(at);
    }
    if let Some(condition) = rule.condition()
        && let Ok(condition) = serde_json::to_value(condition)
    {
        shown["condition"] = condition;
    }
    if let Some(serde_json::Value::Object(fields)) = rule.provenance().map(RuleProvenance::to_json)
        && let Some(shown) = shown.as_object_mut()
    {
        shown.extend(fields);
    }
    shown
}

/// A tool's mode as a record names it.
fn mode_name(mode: ToolMode) -> &'static str {
    match mode {
        ToolMode::Immediate => "immediate",
        ToolMode::Deferred => "deferred",
        ToolMode::Local => "local",
        ToolMode::Review => "review",
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
    fn a_colon_star_prefix_ends_at_a_word_boundary() {
        let covers = |pattern: &str, command: &str| {
            let args = serde_json::json!({ "command": command });
            call_covers(pattern, "Bash", Some(CallContext::new(&args, "/w")))
        };
        for (pattern, command, expected) in [
            ("Bash(ls:*)", "ls", Coverage::Yes),
            ("Bash(ls:*)", "ls -la", Coverage::Yes),
            ("Bash(ls:*)", "ls\t-la", Coverage::Yes),
            ("Bash(ls:*)", "lsof -i", Coverage::No),
            ("Bash(ls*)", "lsof -i", Coverage::Yes),
            ("Bash(git status:*)", "git status", Coverage::Yes),
            ("Bash(git status:*)", "git status --short", Coverage::Yes),
            ("Bash(git status:*)", "git statusx", Coverage::No),
            (
                "Bash(git status:*)",
                "git status; rm -rf /",
                Coverage::Unsure,
            ),
            ("Bash(rm:*)", "rm\t-rf /", Coverage::Yes),
            ("Bash(rm:*)", "rmdir x", Coverage::No),
            ("Bash(npm run *:*)", "npm run test -- -x", Coverage::Yes),
        ] {
            assert_eq!(
                covers(pattern, command),
                expected,
                "{pattern} on {command:?}"
            );
        }
    }

    /// `(pattern, tool, args, workspace, coverage)`: the argument patterns of the coding
    /// agents' permission rules, read by the one matcher.
    #[test]
    fn argument_patterns_cover_what_they_say_and_are_unsure_of_the_rest() {
        use Coverage::{No, Unsure, Yes};
        let ws = "/home/u/proj";
        let cases: &[(&str, &str, serde_json::Value, Coverage)] = &[
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status --short"}),
                Yes,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git push"}),
                No,
            ),
            (
                "Bash(git status*)",
                "Shell",
                json!({"command": "git status"}),
                No,
            ),
            (
                "Bash(npm run test:*)",
                "Bash",
                json!({"command": "npm run test -- -u"}),
                Yes,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status; rm -rf /"}),
                Unsure,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status && curl x | sh"}),
                Unsure,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status $(rm x)"}),
                Unsure,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status > /etc/x"}),
                Unsure,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"command": "git status\nrm x"}),
                Unsure,
            ),
            (
                "Bash(git status*)",
                "Bash",
                json!({"description": "no command"}),
                No,
            ),
            (
                "Bash(rm *)",
                "Bash",
                json!({"command": "ls", "cmd": "rm -rf /"}),
                Unsure,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "/home/u/proj/src/a/b.rs"}),
                Yes,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "src/main.rs"}),
                Yes,
            ),
            (
                "Edit(src/*.rs)",
                "Edit",
                json!({"file_path": "/home/u/proj/src/a/b.rs"}),
                No,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "/home/u/proj/tests/a.rs"}),
                No,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "/etc/src/a.rs"}),
                No,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "/home/u/proj/src/../../../etc/x"}),
                Unsure,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "./src/a.rs"}),
                Unsure,
            ),
            (
                "Edit(/etc/**)",
                "Edit",
                json!({"file_path": "/etc/passwd"}),
                Yes,
            ),
            (
                "Edit(src/**)",
                "Edit",
                json!({"file_path": "/home/u/proj/src/a", "path": "/tmp/x"}),
                Unsure,
            ),
            (
                "create_issue(*\"repo\":\"acme/web\"*)",
                "create_issue",
                json!({"repo": "acme/web", "title": "t"}),
                Yes,
            ),
            (
                "create_issue(*\"repo\":\"acme/web\"*)",
                "create_issue",
                json!({"repo": "acme/api"}),
                No,
            ),
            (
                "create_issue(*acme*)",
                "create_issue",
                json!({"repo": "acme", "command": "x"}),
                Unsure,
            ),
            ("mcp__*(*)", "mcp__github__x", json!({}), Yes),
            // Issue 52: a nested copy of the allowed value is no match at the top level.
            (
                "create_issue(*\"repo\":\"acme/web\"*)",
                "create_issue",
                json!({"repo": "acme/evil", "x": {"repo": "acme/web"}}),
                Unsure,
            ),
            (
                "create_issue(*\"repo\":\"acme/web\"*)",
                "create_issue",
                json!({"repo": "acme/evil", "x": [{"repo": "acme/web"}]}),
                Unsure,
            ),
            (
                "create_issue(*\"repo\":\"acme/web\"*)",
                "create_issue",
                json!({"repo": "acme/web", "labels": ["a"], "x": {"y": 1}}),
                Yes,
            ),
            (
                "create_issue(repo=acme/web)",
                "create_issue",
                json!({"repo": "acme/web", "title": "t"}),
                Yes,
            ),
            (
                "create_issue(repo=acme/web)",
                "create_issue",
                json!({"repo": "acme/evil", "x": {"repo": "acme/web"}}),
                No,
            ),
            (
                "create_issue(repo=acme/web)",
                "create_issue",
                json!({"title": "repo=acme/web"}),
                No,
            ),
            (
                "create_issue(repo=acme/*)",
                "create_issue",
                json!({"repo": "acme/api"}),
                Yes,
            ),
            (
                "create_issue(owner=acme,repo=web)",
                "create_issue",
                json!({"owner": "acme", "repo": "web"}),
                Yes,
            ),
            (
                "create_issue(owner=acme,repo=web)",
                "create_issue",
                json!({"owner": "acme", "repo": "api"}),
                No,
            ),
            (
                "create_issue(title=a,b)",
                "create_issue",
                json!({"title": "a,b"}),
                Yes,
            ),
            (
                "create_issue(count=3)",
                "create_issue",
                json!({"count": 3}),
                Yes,
            ),
            (
                "create_issue(count=3)",
                "create_issue",
                json!({"count": "3"}),
                Yes,
            ),
        ];
        for (pattern, tool, args, expected) in cases {
            let call = CallContext::new(args, ws);
            assert_eq!(
                call_covers(pattern, tool, Some(call)),
                *expected,
                "{pattern} {tool} {args}"
            );
            assert!(
                !name_matches(pattern, tool),
                "{pattern}: no name alone is covered"
            );
        }
    }

    /// What a workspace host would find: a home folder, and symlinks (`from` → `to`).
    #[derive(Debug)]
    struct Facts {
        home: Option<&'static str>,
        links: Vec<(&'static str, &'static str)>,
    }

    impl PathFacts for Facts {
        fn home(&self) -> Option<&str> {
            self.home
        }

        fn resolve(&self, path: &str) -> Result<String, String> {
            let absolute = if path.starts_with('/') {
                path.to_owned()
            } else {
                format!("/w/{path}")
            };
            if absolute.contains("dangling") {
                return Err("a symlink to nothing".into());
            }
            Ok(self
                .links
                .iter()
                .find_map(|(from, to)| {
                    absolute
                        .strip_prefix(from)
                        .map(|rest| format!("{to}{rest}"))
                })
                .unwrap_or(absolute))
        }
    }

    /// Issue 52: `Edit(src/**)` allowed an edit through `src/keys -> ~/.ssh`, and
    /// `Read(~/.ssh/**)` was read as a folder named `~` in the workspace. A path rule
    /// reads where a path leads too (sure only when both readings agree), and `~/` is
    /// the home folder the host names (unsure without one).
    #[test]
    fn a_path_rule_reads_where_a_path_leads_and_tilde_is_the_home_folder() {
        use Coverage::{No, Unsure, Yes};
        let facts = Facts {
            home: Some("/home/u"),
            links: vec![
                ("/w/src/keys", "/home/u/.ssh"),
                ("/w/NOTES.md", "/home/u/.ssh/id_rsa"),
                ("/w/src/alias", "/w/src/real"),
            ],
        };
        let no_home = Facts {
            home: None,
            links: Vec::new(),
        };
        let cases: &[(&str, &str, Option<&Facts>, Coverage)] = &[
            ("Edit(src/**)", "/w/src/main.rs", Some(&facts), Yes),
            ("Edit(src/**)", "src/keys/id_rsa", Some(&facts), Unsure),
            ("Edit(src/**)", "/w/src/keys/id_rsa", Some(&facts), Unsure),
            ("Edit(src/**)", "/w/src/alias/x.rs", Some(&facts), Yes),
            ("Edit(src/**)", "/w/src/dangling", Some(&facts), Unsure),
            ("Edit(src/**)", "/w/src/keys/id_rsa", None, Yes),
            ("Read(~/.ssh/**)", "/home/u/.ssh/id_rsa", Some(&facts), Yes),
            ("Read(~/.ssh/**)", "/w/NOTES.md", Some(&facts), Unsure),
            ("Read(~/.ssh/**)", "NOTES.md", Some(&facts), Unsure),
            ("Read(~/.ssh/**)", "/w/src/main.rs", Some(&facts), No),
            ("Read(~/.ssh/**)", "/w/~/.ssh/id_rsa", Some(&facts), No),
            (
                "Read(~/.ssh/**)",
                "/home/u/.ssh/id_rsa",
                Some(&no_home),
                Unsure,
            ),
            ("Read(~/.ssh/**)", "/home/u/.ssh/id_rsa", None, Unsure),
            ("Read(~)", "/home/u", Some(&facts), Yes),
            ("Read(/etc/**)", "x", Some(&facts), No),
            ("Read(/w/src/**)", "src/main.rs", None, Yes),
        ];
        for (pattern, path, facts, expected) in cases {
            let args = json!({"file_path": path});
            let call = CallContext::new(&args, "/w").with_paths(facts.map(|f| f as &dyn PathFacts));
            let tool = pattern.split_once('(').map_or("Read", |(tool, _)| tool);
            assert_eq!(
                call_covers(pattern, tool, Some(call)),
                *expected,
                "{pattern} {path}"
            );
        }
        // So a deny rule for the home folder's keys denies a read through a link, and
        // an allow of `src/**` asks about one.
        let deny = AgentPolicy::new(["code"])
            .with_rule(ToolRule::new("Read(~/.ssh/**)", RuleAction::Deny).expect("a rule"));
        let args = json!({"file_path": "/w/NOTES.md"});
        let call = CallContext::new(&args, "/w").with_paths(Some(&facts));
        assert_eq!(
            deny.route_call(&tool("Read", ToolMode::Immediate), Some(call)),
            RuleAction::Deny
        );
        let allow = AgentPolicy::new(["code"])
            .with_rule(ToolRule::new("Edit(src/**)", RuleAction::Allow).expect("a rule"));
        let args = json!({"file_path": "/w/src/keys/id_rsa"});
        let call = CallContext::new(&args, "/w").with_paths(Some(&facts));
        assert_eq!(
            allow.route_call(&tool("Edit", ToolMode::Deferred), Some(call)),
            RuleAction::Ask
        );
    }

    #[test]
    fn a_rule_that_can_match_nothing_is_refused() {
        for (pattern, says) in [
            ("Bash(", "ending with"),
            ("Bash(git", "ending with"),
            ("(git status)", "names its tool"),
            ("Bash()", "empty"),
            ("Bash(  )", "empty"),
            ("Bash)", "without"),
        ] {
            let error = ToolRule::new(pattern, RuleAction::Allow).expect_err(pattern);
            assert!(error.to_string().contains(says), "{pattern}: {error}");
        }
        assert!(ToolRule::new("Bash(git status*)", RuleAction::Allow).is_ok());
    }

    #[test]
    fn an_unsure_argument_pattern_counts_for_ask_and_deny_and_never_for_allow() {
        let spec = tool("Bash", ToolMode::Deferred);
        let chained = json!({"command": "git status; rm -rf /"});
        let call = Some(CallContext::new(&chained, "/p"));
        let rule = |action| ToolRule::new("Bash(git status*)", action).expect("a rule");
        let allow = AgentPolicy::new(["code"]).with_rule(rule(RuleAction::Allow));
        assert_eq!(
            allow.route_call(&spec, call),
            RuleAction::Ask,
            "asked, not allowed"
        );
        let deny = AgentPolicy::new(["code"]).with_rule(rule(RuleAction::Deny));
        assert_eq!(deny.route_call(&spec, call), RuleAction::Deny);
        let plain = json!({"command": "git status"});
        let plain = Some(CallContext::new(&plain, "/p"));
        assert_eq!(allow.route_call(&spec, plain), RuleAction::Allow);
        assert_eq!(
            allow.allowed_by_call(&spec, plain),
            Some(json!({"rule": {"pattern": "Bash(git status*)", "action": "allow"}}))
        );
        assert_eq!(
            allow.route(&spec),
            RuleAction::Ask,
            "without the call: not allowed"
        );
    }

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
            target_from: None,
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
                reason: Denial::Category("Category home not in allowed set".into())
            }
        );
        assert_eq!(
            p.decide(&t, &TargetCategory::Missing),
            PolicyDecision::Deny {
                reason: Denial::Category("Target entity has no category".into())
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
                reason: Denial::Rule {
                    tool: "set_task_status".into()
                }
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

    /// A top-level object with the value `nested` under key `x`.
    fn with_nested(top: &str, nested: serde_json::Value) -> serde_json::Value {
        json!({"repo": top, "title": "t", "x": nested})
    }

    fn nested_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            "[a-z/\":*]{0,12}".prop_map(serde_json::Value::String),
            any::<i64>().prop_map(|n| json!(n)),
            Just(serde_json::Value::Null),
        ];
        leaf.prop_recursive(3, 12, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map("[a-z\"]{1,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Issue 52: a JSON glob never gives `Yes` for a match found only in a nested
        /// value: whether it covers surely does not depend on what objects and arrays
        /// inside the arguments hold.
        #[test]
        fn a_json_glob_is_sure_only_of_the_top_level(
            pattern in "[*]?[a-z\":/{}*]{0,10}[*]?",
            top in "[a-z/]{0,8}",
            one in nested_value(),
            other in nested_value(),
        ) {
            let pattern = format!("create_issue({pattern})");
            proptest::prop_assume!(ToolRule::new(pattern.clone(), RuleAction::Allow).is_ok());
            let cover = |nested: serde_json::Value| {
                let nested = match nested {
                    v @ (serde_json::Value::Array(_) | serde_json::Value::Object(_)) => v,
                    leaf => json!([leaf]),
                };
                let args = with_nested(&top, nested);
                call_covers(&pattern, "create_issue", Some(CallContext::new(&args, "/w")))
            };
            proptest::prop_assert_eq!(cover(one) == Coverage::Yes, cover(other) == Coverage::Yes);
        }

        /// The nested copy the attack used is never a sure match, whatever the top-level
        /// value is.
        #[test]
        fn a_nested_copy_of_the_allowed_repo_never_allows(top in "[a-z/]{0,12}", key in "[a-z]{1,5}") {
            proptest::prop_assume!(top != "acme/web");
            let args = json!({"repo": top, key: {"repo": "acme/web"}});
            let call = Some(CallContext::new(&args, "/w"));
            let rule = ToolRule::new("create_issue(*\"repo\":\"acme/web\"*)", RuleAction::Allow).expect("a rule");
            let policy = AgentPolicy::new(["code"]).with_rule(rule);
            let spec = tool("create_issue", ToolMode::Deferred);
            proptest::prop_assert_eq!(policy.route_call(&spec, call), RuleAction::Ask);
        }
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

/// Issue 53, point 7: a chained command is judged part by part.
#[cfg(test)]
mod chained {
    use super::*;
    use serde_json::json;

    fn bash(mode: ToolMode) -> ToolSpec {
        ToolSpec {
            name: "Bash".into(),
            description: String::new(),
            args_schema: json!({"type": "object"}),
            mode,
            batch: None,
            summary: None,
            title: None,
            compensation: None,
            target_from: None,
        }
    }

    fn policy(rules: &[(&str, RuleAction)]) -> AgentPolicy {
        rules
            .iter()
            .fold(AgentPolicy::new(["code"]), |policy, (p, a)| {
                policy.with_rule(ToolRule::new(*p, *a).expect("a rule"))
            })
    }

    fn route(policy: &AgentPolicy, mode: ToolMode, command: &str) -> RuleAction {
        let args = json!({ "command": command, "description": "d" });
        policy.route_call(&bash(mode), Some(CallContext::new(&args, "/w")))
    }

    fn denial(policy: &AgentPolicy, command: &str) -> PolicyDecision {
        let args = json!({ "command": command });
        policy.decide_call(
            &bash(ToolMode::Deferred),
            Some(CallContext::new(&args, "/w")),
            &TargetCategory::Known("code".into()),
        )
    }

    #[test]
    fn one_deny_pattern_no_longer_denies_every_pipe() {
        let deny = policy(&[("Bash(rm -rf *)", RuleAction::Deny)]);
        for command in [
            "ls | wc -l",
            "npm test 2>&1",
            "git log | head",
            "ls > out.txt",
            "cargo build 2>/dev/null && echo ok",
            "echo 'rm -rf build'",
        ] {
            assert_eq!(
                route(&deny, ToolMode::Deferred, command),
                RuleAction::Ask,
                "{command}"
            );
            assert_eq!(
                route(&deny, ToolMode::Immediate, command),
                RuleAction::Allow,
                "{command}"
            );
        }
    }

    #[test]
    fn a_part_a_deny_rule_covers_denies_the_call_naming_rule_and_part() {
        let deny = policy(&[
            ("Bash(ls:*)", RuleAction::Allow),
            ("Bash(rm -rf *)", RuleAction::Deny),
        ]);
        let PolicyDecision::Deny { reason } = denial(&deny, "ls && rm -rf build") else {
            panic!("denied");
        };
        let Denial::NamedRule { tool, ruling } = reason else {
            panic!("named: {reason:?}");
        };
        assert_eq!(tool, "Bash");
        assert_eq!(
            ruling.to_string(),
            "denied by rule deny Bash(rm -rf *) (part 2 of 2: rm -rf build)"
        );
        let PolicyDecision::Deny { reason } = denial(&deny, "cd x; rm -rf build; ls") else {
            panic!("denied");
        };
        assert!(
            matches!(&reason, Denial::NamedRule { ruling, .. }
                if ruling.to_string() == "denied by rule deny Bash(rm -rf *) (part 2 of 3: rm -rf build)"),
            "{reason:?}"
        );
        let PolicyDecision::Deny { reason } = denial(&deny, "rm -rf build") else {
            panic!("denied");
        };
        assert!(
            matches!(&reason, Denial::NamedRule { ruling, .. }
                if ruling.to_string() == "denied by rule deny Bash(rm -rf *)"),
            "{reason:?}"
        );
        // A rule on the tool's own name words it as ever.
        let whole = policy(&[("Bash", RuleAction::Deny)]);
        assert_eq!(
            denial(&whole, "ls"),
            PolicyDecision::Deny {
                reason: Denial::Rule {
                    tool: "Bash".into()
                }
            }
        );
    }

    #[test]
    fn the_ways_around_a_deny_rule_are_each_a_part_it_covers() {
        let deny = policy(&[
            ("Bash(rm -rf *)", RuleAction::Deny),
            ("Bash(*)", RuleAction::Allow),
        ]);
        for command in [
            "ls && rm -rf build",
            "ls; rm -rf build",
            "ls || rm -rf build",
            "ls | rm -rf build",
            "ls & rm -rf build",
            "ls\nrm -rf build",
            "echo $(rm -rf build)",
            "echo \"$(rm -rf build)\"",
            "echo `rm -rf build`",
            "(cd x && rm -rf build)",
            "{ rm -rf build; }",
            "if true; then rm -rf build; fi",
            "for d in a; do rm -rf $d; done",
            "! rm -rf build",
            "'rm' -rf build",
            "r\\m -rf build",
            "rm  -rf\tbuild",
            "sudo rm -rf build",
            "/bin/rm -rf build",
            "FOO=1 rm -rf build",
            "env FOO=1 rm -rf build",
            "rm -rf build > /dev/null 2>&1",
            "cat <(rm -rf build)",
            "ls \\\n && rm -rf build",
            "ls;rm -rf build",
            "bash -c 'rm -rf build'",
            "sh -ec \"ls && rm -rf build\"",
            "eval rm -rf build",
            "ls | xargs rm -rf build",
        ] {
            assert_eq!(
                route(&deny, ToolMode::Deferred, command),
                RuleAction::Deny,
                "{command:?}"
            );
        }
    }

    #[test]
    fn a_part_that_cannot_be_read_asks_and_never_denies_or_allows() {
        let rules = policy(&[
            ("Bash(rm -rf *)", RuleAction::Deny),
            ("Bash(cat:*)", RuleAction::Allow),
            ("Bash(echo:*)", RuleAction::Allow),
        ]);
        for command in [
            "cat <<EOF\nrm -rf /\nEOF",
            "echo 'unclosed",
            "echo $((1 + 2))",
            "$CMD -rf build",
            "case x in a) echo;; esac",
            "echo ok; f() { echo; }",
        ] {
            for mode in [ToolMode::Deferred, ToolMode::Immediate] {
                assert_eq!(route(&rules, mode, command), RuleAction::Ask, "{command:?}");
            }
        }
        // What was read before it still counts: a part the deny covers denies.
        assert_eq!(
            route(
                &rules,
                ToolMode::Deferred,
                "rm -rf build; cat <<EOF\nx\nEOF"
            ),
            RuleAction::Deny
        );
        let args = json!({"command": "cat <<EOF\nx\nEOF"});
        let ruling = rules
            .ruling("Bash", Some(CallContext::new(&args, "/w")))
            .expect("a ruling");
        assert_eq!(
            ruling.to_string(),
            "asked by rule deny Bash(rm -rf *) (a part of the command cannot be read)"
        );
    }

    #[test]
    fn allow_needs_every_part_allowed() {
        let allow = policy(&[("Bash(ls:*)", RuleAction::Allow)]);
        assert_eq!(
            route(&allow, ToolMode::Deferred, "ls -la"),
            RuleAction::Allow
        );
        assert_eq!(
            route(&allow, ToolMode::Deferred, "ls 2>&1"),
            RuleAction::Allow
        );
        for command in [
            "ls | wc -l",
            "ls > out.txt",
            "ls $(rm x)",
            "X=1 ls",
            "ls; rm x",
        ] {
            assert_eq!(
                route(&allow, ToolMode::Deferred, command),
                RuleAction::Ask,
                "{command}"
            );
        }
        assert_eq!(
            route(&allow, ToolMode::Deferred, "ls -la | ls && ls"),
            RuleAction::Allow
        );
        // Each part allowed by a rule of its own allows the call, naming them all.
        let both = allow.with_rule(ToolRule::new("Bash(wc:*)", RuleAction::Allow).expect("rule"));
        assert_eq!(
            route(&both, ToolMode::Deferred, "ls | wc -l"),
            RuleAction::Allow
        );
        let args = json!({"command": "ls -la | wc -l && ls"});
        assert_eq!(
            both.allowed_by_call(
                &bash(ToolMode::Deferred),
                Some(CallContext::new(&args, "/w"))
            ),
            Some(json!({"rules": [
                {"pattern": "Bash(ls:*)", "action": "allow"},
                {"pattern": "Bash(wc:*)", "action": "allow"},
            ]}))
        );
        assert!(allow_rules_cover(
            &["Bash(ls:*)", "Bash(wc:*)"],
            "Bash",
            Some(CallContext::new(&args, "/w"))
        ));
        assert!(!allow_rules_cover(
            &["Bash(ls:*)"],
            "Bash",
            Some(CallContext::new(&args, "/w"))
        ));
        // Not when a part is no plain command, nor when an ask or deny counts.
        for command in ["ls | wc -l > out", "ls | wc $(rm x)"] {
            assert_eq!(
                route(&both, ToolMode::Deferred, command),
                RuleAction::Ask,
                "{command}"
            );
        }
        let asked = both.with_rule(ToolRule::new("Bash(wc -l*)", RuleAction::Ask).expect("rule"));
        assert_eq!(
            route(&asked, ToolMode::Deferred, "ls | wc -l"),
            RuleAction::Ask
        );
    }

    /// A simple command from a small vocabulary, `rm -rf …` among them.
    fn simple() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("ls -la".to_owned()),
            Just("wc -l".to_owned()),
            Just("git status".to_owned()),
            Just("echo 'a; b && c'".to_owned()),
            Just("cat \"x | y\"".to_owned()),
            Just("rm -rf build".to_owned()),
            Just("rm  -rf 'dist'".to_owned()),
            "[a-z]{1,6}".prop_map(|w| format!("ls {w}")),
        ]
    }

    /// A command line built from simple commands the way the shell chains them.
    fn line() -> impl proptest::strategy::Strategy<Value = (String, Vec<String>)> {
        use proptest::prelude::*;
        let leaf = simple().prop_map(|c| (c.clone(), vec![c]));
        leaf.prop_recursive(4, 16, 2, |inner| {
            (
                inner.clone(),
                inner,
                prop_oneof![
                    Just(" ; "),
                    Just(" && "),
                    Just(" || "),
                    Just(" | "),
                    Just(" & "),
                    Just("\n"),
                    Just(" |& "),
                ],
                0..6u8,
            )
                .prop_map(|((a, mut all), (b, more), sep, wrap)| {
                    all.extend(more);
                    let b = match wrap {
                        0 => format!("( {b} )"),
                        1 => format!("echo $( {b} )"),
                        2 => format!("{b} 2>&1"),
                        3 => format!("{{ {b} ; }}"),
                        _ => b,
                    };
                    (format!("{a}{sep}{b}"), all)
                })
        })
    }

    proptest::proptest! {
        /// No split lets a part a deny rule covers through: a line holding `rm -rf …`
        /// anywhere is denied, whatever allows the rest.
        #[test]
        fn no_split_lets_a_denied_part_through((command, simples) in line()) {
            let rules = policy(&[
                ("Bash(rm -rf *)", RuleAction::Deny),
                ("Bash(*)", RuleAction::Allow),
            ]);
            let expected = if simples.iter().any(|c| c.starts_with("rm")) {
                RuleAction::Deny
            } else {
                RuleAction::Allow
            };
            let routed = route(&rules, ToolMode::Deferred, &command);
            // `echo $( … )` and `2>&1` hold no file write; a substitution is no plain
            // part, so an allow of everything still asks about it.
            if expected == RuleAction::Deny {
                proptest::prop_assert_eq!(routed, RuleAction::Deny, "{:?}", command);
            } else {
                proptest::prop_assert_ne!(routed, RuleAction::Deny, "{:?}", command);
            }
        }

        /// Allow needs every part allowed: with `ls`, `wc` and `git status` allowed, a
        /// line runs unasked only when every command in it is one of them.
        #[test]
        fn allow_needs_every_part((command, simples) in line()) {
            let rules = policy(&[
                ("Bash(ls:*)", RuleAction::Allow),
                ("Bash(wc:*)", RuleAction::Allow),
                ("Bash(git status:*)", RuleAction::Allow),
            ]);
            let routed = route(&rules, ToolMode::Deferred, &command);
            let all_allowed = simples.iter().all(|c| {
                c.starts_with("ls ") || c.starts_with("wc ") || c == "git status"
            });
            if !all_allowed {
                proptest::prop_assert_eq!(routed, RuleAction::Ask, "{:?}", command);
            }
            if all_allowed && !command.contains("echo") {
                proptest::prop_assert_eq!(routed, RuleAction::Allow, "{:?}", command);
            }
        }

        /// Whatever the text, splitting never panics, and an allow of `ls:*` lets a
        /// line run unasked only when every part it holds is an `ls`.
        #[test]
        fn any_text_is_split_and_allowed_only_part_by_part(command in "[ -~\n]{0,40}") {
            let parts = crate::split_command(&command);
            let rules = policy(&[("Bash(ls:*)", RuleAction::Allow)]);
            if route(&rules, ToolMode::Deferred, &command) == RuleAction::Allow {
                proptest::prop_assert!(!parts.is_empty());
                for part in &parts {
                    proptest::prop_assert!(part.is_plain(), "{:?}", command);
                    proptest::prop_assert_eq!(part.words().first().map(String::as_str), Some("ls"), "{:?}", command);
                }
            }
        }
    }
}

/// Issue 57: the `audit` action routes as `allow`, is kept apart for the record, and
/// never weakens a stricter rule.
#[cfg(test)]
mod audit {
    use super::*;
    use crate::{RuleProvenance, RuleSource};
    use serde_json::json;

    fn spec(name: &str, mode: ToolMode) -> ToolSpec {
        ToolSpec::new(name, "t", mode, json!({"type": "object"}))
    }

    fn rule(pattern: &str, action: RuleAction) -> ToolRule {
        ToolRule::new(pattern, action).expect("a rule")
    }

    #[test]
    fn an_audit_rule_routes_as_allow_and_marks_the_record() {
        let policy = AgentPolicy::default().with_rule(rule("send", RuleAction::Audit));
        let send = spec("send", ToolMode::Deferred);
        assert_eq!(policy.route(&send), RuleAction::Allow);
        assert_eq!(policy.ruled("send"), Some(RuleAction::Allow));
        assert_eq!(
            policy.ruled_call_audited("send", None),
            Some(RuleAction::Audit)
        );
        let by = policy.allowed_by(&send).expect("runs unasked");
        assert_eq!(by["audited"], true, "{by}");
        assert_eq!(by["rule"]["action"], "audit", "{by}");
        // Audit over allow: a call both cover is audited.
        let both = policy.clone().with_rule(rule("s*", RuleAction::Allow));
        assert_eq!(both.allowed_by(&send).expect("runs")["audited"], true);
        // An allow alone marks nothing.
        let allow = AgentPolicy::default().with_rule(rule("send", RuleAction::Allow));
        assert_eq!(allow.allowed_by(&send).expect("runs").get("audited"), None);
    }

    #[test]
    fn an_audit_rule_never_weakens_ask_deny_or_review() {
        let send = spec("send", ToolMode::Immediate);
        for (stricter, routed) in [
            (RuleAction::Ask, RuleAction::Ask),
            (RuleAction::Deny, RuleAction::Deny),
        ] {
            let policy = AgentPolicy::default()
                .with_rule(rule("send", RuleAction::Audit))
                .with_rule(rule("s*", stricter));
            assert_eq!(policy.route(&send), routed);
            assert_eq!(policy.allowed_by(&send), None);
        }
        let policy = AgentPolicy::default().with_rule(rule("send", RuleAction::Audit));
        assert_eq!(
            policy.route(&spec("send", ToolMode::Review)),
            RuleAction::Ask
        );
        // Unsure of a chained command, an audit rule counts as an allow would: not at all.
        let bash = AgentPolicy::default().with_rule(rule("Bash(ls:*)", RuleAction::Audit));
        let args = json!({"command": "ls; rm -rf /"});
        let call = Some(CallContext::new(&args, "/w"));
        assert_eq!(bash.ruled_call("Bash", call), None);
        assert_eq!("audit".parse::<RuleAction>(), Ok(RuleAction::Audit));
    }

    #[test]
    fn a_grant_suggestion_never_replaces_an_audit_rule() {
        let policy = AgentPolicy::default().with_rule(rule("send", RuleAction::Audit));
        let in_force = crate::InForce::of(&policy, "send", 1, None);
        assert_eq!(in_force.rule, Some("audit"));
        let refused = in_force.refusal("a", "send").expect("refused");
        assert!(refused.contains("audit rule"), "{refused}");
    }

    #[test]
    fn provenance_is_carried_but_is_not_part_of_what_a_rule_says() {
        let at = time::macros::datetime!(2026-12-01 10:00 UTC);
        let plain = rule("send", RuleAction::Deny);
        let known = plain.clone().with_provenance(RuleProvenance::new(
            RuleSource::PolicyFile {
                sha256: "ab12cd34ef".into(),
            },
            Some("alice".into()),
            at,
        ));
        assert_eq!(plain, known, "the same rule whoever set it");
        assert_eq!(known.provenance().map(|p| p.set_at), Some(at));
        let policy = AgentPolicy::default().with_rule(known);
        let ruling = policy.ruling("send", None).expect("a ruling");
        assert_eq!(
            ruling.provenance.map(|p| p.summary()).as_deref(),
            Some("policy file ab12cd34, set by alice 2026-12-01")
        );
        let by = AgentPolicy::default()
            .with_rule(
                rule("send", RuleAction::Allow).with_provenance(RuleProvenance::new(
                    RuleSource::Command,
                    Some("bob".into()),
                    at,
                )),
            )
            .allowed_by(&spec("send", ToolMode::Deferred))
            .expect("runs");
        assert_eq!(by["rule"]["setBy"], "bob", "{by}");
        assert_eq!(by["rule"]["source"], "command", "{by}");
    }

    #[test]
    fn what_decided_a_refusal_or_a_wait_names_the_rule_with_its_origin_or_the_mode() {
        let at = time::macros::datetime!(2026-12-01 10:00 UTC);
        let from_file = RuleProvenance::new(
            RuleSource::PolicyFile {
                sha256: "ab12cd34ef".into(),
            },
            Some("alice".into()),
            at,
        );
        let send = spec("send", ToolMode::Immediate);
        // A deny rule, outranking an allow: the deny, with where it came from.
        let policy = AgentPolicy::default()
            .with_rule(rule("s*", RuleAction::Allow))
            .with_rule(rule("send", RuleAction::Deny).with_provenance(from_file.clone()));
        let by = policy.decided_by_call(&send, None);
        assert_eq!(by["rule"]["pattern"], "send", "{by}");
        assert_eq!(by["rule"]["action"], "deny", "{by}");
        assert_eq!(by["rule"]["decided"], "deny", "{by}");
        assert_eq!(by["rule"]["source"], "policyFile", "{by}");
        assert_eq!(by["rule"]["sha256"], "ab12cd34ef", "{by}");
        assert_eq!(by["rule"]["setBy"], "alice", "{by}");
        assert_eq!(by["rule"]["setAt"], "2026-12-01T10:00:00Z", "{by}");
        // The same shape `allowedBy` gives the rule that lets a call run.
        let allow = AgentPolicy::default()
            .with_rule(rule("send", RuleAction::Allow).with_provenance(from_file));
        let allowed = allow.allowed_by(&send).expect("runs");
        let mut decided = allow.decided_by_call(&send, None);
        assert_eq!(decided["rule"]["decided"], "allow", "{decided}");
        decided["rule"]
            .as_object_mut()
            .expect("a rule")
            .remove("decided");
        assert_eq!(decided, allowed);
        // An ask rule on a command's part: the part it found.
        let bash = AgentPolicy::default().with_rule(rule("Bash(rm:*)", RuleAction::Ask));
        let args = json!({"command": "ls && rm -rf build"});
        let by = bash.decided_by_call(
            &spec("Bash", ToolMode::Immediate),
            Some(CallContext::new(&args, "/w")),
        );
        assert_eq!(by["rule"]["decided"], "ask", "{by}");
        assert_eq!(by["rule"]["part"]["index"], 2, "{by}");
        assert_eq!(by["rule"]["source"], json!(null), "no provenance: {by}");
        // No rule: the mode; a tool under review is asked whatever a rule allows.
        assert_eq!(
            AgentPolicy::default().decided_by_call(&spec("send", ToolMode::Deferred), None),
            json!({"mode": "deferred"})
        );
        assert_eq!(
            allow.decided_by_call(&spec("send", ToolMode::Review), None),
            json!({"mode": "review"})
        );
    }
}
