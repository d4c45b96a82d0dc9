//! The server under slow clients and other processes: header-read timeouts, a cap on
//! connections, and writes by another process reaching the event stream.

use crate::support::{TestServer, next_event};
use assent_server::ServerLimits;
use assent_store::Store;
use reqwest::Method;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn quick_limits() -> ServerLimits {
    ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        max_connections: 2,
        feed_interval: Duration::from_millis(100),
        ..ServerLimits::default()
    }
}

async fn stalled_connection(server: &TestServer) -> tokio::net::TcpStream {
    let address = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /api/session HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("half the headers");
    stream
}

#[tokio::test]
async fn connections_that_never_finish_their_headers_are_closed_and_capped() {
    let server = TestServer::start_with(|s| s.with_limits(quick_limits())).await;
    let mut first = stalled_connection(&server).await;
    let _second = stalled_connection(&server).await;

    // Both slots are taken by clients that never finish: a third waits...
    let waiting = server
        .request(Method::GET, "/api/session")
        .timeout(Duration::from_millis(150))
        .send()
        .await;
    assert!(waiting.is_err(), "served beyond the connection cap");

    // ...until the header-read timeout closes the stalled ones.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), first.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a stalled connection stays open");
    let (status, body) = server.get("/api/session").await;
    assert_eq!(status, 200, "{body}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_body_that_never_arrives_is_answered_408() {
    let server = TestServer::start_with(|s| s.with_limits(quick_limits())).await;
    let address = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST /api/wakes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
        crate::support::TOKEN
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = vec![0_u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_write_by_another_process_reaches_the_event_stream() {
    let server = TestServer::start_with(|s| s.with_limits(quick_limits())).await;
    let task = server.agent_and_task("Elsewhere").await;
    let mut buffer = String::new();
    let mut stream = server.events(&mut buffer).await;
    // Let the feed follower take its starting position.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Another process: its own pool on the same file, and an engine that publishes
    // nothing to this server.
    let other = Store::open(&server.url).await.expect("a second opener");
    let engine = assent_journal_host::journal_engine(other.clone())
        .await
        .expect("journal engine");
    let calls = assent_changeset::parse_tool_calls(&json!([
        {"id": "c", "type": "function", "function": {"name": "update_task_priority", "arguments": "{\"priority\":\"P1\"}"}}
    ]))
    .expect("calls");
    let wake = engine
        .wakes()
        .wake(
            assent_confirm::WakeRequest::new(
                "triage",
                assent_journal_host::task_target(task.as_str()),
                "run-elsewhere",
                calls,
            ),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .expect("wake");
    let set = wake.change_set.expect("queued").id;

    let announced = tokio::time::timeout(
        Duration::from_secs(5),
        next_event(&mut stream, &mut buffer, "changeSetUpdated"),
    )
    .await
    .expect("announced within a few seconds");
    assert_eq!(announced["changeSet"]["id"], set.to_string());
    other.close().await;
    server.stop().await.expect("clean stop");
}
