//! The dialects in which SDKs write tool calls, and reading a wake's document in any of
//! them: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, Google Gemini,
//! LangChain/LangGraph, the Vercel AI SDK and MCP `tools/call` requests.
//!
//! Nothing is dropped without a word: every element of the document is either a call,
//! or a block type its dialect documents as carrying no call (text, thinking,
//! reasoning, message, …), or the whole document is refused with an error naming the
//! element's index. A document without a single call is refused too.
//!
//! The replies go back in the same dialect ([`crate::replies`]), naming each call by
//! its id exactly as it was sent ([`SentId`]).

mod ids;
mod read;

pub use ids::SentId;
pub use read::derived_gemini_id;

use crate::{ChangesetError, ToolCall};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

/// A dialect of tool calls, named as `--format` and `--reply-format` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI Chat Completions: an assistant message, its `tool_calls` array, or a
    /// whole completion (`choices[0].message`).
    OpenAi,
    /// OpenAI Responses: the `output` array or a whole response object
    /// (`function_call` items).
    Responses,
    /// Anthropic Messages: a message or its `content` blocks (`tool_use`).
    Anthropic,
    /// Google Gemini: a `Content` (`parts[].functionCall`), a list of them, or a
    /// `GenerateContentResponse` (`candidates[0].content`).
    Gemini,
    /// LangChain / LangGraph: an `AIMessage` as JSON (also `dumpd`'s `{"lc", "kwargs"}`)
    /// or its `tool_calls` list.
    LangChain,
    /// Vercel AI SDK: `tool-call` parts, an assistant message holding them, or a
    /// result's `toolCalls`.
    Vercel,
    /// MCP: a `tools/call` JSON-RPC request or a batch of them.
    Mcp,
}

impl Dialect {
    /// Every dialect, in the order the documentation lists them.
    pub const ALL: [Self; 7] = [
        Self::OpenAi,
        Self::Responses,
        Self::Anthropic,
        Self::Gemini,
        Self::LangChain,
        Self::Vercel,
        Self::Mcp,
    ];

    /// The name `--format` takes: `openai`, `responses`, `anthropic`, `gemini`,
    /// `langchain`, `vercel` or `mcp`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Responses => "responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::LangChain => "langchain",
            Self::Vercel => "vercel",
            Self::Mcp => "mcp",
        }
    }

    /// What a person calls it, for error messages.
    pub const fn title(self) -> &'static str {
        match self {
            Self::OpenAi => "OpenAI Chat Completions",
            Self::Responses => "OpenAI Responses",
            Self::Anthropic => "Anthropic Messages",
            Self::Gemini => "Gemini",
            Self::LangChain => "LangChain",
            Self::Vercel => "Vercel AI SDK",
            Self::Mcp => "MCP",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dialect {
    type Err = ChangesetError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|d| d.name() == wanted)
            .ok_or_else(|| ChangesetError::UnknownFormat(text.to_owned()))
    }
}

/// Where one call came from, for the reply in its dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOrigin {
    /// The element's index in the document (Gemini: parts numbered across contents).
    pub element: usize,
    /// The call's id exactly as sent (an MCP request id may be a number); `None` when
    /// the call had none and [`ToolCall::id`] was derived from its position.
    pub sent_id: Option<SentId>,
}

/// A document read: its dialect, its calls in order, and how every element was
/// accounted for.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCalls {
    /// The dialect the document was read in.
    pub dialect: Dialect,
    /// The calls, in document order; never empty.
    pub calls: Vec<ToolCall>,
    /// One per call, in the same order.
    pub origins: Vec<CallOrigin>,
    /// How many elements the document held (calls and non-call blocks).
    pub elements: usize,
}

impl ParsedCalls {
    /// Elements that were blocks carrying no call (text, reasoning, …).
    pub fn non_calls(&self) -> usize {
        self.elements - self.calls.len()
    }
}

/// One element of a document, read.
enum Element {
    Call(ToolCall, Option<SentId>),
    NoCall,
}

/// Reads the tool calls of `document` in `format`, or in the dialect its shape shows
/// when `format` is `None`. Refuses a document in no known dialect, an element of an
/// unknown type, a malformed call (naming its index), two calls with one id, and a
/// document holding no call at all.
///
/// A [`Value`] has already lost what an MCP request id past 64 bits, or written as
/// `1.0` or `1e3`, looked like, so such an id is refused here rather than answered
/// altered; [`parse_calls_str`] reads the document's text and answers any id exactly.
pub fn parse_calls(
    document: &Value,
    format: Option<Dialect>,
) -> Result<ParsedCalls, ChangesetError> {
    parse(document, format, None)
}

/// [`parse_calls`] on the document's JSON text, keeping every id exactly as sent: an
/// MCP request id is kept as its JSON token (`18446744073709551616000`, `-7`, `1e3`,
/// `"req-2"`), so that [`crate::exact_reply_messages`] repeats it token for token.
pub fn parse_calls_str(text: &str, format: Option<Dialect>) -> Result<ParsedCalls, ChangesetError> {
    let document: Value =
        serde_json::from_str(text).map_err(|e| ChangesetError::NotJson(e.to_string()))?;
    let dialect = match format {
        Some(dialect) => dialect,
        None => read::detect(&document)?,
    };
    // Only MCP ids may be numbers; every other dialect's ids are strings, which a
    // `Value` holds exactly.
    let tokens = if dialect == Dialect::Mcp {
        ids::tokens(text, &document).map_err(|e| ChangesetError::NotJson(e.to_string()))?
    } else {
        Vec::new()
    };
    parse(&document, Some(dialect), Some(&tokens))
}

/// The reading behind [`parse_calls`] and [`parse_calls_str`]; `tokens` holds the raw
/// `id` of each top-level element when the document's text was at hand.
fn parse(
    document: &Value,
    format: Option<Dialect>,
    tokens: Option<&[Option<Box<RawValue>>]>,
) -> Result<ParsedCalls, ChangesetError> {
    let dialect = match format {
        Some(dialect) => dialect,
        None => read::detect(document)?,
    };
    let elements = read::elements(dialect, document)?;
    let mut calls = Vec::new();
    let mut origins = Vec::new();
    let mut seen = HashSet::new();
    for (index, element) in elements.iter().enumerate() {
        let token = tokens
            .and_then(|tokens| tokens.get(index))
            .and_then(Option::as_deref);
        match read::element(dialect, element, index, token)? {
            Element::Call(call, sent_id) => {
                if !seen.insert(call.id.clone()) {
                    return Err(ChangesetError::DuplicateCallId { index, id: call.id });
                }
                calls.push(call);
                origins.push(CallOrigin {
                    element: index,
                    sent_id,
                });
            }
            Element::NoCall => {}
        }
    }
    if calls.is_empty() {
        return Err(ChangesetError::NoCalls {
            detail: if elements.is_empty() {
                format!("nothing read as {}", dialect.title())
            } else {
                format!(
                    "{} element(s) read as {}, none of them a call",
                    elements.len(),
                    dialect.title()
                )
            },
        });
    }
    Ok(ParsedCalls {
        dialect,
        calls,
        origins,
        elements: elements.len(),
    })
}

/// The JSON type of `value`, for error messages.
pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
