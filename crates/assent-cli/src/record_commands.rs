//! What happened: `assent history`, `audit`, `outbox` and `grants`.

use crate::CliError;
use crate::cli::{
    AuditArgs, AuditCommand, AuditVerifyArgs, GrantsArgs, GrantsCommand, GrantsSuggestArgs,
    HistoryArgs, OutboxArgs,
};
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::grants::{GrantFilter, Revocation};
use assent_confirm::history::{AuditFilter, VerifyOptions};
use assent_confirm::{ConfirmError, ConflictKind};
use assent_server::shapes::AuditView;
use assent_tools::{
    AgentPolicy, GrantSuggestion, InForce, RuleAction, SuggestOptions, suggest_grants,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// How far back `assent history` lists calls refused again.
const REFUSED_LOOKBACK: time::Duration = time::Duration::days(30);

/// `assent history`: the section the agent's next wake sees, then the calls refused
/// again without asking anyone (a remembered rejection), which the section leaves out:
/// the person reads what the agent tried, not only what was decided.
pub async fn history(ctx: &Ctx, args: HistoryArgs) -> Result<Output, CliError> {
    let about = args.about();
    let section = ctx
        .engine
        .confirmations()
        .history(&args.agent, about.as_ref(), args.limit)
        .await?;
    let mut refused = ctx
        .engine
        .refused_again(Some(&args.agent), ctx.now - REFUSED_LOOKBACK, args.limit)
        .await?;
    if let Some(target) = &about {
        refused.retain(|r| r.record.target_kind == target.kind && r.record.target_id == target.id);
    }
    let listed: Vec<serde_json::Value> = refused
        .iter()
        .map(|r| {
            json!({
                "toolName": r.record.tool_name,
                "args": r.record.args,
                "at": assent_domain::format_time(r.record.created_at),
                "refusedBy": r.record.refused_by,
                "rejectedBy": r.rejection.as_ref().and_then(|d| d.decided_by.clone()),
                "rejectedAt": r.rejection.as_ref().map(|d| assent_domain::format_time(d.created_at)),
                "reason": r.rejection.as_ref().and_then(|d| d.reason.clone()),
            })
        })
        .collect();
    // `refusedAgain` only when there is one, so the shape of a history without any
    // stays as it was.
    let mut shown = json!({ "history": section });
    if !listed.is_empty() {
        shown["refusedAgain"] = json!(listed);
    }
    // The calls an `audit` rule let run (issue 57), likewise only when there is one.
    let audited = ctx
        .engine
        .audited_calls(ctx.now - REFUSED_LOOKBACK, Some(&args.agent), args.limit)
        .await?;
    let audited: Vec<serde_json::Value> = audited
        .iter()
        .filter(|row| {
            about
                .as_ref()
                .is_none_or(|t| row.record.target_kind == t.kind && row.record.target_id == t.id)
        })
        .map(assent_confirm::why::digest_entry)
        .collect();
    if !audited.is_empty() {
        shown["auditedCalls"] = json!(audited);
    }
    Output::either(ctx.json, &shown, || {
        let mut text = render::history(section.as_deref(), &args.agent);
        if !refused.is_empty() {
            text.push_str("\n\nCalls refused without asking anyone (a person rejected exactly this call before; `assent rejections`):");
            for r in &refused {
                text.push_str("\n  ");
                text.push_str(&crate::rejection_commands::refused_again_line(r));
            }
        }
        if !audited.is_empty() {
            text.push_str(
                "\n\nCalls an audit rule let run without asking (`assent audit digest`):",
            );
            for call in &audited {
                text.push_str(&format!(
                    "\n  {}  {} {}  by rule audit {}",
                    call["at"].as_str().unwrap_or_default(),
                    call["toolName"].as_str().unwrap_or_default(),
                    call["args"],
                    call["rule"]["pattern"].as_str().unwrap_or("?"),
                ));
            }
        }
        text
    })
}

/// `assent audit`.
pub async fn audit_trail(ctx: &Ctx, args: AuditArgs) -> Result<Output, CliError> {
    match args.command {
        Some(AuditCommand::Verify(verify)) => return audit_verify(ctx, verify).await,
        Some(AuditCommand::Head) => return audit_head(ctx).await,
        Some(AuditCommand::Digest(digest)) => {
            return crate::why_commands::audit_digest(ctx, digest).await;
        }
        None => {}
    }
    let filter = match (args.about(), args.run) {
        (Some(target), _) => AuditFilter::Target(target),
        (None, Some(run)) => AuditFilter::Run(run),
        (None, None) => AuditFilter::All,
    };
    let records = ctx.engine.admin().audit_trail(&filter, args.limit).await?;
    // Who edited what ran, and what the agent had proposed (issue 53, point 5).
    let edited = if ctx.json {
        ctx.engine.edited_confirmations().await?
    } else {
        Vec::new()
    };
    let views: Vec<AuditView<'_>> = records
        .iter()
        .map(|record| AuditView::of(record).with_edits(&edited))
        .collect();
    Output::either(ctx.json, &views, || render::audit(&records))
}

/// `assent audit verify`: exit 0 when the proof holds, 1 with every violation.
async fn audit_verify(ctx: &Ctx, args: AuditVerifyArgs) -> Result<Output, CliError> {
    let head = args.head.map(|h| h.trim().to_ascii_lowercase());
    if let Some(head) = &head
        && (head.len() != 64 || !head.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(CliError::Usage(format!(
            "--head {head:?} is not a head: expected the 64 hex digits `assent audit head` printed"
        )));
    }
    let options = VerifyOptions {
        since: args.since,
        head,
        strict: args.strict,
        // The hooks read `~/` in path rules as this user's home: the proof reads it so.
        home: etcetera::home_dir()
            .ok()
            .map(|home| home.to_string_lossy().into_owned()),
        full: args.full,
    };
    let report = ctx.engine.admin().verify_proof(&options).await?;
    let mut output = Output::either(ctx.json, &report, || render::proof(&report))?;
    if !report.verified() {
        output.failure = Some(CliError::failed(format!(
            "the proof does not hold: {} violation(s)",
            report.violations.len()
        )));
    }
    Ok(output)
}

/// `assent audit head`.
async fn audit_head(ctx: &Ctx) -> Result<Output, CliError> {
    let head = ctx.engine.admin().chain_head().await?;
    let view = json!({"deviceId": head.device_id, "entries": head.entries, "head": head.hash});
    Output::either(ctx.json, &view, || {
        format!(
            "{} {} entries (device {})",
            head.hash, head.entries, head.device_id
        )
    })
}

/// `assent outbox`.
pub async fn outbox_messages(ctx: &Ctx, args: OutboxArgs) -> Result<Output, CliError> {
    let messages = ctx.engine.admin().undelivered_outbox(args.limit).await?;
    Output::either(ctx.json, &messages, || render::outbox(&messages))
}

/// `assent grants` and `assent grants revoke ID`.
pub async fn grants(ctx: &Ctx, args: GrantsArgs) -> Result<Output, CliError> {
    if let Some(GrantsCommand::Suggest(suggest)) = args.command {
        return grants_suggest(ctx, suggest).await;
    }
    if let Some(GrantsCommand::Revoke(revoke)) = args.command {
        let id = Uuid::parse_str(revoke.id.trim())
            .map_err(|e| CliError::failed(format!("invalid grant id {:?}: {e}", revoke.id)))?;
        return match ctx.engine.admin().revoke_grant(id, ctx.now).await? {
            Revocation::Revoked(grant) => {
                Output::either(ctx.json, &grant, || render::grant_revoked(&grant))
            }
            Revocation::AlreadyRevoked(grant) => Err(CliError::Conflict(format!(
                "grant {id} was already revoked at {}",
                render::time(grant.revoked_at.unwrap_or(ctx.now))
            ))),
            Revocation::NotFound => Err(CliError::from(ConfirmError::GrantNotFound(id))),
        };
    }
    let filter = GrantFilter {
        agent_path: args.agent,
        tool_name: args.tool,
        include_revoked: args.all,
    };
    let grants = ctx.engine.admin().grants(&filter).await?;
    Output::either(ctx.json, &grants, || render::grants(&grants))
}

/// `assent grants suggest`: `allow` rules the decision history supports, each with its
/// evidence and what it `replaces`; with `--apply ID`, that suggestion's rule, created
/// with its expiry. A tool the agent's rules already allow is not suggested. An unknown
/// id is exit 1; a suggestion that would weaken a deny, quorum or hold in force, or
/// accept a changed definition, is refused with exit 3 and nothing is written.
async fn grants_suggest(ctx: &Ctx, args: GrantsSuggestArgs) -> Result<Output, CliError> {
    let agent = args.agent.as_deref().map(str::trim);
    let since = ctx.now - args.since;
    let calls = ctx.engine.past_calls(agent, since).await?;
    let options = SuggestOptions {
        min_confirmed: args.min,
        expiry: args.for_span,
        now: ctx.now,
    };
    // What is in force for each pair the history names, read before the pure function
    // decides (one read per pair; the agent's policy and the tool's settings together).
    let pairs: BTreeSet<(&str, &str)> = calls
        .iter()
        .map(|c| (c.agent_id.as_str(), c.tool_name.as_str()))
        .collect();
    let mut in_force: BTreeMap<(String, String), (AgentPolicy, InForce)> = BTreeMap::new();
    for (agent, tool) in pairs {
        if let Some((policy, settings)) = ctx.engine.rules_in_force(agent, tool, ctx.now).await? {
            let hold = settings
                .hold
                .map(|h| u32::try_from(h.whole_seconds()).unwrap_or(u32::MAX));
            let now = InForce::of(&policy, tool, settings.approvals_needed, hold);
            in_force.insert((agent.to_owned(), tool.to_owned()), (policy, now));
        }
    }
    let suggestions: Vec<GrantSuggestion> = suggest_grants(&calls, &options, |agent, tool| {
        in_force
            .get(&(agent.to_owned(), tool.to_owned()))
            .map(|(_, now)| now.clone())
            .unwrap_or_default()
    })
    .into_iter()
    .filter(|s| {
        // An unknown agent gets no rule; a tool its rules already allow needs none.
        in_force
            .get(&(s.agent.clone(), s.tool.clone()))
            .is_some_and(|(policy, _)| policy.ruled(&s.tool) != Some(RuleAction::Allow))
    })
    .collect();
    let Some(id) = args.apply.as_deref().map(str::trim) else {
        return Output::either(ctx.json, &suggestions, || {
            render_suggestions(&suggestions, args.min)
        });
    };
    let Some(chosen) = suggestions.into_iter().find(|s| s.id == id) else {
        return Err(CliError::failed(format!(
            "no grant suggestion {id:?} (see `assent grants suggest` with the same --agent, --since and --min; an applied one is no longer listed)"
        )));
    };
    if let Some(why) = &chosen.refused {
        return Err(CliError::Conflict(format!(
            "grant suggestion {id} not applied: {why}"
        )));
    }
    // Applied by the engine, which reads again what is in force, in the same
    // transaction as the write: a deny, quorum or hold set since the listing is not
    // weakened, and a definition recorded since is not accepted.
    let by = crate::cli::reviewer(None);
    match ctx
        .engine
        .apply_suggestion(&chosen, Some(by.as_str()), ctx.now)
        .await
    {
        Ok(_) => {}
        Err(ConfirmError::Conflict {
            kind: ConflictKind::SuggestionRefused,
            message,
            ..
        }) => {
            return Err(CliError::Conflict(format!(
                "grant suggestion {id} not applied: {message}"
            )));
        }
        Err(ConfirmError::UnknownAgent(agent)) => {
            return Err(CliError::from(assent_server::ServerError::NotFound(
                format!("no agent {agent:?}"),
            )));
        }
        Err(other) => return Err(other.into()),
    }
    let agent = assent_server::agent_view(&ctx.engine, &chosen.agent).await?;
    let shown = json!({
        "applied": chosen,
        "agent": crate::task_commands::with_expiries(ctx, &agent).await?,
    });
    Output::either(ctx.json, &shown, || {
        format!(
            "Agent {}: allow {} until {} (suggestion {}, {})",
            chosen.agent,
            chosen.pattern.as_deref().unwrap_or(&chosen.tool),
            render::time(chosen.expires_at),
            chosen.id,
            render::takes_effect(&agent.categories)
        )
    })
}

/// What a suggestion would replace, in a few words (`-` for nothing: the tool's mode).
fn render_replaces(suggestion: &GrantSuggestion) -> String {
    let Some(now) = &suggestion.replaces else {
        return "-".to_owned();
    };
    let mut parts = Vec::new();
    if let (Some(rule), Some(pattern)) = (now.rule, &now.pattern) {
        parts.push(format!("{rule} {pattern}"));
    }
    if let Some(needed) = now.approvals {
        parts.push(format!("{needed} approvals"));
    }
    if let Some(seconds) = now.hold_seconds {
        parts.push(format!("hold {seconds} s"));
    }
    if now.definition_changed {
        parts.push("CHANGED definition".to_owned());
    }
    let refused = if suggestion.refused.is_some() {
        " (refused)"
    } else {
        ""
    };
    format!("{}{refused}", parts.join(", "))
}

fn render_suggestions(suggestions: &[GrantSuggestion], min: u32) -> String {
    if suggestions.is_empty() {
        return format!(
            "No suggestions: no tool was confirmed unchanged {min} times or more without an edit, rejection or undo in the window"
        );
    }
    let rows: Vec<Vec<String>> = suggestions
        .iter()
        .map(|s| {
            let e = &s.evidence;
            vec![
                s.id.clone(),
                s.agent.clone(),
                // The argument pattern when the evidence supports only one.
                s.pattern.clone().unwrap_or_else(|| s.tool.clone()),
                s.rule.to_owned(),
                e.confirmed_unchanged.to_string(),
                e.automatic.to_string(),
                e.reviewers.to_string(),
                format!(
                    "{} .. {}",
                    render::time(e.first_at),
                    render::time(e.last_at)
                ),
                render::time(s.expires_at),
                render_replaces(s),
            ]
        })
        .collect();
    let mut text = render::table(
        &[
            "ID",
            "AGENT",
            "TOOL",
            "RULE",
            "UNCHANGED",
            "AUTOMATIC",
            "REVIEWERS",
            "DECIDED",
            "EXPIRES",
            "REPLACES",
        ],
        &rows,
    );
    text.push_str(
        "\n(none was edited, rejected or undone in the window; UNCHANGED counts a person's confirmations of the tool's current definition, AUTOMATIC the calls a standing grant approved; apply one with `assent grants suggest --apply ID`)",
    );
    text
}
