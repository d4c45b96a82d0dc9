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
                "A person edited this call; run it as edited instead: {} {}",
                event.tool_name, input
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
        ..
    } = answer
    {
        out.insert("updatedInput".into(), input.clone());
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
        ..
    } = answer
        && event.event_name == "preToolUse"
    {
        out.insert("updated_input".into(), input.clone());
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
