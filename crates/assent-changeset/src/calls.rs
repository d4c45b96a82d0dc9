//! The tool calls of a wake, whichever dialect they came in.

use crate::{ChangesetError, parse_calls};
use serde_json::Value;

/// The arguments as the model sent them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolArguments {
    /// OpenAI Chat and Responses (and LangChain's invalid calls): a string that should
    /// hold a JSON object.
    Text(String),
    /// Every other dialect: already a JSON value (should be an object).
    Value(Value),
}

/// One tool call of a wake.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The model's id for the call; the reply carries it back.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments, unparsed.
    pub arguments: ToolArguments,
}

impl ToolCall {
    /// The call `id` of tool `name` with its `arguments` as the model sent them.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: ToolArguments) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// Reads the tool calls of a wake in whichever dialect the document's shape shows
/// (see [`crate::Dialect`]): OpenAI `tool_calls`, Responses `function_call` items,
/// Anthropic `tool_use` blocks, Gemini `functionCall` parts, LangChain `tool_calls`,
/// Vercel AI SDK `tool-call` parts or MCP `tools/call` requests, alone or inside the
/// message or response that holds them. [`crate::parse_calls`] also says which dialect
/// it was and where each call came from.
pub fn parse_tool_calls(document: &Value) -> Result<Vec<ToolCall>, ChangesetError> {
    parse_calls(document, None).map(|parsed| parsed.calls)
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
    fn anthropic_dialect_reads_past_text_blocks() {
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
