//! What happened: `assent history`, `audit`, `outbox` and `grants`.

use crate::CliError;
use crate::cli::{AuditArgs, GrantsArgs, GrantsCommand, HistoryArgs, OutboxArgs};
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::ConfirmError;
use assent_server::shapes::AuditView;
use assent_store::delegation::{self, Revocation};
use assent_store::{StoreError, audit, outbox};
use serde_json::json;
use uuid::Uuid;

/// `assent history`.
pub async fn history(ctx: &Ctx, args: HistoryArgs) -> Result<Output, CliError> {
    let section = ctx
        .engine
        .confirmations()
        .history(&args.agent, args.about().as_ref(), args.limit)
        .await?;
    Output::either(ctx.json, &json!({"history": section}), || {
        render::history(section.as_deref(), &args.agent)
    })
}

/// `assent audit`.
pub async fn audit_trail(ctx: &Ctx, args: AuditArgs) -> Result<Output, CliError> {
    let filter = match (args.about(), args.run) {
        (Some(target), _) => audit::AuditFilter::Target(target),
        (None, Some(run)) => audit::AuditFilter::Run(run),
        (None, None) => audit::AuditFilter::All,
    };
    let mut conn = ctx.connection().await?;
    let records = audit::list(&mut conn, &filter, args.limit).await?;
    Output::either(ctx.json, &AuditView::all(&records), || {
        render::audit(&records)
    })
}

/// `assent outbox`.
pub async fn outbox_messages(ctx: &Ctx, args: OutboxArgs) -> Result<Output, CliError> {
    let mut conn = ctx.connection().await?;
    let messages = outbox::undelivered(&mut conn, args.limit).await?;
    Output::either(ctx.json, &messages, || render::outbox(&messages))
}

/// `assent grants` and `assent grants revoke ID`.
pub async fn grants(ctx: &Ctx, args: GrantsArgs) -> Result<Output, CliError> {
    if let Some(GrantsCommand::Revoke(revoke)) = args.command {
        let id = Uuid::parse_str(revoke.id.trim())
            .map_err(|e| CliError::failed(format!("invalid grant id {:?}: {e}", revoke.id)))?;
        let mut tx = ctx.store().begin_write().await?;
        let revocation = delegation::revoke_grant(&mut tx, id, ctx.now).await?;
        tx.commit().await.map_err(StoreError::from)?;
        return match revocation {
            Revocation::Revoked(grant) => {
                Output::either(ctx.json, &grant, || render::grant_revoked(&grant))
            }
            Revocation::AlreadyRevoked(grant) => Err(CliError::Conflict(format!(
                "grant {id} was already revoked at {}",
                render::time(grant.revoked_at.unwrap_or(ctx.now))
            ))),
            Revocation::NotFound => Err(CliError::from(ConfirmError::GrantNotFound(id))),
        };
    }
    let filter = delegation::GrantFilter {
        agent_path: args.agent,
        tool_name: args.tool,
        include_revoked: args.all,
    };
    let mut conn = ctx.connection().await?;
    let grants = delegation::list_grants(&mut conn, &filter).await?;
    Output::either(ctx.json, &grants, || render::grants(&grants))
}
