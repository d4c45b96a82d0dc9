//! `assent hook AGENT_KIND --agent NAME`: answers one event of a coding agent's hook
//! (read on stdin) in that agent's dialect on stdout. A malformed event exits 2 with
//! one line on stderr (every one of these agents blocks the call then); any other
//! failure is answered as a denial, so a call is never let through by an error.

use crate::CliError;
use crate::context::Output;
use assent_hook::{AgentKind, Answer, HookOptions, OnTimeout, Phase};
use clap::{Args, ValueEnum};
use std::io::Read;
use std::time::Duration;

/// `assent hook AGENT_KIND --agent NAME [--wait SECS] [--on-timeout ask|deny]
/// [--category C]`.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The coding agent whose hook calls: claude-code, codex, cursor, copilot, vscode
    /// or gemini.
    #[arg(value_name = "AGENT_KIND", value_parser = parse_kind)]
    pub kind: AgentKind,
    /// The Assent agent whose rules (categories, allow|ask|deny, quorums, holds) decide.
    #[arg(long, value_name = "NAME")]
    pub agent: String,
    /// The workspace's category, checked against the agent's allowlist.
    #[arg(long, default_value = assent_hook::DEFAULT_CATEGORY, value_name = "CATEGORY")]
    pub category: String,
    /// How long a call that needs a person waits for one, in seconds; default: a few
    /// seconds under the agent's own hook timeout.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub wait: Option<u64>,
    /// When nobody decided in time: `ask` withdraws the item and lets the agent's own
    /// prompt ask (a denial for Codex and Gemini CLI, which cannot ask); `deny` denies
    /// naming the change set, and the same call retried once a person confirmed it is
    /// allowed once.
    #[arg(long, value_enum, default_value_t = OnTimeoutArg::Ask, value_name = "MODE")]
    pub on_timeout: OnTimeoutArg,
}

/// The values of `--on-timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnTimeoutArg {
    /// The agent's own prompt takes over.
    Ask,
    /// Denied; retry after the person decides.
    Deny,
}

fn parse_kind(text: &str) -> Result<AgentKind, String> {
    text.parse()
        .map_err(|e: assent_hook::HookError| e.to_string())
}

/// A few seconds under each agent's own default hook timeout (after which the agent
/// goes on without the hook, or blocks where told to).
fn default_wait(kind: AgentKind) -> Duration {
    Duration::from_secs(match kind {
        AgentKind::ClaudeCode | AgentKind::Codex => 590,
        AgentKind::Gemini => 55,
        AgentKind::Cursor | AgentKind::Copilot | AgentKind::Vscode => 25,
    })
}

/// Answers the event on stdin.
pub async fn run(db: &str, args: HookArgs) -> Result<Output, CliError> {
    let mut body = Vec::new();
    std::io::stdin()
        .take(assent_hook::MAX_EVENT_BYTES as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| CliError::Usage(format!("cannot read the hook event on stdin: {e}")))?;
    let event = assent_hook::parse(args.kind, &body).map_err(|e| CliError::Usage(e.to_string()))?;
    let options = HookOptions {
        kind: args.kind,
        agent: args.agent,
        category: args.category,
        wait: args
            .wait
            .map_or_else(|| default_wait(args.kind), Duration::from_secs),
        on_timeout: match args.on_timeout {
            OnTimeoutArg::Ask => OnTimeout::Ask,
            OnTimeoutArg::Deny => OnTimeout::Deny,
        },
    };
    let answer = match answer(db, &options, &event).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::error!(error = %error.one_line(), "the hook could not decide: denied");
            Answer::Deny {
                reason: format!(
                    "Assent could not decide, so the call is refused: {}",
                    error.one_line()
                ),
            }
        }
    };
    let reply = assent_hook::render(args.kind, &event, &answer);
    Ok(Output::text(reply.stdout))
}

async fn answer(
    db: &str,
    options: &HookOptions,
    event: &assent_hook::HookEvent,
) -> Result<Answer, CliError> {
    let store = crate::database::open_store(db).await?;
    match event.phase {
        Phase::After => assent_hook::record_ran(&store, options, event)
            .await
            .map(|()| Answer::Recorded)
            .map_err(|e| CliError::Failed(e.into())),
        Phase::Before | Phase::PermissionRequest => assent_hook::decide(&store, options, event)
            .await
            .map_err(|e| CliError::Failed(e.into())),
    }
}
