//! Slack's Socket Mode (`assent serve --slack-socket`), for a laptop or a server with
//! no public URL: with the app-level token (`xapp-…`) it asks `apps.connections.open`
//! for a WebSocket URL, receives the same interactions as `POST
//! /api/slack/interactions` over it, acknowledges each envelope at once (Slack expects
//! the ack within 3 s), and decides afterwards as the HTTP route does. On `disconnect`,
//! a dropped connection or a failed open it connects again after a pause.
//!
//! No signature here: the connection itself is the app's, opened with its token over
//! TLS; every payload is still read strictly, and only mapped users decide.

use crate::slack::{Interaction, act, interaction_of};
use assent_confirm::Engine;
use assent_webhooks::SlackApi;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// How long opening a connection may take, and the pause before the next attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The largest envelope taken (an interaction payload is a few kilobytes; tungstenite's
/// own default is 64 MiB).
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Receives interactions over Socket Mode with `app_token` until `shutdown`.
pub(crate) async fn run(engine: Engine, app_token: String, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            ended = connection(&engine, &app_token) => match ended {
                Ok(why) => tracing::info!(%why, "Slack Socket Mode connection ended; connecting again"),
                Err(error) => tracing::warn!(%error, "Slack Socket Mode"),
            },
            () = &mut shutdown => return,
        }
        tokio::select! {
            () = tokio::time::sleep(RECONNECT_PAUSE) => {}
            () = &mut shutdown => return,
        }
    }
}

/// The TLS settings of the WebSocket: ring and webpki's roots, as every other client.
fn tls() -> Result<tokio_tungstenite::Connector, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_tungstenite::Connector::Rustls(Arc::new(config)))
}

/// One connection, from `apps.connections.open` to its end; why it ended.
async fn connection(engine: &Engine, app_token: &str) -> Result<String, String> {
    let Some((settings, secrets)) = engine
        .admin()
        .slack_secrets()
        .await
        .map_err(|e| e.to_string())?
    else {
        return Err("Slack is not connected (assent slack connect)".to_owned());
    };
    let opener = SlackApi::new(&settings.api_url, app_token).map_err(|e| e.to_string())?;
    let opened = opener
        .call("apps.connections.open", &json!({}))
        .await
        .map_err(|e| e.to_string())?;
    let url = opened["url"]
        .as_str()
        .filter(|url| url.starts_with("wss://") || url.starts_with("ws://"))
        .ok_or("apps.connections.open gave no WebSocket URL")?;
    let (mut socket, _) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio_tungstenite::connect_async_tls_with_config(
            url,
            Some(
                WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE_BYTES))
                    .max_frame_size(Some(MAX_MESSAGE_BYTES)),
            ),
            false,
            Some(tls()?),
        ),
    )
    .await
    .map_err(|_| "the WebSocket did not open in time".to_owned())?
    .map_err(|e| format!("cannot open the WebSocket: {e}"))?;
    let bot = SlackApi::connected(&settings, &secrets).map_err(|e| e.to_string())?;
    while let Some(message) = socket.next().await {
        let text = match message.map_err(|e| format!("the WebSocket failed: {e}"))? {
            Message::Text(text) => text,
            Message::Close(_) => return Ok("closed by Slack".to_owned()),
            // Pings are answered by tungstenite itself.
            _ => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!("Socket Mode sent a message that is not JSON; ignored");
            continue;
        };
        if let Some(id) = envelope["envelope_id"].as_str() {
            socket
                .send(Message::text(json!({"envelope_id": id}).to_string()))
                .await
                .map_err(|e| format!("cannot acknowledge an envelope: {e}"))?;
        }
        match envelope["type"].as_str() {
            Some("disconnect") => return Ok("Slack asked to reconnect".to_owned()),
            Some("interactive") => match interaction_of(&envelope["payload"]) {
                Ok(Interaction::Ignored) => {}
                Ok(interaction) => {
                    tokio::spawn(act(
                        engine.clone(),
                        bot.clone(),
                        settings.clone(),
                        interaction,
                    ));
                }
                Err(error) => tracing::warn!(%error, "Socket Mode interaction refused"),
            },
            _ => {}
        }
    }
    Ok("the WebSocket ended".to_owned())
}
