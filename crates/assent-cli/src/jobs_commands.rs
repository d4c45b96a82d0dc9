//! `assent jobs`: the execution ledger — the jobs of confirmed items whose tool's effect
//! lies outside the database, whose host is another process, or whose tool is held —
//! and a person's answers to the ones that need one: settle one in doubt (`resolve
//! --happened|--rerun`), retry or retract a failed one, cancel a held one within its
//! window; and `run`, this host's due jobs now.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::Resolution;
use assent_confirm::records::Job;
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
    /// Take back a confirmation still in its hold window (`assent agent hold`): it
    /// never runs, and the item ends rejected, "Cancelled during the hold window"
    /// (exit 3 once it started or finished).
    Cancel(JobIdArgs),
    /// Run the due jobs of this database's own host (the task journal) now: held
    /// confirmations whose window ended, and items confirmed for it elsewhere.
    /// `assent serve` does this all the time.
    Run(JobsRunArgs),
}

/// `assent jobs run [--wait]`.
#[derive(Debug, Args)]
pub struct JobsRunArgs {
    /// Also wait for the held jobs of this host still in their window, and run each
    /// when its window ends (until none is left).
    #[arg(long)]
    pub wait: bool,
}

/// `assent jobs resolve ID --happened|--rerun`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("answer").required(true).args(["happened", "rerun"])))]
pub struct ResolveArgs {
    /// The job's id (see `assent jobs`), or its first 8 or more hex digits.
    pub id: String,
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
    /// The job's id (see `assent jobs`), or its first 8 or more hex digits.
    pub id: String,
}

/// Runs `assent jobs`.
pub async fn jobs(ctx: &Ctx, args: JobsArgs) -> Result<Output, CliError> {
    let engine = &ctx.engine;
    let (job, done) = match args.command {
        None => {
            let list = engine.list_jobs(args.all).await?;
            let json: Vec<Value> = list.iter().map(Job::to_json).collect();
            return Output::either(ctx.json, &json, || render_list(&list));
        }
        Some(JobsCommand::Resolve(resolve)) => {
            let resolution = if resolve.happened {
                Resolution::Happened
            } else {
                Resolution::Rerun
            };
            let id = job_id(ctx, &resolve.id).await?;
            let job = engine.resolve_job(id, resolution, ctx.now).await?;
            let done = match resolution {
                Resolution::Happened => "recorded as applied",
                Resolution::Rerun => "due to run again",
            };
            (job, done)
        }
        Some(JobsCommand::Retry(retry)) => (
            engine
                .retry_job(job_id(ctx, &retry.id).await?, ctx.now)
                .await?,
            "due to run again",
        ),
        Some(JobsCommand::Retract(retract)) => {
            let id = job_id(ctx, &retract.id).await?;
            (engine.retract_job(id, ctx.now).await?, "retracted")
        }
        Some(JobsCommand::Cancel(cancel)) => (
            engine
                .cancel_job(job_id(ctx, &cancel.id).await?, ctx.now)
                .await?,
            "cancelled within its hold window; the item is rejected",
        ),
        Some(JobsCommand::Run(run)) => return run_due(ctx, run.wait).await,
    };
    Output::either(ctx.json, &job.to_json(), || {
        format!("Job {} ({}): {done}", job.id, job.tool_name)
    })
}

/// The fewest hex digits a job id's prefix needs, as for change set ids.
const MIN_PREFIX_DIGITS: usize = 8;

/// The job a command line names: its whole id, or the first 8 or more hex digits of
/// exactly one job's id (dashes where the id has them, or none). Not an id nor such a
/// prefix, or a prefix of several jobs' ids, is a usage error (exit 2); one of none
/// exit 1.
async fn job_id(ctx: &Ctx, text: &str) -> Result<Uuid, CliError> {
    let text = text.trim();
    if let Ok(id) = Uuid::parse_str(text) {
        return Ok(id);
    }
    let prefix = text.to_ascii_lowercase();
    let digits = prefix.chars().filter(char::is_ascii_hexdigit).count();
    let shaped = prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !shaped || digits < MIN_PREFIX_DIGITS {
        return Err(CliError::Usage(format!(
            "job id {text:?}: expected a UUID, or its first {MIN_PREFIX_DIGITS} or more hex digits"
        )));
    }
    let matches = |id: &Uuid| {
        let whole = id.to_string();
        whole.starts_with(&prefix) || whole.replace('-', "").starts_with(&prefix)
    };
    let all = ctx.engine.list_jobs(true).await?;
    let found: Vec<Uuid> = all.iter().map(|job| job.id).filter(matches).collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(CliError::failed(format!(
            "no job whose id starts with {text}"
        ))),
        several => Err(CliError::Usage(format!(
            "job id prefix {text} names {} jobs: give more digits",
            several.len()
        ))),
    }
}

/// `assent jobs run [--wait]`: this host's due jobs, once or (with `wait`) until no
/// held job of the host is left in its window. The clock starts at the command's
/// `now` (`--now`) and runs on in real time.
async fn run_due(ctx: &Ctx, wait: bool) -> Result<Output, CliError> {
    let engine = &ctx.engine;
    let host = engine.host().name().to_owned();
    let started = std::time::Instant::now();
    let clock = || ctx.now + started.elapsed();
    let mut total = assent_confirm::JobRun::default();
    loop {
        total += engine.run_due_jobs(clock()).await?;
        if !wait {
            break;
        }
        let next_hold = {
            engine
                .list_jobs(false)
                .await?
                .into_iter()
                .filter(|job| job.scheduled() && job.host == host && job.owner_device.is_none())
                .map(|job| job.due_at)
                .min()
        };
        let Some(due) = next_hold else { break };
        let pause = (due - clock()).clamp(time::Duration::ZERO, time::Duration::SECOND);
        tokio::time::sleep(pause.unsigned_abs()).await;
    }
    let json = serde_json::json!({
        "claimed": total.claimed,
        "applied": total.applied,
        "retried": total.retried,
        "failed": total.failed,
        "inDoubt": total.in_doubt,
        "rerun": total.rerun,
        "stale": total.stale,
    });
    Output::either(ctx.json, &json, || {
        format!(
            "Jobs of {host}: {} claimed, {} applied, {} failed, {} in doubt, {} stale",
            total.claimed, total.applied, total.failed, total.in_doubt, total.stale
        )
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
                render::job_status(job),
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
