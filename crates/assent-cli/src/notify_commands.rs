//! `assent notify`: the phone channels `assent serve --public-url` sends each queued
//! item to — an ntfy topic (`ntfy add TOPIC_URL [--token T] --as NAME`) or an email
//! address (`email add ADDRESS --as NAME --smtp URL`) — with one-time Approve and
//! Reject links that answer as NAME; `list` and `remove ID` for each. Secrets (the ntfy
//! token, the SMTP URL with its credentials) are stored, never shown.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::phone::{Channel, ChannelKind};
use clap::{Args, Subcommand};
use serde_json::json;

/// `assent notify <ntfy|email> <add|list|remove>`.
#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// Which door.
    #[command(subcommand)]
    pub door: NotifyDoor,
}

/// `assent notify ntfy|email`.
#[derive(Debug, Subcommand)]
pub enum NotifyDoor {
    /// Push through ntfy (ntfy.sh or self-hosted): one notification per queued item
    /// with Approve, Reject and View.
    #[command(subcommand)]
    Ntfy(NtfyCommand),
    /// Email: one message per queued item with Approve and Reject links, each opening
    /// a page with one more button.
    #[command(subcommand)]
    Email(EmailCommand),
}

/// `assent notify ntfy ...`.
#[derive(Debug, Subcommand)]
pub enum NtfyCommand {
    /// Send each item queued from now on to the topic at TOPIC_URL.
    Add(NtfyAddArgs),
    /// The ntfy channels (never their tokens).
    List,
    /// Stop sending to a channel; its unused links stop working.
    Remove(RemoveArgs),
}

/// `assent notify email ...`.
#[derive(Debug, Subcommand)]
pub enum EmailCommand {
    /// Send each item queued from now on to ADDRESS.
    Add(EmailAddArgs),
    /// The email channels (never their SMTP settings).
    List,
    /// Stop sending to a channel; its unused links stop working.
    Remove(RemoveArgs),
}

/// `assent notify ntfy add`.
#[derive(Debug, Args)]
pub struct NtfyAddArgs {
    /// The topic's URL (`https://ntfy.sh/my-secret-topic`; `http://` only to loopback).
    pub topic_url: String,
    /// An access token of the ntfy server (`tk_…`), for a protected topic.
    #[arg(
        long,
        env = "ASSENT_NTFY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Who the buttons answer as (what quorums count and the audit records:
    /// `ntfy:ID (NAME)`).
    #[arg(long = "as", value_name = "NAME")]
    pub name: String,
}

/// `assent notify email add`.
#[derive(Debug, Args)]
pub struct EmailAddArgs {
    /// The address to send to.
    pub address: String,
    /// Who the links answer as (`email:ID (NAME)`).
    #[arg(long = "as", value_name = "NAME")]
    pub name: String,
    /// The SMTP server: `smtps://user:pass@host:465` (TLS), `smtp://…:587?tls=required`
    /// (STARTTLS), or plain `smtp://` to a loopback host only.
    #[arg(
        long,
        env = "ASSENT_SMTP_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub smtp: String,
    /// The sender's address (default: the recipient's).
    #[arg(long, env = "ASSENT_SMTP_FROM", value_name = "ADDRESS")]
    pub from: Option<String>,
}

/// A channel's id.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The channel's id (see `list`).
    pub id: String,
}

fn person(name: &str) -> Result<String, CliError> {
    let name = name.trim();
    if name.is_empty() || name.chars().any(char::is_control) || name.contains(['(', ')']) {
        return Err(CliError::Usage(
            "--as needs a name without control characters or parentheses".to_owned(),
        ));
    }
    Ok(name.to_owned())
}

fn usage(error: assent_webhooks::WebhookError) -> CliError {
    CliError::Usage(error.to_string())
}

/// Runs `assent notify`.
pub async fn notify(ctx: &Ctx, args: NotifyArgs) -> Result<Output, CliError> {
    let phone = ctx.engine.phone();
    match args.door {
        NotifyDoor::Ntfy(NtfyCommand::Add(args)) => {
            let url = assent_webhooks::phone::validate_ntfy_url(&args.topic_url).map_err(usage)?;
            let name = person(&args.name)?;
            let token = args
                .token
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty());
            let channel = phone
                .add_channel(ChannelKind::Ntfy, &url, &name, token.as_deref(), ctx.now)
                .await?;
            added(ctx, &channel)
        }
        NotifyDoor::Email(EmailCommand::Add(args)) => {
            let address = assent_webhooks::phone::validate_email(&args.address).map_err(usage)?;
            let name = person(&args.name)?;
            let smtp = assent_webhooks::phone::validate_smtp_url(&args.smtp).map_err(usage)?;
            let from = match args.from.as_deref() {
                Some(from) => assent_webhooks::phone::validate_email(from).map_err(usage)?,
                None => address.clone(),
            };
            let secret = assent_webhooks::phone::email_secret(&smtp, &from);
            let channel = phone
                .add_channel(ChannelKind::Email, &address, &name, Some(&secret), ctx.now)
                .await?;
            added(ctx, &channel)
        }
        NotifyDoor::Ntfy(NtfyCommand::List) => list(ctx, ChannelKind::Ntfy).await,
        NotifyDoor::Email(EmailCommand::List) => list(ctx, ChannelKind::Email).await,
        NotifyDoor::Ntfy(NtfyCommand::Remove(args))
        | NotifyDoor::Email(EmailCommand::Remove(args)) => {
            let id = args.id.trim();
            if !phone.remove_channel(id).await? {
                return Err(CliError::failed(format!(
                    "no channel {} (assent notify ntfy list, assent notify email list)",
                    render::visible(id)
                )));
            }
            Output::either(ctx.json, &json!({"removed": id}), || {
                format!(
                    "Channel {id} removed: nothing more is sent there, and its links answer nothing"
                )
            })
        }
    }
}

fn channel_json(channel: &Channel) -> serde_json::Value {
    json!({
        "id": channel.id,
        "kind": channel.kind.as_str(),
        "address": shown(channel),
        "as": channel.person,
        "createdAt": assent_domain::format_time(channel.created_at),
    })
}

/// An address as listed: a topic URL with user info and query redacted.
fn shown(channel: &Channel) -> String {
    match channel.kind {
        ChannelKind::Ntfy => assent_domain::shown_url(&channel.address, "standard").into_owned(),
        ChannelKind::Email => channel.address.clone(),
    }
}

fn added(ctx: &Ctx, channel: &Channel) -> Result<Output, CliError> {
    Output::either(ctx.json, &channel_json(channel), || {
        format!(
            "Channel {} added: `assent serve --public-url URL` sends each item queued from now on to {} with one-time Approve and Reject links that answer as {} (recorded as {})",
            channel.id,
            render::visible(&shown(channel)),
            render::visible(&channel.person),
            assent_domain::phone_reviewer(channel.kind.as_str(), &channel.id, &channel.person)
        )
    })
}

async fn list(ctx: &Ctx, kind: ChannelKind) -> Result<Output, CliError> {
    let channels: Vec<Channel> = ctx
        .engine
        .phone()
        .channels()
        .await?
        .into_iter()
        .filter(|c| c.kind == kind)
        .collect();
    let listed: Vec<_> = channels.iter().map(channel_json).collect();
    Output::either(ctx.json, &listed, || {
        if channels.is_empty() {
            return format!(
                "No {} channel (assent notify {} add …)",
                kind.as_str(),
                kind.as_str()
            );
        }
        let rows: Vec<Vec<String>> = channels
            .iter()
            .map(|c| {
                vec![
                    c.id.clone(),
                    render::visible(&shown(c)).into_owned(),
                    render::visible(&c.person).into_owned(),
                    assent_domain::format_time(c.created_at),
                ]
            })
            .collect();
        render::table(&["ID", "ADDRESS", "AS", "ADDED"], &rows)
    })
}
