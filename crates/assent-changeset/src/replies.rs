//! The replies of a wake as the messages a caller appends to its conversation, in the
//! dialect its calls came in (or another one asked for): OpenAI `tool` messages,
//! Responses `function_call_output` items, one Anthropic user message of `tool_result`
//! blocks, one Gemini `Content` of `functionResponse` parts, LangChain `ToolMessage`s,
//! one Vercel AI SDK `tool` message of `tool-result` parts, or MCP JSON-RPC responses.
//!
//! Every answer names its call by the id the call was sent with; an MCP response
//! repeats the request's id token for token ([`exact_reply_messages`]), even one that
//! no `serde_json::Value` can hold (`18446744073709551616000`).

use crate::{ChangesetError, Dialect, ParsedCalls, SentId, reply};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};
use std::fmt;

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
/// dialect can say so. Refuses replies that do not answer the calls one by one, and
/// (`ChangesetError::InexactId`) an MCP id that a `Value` cannot hold as sent, which
/// only [`exact_reply_messages`] can answer.
pub fn reply_messages(
    parsed: &ParsedCalls,
    format: Dialect,
    replies: &[CallReply<'_>],
) -> Result<Value, ChangesetError> {
    exact_reply_messages(parsed, format, replies)?.to_value()
}

/// The replies of a wake as messages to be written as JSON text, every id exactly as
/// its call sent it: serialize them with serde_json (`to_string`, `to_writer`, inside
/// a `#[derive(Serialize)]` body, axum's `Json`) or print them (`Display`).
/// `serde_json::to_value` would read an id back into a `Value`, which may alter it;
/// [`ReplyMessages::to_value`] refuses to.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyMessages(Vec<Message>);

#[derive(Debug, Clone, PartialEq)]
enum Message {
    /// A message naming its call by a string.
    Value(Value),
    /// An MCP JSON-RPC response: its id is the request's, token for token.
    JsonRpc { id: SentId, result: Value },
}

impl ReplyMessages {
    /// The messages as one [`Value`] (a list), as [`reply_messages`] returns them;
    /// `ChangesetError::InexactId` when an MCP id is a number a `Value` would write
    /// otherwise than it was sent.
    pub fn to_value(&self) -> Result<Value, ChangesetError> {
        let mut list = Vec::with_capacity(self.0.len());
        for (index, message) in self.0.iter().enumerate() {
            list.push(match message {
                Message::Value(value) => value.clone(),
                Message::JsonRpc { id, result } => {
                    let Some(id) = id.to_value() else {
                        return Err(ChangesetError::InexactId {
                            index,
                            id: id.json().into_owned(),
                        });
                    };
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                }
            });
        }
        Ok(Value::Array(list))
    }
}

impl Serialize for ReplyMessages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Value(value) => value.serialize(serializer),
            // The keys in the order a `Value` writes them.
            Self::JsonRpc { id, result } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("jsonrpc", "2.0")?;
                map.serialize_entry("result", result)?;
                map.end()
            }
        }
    }
}

impl fmt::Display for ReplyMessages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

/// [`reply_messages`], to be written as JSON text: an MCP response repeats its
/// request's id exactly as sent, also one past 64 bits or written as `1e3` (read with
/// [`crate::parse_calls_str`]).
pub fn exact_reply_messages(
    parsed: &ParsedCalls,
    format: Dialect,
    replies: &[CallReply<'_>],
) -> Result<ReplyMessages, ChangesetError> {
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
                sent_id: origin.sent_id.as_ref(),
                name: &call.name,
                content: reply.content,
                refused: reply::is_refusal(reply.content),
            });
    let values: Vec<Value> = match format {
        Dialect::Mcp => return Ok(ReplyMessages(answers.map(|a| mcp(&a)).collect())),
        Dialect::OpenAi => answers.map(|a| openai(&a)).collect(),
        Dialect::Responses => answers.map(|a| responses(&a)).collect(),
        Dialect::LangChain => answers.map(|a| langchain(&a)).collect(),
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
    };
    Ok(ReplyMessages(
        values.into_iter().map(Message::Value).collect(),
    ))
}

/// One call and its reply.
struct Answer<'a> {
    id: &'a str,
    /// `None` when the call came without an id (Gemini).
    sent_id: Option<&'a SentId>,
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
    if a.sent_id.is_some() {
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

fn mcp(a: &Answer<'_>) -> Message {
    Message::JsonRpc {
        // A call sent without an id (Gemini's) is named by the one derived for it.
        id: a.sent_id.cloned().unwrap_or_else(|| SentId::string(a.id)),
        result: json!({"content": [{"type": "text", "text": a.content}], "isError": a.refused}),
    }
}
