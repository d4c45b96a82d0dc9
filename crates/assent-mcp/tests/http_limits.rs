//! `assent mcp --http` under clients that never finish: the gateway is served by `assent
//! serve`'s own accept loop, so a connection that sends no headers is closed after the
//! header-read timeout, and connections beyond the cap wait unserved until a slot
//! frees; then an authenticated request gets through (as `assent serve`'s own limits
//! are tested in assent-server's `limits.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assent_mcp::{Deadlines, Downstream, GatewayOptions, HttpDownstream, MCP_PATH, Trust, run_one};
use assent_server::ServerLimits;
use assent_store::tokens::{self, Role};
use assent_store::{Store, agents};
use assent_tools::AgentPolicy;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A free loopback port (bound and released; the gateway binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("its address")
        .port()
}

/// A connection that sent half a request's headers and nothing more.
async fn stalled(port: u16) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("half the headers");
    stream
}

/// A bare `initialize` POST with `secret` as its agent token, written by hand on a
/// new connection: its status, or `None` when no answer came within `timeout`.
async fn initialize(port: u16, secret: &str, timeout: Duration) -> Option<u16> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}})
    .to_string();
    let request = format!(
        "POST {MCP_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, \
         text/event-stream\r\nContent-Type: application/json\r\nAuthorization: Bearer \
         {secret}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut head = [0_u8; 12];
        stream.read_exact(&mut head).await.expect("a status line");
        String::from_utf8_lossy(&head[9..12]).parse::<u16>().ok()
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_header_timeout_and_capped() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = format!("sqlite://{}", dir.path().join("assent.db").display());
    let store = Store::open(&db).await.expect("the store");
    let now = OffsetDateTime::now_utc();
    let secret = {
        let mut conn = store.read_connection().await.expect("a connection");
        agents::upsert(&mut conn, "bot", &AgentPolicy::new(["mcp"]), now)
            .await
            .expect("the agent");
        tokens::issue(&mut conn, Role::Agent, Some("bot"), now)
            .await
            .expect("a token")
            .secret
    };
    let port = free_port();
    let options = GatewayOptions {
        server: "notes".to_owned(),
        agent: "bot".to_owned(),
        category: "mcp".to_owned(),
        wait: None,
        trust: Trust::None,
        deadlines: Deadlines::default(),
        public_url: None,
        ask_in_client: false,
        previews: Default::default(),
    };
    let downstream = Downstream::Http(HttpDownstream {
        addr: ([127, 0, 0, 1], port).into(),
        allowed_hosts: Vec::new(),
        limits: ServerLimits {
            header_read_timeout: Duration::from_millis(500),
            max_connections: 2,
            ..ServerLimits::default()
        },
    });
    let fixture = env!("CARGO_BIN_EXE_assent-mcp-fixture");
    let gateway = tokio::spawn(run_one(store, options, fixture, &[], downstream));
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
    // The probe above took a slot for a moment; let it go.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut first = stalled(port).await;
    let _second = stalled(port).await;
    // Both slots are taken by clients that never finish: an agent with a token waits...
    let waiting = initialize(port, &secret, Duration::from_millis(200)).await;
    assert_eq!(waiting, None, "served beyond the connection cap");

    // ...until the header-read timeout closes the stalled ones.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), first.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a connection without headers stays open");
    let status = initialize(port, &secret, Duration::from_secs(10)).await;
    assert_eq!(status, Some(200), "served once slots are free");
    gateway.abort();
}
