//! `assent why SET IDX`, `assent why --audit ID` and `assent audit digest`: why a call
//! was decided so (issue 57), and the calls an `audit` rule let run.

use crate::CliError;
use crate::context::{Ctx, Output};
use clap::Args;
use serde_json::{Value, json};
use time::Duration;

/// `assent why SET IDX | --audit OPERATION_ID`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// The change set's id, or its first 8 or more hex digits.
    #[arg(required_unless_present = "audit", conflicts_with = "audit")]
    pub set: Option<String>,
    /// The item's index.
    #[arg(required_unless_present = "audit")]
    pub index: Option<usize>,
    /// A call in the audit trail instead, by its operation id (`assent audit --json`
    /// lists them as `operationId`).
    #[arg(long, value_name = "OPERATION_ID")]
    pub audit: Option<String>,
}

/// `assent audit digest [--since SPAN] [--agent A]`.
#[derive(Debug, Args)]
pub struct AuditDigestArgs {
    /// How far back: calls audited this long ago or since (e.g. `7d`, `12h`).
    #[arg(long, value_parser = parse_span, default_value = "7d")]
    pub since: Duration,
    /// Only this agent's calls.
    #[arg(long)]
    pub agent: Option<String>,
    /// At most this many (the newest).
    #[arg(long, default_value_t = 500)]
    pub limit: u32,
}

/// A span longer than zero (`7d`, `12h`, `90m`), as the other commands read one.
fn parse_span(text: &str) -> Result<Duration, String> {
    match crate::duration::parse_duration(text)? {
        span if span.is_positive() => Ok(span),
        _ => Err(format!("expected a span longer than zero, got {text:?}")),
    }
}

/// `assent why`: an unknown set or item fails as `show` does (exit 1), an unknown
/// operation id too.
pub async fn why(ctx: &Ctx, args: WhyArgs) -> Result<Output, CliError> {
    let why = match (&args.audit, &args.set, args.index) {
        (Some(operation), _, _) => ctx.engine.why_audit(operation).await?.ok_or_else(|| {
            CliError::failed(format!("no audit record of operation {operation:?}"))
        })?,
        (None, Some(set), Some(index)) => {
            // As `show` resolves it (not shared with it: the command modules import the
            // command line, which names this one).
            let set = match uuid::Uuid::parse_str(set.trim()) {
                Ok(id) => id,
                Err(_) => ctx
                    .engine
                    .resolve_set_id(set)
                    .await
                    .map_err(|error| match error {
                        assent_confirm::ConfirmError::Store(error) => CliError::from(error),
                        other => CliError::from(other),
                    })?,
            };
            ctx.engine.why_item(set, index).await?
        }
        _ => {
            return Err(CliError::Usage(
                "name an item (`assent why SET IDX`) or an audit record (`--audit ID`)".to_owned(),
            ));
        }
    };
    Output::either(ctx.json, &why, || why.text())
}

/// `assent audit digest`: every call an `audit` rule let run since `--since`.
pub async fn audit_digest(ctx: &Ctx, args: AuditDigestArgs) -> Result<Output, CliError> {
    let since = ctx.now - args.since;
    let calls = ctx
        .engine
        .audited_calls(since, args.agent.as_deref(), args.limit)
        .await?;
    let shown: Vec<Value> = calls
        .iter()
        .map(assent_confirm::why::digest_entry)
        .collect();
    let value = json!({
        "since": assent_domain::format_time(since),
        "calls": shown,
    });
    Output::either(ctx.json, &value, || {
        if shown.is_empty() {
            return format!(
                "No audited calls since {} (`assent agent audit AGENT TOOL` marks a tool's calls)",
                assent_domain::format_time(since)
            );
        }
        let mut text = format!(
            "{} audited call(s) since {}:",
            shown.len(),
            assent_domain::format_time(since)
        );
        for call in &shown {
            text.push_str(&format!(
                "\n  {}  {}  {} {}  by rule {} {}  (operation {})",
                call["at"].as_str().unwrap_or_default(),
                call["agentId"].as_str().unwrap_or_default(),
                call["toolName"].as_str().unwrap_or_default(),
                call["args"],
                call["rule"]["action"].as_str().unwrap_or("audit"),
                call["rule"]["pattern"].as_str().unwrap_or("?"),
                call["operationId"].as_str().unwrap_or_default(),
            ));
        }
        text
    })
}
