//! `assent slack`: connect the Slack app whose buttons approve and reject (`connect`,
//! `disconnect`, and `status`, which never shows a secret), and map the Slack users
//! who may decide (`users add|remove|list`). `assent serve` posts and listens.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::admin::{SlackSecrets, SlackSettings, SlackUser};
use assent_webhooks::DEFAULT_SLACK_API_URL;
use clap::{Args, Subcommand};
use serde_json::json;

/// `assent slack <subcommand>`.
#[derive(Debug, Args)]
pub struct SlackArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SlackCommand,
}

/// `assent slack ...`.
#[derive(Debug, Subcommand)]
pub enum SlackCommand {
    /// Connect the Slack app (or replace its settings): `assent serve` then posts each
    /// newly queued change set to the channel with Approve and Reject buttons, and
    /// takes the clicks at POST /api/slack/interactions.
    Connect(ConnectArgs),
    /// Disconnect the app: nothing more is posted, clicks are refused.
    Disconnect,
    /// The connected app's channel and Web API (never its secrets) and the mapped users.
    Status,
    /// The Slack users who may decide.
    #[command(subcommand)]
    Users(UsersCommand),
}

/// `assent slack connect`.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The bot's token (`xoxb-…`).
    #[arg(
        long,
        env = "ASSENT_SLACK_BOT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub bot_token: String,
    /// The app's signing secret (Basic Information, App Credentials).
    #[arg(
        long,
        env = "ASSENT_SLACK_SIGNING_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub signing_secret: String,
    /// The channel to post to (its id, `C…`).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: String,
    /// The Web API's base URL (GovSlack's, or a test's).
    #[arg(long, env = "ASSENT_SLACK_API_URL", default_value = DEFAULT_SLACK_API_URL, value_name = "URL")]
    pub slack_api_url: String,
    /// The review page's public address, for the messages' Open button.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

/// `assent slack users ...`.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Let Slack user ID (`U…`) decide, as NAME (what quorums count and the audit
    /// records: `slack:ID (NAME)`).
    Add(UserAddArgs),
    /// Take a Slack user's say away.
    Remove(UserIdArgs),
    /// The mapped users.
    List,
}

/// `assent slack users add`.
#[derive(Debug, Args)]
pub struct UserAddArgs {
    /// The Slack user id (`U0123…`, in their profile's menu: Copy member ID).
    pub user_id: String,
    /// The person's name.
    #[arg(long = "as", value_name = "NAME")]
    pub name: String,
}

/// A Slack user id.
#[derive(Debug, Args)]
pub struct UserIdArgs {
    /// The Slack user id.
    pub user_id: String,
}

/// A Slack id (`U0123`, `C0456`): letters and digits.
fn slack_id<'a>(what: &str, id: &'a str) -> Result<&'a str, CliError> {
    let id = id.trim();
    if !id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Ok(id);
    }
    Err(CliError::Usage(format!(
        "invalid Slack {what} {:?}: expected its id, letters and digits (such as {})",
        render::cut(id, 40),
        if what == "channel" {
            "C0123ABCD"
        } else {
            "U0123ABCD"
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

/// `assent slack ...`.
pub async fn slack(ctx: &Ctx, args: SlackArgs) -> Result<Output, CliError> {
    match args.command {
        SlackCommand::Connect(args) => connect(ctx, args).await,
        SlackCommand::Disconnect => {
            let was = ctx.engine.admin().disconnect_slack().await?;
            Output::either(ctx.json, &json!({"disconnected": was}), || {
                if was {
                    "Slack disconnected: nothing more is posted, and clicks are refused.".to_owned()
                } else {
                    "Slack was not connected.".to_owned()
                }
            })
        }
        SlackCommand::Status => status(ctx).await,
        SlackCommand::Users(UsersCommand::Add(args)) => {
            let user_id = slack_id("user", &args.user_id)?.to_owned();
            let name = args.name.trim().to_owned();
            if name.is_empty() || name.chars().any(char::is_control) {
                return Err(CliError::Usage(
                    "--as needs a name without control characters".to_owned(),
                ));
            }
            let user = SlackUser { user_id, name };
            ctx.engine.admin().add_slack_user(&user, ctx.now).await?;
            Output::either(
                ctx.json,
                &json!({"userId": user.user_id, "name": user.name}),
                || {
                    format!(
                        "Slack user {} decides as {} (recorded as slack:{} ({}))",
                        user.user_id,
                        render::visible(&user.name),
                        user.user_id,
                        render::visible(&user.name)
                    )
                },
            )
        }
        SlackCommand::Users(UsersCommand::Remove(args)) => {
            let user_id = slack_id("user", &args.user_id)?;
            if !ctx.engine.admin().remove_slack_user(user_id).await? {
                return Err(CliError::failed(format!(
                    "no Slack user {user_id} is mapped (assent slack users list)"
                )));
            }
            Output::either(ctx.json, &json!({"removed": user_id}), || {
                format!("Slack user {user_id} may no longer decide")
            })
        }
        SlackCommand::Users(UsersCommand::List) => {
            let users = ctx.engine.admin().slack_users().await?;
            let listed: Vec<_> = users
                .iter()
                .map(|u| json!({"userId": u.user_id, "name": u.name}))
                .collect();
            Output::either(ctx.json, &listed, || users_text(&users))
        }
    }
}

fn users_text(users: &[SlackUser]) -> String {
    if users.is_empty() {
        return "No Slack user may decide yet (assent slack users add U… --as NAME)".to_owned();
    }
    let rows: Vec<Vec<String>> = users
        .iter()
        .map(|u| vec![u.user_id.clone(), u.name.clone()])
        .collect();
    render::table(&["USER", "NAME"], &rows)
}

async fn connect(ctx: &Ctx, args: ConnectArgs) -> Result<Output, CliError> {
    let bot_token = args.bot_token.trim().to_owned();
    if !bot_token.starts_with("xoxb-") {
        return Err(CliError::Usage(
            "--bot-token must be the bot's token, xoxb-… (OAuth & Permissions)".to_owned(),
        ));
    }
    let signing_secret = args.signing_secret.trim().to_owned();
    if signing_secret.is_empty() {
        return Err(CliError::Usage("--signing-secret is empty".to_owned()));
    }
    let settings = SlackSettings {
        channel: slack_id("channel", &args.channel)?.to_owned(),
        api_url: url("--slack-api-url", &args.slack_api_url)?,
        public_url: args
            .public_url
            .as_deref()
            .map(|public| url("--public-url", public))
            .transpose()?,
        connected_at: ctx.now,
    };
    let secrets = SlackSecrets {
        bot_token,
        signing_secret,
    };
    ctx.engine
        .admin()
        .connect_slack(&settings, &secrets)
        .await?;
    Output::either(ctx.json, &settings_json(&settings), || {
        format!(
            "Slack connected: `assent serve` posts each change set queued from now on to {} and takes clicks at POST /api/slack/interactions (set it as the app's Interactivity Request URL). Map who may decide: assent slack users add U… --as NAME",
            settings.channel
        )
    })
}

/// A URL as listed: user info and query values redacted, as webhook URLs are.
fn shown(url: &str) -> String {
    assent_domain::shown_url(url, "standard").into_owned()
}

fn settings_json(settings: &SlackSettings) -> serde_json::Value {
    json!({
        "channel": settings.channel,
        "apiUrl": shown(&settings.api_url),
        "publicUrl": settings.public_url,
        "connectedAt": assent_domain::format_time(settings.connected_at),
    })
}

async fn status(ctx: &Ctx) -> Result<Output, CliError> {
    let status = ctx.engine.admin().slack_status().await?;
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
        None => "Slack is not connected (assent slack connect).".to_owned(),
        Some(settings) => format!(
            "Slack connected to channel {} through {}{}; bot token and signing secret stored (never shown)\n{}",
            settings.channel,
            render::visible(&shown(&settings.api_url)),
            settings
                .public_url
                .as_deref()
                .map(|p| format!(", Open links to {}", render::visible(p)))
                .unwrap_or_default(),
            users_text(&users)
        ),
    })
}
