//! `assent mcp --config FILE`: every server of a client's `mcpServers` map behind one
//! endpoint, tools named `NAME__tool`, each server with its own trust, a broken one
//! reported and skipped; upstreams reached over Streamable HTTP with the file's
//! headers; and the gateway itself served over Streamable HTTP behind an agent token.

use super::*;
use std::sync::{Arc, Mutex};

/// Writes `{"mcpServers": servers}` to `mcp.json` in `dir`.
fn config_file(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).expect("the config");
    path
}

/// The gateway `assent --db DB mcp --config FILE --agent bot EXTRA` on stdio, with an
/// rmcp client; what it logs on stderr collects in the returned buffer.
async fn config_gateway(
    db: &str,
    config: &Path,
    extra: &[&str],
) -> (RunningService<RoleClient, ()>, Arc<Mutex<String>>) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", db, "mcp", "--config"])
        .arg(config)
        .args(["--agent", "bot"])
        .args(extra)
        .env_remove("RUST_LOG");
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = stderr {
        let log = log.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt as _;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().expect("the log").push_str(&format!("{line}\n"));
            }
        });
    }
    let client = ().serve(transport).await.expect("the MCP handshake");
    (client, log)
}

/// Issue 52, point 8 (the gateway's half): a write of `NOTES.md -> ~/.ssh/id_rsa` reads
/// nothing for its diff. The fixture's `read_note` follows symlinks wherever they lead
/// (as a server of no checks of its own would), configured as the preview of
/// `append_note`'s `content`; the gateway resolves the path first, finds it outside the
/// folder the server's command names, and the item says so instead of showing the key.
/// A file inside the folder still shows its diff; the npm filesystem server's item says
/// the same.
#[tokio::test]
async fn a_write_through_a_symlink_out_of_the_servers_folder_reads_nothing_and_says_why() {
    let s = setup();
    let base = s.dir.path().canonicalize().expect("the folder");
    let ssh = base.join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect(".ssh");
    let key = ssh.join("id_rsa");
    std::fs::write(
        &key,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n",
    )
    .expect("a key");
    let root = base.join("project");
    std::fs::create_dir_all(&root).expect("the project");
    std::fs::write(root.join("inside.md"), "old\n").expect("a file");
    let notes = root.join("NOTES.md");
    std::os::unix::fs::symlink(&key, &notes).expect("the symlink");
    let config = config_file(
        &base,
        json!({"fixture": {"command": fixture(), "args": [root],
            "assent": {"tools": {"append_note": {"preview": {"read": "read_note", "path": "path"}}}}}}),
    );
    let (client, _log) = config_gateway(&s.db, &config, &[]).await;
    let before = |reply: &CallToolResult| {
        let shown = item(&s.db, set_id(&text(reply)));
        shown["before"]
            .as_str()
            .unwrap_or_else(|| panic!("{shown:#}"))
            .to_owned()
    };

    let inside = call(
        &client,
        "fixture__append_note",
        json!({"path": root.join("inside.md"), "text": "x", "content": "new\n"}),
    )
    .await;
    assert!(
        before(&inside).contains("-old\n+new\n"),
        "{}",
        before(&inside)
    );

    let through = call(
        &client,
        "fixture__append_note",
        json!({"path": notes, "text": "x", "content": "mine\n"}),
    )
    .await;
    let said = before(&through);
    assert!(!said.contains("PRIVATE KEY"), "the key was read: {said}");
    assert!(
        said.starts_with(&format!(
            "(no diff shown: {} leads to {}, outside the server's folders ({})",
            notes.display(),
            key.display(),
            root.display()
        )),
        "{said}"
    );
    let pending = succeeded(&assent(&s.db, &["pending"]));
    assert!(!pending.contains("PRIVATE KEY"), "{pending}");
    client.cancel().await.expect("the client leaves");

    let Some(server) = filesystem_server() else {
        return;
    };
    let upstream = vec![server.display().to_string(), root.display().to_string()];
    let client = gateway(&s.db, &[], &upstream).await;
    let through = call(
        &client,
        "write_file",
        json!({"path": notes, "content": "mine\n"}),
    )
    .await;
    let said = before(&through);
    assert!(
        said.contains(&format!("leads to {}", key.display())),
        "{said}"
    );
    client.cancel().await.expect("the client leaves");
}

/// The fixture server over Streamable HTTP on a free loopback port (`EXTRA` passed on,
/// e.g. `--require-header NAME=VALUE`), and its URL.
async fn http_fixture(extra: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = tokio::process::Command::new(fixture())
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the HTTP fixture starts");
    let stdout = child.stdout.take().expect("its stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the fixture says where it listens")
        .expect("a line")
        .expect("a URL");
    (child, url)
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn one_config_serves_every_server_under_its_name_with_its_own_trust() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let existing = s.dir.path().join("existing.txt");
    std::fs::write(&existing, "hello\n").expect("a file to read");
    let fixture = fixture().display().to_string();
    let config = config_file(
        s.dir.path(),
        json!({
            "notes": {"command": fixture, "assent": {"trust": "hints"}},
            "strict": {"command": fixture},
            "broken": {"command": s.dir.path().join("no-such-server")},
            "odd": {"url": "ftp://example.invalid/mcp"},
        }),
    );
    let (client, log) =
        config_gateway(&s.db, &config, &["--public-url", "https://assent.example/"]).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names = names(&tools);
    assert!(names.contains(&"notes__read_note".to_owned()), "{names:?}");
    assert!(
        names.contains(&"strict__append_note".to_owned()),
        "{names:?}"
    );
    assert!(
        names.iter().all(|n| n.starts_with("notes__")
            || n.starts_with("strict__")
            || n == assent_mcp::STATUS_TOOL),
        "{names:?}"
    );
    assert_eq!(names.len(), 13, "{names:?}");

    // Trusted hints: the read runs at once; the same tool of the strict server waits.
    let read = call(&client, "notes__read_note", json!({"path": existing})).await;
    assert_eq!(text(&read), "hello\n");
    let strict = call(&client, "strict__read_note", json!({"path": existing})).await;
    assert!(text(&strict).starts_with(QUEUED), "{}", text(&strict));

    let queued = call(
        &client,
        "notes__append_note",
        json!({"path": note, "text": "one"}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    // The receipt names its set and links to its review page in `_meta`.
    let meta = queued.meta.as_ref().expect("_meta").0.clone();
    let set = set_id(&reply);
    assert_eq!(meta[assent_mcp::CHANGE_SET_META], json!(set.to_string()));
    assert_eq!(
        meta[assent_mcp::REVIEW_URL_META],
        json!(format!("https://assent.example/#change-set-{set}"))
    );
    let pending = assent(&s.db, &["--json", "pending"]);
    let pending: Value = serde_json::from_slice(&pending.stdout).expect("JSON");
    let targets: Vec<String> = pending
        .as_array()
        .expect("sets")
        .iter()
        .map(|set| set["targetId"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(targets.contains(&"notes".to_owned()), "{pending:#}");
    assert!(targets.contains(&"strict".to_owned()), "{pending:#}");
    // The call is queued under the name the client calls it by, its server's own
    // (rules for it are per server).
    assert!(
        pending.to_string().contains("\"notes__append_note\""),
        "{pending:#}"
    );
    // `assent_status` (one, for every server) finds the set among the servers' calls.
    let status = call(
        &client,
        assent_mcp::STATUS_TOOL,
        json!({"changeSetId": set.to_string()}),
    )
    .await;
    assert_eq!(
        status
            .structured_content
            .as_ref()
            .map(|s| s["status"].clone()),
        Some(json!("pending")),
        "{}",
        text(&status)
    );
    confirm_and_see(&s.db, set_id(&reply), &note, "one\n").await;

    let unknown = client
        .peer()
        .call_tool(CallToolRequestParams::new("broken__read_note"))
        .await
        .expect_err("a skipped server has no tools");
    assert!(
        unknown.to_string().contains("broken__read_note"),
        "{unknown}"
    );
    client.cancel().await.expect("the client leaves");
    let log = log.lock().expect("the log").clone();
    for skipped in ["broken", "odd"] {
        assert!(
            log.lines()
                .any(|line| line.contains(skipped) && line.contains("skipped")),
            "{skipped} is reported: {log}"
        );
    }
}

#[tokio::test]
async fn a_config_whose_servers_all_fail_is_one_error_and_exit_1() {
    let s = setup();
    let config = config_file(
        s.dir.path(),
        json!({"gone": {"command": s.dir.path().join("no-such-server")}}),
    );
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--config",
            &config.display().to_string(),
            "--agent",
            "bot",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gone"), "{err}");
    let out = assent(
        &s.db,
        &["mcp", "--config", "/no/such/file.json", "--agent", "bot"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing file is a usage error"
    );
    let out = assent(
        &s.db,
        &[
            "mcp",
            "--config",
            &config.display().to_string(),
            "--agent",
            "bot",
            "--server",
            "x",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "--config and --server exclude each other"
    );
}

#[tokio::test]
async fn a_streamable_http_upstream_is_reached_by_url_with_the_configs_headers() {
    let s = setup();
    let (_server, url) = http_fixture(&["--require-header", "X-Api-Key=s3cret"]).await;
    let note = s.dir.path().join("note.txt");
    let existing = s.dir.path().join("existing.txt");
    std::fs::write(&existing, "over http\n").expect("a file to read");
    let config = config_file(
        s.dir.path(),
        json!({
            "remote": {"type": "http", "url": url, "headers": {"X-Api-Key": "s3cret"},
                       "assent": {"trust": "hints"}},
            "nokey": {"url": url},
        }),
    );
    let (client, log) = config_gateway(&s.db, &config, &[]).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names = names(&tools);
    assert!(names.contains(&"remote__read_note".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("nokey__")), "{names:?}");
    let read = call(&client, "remote__read_note", json!({"path": existing})).await;
    assert_eq!(text(&read), "over http\n");
    let queued = call(
        &client,
        "remote__append_note",
        json!({"path": note, "text": "one"}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    assert!(!note.exists());
    confirm_and_see(&s.db, set_id(&reply), &note, "one\n").await;
    // The operation id reached the HTTP upstream in `_meta` too.
    let meta = std::fs::read_to_string(format!("{}.meta", note.display())).expect("meta");
    assert!(!meta.trim().is_empty() && meta.trim() != "-", "{meta}");
    client.cancel().await.expect("the client leaves");
    let log = log.lock().expect("the log").clone();
    assert!(
        log.lines()
            .any(|line| line.contains("nokey") && line.contains("skipped")),
        "{log}"
    );
}

/// A free loopback port (bound and released; the gateway binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("its address")
        .port()
}

/// An agent token of agent `agent`: its secret.
fn agent_token(db: &str, agent: &str) -> String {
    let out = assent(
        db,
        &[
            "--json", "tokens", "add", "--role", "agent", "--agent", agent,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    made["secret"].as_str().expect("a secret").to_owned()
}

/// `assent mcp ... --http 127.0.0.1:PORT` started, once it said on stderr where it
/// listens and for which agent (by default, `RUST_LOG` unset); its URL.
async fn http_gateway(db: &str, args: &[String]) -> (tokio::process::Child, String) {
    let (child, url, _) = http_gateway_saying(db, args).await;
    (child, url)
}

/// [`http_gateway`], and what it said on stderr up to where it listens.
async fn http_gateway_saying(db: &str, args: &[String]) -> (tokio::process::Child, String, String) {
    use tokio::io::AsyncBufReadExt as _;
    let port = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", db, "mcp", "--agent", "bot", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the gateway starts");
    let url = format!("http://127.0.0.1:{port}{}", assent_mcp::MCP_PATH);
    let stderr = child.stderr.take().expect("its stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let announced = format!("listening on {url} (agent bot)");
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(&announced) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "the gateway never said {announced:?}: {seen}"
    );
    // Keep reading, so the gateway never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url, seen)
}

#[tokio::test]
async fn a_wait_of_60_seconds_or_more_is_warned_about_at_start() {
    let s = setup();
    let fixture = fixture().display().to_string();
    let config = config_file(s.dir.path(), json!({"notes": {"command": fixture}}));
    let config = config.display().to_string();
    let (_gateway, _, said) = http_gateway_saying(
        &s.db,
        &[
            "--config".to_owned(),
            config.clone(),
            "--wait".to_owned(),
            "90".to_owned(),
        ],
    )
    .await;
    assert!(
        said.contains("--wait 90s is 60 s or more"),
        "the long wait is warned about: {said}"
    );
    let (_gateway, _, said) = http_gateway_saying(
        &s.db,
        &[
            "--config".to_owned(),
            config,
            "--wait".to_owned(),
            "50".to_owned(),
        ],
    )
    .await;
    assert!(!said.contains("60 s or more"), "{said}");
}

/// The status of a bare `initialize` POST to `url` with `headers`.
async fn initialize_status(url: &str, headers: &[(&str, &str)]) -> u16 {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"}}}),
        );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("an answer").status().as_u16()
}

#[tokio::test]
async fn the_gateway_over_http_needs_an_agent_token_of_its_agent_and_a_loopback_host() {
    let s = setup();
    let other = assent(
        &s.db,
        &["agent", "create", "--id", "other", "--categories", "mcp"],
    );
    assert!(other.status.success());
    let secret = agent_token(&s.db, "bot");
    let others = agent_token(&s.db, "other");
    let fixture = fixture().display().to_string();
    let config = config_file(
        s.dir.path(),
        json!({"notes": {"command": fixture, "assent": {"trust": "hints"}}}),
    );
    let (_gateway, url) = http_gateway(
        &s.db,
        &["--config".to_owned(), config.display().to_string()],
    )
    .await;
    let bearer = format!("Bearer {secret}");
    assert_eq!(initialize_status(&url, &[]).await, 401);
    assert_eq!(
        initialize_status(&url, &[("Authorization", "Bearer nope")]).await,
        401
    );
    let theirs = format!("Bearer {others}");
    assert_eq!(
        initialize_status(&url, &[("Authorization", &theirs)]).await,
        403,
        "another agent's token"
    );
    assert_eq!(
        initialize_status(
            &url,
            &[("Authorization", &bearer), ("Host", "evil.example")]
        )
        .await,
        403,
        "a Host outside the allowed ones"
    );
    assert_eq!(
        initialize_status(&url, &[("Authorization", &bearer)]).await,
        200
    );

    // rmcp's client over Streamable HTTP, with the token.
    let transport =
        assent_mcp::http_transport(&url, &[("Authorization".to_owned(), bearer.clone())].into())
            .expect("a transport");
    let client = ().serve(transport).await.expect("the MCP handshake");
    let existing = s.dir.path().join("existing.txt");
    std::fs::write(&existing, "hello\n").expect("a file to read");
    let read = call(&client, "notes__read_note", json!({"path": existing})).await;
    assert_eq!(text(&read), "hello\n");
    let note = s.dir.path().join("note.txt");
    let queued = call(
        &client,
        "notes__append_note",
        json!({"path": note, "text": "one"}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    confirm_and_see(&s.db, set_id(&reply), &note, "one\n").await;
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn assent_serve_mounts_the_gateway_at_mcp_beside_the_review_api() {
    let s = setup();
    let secret = agent_token(&s.db, "bot");
    let fixture = fixture().display().to_string();
    let config = config_file(
        s.dir.path(),
        json!({"notes": {"command": fixture, "assent": {"trust": "hints"}}}),
    );
    let port = free_port();
    let admin = "an-admin-token-of-enough-length-0123456789";
    let _server = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &s.db, "serve", "--addr"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--token", admin, "--mcp-agent", "bot", "--mcp-config"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("assent serve starts");
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://127.0.0.1:{port}{}", assent_mcp::MCP_PATH);
    let bearer = format!("Bearer {secret}");
    assert_eq!(initialize_status(&url, &[]).await, 401);
    let admin_bearer = format!("Bearer {admin}");
    assert_eq!(
        initialize_status(&url, &[("Authorization", &admin_bearer)]).await,
        401,
        "the review server's admin token is not an agent token of the gateway"
    );
    let session = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/session"))
        .header("Authorization", &admin_bearer)
        .send()
        .await
        .expect("the review API answers");
    assert_eq!(
        session.status().as_u16(),
        200,
        "the review API is still there"
    );

    let transport =
        assent_mcp::http_transport(&url, &[("Authorization".to_owned(), bearer)].into())
            .expect("a transport");
    let client = ().serve(transport).await.expect("the MCP handshake");
    let note = s.dir.path().join("served.txt");
    let queued = call(
        &client,
        "notes__append_note",
        json!({"path": note, "text": "from serve"}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    confirm_and_see(&s.db, set_id(&reply), &note, "from serve\n").await;
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn the_official_python_client_uses_one_config_of_the_npm_server_and_an_http_upstream_over_http()
 {
    let Some(python) = official_python() else {
        return;
    };
    let Some(server) = filesystem_server() else {
        return;
    };
    let s = setup();
    let root = s.dir.path().canonicalize().expect("the root");
    std::fs::write(root.join("readme.txt"), "from disk").expect("a file to read");
    let (_upstream, remote) = http_fixture(&[]).await;
    let config = config_file(
        &root,
        json!({
            "files": {"command": server, "args": [root], "assent": {"trust": "hints"}},
            "remote": {"url": remote, "assent": {"trust": "hints"}},
        }),
    );
    let secret = agent_token(&s.db, "bot");
    let target = root.join("written.txt");
    let note = root.join("note.txt");
    let calls = json!([
        {"tool": "files__read_text_file", "arguments": {"path": root.join("readme.txt")}},
        {"tool": "remote__read_note", "arguments": {"path": root.join("readme.txt")}},
        {"tool": "files__write_file", "arguments": {"path": target, "content": "hi"}},
        {"tool": "remote__append_note", "arguments": {"path": note, "text": "one"}},
    ]);

    // Over stdio: reads pass, writes are queued; a person confirms, the result arrives.
    let plan = json!({"command": env!("CARGO_BIN_EXE_assent"),
        "args": ["--db", s.db, "mcp", "--config", config, "--agent", "bot", "--wait", "30"],
        "calls": calls});
    let confirmer = tokio::spawn(confirm_each(s.db.clone(), 2));
    let report = run_python(&python, plan).await;
    confirmer.await.expect("the confirmations");
    let calls_made = &report["calls"];
    assert_eq!(
        calls_made[0]["structuredContent"]["content"], "from disk",
        "{report:#}"
    );
    assert_eq!(calls_made[1]["text"], "from disk", "{report:#}");
    assert_eq!(calls_made[2]["isError"], false, "{report:#}");
    assert_eq!(calls_made[3]["isError"], false, "{report:#}");
    assert_eq!(std::fs::read_to_string(&target).ok().as_deref(), Some("hi"));
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );

    // Over Streamable HTTP with the agent's token; refused without one.
    let (_gateway, url) = http_gateway(
        &s.db,
        &["--config".to_owned(), config.display().to_string()],
    )
    .await;
    let plan = json!({"url": url, "headers": {"Authorization": format!("Bearer {secret}")},
        "calls": [{"tool": "files__read_text_file",
                   "arguments": {"path": root.join("readme.txt")}},
                  {"tool": "remote__append_note", "arguments": {"path": note, "text": "two"}}]});
    let report = run_python(&python, plan).await;
    assert!(listed(&report, "files__write_file").is_some(), "{report:#}");
    assert_eq!(
        report["calls"][0]["structuredContent"]["content"], "from disk",
        "{report:#}"
    );
    assert!(
        report["calls"][1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(QUEUED)),
        "{report:#}"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let refused = tokio::process::Command::new(&python)
        .arg(script)
        .arg(json!({"url": url, "calls": []}).to_string())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the Python client runs");
    assert!(!refused.status.success(), "refused without a token");
}

/// Confirms the next `count` pending sets, as a person at the CLI would.
async fn confirm_each(db: String, count: usize) {
    let store = Store::open(&db).await.expect("the store");
    let mut seen = Vec::new();
    let started = std::time::Instant::now();
    while seen.len() < count {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never saw {count} sets"
        );
        let mut conn = store.read_connection().await.expect("a connection");
        let open = change_sets::pending(&mut conn, &change_sets::PendingFilter::default())
            .await
            .expect("pending");
        drop(conn);
        if let Some(set) = open.iter().find(|set| !seen.contains(&set.id)) {
            let out = assent(&db, &["confirm", &set.id.to_string(), "0"]);
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

/// A client that declares the tasks extension (`io.modelcontextprotocol/tasks`).
#[derive(Clone)]
struct TaskClient;

impl rmcp::ClientHandler for TaskClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
            rmcp::model::Implementation::new("task-client", "0"),
        )
    }
}

/// The gateway of the fixture as server `notes`, with a client that declares tasks.
async fn task_gateway(db: &str) -> RunningService<RoleClient, TaskClient> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args([
            "--db", db, "mcp", "--server", "notes", "--agent", "bot", "--wait", "30", "--",
        ])
        .arg(fixture())
        .env_remove("RUST_LOG");
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    TaskClient
        .serve(transport)
        .await
        .expect("the MCP handshake")
}

/// Calls `tool` expecting a task; its id.
async fn task_of(
    client: &RunningService<RoleClient, TaskClient>,
    tool: &str,
    args: Value,
) -> String {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let answer = client
        .peer()
        .call_tool_once(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("an answer");
    let rmcp::model::CallToolResponse::Task(created) = answer else {
        panic!("a task, not {answer:?}")
    };
    assert_eq!(created.task.status, rmcp::model::TaskStatus::Working);
    created.task.task_id
}

async fn task_state(
    client: &RunningService<RoleClient, TaskClient>,
    id: &str,
) -> rmcp::model::DetailedTask {
    client
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(id.to_owned()))
        .await
        .expect("tasks/get")
        .task
}

/// Polls task `id` (at most 10 s) until it leaves `working`.
async fn task_ends(
    client: &RunningService<RoleClient, TaskClient>,
    id: &str,
) -> rmcp::model::DetailedTask {
    let started = std::time::Instant::now();
    loop {
        let task = task_state(client, id).await;
        if task.status() != rmcp::model::TaskStatus::Working {
            return task;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still working: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_of_a_queued_call_survives_a_restart_and_ends_completed_failed_or_cancelled() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let client = task_gateway(&s.db).await;
    // Queued, answered at once with a task (not held by --wait).
    let started = std::time::Instant::now();
    let id = task_of(&client, "append_note", json!({"path": note, "text": "one"})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let (set, index) = assent_mcp::parse_task_id(&id).expect("SET/ITEM");
    assert_eq!(index, 0);
    assert_eq!(
        task_state(&client, &id).await.status(),
        rmcp::model::TaskStatus::Working
    );
    let rejected = task_of(&client, "append_note", json!({"path": note, "text": "two"})).await;
    let cancelled = task_of(
        &client,
        "append_note",
        json!({"path": note, "text": "three"}),
    )
    .await;
    client.cancel().await.expect("the client leaves");

    // The gateway restarts; the tasks are in the database.
    let client = task_gateway(&s.db).await;
    assert_eq!(
        task_state(&client, &id).await.status(),
        rmcp::model::TaskStatus::Working
    );
    let out = assent(&s.db, &["confirm", &set.to_string(), "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = task_ends(&client, &id).await;
    let rmcp::model::TaskPayload::Completed { result } = &done.payload else {
        panic!("completed, not {done:?}")
    };
    assert_eq!(result["isError"], json!(false), "{result:?}");
    assert!(
        !result["content"].as_array().expect("content").is_empty(),
        "{result:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );

    let (other, _) = assent_mcp::parse_task_id(&rejected).expect("SET/ITEM");
    let out = assent(
        &s.db,
        &[
            "reject",
            &other.to_string(),
            "0",
            "--reason",
            "not that line",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed = task_ends(&client, &rejected).await;
    let rmcp::model::TaskPayload::Failed { error } = &failed.payload else {
        panic!("failed, not {failed:?}")
    };
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("not that line")),
        "{error:?}"
    );

    client
        .peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(cancelled.clone()))
        .await
        .expect("tasks/cancel");
    let withdrawn = task_ends(&client, &cancelled).await;
    let rmcp::model::TaskPayload::Failed { error } = &withdrawn.payload else {
        panic!("failed, not {withdrawn:?}")
    };
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains(assent_mcp::CANCELLED_BY_AGENT)),
        "{error:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\n")
    );
    let unknown = client
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(format!(
            "{}/0",
            Uuid::new_v4()
        )))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_config_gateway_answers_tasks_of_each_server() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let fixture = fixture().display().to_string();
    let config = config_file(
        s.dir.path(),
        json!({"notes": {"command": fixture}, "other": {"command": fixture}}),
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", &s.db, "mcp", "--config"])
        .arg(&config)
        .args(["--agent", "bot"])
        .env_remove("RUST_LOG");
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    let client = TaskClient
        .serve(transport)
        .await
        .expect("the MCP handshake");
    let first = task_of(
        &client,
        "other__append_note",
        json!({"path": note, "text": "a"}),
    )
    .await;
    let second = task_of(
        &client,
        "notes__append_note",
        json!({"path": note, "text": "b"}),
    )
    .await;
    assert_eq!(
        task_state(&client, &first).await.status(),
        rmcp::model::TaskStatus::Working
    );
    let (set, _) = assent_mcp::parse_task_id(&second).expect("SET/ITEM");
    let out = assent(&s.db, &["confirm", &set.to_string(), "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = task_ends(&client, &second).await;
    assert_eq!(
        done.status(),
        rmcp::model::TaskStatus::Completed,
        "{done:?}"
    );
    assert_eq!(std::fs::read_to_string(&note).ok().as_deref(), Some("b\n"));
    client
        .peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(first.clone()))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        task_ends(&client, &first).await.status(),
        rmcp::model::TaskStatus::Failed
    );
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn an_http_upstream_that_dies_during_an_approved_call_leaves_it_in_doubt() {
    let s = setup();
    let (_server, url) = http_fixture(&[]).await;
    let config = config_file(s.dir.path(), json!({"remote": {"url": url}}));
    // The server's answer stream ends without an answer; rmcp's client tries to resume
    // it until the call deadline.
    let (client, _log) = config_gateway(&s.db, &config, &["--call-timeout", "2"]).await;
    let queued = call(
        &client,
        "remote__crash",
        json!({"path": s.dir.path().join("x")}),
    )
    .await;
    let reply = text(&queued);
    assert!(reply.starts_with(QUEUED), "{reply}");
    let set = set_id(&reply);
    let out = assent(&s.db, &["confirm", &set.to_string(), "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The POST reached the server, which died before answering: never retried silently.
    let job = job_becomes(&s.db, set, "inDoubt").await;
    assert_eq!(job["attempts"], json!(1), "{job:#}");
    client.cancel().await.expect("the client leaves");
}

// Issue 37: whose calls, named how.

/// `assent --db DB mcp --agent AGENT ARGS...` on stdio, with `client` as its MCP client.
async fn gateway_as<C: rmcp::ClientHandler>(
    client: C,
    db: &str,
    agent: &str,
    args: &[String],
) -> RunningService<RoleClient, C> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", db, "mcp", "--agent", agent])
        .args(args)
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    let transport = TokioChildProcess::new(command).expect("the gateway starts");
    client.serve(transport).await.expect("the MCP handshake")
}

/// `--server NAME -- FIXTURE`.
fn single(server: &str) -> Vec<String> {
    vec![
        "--server".to_owned(),
        server.to_owned(),
        "--".to_owned(),
        fixture().display().to_string(),
    ]
}

fn agents(db: &str, ids: &[&str]) {
    for id in ids {
        succeeded(&assent(
            db,
            &["agent", "create", "--id", id, "--categories", "mcp"],
        ));
    }
}

/// Records item 0 of `set` of agent `agent` as the previous release did: its job's
/// host, and its server's catalog, named after the server alone (`mcp_NAME`).
async fn as_the_previous_release(db: &str, agent: &str, set: Uuid, server: &str) {
    let store = Store::open(db).await.expect("the store");
    let mut conn = store.read_connection().await.expect("a connection");
    let legacy = assent_store::jobs::ExternalItem {
        host: format!("mcp_{server}"),
        idempotent: false,
    };
    assent_store::jobs::mark_external(&mut conn, set, 0, &legacy)
        .await
        .expect("marked");
    sqlx::query("UPDATE host_tools SET host = $1 WHERE host = $2")
        .bind(&legacy.host)
        .bind(assent_mcp::gateway_host(agent, server))
        .execute(&mut *conn)
        .await
        .expect("the catalog moved");
    // The previous release recorded no gateway sessions.
    sqlx::query("DELETE FROM mcp_session_calls WHERE change_set_id = $1")
        .bind(set.to_string())
        .execute(&mut *conn)
        .await
        .expect("the session forgotten");
    drop(conn);
    store.close().await;
}

/// The host whose executors run the job of item 0 of `set`.
async fn job_host(db: &str, set: Uuid) -> String {
    let store = Store::open(db).await.expect("the store");
    let mut conn = store.read_connection().await.expect("a connection");
    let job = assent_store::jobs::for_item(&mut conn, set, 0)
        .await
        .expect("read")
        .expect("a job");
    drop(conn);
    store.close().await;
    job.host
}

#[tokio::test]
async fn two_agents_gateways_of_one_server_name_run_and_answer_only_their_own_calls() {
    let s = setup();
    agents(&s.db, &["desktop", "cursor"]);
    let note = s.dir.path().join("note.txt");
    let desktop = gateway_as(TaskClient, &s.db, "desktop", &single("files")).await;
    let first = task_of(
        &desktop,
        "append_note",
        json!({"path": note, "text": "one"}),
    )
    .await;
    let second = task_of(
        &desktop,
        "append_note",
        json!({"path": note, "text": "two"}),
    )
    .await;
    desktop.cancel().await.expect("the client leaves");

    // Cursor's gateway of its own `files`: desktop's tasks are unknown to it, with the
    // very error of a task that does not exist, and its cancel changes nothing.
    let cursor = gateway_as(TaskClient, &s.db, "cursor", &single("files")).await;
    let missing = format!("{}/0", Uuid::new_v4());
    let nowhere = cursor
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(missing.clone()))
        .await
        .expect_err("no such task")
        .to_string();
    assert!(nowhere.contains("unknown task"), "{nowhere}");
    for id in [&first, &second] {
        let read = cursor
            .peer()
            .get_task(rmcp::model::GetTaskParams::new(id.clone()))
            .await
            .expect_err("another agent's task is unknown")
            .to_string();
        assert_eq!(read, nowhere.replace(&missing, id));
    }
    let cancelled = cursor
        .peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(second.clone()))
        .await
        .expect_err("another agent's task cannot be cancelled")
        .to_string();
    assert!(cancelled.contains("unknown task"), "{cancelled}");
    let (second_set, _) = assent_mcp::parse_task_id(&second).expect("SET/ITEM");
    let pending = succeeded(&assent(&s.db, &["--json", "pending"]));
    assert!(
        pending.contains(&second_set.to_string()),
        "still pending: {pending}"
    );

    // Desktop's call confirmed while only cursor's gateway runs: it stays unrun.
    let (set, _) = assent_mcp::parse_task_id(&first).expect("SET/ITEM");
    succeeded(&assent(&s.db, &["confirm", &set.to_string(), "0"]));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!note.exists(), "another agent's gateway ran the call");
    assert_eq!(job_of(&s.db, set).expect("a job")["status"], "approved");
    cursor.cancel().await.expect("the client leaves");

    let desktop = gateway_as(TaskClient, &s.db, "desktop", &single("files")).await;
    file_becomes(&note, "one\n").await;
    job_becomes(&s.db, set, "applied").await;
    desktop.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn calls_the_previous_release_recorded_run_once_on_their_own_agents_gateway() {
    let s = setup();
    agents(&s.db, &["desktop", "cursor"]);
    let note = s.dir.path().join("note.txt");
    let fixture = fixture().display().to_string();
    let config = config_file(s.dir.path(), json!({"notes": {"command": fixture}}));
    let config_args = vec!["--config".to_owned(), config.display().to_string()];
    // Queued under the upstream's bare name on target `notes`, then recorded as the
    // previous release recorded them (a `--config` gateway's items were bare-named).
    let desktop = gateway_as((), &s.db, "desktop", &single("notes")).await;
    let one = set_id(&text(
        &call(
            &desktop,
            "append_note",
            json!({"path": note, "text": "one"}),
        )
        .await,
    ));
    let two = set_id(&text(
        &call(
            &desktop,
            "append_note",
            json!({"path": note, "text": "two"}),
        )
        .await,
    ));
    desktop.cancel().await.expect("the client leaves");
    as_the_previous_release(&s.db, "desktop", one, "notes").await;
    as_the_previous_release(&s.db, "desktop", two, "notes").await;
    succeeded(&assent(&s.db, &["confirm", &one.to_string(), "0"]));
    assert_eq!(job_host(&s.db, one).await, "mcp_notes");

    // Cursor's gateway of its own `notes` leaves desktop's calls alone.
    let cursor = gateway_as((), &s.db, "cursor", &config_args).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!note.exists(), "another agent's gateway ran the call");
    assert_eq!(job_of(&s.db, one).expect("a job")["status"], "approved");
    cursor.cancel().await.expect("the client leaves");

    // Desktop's gateway takes them over: the confirmed one runs once, and the other,
    // bare-named behind --config, is still confirmed and run.
    let desktop = gateway_as((), &s.db, "desktop", &config_args).await;
    file_becomes(&note, "one\n").await;
    job_becomes(&s.db, one, "applied").await;
    assert_eq!(job_host(&s.db, one).await, "mcpa_desktop_x_notes");
    succeeded(&assent(&s.db, &["confirm", &two.to_string(), "0"]));
    file_becomes(&note, "one\ntwo\n").await;
    job_becomes(&s.db, two, "applied").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("one\ntwo\n"),
        "a call ran twice"
    );
    desktop.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_config_gateways_rules_name_each_servers_tool_as_the_client_does() {
    let s = setup();
    let note = s.dir.path().join("note.txt");
    let fixture = fixture().display().to_string();
    let config = config_file(
        s.dir.path(),
        json!({"notes": {"command": fixture}, "prod": {"command": fixture}}),
    );
    // A rule for the upstream's bare name covers no server's tool behind --config.
    succeeded(&assent(&s.db, &["agent", "allow", "bot", "append_note"]));
    let (client, _log) = config_gateway(&s.db, &config, &[]).await;
    for server in ["notes", "prod"] {
        let queued = call(
            &client,
            &format!("{server}__append_note"),
            json!({"path": note, "text": server}),
        )
        .await;
        assert!(text(&queued).starts_with(QUEUED), "{}", text(&queued));
    }
    assert!(!note.exists(), "a bare rule let a namespaced tool run");

    // The name the client sees lets that server's tool run at once, and only it.
    succeeded(&assent(
        &s.db,
        &["agent", "allow", "bot", "notes__append_note"],
    ));
    let ran = call(
        &client,
        "notes__append_note",
        json!({"path": note, "text": "now"}),
    )
    .await;
    assert_ne!(ran.is_error, Some(true), "{}", text(&ran));
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("now\n")
    );
    let queued = call(
        &client,
        "prod__append_note",
        json!({"path": note, "text": "later"}),
    )
    .await;
    assert!(text(&queued).starts_with(QUEUED), "{}", text(&queued));
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("now\n")
    );

    // Items, and what a person reviews, name the tool as the client does; a queued
    // one runs on its own server when confirmed.
    let pending = succeeded(&assent(&s.db, &["--json", "pending"]));
    assert!(pending.contains("\"prod__append_note\""), "{pending}");
    assert!(!pending.contains("\"append_note\""), "{pending}");
    confirm_and_see(&s.db, set_id(&text(&queued)), &note, "now\nlater\n").await;
    client.cancel().await.expect("the client leaves");
}

#[tokio::test]
async fn a_server_name_that_would_split_two_ways_is_refused() {
    let s = setup();
    let fixture = fixture().display().to_string();
    for bad in ["s_", "_s", "a__b"] {
        let out = assent(
            &s.db,
            &["mcp", "--server", bad, "--agent", "bot", "--", &fixture],
        );
        assert_eq!(out.status.code(), Some(2), "--server {bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("{bad:?}")), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(out.stdout.is_empty());
    }
    // In a configuration file: reported and skipped, the others served.
    let config = config_file(
        s.dir.path(),
        json!({"s_": {"command": fixture}, "s": {"command": fixture}}),
    );
    let (client, log) = config_gateway(&s.db, &config, &[]).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names = names(&tools);
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("s__") || n == assent_mcp::STATUS_TOOL),
        "{names:?}"
    );
    let unknown = client
        .peer()
        .call_tool(CallToolRequestParams::new("s___append_note"))
        .await
        .expect_err("no server `s_`, and `s` has no tool `_append_note`");
    assert!(unknown.to_string().contains("s___append_note"), "{unknown}");
    client.cancel().await.expect("the client leaves");
    let log = log.lock().expect("the log").clone();
    assert!(
        log.lines().any(|line| line.contains("s_")
            && line.contains("skipped")
            && line.contains("starts or ends with `_`")),
        "{log}"
    );
}

#[tokio::test]
async fn a_failing_servers_url_secrets_are_not_logged() {
    let s = setup();
    let fixture = fixture().display().to_string();
    let port = free_port();
    let config = config_file(
        s.dir.path(),
        json!({
            "remote": {"url": format!("http://alice:pa55word@127.0.0.1:{port}/mcp?api_key=s3cret&v=1")},
            "odd": {"url": "ftp://bob:hunter2@example.invalid/?token=t0ken"},
            "notes": {"command": fixture},
        }),
    );
    let (client, log) = config_gateway(&s.db, &config, &[]).await;
    client.cancel().await.expect("the client leaves");
    let log = log.lock().expect("the log").clone();
    assert!(
        log.lines()
            .any(|line| line.contains("remote") && line.contains("did not start")),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "http://***@127.0.0.1:{port}/mcp?api_key=***&v=***"
        )),
        "{log}"
    );
    for secret in ["alice", "pa55word", "s3cret", "bob", "hunter2", "t0ken"] {
        assert!(!log.contains(secret), "{secret} is logged: {log}");
    }
}
