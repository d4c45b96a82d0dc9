//! Issue 53, points 3, 4 and 18: a person deciding a coding agent's call is told what
//! really happened. An edit a deny rule covers is refused at the edit, nothing recorded;
//! a call whose hook is gone (killed before it could withdraw it) is refused at the
//! confirmation and withdrawn; a confirmation says the agent runs the call, never that
//! "an executor of hook_… claims job …".

use super::{Cli, code};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const AGENT: &str = "coder";

/// A database with agent `coder` allowed the `code` category, on the current time.
fn coder() -> Cli {
    let cli = Cli::new().at_the_current_time();
    let out = cli.run(&["agent", "create", "--id", AGENT, "--categories", "code"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    cli
}

/// Claude Code's `PreToolUse` event of a `Bash` call of `command` in `cwd`.
fn bash(cwd: &Path, command: &str, call: &str) -> String {
    json!({
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": command, "description": "d"},
        "tool_use_id": call,
    })
    .to_string()
}

/// Starts `assent hook claude-code --agent coder ARGS...` with `event` on stdin.
fn hook(cli: &Cli, args: &[&str], event: &str) -> Child {
    cli.hook("claude-code", AGENT, args, event)
}

/// The open change set of `coder`, waiting up to 10 s for its hook to queue it.
fn queued(cli: &Cli) -> String {
    let started = Instant::now();
    loop {
        let pending = cli.json(&["pending"], "");
        if let Some(set) = pending.as_array().and_then(|sets| sets.first()) {
            return set["id"].as_str().expect("id").to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nothing queued"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The hook's permission decision and its reason.
fn decided(child: Child) -> (String, String) {
    let out = child.wait_with_output().expect("the hook ends");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let said = &answer["hookSpecificOutput"];
    (
        said["permissionDecision"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        said["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// The same database, its commands' clock `ahead` of the current time.
fn later(cli: &Cli, ahead: time::Duration) -> Cli {
    let mut at = Cli::new();
    at.db = cli.db();
    at.now = (time::OffsetDateTime::now_utc() + ahead)
        .format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339");
    at
}

/// Issue 53, point 3: an edit that turns a waiting call into one a deny rule covers
/// answered "✓ Approved" with exit 0 while the model was told the call failed. It is
/// refused at the edit (exit 1), the item still waits, and nothing is recorded.
#[test]
fn an_edit_a_deny_rule_covers_is_refused_at_the_edit_and_nothing_is_recorded() {
    let cli = coder();
    let out = cli.run(&["agent", "deny", AGENT, "Bash(rm -rf *)"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let workspace = tempfile::tempdir().expect("workspace");
    let waiting = hook(
        &cli,
        &["--wait", "30"],
        &bash(workspace.path(), "ls build", "t1"),
    );
    let set = queued(&cli);
    let trail = cli.json(&["audit"], "").as_array().map(Vec::len);
    let edited = json!({"command": "rm -rf build", "description": "d"}).to_string();
    let out = cli.run(&["edit", &set, "0", "--args", &edited]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("denied by rule deny Bash(rm -rf *)"),
        "the refusal names the rule: {stderr}"
    );
    assert!(!stderr.contains("Approved"), "{stderr}");
    let shown = cli.json(&["show", &set], "");
    assert_eq!(shown["items"][0]["status"], "pending", "{shown:#}");
    assert_eq!(
        cli.json(&["audit"], "").as_array().map(Vec::len),
        trail,
        "nothing recorded"
    );
    // The call still waits for the person, who rejects it.
    let out = cli.run(&["reject", &set, "0", "--reason", "not that"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let (decision, reason) = decided(waiting);
    assert_eq!(decision, "deny");
    assert!(reason.contains("not that"), "{reason}");
}

/// Issue 53, point 4: a hook killed while it waited (the agent's run ended) leaves its
/// item behind; once the moment it would have withdrawn it has passed, nothing would
/// take a confirmation. It is refused with why (exit 3) and the call withdrawn.
#[test]
fn a_confirmation_after_the_waiting_hook_is_gone_is_refused_and_the_call_withdrawn() {
    let cli = coder();
    let workspace = tempfile::tempdir().expect("workspace");
    let mut waiting = hook(&cli, &["--wait", "30"], &bash(workspace.path(), "ls", "t1"));
    let set = queued(&cli);
    waiting.kill().expect("the agent kills its hook");
    waiting.wait().expect("gone");
    let out = later(&cli, time::Duration::minutes(5)).run(&["confirm", &set, "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 3, "{stderr}");
    assert!(
        stderr.contains("the session that asked for it has ended"),
        "{stderr}"
    );
    let shown = cli.json(&["show", &set], "");
    assert_eq!(shown["items"][0]["status"], "retracted", "{shown:#}");
}

/// Issue 53, points 4 and 18: a hook that denies when nobody answered (`--on-timeout
/// deny`) leaves its call for a retry, so a later confirmation is accepted, and says
/// that the agent runs the call (not "an executor of hook_coder claims job …"). (The
/// retry runs it: `hooks::a_retry_after_a_confirmation_is_allowed_exactly_once`.)
#[test]
fn a_call_left_for_a_retry_is_confirmed_later_in_the_words_of_a_call() {
    let cli = coder();
    let workspace = tempfile::tempdir().expect("workspace");
    let event = bash(workspace.path(), "ls", "t1");
    let first = hook(&cli, &["--wait", "1", "--on-timeout", "deny"], &event);
    assert_eq!(decided(first).0, "deny");
    let set = queued(&cli);
    let out = later(&cli, time::Duration::minutes(5)).run(&["confirm", &set, "0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("the agent runs the call once its hook takes this answer"),
        "{stdout}"
    );
    assert!(!stdout.contains("executor"), "{stdout}");
}

/// Issue 53, points 3 and 18: what `show` says of a confirmed coding agent's call is
/// what happened, when it arrives: handed to the agent once its hook took the answer,
/// then what the agent reported it ran (its `PostToolUse` event), never "applied" by
/// "an executor".
#[test]
fn show_tells_how_a_confirmed_call_went_when_the_agent_reports_it() {
    let cli = coder();
    let workspace = tempfile::tempdir().expect("workspace");
    let waiting = hook(&cli, &["--wait", "30"], &bash(workspace.path(), "ls", "t1"));
    let set = queued(&cli);
    let out = cli.run(&["confirm", &set, "0"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(decided(waiting).0, "allow");
    let shown = String::from_utf8_lossy(&cli.run(&["show", &set]).stdout).into_owned();
    assert!(
        shown.contains(
            "run      handed to the agent, which runs the call; it has not reported how it went"
        ),
        "{shown}"
    );
    let after = json!({
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": workspace.path(),
        "permission_mode": "default", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "ls", "description": "d"},
        "tool_response": {"stdout": "Cargo.toml\nsrc", "stderr": "", "interrupted": false},
        "tool_use_id": "t1",
    })
    .to_string();
    let out = hook(&cli, &[], &after)
        .wait_with_output()
        .expect("recorded");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&cli.run(&["show", &set]).stdout).into_owned();
    assert!(shown.contains("run      ran in claude-code: "), "{shown}");
    assert!(shown.contains("Cargo.toml"), "{shown}");
    assert!(!shown.contains("executor"), "{shown}");
    let json = cli.json(&["show", &set, "0"], "");
    let outcome = json["execution"]["outcome"].as_str().expect("an outcome");
    assert!(outcome.starts_with("ran in claude-code: "), "{json:#}");
}

/// `POST /api/change-sets/{set}/items/0/{verb}` with `body`: status and body.
async fn over_the_api(base: &str, set: &str, verb: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/change-sets/{set}/items/0/{verb}"))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await
        .expect("answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

const ADMIN: &str = "outcomes-admin-token-0123456789";

/// Issue 53, point 3, over the API (the page's and Slack's engine): an edit a deny rule
/// covers is 403 with nothing recorded; an `Edit` of a file changed since is 409 with
/// the item refreshed for a new review, never "Approved".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_api_a_denied_edit_is_403_and_a_changed_file_409() {
    let cli = coder();
    let out = cli.run(&["agent", "deny", AGENT, "Bash(rm -rf *)"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let served = super::serve(&cli, ADMIN);
    let workspace = tempfile::tempdir().expect("workspace");
    let waiting = hook(
        &cli,
        &["--wait", "30"],
        &bash(workspace.path(), "ls build", "t1"),
    );
    let set = queued(&cli);
    let edit = json!({"args": {"command": "rm -rf build", "description": "d"}});
    let (status, body) = over_the_api(&served.base, &set, "edit", edit).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(cli.json(&["show", &set, "0"], "")["status"], "pending");
    let (status, _) = over_the_api(&served.base, &set, "reject", json!({"reason": "no"})).await;
    assert_eq!(status, 200);
    assert_eq!(decided(waiting).0, "deny");

    let file = workspace.path().join("main.rs");
    std::fs::write(&file, "fn main() {\n    old();\n}\n").expect("file");
    let event = json!({
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": workspace.path(),
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Edit",
        "tool_input": {"file_path": file, "old_string": "old()", "new_string": "new()"},
        "tool_use_id": "t2",
    })
    .to_string();
    let waiting = hook(&cli, &["--wait", "30"], &event);
    let set = queued(&cli);
    std::fs::write(&file, "fn main() {\n    other();\n}\n").expect("changed meanwhile");
    let (status, body) = over_the_api(&served.base, &set, "confirm", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("target changed since proposed"),
        "{body}"
    );
    let shown = cli.json(&["show", &set, "0"], "");
    assert_eq!(
        (&shown["status"], &shown["revision"]),
        (&json!("pending"), &json!(1)),
        "{shown:#}"
    );
    let (status, _) = over_the_api(&served.base, &set, "reject", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(decided(waiting).0, "deny");
}
