//! `assent policy export|plan|apply`: every agent's settings as one TOML file a team
//! reviews in a pull request (issue 57). `export` writes the file, `plan FILE` prints
//! what applying it would change, each rule set backtested over the history as `assent
//! agent backtest` replays it (exit 0 nothing to change, 2 invalid file, 10 changes
//! pending), and `apply FILE` writes it in one transaction, entered on the consent
//! chain with the file's SHA-256 and who applied it. The engine does the work
//! ([`assent_confirm::policy_file`]); this module reads the file, asks y/N and prints.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::rejection_commands::Person;
use crate::render;
use assent_confirm::policy_file::PlannedPolicy;
use assent_tools::{Backtest, PolicyChange};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::io::{IsTerminal as _, Read as _};
use std::path::PathBuf;
use time::Duration;

/// `assent policy ...`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print every agent's settings (categories, rules with their expiries, shadow
    /// rules, quorums, holds, idempotent and run-after-disconnect marks, how long
    /// rejections are remembered) as a TOML policy file on stdout.
    Export(PolicyExportArgs),
    /// Print what applying FILE would change, rule by rule, each rule set with its
    /// backtest over the history. Exit 0: nothing to change; 2: the file is invalid
    /// (its line and column named); 10: changes pending.
    Plan(PolicyPlanArgs),
    /// Apply FILE in one transaction (a file with one invalid setting applies
    /// nothing), entered on the consent chain with its SHA-256 and who applied it.
    /// Without --yes it shows the plan and asks y/N on a terminal.
    Apply(PolicyApplyArgs),
}

/// `assent policy export [--agent A]`.
#[derive(Debug, Args)]
pub struct PolicyExportArgs {
    /// Only this agent's settings.
    #[arg(long)]
    pub agent: Option<String>,
}

/// `assent policy plan FILE [--prune] [--since SPAN]`.
#[derive(Debug, Args)]
pub struct PolicyPlanArgs {
    /// The policy file (`-`: stdin).
    pub file: PathBuf,
    /// Also list the removal of the rules, shadow rules, quorums, holds and marks the
    /// file does not name (of the agents it names).
    #[arg(long)]
    pub prune: bool,
    /// The history each rule set is backtested over, as `assent agent backtest
    /// --since`.
    #[arg(long, value_name = "SPAN", default_value = "30d", value_parser = parse_span)]
    pub since: Duration,
}

/// `assent policy apply FILE [--yes] [--prune] [--as NAME]`.
#[derive(Debug, Args)]
pub struct PolicyApplyArgs {
    /// The policy file (`-`: stdin, which then needs --yes).
    pub file: PathBuf,
    /// Apply without showing the plan and asking (needed without a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Remove the rules, shadow rules, quorums, holds and marks the file does not name
    /// (of the agents it names); without it they stay. Agents the file does not name
    /// are never touched.
    #[arg(long)]
    pub prune: bool,
    /// Who applies it (recorded on the consent chain); the OS user by default.
    #[arg(long = "as", value_name = "NAME")]
    pub by: Option<String>,
}

fn parse_span(text: &str) -> Result<Duration, String> {
    match crate::duration::parse_duration(text)? {
        span if span.is_positive() => Ok(span),
        _ => Err(format!("expected a span longer than zero, got {text:?}")),
    }
}

/// Runs `assent policy ...`.
pub async fn run(ctx: &Ctx, command: PolicyCommand, person: Person) -> Result<Output, CliError> {
    match command {
        PolicyCommand::Export(args) => export(ctx, args).await,
        PolicyCommand::Plan(args) => plan(ctx, args).await,
        PolicyCommand::Apply(args) => apply(ctx, args, person).await,
    }
}

/// The file's text, from its path or stdin (`-`).
fn read_file(path: &PathBuf) -> Result<String, CliError> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("cannot read the policy file from stdin: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot read the policy file {}: {e}",
            path.display()
        ))
    })
}

async fn export(ctx: &Ctx, args: PolicyExportArgs) -> Result<Output, CliError> {
    let file = ctx.engine.policy_export(args.agent.as_deref()).await?;
    if ctx.json {
        return Output::json(&file);
    }
    Ok(Output::text(file.to_toml()))
}

/// One change as JSON, as the API answers it.
fn change_json(change: &PolicyChange, backtest: Option<&Backtest>) -> Result<Value, CliError> {
    Ok(assent_server::policy::change_json(change, backtest)?)
}

/// The plan as JSON, as `POST /api/policy/plan` answers it.
fn plan_json(planned: &PlannedPolicy, since: time::OffsetDateTime) -> Result<Value, CliError> {
    Ok(assent_server::policy::plan_json(planned, since)?)
}

/// The plan as text: one line per change, a rule set followed by its backtest.
fn plan_text(planned: &PlannedPolicy, since: time::OffsetDateTime) -> String {
    if planned.plan.is_empty() {
        return format!(
            "No changes: the policy file (sha256 {}) says what is in force",
            planned.sha256
        );
    }
    let mut text = format!(
        "Policy file sha256 {}: {} change(s)\n",
        planned.sha256,
        planned.plan.changes.len()
    );
    for (change, backtest) in planned.plan.changes.iter().zip(&planned.backtests) {
        text.push_str(&render::visible(&change.line()));
        text.push('\n');
        if let Some(b) = backtest {
            text.push_str(&format!(
                "    backtest since {}: {} call(s) decided; {}\n",
                render::time(since),
                b.calls,
                backtest_summary(b)
            ));
            for l in &b.let_through {
                text.push_str(&format!(
                    "      {} {}/{} {}: {}\n",
                    render::time(l.at),
                    l.change_set_id,
                    l.item_index,
                    l.outcome,
                    l.reason
                ));
            }
        }
    }
    text.trim_end().to_owned()
}

/// What a backtest says in one clause, by the rule's action.
fn backtest_summary(b: &Backtest) -> String {
    let among = |outcome: &str| {
        b.let_through
            .iter()
            .filter(|l| l.outcome == outcome)
            .count()
    };
    match b.rule {
        "allow" => format!(
            "{} would have run unasked ({} rejected, {} edited, {} undone among them)",
            b.would_run_unasked,
            among("rejected"),
            among("edited"),
            among("undone")
        ),
        "ask" => format!("{} still asked", b.would_ask),
        "deny" => format!(
            "{} refused ({} of them a person confirmed)",
            b.would_refuse, b.confirmed_but_refused
        ),
        other => format!("{other}: see `assent agent backtest`"),
    }
}

async fn plan(ctx: &Ctx, args: PolicyPlanArgs) -> Result<Output, CliError> {
    let text = read_file(&args.file)?;
    let since = ctx.now - args.since;
    let planned = ctx.engine.policy_plan(&text, args.prune, since).await?;
    let mut output = Output::either(ctx.json, &plan_json(&planned, since)?, || {
        plan_text(&planned, since)
    })?;
    if !planned.plan.is_empty() {
        output.failure = Some(CliError::Pending(format!(
            "{} change(s) pending: `assent policy apply` applies them",
            planned.plan.changes.len()
        )));
    }
    Ok(output)
}

async fn apply(ctx: &Ctx, args: PolicyApplyArgs, person: Person) -> Result<Output, CliError> {
    use std::io::{BufRead as _, Write as _};
    let from_stdin = args.file.as_os_str() == "-";
    if !args.yes && (from_stdin || !std::io::stdin().is_terminal()) {
        return Err(CliError::Usage(
            "policy apply shows the plan and asks y/N on a terminal: pass --yes to apply without asking (a file read from stdin always needs --yes)"
                .to_owned(),
        ));
    }
    let text = read_file(&args.file)?;
    let by = person(args.by.as_deref());
    let mut shown = None;
    if !args.yes {
        let since = ctx.now - Duration::days(30);
        let planned = ctx.engine.policy_plan(&text, args.prune, since).await?;
        if planned.plan.is_empty() {
            return Output::either(
                ctx.json,
                &json!({"sha256": planned.sha256, "by": by, "applied": 0, "changes": []}),
                || plan_text(&planned, since),
            );
        }
        let mut stderr = std::io::stderr();
        let _ = writeln!(stderr, "{}", plan_text(&planned, since));
        let _ = write!(
            stderr,
            "Apply these {} change(s) as {by}? [y/N] ",
            planned.plan.changes.len()
        );
        let _ = stderr.flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| CliError::failed(format!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Ok(Output::text("Nothing applied".to_owned()));
        }
        shown = Some(planned.plan);
    }
    let applied = ctx
        .engine
        .admin()
        .apply_policy(&text, args.prune, shown.as_ref(), &by, ctx.now)
        .await?;
    let sha256 = assent_confirm::policy_file::sha256_hex(&text);
    let changes = applied
        .changes
        .iter()
        .map(|c| change_json(c, None))
        .collect::<Result<Vec<_>, _>>()?;
    let shown = json!({"sha256": sha256, "by": by, "applied": changes.len(), "changes": changes});
    Output::either(ctx.json, &shown, || {
        if applied.is_empty() {
            return format!("No changes: the policy file (sha256 {sha256}) says what is in force");
        }
        let mut text = format!(
            "Applied policy file sha256 {sha256} as {by}: {} change(s)\n",
            applied.changes.len()
        );
        for change in &applied.changes {
            text.push_str(&render::visible(&change.line()));
            text.push('\n');
        }
        text.trim_end().to_owned()
    })
}
