//! `assent agent create|allow|ask|deny|idempotent|show|list`, `assent task create|show`: the agents
//! and their policies, and the journal's tasks.

use crate::CliError;
use crate::cli::{
    AgentCreateArgs, AgentIdempotentArgs, AgentRuleArgs, AgentShowArgs, TaskCreateArgs,
    TaskShowArgs,
};
use crate::context::{Ctx, Output};
use crate::render;
use assent_journal_host::{NewTask, create_task, load_task};
use assent_server::{
    AgentView, ServerError, agent_view, agent_views, set_agent_categories, set_agent_idempotent,
    set_agent_rule,
};
use assent_store::StoreError;
use assent_tools::RuleAction;
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

/// A server-side refusal of the input (a blank tool) is a usage error on the command
/// line (exit 2); every other error keeps its own exit code.
fn usage_on_bad_input(error: ServerError) -> CliError {
    match error {
        ServerError::BadRequest(message) => CliError::Usage(message),
        other => CliError::from(other),
    }
}

/// `assent agent allow|ask|deny AGENT TOOL`: sets the agent's rule for TOOL. An unknown
/// agent is exit 1 (as for `assent tools`), a blank tool exit 2.
pub async fn agent_rule(
    ctx: &Ctx,
    args: AgentRuleArgs,
    action: RuleAction,
) -> Result<Output, CliError> {
    let (agent, changed) = set_agent_rule(ctx.store(), &args.agent, &args.tool, action, ctx.now)
        .await
        .map_err(usage_on_bad_input)?;
    Output::either(ctx.json, &agent, || {
        let note = if changed {
            "from its next wake on"
        } else {
            "it already was; nothing changed"
        };
        format!(
            "Agent {}: {} {} ({note})",
            agent.id,
            action.as_str(),
            args.tool.trim()
        )
    })
}

/// `assent agent idempotent AGENT TOOL [--off]`: the operator's word that a call of
/// TOOL left in doubt may simply run again (an MCP gateway under `--trust none` takes
/// no server's word for it). Unknown agent exit 1, blank tool exit 2.
pub async fn agent_idempotent(ctx: &Ctx, args: AgentIdempotentArgs) -> Result<Output, CliError> {
    let (agent, changed) =
        set_agent_idempotent(ctx.store(), &args.agent, &args.tool, !args.off, ctx.now)
            .await
            .map_err(usage_on_bad_input)?;
    Output::either(ctx.json, &agent, || {
        let said = if args.off {
            "may not run again when in doubt"
        } else {
            "is idempotent: run again when in doubt"
        };
        let note = if changed {
            "from the gateway's next call on"
        } else {
            "it already was; nothing changed"
        };
        format!("Agent {}: {} {said} ({note})", agent.id, args.tool.trim())
    })
}

/// `assent agent show AGENT`.
pub async fn agent_show(ctx: &Ctx, args: AgentShowArgs) -> Result<Output, CliError> {
    let agent = agent_view(ctx.store(), &args.agent).await?;
    Output::either(ctx.json, &agent, || render_agent(&agent))
}

/// `assent agent list`.
pub async fn agent_list(ctx: &Ctx) -> Result<Output, CliError> {
    let agents = agent_views(ctx.store()).await?;
    Output::either(ctx.json, &agents, || render_agents(&agents))
}

fn render_agent(agent: &AgentView) -> String {
    let mut text = format!(
        "Agent {}\n  categories  {}\n  created     {}\n  updated     {}\n",
        agent.id,
        agent.categories.join(", "),
        render::time(agent.created_at),
        render::time(agent.updated_at),
    );
    if agent.rules.is_empty() {
        text.push_str(
            "  rules       none: each tool as its mode says (deferred tools ask a person)",
        );
    } else {
        text.push_str("  rules\n");
        let rows: Vec<Vec<String>> = agent
            .rules
            .iter()
            .map(|rule| vec![rule.action.to_owned(), rule.tool.clone()])
            .collect();
        text.push_str(&render::indent(
            &render::table(&["ACTION", "TOOL"], &rows),
            "    ",
        ));
    }
    if !agent.idempotent_tools.is_empty() {
        text.push_str(&format!(
            "\n  idempotent  {} (in doubt: run again)",
            agent.idempotent_tools.join(", ")
        ));
    }
    if !agent.tools.is_empty() {
        // A gateway agent's tools as its server described them: the annotations are
        // the server's word, obeyed only under `--trust hints`.
        text.push_str("\n  tools through hosts\n");
        let rows: Vec<Vec<String>> = agent
            .tools
            .iter()
            .map(|tool| {
                let field = |key: &str| match &tool[key] {
                    serde_json::Value::String(s) => render::visible(s).into_owned(),
                    serde_json::Value::Null => "-".to_owned(),
                    other => assent_domain::canonical_json(other),
                };
                let changed = if tool["changed"] == true {
                    "CHANGED: asked again until allowed".to_owned()
                } else {
                    "pinned".to_owned()
                };
                vec![
                    field("host"),
                    field("tool"),
                    field("trust"),
                    changed,
                    field("annotations"),
                ]
            })
            .collect();
        text.push_str(&render::indent(
            &render::table(
                &["HOST", "TOOL", "TRUST", "DEFINITION", "ANNOTATIONS"],
                &rows,
            ),
            "    ",
        ));
    }
    text
}

fn render_agents(agents: &[AgentView]) -> String {
    if agents.is_empty() {
        return "No agents: create one with `assent agent create --id ID --categories C`"
            .to_owned();
    }
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|agent| {
            vec![
                agent.id.clone(),
                agent.categories.join(","),
                agent.rules.len().to_string(),
            ]
        })
        .collect();
    render::table(&["ID", "CATEGORIES", "RULES"], &rows)
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
