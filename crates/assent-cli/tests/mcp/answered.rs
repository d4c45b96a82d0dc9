//! Issue 39's "Done when": a person running `assent review` in one terminal answers,
//! with one key, a call the official TypeScript SDK client made through `assent mcp
//! --wait`, and the client has the upstream's result within a second of the key. The
//! reviewer's card and `pending --json` say how long the client still waits.

use super::{assent, fixture, proven, setup, typescript_sdk};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch, the clock `endedAt` of `mcp_client_ts.cjs` reads.
fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
}

#[test]
fn one_key_in_review_answers_the_typescript_clients_waiting_call_within_a_second() {
    let Some(modules) = typescript_sdk() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");

    // The person's terminal.
    let mut command = Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", &s.db, "review", "--as", "alice", "--no-notify"])
        .env_remove("RUST_LOG");
    let mut review =
        rexpect::session::spawn_command(command, Some(30_000)).expect("the reviewer starts");
    review
        .exp_string("Nothing waits for you now.")
        .expect("the reviewer is idle");

    // The agent's client: the official TypeScript SDK, held by `--wait 30`.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_ts.cjs");
    let plan = serde_json::json!({
        "command": env!("CARGO_BIN_EXE_assent"),
        "args": ["--db", s.db, "mcp", "--server", "notes", "--agent", "bot", "--wait", "30",
                 "--", fixture().display().to_string()],
        "calls": [{"tool": "append_note", "arguments": {"path": note, "text": "one"}}],
    });
    let client = Command::new("node")
        .arg(script)
        .arg(plan.to_string())
        .env("NODE_PATH", &modules)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");

    // How long the client still waits is on the card, or on a line of its own right
    // after it when the gateway recorded its wait after the card was drawn.
    let (mut shown, _) = review
        .exp_regex("the agent waits [0-9]+s more")
        .expect("how long the client still waits");
    if !shown.contains("[q] quit") {
        shown.push_str(&review.exp_string("[q] quit").expect("the keys"));
    }
    assert!(shown.contains("append_note"), "the call shows: {shown}");
    let pending = assent(&s.db, &["--json", "pending"]);
    let pending: Value = serde_json::from_slice(&pending.stdout).expect("pending --json");
    let until = pending[0]["waitsUntil"].as_str().expect("waitsUntil");
    let until = time::OffsetDateTime::parse(until, &time::format_description::well_known::Rfc3339)
        .expect("an RFC 3339 time");
    let left = until - time::OffsetDateTime::now_utc();
    assert!(
        left > time::Duration::seconds(10) && left <= time::Duration::seconds(30),
        "the client waits about 30 s from its call: {left}"
    );
    assert!(!note.exists(), "nothing runs before the key");

    let pressed = epoch_ms();
    review.send("y").expect("the key");
    review.flush().expect("sent");
    let out = client.wait_with_output().expect("the client finishes");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let call = &report["calls"][0];
    assert_eq!(call["isError"], false, "{report:#}");
    assert!(
        call["text"]
            .as_str()
            .is_some_and(|t| t.contains("Appended to")),
        "the upstream's result: {report:#}"
    );
    let ended = call["endedAt"].as_u64().expect("endedAt") as u128;
    let took =
        Duration::from_millis(u64::try_from(ended.saturating_sub(pressed)).unwrap_or(u64::MAX));
    eprintln!("from the key to the client's result: {took:?}");
    assert!(
        took < Duration::from_secs(1),
        "the result came {took:?} after the key"
    );
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "one\n");

    review
        .exp_string("confirmed")
        .expect("the reviewer says so");
    review.send("q").expect("q");
    review.flush().expect("sent");
    review.exp_eof().expect("the reviewer quits");
    proven(&s.db);
}
