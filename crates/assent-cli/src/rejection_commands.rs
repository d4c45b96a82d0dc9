//! Remembered rejections on the command line: `assent rejections [--agent A]` lists
//! what is remembered (an identical call is refused without asking anyone), `assent
//! rejections forget ID|--all` asks again, `assent agent set A --remember-rejections
//! 7d|0` sets an agent's window; and the "refused again" lines `review` shows.

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::rejections::{RefusedAgain, RejectionMemory};
use assent_domain::ChangeDecision;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::collections::HashSet;
use time::{Duration, OffsetDateTime};

/// `assent rejections [--agent A] | forget ID|--all [--agent A]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RejectionsArgs {
    /// Forget remembered rejections: an identical call is asked again.
    #[command(subcommand)]
    pub command: Option<RejectionsCommand>,
    /// Only this agent's rejections.
    #[arg(long)]
    pub agent: Option<String>,
}

/// `assent rejections …`.
#[derive(Debug, Subcommand)]
pub enum RejectionsCommand {
    /// Forget one remembered rejection (ID as `assent rejections` lists it, or its first
    /// 8 or more hex digits), or every one with --all: the agent's identical call is
    /// asked again. Entered on the consent chain as a change of the agent's rules.
    Forget(ForgetArgs),
}

/// `assent rejections forget ID|--all [--agent A] [--as NAME]`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The rejection's id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub id: Option<String>,
    /// Forget every remembered rejection (only --agent's with --agent).
    #[arg(long)]
    pub all: bool,
    /// With --all: only this agent's.
    #[arg(long, requires = "all")]
    pub agent: Option<String>,
    /// Who forgets (recorded on the consent chain); the OS user by default.
    #[arg(long = "as", value_name = "NAME")]
    pub by: Option<String>,
}

/// `assent agent set AGENT --remember-rejections SPAN`.
#[derive(Debug, Args)]
pub struct AgentSetArgs {
    /// The agent's id.
    pub agent: String,
    /// How long a call a person rejected is refused without asking when the agent makes
    /// exactly that call again (`7d`, `12h`, `0` never); 7d unless set.
    #[arg(long, value_name = "SPAN", value_parser = parse_window)]
    pub remember_rejections: Option<Duration>,
    /// Who changes it (recorded on the consent chain); the OS user by default.
    #[arg(long = "as", value_name = "NAME")]
    pub by: Option<String>,
}

/// `0`, or a span as [`crate::duration::parse_duration`] reads it.
fn parse_window(text: &str) -> Result<Duration, String> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    crate::duration::parse_duration(text)
}

/// Who a command names as the person making a change: `--as`, else the OS user
/// (`cli::reviewer`, handed in by the dispatcher).
pub type Person = fn(Option<&str>) -> String;

/// `assent rejections`.
pub async fn rejections(
    ctx: &Ctx,
    args: RejectionsArgs,
    person: Person,
) -> Result<Output, CliError> {
    match args.command {
        Some(RejectionsCommand::Forget(forget)) => {
            return forget_rejections(ctx, forget, person).await;
        }
        None => {}
    }
    let agent = args.agent.as_deref().map(str::trim);
    let remembered = ctx.engine.remembered_rejections(agent, ctx.now).await?;
    let mut listed = Vec::with_capacity(remembered.len());
    for decision in &remembered {
        let memory = ctx.engine.rejection_memory(&decision.agent_id).await?;
        listed.push((decision, memory.window()));
    }
    let shown: Vec<Value> = listed
        .iter()
        .map(|(decision, window)| rejection_json(decision, *window))
        .collect();
    Output::either(ctx.json, &json!({ "rejections": shown }), || {
        render_rejections(&listed, agent)
    })
}

/// `assent rejections forget ID|--all`.
async fn forget_rejections(
    ctx: &Ctx,
    args: ForgetArgs,
    person: Person,
) -> Result<Output, CliError> {
    let by = person(args.by.as_deref());
    let forgotten = match &args.id {
        Some(id) => vec![
            ctx.engine
                .admin()
                .forget_rejection(id, Some(&by), ctx.now)
                .await?,
        ],
        None => {
            let agent = args.agent.as_deref().map(str::trim);
            ctx.engine
                .admin()
                .forget_rejections(agent, Some(&by), ctx.now)
                .await?
        }
    };
    let shown: Vec<Value> = forgotten
        .iter()
        .map(
            |d| json!({"id": d.id, "agentId": d.agent_id, "toolName": d.tool_name, "args": d.args}),
        )
        .collect();
    Output::either(ctx.json, &json!({ "forgotten": shown }), || {
        if forgotten.is_empty() {
            return "No rejection is remembered: nothing to forget".to_owned();
        }
        let mut text = format!(
            "Forgot {} rejection(s): the identical call is asked again",
            forgotten.len()
        );
        for decision in &forgotten {
            text.push_str(&format!(
                "\n  {}  agent {}  {}",
                decision.id,
                one_line(&decision.agent_id),
                call(decision)
            ));
        }
        text
    })
}

/// `assent agent set AGENT --remember-rejections SPAN`.
pub async fn agent_set(ctx: &Ctx, args: AgentSetArgs, person: Person) -> Result<Output, CliError> {
    let agent = args.agent.trim();
    let Some(window) = args.remember_rejections else {
        return Err(CliError::Usage(
            "say what to set: --remember-rejections SPAN (7d, 12h, 0 for never)".to_owned(),
        ));
    };
    let by = person(args.by.as_deref());
    let changed = ctx
        .engine
        .admin()
        .set_rejection_window(agent, window, Some(&by), ctx.now)
        .await?;
    let memory = ctx.engine.rejection_memory(agent).await?;
    Output::either(
        ctx.json,
        &json!({"agent": agent, "changed": changed, "rejectionMemory": memory_json(&memory)}),
        || {
            let note = if changed {
                ""
            } else {
                " (it already was; nothing changed)"
            };
            format!("Agent {agent}: rejections {}{note}", memory_line(&memory))
        },
    )
}

/// What `agent show --json` adds: `rejectionMemory: {window, windowSeconds}`.
pub fn memory_json(memory: &RejectionMemory) -> Value {
    json!({
        "window": render::duration(memory.window()),
        "windowSeconds": memory.window().whole_seconds(),
    })
}

/// What `agent show` says of an agent's rejections.
pub fn memory_line(memory: &RejectionMemory) -> String {
    if memory.window() <= Duration::ZERO {
        "not remembered: an identical call is asked again".to_owned()
    } else {
        format!(
            "remembered for {}: an identical call is refused without asking (`assent rejections`)",
            render::duration(memory.window())
        )
    }
}

/// The rejection's JSON in `assent rejections --json`.
fn rejection_json(decision: &ChangeDecision, window: Duration) -> Value {
    json!({
        "id": decision.id,
        "agentId": decision.agent_id,
        "targetKind": decision.target_kind,
        "targetId": decision.target_id,
        "toolName": decision.tool_name,
        "args": decision.args,
        "reason": decision.reason,
        "rejectedBy": decision.decided_by,
        "rejectedAt": assent_domain::format_time(decision.created_at),
        "rememberedUntil": assent_domain::format_time(decision.created_at + window),
    })
}

fn render_rejections(listed: &[(&ChangeDecision, Duration)], agent: Option<&str>) -> String {
    if listed.is_empty() {
        return match agent {
            Some(agent) => format!("No rejection of agent {agent} is remembered"),
            None => "No rejection is remembered".to_owned(),
        };
    }
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|(d, window)| {
            vec![
                d.id.to_string(),
                one_line(&d.agent_id),
                render::cut(&call(d), 100),
                format!(
                    "{} by {}",
                    render::time(d.created_at),
                    one_line(d.decided_by.as_deref().unwrap_or("someone"))
                ),
                render::time(d.created_at + *window),
                render::cut(&one_line(d.reason.as_deref().unwrap_or("")), 40),
            ]
        })
        .collect();
    format!(
        "Remembered rejections: the identical call is refused without asking anyone until then (`assent rejections forget ID|--all` asks again)\n{}",
        render::table(
            &["ID", "AGENT", "CALL", "REJECTED", "UNTIL", "REASON"],
            &rows
        )
    )
}

/// `Bash {"command":"rm -rf build"}`, shown on one line.
fn call(decision: &ChangeDecision) -> String {
    one_line(&format!(
        "{} {}",
        decision.tool_name,
        assent_domain::canonical_json(&decision.args)
    ))
}

/// `text` on one line, every misleading character visible.
fn one_line(text: &str) -> String {
    render::visible(text).replace(['\n', '\r'], " ")
}

/// A call refused again, as `assent review` shows it: `refused again: rejected by alice
/// on 2026-03-02 09:00:00Z, 'not now' (Bash {"command":"rm -rf build"}, agent claude,
/// 2026-03-03 10:00:00Z)`.
pub fn refused_again_line(refused: &RefusedAgain) -> String {
    let record = &refused.record;
    let rejected = match &refused.rejection {
        Some(decision) => {
            let mut said = format!(
                "rejected by {} on {}",
                one_line(decision.decided_by.as_deref().unwrap_or("someone")),
                render::time(decision.created_at)
            );
            if let Some(reason) = decision.reason.as_deref().filter(|r| !r.trim().is_empty()) {
                said.push_str(&format!(", '{}'", render::cut(&one_line(reason), 80)));
            }
            said
        }
        None => "rejected before (on another device)".to_owned(),
    };
    format!(
        "refused again: {rejected} ({}, agent {}, {})",
        render::cut(
            &one_line(&format!(
                "{} {}",
                record.tool_name,
                assent_domain::canonical_json(&record.args)
            )),
            80
        ),
        one_line(&record.agent_id),
        render::time(record.created_at)
    )
}

/// How far back `assent review` looks for calls refused again when it starts.
const REVIEW_LOOKBACK: Duration = Duration::hours(24);

/// The most "refused again" lines one look prints.
const REVIEW_LINES: u32 = 20;

/// What `assent review` said of calls refused again: each is said once, those of the
/// last day when the session starts, then each as it happens.
pub struct RefusedWatch {
    since: OffsetDateTime,
    agent: Option<String>,
    said: HashSet<(String, OffsetDateTime, String)>,
}

impl RefusedWatch {
    /// A watch of agent `agent`'s refusals (every agent's with `None`) from a day
    /// before `now` on.
    pub fn new(now: OffsetDateTime, agent: Option<&str>) -> Self {
        Self {
            since: now - REVIEW_LOOKBACK,
            agent: agent.map(str::to_owned),
            said: HashSet::new(),
        }
    }

    /// Says (on the review's terminal) each call refused again not said yet, oldest
    /// first.
    pub async fn say_new(&mut self, ctx: &Ctx) -> Result<(), CliError> {
        let refused = ctx
            .engine
            .refused_again(self.agent.as_deref(), self.since, REVIEW_LINES)
            .await?;
        for refused in refused.iter().rev() {
            let record = &refused.record;
            let key = (
                record.operation_id.as_str().to_owned(),
                record.created_at,
                record.run_key.clone(),
            );
            if self.said.insert(key) {
                crate::terminal::say(&refused_again_line(refused));
            }
        }
        Ok(())
    }
}
