//! `assent doctor`'s reading of an agent's hook settings: for each entry of ours (the
//! ones `assent hook install` writes, or a person wrote by hand to the same effect),
//! whether a failure of Assent (the binary missing, a crash, a timeout) blocks the call
//! or lets it through under that agent's own rules for failed hooks, and the repair
//! that makes it block. Pure: a settings value in, findings or a repaired value out;
//! the CLI reads the files, asks the filesystem about the command's program and writes.
//!
//! What each agent does with a failed hook is [`contract`]'s table, each row saying
//! what it rests on.

use crate::AgentKind;
use serde_json::{Value, json};
use std::time::Duration;

/// How sure a finding is to let a call through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Severity {
    /// Worth knowing; the call is still blocked when Assent fails.
    Warning,
    /// A failure of Assent lets the call through: the door is open.
    FailOpen,
}

/// One thing found about one hook entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// What was found, for a person.
    pub text: String,
    /// Whether [`repair`] mends it.
    pub fixable: bool,
}

/// What an agent does when its hook fails, and what a settings entry must say to make
/// that a block.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Contract {
    /// The setting that makes a failed hook block, as a key and the value it needs,
    /// where the agent has one.
    pub fail_closed: Option<(&'static str, bool)>,
    /// The key of the hook's timeout.
    pub timeout_key: &'static str,
    /// Whether the agent counts the timeout in milliseconds (else seconds).
    pub timeout_in_millis: bool,
    /// The agent's own timeout for a hook whose entry names none.
    pub default_timeout: Duration,
    /// Whether the agent blocks a command hook whose program is missing (the shell's
    /// exit 127 and its line on stderr), without any setting.
    pub missing_program_blocks: bool,
    /// Whether the agent blocks on any exit other than 0 (a crash, a missing
    /// program), without any setting.
    pub crash_blocks: bool,
    /// What still lets a call through when the agent has no fail-closed setting, for
    /// the report.
    pub open_without_setting: &'static str,
    /// What the row rests on, for the report.
    pub rests_on: &'static str,
}

/// Each agent's rules for a failed hook. Where each row comes from (documentation,
/// source, or the real agent driven by the tests) is its `rests_on`.
pub const fn contract(kind: AgentKind) -> Contract {
    match kind {
        AgentKind::ClaudeCode => Contract {
            fail_closed: Some(("onFailure", true)),
            timeout_key: "timeout",
            timeout_in_millis: false,
            default_timeout: Duration::from_secs(600),
            missing_program_blocks: false,
            crash_blocks: false,
            open_without_setting: "",
            rests_on: "Claude Code 2.1.328's settings schema, and the real agent driven by `assent doctor --canary` in the tests: `onFailure` \"continue\" (the default) lets the action go ahead when a hook could not start, timed out or exited other than 0 or 2; \"block\" counts such a failure as exit 2; ignored for async hooks",
        },
        AgentKind::Vscode => Contract {
            fail_closed: None,
            timeout_key: "timeout",
            timeout_in_millis: false,
            default_timeout: Duration::from_secs(30),
            missing_program_blocks: false,
            crash_blocks: false,
            open_without_setting: "should this program go missing, crash or hang past its timeout, the call runs (`onFailure` is Claude Code's setting: VS Code does not read it)",
            rests_on: "VS Code's agent hooks documentation (code.visualstudio.com/docs/agent-customization/hooks, \"Exit codes\"; microsoft/vscode-docs 00a75e3): exit 0 is success, 2 blocks, any other exit is a non-blocking warning and processing continues; its hook properties (type, command, windows, linux, osx, cwd, env, timeout) have no failure setting. Not driven for real here (VS Code is not installable headless)",
        },
        AgentKind::Codex => Contract {
            fail_closed: None,
            timeout_key: "timeout",
            timeout_in_millis: false,
            default_timeout: Duration::from_secs(600),
            missing_program_blocks: false,
            crash_blocks: false,
            open_without_setting: "should this program go missing, crash, hang past its timeout or answer a field Codex does not know, the call runs",
            rests_on: "Codex's hook runner (openai/codex codex-rs/hooks/src/events/pre_tool_use.rs, parse_completed: a run error, a timeout, an exit other than 0 or 2, or output it cannot read marks the hook failed and does not block) and its hook settings (codex-rs/config/src/hook_config.rs: a command handler has command, commandWindows, timeout, async, statusMessage, additionalContextLimit and no failure setting; an unknown key of a handler is ignored); Codex CLI 0.169.0 as driven in the tests (REAL-CLIENTS.md)",
        },
        AgentKind::Cursor => Contract {
            fail_closed: Some(("failClosed", true)),
            timeout_key: "timeout",
            timeout_in_millis: false,
            default_timeout: Duration::from_secs(30),
            missing_program_blocks: false,
            crash_blocks: false,
            open_without_setting: "",
            rests_on: "Cursor's hooks documentation (cursor.com/docs/agent/hooks, as quoted in public surveys of agent hooks): exit 2 blocks, and a hook that exits otherwise lets the action go ahead unless its entry says `failClosed: true` (what `assent hook install` writes). Not driven for real here (Cursor's agent is not on npm)",
        },
        AgentKind::Copilot => Contract {
            fail_closed: None,
            timeout_key: "timeoutSec",
            timeout_in_millis: false,
            default_timeout: Duration::from_secs(30),
            missing_program_blocks: true,
            crash_blocks: true,
            open_without_setting: "a preToolUse hook that hangs past its timeoutSec lets the call run, whatever the settings (a crash or a missing program blocks); Copilot CLI releases before its fail-closed preToolUse let every failed hook through",
            rests_on: "GitHub Copilot's hooks reference (docs.github.com/en/copilot/reference/hooks-reference, \"Exit codes for command hooks\"; github/docs 05da5bc): a preToolUse command hook that crashes or exits other than 0 denies the call (\"fail-closed\"), and a timeout is fail-open for every event, policy hooks included, with no setting to change it; the earlier reference (github/docs 2199f62) had every failure fail-open. Not driven for real here (the CLI needs a GitHub sign-in)",
        },
        AgentKind::Gemini => Contract {
            fail_closed: None,
            timeout_key: "timeout",
            timeout_in_millis: true,
            default_timeout: Duration::from_secs(60),
            missing_program_blocks: true,
            crash_blocks: false,
            open_without_setting: "",
            rests_on: "Gemini CLI 0.61.0's hook runner, and the real agent driven by `assent doctor --canary` in the tests: a hook that times out or exits 1 or prints nothing lets the tool run; text that is not JSON with an exit other than 0 or 1 (a missing program's 127) is a denial; no setting makes a failure block",
        },
    }
}

/// The events before a tool runs, where a failure decides whether it runs.
fn is_before(event: &str) -> bool {
    matches!(
        event,
        "PreToolUse"
            | "preToolUse"
            | "BeforeTool"
            | "PermissionRequest"
            | "beforeShellExecution"
            | "beforeMCPExecution"
    )
}

/// One hook entry of ours, found in a settings file, with what was found about it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Door {
    /// The event it answers (`PreToolUse`, `BeforeTool`, …).
    pub event: String,
    /// Where it is in the file (`hooks.PreToolUse[1].hooks[0]`).
    pub at: String,
    /// The command it runs, for a command hook.
    pub command: Option<String>,
    /// The URL it posts to, for an `http` hook.
    pub url: Option<String>,
    /// The timeout the agent gives it (the entry's, else the agent's default).
    pub timeout: Duration,
    /// The timeout its wait needs (above the hook's whole run).
    pub needed: Duration,
    /// What was found.
    pub findings: Vec<Finding>,
}

/// What the filesystem says about the program a hook command names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Program {
    /// It exists and may be run; `this` when it is the running binary.
    Runs {
        /// Whether it is the binary running the doctor.
        this: bool,
    },
    /// No such file, or not executable.
    Missing,
}

/// Every entry of ours in `settings` of `kind`, with what was found about it;
/// `program` tells whether a command's program can run.
pub fn inspect(kind: AgentKind, settings: &Value, program: &dyn Fn(&str) -> Program) -> Vec<Door> {
    let rules = contract(kind);
    let mut doors = Vec::new();
    for (event, at, hook) in ours(settings) {
        let command = ["command", "bash"]
            .iter()
            .find_map(|key| hook.get(*key).and_then(Value::as_str))
            .map(str::to_owned);
        let url = hook.get("url").and_then(Value::as_str).map(str::to_owned);
        let wait = command
            .as_deref()
            .and_then(command_wait)
            .or_else(|| url.as_deref().and_then(url_wait))
            .map_or_else(|| crate::default_wait(kind), Duration::from_secs);
        let needed = crate::gate::agent_timeout(wait);
        let timeout = entry_timeout(&rules, hook).unwrap_or(rules.default_timeout);
        let mut findings = Vec::new();
        if is_before(&event) {
            findings = judge(
                kind,
                &rules,
                &event,
                hook,
                command.as_deref(),
                program,
                timeout,
                needed,
            );
        }
        doors.push(Door {
            event,
            at,
            command,
            url,
            timeout,
            needed,
            findings,
        });
    }
    doors
}

/// The findings about one entry before a tool runs.
#[allow(clippy::too_many_arguments)]
fn judge(
    kind: AgentKind,
    rules: &Contract,
    event: &str,
    hook: &Value,
    command: Option<&str>,
    program: &dyn Fn(&str) -> Program,
    timeout: Duration,
    needed: Duration,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut closed = true;
    if let Some((key, _)) = rules.fail_closed {
        let set = match key {
            "onFailure" => hook.get(key).and_then(Value::as_str) == Some("block"),
            _ => hook.get(key).and_then(Value::as_bool) == Some(true),
        };
        let wanted = if key == "onFailure" {
            "\"onFailure\": \"block\""
        } else {
            "\"failClosed\": true"
        };
        if !set {
            closed = false;
            findings.push(Finding {
                severity: Severity::FailOpen,
                text: format!(
                    "without {wanted}, {kind} lets the call through when Assent cannot start, crashes or times out"
                ),
                fixable: true,
            });
        }
    } else if crate::install::needs_exit_2(kind, event) {
        if !command.is_some_and(exits_2_on_failure) {
            closed = false;
            findings.push(Finding {
                severity: Severity::FailOpen,
                text: format!(
                    "without `|| {{ echo …>&2; exit 2; }}` after its command, {kind} runs the call when Assent cannot start or crashes ({kind} has no fail-closed setting; exit 2 with a reason on stderr blocks)"
                ),
                fixable: true,
            });
        }
    } else {
        closed = false;
    }
    // Only a fail-closed setting holds when the agent kills the hook at its timeout.
    let mut timeout_closed = closed && rules.fail_closed.is_some();
    if hook.get("async").and_then(Value::as_bool) == Some(true) {
        closed = false;
        timeout_closed = false;
        findings.push(Finding {
            severity: Severity::FailOpen,
            text: "\"async\": true: the agent does not wait for the hook's answer (and ignores onFailure)".to_owned(),
            fixable: true,
        });
    }
    if timeout < needed {
        let (severity, then) = if timeout_closed {
            (
                Severity::Warning,
                "kills it and blocks calls still waiting for a person",
            )
        } else {
            (
                Severity::FailOpen,
                "kills it and runs calls still waiting for a person",
            )
        };
        findings.push(Finding {
            severity,
            text: format!(
                "timeout {} s is below the {} s its wait needs: {kind} {then}",
                timeout.as_secs(),
                needed.as_secs()
            ),
            fixable: true,
        });
    }
    if rules.fail_closed.is_none() && !rules.open_without_setting.is_empty() {
        findings.push(Finding {
            severity: Severity::Warning,
            text: format!(
                "{kind} has no setting that makes a failed hook block: {}",
                rules.open_without_setting
            ),
            fixable: false,
        });
    }
    if let Some(command) = command
        && let Some(name) = command_program(command)
    {
        match program(&name) {
            Program::Missing => {
                let blocks = closed || rules.missing_program_blocks || rules.crash_blocks;
                findings.push(Finding {
                    severity: if blocks {
                        Severity::Warning
                    } else {
                        Severity::FailOpen
                    },
                    text: if blocks {
                        format!("{name} does not exist or cannot run: every call is blocked")
                    } else {
                        format!(
                            "{name} does not exist or cannot run, and {kind} runs the call when its hook fails: install the hook again (`assent hook install`)"
                        )
                    },
                    fixable: false,
                });
            }
            Program::Runs { this: false } => findings.push(Finding {
                severity: Severity::Warning,
                text: format!("{name} is not the assent binary running this doctor"),
                fixable: false,
            }),
            Program::Runs { this: true } => {}
        }
    }
    findings
}

/// `settings` with every entry of ours made to block on failure where the agent can
/// (its fail-closed setting set, `async` removed, a timeout below its wait's raised),
/// and each change said; every other key and entry is kept as it was.
pub fn repair(kind: AgentKind, mut settings: Value) -> (Value, Vec<String>) {
    let rules = contract(kind);
    let mut changes = Vec::new();
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return (settings, changes);
    };
    for (event, list) in hooks.iter_mut() {
        let Some(list) = list.as_array_mut() else {
            continue;
        };
        for (i, entry) in list.iter_mut().enumerate() {
            if !crate::install::is_ours(entry) {
                continue;
            }
            let inner = entry.get("hooks").is_some();
            let hooks: Vec<(String, &mut Value)> = match entry.get_mut("hooks") {
                Some(Value::Array(hooks)) => hooks
                    .iter_mut()
                    .enumerate()
                    .map(|(j, hook)| (format!("hooks.{event}[{i}].hooks[{j}]"), hook))
                    .collect(),
                _ if inner => Vec::new(),
                _ => vec![(format!("hooks.{event}[{i}]"), entry)],
            };
            for (at, hook) in hooks {
                if !single_is_ours(hook) {
                    continue;
                }
                mend(kind, &rules, event, &at, hook, &mut changes);
            }
        }
    }
    (settings, changes)
}

/// Mends one hook of ours.
fn mend(
    kind: AgentKind,
    rules: &Contract,
    event: &str,
    at: &str,
    hook: &mut Value,
    changes: &mut Vec<String>,
) {
    let Some(object) = hook.as_object_mut() else {
        return;
    };
    if crate::install::needs_exit_2(kind, event)
        && let Some(Value::String(command)) = object.get_mut("command")
        && !exits_2_on_failure(command)
    {
        command.push_str(crate::install::EXIT_2_ON_FAILURE);
        changes.push(format!(
            "{at}: added `|| {{ echo …>&2; exit 2; }}` after the command"
        ));
    }
    if let Some((key, _)) = rules.fail_closed {
        let value = if key == "onFailure" {
            json!("block")
        } else {
            json!(true)
        };
        if object.get(key) != Some(&value) {
            changes.push(format!("{at}: set \"{key}\": {value}"));
            object.insert(key.to_owned(), value);
        }
    }
    if object.get("async").and_then(Value::as_bool) == Some(true) {
        changes.push(format!("{at}: removed \"async\": true"));
        object.remove("async");
    }
    let command = ["command", "bash"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .map(str::to_owned);
    let url = object.get("url").and_then(Value::as_str).map(str::to_owned);
    let wait = command
        .as_deref()
        .and_then(command_wait)
        .or_else(|| url.as_deref().and_then(url_wait))
        .map_or_else(|| crate::default_wait(kind), Duration::from_secs);
    let needed = crate::gate::agent_timeout(wait);
    let current =
        entry_timeout(rules, &Value::Object(object.clone())).unwrap_or(rules.default_timeout);
    if current < needed {
        let value = if rules.timeout_in_millis {
            json!(u64::try_from(needed.as_millis()).unwrap_or(u64::MAX))
        } else {
            json!(needed.as_secs())
        };
        changes.push(format!("{at}: set \"{}\": {value}", rules.timeout_key));
        object.insert(rules.timeout_key.to_owned(), value);
    }
}

/// Whether a hook command exits 2 when what runs before its last `||` fails (what
/// [`install::EXIT_2_ON_FAILURE`](crate::install::EXIT_2_ON_FAILURE) writes, or a
/// hand-written `|| exit 2`).
fn exits_2_on_failure(command: &str) -> bool {
    let words = shell_words(command);
    let Some(or) = words.iter().rposition(|w| w == "||") else {
        return false;
    };
    words[or + 1..]
        .windows(2)
        .any(|pair| pair[0] == "exit" && pair[1].trim_end_matches([';', '}']) == "2")
}

/// The timeout an entry names, in the agent's unit.
fn entry_timeout(rules: &Contract, hook: &Value) -> Option<Duration> {
    let value = hook.get(rules.timeout_key)?;
    let number = value
        .as_u64()
        .or_else(|| value.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))?;
    Some(if rules.timeout_in_millis {
        Duration::from_millis(number)
    } else {
        Duration::from_secs(number)
    })
}

/// Whether one hook (not a group) is ours.
fn single_is_ours(hook: &Value) -> bool {
    hook.get("hooks").is_none() && crate::install::is_ours(hook)
}

/// Every hook of ours in `settings`: its event, where it is, and the hook itself.
fn ours(settings: &Value) -> Vec<(String, String, &Value)> {
    let mut found = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return found;
    };
    for (event, list) in hooks {
        let Some(list) = list.as_array() else {
            continue;
        };
        for (i, entry) in list.iter().enumerate() {
            match entry.get("hooks") {
                Some(Value::Array(inner)) => {
                    for (j, hook) in inner.iter().enumerate() {
                        if single_is_ours(hook) {
                            found.push((
                                event.clone(),
                                format!("hooks.{event}[{i}].hooks[{j}]"),
                                hook,
                            ));
                        }
                    }
                }
                Some(_) => {}
                None if crate::install::is_ours(entry) => {
                    found.push((event.clone(), format!("hooks.{event}[{i}]"), entry));
                }
                None => {}
            }
        }
    }
    found
}

/// What in a whole settings file of `kind` keeps every hook in it (ours included) from
/// running: Claude Code's and Copilot's `disableAllHooks: true`, a key at the top of
/// Codex's `hooks.json` that Codex does not know (it then rejects the whole file:
/// `HooksFile` denies unknown fields in codex-rs/config/src/hook_config.rs). Each is a
/// fail-open finding the doctor cannot mend: the person wrote it.
pub fn disabled(kind: AgentKind, settings: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(top) = settings.as_object() else {
        return findings;
    };
    if matches!(kind, AgentKind::ClaudeCode | AgentKind::Copilot)
        && top.get("disableAllHooks").and_then(Value::as_bool) == Some(true)
    {
        findings.push(Finding {
            severity: Severity::FailOpen,
            text: format!(
                "\"disableAllHooks\": true: {kind} runs none of the hooks {}, Assent's included",
                if kind == AgentKind::Copilot {
                    "of this file"
                } else {
                    "of any settings file"
                }
            ),
            fixable: false,
        });
    }
    if kind == AgentKind::Codex {
        for key in top
            .keys()
            .filter(|k| !matches!(k.as_str(), "hooks" | "description"))
        {
            findings.push(Finding {
                severity: Severity::FailOpen,
                text: format!(
                    "the key {key:?} at the top of the file: Codex rejects a hooks file with a key it does not know, and runs none of its hooks"
                ),
                fixable: false,
            });
        }
    }
    findings
}

/// The hooks of `settings` whose command mentions `assent` and `hook` but that are not
/// recognised as ours (a wrapper such as `bash -c '…'` or `env … assent`): the doctor
/// cannot judge them, and says where they are.
pub fn unrecognised(settings: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return found;
    };
    let suspicious = |hook: &Value| {
        ["command", "bash"].iter().any(|key| {
            hook.get(*key)
                .and_then(Value::as_str)
                .is_some_and(|c| c.contains("assent") && c.contains("hook"))
        }) && !crate::install::is_ours(hook)
    };
    for (event, list) in hooks {
        for (i, entry) in list.as_array().into_iter().flatten().enumerate() {
            match entry.get("hooks").and_then(Value::as_array) {
                Some(inner) => {
                    for (j, hook) in inner.iter().enumerate() {
                        if suspicious(hook) {
                            found.push(format!("hooks.{event}[{i}].hooks[{j}]"));
                        }
                    }
                }
                None if suspicious(entry) => found.push(format!("hooks.{event}[{i}]")),
                None => {}
            }
        }
    }
    found
}

/// The words of a POSIX shell command line, quotes removed (`'…'`, `"…"`, `\`);
/// what `assent hook install` writes reads back as it was written.
pub fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                started = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                started = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                started = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            other => {
                started = true;
                word.push(other);
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// The program a hook command runs (its first word).
pub fn command_program(command: &str) -> Option<String> {
    shell_words(command).into_iter().next()
}

/// The database a hook command names (`--db URL` or `--db=URL`).
pub fn command_db(command: &str) -> Option<String> {
    flag_value(&shell_words(command), "--db")
}

/// The `--wait` of a hook command.
fn command_wait(command: &str) -> Option<u64> {
    flag_value(&shell_words(command), "--wait")?.parse().ok()
}

/// The `wait=` of an `http` hook's URL.
fn url_wait(url: &str) -> Option<u64> {
    let (_, query) = url.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("wait="))?
        .parse()
        .ok()
}

fn flag_value(words: &[String], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    words.iter().enumerate().find_map(|(i, word)| {
        if word == flag {
            words.get(i + 1).cloned()
        } else {
            word.strip_prefix(&prefix).map(str::to_owned)
        }
    })
}

/// `settings` with the program of every command hook of ours replaced by `program`
/// (the rest of each command kept): how the canary makes Assent's binary missing.
pub fn with_program(mut settings: Value, program: &str) -> Value {
    let quoted = format!("'{}'", program.replace('\'', "'\\''"));
    let replace = |hook: &mut Value| {
        for key in ["command", "bash"] {
            if let Some(command) = hook.get(key).and_then(Value::as_str) {
                let rest = strip_first_word(command);
                hook[key] = json!(format!("{quoted}{rest}"));
            }
        }
    };
    if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
        for list in hooks.values_mut().filter_map(Value::as_array_mut) {
            for entry in list.iter_mut() {
                if !crate::install::is_ours(entry) {
                    continue;
                }
                match entry.get_mut("hooks") {
                    Some(Value::Array(inner)) => {
                        inner
                            .iter_mut()
                            .filter(|h| single_is_ours(h))
                            .for_each(replace);
                    }
                    Some(_) => {}
                    None => replace(entry),
                }
            }
        }
    }
    settings
}

/// `command` after its first shell word (quotes of that word skipped).
fn strip_first_word(command: &str) -> &str {
    let trimmed = command.trim_start();
    let mut quote = None;
    for (i, c) in trimmed.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => return &trimmed[i..],
            _ => {}
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::{Hook, install};

    fn runs(_: &str) -> Program {
        Program::Runs { this: true }
    }

    fn installed(kind: AgentKind) -> Value {
        let hook = Hook::Command(format!(
            "/usr/bin/assent --db 'sqlite:///home/me/a b.db' hook {kind} --agent a"
        ));
        install(
            kind,
            json!({"model": "x"}),
            &hook,
            crate::default_wait(kind),
        )
        .expect("merged")
    }

    fn open(doors: &[Door]) -> usize {
        doors
            .iter()
            .flat_map(|d| &d.findings)
            .filter(|f| f.severity == Severity::FailOpen)
            .count()
    }

    #[test]
    fn what_install_writes_is_safe_for_every_kind() {
        for kind in AgentKind::ALL {
            let doors = inspect(kind, &installed(kind), &runs);
            assert!(!doors.is_empty(), "{kind}");
            assert_eq!(open(&doors), 0, "{kind}: {doors:?}");
            let (same, changes) = repair(kind, installed(kind));
            assert_eq!(same, installed(kind), "{kind}");
            assert!(changes.is_empty(), "{kind}: {changes:?}");
        }
    }

    #[test]
    fn fail_open_variants_are_found_and_repaired_keeping_the_rest() {
        let claude = json!({"hooks": {"PreToolUse": [
            {"matcher": "Write", "hooks": [{"type": "command", "command": "./lint.sh"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "assent hook claude-code --agent a", "async": true}]},
        ]}, "permissions": {"allow": ["Read"]}});
        let cursor = json!({"version": 1, "hooks": {"preToolUse": [{"command": "assent hook cursor --agent c", "timeout": 5}]}});
        let gemini = json!({"hooks": {"BeforeTool": [{"matcher": "*", "hooks": [{"type": "command", "command": "assent hook gemini --agent g"}]}]}});
        let codex = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "assent hook codex --agent c", "timeout": 600}]}]}});
        let vscode = json!({"hooks": {"PreToolUse": [{"type": "command", "command": "assent hook vscode --agent v", "timeout": 600}]}});
        for (kind, settings) in [
            (AgentKind::ClaudeCode, claude),
            (AgentKind::Cursor, cursor),
            (AgentKind::Gemini, gemini),
            (AgentKind::Codex, codex),
            (AgentKind::Vscode, vscode),
        ] {
            assert!(open(&inspect(kind, &settings, &runs)) > 0, "{kind}");
            let (mended, changes) = repair(kind, settings.clone());
            assert!(!changes.is_empty());
            assert_eq!(open(&inspect(kind, &mended, &runs)), 0, "{kind}: {mended}");
            if kind == AgentKind::ClaudeCode {
                assert_eq!(mended["permissions"], settings["permissions"]);
                assert_eq!(
                    mended["hooks"]["PreToolUse"][0],
                    settings["hooks"]["PreToolUse"][0]
                );
            }
        }
    }

    #[test]
    fn a_missing_program_is_open_where_the_agent_runs_failed_hooks() {
        let missing = |_: &str| Program::Missing;
        // What install writes blocks for every kind: a setting, the agent's own rule,
        // or (Codex, VS Code) the command's exit 2.
        for kind in AgentKind::ALL {
            let doors = inspect(kind, &installed(kind), &missing);
            assert_eq!(open(&doors), 0, "{kind}: {doors:?}");
            assert!(doors.iter().any(|d| !d.findings.is_empty()), "{kind}: said");
        }
        // Without it, Codex and VS Code run the call.
        for kind in [AgentKind::Codex, AgentKind::Vscode] {
            let bare = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": format!("/gone/assent hook {kind} --agent a"), "timeout": 600}]}]}});
            let doors = inspect(kind, &bare, &missing);
            assert!(open(&doors) >= 2, "{kind}: {doors:?}");
            let (mended, _) = repair(kind, bare);
            assert_eq!(
                open(&inspect(kind, &mended, &missing)),
                0,
                "{kind}: {mended}"
            );
        }
    }

    #[test]
    fn a_file_that_turns_every_hook_off_is_open() {
        let off = json!({"disableAllHooks": true, "hooks": {}});
        assert_eq!(disabled(AgentKind::ClaudeCode, &off).len(), 1);
        assert_eq!(disabled(AgentKind::Copilot, &off).len(), 1);
        assert!(disabled(AgentKind::Cursor, &off).is_empty());
        assert!(disabled(AgentKind::ClaudeCode, &json!({"disableAllHooks": false})).is_empty());
        for kind in AgentKind::ALL {
            // The fixture's `"model"` is a key Codex's hooks file does not have.
            let said = disabled(kind, &installed(kind));
            match kind {
                AgentKind::Codex => assert!(said[0].text.contains("\"model\""), "{said:?}"),
                _ => assert!(said.is_empty(), "{kind}"),
            }
        }
        let codex = json!({"description": "d", "hooks": {}, "version": 1});
        let found = disabled(AgentKind::Codex, &codex);
        assert_eq!(found.len(), 1);
        assert!(found[0].text.contains("\"version\""), "{found:?}");
    }

    #[test]
    fn an_exit_2_after_the_command_is_read_back() {
        let installed = format!(
            "'/usr/bin/assent' hook codex --agent c{}",
            crate::install::EXIT_2_ON_FAILURE
        );
        assert!(exits_2_on_failure(&installed));
        assert!(exits_2_on_failure("assent hook codex --agent c || exit 2"));
        assert!(!exits_2_on_failure("assent hook codex --agent c || exit 1"));
        assert!(!exits_2_on_failure("assent hook codex --agent c"));
        assert!(!exits_2_on_failure("assent hook codex || exit 2 || true"));
        // The canary's swap keeps it.
        let swapped = with_program(
            json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": installed}]}]}}),
            "/nowhere/assent",
        );
        let now = swapped["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .expect("a command");
        assert!(exits_2_on_failure(now), "{now}");
        assert_eq!(command_program(now).as_deref(), Some("/nowhere/assent"));
    }

    #[test]
    fn a_wrapped_command_is_said_not_judged() {
        let settings = json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "bash -c 'assent hook claude-code --agent a'"},
            {"type": "command", "command": "assent hook claude-code --agent a", "onFailure": "block"},
        ]}]}});
        assert_eq!(unrecognised(&settings), ["hooks.PreToolUse[0].hooks[0]"]);
        assert_eq!(inspect(AgentKind::ClaudeCode, &settings, &runs).len(), 1);
    }

    #[test]
    fn commands_read_back_as_install_writes_them() {
        let command =
            "/usr/bin/assent --db 'sqlite:///a b'\\''c.db' hook gemini --agent g --wait 30";
        assert_eq!(command_program(command).as_deref(), Some("/usr/bin/assent"));
        assert_eq!(command_db(command).as_deref(), Some("sqlite:///a b'c.db"));
        assert_eq!(command_wait(command), Some(30));
        let swapped = with_program(
            json!({"hooks": {"BeforeTool": [{"hooks": [{"type": "command", "command": command}]}]}}),
            "/nowhere/assent",
        );
        let now = swapped["hooks"]["BeforeTool"][0]["hooks"][0]["command"]
            .as_str()
            .expect("a command");
        assert_eq!(command_program(now).as_deref(), Some("/nowhere/assent"));
        assert_eq!(command_db(now), command_db(command));
    }
}
