//! Reading the tool calls of a wake in the two dialects models speak.

use crate::ChangesetError;
use serde_json::Value;
use std::collections::HashSet;

/// The arguments as the model sent them.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    /// OpenAI: a string that should hold a JSON object.
    Text(String),
    /// Anthropic: already a JSON value (should be an object).
    Value(Value),
}

/// One tool call of a wake.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The model's id for the call; the reply carries it back.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments, unparsed.
    pub arguments: ToolArguments,
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn text_field<'a>(value: &'a Value, key: &str, index: usize) -> Result<&'a str, ChangesetError> {
    match value.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(ChangesetError::MalformedCall {
            index,
            reason: format!("\"{key}\" is empty"),
        }),
        Some(other) => Err(ChangesetError::MalformedCall {
            index,
            reason: format!("\"{key}\" must be a string, got {}", describe(other)),
        }),
        None => Err(ChangesetError::MalformedCall {
            index,
            reason: format!("missing \"{key}\""),
        }),
    }
}

/// Reads an OpenAI `tool_calls` array (`[{"id", "type": "function", "function":
/// {"name", "arguments": "<json>"}}]`), Anthropic content blocks (`[{"type":
/// "tool_use", "id", "name", "input": {}}]`, other block types such as `text` are
/// skipped), or a whole assistant message holding either (`{"tool_calls": [...]}` /
/// `{"content": [...]}`).
pub fn parse_tool_calls(document: &Value) -> Result<Vec<ToolCall>, ChangesetError> {
    let list = match document {
        Value::Array(list) => list,
        Value::Object(map) => match (map.get("tool_calls"), map.get("content")) {
            (Some(Value::Array(list)), _) | (None, Some(Value::Array(list))) => list,
            _ => {
                return Err(ChangesetError::NotAList {
                    found: "an object without a \"tool_calls\" or \"content\" array".into(),
                });
            }
        },
        other => {
            return Err(ChangesetError::NotAList {
                found: describe(other),
            });
        }
    };
    let mut calls = Vec::with_capacity(list.len());
    let mut seen = HashSet::new();
    for (index, entry) in list.iter().enumerate() {
        if !entry.is_object() {
            return Err(ChangesetError::MalformedCall {
                index,
                reason: format!("expected an object, got {}", describe(entry)),
            });
        }
        let call = match entry.get("type").and_then(Value::as_str) {
            Some("tool_use") => ToolCall {
                id: text_field(entry, "id", index)?.to_owned(),
                name: text_field(entry, "name", index)?.to_owned(),
                arguments: ToolArguments::Value(entry.get("input").cloned().unwrap_or(Value::Null)),
            },
            Some("function") | None if entry.get("function").is_some() => {
                let function = &entry["function"];
                if !function.is_object() {
                    return Err(ChangesetError::MalformedCall {
                        index,
                        reason: format!(
                            "\"function\" must be an object, got {}",
                            describe(function)
                        ),
                    });
                }
                let arguments = match function.get("arguments") {
                    Some(Value::String(s)) => ToolArguments::Text(s.clone()),
                    // Some clients send the object itself; accept it rather than guess.
                    Some(v @ Value::Object(_)) => ToolArguments::Value(v.clone()),
                    None => ToolArguments::Text(String::new()),
                    Some(other) => ToolArguments::Value(other.clone()),
                };
                ToolCall {
                    id: text_field(entry, "id", index)?.to_owned(),
                    name: text_field(function, "name", index)?.to_owned(),
                    arguments,
                }
            }
            // Text, thinking and other content blocks carry no call.
            Some(kind) if kind != "function" => continue,
            _ => {
                return Err(ChangesetError::MalformedCall {
                    index,
                    reason: "neither an OpenAI tool call (\"function\") nor an Anthropic \"tool_use\" block".into(),
                });
            }
        };
        if !seen.insert(call.id.clone()) {
            return Err(ChangesetError::DuplicateCallId { index, id: call.id });
        }
        calls.push(call);
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_dialect() {
        let calls = parse_tool_calls(&json!([
            {"id": "call_1", "type": "function", "function": {"name": "set_task_title", "arguments": "{\"title\":\"x\"}"}}
        ]))
        .expect("parses");
        assert_eq!(calls[0].id, "call_1");
        assert_eq!(calls[0].name, "set_task_title");
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Text("{\"title\":\"x\"}".into())
        );
        let wrapped = parse_tool_calls(&json!({"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        ]}))
        .expect("parses");
        assert_eq!(wrapped.len(), 1);
    }

    #[test]
    fn anthropic_dialect_skips_text_blocks() {
        let calls = parse_tool_calls(&json!([
            {"type": "text", "text": "Let me fix that."},
            {"type": "tool_use", "id": "toolu_1", "name": "update_task_priority", "input": {"priority": "P1"}}
        ]))
        .expect("parses");
        assert_eq!(calls.len(), 1);
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Value(json!({"priority": "P1"}))
        );
    }

    #[test]
    fn malformed_documents_are_errors_naming_the_entry() {
        assert!(matches!(
            parse_tool_calls(&json!("x")),
            Err(ChangesetError::NotAList { .. })
        ));
        assert!(matches!(
            parse_tool_calls(&json!({"a": 1})),
            Err(ChangesetError::NotAList { .. })
        ));
        let err = parse_tool_calls(&json!([{"type": "tool_use", "name": "t"}])).unwrap_err();
        assert_eq!(err.to_string(), "tool call #0: missing \"id\"");
        let err = parse_tool_calls(&json!([1])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool call #0: expected an object, got a number"
        );
        let err = parse_tool_calls(&json!([{"id": "a"}])).unwrap_err();
        assert!(matches!(
            err,
            ChangesetError::MalformedCall { index: 0, .. }
        ));
        let dup = json!([
            {"type": "tool_use", "id": "a", "name": "t", "input": {}},
            {"type": "tool_use", "id": "a", "name": "t", "input": {}}
        ]);
        assert!(matches!(
            parse_tool_calls(&dup),
            Err(ChangesetError::DuplicateCallId { index: 1, .. })
        ));
    }
}
