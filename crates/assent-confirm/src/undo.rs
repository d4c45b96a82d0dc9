//! Undo as a reviewed change: an applied item is reversed by a new change set on the
//! same target holding the call its tool declares as its compensation, pending for a
//! person like any proposal and run once through the same path. Nothing is reversed
//! behind anyone's back, and an undo can itself be undone.

use crate::outcome::{operation_id, read_outcome};
use crate::{ConfirmError, ConfirmationService, ConflictKind};
use assent_domain::{ChangeItem, ChangeItemStatus, ChangeSet, ItemRef, NewChangeSet};
use assent_store::change_sets::{self, Undoes};
use assent_store::jobs::{self, JobStatus};
use assent_tools::SummaryContext;
use time::OffsetDateTime;

impl ConfirmationService {
    /// Proposes the reversal of applied item `index` of set `change_set_id`: a new
    /// change set (returned) on the same target, by the same agent, holding the
    /// compensating call its tool declares (computed from the arguments that ran, the
    /// value they replaced and the result), linked to the original
    /// ([`change_sets::undoes`]). A conflict when the item is not applied (or in
    /// doubt); [`ConfirmError::NoCompensation`] when its tool declares none, or what
    /// was recorded does not allow one; the host's own process computes it.
    #[tracing::instrument(skip(self), fields(change_set = %item))]
    pub async fn undo(
        &self,
        item: ItemRef,
        now: OffsetDateTime,
    ) -> Result<ChangeSet, ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        let engine = &self.engine;
        let mut tx = self.begin_on_set(change_set_id).await?;
        let set = change_sets::require(tx.connection(), change_set_id).await?;
        let Some(item) = set.items.get(index) else {
            return Err(ConfirmError::ItemNotFound {
                change_set_id,
                index,
                len: set.items.len(),
            });
        };
        let outcome = read_outcome(tx.connection(), change_set_id).await?;
        let ran = &outcome.items[index];
        let applied = item.status == ChangeItemStatus::Confirmed
            && match &ran.run {
                Some(run) => run.status == JobStatus::Applied,
                None => ran.result.is_some(),
            };
        let (Some(decision), true) = (
            assent_store::decisions::for_change_set(tx.connection(), change_set_id)
                .await?
                .into_iter()
                .rev()
                .find(|d| d.item_index == index),
            applied,
        ) else {
            let state = match &ran.run {
                Some(run) => format!("{}, run {}", item.status, run.status.label()),
                None => item.status.to_string(),
            };
            return Err(ConfirmError::conflict(
                ConflictKind::NotApplied,
                format!(
                    "item {index} of change set {change_set_id} is not applied ({state}); only an applied change can be undone"
                ),
            ));
        };
        let served = jobs::served_item(tx.connection(), change_set_id, index).await?;
        if let Some(host) = served.and_then(|s| s.host)
            && host != engine.host.name()
        {
            return Err(ConfirmError::NoCompensation(format!(
                "{} is a tool of host {host:?}; undo it where that host runs",
                item.tool_name
            )));
        }
        let no_compensation = || {
            ConfirmError::NoCompensation(format!(
                "{} declares no compensation that applies here; it cannot be undone through Assent",
                item.tool_name
            ))
        };
        let spec = engine
            .registry
            .get(&item.tool_name)
            .ok_or_else(no_compensation)?;
        let ran_args = decision.edited_args.as_ref().unwrap_or(&item.args);
        let result = ran.result.as_deref().unwrap_or_default();
        let (tool, args) = spec
            .compensate(ran_args, item.before.as_ref(), result)
            .ok_or_else(no_compensation)?;
        let reverse = engine
            .registry
            .get(&tool)
            .ok_or_else(|| ConfirmError::UnknownTool(tool.clone()))?;
        engine
            .registry
            .validate_args(&tool, &args)
            .map_err(|e| ConfirmError::InvalidArgs {
                tool: tool.clone(),
                problems: vec![assent_tools::ArgProblem::general(e.to_string())],
            })?;
        let target = set.target();
        let state = engine
            .host
            .snapshot(tx.connection(), &target)
            .await
            .ok()
            .flatten();
        let context = state.as_deref().map(|s| s as &dyn SummaryContext);
        let summary = format!("Undo: {}", reverse.summarize(&args, context));
        let before = state.as_ref().and_then(|s| s.before(&tool, &args));
        let fingerprint = state.as_ref().and_then(|s| s.fingerprint(&tool, &args));
        let operation = operation_id(&set, &decision);
        let mut undo = ChangeSet::new(NewChangeSet {
            id: engine.new_id(),
            agent_id: set.agent_id.clone(),
            target,
            thread_id: set.thread_id.clone(),
            run_key: format!("undo:{operation}"),
            items: vec![
                ChangeItem::new(tool, args, summary)
                    .with_before(before)
                    .with_fingerprint(fingerprint),
            ],
            created_at: now,
        })?;
        undo.vector_clock.tick(engine.store.device_id());
        change_sets::insert_served(tx.connection(), &undo, Some(engine.host.name()), now).await?;
        let link = Undoes {
            change_set_id,
            item_index: index,
            operation_id: operation.as_str().to_owned(),
        };
        change_sets::set_undoes(tx.connection(), undo.id, &link).await?;
        tx.commit().await?;
        tracing::info!(undo = %undo.id, "undo proposed for review");
        Ok(undo)
    }
}
