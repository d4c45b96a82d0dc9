//! `assent mcp` as a process, driven by real MCP clients over stdio — rmcp, and the
//! official Python SDK (the `mcp` package from PyPI, result validation on, through
//! `mcp_client.py`; installed into `target/mcp-venv`) — in front of the in-tree fixture
//! server (`assent-mcp-fixture`) and of the npm `@modelcontextprotocol/server-filesystem`
//! (installed under `target/debug/mcp-npm`), and the official TypeScript SDK
//! (`@modelcontextprotocol/sdk`, under `target/debug/mcp-npm-sdk`, through
//! `mcp_client_ts.cjs`). An install that is impossible skips its tests with a note, and
//! is a failure under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use assent_domain::Uuid;
use assent_mcp::{DEFERRED_NOTE, QUEUED};
use assent_store::{Store, agents, change_sets};
use assent_tests::pypi::{self, Package};
use assent_tools::{AgentPolicy, RuleAction, ToolRule};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// `assent mcp --config` (many servers, one endpoint), Streamable HTTP upstreams and
/// the gateway served over Streamable HTTP.
#[path = "mcp/gateways.rs"]
mod gateways;

/// `assent review` answering the TypeScript SDK's waiting call with one key.
#[path = "mcp/answered.rs"]
mod answered;

fn target_dir() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_assent"));
    exe.parent().expect("the profile directory").to_path_buf()
}

/// The test server `name` of assent-mcp, built beside `assent` when it is not there yet.
fn server_bin(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "assent-mcp", "--bin", name])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "{name} builds");
    }
    path
}

/// The fixture server.
fn fixture() -> PathBuf {
    server_bin("assent-mcp-fixture")
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
    // In the words of a call (issue 53, point 18), never "an executor of … claims job".
    assert!(
        said.contains("Confirmed; the gateway runs the call on its MCP server"),
        "{said}"
    );
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
async fn trusted_read_only_passes_a_write_waits_for_a_person_and_runs_once_when_confirmed() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let existing = s.dir.path().join("existing.txt");
    std::fs::write(&existing, "hello\n").expect("a file to read");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &["--trust", "hints"], &upstream).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "append_note",
            "assent_status",
            "crash",
            "erase_note",
            "pull_rug",
            "read_note",
            "stat_note"
        ]
    );
    // Another process lists the same tools for the gateway's agent, from the catalog
    // the gateway recorded, not the journal's (the upstream's: not the gateway's own
    // `assent_status`).
    names.retain(|name| *name != assent_mcp::STATUS_TOOL);
    let listed: Value = serde_json::from_str(&succeeded(&assent(
        &s.db,
        &["tools", "--agent", "bot", "--format", "mcp"],
    )))
    .expect("JSON");
    let mut recorded: Vec<&str> = listed["tools"]
        .as_array()
        .expect("a tools/list result")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    recorded.sort_unstable();
    assert_eq!(recorded, names);

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
    // The read ran under the trusted hint, the write on a person's word: proven.
    proven(&s.db);
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
            let mut conn = store.read_connection().await.expect("a connection");
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
    npm_filesystem_server("mcp-npm", "@modelcontextprotocol/server-filesystem")
}

/// `mcp-server-filesystem` of release `version` (a release the test pins, beside the
/// newest one [`filesystem_server`] installs), installed once under the target directory.
fn filesystem_server_at(version: &str) -> Option<PathBuf> {
    npm_filesystem_server(
        &format!("mcp-npm-{version}"),
        &format!("@modelcontextprotocol/server-filesystem@{version}"),
    )
}

/// `package` installed once under the target directory's `folder`, and its
/// `mcp-server-filesystem`.
fn npm_filesystem_server(folder: &str, package: &str) -> Option<PathBuf> {
    let prefix = target_dir().join(folder);
    let bin = prefix.join("node_modules/.bin/mcp-server-filesystem");
    if bin.exists() {
        return Some(bin);
    }
    let installed = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(package)
        .status();
    match installed {
        Ok(status) if status.success() && bin.exists() => Some(bin),
        other => {
            let why = format!("cannot install {package}: {other:?}");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[tokio::test]
async fn the_npm_filesystem_server_reads_at_once_when_trusted_and_writes_after_confirmation() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let s = setup();
    let root: &Path = s.dir.path();
    let root = root.canonicalize().expect("the root");
    std::fs::write(root.join("readme.txt"), "from disk").expect("a file to read");
    let upstream = vec![server.display().to_string(), root.display().to_string()];
    let client = gateway(&s.db, &["--trust", "hints"], &upstream).await;
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

/// `show --json`'s item 0 of `set`.
fn item(db: &str, set: Uuid) -> Value {
    let out = assent(db, &["--json", "show", &set.to_string(), "0"]);
    serde_json::from_slice(&out.stdout).expect("the item as JSON")
}

/// Issue 41, item 5: a write of the npm filesystem server is read first through the
/// server's own `read_text_file`, so `pending` and `show` show its diff (the file's
/// misleading characters marked); a file changed after the diff was shown is not
/// written over: the job is retracted, the item refreshed with the diff as the file is
/// now; an unchanged file is written once. The proof holds.
#[tokio::test]
async fn a_filesystem_write_shows_its_diff_and_a_file_changed_since_is_not_written() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let s = setup();
    let root = s.dir.path().canonicalize().expect("the root");
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "one\ntw\u{202e}o\nthree\n").expect("a file");
    let upstream = vec![server.display().to_string(), root.display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let queued = call(
        &client,
        "write_file",
        json!({"path": notes, "content": "one\n2\nthree\n"}),
    )
    .await;
    let set = set_id(&text(&queued));
    let shown = item(&s.db, set);
    let before = shown["before"]
        .as_str()
        .unwrap_or_else(|| panic!("{shown:#}"));
    assert!(
        before.contains("@@ -2,1 +2,1 @@\n-tw\u{202e}o\n+2\n"),
        "{before}"
    );
    let whole = succeeded(&assent(&s.db, &["show", &set.to_string(), "0"]));
    assert!(whole.contains("+2"), "{whole}");
    assert!(
        !whole.contains('\u{202e}'),
        "the file's override is marked: {whole}"
    );
    assert!(whole.contains("\\u202e"), "{whole}");
    let pending = succeeded(&assent(&s.db, &["pending"]));
    assert!(pending.contains("(now: --- "), "{pending}");

    // The file changes after the person saw the diff: nothing is written over it.
    std::fs::write(&notes, "someone else's\n").expect("a change");
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    let started = std::time::Instant::now();
    let refreshed = loop {
        let shown = item(&s.db, set);
        if shown["staleDetail"].is_string() {
            break shown;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never found stale: {shown:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let detail = refreshed["staleDetail"].as_str().expect("a detail");
    assert!(
        detail.starts_with("target changed since proposed: sha256 was "),
        "{detail}"
    );
    let before = refreshed["before"].as_str().expect("the diff now");
    assert!(
        before.contains("-someone else's\n+one\n+2\n+three\n"),
        "{before}"
    );
    assert_eq!(
        std::fs::read_to_string(&notes).expect("the file"),
        "someone else's\n",
        "not written over"
    );
    let jobs: Value =
        serde_json::from_slice(&assent(&s.db, &["--json", "jobs", "--all"]).stdout).expect("jobs");
    assert_eq!(jobs[0]["status"], "retracted", "{jobs:#}");

    // An unchanged file is written, once.
    let again = call(
        &client,
        "write_file",
        json!({"path": notes, "content": "fresh\n"}),
    )
    .await;
    confirm_and_see(&s.db, set_id(&text(&again)), &notes, "fresh\n").await;
    client.cancel().await.expect("the client leaves");
    proven(&s.db);
}

/// The lines of `original` after the one-hunk unified `diff` (as `preview` writes it)
/// is applied: what a person who read the diff expects the file to hold.
fn after_the_diff(original: &str, diff: &str) -> Vec<String> {
    let lines: Vec<&str> = original.lines().collect();
    let hunk = diff
        .lines()
        .find(|line| line.starts_with("@@ -"))
        .unwrap_or_else(|| panic!("a hunk in {diff}"));
    let old = hunk[4..].split(' ').next().expect("-START,COUNT");
    let (start, count) = old.split_once(',').expect("START,COUNT");
    let (start, count): (usize, usize) = (
        start.parse().expect("a start"),
        count.parse().expect("a count"),
    );
    let head = if count == 0 { start } else { start - 1 };
    let mut after: Vec<String> = lines[..head].iter().map(|l| (*l).to_owned()).collect();
    after.extend(
        diff.lines()
            .skip_while(|line| !line.starts_with("@@ -"))
            .skip(1)
            .filter_map(|line| line.strip_prefix('+'))
            .map(str::to_owned),
    );
    after.extend(lines[head + count..].iter().map(|l| (*l).to_owned()));
    after
}

/// Issue 52, point 19: the diff of an `edit_file` is what the npm filesystem server
/// writes, in the newest release and in 2026.1.14 (whose `String.replace` substitutes
/// `$&` in `newText`; both call themselves 0.2.0). A `$&` shows no diff and says why
/// (the release that runs cannot be told), and the file is written as that release
/// writes it; a CRLF file edited through the server's white-space-tolerant match shows
/// the diff of what lands on disk, to the line, and says that its line endings become
/// LF.
#[tokio::test]
async fn an_edit_files_diff_is_what_the_npm_server_writes_in_either_release() {
    for (server, substitutes) in [
        (filesystem_server(), false),
        (filesystem_server_at("2026.1.14"), true),
    ] {
        let Some(server) = server else {
            continue;
        };
        let s = setup();
        let root = s.dir.path().canonicalize().expect("the root");
        let upstream = vec![server.display().to_string(), root.display().to_string()];
        let client = gateway(&s.db, &[], &upstream).await;

        let dollar = root.join("dollar.txt");
        std::fs::write(&dollar, "alpha\nbeta\n").expect("a file");
        let queued = call(
            &client,
            "edit_file",
            json!({"path": dollar, "edits": [{"oldText": "beta", "newText": "[$&]"}]}),
        )
        .await;
        let set = set_id(&text(&queued));
        let shown = item(&s.db, set);
        let before = shown["before"]
            .as_str()
            .unwrap_or_else(|| panic!("{shown:#}"));
        assert!(
            before.starts_with("(no diff shown: a newText holds `$&`"),
            "{before}"
        );
        let written = if substitutes {
            "alpha\n[beta]\n"
        } else {
            "alpha\n[$&]\n"
        };
        confirm_and_see(&s.db, set, &dollar, written).await;

        let code = root.join("code.py");
        let original = "def f():\r\n\treturn 1\r\n";
        std::fs::write(&code, original).expect("a file");
        let queued = call(
            &client,
            "edit_file",
            json!({"path": code, "edits": [
                {"oldText": "def f():\n    return 1", "newText": "def f():\nreturn 2"}]}),
        )
        .await;
        let set = set_id(&text(&queued));
        let shown = item(&s.db, set);
        let before = shown["before"]
            .as_str()
            .unwrap_or_else(|| panic!("{shown:#}"));
        assert!(before.contains("-\treturn 1\n+return 2\n"), "{before}");
        assert!(
            before.ends_with("CRLF line ending of the file becomes LF\n"),
            "{before}"
        );
        confirm_and_see(&s.db, set, &code, "def f():\nreturn 2\n").await;
        let on_disk = std::fs::read_to_string(&code).expect("the file");
        assert_eq!(
            on_disk.lines().collect::<Vec<_>>(),
            after_the_diff(original, before),
            "the file holds what the diff showed"
        );
        assert!(
            !on_disk.contains('\r'),
            "and its line endings are LF, as it said"
        );
        client.cancel().await.expect("the client leaves");
        proven(&s.db);
    }
}

/// Replaces the rules of agent `bot` (categories `mcp`) in the database.
async fn set_rules(db: &str, rules: &[(&str, RuleAction)]) {
    let mut policy = AgentPolicy::new(["mcp"]);
    for (pattern, action) in rules {
        policy = policy.with_rule(ToolRule::new(*pattern, *action).expect("a rule"));
    }
    let store = Store::open(db).await.expect("the store");
    let mut conn = store.read_connection().await.expect("a connection");
    agents::upsert(
        &mut conn,
        "bot",
        &policy,
        assent_domain::OffsetDateTime::now_utc(),
    )
    .await
    .expect("the rules are written");
    drop(conn);
    store.close().await;
}

#[tokio::test]
async fn by_default_annotations_are_shown_but_only_the_agents_rules_run_a_tool_at_once() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let read = tools
        .iter()
        .find(|t| t.name == "read_note")
        .expect("listed");
    assert_eq!(
        read.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true),
        "the annotations are passed on"
    );
    for tool in tools.iter().filter(|t| t.name != assent_mcp::STATUS_TOOL) {
        assert_eq!(tool.output_schema, None, "{} is deferred", tool.name);
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.ends_with(DEFERRED_NOTE), "{description}");
    }
    let queued = call(&client, "read_note", json!({"path": note})).await;
    assert_eq!(queued.is_error, Some(false));
    assert!(text(&queued).starts_with(QUEUED), "{}", text(&queued));

    // The operator's word: an allow rule runs the tool at once, listed as the upstream
    // lists it, its structured result passed through.
    set_rules(&s.db, &[("stat_note", RuleAction::Allow)]).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let stat = tools
        .iter()
        .find(|t| t.name == "stat_note")
        .expect("listed");
    assert!(stat.output_schema.is_some(), "{stat:?}");
    assert_eq!(
        stat.description.as_deref(),
        Some("The size of a note file.")
    );
    let result = call(&client, "stat_note", json!({"path": note})).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(
        result.structured_content,
        Some(json!({"path": note, "bytes": 6}))
    );

    // The rules change after the listing promised a structured result: the queued
    // call is answered as an error (so a client that checks results accepts it).
    set_rules(&s.db, &[("stat_note", RuleAction::Ask)]).await;
    let result = call(&client, "stat_note", json!({"path": note})).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).starts_with(QUEUED), "{}", text(&result));
    assert!(
        text(&result).contains("list the tools again"),
        "{}",
        text(&result)
    );
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let stat = tools
        .iter()
        .find(|t| t.name == "stat_note")
        .expect("listed");
    assert_eq!(stat.output_schema, None);
    client.cancel().await.expect("the client leaves");
}

/// A rule over the session's history through the gateway (issue 57): with `allow
/// stat_note` and `ask 'stat_*' --after 2/1h`, set with the commands a person types,
/// the first two calls in the hour run at once and the third is asked: the gateway's
/// calls are decided at the one decision point, their condition judged there.
#[tokio::test]
async fn a_rate_through_the_gateway_asks_from_the_third_call_in_its_window() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    for rule in [
        &["agent", "allow", "bot", "stat_note"][..],
        &["agent", "ask", "bot", "stat_*", "--after", "2/1h"],
    ] {
        succeeded(&assent(&s.db, rule));
    }
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    for n in 1..=2 {
        let ran = call(&client, "stat_note", json!({"path": note})).await;
        assert_eq!(ran.is_error, Some(false), "call {n}: {}", text(&ran));
        assert!(!text(&ran).starts_with(QUEUED), "call {n}: {}", text(&ran));
    }
    let third = call(&client, "stat_note", json!({"path": note})).await;
    assert!(text(&third).starts_with(QUEUED), "{}", text(&third));
    client.cancel().await.expect("the client leaves");
    proven(&s.db);
}

#[tokio::test]
async fn trusted_hints_run_a_read_at_once_but_not_one_also_marked_destructive() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &["--trust", "hints"], &upstream).await;

    let read = call(&client, "read_note", json!({"path": note})).await;
    assert_eq!(text(&read), "hello\n");
    let erase = call(&client, "erase_note", json!({"path": note})).await;
    assert_eq!(erase.is_error, Some(false));
    assert!(text(&erase).starts_with(QUEUED), "{}", text(&erase));
    assert!(
        note.exists(),
        "readOnlyHint with destructiveHint is deferred"
    );
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let erase = tools
        .iter()
        .find(|t| t.name == "erase_note")
        .expect("listed");
    assert!(
        erase
            .description
            .as_deref()
            .is_some_and(|d| d.ends_with(DEFERRED_NOTE)),
        "{erase:?}"
    );
    client.cancel().await.expect("the client leaves");
}

/// The Python to run `mcp_client.py` with (the official `mcp` package, 2.3 or later,
/// installed on first use into `target/mcp-venv`), or `None` (with a note) when it
/// cannot be installed outside CI. Under `CI=true` that is a failure.
fn official_python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let venv = target_dir().parent().map(|target| target.join("mcp-venv"));
    let install = || {
        let venv = venv.ok_or("no target directory")?;
        pypi::install(&Package {
            requirement: "mcp>=2.3",
            probe: "import importlib.metadata as m, mcp.client.stdio\n\
                    v = tuple(int(x) for x in m.version('mcp').split('.')[:2])\n\
                    raise SystemExit(v < (2, 3))",
            venv: &venv,
        })
    };
    pypi::required(&PYTHON, install, "the gateway's Python client tests")
}

/// Runs the official Python client (`mcp_client.py`) against the gateway
/// `assent --db DB mcp --server notes --agent bot EXTRA -- UPSTREAM`, making `calls` in
/// order; its report, after checking that no answer failed the client's validation.
async fn python_client(
    python: &Path,
    db: &str,
    extra: &[&str],
    upstream: &[String],
    calls: Value,
) -> Value {
    let mut args: Vec<String> = ["--db", db, "mcp", "--server", "notes", "--agent", "bot"]
        .iter()
        .chain(extra)
        .map(|s| (*s).to_owned())
        .collect();
    args.push("--".to_owned());
    args.extend(upstream.iter().cloned());
    let plan = json!({"command": env!("CARGO_BIN_EXE_assent"), "args": args, "calls": calls});
    run_python(python, plan).await
}

/// Runs the official Python client (`mcp_client.py`) with `plan`; its report, after
/// checking that no answer failed the client's validation.
async fn run_python(python: &Path, plan: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .arg(plan.to_string())
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finishes within two minutes")
    .expect("the Python client runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    for call in report["calls"].as_array().expect("calls") {
        assert!(
            call.get("clientError").is_none(),
            "the official client refused an answer: {report:#}"
        );
    }
    report
}

/// The listing of `name` in a Python client's report.
fn listed<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|tool| tool["name"] == name)
}

#[tokio::test]
async fn the_official_python_client_accepts_reads_queued_writes_and_denials() {
    let Some(python) = official_python() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    set_rules(&s.db, &[("erase_note", RuleAction::Deny)]).await;
    let upstream = vec![fixture().display().to_string()];
    let report = python_client(
        &python,
        &s.db,
        &["--trust", "hints"],
        &upstream,
        json!([
            {"tool": "read_note", "arguments": {"path": note}},
            {"tool": "stat_note", "arguments": {"path": note}},
            {"tool": "append_note", "arguments": {"path": note, "text": "one"}},
            {"tool": "erase_note", "arguments": {"path": note}},
        ]),
    )
    .await;
    let stat = listed(&report, "stat_note").expect("stat_note is listed");
    assert!(stat["outputSchema"].is_object(), "{report:#}");
    let append = listed(&report, "append_note").expect("append_note is listed");
    assert!(append["outputSchema"].is_null(), "{report:#}");
    assert!(
        append["description"]
            .as_str()
            .is_some_and(|d| d.ends_with(DEFERRED_NOTE)),
        "{report:#}"
    );
    assert!(
        listed(&report, "erase_note").is_none(),
        "denied, not listed"
    );
    let calls = &report["calls"];
    assert_eq!(calls[0]["text"], "hello\n", "{report:#}");
    assert_eq!(
        calls[1]["structuredContent"],
        json!({"path": note, "bytes": 6}),
        "{report:#}"
    );
    assert_eq!(calls[2]["isError"], false, "{report:#}");
    assert!(
        calls[2]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
    assert_eq!(calls[3]["isError"], true, "{report:#}");
    assert!(
        calls[3]["text"]
            .as_str()
            .is_some_and(|t| t.contains("denied")),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("hello\n")
    );
}

/// Confirms the first change set that comes up pending, then rejects the next one.
async fn confirm_then_reject(db: String) {
    let store = Store::open(&db).await.expect("the store");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let mut conn = store.read_connection().await.expect("a connection");
        let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::default())
            .await
            .expect("pending");
        drop(conn);
        if let Some(set) = open.iter().find(|set| !seen.contains(&set.id)) {
            let id = set.id.to_string();
            let out = if seen.is_empty() {
                assent(&db, &["confirm", &id, "0"])
            } else {
                assent(&db, &["reject", &id, "0", "--reason", "not that line"])
            };
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            seen.push(set.id);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    store.close().await;
}

#[tokio::test]
async fn the_official_python_client_accepts_every_answer_of_a_waited_call() {
    let Some(python) = official_python() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    let decider = tokio::spawn(confirm_then_reject(s.db.clone()));
    let report = python_client(
        &python,
        &s.db,
        &["--wait", "30"],
        &upstream,
        json!([
            {"tool": "append_note", "arguments": {"path": note, "text": "one"}},
            {"tool": "append_note", "arguments": {"path": note, "text": "two"}},
        ]),
    )
    .await;
    decider.await.expect("confirmed and rejected");
    let calls = &report["calls"];
    assert_eq!(calls[0]["isError"], false, "{report:#}");
    assert_eq!(
        calls[0]["structuredContent"],
        json!({"path": note, "bytes": 4}),
        "the upstream's own result once confirmed: {report:#}"
    );
    assert_eq!(calls[1]["isError"], true, "{report:#}");
    assert!(
        calls[1]["text"]
            .as_str()
            .is_some_and(|t| t.contains("not that line")),
        "{report:#}"
    );

    // Nobody decides within the wait: the call is answered that it is queued.
    let report = python_client(
        &python,
        &s.db,
        &["--wait", "1"],
        &upstream,
        json!([{"tool": "append_note", "arguments": {"path": note, "text": "three"}}]),
    )
    .await;
    let call = &report["calls"][0];
    assert_eq!(call["isError"], false, "{report:#}");
    assert!(
        call["text"].as_str().is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );
}

#[tokio::test]
async fn the_official_python_client_accepts_the_npm_filesystem_servers_answers() {
    let Some(python) = official_python() else {
        return;
    };
    let Some(server) = filesystem_server() else {
        return;
    };
    let s = setup();
    let root = s.dir.path().canonicalize().expect("the root");
    std::fs::write(root.join("readme.txt"), "from disk").expect("a file to read");
    let upstream = vec![server.display().to_string(), root.display().to_string()];
    let target = root.join("written.txt");
    let report = python_client(
        &python,
        &s.db,
        &["--trust", "hints", "--wait", "1"],
        &upstream,
        json!([
            {"tool": "read_text_file", "arguments": {"path": root.join("readme.txt")}},
            {"tool": "write_file", "arguments": {"path": target, "content": "hi"}},
        ]),
    )
    .await;
    let read = listed(&report, "read_text_file").expect("read_text_file is listed");
    assert!(read["outputSchema"].is_object(), "{report:#}");
    let write = listed(&report, "write_file").expect("write_file is listed");
    assert!(write["outputSchema"].is_null(), "{report:#}");
    let calls = &report["calls"];
    assert_eq!(
        calls[0]["structuredContent"]["content"], "from disk",
        "{report:#}"
    );
    assert_eq!(calls[1]["isError"], false, "{report:#}");
    assert!(
        calls[1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
    assert!(!target.exists(), "queued, not written");

    // Under the default trust the read is queued too, and still a valid answer.
    let report = python_client(
        &python,
        &s.db,
        &[],
        &upstream,
        json!([{"tool": "read_text_file", "arguments": {"path": root.join("readme.txt")}}]),
    )
    .await;
    assert!(
        listed(&report, "read_text_file").expect("listed")["outputSchema"].is_null(),
        "{report:#}"
    );
    assert!(
        report["calls"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
}

/// Waits (at most 10 s) until `path` holds `expected`.
async fn file_becomes(path: &Path, expected: &str) {
    let started = std::time::Instant::now();
    while std::fs::read_to_string(path).ok().as_deref() != Some(expected) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} never became {expected:?}: {:?}",
            path.display(),
            std::fs::read_to_string(path).ok()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `assent audit verify` holds on `db` (issue 38).
fn proven(db: &str) {
    let out = assent(db, &["audit", "verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("verified: "),
        "{stdout}"
    );
}

fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_tool_whose_definition_changes_is_asked_about_again_until_a_person_allows_it() {
    let setup = setup();
    let note = setup.dir.path().join("pinned.txt");
    let path = note.display().to_string();
    for tool in ["append_note", "pull_rug"] {
        succeeded(&assent(&setup.db, &["agent", "allow", "bot", tool]));
    }
    let upstream = [fixture().display().to_string()];
    let client = gateway(&setup.db, &[], &upstream).await;
    // Allowed, and pinned as first seen: it runs at once.
    let ran = call(&client, "append_note", json!({"path": path, "text": "one"})).await;
    assert!(!text(&ran).contains(QUEUED), "{}", text(&ran));
    file_becomes(&note, "one\n").await;

    // The server describes the tool differently under the same name, and says so.
    call(&client, "pull_rug", json!({"path": path})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = call(&client, "append_note", json!({"path": path, "text": "two"})).await;
    let reply = text(&asked);
    assert!(
        reply.contains(QUEUED),
        "the allow went with the old definition: {reply}"
    );
    let shown: Value = serde_json::from_str(&succeeded(&assent(
        &setup.db,
        &["--json", "agent", "show", "bot"],
    )))
    .expect("JSON");
    let pinned = shown["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["tool"] == "append_note"))
        .unwrap_or_else(|| panic!("the gateway's tools are shown: {shown}"));
    assert_eq!(pinned["changed"], true, "{shown}");
    assert_eq!(pinned["trust"], "none", "{shown}");
    let said = succeeded(&assent(&setup.db, &["agent", "show", "bot"]));
    assert!(said.contains("CHANGED"), "{said}");

    // Another process edits the queued item against the schema the gateway recorded:
    // an edit outside it is refused and changes nothing; a valid one runs once.
    let set = set_id(&reply).to_string();
    // The review page's views mark the item (`toolChanged`).
    let store = Store::open(&setup.db).await.expect("the database");
    let mut conn = store.read_connection().await.expect("a connection");
    let marked = assent_store::host_tools::changed_items(&mut conn, set_id(&reply))
        .await
        .expect("read");
    drop(conn);
    store.close().await;
    assert_eq!(marked, [0]);
    let bad = json!({"path": path, "text": 5}).to_string();
    let refused = assent(&setup.db, &["edit", &set, "0", "--args", &bad]);
    assert!(
        !refused.status.success(),
        "an edit outside the schema is refused"
    );
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("append_note") && why.contains("text"), "{why}");
    let good = json!({"path": path, "text": "edited"}).to_string();
    succeeded(&assent(&setup.db, &["edit", &set, "0", "--args", &good]));
    file_becomes(&note, "one\nedited\n").await;

    // A person allows it again: the new definition is accepted and runs at once.
    succeeded(&assent(
        &setup.db,
        &["agent", "allow", "bot", "append_note"],
    ));
    let ran = call(
        &client,
        "append_note",
        json!({"path": path, "text": "three"}),
    )
    .await;
    assert!(!text(&ran).contains(QUEUED), "{}", text(&ran));
    file_becomes(&note, "one\nedited\nthree\n").await;
    client.cancel().await.expect("the client leaves");

    // The pin outlives the gateway: a new one whose server is back to the old
    // definition (a change too) asks again.
    let client = gateway(&setup.db, &[], &upstream).await;
    let asked = call(
        &client,
        "append_note",
        json!({"path": path, "text": "four"}),
    )
    .await;
    assert!(text(&asked).contains(QUEUED), "{}", text(&asked));
    client.cancel().await.expect("the client leaves");
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\nedited\nthree\n")
    );
}

/// `grants suggest --agent bot --min MIN --json` on `db`.
fn suggested(db: &str, min: &str) -> Value {
    let out = assent(
        db,
        &[
            "--json", "grants", "suggest", "--agent", "bot", "--min", min,
        ],
    );
    serde_json::from_str(&succeeded(&out)).expect("JSON")
}

/// Issue 37: three confirmations of `append_note`, then its server redefines it. The
/// old confirmations are no evidence for the new definition, and applying a
/// suggestion never accepts a changed definition: nothing is written, the tool stays
/// CHANGED and its next call still waits for a person.
#[tokio::test]
async fn a_suggestion_counts_no_decision_from_before_a_redefinition_and_never_accepts_one() {
    let setup = setup();
    let note = setup.dir.path().join("evidence.txt");
    let path = note.display().to_string();
    // The rug is pulled by a call that runs at once.
    succeeded(&assent(&setup.db, &["agent", "allow", "bot", "pull_rug"]));
    let upstream = [fixture().display().to_string()];
    let client = gateway(&setup.db, &[], &upstream).await;
    let mut written = String::new();
    for line in ["one", "two", "three"] {
        let asked = call(&client, "append_note", json!({"path": path, "text": line})).await;
        let reply = text(&asked);
        assert!(reply.contains(QUEUED), "{reply}");
        written.push_str(line);
        written.push('\n');
        confirm_and_see(&setup.db, set_id(&reply), &note, &written).await;
    }
    let before = suggested(&setup.db, "3");
    assert_eq!(before[0]["tool"], "append_note", "{before}");
    assert_eq!(before[0]["evidence"]["confirmedUnchanged"], 3, "{before}");

    // The server describes the tool anew under the same name.
    call(&client, "pull_rug", json!({"path": path})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = call(
        &client,
        "append_note",
        json!({"path": path, "text": "four"}),
    )
    .await;
    let reply = text(&asked);
    assert!(reply.contains(QUEUED), "{reply}");
    assert_eq!(
        suggested(&setup.db, "1"),
        json!([]),
        "the old definition's confirmations do not count"
    );

    // One confirmation of the new definition counts, but the suggestion never
    // accepts the changed definition.
    written.push_str("four\n");
    confirm_and_see(&setup.db, set_id(&reply), &note, &written).await;
    let after = suggested(&setup.db, "1");
    let s = &after[0];
    assert_eq!(
        (
            &s["evidence"]["confirmedUnchanged"],
            &s["evidence"]["beforeDefinition"]
        ),
        (&json!(1), &json!(3)),
        "{after}"
    );
    assert_eq!(s["replaces"]["definitionChanged"], true, "{after}");
    let id = s["id"].as_str().expect("an id");
    let refused = assent(
        &setup.db,
        &[
            "grants", "suggest", "--agent", "bot", "--min", "1", "--apply", id,
        ],
    );
    assert_eq!(refused.status.code(), Some(3));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("definition of append_note changed since a person accepted it"),
        "{why}"
    );
    let shown: Value = serde_json::from_str(&succeeded(&assent(
        &setup.db,
        &["--json", "agent", "show", "bot"],
    )))
    .expect("JSON");
    let tool = shown["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["tool"] == "append_note"))
        .unwrap_or_else(|| panic!("the gateway's tools are shown: {shown}"));
    assert_eq!(tool["changed"], true, "still CHANGED: {shown}");
    assert_eq!(
        shown["rules"],
        json!([{"tool": "pull_rug", "action": "allow"}]),
        "no rule was written: {shown}"
    );
    let asked = call(
        &client,
        "append_note",
        json!({"path": path, "text": "five"}),
    )
    .await;
    assert!(text(&asked).contains(QUEUED), "{}", text(&asked));
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn idempotent_retries_take_the_operators_word_not_the_servers() {
    let setup = setup();
    let path = setup.dir.path().join("retried.txt").display().to_string();
    let upstream = [fixture().display().to_string()];
    let effect_of = |reply: String| {
        let db = setup.db.clone();
        async move {
            let store = Store::open(&db).await.expect("the database");
            let mut conn = store.read_connection().await.expect("a connection");
            let external = assent_store::jobs::external_item(&mut conn, set_id(&reply), 0)
                .await
                .expect("read")
                .expect("an external item");
            drop(conn);
            store.close().await;
            external.idempotent
        }
    };
    // Unknown agents and blank tools are refused and change nothing.
    assert_eq!(
        assent(&setup.db, &["agent", "idempotent", "ghost", "append_note"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        assent(&setup.db, &["agent", "idempotent", "bot", " "])
            .status
            .code(),
        Some(2)
    );

    let client = gateway(&setup.db, &[], &upstream).await;
    let before = call(&client, "append_note", json!({"path": path, "text": "a"})).await;
    assert!(!effect_of(text(&before)).await, "no word, no retry");

    let said = succeeded(&assent(
        &setup.db,
        &["agent", "idempotent", "bot", "append_note"],
    ));
    assert!(said.contains("idempotent"), "{said}");
    let again = succeeded(&assent(
        &setup.db,
        &["agent", "idempotent", "bot", "append_note"],
    ));
    assert!(again.contains("nothing changed"), "{again}");
    let shown: Value = serde_json::from_str(&succeeded(&assent(
        &setup.db,
        &["--json", "agent", "show", "bot"],
    )))
    .expect("JSON");
    assert_eq!(shown["idempotentTools"], json!(["append_note"]), "{shown}");
    // The running gateway takes the word from its next call on.
    let after = call(&client, "append_note", json!({"path": path, "text": "b"})).await;
    assert!(effect_of(text(&after)).await, "the operator's word counts");

    succeeded(&assent(
        &setup.db,
        &["agent", "idempotent", "bot", "append_note", "--off"],
    ));
    let taken_back = call(&client, "append_note", json!({"path": path, "text": "c"})).await;
    assert!(!effect_of(text(&taken_back)).await, "taken back");
    client.cancel().await.expect("the client leaves");
}

// Issue 24: the gateway under faults.

/// The misbehaving server (`assent-mcp-faulty`).
fn faulty() -> PathBuf {
    server_bin("assent-mcp-faulty")
}

/// `assent mcp --server SERVER --agent bot EXTRA -- UPSTREAM` with an rmcp client.
async fn gateway_of(
    db: &str,
    server: &str,
    extra: &[&str],
    upstream: &[String],
) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", db, "mcp", "--server", server, "--agent", "bot"])
        .args(extra)
        .arg("--")
        .args(upstream)
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    ().serve(transport).await.expect("the MCP handshake")
}

/// The job of item 0 of `set`, as `assent --json jobs --all` shows it.
fn job_of(db: &str, set: Uuid) -> Option<Value> {
    let listed: Value =
        serde_json::from_str(&succeeded(&assent(db, &["--json", "jobs", "--all"]))).expect("JSON");
    listed
        .as_array()
        .expect("a list")
        .iter()
        .find(|job| job["changeSetId"] == set.to_string())
        .cloned()
}

/// Waits (at most 10 s) until the job of item 0 of `set` has `status`; returns it.
async fn job_becomes(db: &str, set: Uuid, status: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let job = job_of(db, set);
        if let Some(job) = job.as_ref().filter(|job| job["status"] == status) {
            return job.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the job never became {status}: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn servers_whose_names_differ_only_in_punctuation_never_run_each_others_calls() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    // Confirmed after its chat ended, the call runs in a later session only when marked.
    succeeded(&assent(
        &s.db,
        &["agent", "run-after-disconnect", "bot", "append_note"],
    ));
    let dashed = gateway_of(&s.db, "my-files", &[], &upstream).await;
    let queued = call(&dashed, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    dashed.cancel().await.expect("the client leaves");

    // Only the other server's gateway runs while the person confirms: it must leave the
    // call alone (it used to claim it as its own, as both were host `mcp_my_files`).
    let underscored = gateway_of(&s.db, "my_files", &[], &upstream).await;
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!note.exists(), "another server's gateway ran the call");
    assert_eq!(job_of(&s.db, set).expect("a job")["status"], "approved");
    underscored.cancel().await.expect("the client leaves");

    let dashed = gateway_of(&s.db, "my-files", &[], &upstream).await;
    file_becomes(&note, "one\n").await;
    job_becomes(&s.db, set, "applied").await;
    dashed.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_server_name_whose_host_another_server_used_is_refused_at_start() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway_of(&s.db, "my-files", &[], &upstream).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    client.cancel().await.expect("the client leaves");
    // As an older release recorded it: `my-files` under host `mcp_my_files`.
    let store = Store::open(&s.db).await.expect("the store");
    let mut conn = store.read_connection().await.expect("a connection");
    let legacy = assent_store::jobs::ExternalItem {
        host: "mcp_my_files".to_owned(),
        idempotent: false,
    };
    assent_store::jobs::mark_external(&mut conn, set, 0, &legacy)
        .await
        .expect("marked");
    drop(conn);
    store.close().await;

    let refused = |db: &str| {
        let out = assent(
            db,
            &["mcp", "--server", "my_files", "--agent", "bot", "--"]
                .into_iter()
                .chain([upstream[0].as_str()])
                .collect::<Vec<_>>(),
        );
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("\"my-files\""), "{stderr}");
        assert!(stderr.contains("mcp_my_files"), "{stderr}");
        assert!(out.stdout.is_empty());
    };
    refused(&s.db); // a pending item
    // Its chat ended: confirmed only because such calls may run later (issue 53, point 4).
    succeeded(&assent(
        &s.db,
        &["agent", "run-after-disconnect", "bot", "append_note"],
    ));
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    refused(&s.db); // its job
}

#[tokio::test]
async fn the_operation_id_reaches_the_upstream_in_meta() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let meta = s.dir.path().join("note.txt.meta");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    confirm_and_see(&s.db, set, &note, "one\n").await;
    let store = Store::open(&s.db).await.expect("the store");
    let mut conn = store.read_connection().await.expect("a connection");
    let job = assent_store::jobs::for_item(&mut conn, set, 0)
        .await
        .expect("read")
        .expect("a job");
    drop(conn);
    store.close().await;
    let sent = std::fs::read_to_string(&meta).expect("the fixture saw the call");
    assert_eq!(sent, format!("{}\n", job.operation_id.as_str()));

    // An immediate call carries its own.
    succeeded(&assent(&s.db, &["agent", "allow", "bot", "append_note"]));
    let ran = call(&client, "append_note", json!({"path": note, "text": "two"})).await;
    assert_eq!(ran.is_error, Some(false), "{}", text(&ran));
    let sent = std::fs::read_to_string(&meta).expect("the fixture saw the call");
    let lines: Vec<&str> = sent.lines().collect();
    assert_eq!(lines.len(), 2, "{sent}");
    assert!(lines[1] != "-" && lines[1] != lines[0], "{sent}");
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn an_upstream_that_dies_after_the_effect_leaves_the_call_in_doubt_never_run_again() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let dying = vec![faulty().display().to_string(), "die".to_owned()];
    let client = gateway(&s.db, &[], &dying).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    file_becomes(&note, "one\n").await;
    let job = job_becomes(&s.db, set, "inDoubt").await;
    assert!(
        job["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("may have taken effect")),
        "{job}"
    );
    drop(client);

    // The next gateway, in front of a healthy server, leaves it to a person.
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n"),
        "the call ran again"
    );
    assert_eq!(job_of(&s.db, set).expect("a job")["status"], "inDoubt");
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_call_that_outlives_the_call_timeout_is_in_doubt_or_an_error() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let hanging = vec![faulty().display().to_string(), "hang".to_owned()];
    let client = gateway(&s.db, &["--call-timeout", "1"], &hanging).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    let job = job_becomes(&s.db, set, "inDoubt").await;
    assert!(
        job["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("timeout")),
        "{job}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );

    // An immediate call is answered with an error once the timeout runs out.
    succeeded(&assent(&s.db, &["agent", "allow", "bot", "append_note"]));
    let started = std::time::Instant::now();
    let ran = call(&client, "append_note", json!({"path": note, "text": "two"})).await;
    assert_eq!(ran.is_error, Some(true), "{}", text(&ran));
    assert!(started.elapsed() < Duration::from_secs(10));
    client.cancel().await.expect("the client leaves");
}

#[test]
fn an_upstream_that_never_answers_initialize_is_one_line_and_exit_1_within_the_start_timeout() {
    let s = setup();
    let mute = faulty().display().to_string();
    let started = std::time::Instant::now();
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--server",
            "x",
            "--agent",
            "bot",
            "--start-timeout",
            "2",
            "--",
            &mute,
            "mute",
        ],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--start-timeout"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[tokio::test]
async fn an_idempotent_call_whose_upstream_dies_is_retried_not_left_in_doubt() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    succeeded(&assent(
        &s.db,
        &["agent", "idempotent", "bot", "append_note"],
    ));
    let dying = vec![faulty().display().to_string(), "die".to_owned()];
    let client = gateway(&s.db, &[], &dying).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    file_becomes(&note, "one\n").await;
    let job = job_becomes(&s.db, set, "approved").await;
    assert_eq!(job["attempts"], 1, "{job}");
    drop(client);

    // By the operator's word running it again is harmless: the next gateway does.
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    file_becomes(&note, "one\none\n").await;
    job_becomes(&s.db, set, "applied").await;
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_waiting_client_hears_that_its_confirmed_call_is_in_doubt() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let hanging = vec![faulty().display().to_string(), "hang".to_owned()];
    let client = gateway(&s.db, &["--wait", "30", "--call-timeout", "1"], &hanging).await;
    let decider = tokio::spawn(confirm_then_reject(s.db.clone()));
    let started = std::time::Instant::now();
    let answer = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    assert_eq!(answer.is_error, Some(true), "{}", text(&answer));
    assert!(text(&answer).contains("in doubt"), "{}", text(&answer));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );
    decider.abort();
    client.cancel().await.expect("the client leaves");
}

/// Runs `assent ARGS` on `db` with `stdin`, and requires success.
fn assent_with_input(db: &str, args: &[&str], stdin: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("assent runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("written");
    succeeded(&child.wait_with_output().expect("it ends"))
}

#[tokio::test]
async fn while_an_immediate_call_hangs_other_processes_wake_confirm_and_serve() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    succeeded(&assent(&s.db, &["agent", "allow", "bot", "append_note"]));
    let hanging = vec![faulty().display().to_string(), "hang".to_owned()];
    let client = gateway(&s.db, &["--call-timeout", "30"], &hanging).await;
    let peer = client.peer().clone();
    let path = note.display().to_string();
    let hung = tokio::spawn(async move {
        let Value::Object(args) = json!({"path": path, "text": "one"}) else {
            unreachable!()
        };
        peer.call_tool(CallToolRequestParams::new("append_note").with_arguments(args))
            .await
    });
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&note).ok().as_deref() != Some("one\n") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the call reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!hung.is_finished(), "the upstream never answers");

    // Meanwhile another process writes: an agent, a task, a wake and a confirmation,
    // each well within SQLite's 10 s busy timeout (they failed with "database is
    // locked" while the call held the wake's transaction).
    let busy = std::time::Instant::now();
    succeeded(&assent(
        &s.db,
        &["agent", "create", "--id", "triage", "--categories", "work"],
    ));
    let task: Value = serde_json::from_str(&succeeded(&assent(
        &s.db,
        &[
            "--json",
            "task",
            "create",
            "--title",
            "Meanwhile",
            "--category",
            "work",
        ],
    )))
    .expect("JSON");
    let task = task["id"].as_str().expect("a task id").to_owned();
    let calls = r#"[{"id":"call_1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}}]"#;
    let woke: Value = serde_json::from_str(&assent_with_input(
        &s.db,
        &["--json", "wake", "--agent", "triage", "--task", &task],
        calls,
    ))
    .expect("JSON");
    let set = woke["changeSetId"].as_str().expect("queued").to_owned();
    succeeded(&assent(&s.db, &["confirm", &set, "0"]));
    assert!(
        busy.elapsed() < Duration::from_secs(8),
        "{:?}",
        busy.elapsed()
    );
    assert!(!hung.is_finished(), "the call still hangs");
    hung.abort();
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_dead_upstream_is_started_again_and_a_call_after_the_restart_works() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a file to read");
    for tool in ["read_note", "crash"] {
        succeeded(&assent(&s.db, &["agent", "allow", "bot", tool]));
    }
    let upstream = [fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let read = call(&client, "read_note", json!({"path": note})).await;
    assert_eq!(text(&read), "hello\n");

    // The server dies mid-call: the call is answered with an error, the gateway stays.
    let crashed = call(&client, "crash", json!({"path": note})).await;
    assert_eq!(crashed.is_error, Some(true), "{}", text(&crashed));
    // It is started again (after 1 s) and serves the next call.
    let started = std::time::Instant::now();
    loop {
        let again = call(&client, "read_note", json!({"path": note})).await;
        if again.is_error != Some(true) {
            assert_eq!(text(&again), "hello\n");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "never restarted: {}",
            text(&again)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.cancel().await.expect("the client leaves");
}

/// A gateway whose process id is known, so a test can kill it.
async fn killable_gateway(
    db: &str,
    extra: &[&str],
    upstream: &[String],
) -> (RunningService<RoleClient, ()>, u32) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", db, "mcp", "--server", "notes", "--agent", "bot"])
        .args(extra)
        .arg("--")
        .args(upstream)
        .env_remove("RUST_LOG");
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    let pid = transport.id().expect("a process id");
    (().serve(transport).await.expect("the MCP handshake"), pid)
}

#[tokio::test]
async fn a_gateway_killed_while_a_job_runs_never_runs_it_twice() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let hanging = vec![faulty().display().to_string(), "hang".to_owned()];
    let (client, pid) = killable_gateway(&s.db, &["--call-timeout", "2"], &hanging).await;
    let queued = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let set = set_id(&text(&queued));
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    // The job runs: the effect happened, the answer never comes. Kill the gateway now.
    file_becomes(&note, "one\n").await;
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    drop(client);

    // A new gateway, in front of a healthy server, finds the job's lease run out: in
    // doubt, for a person; the call is never made again.
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let job = job_becomes(&s.db, set, "inDoubt").await;
    assert!(
        job["lastError"].as_str().is_some_and(|e| !e.is_empty()),
        "{job}"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n"),
        "the call ran again"
    );
    client.cancel().await.expect("the client leaves");
    proven(&s.db);
}

#[tokio::test]
async fn a_clients_cancellation_ends_an_immediate_call_and_reaches_the_upstream() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let s = setup();
    let note = s.dir.path().join("note.txt");
    succeeded(&assent(&s.db, &["agent", "allow", "bot", "append_note"]));
    let hanging = vec![faulty().display().to_string(), "hang".to_owned()];
    // The call deadline is long: only the cancellation can end the call soon.
    let client = gateway(&s.db, &["--call-timeout", "60"], &hanging).await;
    let Value::Object(args) = json!({"path": note, "text": "one"}) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("append_note").with_arguments(args),
    ));
    let handle = client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("sent");
    file_becomes(&note, "one\n").await;
    handle
        .cancel(Some("the user pressed stop".to_owned()))
        .await
        .expect("cancelled");
    let cancelled = s.dir.path().join("note.txt.cancelled");
    let started = std::time::Instant::now();
    while !cancelled.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the upstream never heard of the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.expect("the client leaves");
}

#[test]
fn the_upstreams_stderr_goes_to_the_gateways_log_with_the_servers_name() {
    let s = setup();
    let noisy = faulty().display().to_string();
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--server",
            "loud-one",
            "--agent",
            "bot",
            "--start-timeout",
            "2",
            "--",
            &noisy,
            "noisy",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let forwarded = stderr
        .lines()
        .find(|line| line.contains("listening for nobody"))
        .unwrap_or_else(|| panic!("the server's line is logged: {stderr}"));
    assert!(forwarded.contains("loud-one"), "{forwarded}");
    assert!(
        forwarded.contains("INFO") && !forwarded.contains("WARN"),
        "a server's stderr is information, not a warning: {forwarded}"
    );
}

#[tokio::test]
async fn a_down_upstreams_error_names_the_server_once() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a file to read");
    for tool in ["read_note", "crash"] {
        succeeded(&assent(&s.db, &["agent", "allow", "bot", tool]));
    }
    let upstream = [fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let crashed = call(&client, "crash", json!({"path": note})).await;
    assert_eq!(crashed.is_error, Some(true), "{}", text(&crashed));
    // Within the second before it is started again, the server is down.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let down = call(&client, "read_note", json!({"path": note})).await;
    assert_eq!(down.is_error, Some(true), "{}", text(&down));
    assert_eq!(
        text(&down),
        "Error: the upstream server \"notes\" was not reachable for read_note (nothing was \
         sent): its connection is closed."
    );
    client.cancel().await.expect("the client leaves");
}

/// The gateway for agent `agent` (not `bot`) in front of `upstream`, with an rmcp client.
async fn gateway_for_agent(
    db: &str,
    agent: &str,
    upstream: &[String],
) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args([
            "--db", db, "mcp", "--server", "notes", "--agent", agent, "--",
        ])
        .args(upstream)
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    ().serve(transport).await.expect("the MCP handshake")
}

#[tokio::test]
async fn assent_status_tells_the_model_what_became_of_its_own_queued_calls_only() {
    let Some(python) = official_python() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    // Another agent's call on a server of the same name: its id is unknown to `bot`.
    succeeded(&assent(
        &s.db,
        &["agent", "create", "--id", "other", "--categories", "mcp"],
    ));
    let other = gateway_for_agent(&s.db, "other", &upstream).await;
    let queued = call(&other, "append_note", json!({"path": note, "text": "x"})).await;
    let others = set_id(&text(&queued)).to_string();
    other.cancel().await.expect("the other client leaves");
    let unknown = Uuid::new_v4().to_string();

    let assent_bin = env!("CARGO_BIN_EXE_assent");
    let status = |id: &str| json!({"tool": "assent_status", "arguments": {"changeSetId": id}});
    let report = python_client(
        &python,
        &s.db,
        &[],
        &upstream,
        json!([
            {"tool": "append_note", "arguments": {"path": note, "text": "one"}},
            status("{changeSetId}"),
            {"run": [assent_bin, "--db", &s.db, "confirm", "{changeSetId}", "0"]},
            {"tool": "assent_status", "arguments": {"changeSetId": "{changeSetId}"},
             "until": {"run": "applied"}},
            {"tool": "append_note", "arguments": {"path": note, "text": "two"}},
            {"run": [assent_bin, "--db", &s.db, "reject", "{changeSetId}", "0",
                     "--reason", "not twice"]},
            status("{changeSetId}"),
            status(&others),
            status(&unknown),
            {"tool": "assent_status", "arguments": {"changeSetId": "not-an-id"}},
            {"tool": "assent_status", "arguments": {}},
        ]),
    )
    .await;
    let listed_status = listed(&report, "assent_status").expect("assent_status is listed");
    assert_eq!(
        listed_status["annotations"]["readOnlyHint"], true,
        "{report:#}"
    );
    let calls = &report["calls"];
    let receipt = calls[0]["text"].as_str().expect("a receipt");
    let first = calls[0]["meta"]["assent/changeSetId"]
        .as_str()
        .expect("the receipt's change set id");
    assert!(
        receipt.contains(&format!(
            "call assent_status with {{\"changeSetId\": \"{first}\"}}"
        )),
        "the receipt names the status tool: {receipt}"
    );
    assert_eq!(calls[1]["isError"], false, "{report:#}");
    assert_eq!(
        calls[1]["structuredContent"]["status"], "pending",
        "{report:#}"
    );
    assert!(
        calls[1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Pending")),
        "{report:#}"
    );
    assert_eq!(calls[2]["exit"], 0, "{report:#}");
    assert_eq!(
        calls[3]["structuredContent"]["status"], "confirmed",
        "{report:#}"
    );
    assert_eq!(
        calls[3]["structuredContent"]["run"], "applied",
        "{report:#}"
    );
    assert!(
        calls[3]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Result:")),
        "the upstream's result text: {report:#}"
    );
    assert_eq!(calls[5]["exit"], 0, "{report:#}");
    assert_eq!(
        calls[6]["structuredContent"]["status"], "rejected",
        "{report:#}"
    );
    assert_eq!(
        calls[6]["structuredContent"]["reason"], "not twice",
        "{report:#}"
    );
    assert!(
        calls[6]["text"]
            .as_str()
            .is_some_and(|t| t.contains("not twice")),
        "{report:#}"
    );
    // Another agent's set answers exactly as one that does not exist.
    assert_eq!(calls[7]["isError"], true, "{report:#}");
    assert_eq!(
        calls[7]["text"],
        format!("No call of this agent has change set id {others}"),
        "{report:#}"
    );
    assert_eq!(
        calls[8]["text"],
        format!("No call of this agent has change set id {unknown}"),
        "{report:#}"
    );
    assert!(calls[7]["structuredContent"].is_null(), "{report:#}");
    for bad in [&calls[9], &calls[10]] {
        assert_eq!(bad["isError"], true, "{report:#}");
        assert!(
            bad["text"]
                .as_str()
                .is_some_and(|t| t.contains("changeSetId")),
            "{report:#}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );
}

/// Waits (at most 10 s) for the first pending change set on `db`; its id.
async fn first_pending(db: &str) -> Uuid {
    let store = Store::open(db).await.expect("the store");
    let started = std::time::Instant::now();
    let id = loop {
        let mut conn = store.read_connection().await.expect("a connection");
        let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::default())
            .await
            .expect("pending");
        drop(conn);
        if let Some(set) = open.first() {
            break set.id;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no call was queued"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    store.close().await;
    id
}

/// Waits (at most 30 s: a loaded CI machine runs many gateways beside it) until item 0
/// of `set` is withdrawn because the client stopped waiting, and checks that a person
/// can no longer confirm it.
async fn withdrawn_for_the_client(db: &str, set: Uuid) {
    let store = Store::open(db).await.expect("the store");
    let started = std::time::Instant::now();
    loop {
        let mut conn = store.read_connection().await.expect("a connection");
        let status = change_sets::load(&mut conn, set)
            .await
            .expect("a read")
            .expect("the set")
            .items[0]
            .status;
        if status == assent_domain::ChangeItemStatus::Retracted {
            let history = assent_store::decisions::for_change_set(&mut conn, set)
                .await
                .expect("decisions");
            let last = history.last().expect("a decision");
            assert_eq!(last.verdict, assent_domain::Verdict::Retracted);
            assert_eq!(last.reason.as_deref(), Some(assent_mcp::STOPPED_WAITING));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the abandoned call is still {status:?}"
        );
        drop(conn);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
    let late = assent(db, &["confirm", &set.to_string(), "0"]);
    assert!(
        !late.status.success(),
        "a withdrawn call cannot be confirmed"
    );
}

/// Sends `append_note` without waiting for its answer; the request's handle.
async fn send_append(
    client: &RunningService<RoleClient, ()>,
    note: &Path,
) -> rmcp::service::RequestHandle<RoleClient> {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let Value::Object(args) = json!({"path": note, "text": "one"}) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("append_note").with_arguments(args),
    ));
    client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("sent")
}

#[tokio::test]
async fn a_held_call_the_client_cancels_is_withdrawn_and_never_runs() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &["--wait", "30"], &upstream).await;
    let handle = send_append(&client, &note).await;
    let set = first_pending(&s.db).await;
    handle
        .cancel(Some("the user pressed stop".to_owned()))
        .await
        .expect("cancelled");
    withdrawn_for_the_client(&s.db, set).await;
    assert!(!note.exists(), "the withdrawn call never ran");
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_held_call_is_withdrawn_when_the_client_closes_stdio_and_a_receipt_is_not() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    // Answered with a receipt (no --wait): the model can follow it, it stays pending.
    let client = gateway(&s.db, &[], &upstream).await;
    let receipt = call(
        &client,
        "append_note",
        json!({"path": note, "text": "kept"}),
    )
    .await;
    let kept = set_id(&text(&receipt));
    client.cancel().await.expect("the client leaves");

    let client = gateway(&s.db, &["--wait", "30"], &upstream).await;
    let _handle = send_append(&client, &note).await;
    let started = std::time::Instant::now();
    let held = loop {
        let pending = succeeded(&assent(&s.db, &["--json", "pending"]));
        let ids: Vec<Value> = serde_json::from_str::<Value>(&pending)
            .expect("JSON")
            .as_array()
            .expect("sets")
            .iter()
            .map(|set| set["id"].clone())
            .collect();
        if let Some(other) = ids.iter().find(|id| **id != json!(kept.to_string())) {
            break other
                .as_str()
                .expect("an id")
                .parse::<Uuid>()
                .expect("a uuid");
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the held call was never queued"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The client closes the gateway's stdin (and, the MCP stdio shutdown, sends SIGTERM
    // if it does not exit soon): the held call is withdrawn before the process ends.
    client.cancel().await.expect("the client leaves");
    withdrawn_for_the_client(&s.db, held).await;
    assert!(!note.exists(), "the withdrawn call never ran");
    let still = succeeded(&assent(&s.db, &["--json", "pending"]));
    assert!(
        still.contains(&kept.to_string()),
        "the receipt's call stays: {still}"
    );
}

#[tokio::test]
async fn a_call_confirmed_after_its_chat_ended_runs_in_no_later_session_unless_marked() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    // A receipt, then the chat ends; a person confirms the call afterwards: refused at
    // the confirmation, saying why and how to let such calls run (issue 53, point 4),
    // and the call withdrawn, so no job waits for a session that will never come.
    let client = gateway(&s.db, &[], &upstream).await;
    let receipt = call(&client, "append_note", json!({"path": note, "text": "one"})).await;
    let first = set_id(&text(&receipt));
    client.cancel().await.expect("the chat ends");
    let refused = assent(&s.db, &["confirm", &first.to_string(), "0"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the session that asked for it has ended")
            && stderr.contains("assent agent run-after-disconnect bot append_note"),
        "{stderr}"
    );
    let shown: Value = serde_json::from_str(&succeeded(&assent(
        &s.db,
        &["--json", "show", &first.to_string(), "0"],
    )))
    .expect("JSON");
    assert_eq!(shown["status"], "retracted", "{shown:#}");
    let client = gateway(&s.db, &[], &upstream).await;
    assert!(!note.exists(), "the call of an ended chat never ran");

    // Marked for the agent (by a pattern, as rules name tools), such a call runs in a
    // later session; a name that can match nothing is refused.
    let blank = assent(&s.db, &["agent", "run-after-disconnect", "bot", " "]);
    assert_eq!(blank.status.code(), Some(2));
    let marked = succeeded(&assent(
        &s.db,
        &["agent", "run-after-disconnect", "bot", "append_*"],
    ));
    assert!(marked.contains("append_*"), "{marked}");
    let receipt = call(&client, "append_note", json!({"path": note, "text": "two"})).await;
    let second = set_id(&text(&receipt));
    client.cancel().await.expect("the chat ends");
    succeeded(&assent(&s.db, &["confirm", &second.to_string(), "0"]));
    let client = gateway(&s.db, &[], &upstream).await;
    job_becomes(&s.db, second, "applied").await;
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("two\n")
    );
    client.cancel().await.expect("the client leaves");

    // Another agent may not be marked where it does not exist: one line, exit 1.
    let out = assent(
        &s.db,
        &["agent", "run-after-disconnect", "ghost", "append_note"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no agent \"ghost\" on this database"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_waiting_model_is_told_that_a_person_changed_its_arguments() {
    let Some(python) = official_python() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    let edited = json!({"path": note, "text": "edited"});
    let db = s.db.clone();
    let editor = tokio::spawn({
        let edited = edited.to_string();
        async move {
            let set = first_pending(&db).await.to_string();
            succeeded(&assent(&db, &["edit", &set, "0", "--args", &edited]));
        }
    });
    let report = python_client(
        &python,
        &s.db,
        &["--wait", "30"],
        &upstream,
        json!([{"tool": "append_note", "arguments": {"path": note, "text": "one"}}]),
    )
    .await;
    editor.await.expect("edited");
    let answer = &report["calls"][0];
    assert_eq!(answer["isError"], false, "{report:#}");
    let said = answer["text"].as_str().expect("text");
    assert!(
        said.starts_with(
            "A person changed the arguments before it ran: text: \"one\" → \"edited\"\n"
        ),
        "{said}"
    );
    assert_eq!(
        answer["meta"][assent_mcp::EDITED_META],
        edited,
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("edited\n")
    );
}

#[test]
fn the_upstream_may_be_given_as_command_and_args_and_an_unknown_agents_hint_names_the_db() {
    let s = setup();
    let noisy = faulty().display().to_string();
    // `--command CMD --arg A` instead of `-- CMD A` (for launchers that eat `--`): the
    // argument reaches the server, which prints and never answers.
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--server",
            "loud-one",
            "--agent",
            "bot",
            "--start-timeout",
            "2",
            "--command",
            &noisy,
            "--arg",
            "noisy",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listening for nobody"), "{stderr}");
    // Both forms at once is a usage error.
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--server",
            "x",
            "--agent",
            "bot",
            "--command",
            &noisy,
            "--",
            &noisy,
        ],
    );
    assert_eq!(out.status.code(), Some(2));

    let fixture = fixture().display().to_string();
    let out = assent(
        &s.db,
        &[
            "mcp", "--server", "notes", "--agent", "ghost", "--", &fixture,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "no agent \"ghost\" on this database (create it with `assent --db {} agent create --id ghost --categories mcp`)",
            s.db
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn read_only_tools_are_allowed_once_knowingly_and_then_run_without_a_person() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    let fixture = fixture().display().to_string();
    let start = || {
        assent(
            &s.db,
            &["mcp", "--server", "notes", "--agent", "bot", "--", &fixture],
        )
    };
    // The first start (the client leaves before the handshake) points to the one-time
    // allow, naming the tools the server marks read-only and not destructive.
    let first = start();
    let said = String::from_utf8_lossy(&first.stderr);
    let pointer = said
        .lines()
        .find(|line| line.contains("assent agent allow bot --read-only-tools"))
        .unwrap_or_else(|| panic!("the first start points to the allow: {said}"));
    assert!(
        pointer.contains("read_note") && pointer.contains("stat_note"),
        "{pointer}"
    );
    assert!(!pointer.contains("erase_note"), "destructive: {pointer}");
    assert!(!pointer.contains("append_note"), "not read-only: {pointer}");
    // No terminal and no --yes: nothing is allowed.
    let refused = assent(&s.db, &["agent", "allow", "bot", "--read-only-tools"]);
    assert_eq!(refused.status.code(), Some(2));
    let allowed = succeeded(&assent(
        &s.db,
        &["agent", "allow", "bot", "--read-only-tools", "--yes"],
    ));
    assert!(
        allowed.contains("read_note") && allowed.contains("stat_note"),
        "{allowed}"
    );
    // Read-only and destructive (erase_note) is not among them.
    assert!(!allowed.contains("erase_note"), "{allowed}");
    let second = start();
    assert!(
        !String::from_utf8_lossy(&second.stderr).contains("--read-only-tools"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let client = gateway(&s.db, &[], std::slice::from_ref(&fixture)).await;
    let read = call(&client, "read_note", json!({"path": note})).await;
    assert_eq!(text(&read), "hello\n", "runs without a person");
    let erase = call(&client, "erase_note", json!({"path": note})).await;
    assert!(text(&erase).starts_with(QUEUED), "{}", text(&erase));
    client.cancel().await.expect("the client leaves");
    assert!(note.exists());
    // Ask and deny take no --read-only-tools.
    let out = assent(&s.db, &["agent", "deny", "bot", "--read-only-tools"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The `node_modules` of the official TypeScript SDK (`@modelcontextprotocol/sdk` from
/// npm, installed once under the target directory), or `None` (with a note) when it
/// cannot be installed outside CI. Under `CI=true` that is a failure.
fn typescript_sdk() -> Option<PathBuf> {
    let prefix = target_dir().join("mcp-npm-sdk");
    let modules = prefix.join("node_modules");
    if modules
        .join("@modelcontextprotocol/sdk/package.json")
        .exists()
    {
        return Some(modules);
    }
    let installed = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg("@modelcontextprotocol/sdk")
        .status();
    match installed {
        Ok(status) if status.success() => Some(modules),
        other => {
            let why = format!("cannot install @modelcontextprotocol/sdk: {other:?}");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[tokio::test]
async fn the_typescript_sdks_request_timeout_withdraws_the_held_call() {
    let Some(modules) = typescript_sdk() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = fixture().display().to_string();
    let pending = tokio::spawn(first_pending_of(s.db.clone()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_ts.cjs");
    let plan = json!({
        "command": env!("CARGO_BIN_EXE_assent"),
        "args": ["--db", s.db, "mcp", "--server", "notes", "--agent", "bot", "--wait", "30",
                 "--", upstream],
        "calls": [
            // The SDK gives up after 2 s (its fixed 60 s, shortened) and says so.
            {"tool": "append_note", "arguments": {"path": note, "text": "one"}, "timeoutMs": 2000},
        ],
    });
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("node")
            .arg(script)
            .arg(plan.to_string())
            .env("NODE_PATH", &modules)
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the TypeScript client finishes")
    .expect("node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let tools = report["tools"].to_string();
    assert!(tools.contains("assent_status"), "{report:#}");
    assert_eq!(
        report["calls"][0]["code"], -32001,
        "a request timeout: {report:#}"
    );
    let set = pending.await.expect("a set was queued");
    withdrawn_for_the_client(&s.db, set).await;
    assert!(!note.exists(), "the abandoned call never ran");
}

/// [`first_pending`] on a task of its own.
async fn first_pending_of(db: String) -> Uuid {
    first_pending(&db).await
}

/// Runs the official Python client against `assent mcp --ask-in-client` with one
/// `append_note` call; `elicit` is how its user answers a form (`None`: a client
/// without the elicitation capability).
async fn asked_in_client(
    python: &Path,
    db: &str,
    note: &Path,
    text: &str,
    elicit: Option<Value>,
) -> Value {
    let args: Vec<String> = [
        "--db",
        db,
        "mcp",
        "--server",
        "notes",
        "--agent",
        "bot",
        "--ask-in-client",
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([fixture().display().to_string()])
    .collect();
    let mut plan = json!({
        "command": env!("CARGO_BIN_EXE_assent"),
        "args": args,
        "calls": [{"tool": "append_note", "arguments": {"path": note, "text": text}}],
    });
    if let Some(elicit) = elicit {
        plan["elicit"] = elicit;
    }
    run_python(python, plan).await
}

#[tokio::test]
async fn ask_in_client_asks_the_clients_user_where_it_can_and_records_the_client_not_a_person() {
    let Some(python) = official_python() else {
        return;
    };
    let s = setup();
    let note = s.dir.path().join("note.txt");

    // Approved in the client: the call runs, and the model gets the upstream's result.
    let report = asked_in_client(
        &python,
        &s.db,
        &note,
        "one",
        Some(json!({"action": "accept", "content": {"decision": "approve"}})),
    )
    .await;
    let call = &report["calls"][0];
    assert_eq!(call["isError"], false, "{report:#}");
    assert_eq!(
        call["structuredContent"],
        json!({"path": note, "bytes": 4}),
        "{report:#}"
    );
    let form = &report["elicited"][0];
    let message = form["message"].as_str().expect("a message");
    assert!(
        message.contains("append_note") && message.contains("\"one\""),
        "the form shows the tool and its arguments: {message}"
    );
    assert!(
        form["requestedSchema"].to_string().contains("approve"),
        "{report:#}"
    );

    // Declined in the client: a rejection the model reads; nothing runs.
    let report = asked_in_client(
        &python,
        &s.db,
        &note,
        "two",
        Some(json!({"action": "decline"})),
    )
    .await;
    let call = &report["calls"][0];
    assert_eq!(call["isError"], true, "{report:#}");
    assert!(
        call["text"]
            .as_str()
            .is_some_and(|t| t.contains("declined in the client")),
        "{report:#}"
    );

    // A client without the capability: queued as today, nothing asked.
    let report = asked_in_client(&python, &s.db, &note, "three", None).await;
    let call = &report["calls"][0];
    assert!(
        call["text"].as_str().is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
    assert_eq!(report["elicited"], json!([]), "{report:#}");

    // A tool that needs two people: never asked in the client (its answer would count
    // as one person at most), queued, and the model told why.
    let out = assent(
        &s.db,
        &["agent", "ask", "bot", "append_note", "--approvals", "2"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = asked_in_client(
        &python,
        &s.db,
        &note,
        "four",
        Some(json!({"action": "accept", "content": {"decision": "approve"}})),
    )
    .await;
    assert_eq!(report["elicited"], json!([]), "{report:#}");
    let text = report["calls"][0]["text"].as_str().expect("a text");
    assert!(text.starts_with(QUEUED), "{report:#}");
    assert!(text.contains("needs 2 people's approval"), "{report:#}");
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n"),
        "only the call approved in the client ran"
    );

    // The answers are the client's, not a person's, and the proof holds.
    let store = Store::open(&s.db).await.expect("the store");
    let by_client: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM decisions WHERE decided_by = 'mcp-client:mcp'")
            .fetch_one(
                store
                    .read_connection()
                    .await
                    .expect("a read connection")
                    .connection(),
            )
            .await
            .expect("counted");
    store.close().await;
    assert_eq!(
        by_client, 2,
        "the approval and the decline are the client's"
    );
    let verified = assent(&s.db, &["audit", "verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}

/// The client configuration README shows (its `assent mcp` arguments, with `--db` in
/// front), the npm filesystem server installed at `server` for its `npx -y …` and
/// `root` for its folder.
fn readme_gateway_args(db: &str, server: &Path, root: &Path) -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README");
    let block = readme
        .split("```json\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains("\"mcpServers\"") && block.contains("--wait"))
        .expect("README's client configuration");
    let config: Value = serde_json::from_str(block).expect("README's block is JSON");
    let args: Vec<String> = config["mcpServers"]["files"]["args"]
        .as_array()
        .expect("its args")
        .iter()
        .map(|arg| arg.as_str().expect("a string").to_owned())
        .collect();
    let upstream = args.iter().position(|arg| arg == "--").expect("`--`");
    assert_eq!(
        args[upstream + 1..],
        [
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/home/me/notes"
        ],
        "README's upstream"
    );
    let mut run = vec!["--db".to_owned(), db.to_owned()];
    run.extend_from_slice(&args[..=upstream]);
    run.push(server.display().to_string());
    run.push(root.display().to_string());
    run
}

/// Runs the TypeScript client over `plan` (see `mcp_client_ts.cjs`) and returns its report.
async fn typescript_client(modules: &Path, plan: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_ts.cjs");
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new("node")
            .arg(script)
            .arg(plan.to_string())
            .env("NODE_PATH", modules)
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the TypeScript client finishes")
    .expect("node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// Issue 41's "Done when", as a new user meets it: README's configuration under the
/// official TypeScript SDK, in front of the npm filesystem server. After the one-time
/// `assent agent allow desktop --read-only-tools --yes`, the model reads with no person;
/// a write waits, shows its diff in `assent pending`, is confirmed with an edit and the
/// model is told so; a second write is abandoned by the client (its request timeout)
/// and never runs, even when confirmed later; a third returns a receipt, and
/// `assent_status` reports its outcome once the person decided. The proof holds.
#[tokio::test]
async fn readmes_configuration_under_the_typescript_sdk_from_read_to_receipt() {
    let (Some(modules), Some(server)) = (typescript_sdk(), filesystem_server()) else {
        return;
    };
    let s = setup();
    succeeded(&assent(
        &s.db,
        &["agent", "create", "--id", "desktop", "--categories", "mcp"],
    ));
    let root = s.dir.path().canonicalize().expect("the root");
    std::fs::write(root.join("readme.txt"), "from disk\n").expect("a file to read");
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "one\ntwo\n").expect("a file to write");
    let abandoned = root.join("abandoned.txt");
    let third = root.join("third.txt");
    let args = readme_gateway_args(&s.db, &server, &root);
    let command = env!("CARGO_BIN_EXE_assent");

    // The first start records the catalog; the person trusts its read-only tools once.
    let listed = typescript_client(
        &modules,
        &json!({"command": command, "args": args, "calls": []}),
    )
    .await;
    assert!(
        listed["tools"].to_string().contains("read_text_file"),
        "{listed:#}"
    );
    succeeded(&assent(
        &s.db,
        &["agent", "allow", "desktop", "--read-only-tools", "--yes"],
    ));

    let db = s.db.clone();
    let edit = json!({"path": notes, "content": "one\nTWO\n"}).to_string();
    let person = tokio::spawn(async move {
        // The first write waits, its diff shown; the person edits it.
        let first = first_pending(&db).await;
        let pending = succeeded(&assent(&db, &["pending"]));
        assert!(pending.contains("(now: --- "), "{pending}");
        let before = item(&db, first)["before"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(before.contains("-two\n+2\n"), "{before}");
        succeeded(&assent(
            &db,
            &["edit", &first.to_string(), "0", "--args", &edit],
        ));
        // The second is abandoned by the client: withdrawn, and confirming it later fails.
        let second = first_pending(&db).await;
        assert_ne!(second, first);
        withdrawn_for_the_client(&db, second).await;
        let late = assent(&db, &["confirm", &second.to_string(), "0"]);
        assert_eq!(
            late.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&late.stderr)
        );
        // The third is answered with a receipt after --wait; then the person confirms.
        let third = first_pending(&db).await;
        assert!(![first, second].contains(&third));
        tokio::time::sleep(Duration::from_secs(52)).await;
        succeeded(&assent(&db, &["confirm", &third.to_string(), "0"]));
    });
    let report = typescript_client(
        &modules,
        &json!({"command": command, "args": args, "calls": [
            {"tool": "read_text_file", "arguments": {"path": root.join("readme.txt")}},
            {"tool": "write_file", "arguments": {"path": notes, "content": "one\n2\n"}},
            {"tool": "write_file", "arguments": {"path": abandoned, "content": "no"}, "timeoutMs": 2000},
            {"tool": "write_file", "arguments": {"path": third, "content": "three"}},
            {"statusOf": 3, "timeoutMs": 30000},
        ]}),
    )
    .await;
    person.await.expect("the person's part holds");
    let calls = &report["calls"];
    assert_eq!(calls[0]["isError"], false, "{report:#}");
    assert!(
        calls[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("from disk"),
        "{report:#}"
    );
    let edited = calls[1]["text"].as_str().unwrap_or_default();
    assert!(
        edited.starts_with("A person changed the arguments before it ran: content: "),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&notes).expect("notes"),
        "one\nTWO\n"
    );
    assert_eq!(calls[2]["code"], -32001, "{report:#}");
    assert!(!abandoned.exists(), "the abandoned write never ran");
    assert!(
        calls[3]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with(QUEUED),
        "{report:#}"
    );
    assert_eq!(calls[4]["structured"]["status"], "confirmed", "{report:#}");
    assert_eq!(calls[4]["structured"]["run"], "applied", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(&third).expect("the third file"),
        "three"
    );
    proven(&s.db);
}

/// Waits (at most 10 s) until every gateway session on `db` is recorded as ended: its
/// gateway withdrew (or kept) the calls its client still waited on before that.
async fn sessions_ended(db: &str) {
    let store = Store::open(db).await.expect("the store");
    let started = std::time::Instant::now();
    loop {
        let mut conn = store.read_connection().await.expect("a connection");
        let open: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM mcp_sessions WHERE ended_at IS NULL")
                .fetch_one(&mut *conn)
                .await
                .expect("sessions");
        drop(conn);
        if open == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a session never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
}

/// Issue 53, point 4: a call of a tool marked run-after-disconnect that its client
/// abandoned while it waited (stdio closed) was withdrawn like any other; it stays for
/// the person, and once confirmed a later session's gateway runs it.
#[tokio::test]
async fn an_abandoned_call_of_a_tool_marked_run_after_disconnect_stays_and_runs_once_confirmed() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let upstream = vec![fixture().display().to_string()];
    succeeded(&assent(
        &s.db,
        &["agent", "run-after-disconnect", "bot", "append_note"],
    ));
    let client = gateway(&s.db, &["--wait", "30"], &upstream).await;
    let _handle = send_append(&client, &note).await;
    let set = first_pending(&s.db).await;
    client.cancel().await.expect("the client leaves");
    sessions_ended(&s.db).await;
    let pending = succeeded(&assent(&s.db, &["--json", "pending"]));
    assert!(pending.contains(&set.to_string()), "kept: {pending}");
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    let client = gateway(&s.db, &[], &upstream).await;
    job_becomes(&s.db, set, "applied").await;
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );
    client.cancel().await.expect("the client leaves");
}

/// Issue 57: a gateway refusal keeps its words and quotes where the deciding rule came
/// from; an `audit` rule runs a call at once, its audit record marked `audited` and
/// listed by `assent audit digest`, and `assent why --audit` names the rule.
#[tokio::test]
async fn a_gateway_refusal_quotes_its_rules_origin_and_an_audit_rule_runs_and_is_listed() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    for args in [
        ["agent", "deny", "bot", "erase_note"],
        ["agent", "audit", "bot", "stat_note"],
    ] {
        let out = assent(&s.db, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let Value::Object(args) = json!({"path": note}) else {
        panic!("an object")
    };
    let denied = client
        .peer()
        .call_tool(CallToolRequestParams::new("erase_note".to_owned()).with_arguments(args))
        .await;
    let said = match &denied {
        Ok(result) => text(result),
        Err(error) => error.to_string(),
    };
    assert!(
        said.contains("Tool erase_note is denied by policy"),
        "{said}"
    );
    assert!(
        said.contains("Decided by rule deny erase_note (a command, set by "),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("hello\n")
    );

    let ran = call(&client, "stat_note", json!({"path": note})).await;
    assert_eq!(ran.is_error, Some(false), "{}", text(&ran));
    client.cancel().await.expect("the client leaves");

    let digest: Value =
        serde_json::from_str(&succeeded(&assent(&s.db, &["--json", "audit", "digest"])))
            .expect("JSON");
    let calls = digest["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 1, "{digest}");
    assert_eq!(calls[0]["toolName"], "stat_note", "{digest}");
    let operation = calls[0]["operationId"].as_str().expect("an operation id");
    let why: Value = serde_json::from_str(&succeeded(&assent(
        &s.db,
        &["--json", "why", "--audit", operation],
    )))
    .expect("JSON");
    assert_eq!(why["decision"], "audit", "{why}");
    assert_eq!(why["decidedBy"]["rule"]["source"], "command", "{why}");
    proven(&s.db);
}

/// Issue 57, point 2: a call the gateway refuses is on the record with the rule that
/// refused it and where the rule came from, and `why --audit` names them.
#[tokio::test]
async fn a_gateway_refusal_is_recorded_with_its_rule_and_why_names_it() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    std::fs::write(&note, "hello\n").expect("a note");
    succeeded(&assent(&s.db, &["agent", "deny", "bot", "stat_note"]));
    let upstream = vec![fixture().display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let refused = call(&client, "stat_note", json!({"path": note})).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("Decided by rule deny stat_note (a command"),
        "{}",
        text(&refused)
    );
    client.cancel().await.expect("the client leaves");

    let trail: Value =
        serde_json::from_str(&succeeded(&assent(&s.db, &["--json", "audit"]))).expect("JSON");
    let denied = trail
        .as_array()
        .expect("records")
        .iter()
        .rfind(|r| r["toolName"] == "stat_note" && r["kind"] == "policyDenied")
        .cloned()
        .unwrap_or_else(|| panic!("a refusal on the record: {trail}"));
    let rule = &denied["decidedBy"]["rule"];
    assert_eq!(rule["pattern"], "stat_note", "{denied}");
    assert_eq!(rule["action"], "deny", "{denied}");
    assert_eq!(rule["source"], "command", "{denied}");
    let operation = denied["operationId"].as_str().expect("an operation id");
    let why: Value = serde_json::from_str(&succeeded(&assent(
        &s.db,
        &["--json", "why", "--audit", operation],
    )))
    .expect("JSON");
    assert_eq!(why["decision"], "deny", "{why}");
    assert_eq!(why["decidedBy"], denied["decidedBy"], "{why}");
    let said = succeeded(&assent(&s.db, &["why", "--audit", operation]));
    assert!(
        said.contains("decided by rule deny stat_note (a command"),
        "{said}"
    );
    proven(&s.db);
}
