//! `assent agent create`, `assent task create|show`: the agents and the journal's tasks.

use crate::CliError;
use crate::cli::{AgentCreateArgs, TaskCreateArgs, TaskShowArgs};
use crate::context::{Ctx, Output};
use crate::render;
use assent_journal_host::{NewTask, create_task, load_task};
use assent_server::set_agent_categories;
use assent_store::StoreError;
use time::Date;
use uuid::Uuid;

/// `assent agent create`.
pub async fn agent_create(ctx: &Ctx, args: AgentCreateArgs) -> Result<Output, CliError> {
    let agent = set_agent_categories(ctx.store(), &args.id, &args.categories, ctx.now).await?;
    let categories: Vec<&str> = agent.categories.iter().map(String::as_str).collect();
    Output::either(ctx.json, &agent, || {
        render::agent(&agent.id, &categories, agent.created)
    })
}

/// Parses `YYYY-MM-DD`.
fn parse_date(text: &str) -> Result<Date, CliError> {
    assent_journal::parse_due_date(text).map_err(|e| {
        CliError::failed(format!(
            "invalid due date {text:?}: expected YYYY-MM-DD ({e})"
        ))
    })
}

/// `assent task create`.
pub async fn task_create(ctx: &Ctx, args: TaskCreateArgs) -> Result<Output, CliError> {
    let new = NewTask {
        title: args.title,
        category: Some(args.category),
        status: args.status,
        priority: args.priority,
        estimate_minutes: args.estimate,
        due_date: args.due.as_deref().map(parse_date).transpose()?,
        labels: args.labels,
        checklist: args.checklist,
    };
    let id = Uuid::new_v4().to_string();
    let store = ctx.store();
    let mut tx = store.begin_write().await?;
    let task = create_task(&mut tx, &id, &new, store.device_id(), ctx.now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Output::either(ctx.json, &task, || render::task(&task))
}

/// `assent task show`.
pub async fn task_show(ctx: &Ctx, args: TaskShowArgs) -> Result<Output, CliError> {
    let mut conn = ctx.connection().await?;
    let task = load_task(&mut conn, args.id.trim())
        .await?
        .ok_or_else(|| CliError::failed(format!("no task {:?}", args.id)))?;
    Output::either(ctx.json, &task, || render::task(&task))
}
