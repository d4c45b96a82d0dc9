//! `assent sync --peer URL --token TOKEN`: one round trip with a peer's `assent serve`
//! that syncs both ways. This device's batch goes up in `POST /api/sync`; the answer is
//! what the peer merged and the peer's own batch, which is merged here.
//!
//! No transaction is open while the network is: the export runs in a short write
//! transaction (it claims the outbox messages the batch covers), the round trip runs
//! with nothing locked, and the answer is merged in a write transaction of its own,
//! which also marks the claimed messages sent. Local writes made meanwhile are safe:
//! the merge reads the state as it is then, and vector clocks order the peer's versions
//! against them (merging is idempotent). A failure (unreachable peer, refused token,
//! redirect, timeout, an answer that is not a sync answer, a refused merge) changes no
//! local state; the claimed messages' lease runs out and the next export takes them.
//! The exchange takes at most [`PEER_TIMEOUT`]; redirects are never followed (the batch
//! goes to the URL given or nowhere). The token only ever travels in the
//! `Authorization` header.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use crate::sync_batches::batch_summary;
use assent_confirm::Engine;
use assent_confirm::admin::ClaimedExport;
use assent_server::{DEFAULT_SYNC_BODY_LIMIT, SyncExchange};
use assent_sync::SyncBatch;
use reqwest::{StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;
use uuid::Uuid;

/// How long reaching the peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the whole exchange with the peer may take (both requests, answers
/// included). Nothing is locked meanwhile, but a command that hangs helps nobody.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the outbox messages of a batch stay claimed beyond the exchange: a crash
/// meanwhile leaves them claimed until then.
const LEASE_MARGIN: Duration = Duration::from_secs(60);

/// A peer's API: its base URL, the token and an HTTP client.
struct Peer {
    base: Url,
    token: String,
    client: reqwest::Client,
}

impl Peer {
    fn new(url: &str, token: &str, timeout: Duration) -> Result<Self, CliError> {
        let base = parse_peer_url(url)?;
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT.min(timeout))
            .timeout(timeout)
            // The batch goes to the URL the person gave, never to where a peer points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| CliError::failed(format!("cannot start the HTTP client: {e}")))?;
        Ok(Self {
            base,
            token: token.trim().to_owned(),
            client,
        })
    }

    fn endpoint(&self, path: &str) -> Result<Url, CliError> {
        self.base
            .join(path)
            .map_err(|e| CliError::failed(format!("invalid peer URL {}: {e}", self.base)))
    }

    /// `GET /api/sync/host`: the peer's host id. Checks reachability and the token
    /// before anything here is locked.
    async fn host_id(&self) -> Result<String, CliError> {
        let url = self.endpoint("api/sync/host")?;
        let request = self.client.get(url.clone()).bearer_auth(&self.token);
        let answer: Value = self.send(&url, request).await?;
        answer["hostId"]
            .as_str()
            .filter(|host| !host.trim().is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                CliError::failed(format!(
                    "peer {url} answered without a host id: is it an Assent server?"
                ))
            })
    }

    /// `POST /api/sync` with `batch`.
    async fn exchange(&self, batch: &SyncBatch) -> Result<SyncExchange, CliError> {
        let url = self.endpoint("api/sync")?;
        let request = self
            .client
            .post(url.clone())
            .bearer_auth(&self.token)
            .json(batch);
        self.send(&url, request).await
    }

    /// Sends `request` and reads a JSON answer of type `T`, or explains why not.
    async fn send<T: DeserializeOwned>(
        &self,
        url: &Url,
        request: reqwest::RequestBuilder,
    ) -> Result<T, CliError> {
        let mut response = request.send().await.map_err(|e| {
            let what = if e.is_timeout() {
                format!("peer {url} did not answer in time")
            } else {
                format!("cannot reach peer {url}")
            };
            CliError::Failed(anyhow::Error::new(e).context(what))
        })?;
        let status = response.status();
        if status.is_redirection() {
            let target = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|location| location.to_str().ok())
                .map(|location| format!(" to {location:?}"))
                .unwrap_or_default();
            return Err(CliError::failed(format!(
                "peer {url} answered {status}, a redirect{target}; sync never follows redirects: point --peer at the peer's `assent serve` itself"
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            let what = if e.is_timeout() {
                format!("peer {url} did not finish its answer in time")
            } else {
                format!("cannot read the answer of peer {url}")
            };
            CliError::Failed(anyhow::Error::new(e).context(what))
        })? {
            if body.len() + chunk.len() > DEFAULT_SYNC_BODY_LIMIT {
                return Err(CliError::failed(format!(
                    "peer {url} answered with more than {DEFAULT_SYNC_BODY_LIMIT} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if status == StatusCode::UNAUTHORIZED {
            return Err(CliError::failed(format!(
                "peer {url} refused the token (401): check --token or ASSENT_PEER_TOKEN"
            )));
        }
        if !status.is_success() {
            // Assent answers errors as problem details; say what it said, if it did.
            let detail = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|problem| problem["detail"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "no details".to_owned());
            return Err(CliError::failed(format!(
                "peer {url} answered {status}: {detail}"
            )));
        }
        serde_json::from_slice(&body).map_err(|e| {
            CliError::failed(format!(
                "peer {url} did not answer with Assent's sync JSON ({e}): is it an Assent server?"
            ))
        })
    }
}

/// The peer's base URL, `http://` or `https://`, with a final `/` so that API paths
/// join below it rather than beside it.
fn parse_peer_url(text: &str) -> Result<Url, CliError> {
    let text = text.trim();
    let mut url = Url::parse(text)
        .map_err(|e| CliError::failed(format!("invalid peer URL {text:?}: {e}")))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(CliError::failed(format!(
                "peer URL {text:?} has scheme {other:?}; expected https://HOST:PORT or http://HOST:PORT"
            )));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CliError::failed(format!(
            "peer URL {text:?} carries credentials; pass the token with --token or ASSENT_PEER_TOKEN instead"
        )));
    }
    url.set_query(None);
    url.set_fragment(None);
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// Whether requests to `url` stay on this machine.
fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// Puts the outbox messages of a batch that did not get through back in the queue
/// (best effort: if this fails too, their lease runs out).
async fn release(engine: &Engine, export: &ClaimedExport) {
    if let Err(error) = engine.admin().release_sync_export(export).await {
        tracing::warn!(%error, "could not put the outbox messages of the failed sync back");
    }
}

/// Runs `assent sync --peer URL --token TOKEN`.
pub async fn run(ctx: &Ctx, url: &str, token: &str) -> Result<Output, CliError> {
    run_with(ctx, url, token, PEER_TIMEOUT).await
}

/// [`run`], with the exchange's time limit as an argument (tests use a short one).
#[tracing::instrument(name = "sync_with_peer", skip_all, fields(peer = url))]
async fn run_with(
    ctx: &Ctx,
    url: &str,
    token: &str,
    timeout: Duration,
) -> Result<Output, CliError> {
    let peer = Peer::new(url, token, timeout)?;
    if peer.base.scheme() == "http" && !is_loopback(&peer.base) {
        tracing::warn!(
            peer = %peer.base,
            "the token and the batch travel unencrypted over plain HTTP; prefer https:// or an SSH tunnel"
        );
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let base = &peer.base;
    let in_time = |what: &'static str| {
        move |_| {
            CliError::failed(format!(
                "peer {base} did not answer in time ({what}; the limit is {}s)",
                timeout.as_secs_f32()
            ))
        }
    };
    let peer_host = tokio::time::timeout_at(deadline, peer.host_id())
        .await
        .map_err(in_time("host id"))??;
    let host_id = ctx.store().device_id();
    if peer_host == host_id {
        return Err(CliError::failed(format!(
            "peer {} is this device itself (host id {host_id}); point --peer at another device's `assent serve`",
            peer.base
        )));
    }
    // A short transaction: the export, and the outbox messages it covers claimed.
    let lease = time::Duration::try_from(timeout + LEASE_MARGIN)
        .map_err(|e| CliError::failed(format!("invalid sync timeout: {e}")))?;
    let export = ctx
        .engine
        .admin()
        .claim_sync_export(Uuid::new_v4(), ctx.now, lease)
        .await?;
    let batch = &export.batch;
    let outcome: Result<_, CliError> = async {
        // The round trip, with nothing locked here.
        let answer = tokio::time::timeout_at(deadline, peer.exchange(batch))
            .await
            .map_err(in_time("sync exchange"))??;
        if answer.report.batch_id != batch.batch_id || answer.batch.from_host != peer_host {
            return Err(CliError::failed(format!(
                "peer {} answered about batch {} of host {}, not about batch {} of this device for host {peer_host}",
                peer.base, answer.report.batch_id, answer.batch.from_host, batch.batch_id
            )));
        }
        // The merge of the answer, in a transaction of its own, against the state as
        // it is now (local writes made during the round trip included); a refused
        // answer is recorded in the imports' log.
        let merged = ctx
            .engine
            .admin().merge_peer_batch(&export, &answer.batch, ctx.now)
            .await?;
        Ok((answer, merged))
    }
    .await;
    let (answer, merged) = match outcome {
        Ok(done) => done,
        Err(error) => {
            release(&ctx.engine, &export).await;
            return Err(error);
        }
    };
    tracing::info!(
        peer_conflicts = answer.report.conflicts.len(),
        conflicts = merged.conflicts.len(),
        "synced with peer"
    );
    let summary = json!({
        "peer": peer.base.as_str(),
        "peerHost": peer_host,
        "sent": batch_summary(batch),
        "peerImport": answer.report,
        "localImport": merged,
    });
    Output::either(ctx.json, &summary, || {
        render::synced(peer.base.as_str(), &peer_host, &answer.report, &merged)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_tests::{NOW, TestApp};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

    #[test]
    fn peer_urls_are_http_bases_ending_in_a_slash() {
        let base = |text: &str| parse_peer_url(text).map(|url| url.to_string()).ok();
        assert_eq!(
            base("http://127.0.0.1:7700").as_deref(),
            Some("http://127.0.0.1:7700/")
        );
        assert_eq!(
            base(" http://laptop.local:7700/assent?x=1#y ").as_deref(),
            Some("http://laptop.local:7700/assent/")
        );
        assert_eq!(
            base("https://phone.example:7700").as_deref(),
            Some("https://phone.example:7700/")
        );
        for bad in [
            "ftp://127.0.0.1",
            "127.0.0.1:7700",
            "",
            "http://user:secret@127.0.0.1:7700",
        ] {
            assert_eq!(base(bad), None, "{bad:?}");
        }
        let joined = parse_peer_url("http://h:1/assent")
            .and_then(|url| {
                url.join("api/sync")
                    .map_err(|e| CliError::failed(e.to_string()))
            })
            .map(|url| url.to_string())
            .ok();
        assert_eq!(joined.as_deref(), Some("http://h:1/assent/api/sync"));
    }

    #[test]
    fn loopback_peers_are_recognised() {
        let loopback = |text: &str| parse_peer_url(text).map(|url| is_loopback(&url)).ok();
        assert_eq!(loopback("http://127.0.0.1:7700"), Some(true));
        assert_eq!(loopback("http://[::1]:7700"), Some(true));
        assert_eq!(loopback("http://LOCALHOST:7700"), Some(true));
        assert_eq!(loopback("http://192.168.1.5:7700"), Some(false));
        assert_eq!(loopback("http://phone.local:7700"), Some(false));
    }

    /// What the fake peer does with `POST /api/sync`.
    #[derive(Clone)]
    enum Answer {
        /// Reads the batch and never answers.
        Silence,
        /// Answers 307 to this URL (a redirect that keeps the method and body).
        Redirect(String),
    }

    async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
        use tokio::io::AsyncReadExt;
        let mut data = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&data[..head_end]).to_string();
        let length = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while data.len() < head_end + length {
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..n]);
        }
        let request_line = head.lines().next().unwrap_or_default().to_owned();
        Some((request_line, data[head_end..].to_vec()))
    }

    async fn respond(stream: &mut tokio::net::TcpStream, status: &str, extra: &str, body: &str) {
        use tokio::io::AsyncWriteExt;
        let text = format!(
            "HTTP/1.1 {status}\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(text.as_bytes()).await;
    }

    /// A fake peer on a random loopback port: answers its host id, and `answer` to the
    /// batch; `posts` counts the batches it received. Returns its base URL.
    async fn fake_peer(answer: Answer, posts: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (answer, posts) = (answer.clone(), posts.clone());
                tokio::spawn(async move {
                    while let Some((line, _body)) = read_request(&mut stream).await {
                        if line.starts_with("GET /api/sync/host ") {
                            respond(&mut stream, "200 OK", "", r#"{"hostId":"fake-peer"}"#).await;
                            continue;
                        }
                        posts.fetch_add(1, AtomicOrdering::SeqCst);
                        match &answer {
                            Answer::Silence => std::future::pending::<()>().await,
                            Answer::Redirect(to) => {
                                let location = format!("location: {to}\r\n");
                                respond(&mut stream, "307 Temporary Redirect", &location, "{}")
                                    .await;
                            }
                        }
                    }
                });
            }
        });
        base
    }

    /// A device with one pending proposal: the app, and the set.
    async fn device_with_a_proposal() -> (TestApp, Uuid) {
        let app = TestApp::device("device-a").await;
        let task = app.scene().await;
        let set = app
            .wake(
                &task,
                &[("update_task_priority", json!({"priority": "P0"}))],
            )
            .await
            .change_set
            .expect("a proposal")
            .id;
        (app, set)
    }

    /// A peer that takes the batch and never answers blocks no local write (a person
    /// confirms meanwhile, from another connection pool as another process would), and
    /// the sync gives up within its time limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_peer_blocks_no_local_write_and_the_sync_times_out() {
        let (app, set) = device_with_a_proposal().await;
        let posts = Arc::new(AtomicUsize::new(0));
        let base = fake_peer(Answer::Silence, posts.clone()).await;
        let ctx = Ctx::open(&app.url(), NOW, true).await.expect("open");
        let limit = Duration::from_secs(3);
        let started = std::time::Instant::now();
        let sync = tokio::spawn(async move { run_with(&ctx, &base, "token", limit).await });
        while posts.load(AtomicOrdering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let confirmed = tokio::time::timeout(
            Duration::from_secs(2),
            app.engine
                .confirmations()
                .confirm_item(assent_confirm::ItemRef::new(set, 0), NOW),
        )
        .await;
        assert!(
            matches!(confirmed, Ok(Ok(_))),
            "a local confirmation during the round trip: {confirmed:?}"
        );
        assert!(!sync.is_finished(), "the sync still waits for its peer");
        let Err(error) = sync.await.expect("the sync task") else {
            panic!("a silent peer cannot sync");
        };
        let elapsed = started.elapsed();
        assert!(
            elapsed >= limit && elapsed < limit + Duration::from_secs(2),
            "{elapsed:?}"
        );
        assert!(
            error.one_line().contains("did not answer in time"),
            "{}",
            error.one_line()
        );
        // The confirmation stands, and the failed sync merged nothing over it.
        let stored = app
            .engine
            .change_set(set)
            .await
            .expect("read")
            .expect("the set");
        assert!(stored.items[0].status.is_decided());
        assert!(PEER_TIMEOUT <= Duration::from_secs(30));
    }

    /// A peer that answers the batch with a redirect: refused, and the target of the
    /// redirect receives nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redirecting_peer_is_refused_and_the_batch_goes_nowhere_else() {
        let (app, _set) = device_with_a_proposal().await;
        let target_posts = Arc::new(AtomicUsize::new(0));
        let target = fake_peer(Answer::Silence, target_posts.clone()).await;
        let posts = Arc::new(AtomicUsize::new(0));
        let base = fake_peer(
            Answer::Redirect(format!("{target}/api/sync")),
            posts.clone(),
        )
        .await;
        let ctx = Ctx::open(&app.url(), NOW, true).await.expect("open");
        let outcome = run_with(&ctx, &base, "token", Duration::from_secs(3)).await;
        let Err(error) = outcome else {
            panic!("a redirect cannot sync");
        };
        assert!(
            error.one_line().contains("never follows redirects"),
            "{}",
            error.one_line()
        );
        assert_eq!(posts.load(AtomicOrdering::SeqCst), 1);
        assert_eq!(
            target_posts.load(AtomicOrdering::SeqCst),
            0,
            "nothing posted elsewhere"
        );
    }
}
