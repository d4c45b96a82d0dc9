//! `assent tokens`: the API tokens of `assent serve` with their roles — make one (its
//! secret printed once), list them (never a secret), revoke one.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::admin::{ApiToken, Role};
use clap::{Args, Subcommand};
use serde_json::json;

/// `assent tokens [--json]`, `assent tokens add|revoke`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TokensArgs {
    /// Make or revoke a token instead of listing them.
    #[command(subcommand)]
    pub command: Option<TokensCommand>,
}

/// `assent tokens ...`.
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make a token and print its secret, once: the database keeps only its hash.
    Add(TokenAddArgs),
    /// Revoke a token: requests presenting it are refused from now on.
    Revoke(TokenRevokeArgs),
}

/// `assent tokens add --role agent|reviewer|admin [--agent A] [--person NAME]`.
#[derive(Debug, Args)]
pub struct TokenAddArgs {
    /// agent: posts one agent's wakes and reads its own sets, decides nothing;
    /// reviewer: decides; admin: also configures (agents, sync, tokens, webhooks).
    #[arg(long, value_parser = ["agent", "reviewer", "admin"])]
    pub role: String,
    /// The agent an agent token acts for (required with --role agent).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// The person a reviewer or admin token is issued to: it decides as NAME, and NAME
    /// through this token and through any other door (`--as NAME`, a Slack user mapped
    /// to NAME) counts once toward a quorum. A token naming nobody decides what one
    /// person may and is refused for items that need more than one.
    #[arg(long, value_name = "NAME")]
    pub person: Option<String>,
}

/// `assent tokens revoke ID`.
#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// The token's id (see `assent tokens`), not its secret.
    pub id: String,
}

/// Runs `assent tokens`.
pub async fn tokens(ctx: &Ctx, args: TokensArgs) -> Result<Output, CliError> {
    match args.command {
        None => {
            let list = ctx.engine.admin().tokens().await?;
            Output::either(ctx.json, &list, || render_list(&list))
        }
        Some(TokensCommand::Add(add)) => {
            let role: Role = add.role.parse()?;
            let issued = ctx
                .engine
                .admin()
                .issue_named_token(role, add.agent.as_deref(), add.person.as_deref(), ctx.now)
                .await?;
            let mut view = serde_json::to_value(&issued.token).unwrap_or_default();
            view["secret"] = json!(issued.secret);
            Output::either(ctx.json, &view, || {
                let bound = issued
                    .token
                    .agent_id
                    .as_deref()
                    .map(|agent| format!(" for agent {agent}"))
                    .or_else(|| {
                        issued
                            .token
                            .person
                            .as_deref()
                            .map(|person| format!(" for {person}"))
                    })
                    .unwrap_or_default();
                // The secret stays the last line, for whoever reads it off.
                let unnamed = if role != Role::Agent && issued.token.person.is_none() {
                    " It names no person: it decides what one person may, and is refused for items that need more than one (make one with --person NAME for those)."
                } else {
                    ""
                };
                format!(
                    "Made {role} token {}{bound}.{unnamed} Its secret, shown this once:\n{}",
                    issued.token.id, issued.secret
                )
            })
        }
        Some(TokensCommand::Revoke(revoke)) => {
            let revoked = ctx.engine.admin().revoke_token(&revoke.id, ctx.now).await?;
            match revoked {
                Some(token) => Output::either(ctx.json, &token, || {
                    format!("Revoked token {} ({} token)", token.id, token.role)
                }),
                None => Err(CliError::failed(format!("no token {:?}", revoke.id))),
            }
        }
    }
}

fn render_list(list: &[ApiToken]) -> String {
    if list.is_empty() {
        return "No tokens beyond the one `assent serve` was started with (an admin's)".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.role.to_string(),
                t.agent_id.clone().unwrap_or_default(),
                t.person.clone().unwrap_or_default(),
                render::time(t.created_at),
                t.revoked_at.map(render::time).unwrap_or_default(),
            ]
        })
        .collect();
    render::table(&["ID", "ROLE", "AGENT", "PERSON", "MADE", "REVOKED"], &rows)
}
