//! `assent hook install|uninstall`: the agent's hook entries in its settings file, as
//! JSON merged into what is there. Pure: a settings value in, a settings value out;
//! the CLI reads and writes the file (with a backup beside it).
//!
//! An entry is ours when its command runs `assent hook` (any path to the binary):
//! install replaces ours and keeps every other entry and key as it was; uninstall
//! removes only ours (and a group or event list left empty by that).

use crate::AgentKind;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Where an agent keeps its hooks, relative to the project or the home folder.
pub fn settings_file(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::ClaudeCode => ".claude/settings.json",
        AgentKind::Codex => ".codex/hooks.json",
        AgentKind::Cursor => ".cursor/hooks.json",
        AgentKind::Copilot => ".github/hooks/assent-copilot.json",
        AgentKind::Vscode => ".github/hooks/assent-vscode.json",
        AgentKind::Gemini => ".gemini/settings.json",
    }
}

/// Where an agent keeps the hooks of one person in one project, a file kept out of the
/// repository (`--scope local`), when it has one: a teammate without Assent is not
/// blocked by hooks committed in the shared file.
pub fn local_settings_file(kind: AgentKind) -> Option<&'static str> {
    match kind {
        AgentKind::ClaudeCode => Some(".claude/settings.local.json"),
        AgentKind::Codex
        | AgentKind::Cursor
        | AgentKind::Copilot
        | AgentKind::Vscode
        | AgentKind::Gemini => None,
    }
}

/// The events an install answers for `kind`: before each tool, and after it for the
/// audit trail where the agent tells.
fn events(kind: AgentKind) -> &'static [&'static str] {
    match kind {
        AgentKind::ClaudeCode | AgentKind::Vscode => &["PreToolUse", "PostToolUse"],
        AgentKind::Codex => &["PreToolUse"],
        AgentKind::Cursor => &["preToolUse", "afterShellExecution"],
        AgentKind::Copilot => &["preToolUse"],
        AgentKind::Gemini => &["BeforeTool", "AfterTool"],
    }
}

/// What a hook command of Codex's and VS Code's ends with before a tool runs: they
/// have no setting that makes a failed hook block, but both block on exit 2 with a
/// reason on stderr, so a shell that cannot start `assent`, or sees it crash, says so
/// and exits 2. `assent hook` itself answers every failure after reading its event
/// with a denial in the agent's dialect, so this runs only when it could not.
pub(crate) const EXIT_2_ON_FAILURE: &str =
    " || { echo 'assent hook could not run: the call is blocked' >&2; exit 2; }";

/// Whether `kind` blocks a failed hook only through [`EXIT_2_ON_FAILURE`] (it has no
/// setting of its own), for a hook of `event`.
pub(crate) fn needs_exit_2(kind: AgentKind, event: &str) -> bool {
    matches!(kind, AgentKind::Codex | AgentKind::Vscode) && event == "PreToolUse"
}

/// The hook entry running `command` for `event` of `kind`, with the agent's
/// fail-closed settings where it has them (`onFailure: "block"`, `failClosed: true`,
/// else [`EXIT_2_ON_FAILURE`]) and a timeout above the hook's whole run for a wait of
/// `wait` (`gate::agent_timeout`), in the agent's own unit: an agent that killed a
/// hook still deciding would run the call (issue 52).
fn entry(kind: AgentKind, event: &str, command: &str, wait: Duration) -> Value {
    let timeout = crate::gate::agent_timeout(wait);
    let secs = timeout.as_secs();
    let closed;
    let command = if needs_exit_2(kind, event) {
        closed = format!("{command}{EXIT_2_ON_FAILURE}");
        closed.as_str()
    } else {
        command
    };
    match kind {
        AgentKind::ClaudeCode | AgentKind::Vscode | AgentKind::Codex => json!({
            "matcher": "*",
            "hooks": [{"type": "command", "command": command, "timeout": secs, "onFailure": "block"}],
        }),
        // Gemini CLI counts its timeout in milliseconds.
        AgentKind::Gemini => json!({
            "matcher": "*",
            "hooks": [{"type": "command", "command": command, "timeout": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)}],
        }),
        AgentKind::Cursor => json!({"command": command, "timeout": secs, "failClosed": true}),
        AgentKind::Copilot => json!({"type": "command", "bash": command, "timeoutSec": secs}),
    }
}

/// The Claude Code `http` hook entry posting to `url` (`…/api/hooks/claude-code`,
/// query included) with the agent token from the environment variable `token_var`:
/// `onFailure: "block"`, since Claude Code lets a call through when an `http` hook
/// fails (no server, a timeout) unless told to block, and a timeout above the
/// hook's whole run for a wait of `wait`.
fn http_entry(url: &str, token_var: &str, wait: Duration) -> Value {
    json!({
        "matcher": "*",
        "hooks": [{
            "type": "http",
            "url": url,
            "headers": {"Authorization": format!("Bearer ${token_var}")},
            "allowedEnvVars": [token_var],
            "timeout": crate::gate::agent_timeout(wait).as_secs(),
            "onFailure": "block",
        }],
    })
}

/// What an install writes: a command the agent runs, or (Claude Code only) the URL of
/// an `assent serve` it posts to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hook {
    /// `assent hook KIND --agent NAME ...`, the command's own words.
    Command(String),
    /// `POST URL` (`…/api/hooks/claude-code?wait=…`) with the bearer token from the
    /// environment variable named.
    Http {
        /// The route's full URL, query included.
        url: String,
        /// The environment variable holding the agent token.
        token_var: String,
    },
}

/// Whether hook `entry` (a group with `hooks`, or a single command) runs `assent`
/// (any path, any global flags) with `hook AGENT_KIND`.
pub(crate) fn is_ours(entry: &Value) -> bool {
    let runs_assent = |hook: &Value| {
        ["command", "bash"].iter().any(|key| {
            hook.get(*key)
                .and_then(Value::as_str)
                .is_some_and(|command| {
                    let words: Vec<&str> = command.split_whitespace().collect();
                    let program = words.first().map(|w| w.trim_matches(['"', '\'']));
                    program.is_some_and(|p| p.ends_with("assent"))
                        && words
                            .windows(2)
                            .any(|pair| pair[0] == "hook" && pair[1].parse::<AgentKind>().is_ok())
                })
        })
    };
    // An `http` entry posting to Assent's route (`/api/hooks/KIND`).
    let posts_to_assent = |hook: &Value| {
        hook.get("type").and_then(Value::as_str) == Some("http")
            && hook
                .get("url")
                .and_then(Value::as_str)
                .is_some_and(|url| url.contains("/api/hooks/"))
    };
    let ours = |hook: &Value| runs_assent(hook) || posts_to_assent(hook);
    match entry.get("hooks").and_then(Value::as_array) {
        Some(hooks) => hooks.iter().any(ours),
        None => ours(entry),
    }
}

/// Why a settings file cannot be merged into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSettings(pub String);

/// `settings` with ours installed for `kind` running `hook` for calls that wait up to
/// `wait` for a person: every other key and entry kept, ours replaced, so a second
/// install changes nothing. An `http` hook is Claude Code's alone.
pub fn install(
    kind: AgentKind,
    settings: Value,
    hook: &Hook,
    wait: Duration,
) -> Result<Value, NotSettings> {
    if matches!(hook, Hook::Http { .. }) && kind != AgentKind::ClaudeCode {
        return Err(NotSettings(format!(
            "{kind} has no http hooks (Claude Code has); install its command hook instead"
        )));
    }
    let mut settings = without_ours(settings)?;
    let root = settings
        .as_object_mut()
        .ok_or_else(|| NotSettings("the settings are not a JSON object".into()))?;
    if matches!(kind, AgentKind::Cursor | AgentKind::Copilot) {
        root.entry("version").or_insert(json!(1));
    }
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| NotSettings("\"hooks\" is not a JSON object".into()))?;
    for event in events(kind) {
        let list = hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| NotSettings(format!("\"hooks.{event}\" is not a JSON array")))?;
        list.push(match hook {
            Hook::Command(command) => entry(kind, event, command, wait),
            Hook::Http { url, token_var } => http_entry(url, token_var, wait),
        });
    }
    Ok(settings)
}

/// `settings` without our entries (and without an event list or `hooks` object that
/// only ours filled).
pub fn without_ours(mut settings: Value) -> Result<Value, NotSettings> {
    let Some(root) = settings.as_object_mut() else {
        return Err(NotSettings("the settings are not a JSON object".into()));
    };
    let Some(hooks) = root.get_mut("hooks") else {
        return Ok(settings);
    };
    let hooks = hooks
        .as_object_mut()
        .ok_or_else(|| NotSettings("\"hooks\" is not a JSON object".into()))?;
    let mut emptied = Vec::new();
    for (event, list) in hooks.iter_mut() {
        let Some(list) = list.as_array_mut() else {
            continue;
        };
        let before = list.len();
        list.retain(|entry| !is_ours(entry));
        if list.is_empty() && before > 0 {
            emptied.push(event.clone());
        }
    }
    for event in emptied {
        hooks.remove(&event);
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An install of a command hook with the default wait of Gemini CLI.
    fn install(kind: AgentKind, settings: Value, command: &str) -> Result<Value, NotSettings> {
        super::install(
            kind,
            settings,
            &Hook::Command(command.to_owned()),
            crate::default_wait(AgentKind::Gemini),
        )
    }

    #[test]
    fn codex_and_vscode_commands_exit_2_when_assent_cannot_run_before_a_tool() {
        let command = "/usr/bin/assent hook codex --agent c";
        for kind in [AgentKind::Codex, AgentKind::Vscode] {
            let once = install(kind, json!({}), command).expect("merged");
            let pre = once["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
                .as_str()
                .expect("a command");
            assert_eq!(pre, format!("{command}{EXIT_2_ON_FAILURE}"), "{kind}");
            if kind == AgentKind::Vscode {
                // After the tool ran, exit 2 would stop the agent's turn: not added.
                assert_eq!(
                    once["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
                    command
                );
            }
            // Still ours: a second install replaces it, an uninstall removes it.
            assert_eq!(install(kind, once.clone(), command).expect("merged"), once);
            assert_eq!(without_ours(once).expect("removed"), json!({}));
        }
        let claude = install(AgentKind::ClaudeCode, json!({}), command).expect("merged");
        assert_eq!(
            claude["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            command
        );
        // The shell really exits 2, with a reason on stderr, when the program is gone.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("/nonexistent/assent hook codex{EXIT_2_ON_FAILURE}"),
            ])
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("the call is blocked"));
    }

    #[test]
    fn every_agents_timeout_is_above_the_hooks_whole_run_for_its_wait() {
        let hook = Hook::Command("assent hook gemini --agent g".to_owned());
        for wait in [0, 5, 55, 90, 590, 3_600] {
            let wait = Duration::from_secs(wait);
            let run = crate::gate::run_limit(wait);
            let gemini = super::install(AgentKind::Gemini, json!({}), &hook, wait).expect("merged");
            let millis = gemini["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"]
                .as_u64()
                .expect("milliseconds");
            assert!(
                u128::from(millis) > run.as_millis() + 5_000,
                "{wait:?}: {millis}"
            );
            for (kind, event, key) in [
                (AgentKind::ClaudeCode, "PreToolUse", "timeout"),
                (AgentKind::Codex, "PreToolUse", "timeout"),
                (AgentKind::Vscode, "PreToolUse", "timeout"),
            ] {
                let settings = super::install(kind, json!({}), &hook, wait).expect("merged");
                let secs = settings["hooks"][event][0]["hooks"][0][key]
                    .as_u64()
                    .expect("secs");
                assert!(secs > run.as_secs() + 5, "{kind} {wait:?}: {secs}");
            }
            let cursor = super::install(AgentKind::Cursor, json!({}), &hook, wait).expect("merged");
            let secs = cursor["hooks"]["preToolUse"][0]["timeout"]
                .as_u64()
                .expect("secs");
            assert!(secs > run.as_secs() + 5, "cursor {wait:?}: {secs}");
            let copilot =
                super::install(AgentKind::Copilot, json!({}), &hook, wait).expect("merged");
            let secs = copilot["hooks"]["preToolUse"][0]["timeoutSec"]
                .as_u64()
                .expect("secs");
            assert!(secs > run.as_secs() + 5, "copilot {wait:?}: {secs}");
        }
    }

    #[test]
    fn an_http_hook_blocks_on_failure_and_is_claude_codes_alone() {
        let hook = Hook::Http {
            url: "http://127.0.0.1:7700/api/hooks/claude-code?wait=90".to_owned(),
            token_var: "ASSENT_AGENT_TOKEN".to_owned(),
        };
        let wait = Duration::from_secs(90);
        let settings =
            super::install(AgentKind::ClaudeCode, json!({}), &hook, wait).expect("merged");
        let entry = &settings["hooks"]["PreToolUse"][0]["hooks"][0];
        assert_eq!(entry["type"], "http");
        assert_eq!(entry["onFailure"], "block");
        assert_eq!(
            entry["headers"]["Authorization"],
            "Bearer $ASSENT_AGENT_TOKEN"
        );
        assert_eq!(entry["allowedEnvVars"], json!(["ASSENT_AGENT_TOKEN"]));
        assert_eq!(entry["timeout"], 100);
        // Ours: a second install replaces it, an uninstall removes it.
        let again =
            super::install(AgentKind::ClaudeCode, settings.clone(), &hook, wait).expect("merged");
        assert_eq!(again, settings);
        assert_eq!(without_ours(settings).expect("removed"), json!({}));
        assert!(super::install(AgentKind::Gemini, json!({}), &hook, wait).is_err());
    }

    #[test]
    fn install_keeps_every_other_hook_replaces_ours_and_uninstall_removes_only_ours() {
        let theirs = json!({
            "model": "opus",
            "hooks": {
                "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "./lint.sh"}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            },
        });
        let command = "/usr/bin/assent --db 'sqlite:///a b.db' hook claude-code --agent claude";
        let once = install(AgentKind::ClaudeCode, theirs.clone(), command).expect("merged");
        let twice = install(AgentKind::ClaudeCode, once.clone(), command).expect("merged");
        assert_eq!(once, twice, "idempotent");
        assert_eq!(
            once["hooks"]["PreToolUse"][0],
            theirs["hooks"]["PreToolUse"][0]
        );
        assert_eq!(once["hooks"]["Stop"], theirs["hooks"]["Stop"]);
        assert_eq!(
            once["hooks"]["PreToolUse"][1]["hooks"][0]["onFailure"],
            "block"
        );
        assert_eq!(
            once["hooks"]["PostToolUse"].as_array().map(Vec::len),
            Some(1)
        );
        let other = install(
            AgentKind::ClaudeCode,
            once,
            "assent hook claude-code --agent b",
        )
        .expect("merged");
        assert_eq!(
            other["hooks"]["PreToolUse"].as_array().map(Vec::len),
            Some(2),
            "replaced"
        );
        assert_eq!(without_ours(other).expect("removed"), theirs);
    }

    #[test]
    fn cursor_is_fail_closed_and_versioned() {
        let installed =
            install(AgentKind::Cursor, json!({}), "assent hook cursor --agent c").expect("merged");
        assert_eq!(installed["version"], 1);
        assert_eq!(installed["hooks"]["preToolUse"][0]["failClosed"], true);
    }

    #[test]
    fn what_is_not_a_settings_object_is_refused() {
        assert!(install(AgentKind::Gemini, json!([]), "assent hook gemini --agent g").is_err());
        assert!(
            install(
                AgentKind::Gemini,
                json!({"hooks": 3}),
                "assent hook gemini --agent g"
            )
            .is_err()
        );
        assert!(
            install(
                AgentKind::Gemini,
                json!({"hooks": {"BeforeTool": {}}}),
                "assent hook gemini --agent g"
            )
            .is_err()
        );
    }
}
