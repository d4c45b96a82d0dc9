//! The upstream client against the in-tree fixture server as a real child process: its
//! tools and annotations arrive, a read-only call answers, and a tool error is permanent.
//! (Having an integration test also makes `cargo test` build the fixture binary, which
//! the CLI's gateway tests start as their upstream.)

use assent_mcp::{Upstream, UpstreamError, result_text};
use serde_json::json;

#[tokio::test]
async fn the_fixture_lists_its_tools_and_answers_a_read() {
    let fixture = env!("CARGO_BIN_EXE_assent-mcp-fixture");
    let upstream = Upstream::spawn(fixture, &[])
        .await
        .expect("the fixture starts");
    let mut tools: Vec<(String, Option<bool>, Option<bool>, bool)> = upstream
        .tools()
        .iter()
        .map(|t| {
            let hints = t.annotations.as_ref();
            (
                t.name.to_string(),
                hints.and_then(|a| a.read_only_hint),
                hints.and_then(|a| a.destructive_hint),
                t.output_schema.is_some(),
            )
        })
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            ("append_note".to_owned(), Some(false), None, true),
            ("crash".to_owned(), Some(true), None, false),
            ("erase_note".to_owned(), Some(true), Some(true), false),
            ("pull_rug".to_owned(), Some(true), None, false),
            ("read_note".to_owned(), Some(true), None, false),
            ("stat_note".to_owned(), Some(true), None, true),
        ]
    );

    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("note.txt");
    std::fs::write(&path, "hello\n").expect("a note");
    let read = upstream
        .call("read_note", &json!({"path": path}))
        .await
        .expect("a read answers");
    assert_eq!(result_text(&read), "hello\n");
    let stat = upstream
        .call("stat_note", &json!({"path": path}))
        .await
        .expect("a stat answers");
    assert_eq!(
        stat.structured_content,
        Some(json!({"path": path, "bytes": 6}))
    );

    let missing = upstream
        .call("read_note", &json!({"path": dir.path().join("absent.txt")}))
        .await;
    match missing {
        Ok(result) => assert_eq!(result.is_error, Some(true), "{result:?}"),
        Err(error) => assert!(matches!(error, UpstreamError::Permanent(_)), "{error}"),
    }
}
