//! `assent sessions [--agent A]` and `assent session show ID`: what a coding agent's
//! session did, on one screen — every call its hook was asked about, with how it ended
//! and who (or which rule) decided ([`assent_hook::sessions`] reads it from what the
//! store already records).

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_hook::sessions::{self, SessionCall, SessionSummary};
use clap::{Args, Subcommand};
use serde_json::Value;

/// `assent sessions [--agent A]`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Only the sessions of this agent.
    #[arg(long)]
    pub agent: Option<String>,
}

/// `assent session show ID`.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Every call of one coding-agent session (its hook events' `session_id`, or the
    /// first characters of exactly one), oldest first, with how each ended.
    Show(SessionShowArgs),
}

/// `assent session show ID [--agent A]`.
#[derive(Debug, Args)]
pub struct SessionShowArgs {
    /// The session's id (as `assent sessions` lists it), or its first characters.
    pub id: String,
    /// Only the calls of this agent in it.
    #[arg(long)]
    pub agent: Option<String>,
}

/// Runs `assent sessions`.
pub async fn list(ctx: &Ctx, args: SessionsArgs) -> Result<Output, CliError> {
    let agent = args.agent.as_deref().map(str::trim);
    let calls = sessions::calls(&ctx.engine, agent, None)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let list = sessions::summaries(&calls);
    let json: Vec<Value> = list.iter().map(SessionSummary::to_json).collect();
    Output::either(ctx.json, &json, || render_list(&list))
}

/// Runs `assent session show`.
pub async fn show(ctx: &Ctx, command: SessionCommand) -> Result<Output, CliError> {
    let SessionCommand::Show(args) = command;
    let agent = args.agent.as_deref().map(str::trim);
    let wanted = args.id.trim();
    if wanted.is_empty() {
        return Err(CliError::Usage(
            "name a session: assent session show ID".to_owned(),
        ));
    }
    let calls = sessions::calls(&ctx.engine, agent, None)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let session = session_named(&calls, wanted)?;
    let calls: Vec<SessionCall> = calls
        .into_iter()
        .filter(|call| call.session == session)
        .collect();
    let json = serde_json::json!({
        "session": session,
        "calls": calls.iter().map(SessionCall::to_json).collect::<Vec<_>>(),
    });
    Output::either(ctx.json, &json, || render_calls(&session, &calls))
}

/// The session `wanted` names: exactly one, or the one whose id starts with it. None is
/// exit 1; a prefix of several is a usage error naming them.
fn session_named(calls: &[SessionCall], wanted: &str) -> Result<String, CliError> {
    if calls.iter().any(|call| call.session == wanted) {
        return Ok(wanted.to_owned());
    }
    let mut matching: Vec<&str> = calls
        .iter()
        .map(|call| call.session.as_str())
        .filter(|session| session.starts_with(wanted))
        .collect();
    matching.sort_unstable();
    matching.dedup();
    match matching.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(CliError::failed(format!(
            "no hook call of session {wanted:?} is recorded (see assent sessions)"
        ))),
        several => Err(CliError::Usage(format!(
            "{wanted:?} starts {} sessions' ids ({}); give more of it",
            several.len(),
            several.join(", ")
        ))),
    }
}

fn render_list(list: &[SessionSummary]) -> String {
    if list.is_empty() {
        return "No coding-agent session has been recorded.".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.session.clone(),
                s.agent.clone(),
                s.workspace.clone(),
                render::time(s.last),
                s.calls.to_string(),
                s.asked.to_string(),
                s.edited.to_string(),
                s.refused.to_string(),
                s.failed.to_string(),
            ]
        })
        .collect();
    render::table(
        &[
            "SESSION",
            "AGENT",
            "WORKSPACE",
            "LAST",
            "CALLS",
            "ASKED",
            "EDITED",
            "REFUSED",
            "FAILED",
        ],
        &rows,
    )
}

fn render_calls(session: &str, calls: &[SessionCall]) -> String {
    let mut out = String::new();
    if let Some(first) = calls.first() {
        out.push_str(&format!(
            "Session {session} of agent {} in {} ({} call{})\n",
            first.agent,
            first.workspace,
            calls.len(),
            if calls.len() == 1 { "" } else { "s" }
        ));
    }
    for call in calls {
        out.push_str(&format!(
            "{}  {}: {}\n    {}\n",
            render::time(call.at),
            call.tool,
            render::visible(&call.summary()).replace('\n', "\n      "),
            call.how()
        ));
        if let Some(diff) = call.diff() {
            for line in diff.lines() {
                out.push_str(&format!("      {}\n", render::visible(line)));
            }
        }
    }
    out
}
