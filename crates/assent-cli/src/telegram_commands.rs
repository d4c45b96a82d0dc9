//! `assent telegram`: connect the Telegram bot whose buttons approve and reject
//! (`connect`, `disconnect`, and `status`, which never shows the token), and map the
//! Telegram users who may decide (`users add|remove|list`). `assent serve --telegram`
//! posts and long-polls: no public URL needed.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::admin::{TelegramSecrets, TelegramSettings, TelegramUser};
use assent_server::DEFAULT_TELEGRAM_API_URL;
use clap::{Args, Subcommand};
use serde_json::json;

/// `assent telegram <subcommand>`.
#[derive(Debug, Args)]
pub struct TelegramArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TelegramCommand,
}

/// `assent telegram ...`.
#[derive(Debug, Subcommand)]
pub enum TelegramCommand {
    /// Connect the bot (or replace its settings): `assent serve --telegram` then posts
    /// each newly queued change set with Approve, Reject and View buttons, to --chat or
    /// to each mapped user's private chat, and long-polls the taps.
    Connect(ConnectArgs),
    /// Disconnect the bot: nothing more is posted, taps are no longer read.
    Disconnect,
    /// The connected bot's chat and Bot API (never its token) and the mapped users.
    Status,
    /// The Telegram users who may decide.
    #[command(subcommand)]
    Users(UsersCommand),
}

/// `assent telegram connect`.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The bot's token, as BotFather gives it (`123456:ABC…`).
    #[arg(
        long,
        env = "ASSENT_TELEGRAM_BOT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub bot_token: String,
    /// The chat to post to (its id, such as -1001234567890 for a group); without it,
    /// each mapped user's private chat with the bot.
    #[arg(long, value_name = "CHAT_ID", allow_hyphen_values = true)]
    pub chat: Option<String>,
    /// The Bot API's base URL (a self-hosted Bot API server, or a test's fake).
    #[arg(long, env = "ASSENT_TELEGRAM_API_URL", default_value = DEFAULT_TELEGRAM_API_URL, value_name = "URL")]
    pub telegram_api_url: String,
    /// The review page's public address, for the messages' View button.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

/// `assent telegram users ...`.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Let Telegram user ID (a number; the bot tells each user theirs on /start)
    /// decide, as NAME (what quorums count and the audit records: `telegram:ID (NAME)`).
    Add(UserAddArgs),
    /// Take a Telegram user's say away.
    Remove(UserIdArgs),
    /// The mapped users.
    List,
}

/// `assent telegram users add`.
#[derive(Debug, Args)]
pub struct UserAddArgs {
    /// The Telegram user id (a number).
    pub user_id: String,
    /// The person's name.
    #[arg(long = "as", value_name = "NAME")]
    pub name: String,
}

/// A Telegram user id.
#[derive(Debug, Args)]
pub struct UserIdArgs {
    /// The Telegram user id.
    pub user_id: String,
}

/// A Telegram id: a user's is a positive number, a chat's may be negative (a group).
fn telegram_id<'a>(what: &str, id: &'a str) -> Result<&'a str, CliError> {
    let id = id.trim();
    let digits = if what == "chat" {
        id.strip_prefix('-').unwrap_or(id)
    } else {
        id
    };
    if !digits.is_empty()
        && digits.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
    {
        return Ok(id);
    }
    Err(CliError::Usage(format!(
        "invalid Telegram {what} {:?}: expected its numeric id (such as {})",
        render::cut(id, 40),
        if what == "chat" {
            "-1001234567890"
        } else {
            "123456789"
        }
    )))
}

/// An `http(s)://` URL, as written.
fn url(what: &str, text: &str) -> Result<String, CliError> {
    let text = text.trim();
    match reqwest::Url::parse(text) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(text.to_owned())
        }
        _ => Err(CliError::Usage(format!(
            "invalid {what} {:?}: expected an http:// or https:// URL",
            render::cut(text, 80)
        ))),
    }
}

/// `assent telegram ...`.
pub async fn telegram(ctx: &Ctx, args: TelegramArgs) -> Result<Output, CliError> {
    match args.command {
        TelegramCommand::Connect(args) => connect(ctx, args).await,
        TelegramCommand::Disconnect => {
            let was = ctx.engine.admin().disconnect_telegram().await?;
            Output::either(ctx.json, &json!({"disconnected": was}), || {
                if was {
                    "Telegram disconnected: nothing more is posted, and taps are not read."
                        .to_owned()
                } else {
                    "Telegram was not connected.".to_owned()
                }
            })
        }
        TelegramCommand::Status => status(ctx).await,
        TelegramCommand::Users(UsersCommand::Add(args)) => {
            let user_id = telegram_id("user", &args.user_id)?.to_owned();
            let name = args.name.trim().to_owned();
            if name.is_empty() || name.chars().any(char::is_control) {
                return Err(CliError::Usage(
                    "--as needs a name without control characters".to_owned(),
                ));
            }
            let user = TelegramUser { user_id, name };
            ctx.engine.admin().add_telegram_user(&user, ctx.now).await?;
            Output::either(
                ctx.json,
                &json!({"userId": user.user_id, "name": user.name}),
                || {
                    format!(
                        "Telegram user {} decides as {} (recorded as {})",
                        user.user_id,
                        render::visible(&user.name),
                        render::visible(&assent_domain::telegram_reviewer(
                            &user.user_id,
                            &user.name
                        ))
                    )
                },
            )
        }
        TelegramCommand::Users(UsersCommand::Remove(args)) => {
            let user_id = telegram_id("user", &args.user_id)?;
            if !ctx.engine.admin().remove_telegram_user(user_id).await? {
                return Err(CliError::failed(format!(
                    "no Telegram user {user_id} is mapped (assent telegram users list)"
                )));
            }
            Output::either(ctx.json, &json!({"removed": user_id}), || {
                format!("Telegram user {user_id} may no longer decide")
            })
        }
        TelegramCommand::Users(UsersCommand::List) => {
            let users = ctx.engine.admin().telegram_users().await?;
            let listed: Vec<_> = users
                .iter()
                .map(|u| json!({"userId": u.user_id, "name": u.name}))
                .collect();
            Output::either(ctx.json, &listed, || users_text(&users))
        }
    }
}

fn users_text(users: &[TelegramUser]) -> String {
    if users.is_empty() {
        return "No Telegram user may decide yet (assent telegram users add ID --as NAME)"
            .to_owned();
    }
    let rows: Vec<Vec<String>> = users
        .iter()
        .map(|u| vec![u.user_id.clone(), render::visible(&u.name).into_owned()])
        .collect();
    render::table(&["USER", "NAME"], &rows)
}

async fn connect(ctx: &Ctx, args: ConnectArgs) -> Result<Output, CliError> {
    let bot_token = args.bot_token.trim().to_owned();
    // BotFather's shape: the bot's id, a colon, then letters, digits, `_` and `-`; the
    // token goes into every request's path, so nothing else may be in it.
    let well_formed = bot_token.split_once(':').is_some_and(|(id, secret)| {
        !id.is_empty()
            && id.len() <= 20
            && id.bytes().all(|b| b.is_ascii_digit())
            && !secret.is_empty()
            && secret.len() <= 100
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    if !well_formed {
        return Err(CliError::Usage(
            "--bot-token must be the bot's token as BotFather gives it, 123456:ABC…".to_owned(),
        ));
    }
    let settings = TelegramSettings {
        chat_id: args
            .chat
            .as_deref()
            .map(|chat| telegram_id("chat", chat).map(str::to_owned))
            .transpose()?,
        api_url: url("--telegram-api-url", &args.telegram_api_url)?,
        public_url: args
            .public_url
            .as_deref()
            .map(|public| url("--public-url", public))
            .transpose()?,
        connected_at: ctx.now,
    };
    ctx.engine
        .admin()
        .connect_telegram(&settings, &TelegramSecrets { bot_token })
        .await?;
    Output::either(ctx.json, &settings_json(&settings), || {
        format!(
            "Telegram connected: `assent serve --telegram` posts each change set queued from now on to {} and reads the taps (no public URL needed). Map who may decide: assent telegram users add ID --as NAME",
            match &settings.chat_id {
                Some(chat) => format!("chat {chat}"),
                None => "each mapped user's private chat".to_owned(),
            }
        )
    })
}

/// A URL as listed: user info and query values redacted, as webhook URLs are.
fn shown(url: &str) -> String {
    assent_domain::shown_url(url, "standard").into_owned()
}

fn settings_json(settings: &TelegramSettings) -> serde_json::Value {
    json!({
        "chat": settings.chat_id,
        "apiUrl": shown(&settings.api_url),
        "publicUrl": settings.public_url,
        "connectedAt": assent_domain::format_time(settings.connected_at),
    })
}

async fn status(ctx: &Ctx) -> Result<Output, CliError> {
    let status = ctx.engine.admin().telegram_status().await?;
    let (settings, users) = (status.settings, status.users);
    let listed: Vec<_> = users
        .iter()
        .map(|u| json!({"userId": u.user_id, "name": u.name}))
        .collect();
    let value = json!({
        "connected": settings.as_ref().map(settings_json),
        "users": listed,
    });
    Output::either(ctx.json, &value, || match &settings {
        None => "Telegram is not connected (assent telegram connect).".to_owned(),
        Some(settings) => format!(
            "Telegram connected, posting to {} through {}{}; bot token stored (never shown)\n{}",
            match &settings.chat_id {
                Some(chat) => format!("chat {chat}"),
                None => "each mapped user's private chat".to_owned(),
            },
            render::visible(&shown(&settings.api_url)),
            settings
                .public_url
                .as_deref()
                .map(|p| format!(", View links to {}", render::visible(p)))
                .unwrap_or_default(),
            users_text(&users)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_numbers_and_only_a_chat_may_be_negative() {
        assert_eq!(telegram_id("user", " 42 ").ok(), Some("42"));
        assert_eq!(telegram_id("chat", "-1001").ok(), Some("-1001"));
        for bad in ["", "-42", "4 2", "042", "U123", "1".repeat(21).as_str()] {
            assert!(telegram_id("user", bad).is_err(), "{bad:?}");
        }
        assert!(telegram_id("chat", "-").is_err());
    }
}
