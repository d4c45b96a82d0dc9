//! `assent review` driven through a pseudo-terminal as a person would drive it: a
//! wake queues a call, the reviewer shows it within a second, and each key's decision
//! lands in the database through the same confirmation service as `assent confirm`
//! (quorum and revisions included). Without a terminal it refuses (exit 2). rexpect
//! reads the screen as Latin-1, so the expected texts are the ASCII parts of a line.

use super::{Cli, assert_fails};
use rexpect::session::PtySession;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long any expected line may take (a busy CI machine); the "within a second" of
/// a newly queued call is measured on its own.
const PATIENCE_MS: u64 = 15_000;

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).expect("writes a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `assent review --as NAME extra…` on `cli`'s database in a pseudo-terminal, with a
/// fake `notify-send` (which records its arguments in `notices`) first on the `PATH`
/// and `editor.sh` of the test's folder as the editor.
fn reviewer(cli: &Cli, name: &str, extra: &[&str]) -> PtySession {
    let dir = cli.dir.path();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    script(
        &bin.join("notify-send"),
        &format!("echo \"$@\" >> '{}'\n", dir.join("notices").display()),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)))
        .expect("a PATH");
    let mut command = Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", &cli.db(), "review", "--as", name])
        .args(extra)
        .env("PATH", path)
        .env("EDITOR", dir.join("editor.sh"))
        .env_remove("VISUAL")
        .env_remove("RUST_LOG");
    rexpect::session::spawn_command(command, Some(PATIENCE_MS)).expect("the reviewer starts")
}

/// Queues two calls that wait for a person on `task`, the priority to `priority`
/// and the title to `title` (each wake its own values: the planner drops a call that
/// changes nothing or repeats a rejected one); returns the set's id.
fn wake(cli: &Cli, task: &str, priority: &str, title: &str) -> String {
    let calls = serde_json::json!([
        {"id": "call_1", "type": "function", "function": {"name": "update_task_priority",
            "arguments": serde_json::json!({"priority": priority}).to_string()}},
        {"id": "call_2", "type": "function", "function": {"name": "set_task_title",
            "arguments": serde_json::json!({"title": title}).to_string()}},
    ]);
    let wake = cli.json(
        &["wake", "--agent", "a", "--task", task],
        &calls.to_string(),
    );
    wake["changeSetId"].as_str().expect("a set").to_owned()
}

/// Item `index` of set `set` as `show --json` gives it.
fn item(cli: &Cli, set: &str, index: usize) -> Value {
    cli.json(&["show", set], "")["items"][index].clone()
}

/// Sends one key.
fn press(session: &mut PtySession, key: &str) {
    session.send(key).expect("a key is sent");
    session.flush().expect("flushed");
}

/// Waits for `text` on the reviewer's screen.
fn expect(session: &mut PtySession, text: &str) {
    if let Err(error) = session.exp_string(text) {
        panic!("the reviewer never printed {text:?}: {error}");
    }
}

#[test]
fn each_key_decides_through_the_engine_the_moment_a_call_waits() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let mut review = reviewer(&cli, "alice", &[]);
    expect(&mut review, "Nothing waits for you now.");

    // y: the call queued after the reviewer started shows within a second.
    let set = wake(&cli, &task, "P0", "Renamed");
    let queued = Instant::now();
    expect(&mut review, "update_task_priority");
    assert!(
        queued.elapsed() < Duration::from_secs(1),
        "shown after {:?}",
        queued.elapsed()
    );
    expect(&mut review, "before   P2");
    expect(&mut review, "[q] quit");
    press(&mut review, "y");
    expect(&mut review, "[0] Set priority to P0");
    expect(&mut review, "confirmed: Priority set to P0");
    let confirmed = item(&cli, &set, 0);
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["decidedBy"], "alice");
    let notices = std::fs::read_to_string(cli.dir.path().join("notices")).expect("a notice");
    assert!(
        notices.contains("a waits for you") && notices.contains("update_task_priority"),
        "{notices}"
    );

    // n: a reason typed key by key.
    expect(&mut review, "set_task_title");
    press(&mut review, "n");
    expect(&mut review, "Reason");
    press(&mut review, "not now\r");
    expect(&mut review, "rejected (reason: \"not now\")");
    let rejected = item(&cli, &set, 1);
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["reason"], "not now");

    // d, s, then a on the next set: deferred, skipped (left waiting), confirmed.
    let second = wake(&cli, &task, "P1", "Second");
    expect(&mut review, "update_task_priority");
    press(&mut review, "d");
    expect(&mut review, "deferred");
    assert_eq!(item(&cli, &second, 0)["status"], "deferred");
    expect(&mut review, "set_task_title");
    press(&mut review, "s");
    expect(&mut review, "skipped");
    expect(&mut review, "Nothing waits for you now.");
    assert_eq!(item(&cli, &second, 1)["status"], "pending");

    // e: an edit the schema refuses reopens the editor; the second one is confirmed.
    script(
        &cli.dir.path().join("editor.sh"),
        &format!(
            "if [ -e '{once}' ]; then printf '{{\"priority\": \"P3\"}}' > \"$1\"; \
             else touch '{once}'; printf '{{\"priority\": \"P9\"}}' > \"$1\"; fi\n",
            once = cli.dir.path().join("edited-once").display()
        ),
    );
    let third = wake(&cli, &task, "P2", "Third");
    expect(&mut review, "update_task_priority");
    press(&mut review, "e");
    expect(&mut review, "the editor opens again");
    expect(&mut review, "confirmed with edits {\"priority\":\"P3\"}");
    let edited = item(&cli, &third, 0);
    assert_eq!(edited["status"], "confirmed");
    assert_eq!(
        cli.json(&["task", "show", &task], "")["priority"],
        "P3",
        "the edited arguments ran"
    );

    // Decided elsewhere while shown: one line, and the item goes.
    expect(&mut review, "set_task_title");
    let out = cli.run(&["reject", &third, "1", "--as", "bob"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    expect(&mut review, "rejected elsewhere by bob");
    expect(&mut review, "Nothing waits for you now.");

    // a: the rest of a set, each item as shown.
    let fourth = wake(&cli, &task, "P0", "Fourth");
    expect(&mut review, "update_task_priority");
    press(&mut review, "a");
    expect(&mut review, "[1] Set title to \"Fourth\"");
    assert_eq!(item(&cli, &fourth, 0)["status"], "confirmed");
    assert_eq!(item(&cli, &fourth, 1)["status"], "confirmed");

    press(&mut review, "?");
    expect(&mut review, "skip it for this session");
    press(&mut review, "q");
    review.exp_eof().expect("the reviewer quits");
}

#[test]
fn under_a_quorum_one_reviewer_approves_and_the_second_confirms() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    cli.json(
        &[
            "agent",
            "ask",
            "a",
            "update_task_priority",
            "--approvals",
            "2",
        ],
        "",
    );
    let set = wake(&cli, &task, "P0", "Renamed");
    let mut alice = reviewer(&cli, "alice", &["--no-notify"]);
    expect(&mut alice, "update_task_priority");
    expect(&mut alice, "approvals 0 of 2");
    press(&mut alice, "y");
    expect(&mut alice, "approved");
    // Alice's approval is in; her next item is the other one, not this one again.
    expect(&mut alice, "set_task_title");
    assert_eq!(item(&cli, &set, 0)["status"], "pending");
    press(&mut alice, "q");
    alice.exp_eof().expect("alice quits");

    // Alice again changes nothing: the same person twice is not a quorum.
    let mut again = reviewer(&cli, "alice", &["--no-notify"]);
    expect(&mut again, "set_task_title");
    press(&mut again, "q");
    again.exp_eof().expect("alice quits");

    // Bob is shown revision 0; Carol's edit starts revision 1 meanwhile, and Bob's
    // screen says so and shows what runs now before his key counts.
    let mut bob = reviewer(&cli, "bob", &["--no-notify"]);
    expect(&mut bob, "approvals 1 of 2 (by alice)");
    let out = cli.run(&[
        "edit",
        &set,
        "0",
        "--args",
        r#"{"priority":"P1"}"#,
        "--as",
        "carol",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    expect(&mut bob, "changed since it was shown");
    expect(&mut bob, "revision 1");
    expect(&mut bob, "edited   by carol");
    expect(&mut bob, "priority: P1");
    expect(&mut bob, "approvals 1 of 2 (by carol)");
    press(&mut bob, "y");
    expect(
        &mut bob,
        "confirmed with edits {\"priority\":\"P1\"}: Priority set to P1.",
    );
    let confirmed = item(&cli, &set, 0);
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["decidedBy"], "bob");
    assert_eq!(cli.json(&["task", "show", &task], "")["priority"], "P1");
    press(&mut bob, "q");
    bob.exp_eof().expect("bob quits");
    assert!(
        !cli.dir.path().join("notices").exists(),
        "--no-notify raises none"
    );
}

#[test]
fn without_a_terminal_it_points_to_pending_and_confirm() {
    let cli = Cli::new();
    assert_fails(&cli.run(&["review"]), 2, "`assent pending`");
}

#[test]
fn an_error_while_a_key_is_awaited_ends_the_reviewer_with_the_terminal_restored() {
    let cli = Cli::new();
    cli.agent_and_task();
    // The reviewer, then what the terminal's settings are once it has ended, in the
    // same pseudo-terminal.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("\"$0\" --db \"$1\" review --as alice --no-notify; echo \"exit=$?\"; stty -a")
        .arg(env!("CARGO_BIN_EXE_assent"))
        .arg(cli.db())
        .env_remove("RUST_LOG");
    let mut review =
        rexpect::session::spawn_command(command, Some(PATIENCE_MS)).expect("the reviewer starts");
    expect(&mut review, "Nothing waits for you now.");
    // The reviewer waits for a key (the terminal raw) and follows the change feed; a
    // database error lands: the feed's table is gone behind its back.
    let dropped = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('DROP TABLE change_feed'); c.commit()")
        .arg(cli.dir.path().join("t.db"))
        .status()
        .expect("python3 runs");
    assert!(dropped.success());
    expect(&mut review, "change_feed");
    expect(&mut review, "exit=1");
    let settings = review.exp_eof().expect("stty prints and the shell ends");
    assert_cooked_settings(&settings);
}

/// `assent serve` on `cli`'s database, on a free loopback port: the process and its
/// `http://127.0.0.1:PORT`.
fn serve(cli: &Cli) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &cli.db(), "serve", "--addr", "127.0.0.1:0"])
        .env_remove("ASSENT_TOKEN")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("assent serve starts");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut banner = String::new();
    stdout.read_line(&mut banner).expect("the banner");
    let start = banner.find("http://").expect("an address");
    let url = banner[start..]
        .split_whitespace()
        .next()
        .expect("a URL")
        .trim_end_matches('/')
        .to_owned();
    // The rest of what it prints is read away, so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // Its follower of the change feed starts from where the feed stands within a poll
    // of the start: writes before that are not news to it.
    std::thread::sleep(Duration::from_millis(1_200));
    (child, url)
}

/// `assent review extra…` in a pseudo-terminal, without a database, then `exit=CODE`
/// and the terminal's settings (`stty -a`) once it has ended.
fn remote_reviewer(extra: &[&str], token: &str) -> PtySession {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("\"$0\" review \"$@\"; echo \"exit=$?\"; stty -a")
        .arg(env!("CARGO_BIN_EXE_assent"))
        .args(extra)
        .env("ASSENT_TOKEN", token)
        .env_remove("RUST_LOG");
    rexpect::session::spawn_command(command, Some(PATIENCE_MS)).expect("the reviewer starts")
}

/// `stty -a`'s flags show a cooked terminal: line editing and signals on, as raw
/// mode turns them off (rexpect's pseudo-terminal starts with echo off, so echo says
/// nothing here).
fn assert_cooked_settings(settings: &str) {
    let flags: Vec<&str> = settings.split_whitespace().collect();
    for cooked in ["icanon", "isig", "iexten"] {
        assert!(
            flags.contains(&cooked) && !flags.contains(&format!("-{cooked}").as_str()),
            "the terminal was left raw ({cooked} off):\n{settings}"
        );
    }
}

/// What the shell printed after the reviewer ended: the terminal is cooked again.
fn assert_cooked(review: &mut PtySession) {
    let settings = review.exp_eof().expect("stty prints and the shell ends");
    assert_cooked_settings(&settings);
}

#[test]
fn over_a_server_the_reviewer_follows_its_events_and_decides_through_its_routes() {
    let mut cli = Cli::new();
    // The server's clock is the real one: sets made at the fixed test time would have
    // expired there long ago.
    cli.now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a time");
    let task = cli.agent_and_task();
    let token = cli.json(&["tokens", "add", "--role", "reviewer"], "");
    let (secret, token_id) = (
        token["secret"].as_str().expect("a secret").to_owned(),
        token["id"].as_str().expect("an id").to_owned(),
    );
    let (mut server, url) = serve(&cli);

    // A bad token and a bad URL: one line each, a failure, the terminal untouched.
    let mut refused = remote_reviewer(&["--server", &url], "not-the-token-0123456789");
    expect(&mut refused, "wrong bearer token");
    expect(&mut refused, "exit=1");
    assert_cooked(&mut refused);
    let mut bad_url = remote_reviewer(&["--server", "ftp://example.com"], &secret);
    expect(&mut bad_url, "invalid --server URL");
    expect(&mut bad_url, "exit=2");
    assert_cooked(&mut bad_url);

    let mut review = remote_reviewer(&["--server", &url, "--no-notify"], &secret);
    expect(&mut review, &format!("Reviewing as {token_id} on {url}/"));
    expect(&mut review, "Nothing waits for you now.");
    let set = wake(&cli, &task, "P0", "Remote");
    expect(&mut review, "update_task_priority");
    expect(&mut review, "before   P2");
    expect(&mut review, "[q] quit");
    press(&mut review, "y");
    expect(&mut review, "confirmed: Priority set to P0");
    let confirmed = item(&cli, &set, 0);
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(
        confirmed["decidedBy"],
        token_id.as_str(),
        "the token decided"
    );

    expect(&mut review, "set_task_title");
    press(&mut review, "n");
    expect(&mut review, "Reason");
    press(&mut review, "from afar\r");
    expect(&mut review, "rejected (reason: \"from afar\")");
    assert_eq!(item(&cli, &set, 1)["reason"], "from afar");

    // Decided elsewhere meanwhile: the server's events say so.
    let second = wake(&cli, &task, "P1", "Second");
    expect(&mut review, "update_task_priority");
    let out = cli.run(&["confirm", &second, "0", "--as", "bob"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    expect(&mut review, "confirmed elsewhere by bob");
    expect(&mut review, "set_task_title");
    press(&mut review, "d");
    expect(&mut review, "deferred");
    assert_eq!(item(&cli, &second, 1)["status"], "deferred");

    // The server goes away while a key is awaited: one line, exit 1, the terminal
    // back in cooked mode.
    server.kill().expect("the server is stopped");
    server.wait().expect("it ends");
    expect(&mut review, "event stream");
    expect(&mut review, "exit=1");
    assert_cooked(&mut review);

    let proof = cli.run(&["audit", "verify"]);
    assert_eq!(proof.status.code(), Some(0), "{proof:?}");
}
