//! One hook event, read from what an agent wrote on the hook's stdin (or POSTed): which
//! tool it is about to run (or ran), with which input, in which workspace. Events are
//! untrusted input: anything missing, of the wrong type or out of bounds is refused
//! with the reason, and a refused event is never allowed.

use crate::{AgentKind, HookError};
use serde_json::{Map, Value};

/// The largest event read (the server's body cap).
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The longest tool name accepted.
const MAX_TOOL_NAME_CHARS: usize = 256;

/// The tool name under which Cursor's `beforeShellExecution` and
/// `afterShellExecution` are ruled on (they name no tool): Cursor's own name of it.
pub const CURSOR_SHELL_TOOL: &str = "Shell";

/// When in the tool's life the event comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the tool runs: the agent waits for a decision.
    Before,
    /// Codex's `PermissionRequest`: the agent would ask its user; answered with
    /// `decision.behavior`.
    PermissionRequest,
    /// After the tool ran: what ran, for the audit trail.
    After,
}

/// One event of a coding agent's hook.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    /// The agent's name of the event (`PreToolUse`, `beforeShellExecution`, ...), as
    /// it must be echoed back.
    pub event_name: String,
    /// Before, permission request or after.
    pub phase: Phase,
    /// The tool, as the agent names it (`Bash`, `Edit`, `mcp__github__create_issue`).
    pub tool_name: String,
    /// Its input, an object.
    pub tool_input: Value,
    /// The workspace: the event's `cwd` (or Cursor's first workspace root).
    pub cwd: String,
    /// The agent's session or conversation, when it says.
    pub session_id: Option<String>,
    /// The agent's id of this call, linking its before and after events.
    pub tool_use_id: Option<String>,
    /// What the tool answered (after events only).
    pub tool_response: Option<Value>,
}

/// Reads the event `body` of an agent of `kind`.
pub fn parse(kind: AgentKind, body: &[u8]) -> Result<HookEvent, HookError> {
    if body.len() > MAX_EVENT_BYTES {
        return Err(malformed(format!(
            "the event is {} bytes, more than the {MAX_EVENT_BYTES} accepted",
            body.len()
        )));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| malformed(format!("the event is not JSON: {e}")))?;
    let Value::Object(event) = value else {
        return Err(malformed("the event is not a JSON object".to_owned()));
    };
    match kind {
        AgentKind::Copilot if event.contains_key("toolName") => copilot(&event),
        AgentKind::Cursor => cursor(&event),
        _ => claude_like(kind, &event),
    }
}

/// Claude Code, Codex, VS Code, Gemini CLI, and Copilot when it sends Claude's shape.
fn claude_like(kind: AgentKind, event: &Map<String, Value>) -> Result<HookEvent, HookError> {
    let event_name = string(event, key_of(kind, event, "hook_event_name")?)?;
    let phase = match (kind, event_name.as_str()) {
        (AgentKind::Gemini, "BeforeTool") => Phase::Before,
        (AgentKind::Gemini, "AfterTool") => Phase::After,
        (AgentKind::Codex, "PermissionRequest") => Phase::PermissionRequest,
        (AgentKind::Gemini, _) => return Err(unknown_event(kind, &event_name)),
        (_, "PreToolUse" | "preToolUse") => Phase::Before,
        (_, "PostToolUse" | "postToolUse") => Phase::After,
        _ => return Err(unknown_event(kind, &event_name)),
    };
    let tool_response = match phase {
        Phase::After => Some(
            event
                .get("tool_response")
                .cloned()
                .ok_or_else(|| malformed(format!("{event_name} has no \"tool_response\"")))?,
        ),
        _ => None,
    };
    Ok(HookEvent {
        tool_name: tool_name(string(event, "tool_name")?)?,
        tool_input: object(event, "tool_input")?,
        cwd: workspace(string(event, "cwd")?)?,
        session_id: optional_string(event, key_of(kind, event, "session_id")?)?,
        tool_use_id: optional_string(event, "tool_use_id")?,
        tool_response,
        event_name,
        phase,
    })
}

/// The fields VS Code documents in camelCase (its common fields) beside the snake_case
/// names Claude Code's shape uses: `(snake, camel)`.
const VSCODE_CAMEL_CASE: [(&str, &str); 2] = [
    ("hook_event_name", "hookEventName"),
    ("session_id", "sessionId"),
];

/// The key under which `event` of `kind` holds the field named `snake`: VS Code sends
/// some fields in camelCase (`hookEventName`, `sessionId`), so either is read there,
/// and an event holding both names with different values is refused (which one the
/// agent meant cannot be told).
fn key_of(
    kind: AgentKind,
    event: &Map<String, Value>,
    snake: &'static str,
) -> Result<&'static str, HookError> {
    let camel = VSCODE_CAMEL_CASE
        .iter()
        .find(|(name, _)| *name == snake)
        .map(|(_, camel)| *camel);
    let Some(camel) = camel.filter(|_| kind == AgentKind::Vscode) else {
        return Ok(snake);
    };
    match (event.get(snake), event.get(camel)) {
        (Some(a), Some(b)) if a != b => Err(malformed(format!(
            "the event holds both \"{snake}\" and \"{camel}\", with different values"
        ))),
        (None, Some(_)) => Ok(camel),
        _ => Ok(snake),
    }
}

/// Copilot CLI's own shape: `toolName`, `toolArgs` (a JSON text), `cwd`.
fn copilot(event: &Map<String, Value>) -> Result<HookEvent, HookError> {
    let args = string(event, "toolArgs")?;
    let tool_input: Value = serde_json::from_str(&args)
        .map_err(|e| malformed(format!("\"toolArgs\" is not JSON: {e}")))?;
    if !tool_input.is_object() {
        return Err(malformed("\"toolArgs\" is not a JSON object".to_owned()));
    }
    Ok(HookEvent {
        event_name: "preToolUse".to_owned(),
        phase: Phase::Before,
        tool_name: tool_name(string(event, "toolName")?)?,
        tool_input,
        cwd: workspace(string(event, "cwd")?)?,
        session_id: None,
        tool_use_id: None,
        tool_response: None,
    })
}

/// Cursor: `preToolUse`, `beforeShellExecution`, `beforeMCPExecution`,
/// `afterShellExecution`; its workspace is `cwd` or the first of `workspace_roots`.
fn cursor(event: &Map<String, Value>) -> Result<HookEvent, HookError> {
    let event_name = string(event, "hook_event_name")?;
    let cwd = match event.get("cwd") {
        Some(_) => string(event, "cwd")?,
        None => event
            .get("workspace_roots")
            .and_then(Value::as_array)
            .and_then(|roots| roots.first())
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                malformed(format!(
                    "{event_name} has no \"cwd\" and no \"workspace_roots\""
                ))
            })?,
    };
    let shell = |phase| -> Result<HookEvent, HookError> {
        let mut input = Map::new();
        input.insert(
            "command".to_owned(),
            Value::String(string(event, "command")?),
        );
        Ok(HookEvent {
            event_name: event_name.clone(),
            phase,
            tool_name: CURSOR_SHELL_TOOL.to_owned(),
            tool_input: Value::Object(input),
            cwd: workspace(cwd.clone())?,
            session_id: optional_string(event, "conversation_id")?,
            tool_use_id: optional_string(event, "generation_id")?,
            tool_response: match phase {
                Phase::After => Some(event.get("output").cloned().unwrap_or(Value::Null)),
                _ => None,
            },
        })
    };
    match event_name.as_str() {
        "beforeShellExecution" => shell(Phase::Before),
        "afterShellExecution" => shell(Phase::After),
        "preToolUse" | "beforeMCPExecution" => {
            // beforeMCPExecution carries its input as a JSON text.
            let tool_input = match event.get("tool_input") {
                Some(Value::String(text)) => serde_json::from_str(text)
                    .map_err(|e| malformed(format!("\"tool_input\" is not JSON: {e}")))?,
                _ => object(event, "tool_input")?,
            };
            if !tool_input.is_object() {
                return Err(malformed("\"tool_input\" is not a JSON object".to_owned()));
            }
            Ok(HookEvent {
                tool_name: tool_name(string(event, "tool_name")?)?,
                tool_input,
                cwd: workspace(cwd)?,
                session_id: optional_string(event, "conversation_id")?,
                tool_use_id: optional_string(event, "tool_use_id")?,
                tool_response: None,
                event_name,
                phase: Phase::Before,
            })
        }
        _ => Err(unknown_event(AgentKind::Cursor, &event_name)),
    }
}

fn string(event: &Map<String, Value>, key: &str) -> Result<String, HookError> {
    match event.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(malformed(format!("\"{key}\" is not a string"))),
        None => Err(malformed(format!("the event has no \"{key}\""))),
    }
}

/// The longest session or call id accepted.
const MAX_ID_CHARS: usize = 256;

/// An id the agent gives (session, call): at most 256 characters, nothing invisible.
fn optional_string(event: &Map<String, Value>, key: &str) -> Result<Option<String>, HookError> {
    let id = match event.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(_) => string(event, key)?,
    };
    if id.chars().count() > MAX_ID_CHARS || id.chars().any(assent_domain::misleads) {
        return Err(malformed(format!(
            "\"{key}\" is longer than {MAX_ID_CHARS} characters or holds invisible characters"
        )));
    }
    Ok(Some(id))
}

fn object(event: &Map<String, Value>, key: &str) -> Result<Value, HookError> {
    match event.get(key) {
        Some(value @ Value::Object(_)) => Ok(value.clone()),
        Some(_) => Err(malformed(format!("\"{key}\" is not a JSON object"))),
        None => Err(malformed(format!("the event has no \"{key}\""))),
    }
}

/// A tool name: not empty, at most 256 characters, nothing invisible or misleading.
fn tool_name(name: String) -> Result<String, HookError> {
    if name.trim().is_empty() {
        return Err(malformed("\"tool_name\" is empty".to_owned()));
    }
    if name.chars().count() > MAX_TOOL_NAME_CHARS {
        return Err(malformed(format!(
            "\"tool_name\" is longer than {MAX_TOOL_NAME_CHARS} characters"
        )));
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || assent_domain::misleads(c))
    {
        return Err(malformed(format!(
            "\"tool_name\" {name:?} holds spaces or invisible characters"
        )));
    }
    Ok(name)
}

/// A workspace: an absolute path with nothing invisible in it.
fn workspace(cwd: String) -> Result<String, HookError> {
    if !cwd.starts_with('/') && !is_windows_absolute(&cwd) {
        return Err(malformed(format!(
            "\"cwd\" {cwd:?} is not an absolute path"
        )));
    }
    if cwd.chars().any(assent_domain::misleads) {
        return Err(malformed(format!(
            "\"cwd\" {cwd:?} holds invisible characters"
        )));
    }
    Ok(cwd)
}

fn is_windows_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() > 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/')
}

fn malformed(reason: String) -> HookError {
    HookError::Malformed(reason)
}

fn unknown_event(kind: AgentKind, name: &str) -> HookError {
    malformed(format!("{kind} sends no hook event named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VS Code's documented event: camelCase common fields, snake_case tool fields.
    const VSCODE_DOCUMENTED: &str = r#"{"timestamp": "2026-11-28T10:00:00.000Z",
        "cwd": "/home/user/proj", "sessionId": "vs-1", "hookEventName": "PreToolUse",
        "tool_name": "run_in_terminal", "tool_input": {"command": "ls"}}"#;

    #[test]
    fn vscodes_documented_camel_case_event_is_read() {
        let event = parse(AgentKind::Vscode, VSCODE_DOCUMENTED.as_bytes()).expect("read");
        assert_eq!(event.event_name, "PreToolUse");
        assert_eq!(event.phase, Phase::Before);
        assert_eq!(event.session_id.as_deref(), Some("vs-1"));
        assert_eq!(event.tool_name, "run_in_terminal");
    }

    #[test]
    fn two_names_of_one_field_must_agree_and_camel_case_is_vscodes_alone() {
        let both = r#"{"cwd": "/p", "session_id": "a", "sessionId": "b",
            "hook_event_name": "PreToolUse", "tool_name": "t", "tool_input": {}}"#;
        let refused = parse(AgentKind::Vscode, both.as_bytes()).expect_err("ambiguous");
        assert!(refused.to_string().contains("sessionId"), "{refused}");
        let agreeing = both.replace(r#""sessionId": "b""#, r#""sessionId": "a""#);
        assert!(parse(AgentKind::Vscode, agreeing.as_bytes()).is_ok());
        // Claude Code documents snake_case only.
        assert!(parse(AgentKind::ClaudeCode, VSCODE_DOCUMENTED.as_bytes()).is_err());
    }
}
