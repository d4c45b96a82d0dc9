//! `assent sync --peer URL --token TOKEN`: one round trip with a peer's `assent serve`
//! that syncs both ways. This device's batch goes up in `POST /api/sync`; the answer is
//! what the peer merged and the peer's own batch, which is merged here.
//!
//! The local side runs in one write transaction, from the export (which drains the
//! outbox) to the merge of the answer: an unreachable peer, a refused token, an answer
//! that is not a sync answer or a refused merge rolls it back, so a failure changes
//! nothing on this device. The token only ever travels in the `Authorization` header.

use crate::CliError;
use crate::commands::{Ctx, Output};
use crate::render;
use crate::sync_commands::batch_summary;
use assent_journal_host::TaskEntities;
use assent_server::{DEFAULT_SYNC_BODY_LIMIT, SyncExchange};
use assent_store::StoreError;
use assent_store::sync;
use assent_sync::SyncBatch;
use reqwest::{StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;
use uuid::Uuid;

/// How long reaching the peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, answer included: a batch can be large and the link
/// slow, but this device's write lock is held meanwhile.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A peer's API: its base URL, the token and an HTTP client.
struct Peer {
    base: Url,
    token: String,
    client: reqwest::Client,
}

impl Peer {
    fn new(url: &str, token: &str) -> Result<Self, CliError> {
        let base = parse_peer_url(url)?;
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
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
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            CliError::Failed(
                anyhow::Error::new(e).context(format!("cannot read the answer of peer {url}")),
            )
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

/// The peer's base URL: `http://` only (this build has no TLS stack), with a final `/`
/// so that API paths join below it rather than beside it.
fn parse_peer_url(text: &str) -> Result<Url, CliError> {
    let text = text.trim();
    let mut url = Url::parse(text)
        .map_err(|e| CliError::failed(format!("invalid peer URL {text:?}: {e}")))?;
    match url.scheme() {
        "http" => {}
        "https" => {
            return Err(CliError::failed(format!(
                "peer URL {text:?}: https is not supported by this build; reach the peer's `assent serve` over an SSH tunnel or on loopback (http://)"
            )));
        }
        other => {
            return Err(CliError::failed(format!(
                "peer URL {text:?} has scheme {other:?}; expected http://HOST:PORT"
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

/// Runs `assent sync --peer URL --token TOKEN`.
#[tracing::instrument(name = "sync_with_peer", skip_all, fields(peer = url))]
pub async fn run(ctx: &Ctx, url: &str, token: &str) -> Result<Output, CliError> {
    let peer = Peer::new(url, token)?;
    if !is_loopback(&peer.base) {
        tracing::warn!(
            peer = %peer.base,
            "the token and the batch travel unencrypted over plain HTTP; prefer an SSH tunnel"
        );
    }
    let peer_host = peer.host_id().await?;
    let store = ctx.store();
    let host_id = store.host_id();
    if peer_host == host_id {
        return Err(CliError::failed(format!(
            "peer {} is this device itself (host id {host_id}); point --peer at another device's `assent serve`",
            peer.base
        )));
    }
    let mut tx = store.begin_write().await?;
    let batch = sync::export(&mut tx, host_id, &TaskEntities, Uuid::new_v4(), ctx.now).await?;
    let answer = peer.exchange(&batch).await?;
    if answer.report.batch_id != batch.batch_id || answer.batch.from_host != peer_host {
        return Err(CliError::failed(format!(
            "peer {} answered about batch {} of host {}, not about batch {} of this device for host {peer_host}",
            peer.base, answer.report.batch_id, answer.batch.from_host, batch.batch_id
        )));
    }
    let merged = sync::import(&mut tx, host_id, &TaskEntities, &answer.batch, ctx.now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(
        peer_conflicts = answer.report.conflicts.len(),
        conflicts = merged.conflicts.len(),
        "synced with peer"
    );
    let summary = json!({
        "peer": peer.base.as_str(),
        "peerHost": peer_host,
        "sent": batch_summary(&batch),
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
        for bad in [
            "https://127.0.0.1:7700",
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
}
