//! The `assent` binary end to end: the scripted contract (flags, `--json` shapes, exit
//! codes, one-line errors) on a fresh database per test, with the clock fixed; `guide`:
//! every `sh runnable` block of `docs/guide/` runs as written; eight
//! processes over one database, on every backend of the conformance suite; `peer`:
//! `assent sync --peer` against a real `assent serve` server in the test process;
//! `contract`: no `--json` output loses a field of the previous release; `review`:
//! `pending` and `show` hide no argument; `reviewer`: `assent review` driven through a
//! pseudo-terminal, one key per decision; `code_review`: the same with coding agents'
//! calls (every line of a file shown, its text edited, "yes, for this session"); `slack`: connecting the Slack app and mapping its
//! users; `private_files`: the default database and its
//! folder are their user's alone; `set_prefixes`: a set named by the start of
//! its id; `stale`: a target changed since the proposal (exit 4), and undo; `trust`:
//! expiring rules, grant suggestions, backtests and shadow rules; `hold_sync`: a held
//! confirmation synced to another device is held there too; `doors`: the same rule,
//! quorum and hold changes over the API and on the command line leave the same
//! settings and the same next wake.

#[path = "cli/agent_rules.rs"]
mod agent_rules;
#[path = "cli/clients.rs"]
mod clients;
#[path = "cli/code_review.rs"]
mod code_review;
#[path = "cli/consent.rs"]
mod consent;
#[path = "cli/contract.rs"]
mod contract;
#[path = "cli/dialects.rs"]
mod dialects;
#[path = "cli/doctor.rs"]
mod doctor;
#[path = "cli/doors.rs"]
mod doors;
#[path = "cli/guide.rs"]
mod guide;
#[path = "cli/hold_sync.rs"]
mod hold_sync;
#[path = "cli/hooks.rs"]
mod hooks;
#[path = "cli/jobs.rs"]
mod jobs;
#[path = "cli/notify.rs"]
mod notify;
#[path = "cli/otel.rs"]
mod otel;
#[path = "cli/outcomes.rs"]
mod outcomes;
#[path = "cli/peer.rs"]
mod peer;
#[path = "cli/policy_file.rs"]
mod policy_file;
#[path = "cli/private_files.rs"]
mod private_files;
#[path = "cli/rejections.rs"]
mod rejections;
#[path = "cli/review.rs"]
mod review;
#[path = "cli/reviewer.rs"]
mod reviewer;
#[path = "cli/sessions.rs"]
mod sessions;
#[path = "cli/set_prefixes.rs"]
mod set_prefixes;
#[path = "cli/slack.rs"]
mod slack;
#[path = "cli/stale.rs"]
mod stale;
#[path = "cli/target_from.rs"]
mod target_from;
#[path = "cli/telegram.rs"]
mod telegram;
#[path = "cli/trust.rs"]
mod trust;
#[path = "cli/webhooks.rs"]
mod webhooks;
#[path = "cli/why.rs"]
mod why;

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const NOW: &str = "2026-03-02T09:00:00Z";

/// `assent serve` on a free loopback port over a [`Cli`]'s database; killed when dropped.
struct Served {
    child: std::process::Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `assent serve` over `cli`'s database with admin token `token`, once it listens.
fn serve(cli: &Cli, token: &str) -> Served {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &cli.db(), "serve", "--addr"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--token", token])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("assent serve starts");
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "assent serve listens"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Served {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// A temporary database and a way to run `assent` against it.
struct Cli {
    dir: tempfile::TempDir,
    db: String,
    /// The `--now` of every command.
    now: String,
}

impl Cli {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = format!("sqlite://{}/t.db", dir.path().display());
        Self {
            dir,
            db,
            now: NOW.to_owned(),
        }
    }

    /// A fresh database on `backend`.
    async fn on(backend: &assent_tests::TestBackend) -> Self {
        let (db, dir) = backend.fresh_database().await;
        Self {
            dir,
            db,
            now: NOW.to_owned(),
        }
    }

    /// The same, its commands' clock fixed at the current time instead of [`NOW`]: for
    /// a device that syncs with a server on the real clock (an import refuses times
    /// more than a day ahead of the importer's clock).
    fn at_the_current_time(mut self) -> Self {
        self.now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .expect("the current time as RFC 3339");
        self
    }

    fn db(&self) -> String {
        self.db.clone()
    }

    /// Runs `assent --db <db> --now <now> args...` with `stdin`.
    fn run_with(&self, args: &[&str], stdin: &str) -> Output {
        self.run_in_env(args, stdin, &[])
    }

    /// Runs `assent --db <db> --now <now> args...` with `stdin` and the environment
    /// variables `env` (and no `ASSENT_PEER_TOKEN` unless `env` sets it).
    fn run_in_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
            .args(["--db", &self.db(), "--now", &self.now])
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("ASSENT_PEER_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("assent starts");
        let written = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes());
        // assent stops reading at its input limit, or never reads (usage errors).
        if let Err(error) = written {
            assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
        }
        child.wait_with_output().expect("assent runs")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, "")
    }

    /// Runs a command that must succeed with JSON on stdout.
    fn json(&self, args: &[&str], stdin: &str) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.run_with(&all, stdin);
        assert_eq!(
            code(&out),
            0,
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON on stdout")
    }

    /// An agent `a` allowed `work`, and a `work` task; returns the task id.
    fn agent_and_task(&self) -> String {
        assert_eq!(
            code(&self.run(&["agent", "create", "--id", "a", "--categories", "work"])),
            0
        );
        let task = self.json(
            &[
                "task",
                "create",
                "--title",
                "T",
                "--category",
                "work",
                "--priority",
                "P2",
            ],
            "",
        );
        task["id"].as_str().expect("task id").to_owned()
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

/// Exit `expected` with exactly one `error: ...` line on stderr and nothing on stdout.
fn assert_fails(out: &Output, expected: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(out), expected, "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{stderr:?} should mention {needle:?}"
    );
    assert!(out.stdout.is_empty());
}

const CALLS: &str = r#"[{"id":"call_1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}},
  {"id":"call_2","type":"function","function":{"name":"set_task_language","arguments":"{\"languageCode\":\"en\"}"}}]"#;

#[test]
fn wake_review_and_exit_codes() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], CALLS);
    let set = wake["changeSetId"]
        .as_str()
        .expect("a set was queued")
        .to_owned();
    let ids: Vec<&str> = wake["responses"]
        .as_array()
        .expect("responses")
        .iter()
        .map(|r| r["toolCallId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["call_1", "call_2"]);
    let mut keys: Vec<&str> = wake
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["changeSetId", "messages", "responses"],
        "responses as before, and the replies as OpenAI tool messages"
    );
    assert_eq!(wake["messages"][0]["tool_call_id"], "call_1");

    let pending = cli.json(&["pending", "--task", &task], "");
    let item = &pending[0]["items"][0];
    assert_eq!(pending[0]["id"], set.as_str());
    assert_eq!(item["toolName"], "update_task_priority");
    assert_eq!(item["before"], "P2");

    let confirmed = cli.json(&["confirm", &set, "0"], "");
    assert_eq!(confirmed["decision"]["verdict"], "confirmed");
    assert!(confirmed["message"].is_string());
    assert_fails(&cli.run(&["confirm", &set, "0"]), 3, "already confirmed");
    assert_fails(&cli.run(&["reject", &set, "5"]), 1, "has no item 5");
    assert_fails(
        &cli.run(&["confirm", "not-a-uuid", "0"]),
        2,
        "invalid change set id",
    );

    let history = cli.run(&["history", "--agent", "a", "--task", &task]);
    assert!(String::from_utf8_lossy(&history.stdout).contains("## Recent User Decisions"));
    assert_eq!(
        cli.json(&["history", "--agent", "nobody"], ""),
        serde_json::json!({"history": null})
    );

    let shown = cli.json(&["task", "show", &task], "");
    assert_eq!(
        (shown["priority"].as_str(), shown["language"].as_str()),
        (Some("P0"), Some("en"))
    );
}

#[test]
fn bad_input_changes_nothing() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let outbox_before = cli.json(&["outbox"], "");
    let wake = ["wake", "--agent", "a", "--task", task.as_str()];
    assert_fails(&cli.run_with(&wake, "{not json"), 1, "not valid JSON");
    assert_fails(&cli.run_with(&wake, r#"{"calls": []}"#), 1, "tool calls");
    assert_fails(
        &cli.run_with(&wake, r#"[{"type":"tool_use","name":"x","input":{}}]"#),
        1,
        "tool call #0",
    );
    let missing = [
        "wake",
        "--agent",
        "a",
        "--task",
        task.as_str(),
        "--calls",
        "/nonexistent/calls.json",
    ];
    assert_fails(&cli.run(&missing), 1, "cannot read tool calls");
    let huge = format!("[{}]", " ".repeat(5 * 1024 * 1024));
    assert_fails(&cli.run_with(&wake, &huge), 1, "4 MiB");
    assert_eq!(cli.json(&["outbox"], ""), outbox_before);
    assert_eq!(cli.json(&["pending"], ""), serde_json::json!([]));

    assert_fails(
        &cli.run(&["task", "create", "--title", " ", "--category", "work"]),
        1,
        "title",
    );
    assert_fails(
        &cli.run(&[
            "task",
            "create",
            "--title",
            "x",
            "--category",
            "w",
            "--due",
            "soon",
        ]),
        1,
        "due date",
    );
    assert_fails(
        &cli.run(&[
            "edit",
            "00000000-0000-0000-0000-000000000000",
            "0",
            "--args",
            "{",
        ]),
        1,
        "--args",
    );
}

#[test]
fn usage_errors_exit_2_on_one_line() {
    let cli = Cli::new();
    assert_fails(&cli.run(&["frobnicate"]), 2, "frobnicate");
    assert_fails(&cli.run(&["confirm", "x"]), 2, "required");
    assert_fails(&cli.run(&["expire", "--ttl", "7x"]), 2, "duration");
    let help = cli.run(&["--help"]);
    assert_eq!(code(&help), 0);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("3 conflict") && help.contains("4 stale target"),
        "{help}"
    );
}

#[test]
fn global_flags_after_the_subcommand_and_expire() {
    let cli = Cli::new();
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args([
            "expire",
            "--ttl",
            "12h",
            "--json",
            "--now",
            NOW,
            "--db",
            &cli.db(),
        ])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value, serde_json::json!({"expired": []}));
}

#[test]
fn an_unreachable_postgres_is_reported_in_time_without_its_password() {
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", "postgres://u:hunter2@127.0.0.1:1/x", "pending"])
        .env("ASSENT_CONNECT_TIMEOUT", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("error: could not connect to PostgreSQL at 127.0.0.1:1 within 1 s: "),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", "postgres://u@127.0.0.1:1/x", "pending"])
        .env("ASSENT_CONNECT_TIMEOUT", "soon")
        .output()
        .expect("runs");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `assent args...` in `cwd` with no database named, `HOME` and `XDG_DATA_HOME`
/// under `home`.
fn run_without_db(cwd: &std::path::Path, home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("ASSENT_DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("runs")
}

#[test]
fn the_default_database_lives_in_the_data_directory_unless_one_is_here() {
    let home = tempfile::tempdir().expect("home");
    let cwd = tempfile::tempdir().expect("cwd");
    let create = ["agent", "create", "--id", "a", "--categories", "work"];
    let out = run_without_db(cwd.path(), home.path(), &create);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let default = home.path().join("data/assent/assent.db");
    assert!(default.is_file(), "created with its folder");
    assert!(!cwd.path().join("assent.db").exists());

    // A database left in the current directory by an earlier release is still used.
    let here = format!("sqlite://{}", cwd.path().join("assent.db").display());
    let out = run_without_db(
        cwd.path(),
        home.path(),
        &[
            "--db",
            &here,
            "agent",
            "create",
            "--id",
            "here",
            "--categories",
            "work",
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = run_without_db(cwd.path(), home.path(), &["--json", "agent", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 0, "{stderr}");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("\"here\"") && !listed.contains("\"a\""),
        "{listed}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("note: using ./assent.db in the current directory; the default is now ")
            && stderr.contains(&default.display().to_string()),
        "{stderr}"
    );
}

#[test]
fn the_demo_refuses_the_flags_it_would_ignore() {
    for (flags, named) in [
        (&["--db", "sqlite::memory:"][..], "--db"),
        (&["--json"][..], "--json"),
        (&["--delegated", "--json"][..], "--json"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_assent"))
            .arg("demo")
            .args(flags)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?}: no story is told");
        assert!(
            stderr.starts_with("error: `assent demo`") && stderr.contains(named),
            "{flags:?}: {stderr}"
        );
    }
    // The environment's database is meant for every command: the demo runs anyway.
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .arg("demo")
        .env("ASSENT_DATABASE_URL", "sqlite::memory:")
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_demo_tells_the_whole_story() {
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["demo"])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "The agent wakes",
        "Proposal queued for user review",
        "confirmed with edits",
        "rejected (reason:",
        "The audit trail",
        "The outbox",
        "## Recent User Decisions",
        "the user rejected this exact proposal recently",
        "Proving what ran",
        "verified: ",
    ] {
        assert!(text.contains(needle), "the demo should show {needle:?}");
    }
}

#[test]
fn bad_calls_get_one_line_error_replies_and_change_nothing() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let outbox_before = cli.json(&["outbox"], "");
    let huge = "x".repeat(1 << 20);
    let calls = serde_json::json!([
        {"id": "c1", "type": "function", "function": {"name": "set_task_title", "arguments": "{title: oops"}},
        {"id": "c2", "type": "function", "function": {"name": "delete_task", "arguments": "{}"}},
        {"id": "c3", "type": "function", "function": {"name": "update_task_estimate", "arguments": "{\"minutes\": \"soon\"}"}},
        {"type": "tool_use", "id": "c4", "name": "set_task_title", "input": {"title": huge}}
    ]);
    let out = cli.json(
        &["wake", "--agent", "a", "--task", task.as_str()],
        &calls.to_string(),
    );
    assert_eq!(out["changeSetId"], Value::Null);
    let responses = out["responses"].as_array().expect("responses");
    assert_eq!(responses.len(), 4);
    for (response, id) in responses.iter().zip(["c1", "c2", "c3", "c4"]) {
        assert_eq!(response["toolCallId"], id);
        let content = response["content"].as_str().expect("content");
        assert!(content.starts_with("Error: "), "{content}");
        assert_eq!(content.lines().count(), 1, "{content}");
        assert!(content.len() < 400, "{} bytes", content.len());
    }
    assert_eq!(cli.json(&["outbox"], ""), outbox_before);
    assert_eq!(cli.json(&["pending"], ""), serde_json::json!([]));

    let missing = "00000000-0000-0000-0000-000000000000";
    assert_fails(&cli.run(&["confirm", missing, "0"]), 1, "no change set");
    let queued = cli.json(&["wake", "--agent", "a", "--task", task.as_str()], CALLS);
    let set = queued["changeSetId"].as_str().expect("set id").to_owned();
    let outbox_before = cli.json(&["outbox"], "");
    assert_fails(&cli.run(&["confirm", &set, "9"]), 1, "has no item 9");
    assert_fails(&cli.run(&["confirm", "not-a-uuid", "0"]), 2, "not-a-uuid");
    assert_fails(
        &cli.run(&["edit", &set, "0", "--args", "{\"priority\": 5}"]),
        1,
        "invalid arguments",
    );
    assert_eq!(cli.json(&["outbox"], ""), outbox_before);
}

#[test]
fn the_delegated_demo_shows_a_parent_confirming_a_sub_agent() {
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["demo", "--delegated"])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "\"agentPath\": \"lead/researcher\"",
        "\"correlationId\"",
        "Confirmed by the parent session. Priority set to P0.",
        "Rejected by the parent session (reason: \"Waiting on finance is not a blocker\")",
        "Confirmed by a standing grant of the parent session.",
        "Not run: confirmation required but nobody could be asked",
        "lead/researcher  update_task_priority  {\"priority\":\"P0\"}",
    ] {
        assert!(
            text.contains(needle),
            "the demo should show {needle:?}:\n{text}"
        );
    }
}

/// Stores a grant straight into the database of `cli` (grants come from a parent's
/// "always" answer, which has no command of its own).
fn seed_grant(cli: &Cli, agent_path: &str, tool: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = assent_store::Store::open(&cli.db()).await.expect("opens");
        let grant = assent_store::delegation::Grant {
            id: uuid::Uuid::new_v4(),
            agent_id: Some("agent-x".into()),
            agent_path: agent_path.into(),
            tool_name: tool.into(),
            args_pattern: Some(serde_json::json!({"priority": "P0"})),
            correlation_id: "c-1".into(),
            created_at: time::macros::datetime!(2026-03-01 12:00 UTC),
            revoked_at: None,
            session_id: None,
            call_pattern: None,
        };
        let mut tx = store.begin_write().await.expect("write");
        assent_store::delegation::insert_grant(tx.connection(), &grant, grant.created_at)
            .await
            .expect("stored");
        tx.commit().await.expect("commits");
        store.close().await;
        grant.id.to_string()
    })
}

#[test]
fn grants_are_listed_filtered_and_revoked() {
    let cli = Cli::new();
    assert_eq!(
        code(&cli.run(&["grants"])),
        0,
        "an empty database has no grants"
    );
    let researcher = seed_grant(&cli, "lead/researcher", "update_task_priority");
    let writer = seed_grant(&cli, "lead/writer", "set_task_status");

    let all = cli.json(&["grants"], "");
    assert_eq!(all.as_array().expect("array").len(), 2);
    // Given at the same time: their order is by id, so look the researcher's up.
    let first = all
        .as_array()
        .expect("array")
        .iter()
        .find(|g| g["id"] == researcher.as_str())
        .expect("listed");
    assert_eq!(first["agentPath"], "lead/researcher");
    assert_eq!(first["toolName"], "update_task_priority");
    assert_eq!(first["argsPattern"], serde_json::json!({"priority": "P0"}));
    assert_eq!(first["revokedAt"], Value::Null);
    let only = cli.json(&["grants", "--agent", "lead/writer"], "");
    assert_eq!(only.as_array().expect("array").len(), 1);
    assert_eq!(only[0]["id"], writer.as_str());
    let by_tool = cli.json(&["grants", "--tool", "update_task_priority"], "");
    assert_eq!(by_tool[0]["id"], researcher.as_str());
    let text = String::from_utf8_lossy(&cli.run(&["grants"]).stdout).into_owned();
    assert!(
        text.contains("lead/researcher") && text.contains("ARGS PATTERN"),
        "{text}"
    );

    let revoked = cli.json(&["grants", "revoke", &researcher], "");
    assert_eq!(revoked["id"], researcher.as_str());
    assert_eq!(revoked["revokedAt"], "2026-03-02T09:00:00Z");
    let active = cli.json(&["grants"], "");
    assert_eq!(active.as_array().expect("array").len(), 1);
    let everything = cli.json(&["grants", "--all"], "");
    assert_eq!(everything.as_array().expect("array").len(), 2);

    assert_fails(
        &cli.run(&["grants", "revoke", &researcher]),
        3,
        "already revoked",
    );
    assert_fails(
        &cli.run(&["grants", "revoke", &uuid::Uuid::new_v4().to_string()]),
        1,
        "no grant",
    );
    assert_fails(
        &cli.run(&["grants", "revoke", "not-a-uuid"]),
        1,
        "invalid grant id",
    );
    assert_eq!(
        code(&cli.run(&["grants", "revoke"])),
        2,
        "usage: the id is required"
    );
}

#[test]
fn two_devices_pair_through_batch_files() {
    let (a, b) = (Cli::new(), Cli::new());
    let task = a.agent_and_task();
    assert_eq!(
        code(&b.run(&["agent", "create", "--id", "a", "--categories", "work"])),
        0
    );
    let set = a.json(&["wake", "--agent", "a", "--task", &task], CALLS)["changeSetId"]
        .as_str()
        .expect("a set")
        .to_owned();
    let to_b = a.dir.path().join("a.json");
    let to_b = to_b.to_str().expect("utf-8 path");
    let exported = a.json(&["sync", "export", to_b], "");
    assert_eq!(exported["changeSets"], 1);
    let imported = b.json(&["sync", "import", to_b], "");
    assert_eq!(
        (
            imported["changeSetsInserted"].as_u64(),
            imported["replayed"].as_bool()
        ),
        (Some(1), Some(false))
    );
    assert_eq!(b.json(&["sync", "import", to_b], "")["replayed"], true);
    let peers = b.json(&["sync", "peers"], "");
    assert_eq!(peers[0]["hostId"], exported["fromHost"]);
    assert_eq!(peers[0]["batchesMerged"], 1);

    // Both confirm item 0 while apart, then exchange both ways.
    assert_eq!(
        code(&a.run(&["edit", &set, "0", "--args", r#"{"priority":"P3"}"#])),
        0
    );
    assert_eq!(code(&b.run(&["confirm", &set, "0"])), 0);
    let to_b = a.dir.path().join("a2.json");
    let to_a = b.dir.path().join("b.json");
    let (to_b, to_a) = (to_b.to_str().expect("path"), to_a.to_str().expect("path"));
    a.json(&["sync", "export", to_b], "");
    b.json(&["sync", "import", to_b], "");
    b.json(&["sync", "export", to_a], "");
    a.json(&["sync", "import", to_a], "");
    let mut priorities = Vec::new();
    for device in [&a, &b] {
        let conflicts = device.json(&["conflicts"], "");
        let conflicts = conflicts.as_array().expect("a list");
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert_eq!(conflicts[0]["itemIndex"], 0);
        assert_eq!(conflicts[0]["loser"]["decision"]["verdict"], "confirmed");
        priorities.push(device.json(&["task", "show", &task], "")["priority"].clone());
    }
    assert_eq!(
        priorities[0], priorities[1],
        "both end with the winner's change"
    );

    let bad = a.dir.path().join("bad.json");
    std::fs::write(&bad, "{}").expect("write");
    assert_fails(
        &a.run(&["sync", "import", bad.to_str().expect("path")]),
        1,
        "is not a valid batch",
    );
    // A batch refused by the checks: one error line, and the refusal on record.
    let exported = a.dir.path().join("checked.json");
    a.json(&["sync", "export", exported.to_str().expect("path")], "");
    let mut forged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&exported).expect("read")).expect("json");
    forged["createdAt"] = serde_json::json!("0001-01-01T00:00:00Z");
    std::fs::write(&exported, forged.to_string()).expect("write");
    assert_fails(
        &b.run(&["sync", "import", exported.to_str().expect("path")]),
        1,
        "it is before 2000-01-01T00:00:00Z",
    );
    // An endless input is refused at its first byte, not read to the 256 MiB limit.
    let started = std::time::Instant::now();
    assert_fails(
        &a.run(&["sync", "import", "/dev/zero"]),
        1,
        "sync batch /dev/zero is not a valid batch",
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// Processes confirming at once.
const PROCESSES: usize = 8;
const SETS: usize = 10;
const ITEMS_PER_SET: usize = 10;

/// `SETS` tasks, each with a change set of `ITEMS_PER_SET` checklist additions.
fn seed(cli: &Cli) -> Vec<(String, String)> {
    cli.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    (0..SETS)
        .map(|s| {
            let task = cli.json(
                &["task", "create", "--title", &format!("T{s}"), "--category", "work"],
                "",
            )["id"]
                .as_str()
                .expect("task id")
                .to_owned();
            let calls: Vec<Value> = (0..ITEMS_PER_SET)
                .map(|i| {
                    serde_json::json!({"id": format!("call_{i}"), "type": "function",
                        "function": {"name": "add_checklist_item",
                                     "arguments": serde_json::json!({"title": format!("item {s}.{i}")}).to_string()}})
                })
                .collect();
            let wake = cli.json(
                &["wake", "--agent", "a", "--task", &task],
                &Value::Array(calls).to_string(),
            );
            let set = wake["changeSetId"].as_str().expect("a set").to_owned();
            (task, set)
        })
        .collect()
}

/// One process per `confirm SET --all`, `PROCESSES` workers each going through every
/// set: returns how many items each confirmation reported confirmed.
fn race(cli: &Cli, sets: &[(String, String)]) -> usize {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..PROCESSES)
            .map(|_| {
                scope.spawn(|| {
                    let mut confirmed = 0;
                    for (_, set) in sets {
                        let out = cli.run(&["--json", "confirm", set, "--all"]);
                        let report: Value =
                            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                                panic!("{e}: {}", String::from_utf8_lossy(&out.stderr))
                            });
                        for item in report["items"].as_array().expect("items") {
                            match item["result"].as_str() {
                                Some("confirmed") => confirmed += 1,
                                Some("skipped") => {}
                                _ => assert_eq!(
                                    item["conflict"], true,
                                    "a losing confirmation is a conflict: {item}"
                                ),
                            }
                        }
                    }
                    confirmed
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("worker"))
            .sum()
    })
}

async fn eight_processes_on(backend: &assent_tests::TestBackend) {
    let cli = Cli::on(backend).await;
    let sets = seed(&cli);
    let confirmed = tokio::task::block_in_place(|| race(&cli, &sets));
    assert_eq!(confirmed, SETS * ITEMS_PER_SET, "{backend:?}");
    for (s, (task, _)) in sets.iter().enumerate() {
        let shown = cli.json(&["task", "show", task], "");
        let mut titles: Vec<&str> = shown["checklist"]
            .as_array()
            .expect("checklist")
            .iter()
            .map(|item| item["title"].as_str().expect("title"))
            .collect();
        titles.sort_unstable();
        let mut expected: Vec<String> = (0..ITEMS_PER_SET)
            .map(|i| format!("item {s}.{i}"))
            .collect();
        expected.sort_unstable();
        assert_eq!(
            titles, expected,
            "every item applied exactly once ({backend:?})"
        );
    }
    let pending = cli.json(&["pending"], "");
    assert_eq!(pending, serde_json::json!([]), "nothing left open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_confirming_the_same_hundred_items_apply_each_once() {
    for backend in assent_tests::backends() {
        eight_processes_on(&backend).await;
    }
}

#[test]
fn every_dialect_in_and_its_messages_out() {
    let cli = Cli::new();
    cli.agent_and_task();
    for dialect in assent_tests::dialect_names() {
        let task = cli.json(
            &["task", "create", "--title", dialect, "--category", "work"],
            "",
        );
        let task = task["id"].as_str().expect("task id");
        let input = assent_tests::dialect_fixture(&format!("{dialect}.in.json"));
        let wake = cli.json(&["wake", "--agent", "a", "--task", task], &input);
        let expected: Value = serde_json::from_str(&assent_tests::dialect_fixture(&format!(
            "{dialect}.out.json"
        )))
        .expect("JSON");
        assert_eq!(wake["messages"], expected, "{dialect}");
        assert_eq!(
            wake["responses"].as_array().map(Vec::len),
            Some(2),
            "{dialect}"
        );
        let forced = cli.json(
            &[
                "wake",
                "--agent",
                "a",
                "--task",
                task,
                "--format",
                dialect,
                "--reply-format",
                "responses",
            ],
            &input,
        );
        assert_eq!(
            forced["messages"][1]["type"], "function_call_output",
            "{dialect}"
        );
    }
    let tools = cli.json(&["tools", "--agent", "a", "--format", "anthropic"], "");
    assert!(
        tools.as_array().expect("anthropic's tools array")[0]["input_schema"].is_object(),
        "{tools}"
    );
    // Always JSON, even without --json.
    let plain = cli.run(&["tools", "--agent", "a", "--format", "mcp"]);
    let listed: Value = serde_json::from_slice(&plain.stdout).expect("JSON");
    assert!(listed["tools"][0]["annotations"].is_object());
    assert_fails(&cli.run(&["tools", "--agent", "ghost"]), 1, "no agent");
    assert_fails(
        &cli.run(&["tools", "--agent", "a", "--format", "vercel"]),
        1,
        "vercel",
    );
    assert_eq!(
        code(&cli.run(&["tools", "--agent", "a", "--format", "cohere"])),
        2
    );
}

/// Issue 41, item 10: on a database whose host is a service's own (the invoicing
/// example's shape), `assent tools` lists the tools that service's engine recorded, in
/// every dialect, not the journal's; the agent's rules still decide.
#[tokio::test]
async fn tools_on_a_services_database_are_the_services_own() {
    use assent_tools::{ToolMode, ToolRegistry, ToolSpec};
    let cli = Cli::new();
    let store = assent_store::Store::open(&cli.db()).await.expect("store");
    let schema = serde_json::json!({"type": "object", "required": ["amountCents"],
        "properties": {"amountCents": {"type": "integer", "minimum": 1}}});
    let mut tools = ToolRegistry::new();
    for name in ["refund_invoice", "void_invoice"] {
        let spec = ToolSpec::new(
            name,
            "Change an invoice.",
            ToolMode::Deferred,
            schema.clone(),
        );
        tools.register(spec).expect("a tool");
    }
    let host = assent_confirm::SimpleHost::new("invoicing");
    assent_confirm::Engine::open(
        store.clone(),
        std::sync::Arc::new(tools),
        std::sync::Arc::new(host),
    )
    .await
    .expect("the service's engine opens");
    store.close().await;
    assert_eq!(
        code(&cli.run(&[
            "agent",
            "create",
            "--id",
            "billing",
            "--categories",
            "billing"
        ])),
        0
    );
    let names = |listed: &Value, dialect: &str| -> Vec<String> {
        let tools = match dialect {
            "gemini" => &listed["functionDeclarations"],
            "mcp" => &listed["tools"],
            _ => listed,
        };
        tools
            .as_array()
            .unwrap_or_else(|| panic!("{dialect}: {listed}"))
            .iter()
            .map(|tool| {
                let name = match dialect {
                    "openai" => &tool["function"]["name"],
                    _ => &tool["name"],
                };
                name.as_str().expect("a name").to_owned()
            })
            .collect()
    };
    for dialect in ["openai", "responses", "anthropic", "gemini", "mcp"] {
        let listed = cli.json(&["tools", "--agent", "billing", "--format", dialect], "");
        assert_eq!(
            names(&listed, dialect),
            ["refund_invoice", "void_invoice"],
            "{dialect}: {listed}"
        );
    }
    let mcp = cli.json(&["tools", "--agent", "billing", "--format", "mcp"], "");
    assert_eq!(mcp["tools"][0]["inputSchema"], schema, "{mcp}");
    cli.json(&["agent", "deny", "billing", "void_invoice"], "");
    let listed = cli.json(&["tools", "--agent", "billing"], "");
    assert_eq!(names(&listed, "openai"), ["refund_invoice"], "{listed}");
}

#[test]
fn unknown_elements_and_call_less_documents_change_nothing_in_every_dialect() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let outbox_before = cli.json(&["outbox"], "");
    let wake = ["wake", "--agent", "a", "--task", task.as_str()];
    for dialect in assent_tests::dialect_names() {
        let unknown = assent_tests::dialect_fixture(&format!("{dialect}.unknown.json"));
        assert_fails(&cli.run_with(&wake, &unknown), 1, "\"frobnicate\"");
        let call_less = assent_tests::dialect_fixture(&format!("{dialect}.call-less.json"));
        assert_fails(&cli.run_with(&wake, &call_less), 1, "no tool call");
        let mut forced = wake.to_vec();
        forced.extend(["--format", dialect]);
        assert_fails(&cli.run_with(&forced, &unknown), 1, "#1");
        assert_fails(&cli.run_with(&forced, &call_less), 1, "no tool call");
    }
    assert_eq!(cli.json(&["outbox"], ""), outbox_before);
    assert_eq!(cli.json(&["pending"], ""), serde_json::json!([]));
    assert_eq!(cli.json(&["audit"], ""), serde_json::json!([]));
}

#[test]
fn agent_text_reaches_the_terminal_as_visible_escapes() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let calls = r#"[{"id":"c1","type":"function","function":{"name":"add_checklist_item","arguments":"{\"title\":\"Backup\\u001b[2K\\u001b[8m hidden \\u202eesrever\\u0000\"}"}}]"#;
    let out = cli.run_with(&["wake", "--agent", "a", "--task", &task], calls);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let pending = cli.run(&["pending", "--task", &task]);
    assert_eq!(code(&pending), 0);
    let shown = String::from_utf8(pending.stdout).expect("utf-8");
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
        "raw control or bidi characters reached the terminal: {shown:?}"
    );
    assert!(
        shown.contains("Backup\\u001b[2K\\u001b[8m hidden \\u202eesrever\\u0000"),
        "{shown}"
    );
    // Under --json the same escapes keep the document valid, the text unchanged.
    let sets = cli.json(&["pending", "--task", &task], "");
    let args = sets[0]["items"][0]["args"]["title"]
        .as_str()
        .expect("title");
    assert_eq!(args, "Backup\u{1b}[2K\u{1b}[8m hidden \u{202e}esrever\u{0}");
}

#[test]
fn a_file_that_is_not_a_database_fails_at_once_in_one_line() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("notes.db");
    std::fs::write(&path, "x").expect("write");
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &format!("sqlite://{}", path.display()), "pending"])
        .env_remove("RUST_LOG")
        .output()
        .expect("runs");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_fails(&out, 1, "is not a SQLite database");
    assert_eq!(std::fs::read(&path).expect("read"), b"x", "left as it was");
}
