//! From the parsed command line to the command that runs it: one function per command,
//! each opening nothing itself but the context, calling the engine and handing back what
//! to print (JSON with `--json`, text from [`crate::render`] otherwise) or a
//! [`CliError`] that decides the exit code.

use crate::CliError;
use crate::cli::{AgentCommand, Cli, Command, DbCommand, TaskCommand};
use crate::context::{Ctx, Output};
use crate::decision_commands::{
    confirm, defer, dismiss, edit, expire, pending, reject, show, undo,
};
use crate::record_commands::{audit_trail, grants, history, outbox_messages};
use crate::task_commands::{
    agent_backtest, agent_create, agent_idempotent, agent_list, agent_rule, agent_show,
    task_create, task_show,
};
use crate::wake_commands::{read_calls, tools, wake};
use crate::{demo, demo_delegated, serve};
use assent_domain::OffsetDateTime;
use assent_tools::RuleAction;

/// `demo` runs on a fresh temporary database and prints a story for a person: a `--db`
/// or `--json` it would silently ignore is refused, so nobody believes their own
/// database was used or scripts against text. (`ASSENT_DATABASE_URL` is not refused:
/// it is meant for every command, and the demo touches no database of the user's.)
fn refuse_flags_the_demo_ignores(cli: &Cli) -> Result<(), CliError> {
    let demo = "`assent demo` tells its story as text, on a fresh temporary database";
    if cli.db.is_some() {
        return Err(CliError::Usage(format!(
            "{demo}: it does not use --db; run it without --db"
        )));
    }
    if cli.json {
        return Err(CliError::Usage(format!(
            "{demo}: it has no --json output; run it without --json"
        )));
    }
    Ok(())
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<Output, CliError> {
    if let Command::Demo(_) = cli.command {
        refuse_flags_the_demo_ignores(&cli)?;
    }
    let db = || crate::database::locate(cli.db.clone());
    let command = match cli.command {
        Command::Demo(args) if args.delegated => {
            return demo_delegated::run(cli.now).await.map(Output::text);
        }
        Command::Demo(_) => return demo::run(cli.now).await.map(Output::text),
        Command::Serve(args) => return serve::run(&db()?, args).await.map(Output::text),
        Command::Mcp(args) => {
            return crate::mcp_commands::run(&db()?, args)
                .await
                .map(|()| Output::text(String::new()));
        }
        Command::Hook(args) => return crate::hook_commands::run(cli.db.clone(), args).await,
        Command::Doctor(args) => {
            return crate::doctor_commands::run(cli.db.clone(), cli.json, args).await;
        }
        Command::Db(command) => command,
    };
    // Read the wake's input before touching the database: a bad document changes nothing.
    let calls = match &command {
        DbCommand::Wake(args) => Some(read_calls(args.calls.as_deref(), args.format)?),
        _ => None,
    };
    // Without a terminal there is nobody to ask: refused before the database is opened.
    if let DbCommand::Review(_) = &command {
        crate::review::require_terminal()?;
    }
    // A remote reviewer opens no local database.
    let command = match command {
        DbCommand::Review(args) if args.server.is_some() => {
            return crate::review::run_remote(args, cli.now).await;
        }
        command => command,
    };
    let now = cli.now.unwrap_or_else(OffsetDateTime::now_utc);
    let ctx = Ctx::open(&db()?, now, cli.json).await?;
    let output = match command {
        DbCommand::Agent(AgentCommand::Create(args)) => agent_create(&ctx, args).await,
        DbCommand::Agent(AgentCommand::Allow(args)) if args.read_only_tools => {
            crate::mcp_commands::allow_read_only_tools(&ctx, &args.agent, args.yes).await
        }
        DbCommand::Agent(AgentCommand::Allow(args)) => {
            agent_rule(&ctx, args, RuleAction::Allow).await
        }
        DbCommand::Agent(AgentCommand::Ask(args)) => agent_rule(&ctx, args, RuleAction::Ask).await,
        DbCommand::Agent(AgentCommand::Audit(args)) => {
            agent_rule(&ctx, args, RuleAction::Audit).await
        }
        DbCommand::Agent(AgentCommand::Deny(args)) => {
            agent_rule(&ctx, args, RuleAction::Deny).await
        }
        DbCommand::Agent(AgentCommand::Unset(args)) => {
            crate::task_commands::agent_unset(&ctx, args).await
        }
        DbCommand::Agent(AgentCommand::Idempotent(args)) => agent_idempotent(&ctx, args).await,
        DbCommand::Agent(AgentCommand::RunAfterDisconnect(args)) => {
            crate::mcp_commands::agent_run_after_disconnect(
                &ctx,
                &args.agent,
                &args.tool,
                !args.off,
            )
            .await
        }
        DbCommand::Agent(AgentCommand::Hold(args)) => {
            crate::task_commands::agent_hold(&ctx, args).await
        }
        DbCommand::Agent(AgentCommand::Set(args)) => {
            crate::rejection_commands::agent_set(&ctx, args, crate::cli::reviewer).await
        }
        DbCommand::Agent(AgentCommand::Show(args)) => agent_show(&ctx, args).await,
        DbCommand::Agent(AgentCommand::List) => agent_list(&ctx).await,
        DbCommand::Agent(AgentCommand::Backtest(args)) => agent_backtest(&ctx, args).await,
        DbCommand::Agent(AgentCommand::ShadowReport(args)) => {
            crate::task_commands::agent_shadow_report(&ctx, args).await
        }
        DbCommand::Policy(command) => {
            crate::policy_commands::run(&ctx, command, crate::cli::reviewer).await
        }
        DbCommand::Task(TaskCommand::Create(args)) => task_create(&ctx, args).await,
        DbCommand::Task(TaskCommand::Show(args)) => task_show(&ctx, args).await,
        DbCommand::Wake(args) => match calls {
            Some(parsed) => wake(&ctx, args, parsed).await,
            None => Err(CliError::failed("no tool calls read")),
        },
        DbCommand::Pending(args) => pending(&ctx, args).await,
        DbCommand::Show(args) => show(&ctx, args).await,
        DbCommand::Why(args) => crate::why_commands::why(&ctx, args).await,
        DbCommand::Review(args) => crate::review::run(&ctx, args, cli.now).await,
        DbCommand::Confirm(args) => confirm(&ctx, args).await,
        DbCommand::Reject(args) => reject(&ctx, args).await,
        DbCommand::Edit(args) => edit(&ctx, args).await,
        DbCommand::Defer(args) => defer(&ctx, args).await,
        DbCommand::Undo(args) => undo(&ctx, args).await,
        DbCommand::Dismiss(args) => dismiss(&ctx, args).await,
        DbCommand::Expire(args) => expire(&ctx, args).await,
        DbCommand::History(args) => history(&ctx, args).await,
        DbCommand::Audit(args) => audit_trail(&ctx, args).await,
        DbCommand::Outbox(args) => outbox_messages(&ctx, args).await,
        DbCommand::Grants(args) => grants(&ctx, args).await,
        DbCommand::Sync(args) => crate::sync_commands::sync(&ctx, args).await,
        DbCommand::Conflicts => crate::sync_commands::conflicts(&ctx).await,
        DbCommand::Tokens(args) => crate::tokens_commands::tokens(&ctx, args).await,
        DbCommand::Tools(args) => tools(&ctx, args).await,
        DbCommand::Webhooks(args) => crate::webhook_commands::webhooks(&ctx, args).await,
        DbCommand::Slack(args) => crate::slack_commands::slack(&ctx, args).await,
        DbCommand::Telegram(args) => crate::telegram_commands::telegram(&ctx, args).await,
        DbCommand::Notify(args) => crate::notify_commands::notify(&ctx, args).await,
        DbCommand::Jobs(args) => crate::jobs_commands::jobs(&ctx, args).await,
        DbCommand::Rejections(args) => {
            crate::rejection_commands::rejections(&ctx, args, crate::cli::reviewer).await
        }
        DbCommand::Sessions(args) => crate::session_commands::list(&ctx, args).await,
        DbCommand::Session(command) => crate::session_commands::show(&ctx, command).await,
    };
    ctx.store().close().await;
    output
}
