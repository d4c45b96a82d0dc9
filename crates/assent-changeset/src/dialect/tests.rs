//! Every dialect in and out: golden fixtures taken from the SDKs' documented shapes
//! (`fixtures/dialects/<name>.in.json` and the replies `<name>.out.json`), the other
//! shapes each dialect comes in, refusals, and a property over arbitrary documents.
//!
//! `ASSENT_BLESS=1 cargo test -p assent-changeset` rewrites the `.out.json` files.

use super::*;
use crate::{CallReply, ToolArguments, exact_reply_messages, reply, reply_messages};
use proptest::prelude::*;
use serde_json::json;
use std::path::PathBuf;

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/dialects")
        .join(name)
}

fn fixture(name: &str) -> Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The replies the golden outputs answer with: the first call queued, the second
/// refused (an unknown tool).
fn replies_for(parsed: &ParsedCalls) -> Vec<(String, String)> {
    parsed
        .calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let content = if i == 0 {
                reply::QUEUED.to_owned()
            } else {
                reply::unknown_tool(&call.name)
            };
            (call.id.clone(), content)
        })
        .collect()
}

fn render(parsed: &ParsedCalls, format: Dialect) -> Value {
    let replies = replies_for(parsed);
    let replies: Vec<CallReply<'_>> = replies
        .iter()
        .map(|(id, content)| CallReply {
            tool_call_id: id,
            content,
        })
        .collect();
    reply_messages(parsed, format, &replies).expect("replies render")
}

/// Each answer of `messages` in `format`: `(the call id it names, whether it says
/// the call failed)`; `None` for a Gemini answer to a call sent without an id.
fn answers(format: Dialect, messages: &Value) -> Vec<(Option<Value>, bool)> {
    let list = messages.as_array().expect("messages are a list");
    let single = |key: &str| {
        assert_eq!(list.len(), 1, "{format}: one message");
        list[0][key].as_array().expect("a list of answers").clone()
    };
    match format {
        Dialect::OpenAi => list
            .iter()
            .map(|m| {
                assert_eq!(m["role"], "tool");
                (Some(m["tool_call_id"].clone()), false)
            })
            .collect(),
        Dialect::Responses => list
            .iter()
            .map(|m| {
                assert_eq!(m["type"], "function_call_output");
                (Some(m["call_id"].clone()), false)
            })
            .collect(),
        Dialect::LangChain => list
            .iter()
            .map(|m| {
                assert_eq!(m["type"], "tool");
                (Some(m["tool_call_id"].clone()), m["status"] == "error")
            })
            .collect(),
        Dialect::Mcp => list
            .iter()
            .map(|m| {
                assert_eq!(m["jsonrpc"], "2.0");
                (Some(m["id"].clone()), m["result"]["isError"] == true)
            })
            .collect(),
        Dialect::Anthropic => {
            assert_eq!(list[0]["role"], "user");
            single("content")
                .iter()
                .map(|b| {
                    assert_eq!(b["type"], "tool_result");
                    (Some(b["tool_use_id"].clone()), b["is_error"] == true)
                })
                .collect()
        }
        Dialect::Gemini => {
            assert_eq!(list[0]["role"], "user");
            single("parts")
                .iter()
                .map(|p| {
                    let r = &p["functionResponse"];
                    assert!(r["name"].is_string());
                    (r.get("id").cloned(), r["response"].get("error").is_some())
                })
                .collect()
        }
        Dialect::Vercel => {
            assert_eq!(list[0]["role"], "tool");
            single("content")
                .iter()
                .map(|p| {
                    assert_eq!(p["type"], "tool-result");
                    (
                        Some(p["toolCallId"].clone()),
                        p["output"]["type"] == "error-text",
                    )
                })
                .collect()
        }
    }
}

#[test]
fn golden_fixtures_round_trip_in_every_dialect() {
    let bless = std::env::var_os("ASSENT_BLESS").is_some();
    for dialect in Dialect::ALL {
        let input = fixture(&format!("{dialect}.in.json"));
        let parsed = parse_calls(&input, None).expect("the fixture parses");
        assert_eq!(parsed.dialect, dialect, "detected");
        assert_eq!(
            parse_calls(&input, Some(dialect)).expect("parses when forced"),
            parsed
        );
        let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["update_task_priority", "delete_everything"],
            "{dialect}"
        );
        let args = match &parsed.calls[0].arguments {
            ToolArguments::Text(text) => serde_json::from_str(text).expect("JSON text"),
            ToolArguments::Value(value) => value.clone(),
        };
        assert_eq!(args, json!({"priority": "P0"}), "{dialect}");

        let messages = render(&parsed, dialect);
        let out = fixture_path(&format!("{dialect}.out.json"));
        if bless {
            let text = serde_json::to_string_pretty(&messages).expect("JSON") + "\n";
            std::fs::write(&out, text).expect("write the golden file");
        }
        assert_eq!(
            messages,
            fixture(&format!("{dialect}.out.json")),
            "{dialect}"
        );

        // Round trip: every answer names the call it answers, as the model sent it.
        let answered = answers(dialect, &messages);
        let sent: Vec<Option<Value>> = parsed
            .origins
            .iter()
            .map(|o| o.sent_id.as_ref().and_then(SentId::to_value))
            .collect();
        let ids: Vec<Option<Value>> = answered.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(ids, sent, "{dialect}");
        if !matches!(dialect, Dialect::OpenAi | Dialect::Responses) {
            let errors: Vec<bool> = answered.iter().map(|(_, e)| *e).collect();
            assert_eq!(errors, [false, true], "{dialect}: the refusal is marked");
        }
    }
}

#[test]
fn any_input_dialect_answers_in_any_reply_format() {
    for input in Dialect::ALL {
        let parsed = parse_calls(&fixture(&format!("{input}.in.json")), None).expect("parses");
        for format in Dialect::ALL {
            let answered = answers(format, &render(&parsed, format));
            assert_eq!(answered.len(), parsed.calls.len(), "{input} → {format}");
        }
    }
}

#[test]
fn the_other_shapes_of_each_dialect() {
    let cases = [
        (
            Dialect::OpenAi,
            json!([{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]),
        ),
        (
            Dialect::OpenAi,
            json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]}}]}),
        ),
        (
            Dialect::Responses,
            json!([{"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
                   {"role": "user", "content": "hello"}]),
        ),
        (
            Dialect::Anthropic,
            json!([{"type": "text", "text": "Sure."}, {"type": "tool_use", "id": "c1", "name": "t", "input": {}}]),
        ),
        (
            Dialect::Gemini,
            json!({"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]}),
        ),
        (
            Dialect::Gemini,
            json!([{"role": "user", "parts": [{"text": "hi"}]},
                   {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "t", "args": {}}}]}]),
        ),
        (
            Dialect::LangChain,
            json!([{"name": "t", "args": {}, "id": "c1", "type": "tool_call"}]),
        ),
        (
            Dialect::LangChain,
            json!({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
                   "kwargs": {"content": "", "type": "ai", "tool_calls": [{"name": "t", "args": {}, "id": "c1", "type": "tool_call"}]}}),
        ),
        (
            Dialect::Vercel,
            json!([{"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": {}}]),
        ),
        (
            Dialect::Vercel,
            json!({"text": "", "toolCalls": [{"type": "tool-call", "toolCallId": "c1", "toolName": "t", "args": {}}]}),
        ),
        (
            Dialect::Mcp,
            json!({"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": {"name": "t"}}),
        ),
    ];
    for (dialect, document) in cases {
        let parsed =
            parse_calls(&document, None).unwrap_or_else(|e| panic!("{dialect}: {e} in {document}"));
        assert_eq!(parsed.dialect, dialect, "{document}");
        assert_eq!(parsed.calls.len(), 1, "{document}");
        assert_eq!(parsed.calls[0].name, "t");
        if dialect != Dialect::Gemini || parsed.origins[0].sent_id.is_some() {
            assert_eq!(parsed.calls[0].id, "c1", "{document}");
        }
    }
}

#[test]
fn gemini_calls_without_an_id_get_one_from_their_position() {
    let document = fixture("gemini.in.json");
    let first = parse_calls(&document, None).expect("parses");
    assert_eq!(first.calls[0].id, "gemini-call-1");
    assert_eq!(first.calls[0].id, derived_gemini_id(1));
    assert_eq!(first.origins[0].sent_id, None);
    assert_eq!(first.calls[1].id, "fc-7");
    assert_eq!(
        parse_calls(&document, None).expect("parses"),
        first,
        "stable"
    );
    // Across a list of contents, parts are numbered in order.
    let list = json!([
        {"role": "model", "parts": [{"text": "a"}, {"functionCall": {"name": "t"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "t"}}]}
    ]);
    let ids: Vec<String> = parse_calls(&list, None)
        .expect("parses")
        .calls
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["gemini-call-1", "gemini-call-2"]);
}

#[test]
fn mcp_ids_keep_their_type_in_the_answer() {
    let parsed = parse_calls(&fixture("mcp.in.json"), None).expect("parses");
    assert_eq!(parsed.calls[0].id, "1");
    let sent = parsed.origins[0].sent_id.as_ref().expect("an id");
    assert_eq!(
        (sent.json().as_ref(), sent.to_value()),
        ("1", Some(json!(1)))
    );
    assert_eq!(parsed.elements, 3, "the notification is an element too");
    assert_eq!(parsed.non_calls(), 1);
    let messages = render(&parsed, Dialect::Mcp);
    assert_eq!(messages[0]["id"], json!(1));
    assert_eq!(messages[1]["id"], json!("req-2"));
}

/// One MCP `tools/call` request whose id is `token`, written as JSON text.
fn mcp_request_text(token: &str) -> String {
    format!(
        r#"{{"jsonrpc": "2.0", "id":  {token} , "method": "tools/call", "params": {{"name": "t", "arguments": {{"n": 1e3}}}}}}"#
    )
}

/// The replies to every call of `parsed` (queued), as MCP JSON text.
fn exact_mcp_text(parsed: &ParsedCalls) -> String {
    let replies: Vec<CallReply<'_>> = parsed
        .calls
        .iter()
        .map(|call| CallReply {
            tool_call_id: &call.id,
            content: reply::QUEUED,
        })
        .collect();
    exact_reply_messages(parsed, Dialect::Mcp, &replies)
        .expect("replies render")
        .to_string()
}

/// The `id` tokens of the responses in an MCP reply's text, as written.
fn answered_tokens(text: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(text).expect("the replies are JSON");
    ids::tokens(text, &value)
        .expect("ids")
        .into_iter()
        .map(|token| token.expect("every response has an id").get().to_owned())
        .collect()
}

/// Issue 22: an id past 2^64 came back as `1.8446744073709552e+22`. Read from the
/// text, every id is answered token for token, in a request and in a batch.
#[test]
fn mcp_ids_are_answered_token_for_token() {
    let tokens = [
        "18446744073709551616000",
        "-18446744073709551616000",
        "123456789012345678901234567890123456789012345678901234567890",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "0",
        "-0",
        "7",
        "1.0",
        "1e3",
        "1E+3",
        "-2.50e-7",
        r#""req-2""#,
        r#""1""#,
        r#""\u0041b""#,
        r#""quote \" and ünïcode 🚀""#,
    ];
    for token in tokens {
        let text = mcp_request_text(token);
        let parsed = parse_calls_str(&text, None).unwrap_or_else(|e| panic!("{token}: {e}"));
        let sent = parsed.origins[0].sent_id.as_ref().expect("an id");
        assert_eq!(sent.json(), token);
        let answered = exact_mcp_text(&parsed);
        assert_eq!(answered_tokens(&answered), [token], "{answered}");
        if !token.starts_with('"') {
            assert_eq!(
                parsed.calls[0].id, token,
                "the call's id is the number as sent"
            );
        }
        // The same with the text forced as MCP, and in a batch beside a string id.
        assert_eq!(
            parse_calls_str(&text, Some(Dialect::Mcp)).expect("forced"),
            parsed
        );
        let other = if token == r#""req-2""# {
            r#""x""#
        } else {
            r#""req-2""#
        };
        let batch = format!(
            "[{}, {{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\"}}, {}]",
            mcp_request_text(token),
            mcp_request_text(other)
        );
        let parsed = parse_calls_str(&batch, None).unwrap_or_else(|e| panic!("{token}: {e}"));
        let answered = exact_mcp_text(&parsed);
        assert_eq!(answered_tokens(&answered), [token, other], "{answered}");
    }
}

/// An id a `Value` holds exactly reads and answers the same from the text and from the
/// `Value`, and writes the same text; any other is never answered altered: refused
/// when read from a `Value`, and refused as a `Value` reply.
#[test]
fn an_id_a_value_cannot_hold_is_refused_rather_than_altered() {
    for token in [
        "18446744073709551616000",
        "-18446744073709551616000",
        "1.0",
        "1e3",
        "-0",
    ] {
        let text = mcp_request_text(token);
        let document: Value = serde_json::from_str(&text).expect("JSON");
        let err = parse_calls(&document, None).expect_err(token);
        assert!(
            err.to_string()
                .contains("cannot be answered exactly as sent"),
            "{token}: {err}"
        );
        let parsed = parse_calls_str(&text, None).expect("read from the text");
        let replies = [CallReply {
            tool_call_id: &parsed.calls[0].id,
            content: reply::QUEUED,
        }];
        let err = reply_messages(&parsed, Dialect::Mcp, &replies).expect_err(token);
        assert_eq!(
            err,
            ChangesetError::InexactId {
                index: 0,
                id: token.to_owned()
            }
        );
        // Other dialects name the call by its id as a string.
        let messages = reply_messages(&parsed, Dialect::OpenAi, &replies).expect("OpenAI");
        assert_eq!(messages[0]["tool_call_id"], token);
    }
    for token in [
        "7",
        "-7",
        "18446744073709551615",
        "-9223372036854775808",
        r#""c1""#,
    ] {
        let text = mcp_request_text(token);
        let document: Value = serde_json::from_str(&text).expect("JSON");
        let from_value = parse_calls(&document, None).expect(token);
        let from_text = parse_calls_str(&text, None).expect(token);
        assert_eq!(from_value, from_text, "{token}");
        let messages = render(&from_text, Dialect::Mcp);
        assert_eq!(messages.to_string(), exact_mcp_text(&from_text), "{token}");
        assert_eq!(answered_tokens(&messages.to_string()), [token]);
    }
    assert!(matches!(
        parse_calls_str("[{\"jsonrpc\": ", None),
        Err(ChangesetError::NotJson(_))
    ));
}

/// A key given twice counts once, the last time, in the `Value` and in the token.
#[test]
fn a_repeated_id_key_counts_the_last_time() {
    let text = r#"{"jsonrpc": "2.0", "id": "first", "method": "tools/call", "params": {"name": "t"}, "id": 18446744073709551616001}"#;
    let parsed = parse_calls_str(text, None).expect("parses");
    assert_eq!(parsed.calls[0].id, "18446744073709551616001");
    assert_eq!(
        answered_tokens(&exact_mcp_text(&parsed)),
        ["18446744073709551616001"]
    );
}

#[test]
fn langchain_invalid_tool_calls_are_answered_not_dropped() {
    let parsed = parse_calls(
        &json!({"type": "ai", "content": "", "tool_calls": [],
            "invalid_tool_calls": [{"name": "t", "args": "{oops", "id": "c9", "error": "bad JSON", "type": "invalid_tool_call"}]}),
        None,
    )
    .expect("parses");
    assert_eq!(parsed.dialect, Dialect::LangChain);
    assert_eq!(
        parsed.calls[0].arguments,
        ToolArguments::Text("{oops".into())
    );
}

#[test]
fn provider_executed_calls_and_notifications_need_no_answer() {
    let parsed = parse_calls(
        &json!([
            {"type": "tool-call", "toolCallId": "w1", "toolName": "web_search", "input": {}, "providerExecuted": true},
            {"type": "tool-result", "toolCallId": "w1", "toolName": "web_search", "output": {"type": "text", "value": "…"}},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": {}}
        ]),
        None,
    )
    .expect("parses");
    assert_eq!((parsed.calls.len(), parsed.elements), (1, 3));
}

/// For each dialect: a document with an element of a type nobody documents
/// (`<name>.unknown.json`), and one that holds no call (`<name>.call-less.json`). Both refused, forced or detected, with one line naming what
/// was wrong.
#[test]
fn unknown_elements_and_call_less_documents_are_refused_in_every_dialect() {
    for dialect in Dialect::ALL {
        let document = fixture(&format!("{dialect}.unknown.json"));
        for format in [None, Some(dialect)] {
            let err = parse_calls(&document, format).expect_err("refused");
            let text = err.to_string();
            assert!(!text.contains('\n'), "one line: {text}");
            assert!(text.contains("#1"), "{dialect}: names the index: {text}");
            assert!(
                text.contains("frobnicate"),
                "{dialect}: names the type: {text}"
            );
        }
    }
    for dialect in Dialect::ALL {
        let document = fixture(&format!("{dialect}.call-less.json"));
        for format in [None, Some(dialect)] {
            let err = parse_calls(&document, format).expect_err("refused");
            assert!(
                matches!(err, ChangesetError::NoCalls { .. }),
                "{dialect} {format:?}: {err}"
            );
            assert!(!err.to_string().contains('\n'));
        }
    }
    assert!(matches!(
        parse_calls(&json!([]), None),
        Err(ChangesetError::NoCalls { .. })
    ));
    let err = parse_calls(&json!([{"type": "frobnicate"}]), None).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "element #0: unknown element type \"frobnicate\" (read as no known dialect)"
    );
}

#[test]
fn mixed_and_unanswerable_documents_are_refused() {
    // OpenAI calls and Anthropic blocks shared a list before: still read, in the
    // dialect of the first call.
    let legacy = parse_calls(
        &json!([
            {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            {"type": "text", "text": "and"},
            {"type": "tool_use", "id": "b", "name": "t", "input": {}}
        ]),
        None,
    )
    .expect("read as before");
    assert_eq!((legacy.dialect, legacy.calls.len()), (Dialect::OpenAi, 2));
    let err = parse_calls(
        &json!([
            {"type": "tool_use", "id": "a", "name": "t", "input": {}},
            {"type": "tool-call", "toolCallId": "b", "toolName": "t", "input": {}}
        ]),
        None,
    )
    .expect_err("mixed");
    assert!(matches!(
        err,
        ChangesetError::MixedDialects {
            index: 1,
            first_index: 0,
            ..
        }
    ));
    let err = parse_calls(
        &json!([{"type": "custom_tool_call", "call_id": "c", "name": "t", "input": "x"}]),
        None,
    )
    .expect_err("not a function");
    assert!(err.to_string().contains("not a function call"), "{err}");
    let err = parse_calls(
        &json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "t"}}),
        None,
    )
    .expect_err("no id to answer");
    assert!(err.to_string().contains("\"id\""), "{err}");
    let err = parse_calls(&fixture("anthropic.in.json"), Some(Dialect::Gemini))
        .expect_err("the wrong dialect forced");
    assert!(!err.to_string().contains('\n'));
    assert_eq!(
        "OpenAI".parse::<Dialect>().expect("case does not matter"),
        Dialect::OpenAi
    );
    assert!(matches!(
        "cohere".parse::<Dialect>(),
        Err(ChangesetError::UnknownFormat(_))
    ));
}

/// Elements a document may hold, and whether each is a call.
fn element_strategy() -> impl Strategy<Value = (Value, Option<bool>)> {
    let id = "[a-c]{1,2}";
    prop_oneof![
        // Calls of two dialects; `Some(true)`.
        id.prop_map(|id| (
            json!({"type": "tool_use", "id": id, "name": "t", "input": {}}),
            Some(true)
        )),
        id.prop_map(|id| (
            json!({"type": "tool-call", "toolCallId": id, "toolName": "t", "input": {}}),
            Some(true)
        )),
        // Blocks that carry no call; `Some(false)`.
        Just((json!({"type": "text", "text": "x"}), Some(false))),
        Just((json!({"type": "thinking", "thinking": "x"}), Some(false))),
        Just((json!({"type": "reasoning", "text": "x"}), Some(false))),
        // Anything else; `None`: the document may be refused.
        "[a-z_-]{1,8}".prop_map(|kind| (json!({"type": kind}), None)),
        Just((json!({"type": "tool_use", "name": "t"}), None)),
        Just((json!(7), None)),
        Just((json!({"id": "x"}), None)),
    ]
}

proptest! {
    /// Success means every element was accounted for: one call per call element, the
    /// rest known to carry none, and one answer per call in every reply format.
    #[test]
    fn success_accounts_for_every_element(
        elements in proptest::collection::vec(element_strategy(), 0..8),
        wrap in any::<bool>(),
    ) {
        let list: Vec<Value> = elements.iter().map(|(v, _)| v.clone()).collect();
        let document = if wrap { json!({"role": "assistant", "content": list}) } else { Value::Array(list) };
        if let Ok(parsed) = parse_calls(&document, None) {
            prop_assert!(!parsed.calls.is_empty());
            prop_assert_eq!(parsed.elements, elements.len());
            prop_assert_eq!(parsed.calls.len() + parsed.non_calls(), elements.len());
            let calls = elements.iter().filter(|(_, kind)| *kind == Some(true)).count();
            let no_calls = elements.iter().filter(|(_, kind)| *kind == Some(false)).count();
            // Nothing unknown was skipped: every element was a call or a known block.
            prop_assert_eq!(calls + no_calls, elements.len());
            prop_assert_eq!(parsed.calls.len(), calls);
            for (origin, call) in parsed.origins.iter().zip(&parsed.calls) {
                let sent = origin.sent_id.as_ref().and_then(SentId::to_value);
                prop_assert_eq!(sent.as_ref().and_then(Value::as_str), Some(call.id.as_str()));
            }
            for format in Dialect::ALL {
                prop_assert_eq!(answers(format, &render(&parsed, format)).len(), calls);
            }
        } else if let Err(err) = parse_calls(&document, None) {
            // Refused: no call, an unknown or broken element, a block of another
            // dialect than its calls', or a repeated id; said in one line.
            prop_assert!(!err.to_string().contains('\n'));
        }
    }
}

/// A JSON number token: an integer of any length, or with a fraction or an exponent.
fn number_token() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just(""), Just("-")],
        prop_oneof![Just("0".to_owned()), "[1-9][0-9]{0,70}"],
        prop::option::of("\\.[0-9]{1,6}"),
        prop::option::of("[eE][+-]?[0-9]{1,2}"),
    )
        .prop_map(|(sign, digits, fraction, exponent)| {
            format!(
                "{sign}{digits}{}{}",
                fraction.unwrap_or_default(),
                exponent.unwrap_or_default()
            )
        })
}

proptest! {
    /// Any number an MCP request is sent with is answered as that token, and the call
    /// is named by it; a `Value` reply exists exactly when a `Value` holds the id as
    /// sent, and then reads as the text does.
    #[test]
    fn any_number_id_is_answered_as_sent(token in number_token(), batch in any::<bool>()) {
        let text = if batch {
            format!("[{}]", mcp_request_text(&token))
        } else {
            mcp_request_text(&token)
        };
        let parsed = parse_calls_str(&text, None).expect("parses");
        prop_assert_eq!(&parsed.calls[0].id, &token);
        let answered = exact_mcp_text(&parsed);
        prop_assert_eq!(answered_tokens(&answered), [token.clone()]);

        let as_value: Value = serde_json::from_str(&token).expect("a number");
        // What a `Value` would write for it (not `as_value == token`, which would
        // compare the number with a JSON string).
        let written = as_value.to_string();
        let held = written == token;
        let replies = [CallReply { tool_call_id: &parsed.calls[0].id, content: reply::QUEUED }];
        match reply_messages(&parsed, Dialect::Mcp, &replies) {
            Ok(messages) => {
                prop_assert!(held, "{token} answered as a Value");
                prop_assert_eq!(messages.to_string(), answered);
            }
            Err(err) => {
                prop_assert!(!held || !(as_value.is_i64() || as_value.is_u64()), "{token}: {err}");
            }
        }
    }
}
