//! The replies of a wake as the messages a caller appends to its conversation, in the
//! dialect its calls came in (or another one asked for): OpenAI `tool` messages,
//! Responses `function_call_output` items, one Anthropic user message of `tool_result`
//! blocks, one Gemini `Content` of `functionResponse` parts, LangChain `ToolMessage`s,
//! one Vercel AI SDK `tool` message of `tool-result` parts, or MCP JSON-RPC responses.

use crate::{ChangesetError, Dialect, ParsedCalls, reply};
use serde_json::{Value, json};

/// The reply to one call, as the wake gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallReply<'a> {
    /// The call's id ([`crate::ToolCall::id`]).
    pub tool_call_id: &'a str,
    /// The text for the model.
    pub content: &'a str,
}

/// The messages answering `parsed`'s calls with `replies` (one per call, in order), in
/// `format`. A refusal (see [`reply::is_refusal`]) is marked as an error where the
/// dialect can say so. Refuses replies that do not answer the calls one by one.
pub fn reply_messages(
    parsed: &ParsedCalls,
    format: Dialect,
    replies: &[CallReply<'_>],
) -> Result<Value, ChangesetError> {
    for (index, call) in parsed.calls.iter().enumerate() {
        let found = replies.get(index).map_or("", |r| r.tool_call_id);
        if found != call.id {
            return Err(ChangesetError::ReplyMismatch {
                index,
                expected: call.id.clone(),
                found: found.to_owned(),
            });
        }
    }
    if let Some(extra) = replies.get(parsed.calls.len()) {
        return Err(ChangesetError::ReplyMismatch {
            index: parsed.calls.len(),
            expected: String::new(),
            found: extra.tool_call_id.to_owned(),
        });
    }
    let answers =
        parsed
            .calls
            .iter()
            .zip(&parsed.origins)
            .zip(replies)
            .map(|((call, origin), reply)| Answer {
                id: &call.id,
                sent_id: &origin.sent_id,
                name: &call.name,
                content: reply.content,
                refused: reply::is_refusal(reply.content),
            });
    Ok(Value::Array(match format {
        Dialect::OpenAi => answers.map(|a| openai(&a)).collect(),
        Dialect::Responses => answers.map(|a| responses(&a)).collect(),
        Dialect::LangChain => answers.map(|a| langchain(&a)).collect(),
        Dialect::Mcp => answers.map(|a| mcp(&a)).collect(),
        Dialect::Anthropic => vec![json!({
            "role": "user",
            "content": answers.map(|a| anthropic(&a)).collect::<Vec<_>>(),
        })],
        Dialect::Gemini => vec![json!({
            "role": "user",
            "parts": answers.map(|a| gemini(&a)).collect::<Vec<_>>(),
        })],
        Dialect::Vercel => vec![json!({
            "role": "tool",
            "content": answers.map(|a| vercel(&a)).collect::<Vec<_>>(),
        })],
    }))
}

/// One call and its reply.
struct Answer<'a> {
    id: &'a str,
    /// `Null` when the call came without an id (Gemini).
    sent_id: &'a Value,
    name: &'a str,
    content: &'a str,
    refused: bool,
}

fn openai(a: &Answer<'_>) -> Value {
    json!({"role": "tool", "tool_call_id": a.id, "content": a.content})
}

fn responses(a: &Answer<'_>) -> Value {
    json!({"type": "function_call_output", "call_id": a.id, "output": a.content})
}

fn anthropic(a: &Answer<'_>) -> Value {
    let mut block = json!({"type": "tool_result", "tool_use_id": a.id, "content": a.content});
    if a.refused {
        block["is_error"] = Value::Bool(true);
    }
    block
}

fn gemini(a: &Answer<'_>) -> Value {
    // Gemini reads `output` as the function's result and `error` as its failure.
    let response = if a.refused {
        json!({"error": a.content})
    } else {
        json!({"output": a.content})
    };
    let mut reply = json!({"name": a.name, "response": response});
    // A call the model sent without an id is answered without one: the id Assent
    // derived for it is in `responses`, not in the model's conversation.
    if !a.sent_id.is_null() {
        reply["id"] = Value::String(a.id.to_owned());
    }
    json!({"functionResponse": reply})
}

fn langchain(a: &Answer<'_>) -> Value {
    json!({
        "type": "tool",
        "tool_call_id": a.id,
        "content": a.content,
        "status": if a.refused { "error" } else { "success" },
    })
}

fn vercel(a: &Answer<'_>) -> Value {
    json!({
        "type": "tool-result",
        "toolCallId": a.id,
        "toolName": a.name,
        "output": {"type": if a.refused { "error-text" } else { "text" }, "value": a.content},
    })
}

fn mcp(a: &Answer<'_>) -> Value {
    let id = if a.sent_id.is_null() {
        Value::String(a.id.to_owned())
    } else {
        a.sent_id.clone()
    };
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": a.content}], "isError": a.refused},
    })
}
