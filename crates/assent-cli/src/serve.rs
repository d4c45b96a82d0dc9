//! `assent serve`: the review server over the database of `--db`, until ctrl-c or
//! SIGTERM.

use crate::CliError;
use crate::cli::ServeArgs;
use crate::context::engine;
use assent_confirm::admin::Role;
use assent_confirm::{BusConfig, ConfirmError, ConfirmationBus, Engine};
use assent_server::token::{TokenOrigin, resolve_token};
use assent_server::{DEFAULT_BUS_ROOT, Server};
use std::io::Write;
use std::time::Duration;

/// Resolves the token, opens the database, listens on `--addr` and serves until a
/// shutdown signal; returns what to print when it has stopped.
pub async fn run(db: &str, args: ServeArgs) -> Result<String, CliError> {
    // Checked before anything listens: a wrong link would be in every event.
    // Refused before anything is opened or bound.
    let slack_socket = match (args.slack_socket, args.slack_app_token.as_deref()) {
        (true, Some(app_token)) if app_token.trim().starts_with("xapp-") => {
            Some(app_token.trim().to_owned())
        }
        (true, _) => {
            return Err(CliError::Usage(
                "--slack-socket needs the app-level token, xapp-… (--slack-app-token or ASSENT_SLACK_APP_TOKEN)".to_owned(),
            ));
        }
        (false, _) => None,
    };
    if let Some(api_url) = args.telegram_api_url.as_deref().filter(|_| args.telegram)
        && !(api_url.starts_with("https://") || api_url.starts_with("http://"))
    {
        return Err(CliError::Usage(format!(
            "invalid --telegram-api-url {:?}: expected an http:// or https:// URL",
            crate::render::cut(api_url, 80)
        )));
    }
    let public_url = args.delivery.public_url.clone();
    let phone_url = public_url.clone();
    let sender_config = args.delivery.sender_config()?;
    let mcp_config = match &args.mcp_config {
        Some(path) => Some(crate::mcp_commands::read_config("--mcp-config", path)?),
        None => None,
    };
    let store = crate::database::open_store(db).await?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {}: {e}", args.addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::failed(format!("cannot read the listening address: {e}")))?;
    // The gateway's servers start now: one that cannot is logged and skipped, none at
    // all is an error before anything is served.
    let mcp = match (mcp_config, args.mcp_agent) {
        (Some(config), Some(agent)) => {
            let servers = config.servers.len();
            let options = assent_mcp::GatewayOptions {
                server: String::new(),
                agent: agent.clone(),
                category: assent_mcp::TARGET_KIND.to_owned(),
                wait: None,
                trust: assent_mcp::Trust::None,
                deadlines: assent_mcp::Deadlines::default(),
                public_url,
                ask_in_client: false,
                previews: Default::default(),
            };
            let (router, supervision) =
                assent_mcp::mount_config(store.clone(), options, config, args.mcp_allowed_hosts)
                    .await
                    .map_err(|e| CliError::Failed(e.into()))?;
            Some((router, supervision, agent, servers))
        }
        _ => None,
    };
    // Only now, with nothing left that can fail before the banner: a token generated
    // and stored by a start that then failed would never be shown to anyone.
    let token = resolve_token(args.token.as_deref(), db)?;
    let mut banner = format!("Assent review server on http://{addr}/ (database {db})\n");
    match &token.origin {
        TokenOrigin::Given => {}
        TokenOrigin::Stored(path) => banner.push_str(&format!(
            "Log in with the token stored in {}\n",
            path.display()
        )),
        TokenOrigin::Generated(path) => banner.push_str(&format!(
            "Generated a token (stored in {}, shown only this once):\n{}\n",
            path.display(),
            token.token
        )),
        TokenOrigin::Ephemeral => banner.push_str(&format!(
            "Token for this run (in-memory database, not stored):\n{}\n",
            token.token
        )),
    }
    if let Some((_, _, agent, servers)) = &mcp {
        banner.push_str(&format!(
            "MCP gateway at http://{addr}{} for agent tokens of {agent:?} ({servers} server(s) configured)\n",
            assent_mcp::MCP_PATH
        ));
    }
    if args.telegram {
        banner.push_str("Telegram: posting sets and reading taps with getUpdates\n");
    }
    if slack_socket.is_some() {
        banner.push_str("Slack: receiving clicks over Socket Mode\n");
    }
    if !addr.ip().is_loopback() {
        banner.push_str(
            "Warning: listening beyond loopback over plain HTTP; put TLS in front of it\n",
        );
    }
    // What `assent doctor` reads to judge this server's exposure.
    let record = crate::serve_record::path(db);
    if let Some(path) = &record {
        let exposure = crate::serve_record::Exposure {
            addr: addr.to_string(),
            public_url: phone_url.as_deref().map(assent_mcp::redact::redact),
            token_file: match &token.origin {
                // Absolute: the doctor may run in another folder.
                TokenOrigin::Stored(path) | TokenOrigin::Generated(path) => Some(
                    std::path::absolute(path)
                        .unwrap_or_else(|_| path.clone())
                        .display()
                        .to_string(),
                ),
                TokenOrigin::Given | TokenOrigin::Ephemeral => None,
            },
            token: match &token.origin {
                TokenOrigin::Given => "given",
                TokenOrigin::Stored(_) => "stored",
                TokenOrigin::Generated(_) => "generated",
                TokenOrigin::Ephemeral => "ephemeral",
            }
            .to_owned(),
            mcp_gateway: mcp.is_some(),
            pid: std::process::id(),
            started_at: rfc3339(time::OffsetDateTime::now_utc()),
            stopped_at: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        if let Err(error) = crate::serve_record::record(path, exposure) {
            banner.push_str(&format!(
                "Note: {error} (what `assent doctor` reads of this server)\n"
            ));
        }
    }
    print_now(&banner);
    // The server's session is the parent of sub-agents posting delegated wakes.
    let bus = ConfirmationBus::new(
        DEFAULT_BUS_ROOT,
        BusConfig {
            wait_timeout: Duration::from_secs(args.delegation_timeout),
        },
    )?;
    // The server knows no host: the journal's own routes (`/api/tasks`) come with it.
    let engine = engine(store.clone()).await?;
    let mut server = Server::new(engine.clone(), token.token)
        .with_routes(Role::Reviewer, assent_journal_host::http::routes())
        .with_routes(Role::Agent, assent_hook::http::routes())
        // A coding agent's http hook takes an error status for "go ahead".
        .with_refusals(assent_hook::http::PREFIX, assent_hook::http::refused)
        .with_bus(bus);
    // Its servers are supervised for as long as the review server runs.
    if let Some(app_token) = slack_socket {
        server = server.with_slack_socket(app_token);
    }
    if args.telegram {
        server = server.with_telegram(args.telegram_api_url.clone());
    }
    // Phone channels (`assent notify`) need links phones can reach.
    if let Some(url) = phone_url {
        server = server.with_public_url(url);
    }
    let mut supervision = None;
    if let Some((router, supervised, _, _)) = mcp {
        server = server.with_service(router);
        supervision = Some(supervised);
    }
    // The webhook sender runs beside the server and stops after it.
    let sender = assent_webhooks::Sender::new(store.clone(), sender_config)
        .map_err(|e| CliError::failed(e.to_string()))?;
    let (stop_sender, sender_stopped) = tokio::sync::oneshot::channel::<()>();
    let sending = tokio::spawn(sender.run(async {
        let _ = sender_stopped.await;
    }));
    let (stop_notices, notices_stopped) = tokio::sync::oneshot::channel::<()>();
    let noticing = args
        .notify
        .then(|| tokio::spawn(notices(engine, notices_stopped)));
    let served = server.run(listener, assent_server::shutdown_signal()).await;
    let _ = stop_notices.send(());
    if let Some(noticing) = noticing
        && let Err(error) = noticing.await
    {
        tracing::error!(%error, "the desktop notices failed");
    }
    drop(supervision);
    let _ = stop_sender.send(());
    if let Err(error) = sending.await {
        tracing::error!(%error, "the webhook sender failed");
    }
    if let Some(path) = &record
        && let Err(error) = crate::serve_record::stopped(
            path,
            &addr.to_string(),
            std::process::id(),
            rfc3339(time::OffsetDateTime::now_utc()),
        )
    {
        tracing::warn!(%error, "cannot mark the serve record stopped");
    }
    served?;
    store.close().await;
    Ok("Stopped".to_owned())
}

/// Prints `text` at once: the token and address are needed while the server runs.
/// How often `--notify` looks at the change feed.
const NOTICE_POLL: Duration = Duration::from_millis(500);

/// `--notify`: a desktop notice for each change set queued while the server runs (seen
/// in the change feed, created since the server started, every item still open), until
/// `stop`. A failed read is logged and tried again.
async fn notices(engine: Engine, stop: tokio::sync::oneshot::Receiver<()>) {
    let started = time::OffsetDateTime::now_utc() - time::Duration::seconds(5);
    let mut stop = std::pin::pin!(stop);
    let mut position = None;
    let mut seen = std::collections::HashSet::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(NOTICE_POLL) => {}
            _ = &mut stop => return,
        }
        if let Err(error) = notice_new_sets(&engine, &mut position, &mut seen, started).await {
            tracing::warn!(%error, "desktop notices: cannot read the change feed");
        }
    }
}

async fn notice_new_sets(
    engine: &Engine,
    position: &mut Option<i64>,
    seen: &mut std::collections::HashSet<uuid::Uuid>,
    started: time::OffsetDateTime,
) -> Result<(), ConfirmError> {
    let Some(after) = *position else {
        *position = Some(engine.feed_position().await?);
        return Ok(());
    };
    let page = engine.feed_since(after, 1_000).await?;
    *position = Some(page.position);
    for id in page.sets {
        if !seen.insert(id) {
            continue;
        }
        if let Some(set) = engine.change_set(id).await?
            && set.created_at >= started
            && set.items.iter().all(|item| item.status.is_open())
        {
            crate::terminal::notify_set(&set);
        }
    }
    Ok(())
}

fn rfc3339(at: time::OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn print_now(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
