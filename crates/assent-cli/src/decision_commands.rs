//! A person's decisions: `assent pending` and `show` (what there is to decide),
//! `confirm`, `reject`, `edit`, `defer`, `dismiss` and `expire`.

use crate::CliError;
use crate::cli::{
    ConfirmArgs, DismissArgs, EditArgs, ExpireArgs, ItemArgs, PendingArgs, RejectArgs, ShowArgs,
};
use crate::context::{Ctx, Output};
use crate::render;
use assent_confirm::records::PendingFilter;
use assent_confirm::{ConfirmError, DEFAULT_EXPIRY_TTL, ItemRef, ItemResult, SetRecord};
use assent_server::shapes::{SetView, confirm_all_json, confirmed_json, rejected_json};
use serde_json::{Value, json};
use tracing::Instrument;
use uuid::Uuid;

/// `assent pending`.
pub async fn pending(ctx: &Ctx, args: PendingArgs) -> Result<Output, CliError> {
    let mut filter = PendingFilter::all();
    filter.target = args.about();
    filter.agent_id = args.agent;
    let records = ctx.engine.set_records(&filter, None).await?;
    let listed: Vec<SetView<'_>> = records
        .iter()
        .map(|record| {
            SetView::of(&record.set)
                .with_edits(&record.decisions)
                .with_jobs(&record.jobs)
                .with_quorum(&record.quorum)
                .with_wait(record.waits_until)
        })
        .collect();
    Output::either(ctx.json, &listed, || render::pending(&records))
}

/// `assent show SET [IDX]`: what `pending` lists in a line, whole, so a person can
/// read every argument before deciding. `--json` gives the set as the API's
/// `GET /api/change-sets/{id}` does, or the one item as `pending --json` lists it.
pub async fn show(ctx: &Ctx, args: ShowArgs) -> Result<Output, CliError> {
    let id = set_id(ctx, &args.set).await?;
    let detail = ctx.engine.set_detail(id).await?;
    let SetRecord {
        set,
        decisions: decided,
        jobs: ran,
        quorum,
        ..
    } = &detail.record;
    if let Some(index) = args.index
        && index >= set.items.len()
    {
        return Err(CliError::from(ConfirmError::ItemNotFound {
            change_set_id: id,
            index,
            len: set.items.len(),
        }));
    }
    let mut tools = Vec::with_capacity(set.items.len());
    for (index, item) in set.items.iter().enumerate() {
        tools.push(served_tool(ctx, ItemRef::new(id, index), &item.tool_name).await?);
    }
    let mut view = SetView::of(set)
        .with_reasons(decided)
        .with_shadows(decided, &detail.shadows)
        .with_jobs(ran)
        .with_quorum(quorum);
    view.undoes = detail.undoes.clone();
    assent_server::with_agent_runs(&mut view, ran, &detail.agent_runs);
    let text = || {
        render::show(
            set,
            args.index,
            ran,
            decided,
            &tools,
            quorum,
            &detail.agent_runs,
        )
    };
    match args.index {
        Some(index) => Output::either(ctx.json, &view.items.swap_remove(index), text),
        None => Output::either(ctx.json, &view, text),
    }
}

/// Which host serves `item` and what it stored about the item's tool.
async fn served_tool(ctx: &Ctx, item: ItemRef, tool: &str) -> Result<render::ServedTool, CliError> {
    let Some(host) = ctx.engine.served_item(item).await?.and_then(|s| s.host) else {
        return Ok(render::ServedTool::Unrecorded);
    };
    Ok(match ctx.engine.admin().catalog_entry(&host, tool).await? {
        (Some(stored), _) => render::ServedTool::Stored(Box::new(stored)),
        (None, true) => render::ServedTool::Unlisted(host),
        (None, false) => render::ServedTool::NeverRegistered(host),
    })
}

/// The change set a command line names: its whole id, or the first 8 or more hex
/// digits of exactly one set's id (an ambiguous prefix is a usage error, exit 2).
async fn set_id(ctx: &Ctx, text: &str) -> Result<Uuid, CliError> {
    // A whole id needs no connection.
    if let Ok(id) = Uuid::parse_str(text.trim()) {
        return Ok(id);
    }
    ctx.engine
        .resolve_set_id(text)
        .await
        .map_err(|error| match error {
            // A set id the command line got wrong is a usage error (see `CliError`).
            ConfirmError::Store(error) => CliError::from(error),
            other => CliError::from(other),
        })
}

/// `assent confirm`.
pub async fn confirm(ctx: &Ctx, args: ConfirmArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.set).await?;
    let mut service = ctx
        .engine
        .confirmations()
        .by(crate::cli::reviewer(args.reviewer.as_deref()));
    if let Some(revision) = args.revision {
        service = service.shown_revision(revision);
    }
    match args.index {
        Some(index) if args.for_session => {
            let (outcome, grant) = service
                .confirm_for_session(
                    assent_confirm::ItemRef::new(set, index),
                    args.pattern.as_deref(),
                    ctx.now,
                )
                .await?;
            let mut shown = confirmed_json(&outcome);
            shown["sessionGrant"] = serde_json::to_value(&grant).map_err(anyhow::Error::from)?;
            Output::either(ctx.json, &shown, || {
                format!(
                    "{}\n{}",
                    render::confirmed(index, &outcome),
                    render::session_granted(&grant)
                )
            })
        }
        Some(index) if !args.all => {
            // The item's tool, proposal time and quorum, read only when spans are kept.
            let proposed = if tracing::span_enabled!(tracing::Level::INFO) {
                ctx.engine.change_set(set).await.ok().flatten()
            } else {
                None
            };
            let span = crate::telemetry::confirmation_span(set, index, proposed.as_ref());
            let outcome = service
                .confirm_item(assent_confirm::ItemRef::new(set, index), ctx.now)
                .instrument(span.clone())
                .await;
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(error) => {
                    span.record("error.type", crate::telemetry::error_kind(&error));
                    return Err(error.into());
                }
            };
            if !span.is_disabled() {
                crate::telemetry::record_confirmation(
                    &span,
                    proposed.as_ref(),
                    index,
                    &outcome.decision,
                    crate::telemetry::execution_kind(&outcome.execution),
                    ctx.now,
                );
            }
            Output::either(ctx.json, &confirmed_json(&outcome), || {
                render::confirmed(index, &outcome)
            })
        }
        _ => {
            let result = service.confirm_all(set, ctx.now).await?;
            let failures: Vec<&ConfirmError> = result
                .items
                .iter()
                .filter_map(|item| match &item.result {
                    ItemResult::Failed(error) => Some(error),
                    _ => None,
                })
                .collect();
            let failed = failures.len();
            let mut output = Output::either(ctx.json, &confirm_all_json(&result), || {
                render::confirm_all(&result)
            })?;
            if failed > 0 {
                let message = format!(
                    "{failed} of {} item(s) could not be confirmed",
                    result.items.len()
                );
                // Only stale targets: exit 4 as for one item, so a script refreshes.
                let all_stale = failures
                    .iter()
                    .all(|error| matches!(error, ConfirmError::TargetChanged { .. }));
                output.failure = Some(if all_stale {
                    CliError::Stale(format!(
                        "{message}: the target changed since proposed; review and confirm again"
                    ))
                } else {
                    CliError::failed(message)
                });
            }
            Ok(output)
        }
    }
}

/// `assent reject` (`--json`: the decision's fields and confirm's `decision`, `message`).
pub async fn reject(ctx: &Ctx, args: RejectArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.item.set).await?;
    let decision = ctx
        .engine
        .confirmations()
        .by(crate::cli::reviewer(args.reviewer.as_deref()))
        .reject_item(
            assent_confirm::ItemRef::new(set, args.item.index),
            args.reason,
            ctx.now,
        )
        .await?;
    Output::either(ctx.json, &rejected_json(&decision), || {
        render::decision(&decision)
    })
}

/// `assent edit`.
pub async fn edit(ctx: &Ctx, args: EditArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.item.set).await?;
    let new_args: Value = serde_json::from_str(&args.args)
        .map_err(|e| CliError::failed(format!("--args is not valid JSON: {e}")))?;
    if !new_args.is_object() {
        return Err(CliError::failed("--args must be a JSON object"));
    }
    let mut service = ctx
        .engine
        .confirmations()
        .by(crate::cli::reviewer(args.reviewer.as_deref()));
    if let Some(revision) = args.revision {
        service = service.shown_revision(revision);
    }
    let outcome = service
        .edit_and_confirm(
            assent_confirm::ItemRef::new(set, args.item.index),
            new_args,
            ctx.now,
        )
        .await?;
    Output::either(ctx.json, &confirmed_json(&outcome), || {
        render::confirmed(args.item.index, &outcome)
    })
}

/// `assent defer`.
pub async fn defer(ctx: &Ctx, args: ItemArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.set).await?;
    let decision = ctx
        .engine
        .confirmations()
        .defer_item(assent_confirm::ItemRef::new(set, args.index), ctx.now)
        .await?;
    Output::either(ctx.json, &decision, || render::decision(&decision))
}

/// `assent undo SET IDX`: the reversal of an applied item, proposed as a new change set
/// (`--json`: the set as `show --json` gives it, with `undoes`).
pub async fn undo(ctx: &Ctx, args: ItemArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.set).await?;
    let undo = ctx
        .engine
        .confirmations()
        .undo(assent_confirm::ItemRef::new(set, args.index), ctx.now)
        .await?;
    let mut view = SetView::of(&undo);
    view.undoes = ctx.engine.undoes(undo.id).await?;
    Output::either(ctx.json, &view, || {
        format!(
            "Proposed the undo as change set {} ({}); confirm it with `assent confirm {} 0`.\n",
            undo.id,
            assent_domain::one_line(&render::visible(&undo.items[0].human_summary)),
            &undo.id.simple().to_string()[..8]
        )
    })
}

/// `assent dismiss`.
pub async fn dismiss(ctx: &Ctx, args: DismissArgs) -> Result<Output, CliError> {
    let set = set_id(ctx, &args.set).await?;
    let decisions = ctx
        .engine
        .confirmations()
        .by(crate::cli::reviewer(None))
        .dismiss(set, args.reason, ctx.now)
        .await?;
    Output::either(ctx.json, &decisions, || render::decisions(&decisions))
}

/// `assent expire`.
pub async fn expire(ctx: &Ctx, args: ExpireArgs) -> Result<Output, CliError> {
    // The engine's expiry is the CLI's seven days ([`crate::context::engine`]).
    let ttl = args
        .ttl
        .or(ctx.engine.expiry().ttl())
        .unwrap_or(DEFAULT_EXPIRY_TTL);
    let expired = ctx.engine.confirmations().expire(ctx.now, ttl).await?;
    Output::either(ctx.json, &json!({"expired": expired}), || {
        render::expired(&expired, ttl)
    })
}
