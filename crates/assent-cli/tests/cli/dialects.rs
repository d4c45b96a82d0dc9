//! `assent wake` in the MCP dialect: each request id comes back in `messages` token for
//! token, also one past 64 bits or written `1e3`, through `--format mcp` and the
//! dialect read from the calls' shape alike; text output is unchanged.

use super::{Cli, assert_fails, code};
use serde_json::Value;

/// MCP requests whose ids a `serde_json::Value` cannot hold as sent.
const EXACT_IDS: &str = r#"[
  {"jsonrpc": "2.0", "id": 18446744073709551616000, "method": "tools/call", "params": {"name": "update_task_priority", "arguments": {"priority": "P0"}}},
  {"jsonrpc": "2.0", "id": "req-\u0041", "method": "tools/call", "params": {"name": "set_task_language", "arguments": {"languageCode": "en"}}},
  {"jsonrpc": "2.0", "id": 1e3, "method": "tools/call", "params": {"name": "delete_everything", "arguments": {}}}
]"#;

#[test]
fn mcp_request_ids_are_echoed_token_for_token() {
    let cli = Cli::new();
    cli.agent_and_task();
    for format in [&[][..], &["--format", "mcp"][..]] {
        let task = cli.json(
            &["task", "create", "--title", "exact", "--category", "work"],
            "",
        );
        let task = task["id"].as_str().expect("task id");
        let mut args = vec!["--json", "wake", "--agent", "a", "--task", task];
        args.extend_from_slice(format);
        let out = cli.run_with(&args, EXACT_IDS);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 0, "{format:?}: {stderr}");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        for id in [
            r#""id": 18446744073709551616000,"#,
            r#""id": "req-\u0041","#,
            r#""id": 1e3,"#,
        ] {
            assert!(text.contains(id), "{format:?}: {id} in {text}");
        }
        assert!(!text.contains("e+22"), "{format:?}: {text}");
        let wake: Value = serde_json::from_str(&text).expect("JSON on stdout");
        assert!(wake["changeSetId"].is_string(), "{format:?}: queued");
        assert_eq!(wake["responses"].as_array().map(Vec::len), Some(3));
        assert_eq!(wake["messages"][1]["id"], "req-A");
        assert_eq!(wake["messages"][2]["result"]["isError"], true);
    }
    // Without --json, the same calls print as text.
    let task = cli.json(
        &["task", "create", "--title", "text", "--category", "work"],
        "",
    );
    let task = task["id"].as_str().expect("task id");
    let out = cli.run_with(&["wake", "--agent", "a", "--task", task], EXACT_IDS);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("18446744073709551616000"), "{shown}");
    assert!(!shown.trim_start().starts_with('{'), "{shown}");
}

#[test]
fn input_that_is_not_json_is_refused_as_before() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = [
        "wake",
        "--agent",
        "a",
        "--task",
        task.as_str(),
        "--format",
        "mcp",
    ];
    for input in ["{not json", "[1e3", "\u{0}"] {
        assert_fails(
            &cli.run_with(&wake, input),
            1,
            "tool calls in stdin are not valid JSON: ",
        );
    }
}
