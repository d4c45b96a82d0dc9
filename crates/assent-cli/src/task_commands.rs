//! `assent agent create|allow|ask|deny|unset|idempotent|show|list|backtest|shadow-report`,
//! `assent task create|show`: the agents and their policies (rules that may expire,
//! shadow rules tried without effect, a rule replayed against the history), and the
//! journal's tasks.

use crate::CliError;
use crate::cli::{
    AgentBacktestArgs, AgentCreateArgs, AgentHoldArgs, AgentIdempotentArgs, AgentRuleArgs,
    AgentShadowReportArgs, AgentShowArgs, AgentUnsetArgs, ConditionArgs, TaskCreateArgs,
    TaskShowArgs,
};
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::{ConfirmError, RuleChange};
use assent_journal_host::{NewTask, create_task, load_task};
use assent_server::{
    AgentView, ServerError, agent_view, agent_views, change_agent_rule, remove_agent_rule,
    set_agent_categories, set_agent_idempotent,
};
use assent_tools::{Backtest, RuleAction, ShadowReport, ToolRule};
use serde_json::{Value, json};
use time::{Date, OffsetDateTime};
use uuid::Uuid;

/// `assent agent create`.
pub async fn agent_create(ctx: &Ctx, args: AgentCreateArgs) -> Result<Output, CliError> {
    let agent = set_agent_categories(&ctx.engine, &args.id, &args.categories, ctx.now).await?;
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

/// `assent agent allow|ask|deny AGENT TOOL [--for SPAN]`: sets the agent's rule for
/// TOOL, until now + SPAN when given. An unknown agent is exit 1 (as for `assent
/// tools`), a blank tool exit 2.
pub async fn agent_rule(
    ctx: &Ctx,
    args: AgentRuleArgs,
    action: RuleAction,
) -> Result<Output, CliError> {
    let Some(tool) = args.tool.clone() else {
        return Err(CliError::Usage(
            "--read-only-tools goes with `assent agent allow AGENT` (and no TOOL)".to_owned(),
        ));
    };
    if args.approvals.is_some() && (action != RuleAction::Ask || args.shadow) {
        return Err(CliError::Usage(
            "--approvals goes with `assent agent ask` (not --shadow): how many people confirm each call".to_owned(),
        ));
    }
    let condition = condition_of(&args.condition)?;
    // The condition as its flags read, for the line that confirms the change.
    let when = condition.clone().map_or_else(String::new, |when| {
        let approvals = args.approvals.filter(|n| *n > 1);
        assent_tools::Condition::new(when, approvals)
            .map(|c| format!(" {}", c.describe()))
            .unwrap_or_default()
    });
    if args.shadow {
        return agent_shadow_rule(ctx, args, action, condition).await;
    }
    let change = RuleChange {
        until: args.for_span.map(|span| ctx.now + span),
        approvals: args.approvals,
        condition,
        any_name: args.any_name,
        by: Some(crate::cli::reviewer(None)),
        ..RuleChange::new(tool.trim(), action)
    };
    let (agent, changed) = change_agent_rule(&ctx.engine, &args.agent, &change, ctx.now)
        .await
        .map_err(usage_on_bad_input)?;
    let agent = agent_view(&ctx.engine, &agent.id).await?;
    let shown = with_expiries(ctx, &agent).await?;
    let until = args.for_span.map(|span| ctx.now + span);
    Output::either(ctx.json, &shown, || {
        let note = if changed {
            render::takes_effect(&agent.categories)
        } else {
            "it already was; nothing changed"
        };
        let until = until.map_or_else(String::new, |at| format!(" until {}", render::time(at)));
        format!(
            "Agent {}: {} {}{when}{until} ({note})",
            agent.id,
            action.as_str(),
            tool.trim()
        )
    })
}

/// The condition over the history the flags name (`--after`, `--only-after`,
/// `--total`), or none; a window a condition cannot have is a usage error naming the
/// flag and its value.
fn condition_of(args: &ConditionArgs) -> Result<Option<assent_tools::When>, CliError> {
    let seconds = |flag: &str, span: time::Duration| {
        assent_tools::window_seconds(span)
            .map_err(|why| CliError::Usage(format!("{flag} {}: {why}", render::duration(span))))
    };
    if let Some((count, span)) = args.after {
        return Ok(Some(assent_tools::When::After {
            count,
            window_seconds: seconds("--after", span)?,
        }));
    }
    if let (Some(pattern), Some(within)) = (&args.only_after, args.within) {
        return Ok(Some(assent_tools::When::OnlyAfter {
            pattern: pattern.trim().to_owned(),
            within_seconds: seconds("--within", within)?,
            succeeded: args.succeeded,
        }));
    }
    if let (Some(pointer), Some(over), Some(per)) = (&args.total, args.over, args.per) {
        return Ok(Some(assent_tools::When::Total {
            pointer: pointer.clone(),
            over,
            per_seconds: seconds("--per", per)?,
        }));
    }
    Ok(None)
}

/// `assent agent unset AGENT PATTERN`: the rule for exactly PATTERN removed; an agent
/// without one is told so and nothing changes.
pub async fn agent_unset(ctx: &Ctx, args: AgentUnsetArgs) -> Result<Output, CliError> {
    let pattern = args.pattern.trim();
    if pattern.is_empty() {
        return Err(CliError::Usage(
            "the rule's PATTERN must not be blank".to_owned(),
        ));
    }
    let by = crate::cli::reviewer(None);
    let (agent, removed) = remove_agent_rule(&ctx.engine, &args.agent, pattern, &by, ctx.now)
        .await
        .map_err(usage_on_bad_input)?;
    let shown = with_expiries(ctx, &agent).await?;
    Output::either(ctx.json, &shown, || {
        if removed {
            format!("Agent {}: rule for {pattern} removed", agent.id)
        } else {
            format!(
                "Agent {}: no rule for {pattern}; nothing changed (`assent agent show {}` lists its rules)",
                agent.id, agent.id
            )
        }
    })
}

/// `assent agent allow|ask|deny AGENT TOOL --shadow`: a rule tried without effect.
async fn agent_shadow_rule(
    ctx: &Ctx,
    args: AgentRuleArgs,
    action: RuleAction,
    condition: Option<assent_tools::When>,
) -> Result<Output, CliError> {
    let tool = args.tool.as_deref().unwrap_or_default();
    let (id, tool) = (args.agent.trim(), tool.trim());
    let set = ctx
        .engine
        .set_shadow_rule_when(id, tool, action, condition, ctx.now);
    let changed = match set.await {
        Ok(changed) => changed,
        Err(ConfirmError::InvalidRule(why)) => return Err(CliError::Usage(why)),
        Err(ConfirmError::UnknownAgent(_)) => {
            return Err(CliError::from(ServerError::NotFound(format!(
                "no agent {id:?}"
            ))));
        }
        Err(other) => return Err(other.into()),
    };
    let agent = agent_view(&ctx.engine, id).await?;
    let shown = with_expiries(ctx, &agent).await?;
    Output::either(ctx.json, &shown, || {
        let note = if changed {
            "nothing changes: a person is still asked; see `assent agent shadow-report`"
        } else {
            "it already was; nothing changed"
        };
        format!(
            "Agent {}: shadow {} {tool} ({note})",
            agent.id,
            action.as_str()
        )
    })
}

/// `assent agent shadow-report AGENT`: each shadow rule against the decisions people
/// made since it was set. Unknown agent exit 1.
pub async fn agent_shadow_report(
    ctx: &Ctx,
    args: AgentShadowReportArgs,
) -> Result<Output, CliError> {
    let id = args.agent.trim();
    let Some(settings) = ctx.engine.agent_settings(id).await? else {
        return Err(CliError::from(ServerError::NotFound(format!(
            "no agent {id:?}"
        ))));
    };
    let shadows = settings.shadow_rules;
    let mut reports = Vec::with_capacity(shadows.len());
    if let Some(earliest) = shadows.iter().map(|s| s.since).min() {
        let calls = ctx.engine.past_calls(Some(id), earliest).await?;
        // A shadow rule with a condition over the history counts only the decisions
        // at which its condition applied, judged on what the agent ran before each.
        let window = shadows
            .iter()
            .filter_map(|s| s.rule.condition().map(assent_tools::Condition::window))
            .max();
        let runs = match window {
            Some(window) => ctx.engine.agent_runs(id, earliest - window).await?,
            None => Vec::new(),
        };
        for shadow in &shadows {
            let covered = assent_tools::calls_under_condition(&calls, &runs, &shadow.rule);
            reports.push(assent_tools::shadow_report(
                &covered,
                id,
                &shadow.rule,
                shadow.since,
            ));
        }
    }
    Output::either(ctx.json, &reports, || render_shadow_reports(id, &reports))
}

fn render_shadow_reports(agent: &str, reports: &[ShadowReport]) -> String {
    if reports.is_empty() {
        return format!(
            "Agent {agent} has no shadow rules: try one with `assent agent allow {agent} TOOL --shadow`"
        );
    }
    let mut text = String::new();
    for report in reports {
        let rate = report.agreement_rate.map_or_else(
            || "no decisions yet".to_owned(),
            |rate| format!("{:.0}% agreement", rate * 100.0),
        );
        text.push_str(&format!(
            "Shadow {} {} since {}: {} of {} decisions agreed ({rate})\n",
            report.rule,
            report.tool,
            render::time(report.since),
            report.agreed,
            report.decisions,
        ));
        if !report.disagreements.is_empty() {
            let rows: Vec<Vec<String>> = report
                .disagreements
                .iter()
                .map(|d| {
                    let said = d
                        .person_reason
                        .as_deref()
                        .map_or_else(String::new, |r| format!(" (\"{}\")", render::visible(r)));
                    vec![
                        render::time(d.at),
                        format!("{}/{}", d.change_set_id, d.item_index),
                        d.outcome.to_owned(),
                        format!("{}{said}", d.reason),
                    ]
                })
                .collect();
            text.push_str(&render::indent(
                &render::table(&["DECIDED", "ITEM", "OUTCOME", "REASON"], &rows),
                "    ",
            ));
            text.push('\n');
        }
    }
    text.trim_end().to_owned()
}

/// The agent's view as JSON, each rule with its `expiresAt` and whether it has
/// `expired` at the command's `now` (both left out for a rule that never expires),
/// and its `shadowRules` `[{tool, action, since}]` (left out when there are none).
pub(crate) async fn with_expiries(ctx: &Ctx, view: &AgentView) -> Result<Value, CliError> {
    let expiries = expiries(ctx, &view.id).await?;
    let mut shown = serde_json::to_value(view).map_err(|e| CliError::failed(e.to_string()))?;
    let shadows = ctx
        .engine
        .agent_settings(&view.id)
        .await?
        .map(|settings| settings.shadow_rules)
        .unwrap_or_default();
    if !shadows.is_empty() {
        shown["shadowRules"] = shadows
            .iter()
            .map(|s| {
                let mut shadow = json!({"tool": s.rule.pattern(), "action": s.rule.action().as_str(),
                    "since": rfc3339(s.since)});
                if let Some(condition) = s.rule.condition() {
                    shadow["condition"] = json!(condition);
                    shadow["when"] = json!(condition.describe());
                }
                shadow
            })
            .collect();
    }
    let conditions = conditions(ctx, &view.id).await?;
    if let Some(rules) = shown["rules"].as_array_mut() {
        for ((rule, expiry), condition) in rules.iter_mut().zip(&expiries).zip(&conditions) {
            if let Some(at) = expiry {
                rule["expiresAt"] = json!(rfc3339(*at));
                rule["expired"] = json!(*at <= ctx.now);
            }
            // A rule over the session's history: its condition as stored, and as the
            // flags that set it read.
            if let Some(condition) = condition {
                rule["condition"] = json!(condition);
                rule["when"] = json!(condition.describe());
            }
        }
    }
    Ok(shown)
}

/// The expiry of each of agent `id`'s rules, in the order of its view's rules.
async fn expiries(ctx: &Ctx, id: &str) -> Result<Vec<Option<OffsetDateTime>>, CliError> {
    let agent = ctx.engine.agent_settings(id).await?.map(|s| s.agent);
    Ok(agent
        .map(|agent| {
            agent
                .policy
                .rules()
                .iter()
                .map(ToolRule::expires_at)
                .collect()
        })
        .unwrap_or_default())
}

/// The condition over the history of each of agent `id`'s rules, in the order of its
/// view's rules.
async fn conditions(ctx: &Ctx, id: &str) -> Result<Vec<Option<assent_tools::Condition>>, CliError> {
    let agent = ctx.engine.agent_settings(id).await?.map(|s| s.agent);
    Ok(agent
        .map(|agent| {
            agent
                .policy
                .rules()
                .iter()
                .map(|rule| rule.condition().cloned())
                .collect()
        })
        .unwrap_or_default())
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// `assent agent idempotent AGENT TOOL [--off]`: the operator's word that a call of
/// TOOL left in doubt may simply run again (an MCP gateway under `--trust none` takes
/// no server's word for it). Unknown agent exit 1, blank tool exit 2.
pub async fn agent_idempotent(ctx: &Ctx, args: AgentIdempotentArgs) -> Result<Output, CliError> {
    let (agent, changed) =
        set_agent_idempotent(&ctx.engine, &args.agent, &args.tool, !args.off, ctx.now)
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

/// `assent agent hold AGENT TOOL SECS`: a confirmed call of TOOL waits SECS seconds,
/// cancellable (`assent jobs cancel`), before it runs; 0 removes the window. Unknown
/// agent exit 1, blank tool exit 2.
pub async fn agent_hold(ctx: &Ctx, args: AgentHoldArgs) -> Result<Output, CliError> {
    let (agent, changed) =
        assent_server::set_agent_hold(&ctx.engine, &args.agent, &args.tool, args.seconds, ctx.now)
            .await
            .map_err(usage_on_bad_input)?;
    let shown = with_expiries(ctx, &agent).await?;
    Output::either(ctx.json, &shown, || {
        let tool = args.tool.trim();
        let said = if args.seconds == 0 {
            format!("confirmed calls of {tool} run at once")
        } else {
            format!(
                "confirmed calls of {tool} wait {} s, cancellable, before they run",
                args.seconds
            )
        };
        let note = if changed {
            ""
        } else {
            " (it already was; nothing changed)"
        };
        format!("Agent {}: {said}{note}", agent.id)
    })
}

/// `assent agent show AGENT`.
pub async fn agent_show(ctx: &Ctx, args: AgentShowArgs) -> Result<Output, CliError> {
    let agent = agent_view(&ctx.engine, &args.agent).await?;
    let mut shown = with_expiries(ctx, &agent).await?;
    let expiries = expiries(ctx, &agent.id).await?;
    let memory = ctx.engine.rejection_memory(&agent.id).await?;
    // Only when set (absent: the default, 7 days), so the shape of an agent that never
    // changed it stays as it was.
    if memory.window.is_some() {
        shown["rejectionMemory"] = crate::rejection_commands::memory_json(&memory);
    }
    Output::either(ctx.json, &shown, || {
        let mut text = render_agent(&agent, &expiries, ctx.now);
        text.push_str(&format!(
            "\n  rejections  {}",
            crate::rejection_commands::memory_line(&memory)
        ));
        for rule in shown["rules"].as_array().into_iter().flatten() {
            if let Some(when) = rule["when"].as_str() {
                text.push_str(&format!(
                    "\n  condition   {} {} {when} (applies only then)",
                    rule["action"].as_str().unwrap_or_default(),
                    rule["tool"].as_str().unwrap_or_default(),
                ));
            }
        }
        for shadow in shown["shadowRules"].as_array().into_iter().flatten() {
            let field = |key: &str| shadow[key].as_str().unwrap_or_default().to_owned();
            let when = shadow["when"]
                .as_str()
                .map_or_else(String::new, |when| format!(" {when}"));
            text.push_str(&format!(
                "\n  shadow      {} {}{when} since {} (no effect; see `assent agent shadow-report {}`)",
                field("action"),
                field("tool"),
                field("since"),
                agent.id
            ));
        }
        text
    })
}

/// `assent agent list`.
pub async fn agent_list(ctx: &Ctx) -> Result<Output, CliError> {
    let agents = agent_views(&ctx.engine).await?;
    let mut shown = Vec::with_capacity(agents.len());
    for agent in &agents {
        shown.push(with_expiries(ctx, agent).await?);
    }
    Output::either(ctx.json, &shown, || render_agents(&agents))
}

/// `assent agent backtest AGENT TOOL RULE [--since SPAN]`: the agent's final decisions
/// of TOOL in the window, replayed as if RULE had been in force. Unknown agent exit 1,
/// blank tool exit 2.
pub async fn agent_backtest(ctx: &Ctx, args: AgentBacktestArgs) -> Result<Output, CliError> {
    let agent = args.agent.trim();
    let mut rule =
        ToolRule::new(args.tool.trim(), args.rule).map_err(|e| CliError::Usage(e.to_string()))?;
    // A condition read as `agent allow|ask` read it, refused as they refuse it.
    if let Some(when) = condition_of(&args.condition)? {
        if args.rule == RuleAction::Deny {
            return Err(CliError::Usage(format!(
                "a condition over the history goes with allow or ask, not deny ({})",
                rule.pattern()
            )));
        }
        let condition =
            assent_tools::Condition::new(when, None).map_err(|e| CliError::Usage(e.to_string()))?;
        rule = rule.when(condition);
    }
    if ctx.engine.agent_settings(agent).await?.is_none() {
        return Err(CliError::from(ServerError::NotFound(format!(
            "no agent {agent:?}"
        ))));
    }
    let since = ctx.now - args.since;
    let result = ctx.engine.backtest(agent, &rule, since).await?;
    let mut shown = serde_json::to_value(&result).map_err(|e| CliError::failed(e.to_string()))?;
    shown["since"] = json!(rfc3339(since));
    Output::either(ctx.json, &shown, || render_backtest(&result, since))
}

fn render_backtest(result: &Backtest, since: OffsetDateTime) -> String {
    let mut text = format!(
        "Backtest: {} {} for agent {} since {}\n  calls decided  {}\n",
        result.rule,
        result.tool,
        result.agent,
        render::time(since),
        result.calls
    );
    match result.rule {
        "allow" => text.push_str(&format!("  run unasked    {}\n", result.would_run_unasked)),
        "ask" => text.push_str(&format!("  still asked    {}\n", result.would_ask)),
        _ => text.push_str(&format!(
            "  refused        {} ({} of them a person confirmed)\n",
            result.would_refuse, result.confirmed_but_refused
        )),
    }
    if result.let_through.is_empty() {
        if result.rule == "allow" {
            text.push_str("  let through    none: no rejection, edit or undo in the window");
        }
        return text.trim_end().to_owned();
    }
    text.push_str("  let through\n");
    let rows: Vec<Vec<String>> = result
        .let_through
        .iter()
        .map(|l| {
            let said = l
                .person_reason
                .as_deref()
                .map_or_else(String::new, |r| format!(" (\"{}\")", render::visible(r)));
            vec![
                render::time(l.at),
                format!("{}/{}", l.change_set_id, l.item_index),
                l.outcome.to_owned(),
                format!("{}{said}", l.reason),
            ]
        })
        .collect();
    text.push_str(&render::indent(
        &render::table(&["DECIDED", "ITEM", "OUTCOME", "REASON"], &rows),
        "    ",
    ));
    text
}

fn render_agent(
    agent: &AgentView,
    expiries: &[Option<OffsetDateTime>],
    now: OffsetDateTime,
) -> String {
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
        let expiring = expiries.iter().any(Option::is_some);
        let rows: Vec<Vec<String>> = agent
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| {
                let mut row = vec![rule.action.to_owned(), rule.tool.clone()];
                if expiring {
                    row.push(match expiries.get(index).copied().flatten() {
                        None => "never".to_owned(),
                        Some(at) if at <= now => {
                            format!("{} (expired: the tool's mode decides)", render::time(at))
                        }
                        Some(at) => render::time(at),
                    });
                }
                row
            })
            .collect();
        let header: &[&str] = if expiring {
            &["ACTION", "TOOL", "EXPIRES"]
        } else {
            &["ACTION", "TOOL"]
        };
        text.push_str(&render::indent(&render::table(header, &rows), "    "));
    }
    for quorum in &agent.quorums {
        text.push_str(&format!(
            "\n  quorum      {} needs {} approvals by distinct people",
            quorum.tool, quorum.approvals
        ));
    }
    for hold in &agent.holds {
        text.push_str(&format!(
            "\n  hold        {} {} s (a confirmation waits this long, cancellable, before it runs)",
            hold.tool, hold.seconds
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
    let task = create_task(tx.connection(), &id, &new, store.device_id(), ctx.now).await?;
    tx.commit().await?;
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
