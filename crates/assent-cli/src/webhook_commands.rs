//! `assent webhooks`: subscriptions (add, list, remove, test), the deliveries and their
//! dead letters (list, redeliver), and a one-shot run of the sender (`deliver`, for
//! cron; `assent serve` runs it continuously).

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::duration::parse_duration;
use crate::render;
use assent_confirm::admin::{Delivery, NewSubscription, Subscription};
use assent_webhooks::{
    DEFAULT_TIMEOUT, Format, Sender, SenderConfig, WebhookError, generate_secret, validate_events,
    validate_url,
};
use clap::{Args, Subcommand};
use serde_json::json;
use time::Duration;
use uuid::Uuid;

/// How long before its TTL an open set is announced as expiring, by default.
pub const DEFAULT_EXPIRY_WARNING: Duration = Duration::days(1);

/// `assent webhooks [<subcommand>]`: without one, lists the subscriptions.
#[derive(Debug, Args)]
pub struct WebhooksArgs {
    /// What to do; lists the subscriptions without one.
    #[command(subcommand)]
    pub command: Option<WebhooksCommand>,
}

/// `assent webhooks ...`.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Subscribe URL to events; prints the id and, only this once, the signing secret
    /// (a Slack URL is shown masked here and everywhere else: it is a secret too).
    Add(AddArgs),
    /// Remove a subscription; its undelivered events are dropped.
    Remove(IdArgs),
    /// Send a signed `webhook.test` event to a subscription now and show the answer.
    Test(IdArgs),
    /// The deliveries, newest first, with their last status and error.
    Deliveries(DeliveriesArgs),
    /// Queue a delivery again (a dead-lettered one, or any other), due now.
    Redeliver(DeliveryIdArgs),
    /// Send every due delivery once and exit (for cron; `assent serve` does this
    /// continuously).
    Deliver(DeliverArgs),
}

/// `assent webhooks add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The receiver: `https://…`, or `http://` to loopback.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Comma-separated event types (changeSet.created, changeSet.resolved,
    /// changeSet.expiring, changeSet.expired, confirmation.requested, item.failed,
    /// item.inDoubt); default: all.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub events: Vec<String>,
    /// `standard` (Standard Webhooks JSON) or `slack` (a Slack incoming-webhook body).
    #[arg(long, default_value = "standard", value_name = "FORMAT")]
    pub format: String,
    /// Only events about this agent's change sets.
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Allow plain `http://` to hosts other than loopback (the events travel
    /// unencrypted).
    #[arg(long)]
    pub allow_http: bool,
}

/// A subscription id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The subscription's id (from `assent webhooks`).
    pub id: String,
}

/// A delivery id.
#[derive(Debug, Args)]
pub struct DeliveryIdArgs {
    /// The delivery's id (from `assent webhooks deliveries`).
    pub id: i64,
}

/// `assent webhooks deliveries`.
#[derive(Debug, Args)]
pub struct DeliveriesArgs {
    /// Only the dead-lettered ones.
    #[arg(long)]
    pub failed: bool,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
}

/// `assent webhooks deliver`.
#[derive(Debug, Args)]
pub struct DeliverArgs {
    /// The review server's address as webhook receivers reach it (e.g.
    /// `https://assent.example`); events link to their set on its review page.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Announce open sets this long before their TTL with `changeSet.expiring`
    /// (default 1d; `0s` announces nothing).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub expiry_warning: Option<Duration>,
    /// The TTL open sets have (what `assent expire` applies; default 7d).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub expiry_ttl: Option<Duration>,
}

impl DeliverArgs {
    /// The sender's configuration. A `--public-url` that is not an absolute http(s)
    /// URL is a usage error, checked before anything runs: a wrong link would be in
    /// every event.
    pub fn sender_config(self) -> Result<SenderConfig, CliError> {
        let public_url = self
            .public_url
            .as_deref()
            .map(|url| assent_webhooks::validate_url(url, true))
            .transpose()
            .map_err(|e| CliError::Usage(format!("--public-url: {e}")))?
            .map(|url| url.to_string());
        Ok(SenderConfig {
            public_url,
            expiry: expiry(self.expiry_ttl, self.expiry_warning),
            ..SenderConfig::default()
        })
    }
}

/// The sender's expiry warning from the command line's durations.
pub fn expiry(ttl: Option<Duration>, warning: Option<Duration>) -> Option<(Duration, Duration)> {
    let ttl = ttl.unwrap_or(assent_confirm::DEFAULT_EXPIRY_TTL);
    let warning = warning.unwrap_or(DEFAULT_EXPIRY_WARNING);
    (warning > Duration::ZERO).then_some((ttl, warning.min(ttl)))
}

fn webhook_error(error: WebhookError) -> CliError {
    match error {
        WebhookError::Store(error) => CliError::from(error),
        other => CliError::failed(other.to_string()),
    }
}

fn parse_id(text: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(text.trim())
        .map_err(|e| CliError::failed(format!("invalid webhook subscription id {text:?}: {e}")))
}

/// Runs `assent webhooks ...`.
pub async fn webhooks(ctx: &Ctx, args: WebhooksArgs) -> Result<Output, CliError> {
    match args.command {
        None => {
            let list = ctx.engine.admin().webhook_subscriptions().await?;
            Output::either(ctx.json, &list, || subscriptions_text(&list))
        }
        Some(WebhooksCommand::Add(add)) => add_subscription(ctx, add).await,
        Some(WebhooksCommand::Remove(remove)) => {
            let id = parse_id(&remove.id)?;
            let removed = ctx.engine.admin().remove_webhook_subscription(id).await?;
            if !removed {
                return Err(CliError::failed(format!("no webhook subscription {id}")));
            }
            Output::either(ctx.json, &json!({"id": id, "removed": true}), || {
                format!("Removed webhook {id}")
            })
        }
        Some(WebhooksCommand::Test(test)) => {
            let id = parse_id(&test.id)?;
            let sender =
                Sender::new(ctx.store().clone(), SenderConfig::default()).map_err(webhook_error)?;
            let result = sender.test(id).await.map_err(webhook_error)?;
            let value = json!({"id": id, "ok": result.ok, "status": result.status, "detail": result.detail});
            let output = Output::either(ctx.json, &value, || {
                let verdict = if result.ok { "accepted" } else { "refused" };
                format!("Test event {verdict}: {}", result.detail)
            })?;
            if result.ok {
                Ok(output)
            } else {
                Ok(Output {
                    failure: Some(CliError::failed(format!(
                        "the receiver did not accept the test event: {}",
                        result.detail
                    ))),
                    ..output
                })
            }
        }
        Some(WebhooksCommand::Deliveries(list)) => {
            let rows = ctx
                .engine
                .admin()
                .webhook_deliveries(list.failed, list.limit)
                .await?;
            Output::either(ctx.json, &rows, || deliveries_text(&rows, list.failed))
        }
        Some(WebhooksCommand::Redeliver(again)) => {
            if !ctx
                .engine
                .admin()
                .redeliver_webhook(again.id, ctx.now)
                .await?
            {
                return Err(CliError::failed(format!(
                    "no webhook delivery {}",
                    again.id
                )));
            }
            Output::either(
                ctx.json,
                &json!({"id": again.id, "status": "pending"}),
                || format!("Delivery {} queued again", again.id),
            )
        }
        Some(WebhooksCommand::Deliver(deliver)) => {
            let config = SenderConfig {
                timeout: DEFAULT_TIMEOUT,
                ..deliver.sender_config()?
            };
            let sender = Sender::new(ctx.store().clone(), config).map_err(webhook_error)?;
            let report = sender.deliver_due().await.map_err(webhook_error)?;
            let value = json!({
                "delivered": report.delivered,
                "retrying": report.retrying,
                "dead": report.dead,
                "expiring": report.expiring,
            });
            Output::either(ctx.json, &value, || {
                format!(
                    "Delivered {}, to retry {}, dead-lettered {} (sets announced as expiring: {})",
                    report.delivered, report.retrying, report.dead, report.expiring
                )
            })
        }
    }
}

/// Adds a subscription. What it prints names the URL as every listing does (a Slack URL
/// masked: terminals and CI logs keep what they print), and the secret this only time.
async fn add_subscription(ctx: &Ctx, add: AddArgs) -> Result<Output, CliError> {
    let url = validate_url(&add.url, add.allow_http).map_err(webhook_error)?;
    let events = validate_events(&add.events).map_err(webhook_error)?;
    let format = Format::parse(&add.format).map_err(webhook_error)?;
    let agent = add
        .agent
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty());
    let secret = generate_secret();
    let new = NewSubscription {
        url: url.to_string(),
        events,
        format: format.as_str().to_owned(),
        agent_id: agent,
        secret: secret.clone(),
    };
    let added = ctx
        .engine
        .admin()
        .add_webhook_subscription(&new, ctx.now)
        .await?;
    let value = json!({
        "id": added.id,
        "url": added.url,
        "events": added.events,
        "format": added.format,
        "secret": secret,
    });
    Output::either(ctx.json, &value, || {
        format!(
            "Added webhook {} → {}\nSigning secret (shown only this once; verify deliveries with it):\n{secret}",
            added.id, added.url
        )
    })
}

fn events_text(events: &[String]) -> String {
    if events.is_empty() {
        "(all)".to_owned()
    } else {
        events.join(",")
    }
}

fn subscriptions_text(list: &[Subscription]) -> String {
    if list.is_empty() {
        return "No webhooks: add one with `assent webhooks add URL`".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                render::cut(&s.url, 60),
                s.format.clone(),
                events_text(&s.events),
                s.agent_id.clone().unwrap_or_else(|| "(any)".to_owned()),
            ]
        })
        .collect();
    render::table(&["ID", "URL", "FORMAT", "EVENTS", "AGENT"], &rows)
}

fn deliveries_text(rows: &[Delivery], failed: bool) -> String {
    if rows.is_empty() {
        return if failed {
            "No dead-lettered deliveries".to_owned()
        } else {
            "No deliveries".to_owned()
        };
    }
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|d| {
            vec![
                d.id.to_string(),
                d.event_type.clone(),
                d.event_id.clone(),
                render::cut(&d.url, 40),
                d.status.clone(),
                d.attempts.to_string(),
                d.last_status.map(|s| s.to_string()).unwrap_or_default(),
                // Stored escaped and truncated by the sender; cut again for the table.
                render::cut(
                    &assent_webhooks::safe_text(d.last_error.as_deref().unwrap_or("")),
                    60,
                ),
            ]
        })
        .collect();
    render::table(
        &[
            "ID",
            "EVENT",
            "WEBHOOK-ID",
            "URL",
            "STATUS",
            "ATTEMPTS",
            "HTTP",
            "LAST ERROR",
        ],
        &rows,
    )
}
