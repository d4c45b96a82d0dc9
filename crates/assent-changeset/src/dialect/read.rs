//! Reading each dialect: which dialect a document's shape shows, where its elements
//! are, and what each element is (a call, a block known to carry none, or an error).

use super::{Dialect, Element, SentId, describe};
use crate::{ChangesetError, ToolArguments, ToolCall};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// Block types each dialect documents as carrying no call for Assent to answer: text,
/// reasoning, results, and calls that the provider's own servers run.
const RESPONSES_NO_CALL: &[&str] = &[
    "message",
    "reasoning",
    "function_call_output",
    "file_search_call",
    "web_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_response",
    "item_reference",
    "compaction",
];
/// Responses items that ask the client to run something other than a function: Assent
/// cannot answer them, so they are refused rather than skipped.
const RESPONSES_NOT_FUNCTIONS: &[&str] = &[
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "custom_tool_call",
    "mcp_approval_request",
];
const ANTHROPIC_NO_CALL: &[&str] = &[
    "text",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "search_result",
    "tool_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];
const VERCEL_NO_CALL: &[&str] = &[
    "text",
    "reasoning",
    "redacted-reasoning",
    "file",
    "image",
    "source",
    "tool-result",
    "tool-error",
    "tool-approval-request",
    "tool-approval-response",
    "step-start",
];
const LANGCHAIN_NO_CALL: &[&str] = &[];
/// Gemini part fields holding data other than a call.
const GEMINI_NO_CALL: &[&str] = &[
    "text",
    "inlineData",
    "inline_data",
    "fileData",
    "file_data",
    "functionResponse",
    "function_response",
    "executableCode",
    "executable_code",
    "codeExecutionResult",
    "code_execution_result",
];
/// Gemini part fields that describe the part rather than hold it.
const GEMINI_METADATA: &[&str] = &[
    "thought",
    "thoughtSignature",
    "thought_signature",
    "videoMetadata",
    "video_metadata",
    "partMetadata",
    "part_metadata",
    "mediaResolution",
    "media_resolution",
];

fn no_call_types(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        // Lists mixing OpenAI calls and Anthropic blocks were read before the other
        // dialects came; they still are.
        Dialect::OpenAi | Dialect::Anthropic => ANTHROPIC_NO_CALL,
        Dialect::Responses => RESPONSES_NO_CALL,
        Dialect::Vercel => VERCEL_NO_CALL,
        Dialect::LangChain => LANGCHAIN_NO_CALL,
        Dialect::Gemini => GEMINI_NO_CALL,
        Dialect::Mcp => &[],
    }
}

fn not_dialect(dialect: Dialect, found: impl Into<String>) -> ChangesetError {
    ChangesetError::NotDialect {
        dialect: dialect.title(),
        found: found.into(),
    }
}

fn malformed(index: usize, reason: impl Into<String>) -> ChangesetError {
    ChangesetError::MalformedCall {
        index,
        reason: reason.into(),
    }
}

/// The dialect `document`'s shape shows.
pub(super) fn detect(document: &Value) -> Result<Dialect, ChangesetError> {
    let map = match document {
        Value::Array(list) => return detect_list(list),
        Value::Object(map) => map,
        other => {
            return Err(ChangesetError::NotAList {
                found: describe(other).to_owned(),
            });
        }
    };
    let array = |key: &str| map.get(key).and_then(Value::as_array);
    if map.contains_key("jsonrpc") {
        Ok(Dialect::Mcp)
    } else if map.contains_key("lc") && map.get("kwargs").is_some_and(Value::is_object) {
        Ok(Dialect::LangChain)
    } else if map.contains_key("candidates") || map.contains_key("parts") {
        Ok(Dialect::Gemini)
    } else if array("output").is_some() {
        Ok(Dialect::Responses)
    } else if array("choices").is_some() {
        Ok(Dialect::OpenAi)
    } else if array("toolCalls").is_some() {
        Ok(Dialect::Vercel)
    } else if let Some(calls) = array("tool_calls") {
        let langchain_type = matches!(
            map.get("type").and_then(Value::as_str),
            Some("ai" | "AIMessage" | "AIMessageChunk")
        );
        let langchain_calls = calls
            .iter()
            .any(|c| c.get("args").is_some() && c.get("function").is_none());
        if langchain_type || langchain_calls || map.contains_key("invalid_tool_calls") {
            Ok(Dialect::LangChain)
        } else {
            Ok(Dialect::OpenAi)
        }
    } else if let Some(blocks) = array("content") {
        detect_list(blocks)
    } else if map.contains_key("role") {
        // An assistant message that says something but calls nothing.
        Ok(Dialect::OpenAi)
    } else {
        Err(ChangesetError::NotAList {
            found: "an object holding no calls, content, output, parts or JSON-RPC request".into(),
        })
    }
}

/// The dialect an element belongs to beyond doubt: calls, Gemini contents and JSON-RPC
/// messages. Blocks such as `text` occur in several dialects and decide nothing.
fn signature(element: &Value) -> Option<Dialect> {
    let map = element.as_object()?;
    if map.contains_key("jsonrpc") {
        return Some(Dialect::Mcp);
    }
    if map.contains_key("parts") {
        return Some(Dialect::Gemini);
    }
    match map.get("type").and_then(Value::as_str) {
        Some("function") => Some(Dialect::OpenAi),
        Some("function_call") => Some(Dialect::Responses),
        Some(kind) if RESPONSES_NOT_FUNCTIONS.contains(&kind) => Some(Dialect::Responses),
        Some("tool_use") => Some(Dialect::Anthropic),
        Some("tool-call") => Some(Dialect::Vercel),
        Some("tool_call" | "invalid_tool_call") => Some(Dialect::LangChain),
        Some(_) => None,
        None if map.contains_key("function") => Some(Dialect::OpenAi),
        None if map.contains_key("args") && map.contains_key("name") => Some(Dialect::LangChain),
        None => None,
    }
}

/// Whether calls of `a` and `b` may share one list: the same dialect, or the OpenAI
/// Chat and Anthropic pair, which one list could mix before any other dialect was read.
fn legacy_mix(a: Dialect, b: Dialect) -> bool {
    a == b
        || matches!(
            (a, b),
            (Dialect::OpenAi, Dialect::Anthropic) | (Dialect::Anthropic, Dialect::OpenAi)
        )
}

fn detect_list(list: &[Value]) -> Result<Dialect, ChangesetError> {
    let mut found: Option<(usize, Dialect)> = None;
    for (index, element) in list.iter().enumerate() {
        let Some(dialect) = signature(element) else {
            continue;
        };
        match found {
            None => found = Some((index, dialect)),
            Some((first_index, first)) if !legacy_mix(first, dialect) => {
                return Err(ChangesetError::MixedDialects {
                    index,
                    dialect: dialect.title(),
                    first_index,
                    first: first.title(),
                });
            }
            Some(_) => {}
        }
    }
    if let Some((_, dialect)) = found {
        return Ok(dialect);
    }
    // No element shows a dialect: nothing here is a call. Refuse what nobody knows
    // before saying so, so that an unknown element is named.
    for (index, element) in list.iter().enumerate() {
        let Some(map) = element.as_object() else {
            return Err(malformed(
                index,
                format!("expected an object, got {}", describe(element)),
            ));
        };
        match map.get("type") {
            Some(Value::String(kind)) => {
                let known = Dialect::ALL
                    .into_iter()
                    .any(|d| no_call_types(d).contains(&kind.as_str()));
                if !known {
                    return Err(ChangesetError::UnknownElement {
                        index,
                        dialect: "no known dialect",
                        kind: kind.clone(),
                    });
                }
            }
            // A Responses input message may leave out its type.
            None if map.contains_key("role") => {}
            _ => {
                return Err(malformed(
                    index,
                    "not a tool call or content block of any known dialect (no \"type\")",
                ));
            }
        }
    }
    Err(ChangesetError::NoCalls {
        detail: if list.is_empty() {
            "an empty list".to_owned()
        } else {
            format!("{} content block(s), none of them a call", list.len())
        },
    })
}

/// The elements of `document` read as `dialect`, in order.
pub(super) fn elements(dialect: Dialect, document: &Value) -> Result<Vec<&Value>, ChangesetError> {
    match (dialect, document) {
        (Dialect::Gemini, _) => gemini_parts(document),
        (Dialect::Mcp, Value::Object(_)) => Ok(vec![document]),
        (_, Value::Array(list)) => Ok(list.iter().collect()),
        (_, Value::Object(map)) => object_elements(dialect, map),
        (_, other) => Err(not_dialect(dialect, describe(other))),
    }
}

fn object_elements(
    dialect: Dialect,
    map: &Map<String, Value>,
) -> Result<Vec<&Value>, ChangesetError> {
    let key = |key: &str| -> Result<Vec<&Value>, ChangesetError> {
        match map.get(key) {
            Some(Value::Array(list)) => Ok(list.iter().collect()),
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(other) => Err(not_dialect(
                dialect,
                format!("\"{key}\" must be an array, got {}", describe(other)),
            )),
        }
    };
    match dialect {
        Dialect::OpenAi => match map.get("choices") {
            Some(Value::Array(choices)) => match choices.first().and_then(|c| c.get("message")) {
                Some(message @ Value::Object(_)) => elements(dialect, message),
                _ => Err(not_dialect(dialect, "\"choices\" holds no message")),
            },
            _ if map.contains_key("tool_calls") || map.contains_key("role") => key("tool_calls"),
            _ => Err(not_dialect(
                dialect,
                "an object without \"tool_calls\" or \"choices\"",
            )),
        },
        Dialect::Responses if map.contains_key("output") => key("output"),
        Dialect::Anthropic | Dialect::Vercel if map.get("content").is_some_and(Value::is_array) => {
            key("content")
        }
        // A message whose content is only text.
        Dialect::Anthropic | Dialect::Vercel
            if map.get("content").is_some_and(Value::is_string) =>
        {
            Ok(Vec::new())
        }
        Dialect::Vercel if map.contains_key("toolCalls") => key("toolCalls"),
        Dialect::LangChain => {
            let message = match (map.get("lc"), map.get("kwargs")) {
                (Some(_), Some(Value::Object(kwargs))) => kwargs,
                _ => map,
            };
            if !message.contains_key("tool_calls") && !message.contains_key("invalid_tool_calls") {
                return Err(not_dialect(
                    dialect,
                    "an object without \"tool_calls\" (expected an AIMessage)",
                ));
            }
            let mut list = Vec::new();
            for name in ["tool_calls", "invalid_tool_calls"] {
                match message.get(name) {
                    Some(Value::Array(calls)) => list.extend(calls.iter()),
                    None | Some(Value::Null) => {}
                    Some(other) => {
                        return Err(not_dialect(
                            dialect,
                            format!("\"{name}\" must be an array, got {}", describe(other)),
                        ));
                    }
                }
            }
            Ok(list)
        }
        _ => Err(not_dialect(dialect, "an object of another shape")),
    }
}

/// Gemini's parts: of one `Content`, of a list of them (numbered across the contents),
/// or of the first candidate of a `GenerateContentResponse`.
fn gemini_parts(document: &Value) -> Result<Vec<&Value>, ChangesetError> {
    let dialect = Dialect::Gemini;
    match document {
        Value::Object(map) if map.contains_key("candidates") => match map.get("candidates") {
            Some(Value::Array(candidates)) => match candidates.first() {
                None => Ok(Vec::new()),
                Some(candidate) => match candidate.get("content") {
                    Some(content) => parts_of(content, "candidates[0].content"),
                    None => Ok(Vec::new()),
                },
            },
            _ => Err(not_dialect(dialect, "\"candidates\" must be an array")),
        },
        Value::Object(_) => parts_of(document, "the object"),
        Value::Array(contents) => {
            let mut parts = Vec::new();
            for (index, content) in contents.iter().enumerate() {
                parts.extend(parts_of(content, &format!("content #{index}"))?);
            }
            Ok(parts)
        }
        other => Err(not_dialect(dialect, describe(other))),
    }
}

fn parts_of<'a>(content: &'a Value, what: &str) -> Result<Vec<&'a Value>, ChangesetError> {
    match content.get("parts") {
        Some(Value::Array(parts)) => Ok(parts.iter().collect()),
        // A content the model left empty (stopped for safety, say).
        None | Some(Value::Null) if content.is_object() => Ok(Vec::new()),
        _ => Err(not_dialect(
            Dialect::Gemini,
            format!("{what} is not a Content with a \"parts\" array"),
        )),
    }
}

/// What one element is, read as `dialect`; `token` is its `id` as written in the
/// document's text, when that was read.
pub(super) fn element(
    dialect: Dialect,
    value: &Value,
    index: usize,
    token: Option<&RawValue>,
) -> Result<Element, ChangesetError> {
    let Some(map) = value.as_object() else {
        return Err(malformed(
            index,
            format!("expected an object, got {}", describe(value)),
        ));
    };
    match dialect {
        Dialect::Gemini => return gemini_part(map, index),
        Dialect::Mcp => return mcp_request(map, index, token),
        _ => {}
    }
    let kind = match map.get("type") {
        Some(Value::String(kind)) => Some(kind.as_str()),
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(malformed(
                index,
                format!("\"type\" must be a string, got {}", describe(other)),
            ));
        }
    };
    let call = match (dialect, kind) {
        (Dialect::OpenAi | Dialect::Anthropic, Some("function") | None)
            if map.contains_key("function") =>
        {
            openai_call(map, index)?
        }
        (Dialect::Responses, Some("function_call")) => ToolCall::new(
            text_field(map, "call_id", index)?.to_owned(),
            text_field(map, "name", index)?.to_owned(),
            text_arguments(map.get("arguments")),
        ),
        (Dialect::Responses, Some(kind)) if RESPONSES_NOT_FUNCTIONS.contains(&kind) => {
            return Err(malformed(
                index,
                format!(
                    "a \"{kind}\" item is not a function call; Assent answers function calls only"
                ),
            ));
        }
        // A Responses input message may leave out its type.
        (Dialect::Responses, None) if map.contains_key("role") => return Ok(Element::NoCall),
        (Dialect::Anthropic | Dialect::OpenAi, Some("tool_use")) => ToolCall::new(
            text_field(map, "id", index)?.to_owned(),
            text_field(map, "name", index)?.to_owned(),
            ToolArguments::Value(map.get("input").cloned().unwrap_or(Value::Null)),
        ),
        (Dialect::Vercel, Some("tool-call")) => {
            // Run by the model's provider already: nothing for Assent to answer.
            if map.get("providerExecuted") == Some(&Value::Bool(true)) {
                return Ok(Element::NoCall);
            }
            ToolCall {
                id: text_field(map, "toolCallId", index)?.to_owned(),
                name: text_field(map, "toolName", index)?.to_owned(),
                // AI SDK 5 says `input`, 4 said `args`.
                arguments: ToolArguments::Value(
                    map.get("input")
                        .or_else(|| map.get("args"))
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
            }
        }
        (Dialect::LangChain, Some("tool_call") | None) if map.contains_key("args") => {
            ToolCall::new(
                text_field(map, "id", index)?.to_owned(),
                text_field(map, "name", index)?.to_owned(),
                ToolArguments::Value(map.get("args").cloned().unwrap_or(Value::Null)),
            )
        }
        // The model's call whose arguments LangChain could not parse: answered like any
        // call with broken arguments, never dropped.
        (Dialect::LangChain, Some("invalid_tool_call")) => ToolCall::new(
            text_field(map, "id", index)?.to_owned(),
            text_field(map, "name", index)?.to_owned(),
            text_arguments(map.get("args")),
        ),
        (_, Some(kind)) if no_call_types(dialect).contains(&kind) => return Ok(Element::NoCall),
        (_, Some(kind)) => {
            return Err(ChangesetError::UnknownElement {
                index,
                dialect: dialect.title(),
                kind: kind.to_owned(),
            });
        }
        (_, None) => {
            return Err(malformed(
                index,
                format!(
                    "not a {} tool call or content block (no \"type\")",
                    dialect.title()
                ),
            ));
        }
    };
    let sent_id = SentId::string(&call.id);
    Ok(Element::Call(call, Some(sent_id)))
}

fn text_arguments(value: Option<&Value>) -> ToolArguments {
    match value {
        Some(Value::String(text)) => ToolArguments::Text(text.clone()),
        None | Some(Value::Null) => ToolArguments::Text(String::new()),
        Some(other) => ToolArguments::Value(other.clone()),
    }
}

fn openai_call(map: &Map<String, Value>, index: usize) -> Result<ToolCall, ChangesetError> {
    let Some(Value::Object(function)) = map.get("function") else {
        return Err(malformed(
            index,
            format!(
                "\"function\" must be an object, got {}",
                map.get("function").map_or("nothing", describe)
            ),
        ));
    };
    Ok(ToolCall::new(
        text_field(map, "id", index)?.to_owned(),
        text_field(function, "name", index)?.to_owned(),
        text_arguments(function.get("arguments")),
    ))
}

fn gemini_part(map: &Map<String, Value>, index: usize) -> Result<Element, ChangesetError> {
    let call = map
        .get("functionCall")
        .or_else(|| map.get("function_call"))
        .filter(|v| !v.is_null());
    if let Some(call) = call {
        let Some(call) = call.as_object() else {
            return Err(malformed(
                index,
                format!("\"functionCall\" must be an object, got {}", describe(call)),
            ));
        };
        let name = text_field(call, "name", index)?.to_owned();
        let (id, sent_id) = match call.get("id") {
            None | Some(Value::Null) => (derived_gemini_id(index), None),
            Some(_) => {
                let id = text_field(call, "id", index)?.to_owned();
                let sent_id = SentId::string(&id);
                (id, Some(sent_id))
            }
        };
        let arguments = match call.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(args) => args.clone(),
        };
        return Ok(Element::Call(
            ToolCall::new(id, name, ToolArguments::Value(arguments)),
            sent_id,
        ));
    }
    let mut data = map
        .iter()
        .filter(|(key, value)| !value.is_null() && !GEMINI_METADATA.contains(&key.as_str()));
    match data.next() {
        Some((key, _)) if GEMINI_NO_CALL.contains(&key.as_str()) => Ok(Element::NoCall),
        Some((key, _)) => Err(ChangesetError::UnknownElement {
            index,
            dialect: Dialect::Gemini.title(),
            kind: key.clone(),
        }),
        // A part of only a thought signature carries nothing, and says so.
        None if map.keys().any(|k| GEMINI_METADATA.contains(&k.as_str())) => Ok(Element::NoCall),
        None => Err(malformed(index, "an empty Gemini part")),
    }
}

/// The id a Gemini call without one gets: stable, from its position in the document,
/// so a retried wake names it the same.
pub fn derived_gemini_id(index: usize) -> String {
    format!("gemini-call-{index}")
}

/// An MCP `tools/call` request. Its id is answered exactly as sent: from `token`, the
/// id as written in the text, when the text was read; otherwise from the `Value`, which
/// holds a string or an integer within 64 bits exactly and any other number perhaps
/// altered, so such a number is refused rather than answered as another id.
fn mcp_request(
    map: &Map<String, Value>,
    index: usize,
    token: Option<&RawValue>,
) -> Result<Element, ChangesetError> {
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(malformed(
            index,
            "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\")",
        ));
    }
    let method = match map.get("method") {
        Some(Value::String(method)) => method.as_str(),
        Some(other) => {
            return Err(malformed(
                index,
                format!("\"method\" must be a string, got {}", describe(other)),
            ));
        }
        None => {
            return Err(malformed(
                index,
                "a JSON-RPC response, not a tools/call request",
            ));
        }
    };
    let id = map.get("id");
    if method != "tools/call" {
        // A notification asks for no answer and carries no call.
        if id.is_none() && method.starts_with("notifications/") {
            return Ok(Element::NoCall);
        }
        return Err(malformed(
            index,
            format!("method \"{method}\" is not tools/call"),
        ));
    }
    // The text's token, when it is the id the `Value` holds (it always is: both read the
    // same text, the last of a repeated key counting).
    let token = token.filter(|token| {
        let quoted = token.get().starts_with('"');
        matches!(
            (id, quoted),
            (Some(Value::String(_)), true) | (Some(Value::Number(_)), false)
        )
    });
    let (call_id, sent_id) = match (id, token) {
        (Some(Value::String(text)), _) if !text.trim().is_empty() => (
            text.clone(),
            token.map_or_else(|| SentId::string(text), SentId::from_token),
        ),
        // Read from the text: any number, as it was written.
        (Some(Value::Number(_)), Some(token)) => {
            (token.get().to_owned(), SentId::from_token(token))
        }
        (Some(number @ Value::Number(n)), None) => match SentId::from_value(number) {
            Some(sent_id) => (n.to_string(), sent_id),
            None => {
                return Err(malformed(
                    index,
                    format!(
                        "\"id\" {n} cannot be answered exactly as sent: send a string or an integer within 64 bits"
                    ),
                ));
            }
        },
        (Some(other), _) => {
            return Err(malformed(
                index,
                format!(
                    "\"id\" must be a non-empty string or a number, got {}",
                    describe(other)
                ),
            ));
        }
        (None, _) => {
            return Err(malformed(
                index,
                "a tools/call request needs an \"id\" to be answered",
            ));
        }
    };
    let Some(Value::Object(params)) = map.get("params") else {
        return Err(malformed(index, "missing \"params\" object"));
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(args) => args.clone(),
    };
    Ok(Element::Call(
        ToolCall::new(
            call_id,
            text_field(params, "name", index)?.to_owned(),
            ToolArguments::Value(arguments),
        ),
        Some(sent_id),
    ))
}

fn text_field<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    index: usize,
) -> Result<&'a str, ChangesetError> {
    match map.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(malformed(index, format!("\"{key}\" is empty"))),
        None | Some(Value::Null) => Err(malformed(index, format!("missing \"{key}\""))),
        Some(other) => Err(malformed(
            index,
            format!("\"{key}\" must be a string, got {}", describe(other)),
        )),
    }
}
