//! `assent mcp` as a process, driven by a real MCP client (rmcp) over stdio, in front
//! of the in-tree fixture server (`assent-mcp-fixture`) and of the npm
//! `@modelcontextprotocol/server-filesystem` (installed under `target/mcp-npm`; skipped
//! with a note when impossible, a failure under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use assent_domain::Uuid;
use assent_mcp::QUEUED;
use assent_store::{Store, change_sets};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn target_dir() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_assent"));
    exe.parent().expect("the profile directory").to_path_buf()
}

/// The fixture server, built beside `assent` when it is not there yet.
fn fixture() -> PathBuf {
    let path = target_dir().join("assent-mcp-fixture");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "assent-mcp", "--bin", "assent-mcp-fixture"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "the fixture builds");
    }
    path
}

fn assent(db: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_assent"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("assent runs")
}

struct Setup {
    dir: tempfile::TempDir,
    db: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = format!("sqlite://{}", dir.path().join("assent.db").display());
    let out = assent(
        &db,
        &["agent", "create", "--id", "bot", "--categories", "mcp"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Setup { dir, db }
}

async fn gateway(db: &str, extra: &[&str], upstream: &[String]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", db, "mcp", "--server", "notes", "--agent", "bot"])
        .args(extra)
        .arg("--")
        .args(upstream)
        .env_remove("RUST_LOG");
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    ().serve(transport).await.expect("the MCP handshake")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("a tool result")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The change set id in a queued call's reply.
fn set_id(reply: &str) -> Uuid {
    let start = reply.find("Change set ").expect("a change set id") + "Change set ".len();
    reply[start..start + 36].parse().expect("a uuid")
}

/// Confirms item 0 of `set` with `assent confirm`, a process that has no MCP host and
/// reaches no upstream: the decision and an execution job are recorded, and the running
/// gateway's executor makes the call; waits (at most 10 s) until `path` holds
/// `expected`, which it must then keep (the call runs once).
async fn confirm_and_see(db: &str, set: Uuid, path: &std::path::Path, expected: &str) {
    let out = assent(db, &["confirm", &set.to_string(), "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Approved"), "{said}");
    let started = std::time::Instant::now();
    while std::fs::read_to_string(path).ok().as_deref() != Some(expected) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the gateway never ran the approved call: {:?}",
            std::fs::read_to_string(path).ok()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A second run would append or write again within the gateway's next ticks.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        std::fs::read_to_string(path).ok().as_deref(),
        Some(expected),
        "the approved call ran more than once"
    );
    let jobs = assent(db, &["--json", "jobs", "--all"]);
    let jobs = String::from_utf8_lossy(&jobs.stdout);
    assert!(jobs.contains("\"applied\""), "{jobs}");
}

#[tokio::test]
async fn read_only_passes_a_write_waits_for_a_person_and_runs_once_when_confirmed() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let existing = s.dir.path().join("existing.txt");
    std::fs::write(&existing, "hello\n").expect("a file to read");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["append_note", "read_note"]);

    let read = call(&client, "read_note", json!({"path": existing})).await;
    assert_eq!(read.is_error, Some(false));
    assert_eq!(text(&read), "hello\n");

    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    assert!(reply.contains("item 0"), "{reply}");
    assert!(!note.exists(), "nothing is written before a person agrees");

    let pending = assent(&s.db, &["--json", "pending"]);
    let pending = String::from_utf8_lossy(&pending.stdout);
    assert!(pending.contains("append_note"), "{pending}");
    assert!(pending.contains("\"mcp\""), "{pending}");

    let bad = call(&client, "append_note", json!({"path": note})).await;
    assert_eq!(bad.is_error, Some(true), "{}", text(&bad));
    let unknown = client
        .peer()
        .call_tool(CallToolRequestParams::new("drop_table"))
        .await
        .expect_err("an unknown tool is an error");
    assert!(unknown.to_string().contains("drop_table"), "{unknown}");

    confirm_and_see(&s.db, set_id(&reply), &note, "one\n").await;
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_rejection_reaches_a_waiting_client_and_nothing_is_written() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &["--wait", "30"], &upstream).await;
    let db = s.db.clone();
    let rejecter = tokio::spawn(async move {
        let store = Store::open(&db).await.expect("the store");
        let set = loop {
            let mut conn = store.pool().acquire().await.expect("a connection");
            let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::default())
                .await
                .expect("pending");
            if let Some(set) = open.first() {
                break set.id;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        store.close().await;
        let set = set.to_string();
        let out = assent(&db, &["reject", &set, "0", "--reason", "not in that file"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    let result = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    rejecter.await.expect("rejected");
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("not in that file"),
        "{}",
        text(&result)
    );
    assert!(!note.exists(), "a rejected call never runs");
    client.cancel().await.expect("the client leaves");
}

#[test]
fn an_upstream_that_fails_to_start_is_one_line_and_exit_1() {
    let s = setup();
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--server",
            "x",
            "--agent",
            "bot",
            "--",
            "/nonexistent/mcp-server",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("failed to start"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// `mcp-server-filesystem` from npm, installed once under the target directory.
fn filesystem_server() -> Option<PathBuf> {
    let prefix = target_dir().join("mcp-npm");
    let bin = prefix.join("node_modules/.bin/mcp-server-filesystem");
    if bin.exists() {
        return Some(bin);
    }
    let installed = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg("@modelcontextprotocol/server-filesystem")
        .status();
    match installed {
        Ok(status) if status.success() && bin.exists() => Some(bin),
        other => {
            let why = format!("cannot install @modelcontextprotocol/server-filesystem: {other:?}");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[tokio::test]
async fn the_npm_filesystem_server_reads_at_once_and_writes_after_confirmation() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let s = setup();
    let root: &Path = s.dir.path();
    let root = root.canonicalize().expect("the root");
    std::fs::write(root.join("readme.txt"), "from disk").expect("a file to read");
    let upstream = vec![server.display().to_string(), root.display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "write_file"));
    let reader = tools
        .iter()
        .find(|t| {
            t.name.starts_with("read_")
                && t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
        })
        .map(|t| t.name.to_string());
    if let Some(reader) = reader {
        let read = call(&client, &reader, json!({"path": root.join("readme.txt")})).await;
        assert!(text(&read).contains("from disk"), "{}", text(&read));
    }
    let target = root.join("written.txt");
    let queued = call(
        &client,
        "write_file",
        json!({"path": target, "content": "hi"}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    assert!(!target.exists(), "queued, not written");
    confirm_and_see(&s.db, set_id(&reply), &target, "hi").await;
    client.cancel().await.expect("the client leaves");
}
