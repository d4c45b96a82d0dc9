//! The guide's "Gate your own tools" section (docs/guide/own-tools.md, where README's
//! five-minute start links) is this example: its Rust block is
//! `src/main.rs` byte for byte, its `[dependencies]` are this crate's (bar the path) and
//! within what the issue allows, and its printed output is what the binary prints.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const HEADING: &str = "## Gate your own tools";

/// What a stranger's crate may depend on besides `assent`: sqlx for its own SQL on the
/// engine's `Connection` (the engine re-exports no sqlx, issue 43).
const ALLOWED: [&str; 6] = ["assent", "tokio", "serde", "serde_json", "anyhow", "sqlx"];

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks (info string, body) of the guide's section `heading`, which ends at
/// the next `## ` heading outside a fence.
fn section_blocks(readme: &str, heading: &str) -> Vec<(String, String)> {
    let mut lines = readme.lines().skip_while(|line| *line != heading);
    assert_eq!(
        lines.next(),
        Some(heading),
        "the guide has no line {heading:?}"
    );
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in lines {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.to_owned(), String::new())),
            (Some(_), Some("")) => blocks.extend(open.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) if line.starts_with("## ") => break,
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a fence in {heading:?} is never closed");
    blocks
}

fn block<'a>(blocks: &'a [(String, String)], info: &str) -> &'a str {
    let mut found = blocks.iter().filter(|(i, _)| i == info);
    let (_, body) = found
        .next()
        .unwrap_or_else(|| panic!("no ```{info} block under {HEADING:?}"));
    assert!(
        found.next().is_none(),
        "more than one ```{info} block under {HEADING:?}"
    );
    body
}

/// The `name = spec` lines of the `[dependencies]` table of a manifest.
fn dependencies(manifest: &str) -> BTreeMap<String, String> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|line| {
            let (name, spec) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not a dependency line: {line:?}"));
            (name.trim().to_owned(), spec.trim().to_owned())
        })
        .collect()
}

/// `spec` without its `path = "…"` entry.
fn without_path(spec: &str) -> String {
    let start = spec.find("path = \"").expect("assent is a path dependency");
    let end = start + 8 + spec[start + 8..].find('"').expect("the path is closed") + 1;
    format!("{}{}", &spec[..start], &spec[end..])
}

#[test]
fn the_readme_shows_main_rs_byte_for_byte() {
    let blocks = section_blocks(&read("../../docs/guide/own-tools.md"), HEADING);
    let main = read("src/main.rs");
    assert!(
        block(&blocks, "rust") == main,
        "the ```rust block under {HEADING:?} in docs/guide/own-tools.md differs from \
         examples/invoicing/src/main.rs; copy the file into the guide"
    );
}

#[test]
fn the_readme_dependencies_are_this_crates_and_few() {
    let blocks = section_blocks(&read("../../docs/guide/own-tools.md"), HEADING);
    let shown = dependencies(block(&blocks, "toml"));
    let own = dependencies(&read("Cargo.toml"));
    for name in shown.keys() {
        assert!(
            ALLOWED.contains(&name.as_str()),
            "the guide asks for {name:?}"
        );
    }
    let assent = shown.get("assent").expect("the guide depends on assent");
    assert!(
        !assent.contains("journal"),
        "the guide's service builds no journal: {assent}"
    );
    let normalize = |deps: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        deps.iter()
            .map(|(name, spec)| match name.as_str() {
                "assent" => (name.clone(), without_path(spec)),
                _ => (name.clone(), spec.clone()),
            })
            .collect()
    };
    assert_eq!(
        normalize(&shown),
        normalize(&own),
        "the guide vs Cargo.toml"
    );
}

/// The `assent` binary built beside this example (`cargo test --workspace` builds it);
/// `None`, with a note, when it is missing outside CI.
#[allow(
    clippy::print_stderr,
    reason = "a skipped test must say so in the output"
)]
fn assent_bin() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_BIN_EXE_assent-example-invoicing")).with_file_name("assent");
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing under CI=true: run the whole workspace's tests",
        path.display()
    );
    eprintln!(
        "skipped: {} is not built (cargo build -p assent-cli)",
        path.display()
    );
    None
}

/// `assent --db DB ARGS…`: its exit status, stdout and stderr.
fn assent(bin: &Path, db: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(bin)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("assent runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The service (`args`: none to propose and wait, `work` for the worker alone) on `db`.
fn service(db: &str, args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent-example-invoicing"))
        .args(args)
        .env("ASSENT_DATABASE_URL", db)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdout)
}

/// Reads the proposing service's output up to the command it suggests to the person;
/// returns what it printed so far and the set's id prefix in that command.
fn until_asked(stdout: &mut BufReader<ChildStdout>) -> (String, String) {
    let mut printed = String::new();
    loop {
        let mut line = String::new();
        let read = stdout
            .read_line(&mut line)
            .expect("read the service's output");
        assert!(
            read > 0,
            "the service ended before asking; it printed:\n{printed}"
        );
        printed.push_str(&line);
        if let Some(command) = line.trim().strip_prefix("assent --db ") {
            let words: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(words.get(1), Some(&"confirm"), "{line}");
            return (printed, words[2].to_owned());
        }
    }
}

/// Waits (at most a minute) for `child` to end by itself; its exit status and the rest
/// of its output.
fn finish(mut child: Child, mut stdout: BufReader<ChildStdout>) -> (bool, String) {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the service did not end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    (child.wait().expect("reaped").success(), rest)
}

fn database() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = format!("sqlite://{}/invoicing.db", dir.path().display());
    (dir, db)
}

#[test]
fn the_example_runs_the_whole_story_and_prints_what_the_readme_says() {
    let Some(assent_bin) = assent_bin() else {
        return;
    };
    let (_dir, db) = database();
    let (child, mut stdout) = service(&db, &[]);
    let (mut printed, set) = until_asked(&mut stdout);

    // The person, in another process with none of the service's code: an edit outside
    // the schema the service stored is refused, then the refund is confirmed.
    let (ok, _, error) = assent(
        &assent_bin,
        &db,
        &["edit", &set, "0", "--args", r#"{"amountCents": 0}"#],
    );
    assert!(
        !ok && error.contains("invalid arguments for refund_invoice"),
        "{error}"
    );
    let (ok, shown, error) = assent(&assent_bin, &db, &["show", &set, "0"]);
    assert!(ok, "{error}");
    assert!(
        shown.contains("    host     invoicing: Refund an invoice.\n"),
        "{shown}"
    );
    assert!(
        shown.contains("\"minimum\": 1"),
        "the stored schema: {shown}"
    );
    let (ok, said, error) = assent(&assent_bin, &db, &["confirm", &set, "0"]);
    assert!(ok, "{error}");
    assert!(
        said.contains("it runs when an executor of invoicing claims job"),
        "{said}"
    );

    let (ok, rest) = finish(child, stdout);
    printed.push_str(&rest);
    assert!(ok, "{printed}");
    for expected in [
        "agent reads: Proposal queued for user review.\n",
        "agent learns: confirmed (Refunded 2500 cents on INV-1.)\n",
        "INV-1 refunded so far: 2500 cents\n",
        "- ✓ refund_invoice: Refund 2500 cents — confirmed, ran\n",
    ] {
        assert!(
            printed.contains(expected),
            "missing {expected:?} in:\n{printed}"
        );
    }
    let blocks = section_blocks(&read("../../docs/guide/own-tools.md"), HEADING);
    let shown = block(&blocks, "text");
    let shown_set = shown
        .split_whitespace()
        .skip_while(|word| *word != "confirm")
        .nth(1)
        .expect("the guide's output names a set");
    let printed = printed.replace(&db, "sqlite://invoicing.db").replace(
        &format!("confirm {set} 0"),
        &format!("confirm {shown_set} 0"),
    );
    assert_eq!(shown, printed, "the guide's output vs the binary's");
}

/// `POST path` with `token` and an empty JSON body; the status code.
fn post(addr: &str, path: &str, token: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

#[test]
fn the_review_server_without_the_services_code_confirms_through_its_api() {
    let Some(assent_bin) = assent_bin() else {
        return;
    };
    let (_dir, db) = database();
    let (child, mut stdout) = service(&db, &[]);
    let (_, set) = until_asked(&mut stdout);
    let token = "a-test-token-of-enough-length-0123456789abcdef";
    let mut server = Command::new(&assent_bin)
        .args([
            "--db",
            &db,
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--token",
            token,
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("assent serve starts");
    let mut banner = String::new();
    BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut banner)
        .expect("the banner");
    let start = banner.find("http://").expect("an address") + "http://".len();
    let addr = banner[start..]
        .split('/')
        .next()
        .expect("host:port")
        .to_owned();

    let status = post(
        &addr,
        &format!("/api/change-sets/{set}/items/0/confirm"),
        token,
    );
    server.kill().expect("stop the server");
    server.wait().expect("reaped");
    assert_eq!(
        status, 200,
        "the API confirms an item of a host it does not have"
    );
    let (ok, rest) = finish(child, stdout);
    assert!(ok, "{rest}");
    assert!(
        rest.contains("agent learns: confirmed (Refunded 2500 cents on INV-1.)"),
        "{rest}"
    );
}

#[test]
fn a_worker_killed_again_and_again_applies_every_refund_exactly_once() {
    let Some(assent_bin) = assent_bin() else {
        return;
    };
    let (_dir, db) = database();
    const REFUNDS: usize = 4;
    for _ in 0..REFUNDS {
        let (mut child, mut stdout) = service(&db, &[]);
        let (_, set) = until_asked(&mut stdout);
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let (ok, _, error) = assent(&assent_bin, &db, &["confirm", &set, "0"]);
        assert!(ok, "{error}");
    }
    let jobs = || {
        let (ok, listed, error) = assent(&assent_bin, &db, &["--json", "jobs", "--all"]);
        assert!(ok, "{error}");
        let jobs: serde_json::Value = serde_json::from_str(&listed).expect("jobs as JSON");
        jobs.as_array().expect("a list").clone()
    };
    let started = Instant::now();
    for round in 0_u64.. {
        let (mut worker, _stdout) = service(&db, &["work"]);
        // Killed at ever later moments, then left running once all is applied.
        std::thread::sleep(Duration::from_millis(40 + (round * 37) % 250));
        worker.kill().expect("SIGKILL");
        worker.wait().expect("reaped");
        let all = jobs();
        if all.len() == REFUNDS && all.iter().all(|job| job["status"] == "applied") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "jobs left: {all:?}"
        );
    }
    // Each refund of 2500 cents landed once: the invoice shows exactly their sum.
    let (ok, audit, error) = assent(&assent_bin, &db, &["--json", "audit", "--limit", "100"]);
    assert!(ok, "{error}");
    let records: serde_json::Value = serde_json::from_str(&audit).expect("audit as JSON");
    let refunds = records
        .as_array()
        .expect("a list")
        .iter()
        .filter(|r| r["kind"] == "result" && r["detail"] == "Refunded 2500 cents on INV-1.")
        .count();
    assert_eq!(refunds, REFUNDS, "every refund once: {records:#}");
}

#[test]
fn sections_end_at_the_next_heading_outside_fences() {
    let readme = "# A\n## Gate\ntext\n```rust\nfn main() {}\n```\n```text\n## not a heading\n```\n## Next\n```toml\nx = 1\n```\n";
    let blocks = section_blocks(readme, "## Gate");
    assert_eq!(
        blocks,
        [
            ("rust".to_owned(), "fn main() {}\n".to_owned()),
            ("text".to_owned(), "## not a heading\n".to_owned()),
        ]
    );
    assert_eq!(
        without_path(r#"{ path = "../x", default-features = false }"#),
        "{ , default-features = false }"
    );
}
