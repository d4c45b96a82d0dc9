//! `assent hook install|uninstall`: the agent's hook entries in its settings file, as
//! JSON merged into what is there. Pure: a settings value in, a settings value out;
//! the CLI reads and writes the file (with a backup beside it).
//!
//! An entry is ours when its command runs `assent hook` (any path to the binary):
//! install replaces ours and keeps every other entry and key as it was; uninstall
//! removes only ours (and a group or event list left empty by that).

use crate::AgentKind;
use serde_json::{Map, Value, json};

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

/// The hook entry running `command` for one event of `kind`, with the agent's
/// fail-closed settings where it has them (`onFailure: "block"`, `failClosed: true`)
/// and a timeout a little over the hook's own default wait.
fn entry(kind: AgentKind, command: &str) -> Value {
    match kind {
        AgentKind::ClaudeCode | AgentKind::Vscode | AgentKind::Codex => json!({
            "matcher": "*",
            "hooks": [{"type": "command", "command": command, "timeout": 600, "onFailure": "block"}],
        }),
        AgentKind::Gemini => json!({
            "matcher": "*",
            "hooks": [{"type": "command", "command": command, "timeout": 60_000}],
        }),
        AgentKind::Cursor => json!({"command": command, "timeout": 30, "failClosed": true}),
        AgentKind::Copilot => json!({"type": "command", "bash": command, "timeoutSec": 30}),
    }
}

/// Whether hook `entry` (a group with `hooks`, or a single command) runs `assent`
/// (any path, any global flags) with `hook AGENT_KIND`.
fn is_ours(entry: &Value) -> bool {
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
    match entry.get("hooks").and_then(Value::as_array) {
        Some(hooks) => hooks.iter().any(runs_assent),
        None => runs_assent(entry),
    }
}

/// Why a settings file cannot be merged into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSettings(pub String);

/// `settings` with ours installed for `kind` running `command` (`assent hook KIND
/// --agent NAME ...`, the command's own words): every other key and entry kept, ours
/// replaced, so a second install changes nothing.
pub fn install(kind: AgentKind, settings: Value, command: &str) -> Result<Value, NotSettings> {
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
        list.push(entry(kind, command));
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
