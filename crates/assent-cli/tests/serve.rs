//! `assent serve` as a process: the token generated on first start is printed once and
//! kept beside the database with mode 0600, the API accepts it, a later start reuses it
//! without printing it, and SIGTERM stops the server cleanly; `--notify` raises a
//! desktop notice for each queued set.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};

fn start(db: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", db, "serve", "--addr", "127.0.0.1:0"])
        .env_remove("ASSENT_TOKEN")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("assent serve starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdout)
}

fn line(stdout: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read stdout");
    line.trim_end().to_owned()
}

/// The `host:port` of the banner's `http://host:port/`.
fn address(banner: &str) -> String {
    let start = banner.find("http://").expect("an address") + "http://".len();
    let rest = &banner[start..];
    rest[..rest.find('/').expect("a path")].to_owned()
}

/// The status code of `GET path` with `token`.
fn status(addr: &str, path: &str, token: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line")
}

fn terminate(mut child: Child, mut stdout: BufReader<ChildStdout>) -> String {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let exit = child.wait().expect("assent exits");
    assert!(exit.success(), "a graceful stop exits 0: {exit}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    rest
}

#[test]
fn the_generated_token_is_printed_once_kept_private_and_reused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = format!("sqlite://{}/review.db", dir.path().display());
    let token_file = dir.path().join("review.db.token");

    let (child, mut stdout) = start(&db);
    let banner = line(&mut stdout);
    assert!(
        banner.starts_with("Assent review server on http://127.0.0.1:"),
        "{banner}"
    );
    assert!(line(&mut stdout).starts_with("Generated a token"));
    let token = line(&mut stdout);
    assert_eq!(token.len(), 64, "{token}");
    let stored = std::fs::read_to_string(&token_file).expect("the token file");
    assert_eq!(stored.trim(), token);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let addr = address(&banner);
    assert_eq!(status(&addr, "/api/change-sets", &token), 200);
    assert_eq!(
        status(&addr, "/api/change-sets", "wrong-token-0123456789"),
        401
    );
    assert_eq!(terminate(child, stdout).trim(), "Stopped");

    let (child, mut stdout) = start(&db);
    let banner = line(&mut stdout);
    let next = line(&mut stdout);
    assert!(
        next.starts_with("Log in with the token stored in"),
        "{next}"
    );
    assert_eq!(status(&address(&banner), "/api/change-sets", &token), 200);
    let rest = terminate(child, stdout);
    assert!(
        !rest.contains(&token),
        "the token is printed only on first start"
    );
}

/// Runs `assent --db db args…`, which must succeed; its stdout.
fn assent(db: &str, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", db])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("assent starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writes");
    let out = child.wait_with_output().expect("assent runs");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[cfg(unix)]
#[test]
fn notify_raises_a_desktop_notice_for_each_queued_set() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = format!("sqlite://{}/review.db", dir.path().display());
    let notices = dir.path().join("notices");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let fake = bin.join("notify-send");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", notices.display()),
    )
    .expect("a fake notify-send");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("a PATH");
    assent(
        &db,
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    let task = assent(
        &db,
        &[
            "--json",
            "task",
            "create",
            "--title",
            "T",
            "--category",
            "work",
        ],
        "",
    );
    let task: serde_json::Value = serde_json::from_str(&task).expect("JSON");
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &db, "serve", "--addr", "127.0.0.1:0", "--notify"])
        .env("PATH", path)
        .env_remove("ASSENT_TOKEN")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("assent serve starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    line(&mut stdout);
    // The notices start reading the feed within a poll of the start.
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    let calls = r#"[{"id":"c1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}}]"#;
    let task = task["id"].as_str().expect("an id");
    assent(&db, &["wake", "--agent", "a", "--task", task], calls);
    let mut said = String::new();
    for _ in 0..100 {
        said = std::fs::read_to_string(&notices).unwrap_or_default();
        if !said.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        said.contains("a waits for you") && said.contains("update_task_priority"),
        "{said:?}"
    );
    terminate(child, stdout);
}
