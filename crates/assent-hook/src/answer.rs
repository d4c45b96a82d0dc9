//! What the hook answers, in each agent's dialect: only the fields its documentation
//! names (Codex treats an unknown field as a failed hook and runs the tool).

use crate::{AgentKind, HookEvent, Phase};
use serde_json::{Map, Value, json};

/// What Assent decided about one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Let the call run; with the arguments a person edited, when they did.
    Allow {
        /// The person's arguments instead of the agent's.
        updated_input: Option<Value>,
        /// Why, for the agents that show a reason with an allow.
        reason: Option<String>,
    },
    /// Refuse the call; the agent's model reads the reason.
    Deny {
        /// Why, never empty.
        reason: String,
    },
    /// Hand the call to the agent's own prompt (only where the agent can ask).
    Ask {
        /// Why.
        reason: String,
    },
    /// An after event, recorded: nothing to decide.
    Recorded,
}

/// The hook's output: what goes on stdout, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The JSON answer (empty for an after event).
    pub stdout: String,
    /// Always 0: every agent reads the decision from the JSON.
    pub exit_code: i32,
}

/// `answer` to `event` in `kind`'s dialect. An `Ask` for an agent that cannot ask, and
/// an edit where the agent takes no new input, become denials saying so.
pub fn render(kind: AgentKind, event: &HookEvent, answer: &Answer) -> Reply {
    let answer = lowered(kind, event, answer);
    let value = match (&answer, event.phase) {
        (Answer::Recorded, _) | (_, Phase::After) => None,
        (_, Phase::PermissionRequest) => Some(codex_permission(&answer)),
        _ => Some(match kind {
            AgentKind::ClaudeCode | AgentKind::Vscode => claude(event, &answer),
            AgentKind::Codex => codex(event, &answer),
            AgentKind::Copilot => copilot(&answer),
            AgentKind::Cursor => cursor(event, &answer),
            AgentKind::Gemini => gemini(&answer),
        }),
    };
    Reply {
        stdout: value.map(|v| v.to_string()).unwrap_or_default(),
        exit_code: 0,
    }
}

/// A denial of a call whose event could not be read (or decided), in `kind`'s dialect
/// for its before-tool event: where a hook's failure would let the call through (an
/// `http` hook answering an error), the hook answers this instead.
pub fn refusal(kind: AgentKind, reason: &str) -> Reply {
    let event_name = match kind {
        AgentKind::ClaudeCode | AgentKind::Vscode | AgentKind::Codex => "PreToolUse",
        AgentKind::Cursor | AgentKind::Copilot => "preToolUse",
        AgentKind::Gemini => "BeforeTool",
    };
    let event = HookEvent {
        event_name: event_name.to_owned(),
        phase: Phase::Before,
        tool_name: String::new(),
        tool_input: Value::Object(Map::new()),
        cwd: String::new(),
        session_id: None,
        tool_use_id: None,
        tool_response: None,
    };
    render(
        kind,
        &event,
        &Answer::Deny {
            reason: reason.to_owned(),
        },
    )
}

/// The answer the agent can take: `Ask` only where it asks, `updatedInput` only where
/// it takes one (else a denial quoting the person's edit, so the model can issue it).
fn lowered(kind: AgentKind, event: &HookEvent, answer: &Answer) -> Answer {
    match answer {
        Answer::Ask { reason } if !kind.can_ask() => Answer::Deny {
            reason: reason.clone(),
        },
        Answer::Allow {
            updated_input: Some(input),
            ..
        } if !takes_updated_input(kind, event) => Answer::Deny {
            reason: format!(
                "A person edited this call; run it as edited instead: {} {}\nIt did not run as proposed. What the person changed: {}",
                event.tool_name,
                input,
                what_changed(&event.tool_input, input),
            ),
        },
        other => other.clone(),
    }
}

/// Whether the agent runs the tool with input the hook hands back.
fn takes_updated_input(kind: AgentKind, event: &HookEvent) -> bool {
    match (kind, event.phase) {
        (_, Phase::PermissionRequest | Phase::After) => false,
        // Cursor's shell and MCP events take no new input; its preToolUse does.
        (AgentKind::Cursor, _) => event.event_name == "preToolUse",
        _ => true,
    }
}

fn claude(event: &HookEvent, answer: &Answer) -> Value {
    let mut out = Map::new();
    out.insert("hookEventName".into(), json!(event.event_name));
    let (decision, reason) = decision(answer);
    out.insert("permissionDecision".into(), json!(decision));
    if let Some(reason) = reason {
        out.insert("permissionDecisionReason".into(), json!(reason));
    }
    if let Answer::Allow {
        updated_input: Some(input),
        reason,
    } = answer
    {
        out.insert("updatedInput".into(), input.clone());
        // Claude Code (2.1.328) and VS Code hand `additionalContext` to the model beside
        // the edited call's result, in the same turn: the model learns that what ran is
        // not what it proposed (else it believes its own input ran).
        out.insert(
            "additionalContext".into(),
            json!(told_of_edit(&event.tool_input, input, reason.as_deref())),
        );
    }
    json!({ "hookSpecificOutput": out })
}

/// Codex: `{}` allows; a denial is `permissionDecision: "deny"` with a non-empty
/// reason; an edit is `allow` with `updatedInput`. Nothing else, ever.
fn codex(event: &HookEvent, answer: &Answer) -> Value {
    match answer {
        Answer::Allow {
            updated_input: Some(input),
            ..
        } => json!({"hookSpecificOutput": {
            "hookEventName": event.event_name,
            "permissionDecision": "allow",
            "updatedInput": input,
        }}),
        Answer::Deny { reason } | Answer::Ask { reason } => json!({"hookSpecificOutput": {
            "hookEventName": event.event_name,
            "permissionDecision": "deny",
            "permissionDecisionReason": non_empty(reason),
        }}),
        Answer::Allow { .. } | Answer::Recorded => json!({}),
    }
}

/// Codex's `PermissionRequest`: `decision.behavior` and, for a denial, `message`.
fn codex_permission(answer: &Answer) -> Value {
    match answer {
        Answer::Deny { reason } | Answer::Ask { reason } => json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": non_empty(reason)},
        }}),
        Answer::Allow { .. } | Answer::Recorded => json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }}),
    }
}

fn copilot(answer: &Answer) -> Value {
    let mut out = Map::new();
    let (decision, reason) = decision(answer);
    out.insert("permissionDecision".into(), json!(decision));
    if let Some(reason) = reason {
        out.insert("permissionDecisionReason".into(), json!(reason));
    }
    if let Answer::Allow {
        updated_input: Some(input),
        ..
    } = answer
    {
        out.insert("modifiedArgs".into(), input.clone());
    }
    Value::Object(out)
}

fn cursor(event: &HookEvent, answer: &Answer) -> Value {
    let mut out = Map::new();
    let (decision, reason) = decision(answer);
    out.insert("permission".into(), json!(decision));
    if let Some(reason) = reason {
        out.insert("user_message".into(), json!(reason));
        out.insert("agent_message".into(), json!(reason));
    }
    if let Answer::Allow {
        updated_input: Some(input),
        reason,
    } = answer
        && event.event_name == "preToolUse"
    {
        out.insert("updated_input".into(), input.clone());
        // Cursor's message to the agent: the model learns that what ran is the person's.
        out.insert(
            "agent_message".into(),
            json!(told_of_edit(&event.tool_input, input, reason.as_deref())),
        );
    }
    Value::Object(out)
}

fn gemini(answer: &Answer) -> Value {
    match answer {
        Answer::Allow {
            updated_input: Some(input),
            ..
        } => json!({"decision": "allow", "hookSpecificOutput": {"tool_input": input}}),
        Answer::Deny { reason } | Answer::Ask { reason } => {
            json!({"decision": "deny", "reason": non_empty(reason)})
        }
        Answer::Allow { .. } | Answer::Recorded => json!({"decision": "allow"}),
    }
}

/// What the model is told of a call a person edited before it ran: [`edit_note`], and
/// who confirmed it (the allow's reason) when known.
fn told_of_edit(proposed: &Value, edited: &Value, reason: Option<&str>) -> String {
    let note = edit_note(proposed, edited);
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!("{note}\n({reason})"),
        _ => note,
    }
}

/// The longest account of an edit told to the model, in characters (its head and its
/// tail): a `Write`'s content may be megabytes.
const MAX_EDIT_NOTE_CHARS: usize = 4_000;

/// `A person changed this call before it ran: ` and what changed ([`what_changed`]): what
/// the model is told of a call that ran as a person edited it.
pub(crate) fn edit_note(proposed: &Value, edited: &Value) -> String {
    format!(
        "A person changed this call before it ran: {}",
        what_changed(proposed, edited)
    )
}

/// What changed from the `proposed` to the `edited` arguments (each a JSON object),
/// argument by argument, at most [`MAX_EDIT_NOTE_CHARS`] (head and tail): a one-line
/// value as `key: "old" → "new"`, a text of several lines as the lines removed (`-`)
/// and added (`+`), an argument added or removed as `(none)` on its side.
pub(crate) fn what_changed(proposed: &Value, edited: &Value) -> String {
    let empty = Map::new();
    let before = proposed.as_object().unwrap_or(&empty);
    let after = edited.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut changes = Vec::new();
    for key in keys {
        let (old, new) = (before.get(key), after.get(key));
        if old == new {
            continue;
        }
        let shown = |value: Option<&Value>| value.map_or("(none)".to_owned(), Value::to_string);
        match (old.and_then(Value::as_str), new.and_then(Value::as_str)) {
            (Some(old), Some(new)) if old.contains('\n') || new.contains('\n') => {
                let lines = assent_domain::changed_lines(old, new);
                let mut text = format!("{key} (from line {}):", lines.head + 1);
                for line in &lines.removed {
                    text.push_str(&format!("\n-{line}"));
                }
                for line in &lines.added {
                    text.push_str(&format!("\n+{line}"));
                }
                changes.push(text);
            }
            _ => changes.push(format!("{key}: {} → {}", shown(old), shown(new))),
        }
    }
    if !proposed.is_object() || !edited.is_object() {
        changes = vec![format!("{proposed} → {edited}")];
    }
    let what = if changes.is_empty() {
        "nothing (the same arguments)".to_owned()
    } else {
        changes.join("\n")
    };
    assent_domain::head_and_tail(&what, MAX_EDIT_NOTE_CHARS).into_owned()
}

/// The decision word and the reason of an answer (Claude's, Copilot's and Cursor's
/// shared vocabulary).
fn decision(answer: &Answer) -> (&'static str, Option<&str>) {
    match answer {
        Answer::Allow { reason, .. } => ("allow", reason.as_deref()),
        Answer::Deny { reason } => ("deny", Some(non_empty(reason))),
        Answer::Ask { reason } => ("ask", Some(non_empty(reason))),
        Answer::Recorded => ("allow", None),
    }
}

/// A reason the agents accept: never empty (Codex refuses an empty one).
fn non_empty(reason: &str) -> &str {
    if reason.trim().is_empty() {
        "Refused by Assent"
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn before(event_name: &str, input: Value) -> HookEvent {
        HookEvent {
            event_name: event_name.to_owned(),
            phase: Phase::Before,
            tool_name: "Bash".to_owned(),
            tool_input: input,
            cwd: "/work".to_owned(),
            session_id: Some("s1".to_owned()),
            tool_use_id: Some("t1".to_owned()),
            tool_response: None,
        }
    }

    fn edited() -> Answer {
        Answer::Allow {
            updated_input: Some(json!({"command": "ls -la", "description": "List"})),
            reason: Some("Confirmed by alice in Assent (change set S)".to_owned()),
        }
    }

    #[test]
    fn an_edit_note_says_what_changed_argument_by_argument() {
        let note = edit_note(
            &json!({"command": "rm -rf /", "description": "Clean", "timeout": 5}),
            &json!({"command": "rm -rf build", "description": "Clean"}),
        );
        assert_eq!(
            note,
            "A person changed this call before it ran: command: \"rm -rf /\" → \"rm -rf build\"\ntimeout: 5 → (none)"
        );
        let note = edit_note(
            &json!({"file_path": "a.rs", "content": "one\ntwo\nthree\n"}),
            &json!({"file_path": "a.rs", "content": "one\nTWO\nthree\n"}),
        );
        assert_eq!(
            note,
            "A person changed this call before it ran: content (from line 2):\n-two\n+TWO"
        );
        // A megabyte of content is told as its head and its tail.
        let big = "x\n".repeat(500_000);
        let note = edit_note(&json!({"content": ""}), &json!({ "content": big }));
        assert!(
            note.chars().count() <= MAX_EDIT_NOTE_CHARS + 100,
            "{}",
            note.len()
        );
    }

    #[test]
    fn claude_code_and_vscode_are_told_of_an_edit_beside_the_edited_input() {
        for kind in [AgentKind::ClaudeCode, AgentKind::Vscode] {
            let event = before(
                "PreToolUse",
                json!({"command": "ls", "description": "List"}),
            );
            let reply: Value =
                serde_json::from_str(&render(kind, &event, &edited()).stdout).expect("JSON");
            let out = &reply["hookSpecificOutput"];
            assert_eq!(out["permissionDecision"], "allow");
            assert_eq!(out["updatedInput"]["command"], "ls -la");
            assert_eq!(
                out["additionalContext"],
                "A person changed this call before it ran: command: \"ls\" → \"ls -la\"\n(Confirmed by alice in Assent (change set S))"
            );
        }
        // An allow without an edit tells nothing more.
        let event = before("PreToolUse", json!({"command": "ls"}));
        let plain = Answer::Allow {
            updated_input: None,
            reason: None,
        };
        let reply = render(AgentKind::ClaudeCode, &event, &plain).stdout;
        assert!(!reply.contains("additionalContext"), "{reply}");
    }

    #[test]
    fn cursor_tells_the_agent_of_an_edit_and_codex_keeps_its_fields_alone() {
        let event = before("preToolUse", json!({"command": "ls"}));
        let reply: Value =
            serde_json::from_str(&render(AgentKind::Cursor, &event, &edited()).stdout)
                .expect("JSON");
        assert!(
            reply["agent_message"]
                .as_str()
                .is_some_and(|m| m.starts_with("A person changed this call before it ran: ")),
            "{reply}"
        );
        let event = before("PreToolUse", json!({"command": "ls"}));
        let reply: Value =
            serde_json::from_str(&render(AgentKind::Codex, &event, &edited()).stdout)
                .expect("JSON");
        let fields: Vec<&String> = reply["hookSpecificOutput"]
            .as_object()
            .expect("an object")
            .keys()
            .collect();
        assert_eq!(
            fields,
            ["hookEventName", "permissionDecision", "updatedInput"]
        );
    }

    #[test]
    fn an_agent_that_takes_no_edit_is_denied_with_what_the_person_changed() {
        let event = before("beforeShellExecution", json!({"command": "ls"}));
        let reply: Value =
            serde_json::from_str(&render(AgentKind::Cursor, &event, &edited()).stdout)
                .expect("JSON");
        assert_eq!(reply["permission"], "deny");
        let reason = reply["agent_message"].as_str().expect("a reason");
        assert!(
            reason.starts_with("A person edited this call; run it as edited instead: Bash ")
                && reason.contains("It did not run as proposed. What the person changed: command: \"ls\" → \"ls -la\""),
            "{reason}"
        );
    }
}
