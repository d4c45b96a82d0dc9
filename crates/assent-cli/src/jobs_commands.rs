//! `assent jobs`: the execution ledger — the jobs of confirmed items whose tool's effect
//! lies outside the database — and a person's answers to the ones that need one:
//! settle one in doubt (`resolve --happened|--rerun`), retry or retract a failed one.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::Resolution;
use assent_store::jobs::{self, Job};
use clap::{Args, Subcommand};
use serde_json::Value;
use uuid::Uuid;

/// `assent jobs [--all] [--json]`, `assent jobs resolve|retry|retract ID`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JobsArgs {
    /// Settle, retry or retract a job instead of listing them.
    #[command(subcommand)]
    pub command: Option<JobsCommand>,
    /// List retracted jobs too.
    #[arg(long)]
    pub all: bool,
}

/// `assent jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Settle a job in doubt: it happened (record it applied), or run it again
    /// (exit 3 when it is not in doubt).
    Resolve(ResolveArgs),
    /// Run a failed job again, with a fresh retry budget (exit 3 when it has not failed).
    Retry(JobIdArgs),
    /// Withdraw a failed job: it never runs (exit 3 when it has not failed).
    Retract(JobIdArgs),
}

/// `assent jobs resolve ID --happened|--rerun`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("answer").required(true).args(["happened", "rerun"])))]
pub struct ResolveArgs {
    /// The job's id (see `assent jobs`).
    pub id: Uuid,
    /// The effect happened: record the job as applied.
    #[arg(long)]
    pub happened: bool,
    /// The effect did not happen (or running it twice is fine): run it again.
    #[arg(long)]
    pub rerun: bool,
}

/// `assent jobs retry|retract ID`.
#[derive(Debug, Args)]
pub struct JobIdArgs {
    /// The job's id (see `assent jobs`).
    pub id: Uuid,
}

/// Runs `assent jobs`.
pub async fn jobs(ctx: &Ctx, args: JobsArgs) -> Result<Output, CliError> {
    let engine = &ctx.engine;
    let (job, done) = match args.command {
        None => {
            let mut conn = ctx.connection().await?;
            let list = jobs::list(&mut conn, args.all, u32::MAX).await?;
            let json: Vec<Value> = list.iter().map(Job::to_json).collect();
            return Output::either(ctx.json, &json, || render_list(&list));
        }
        Some(JobsCommand::Resolve(resolve)) => {
            let resolution = if resolve.happened {
                Resolution::Happened
            } else {
                Resolution::Rerun
            };
            let job = engine.resolve_job(resolve.id, resolution, ctx.now).await?;
            let done = match resolution {
                Resolution::Happened => "recorded as applied",
                Resolution::Rerun => "due to run again",
            };
            (job, done)
        }
        Some(JobsCommand::Retry(retry)) => (
            engine.retry_job(retry.id, ctx.now).await?,
            "due to run again",
        ),
        Some(JobsCommand::Retract(retract)) => {
            (engine.retract_job(retract.id, ctx.now).await?, "retracted")
        }
    };
    Output::either(ctx.json, &job.to_json(), || {
        format!("Job {} ({}): {done}", job.id, job.tool_name)
    })
}

fn render_list(list: &[Job]) -> String {
    if list.is_empty() {
        return "No jobs: no confirmed item of a tool with an external effect".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|job| {
            vec![
                job.id.to_string(),
                format!("{}:{}", job.change_set_id, job.item_index),
                job.tool_name.clone(),
                job.status.label().to_owned(),
                job.attempts.to_string(),
                render::time(job.updated_at),
                job.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    render::table(
        &[
            "ID",
            "ITEM",
            "TOOL",
            "STATUS",
            "ATTEMPTS",
            "SINCE",
            "LAST ERROR",
        ],
        &rows,
    )
}
