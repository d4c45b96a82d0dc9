//! Accumulates the deferred proposals of one wake into a change set.

use assent_domain::{
    ChangeItem, ChangeSet, NewChangeSet, OffsetDateTime, Target, Uuid, canonical_json,
};
use std::collections::HashSet;

/// The default cap on items per change set, the largest there is
/// ([`assent_domain::MAX_ITEMS_PER_SET`]). Past it proposals are refused (never
/// executed unconfirmed), so a runaway agent cannot bury the reviewer.
pub const DEFAULT_MAX_ITEMS_PER_SET: usize = assent_domain::MAX_ITEMS_PER_SET;

/// What happened to an item offered to the builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// Queued.
    Added,
    /// Equal (tool + canonical args) to one queued in this wake or pending in an
    /// earlier set: dropped.
    Duplicate,
    /// The set is full: refused.
    CapReached,
}

/// Builds the change set of one wake: items in insertion order, duplicates dropped, a
/// cap enforced.
#[derive(Debug, Clone)]
pub struct ChangeSetBuilder {
    agent_id: String,
    target: Target,
    thread_id: String,
    run_key: String,
    max_items: usize,
    items: Vec<ChangeItem>,
    seen: HashSet<(String, String)>,
}

fn identity(tool_name: &str, args: &serde_json::Value) -> (String, String) {
    (tool_name.to_owned(), canonical_json(args))
}

impl ChangeSetBuilder {
    /// An empty builder for one wake, capped at [`DEFAULT_MAX_ITEMS_PER_SET`].
    pub fn new(
        agent_id: impl Into<String>,
        target: Target,
        thread_id: impl Into<String>,
        run_key: impl Into<String>,
    ) -> Self {
        Self {
            agent_id: agent_id.into(),
            target,
            thread_id: thread_id.into(),
            run_key: run_key.into(),
            max_items: DEFAULT_MAX_ITEMS_PER_SET,
            items: Vec::new(),
            seen: HashSet::new(),
        }
    }

    /// The same builder with another cap (at least 1, at most
    /// [`assent_domain::MAX_ITEMS_PER_SET`]: device sync refuses a larger set).
    #[must_use]
    pub fn with_max_items(mut self, max_items: usize) -> Self {
        self.max_items = max_items.clamp(1, assent_domain::MAX_ITEMS_PER_SET);
        self
    }

    /// The same builder, also dropping proposals equal to these items (the open items
    /// of earlier, still pending sets).
    #[must_use]
    pub fn with_pending<'a>(mut self, pending: impl IntoIterator<Item = &'a ChangeItem>) -> Self {
        self.seen.extend(
            pending
                .into_iter()
                .filter(|i| i.status.is_open())
                .map(|i| identity(&i.tool_name, &i.args)),
        );
        self
    }

    /// The agent the set belongs to.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The entity the set would change.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The wake run.
    pub fn run_key(&self) -> &str {
        &self.run_key
    }

    /// The cap.
    pub fn max_items(&self) -> usize {
        self.max_items
    }

    /// Whether `tool_name` with `args` is already queued or pending.
    pub fn is_duplicate(&self, tool_name: &str, args: &serde_json::Value) -> bool {
        self.seen.contains(&identity(tool_name, args))
    }

    /// Offers one item; the summary is ignored when looking for duplicates.
    pub fn add(&mut self, item: ChangeItem) -> AddOutcome {
        let key = identity(&item.tool_name, &item.args);
        if self.seen.contains(&key) {
            return AddOutcome::Duplicate;
        }
        if self.items.len() >= self.max_items {
            return AddOutcome::CapReached;
        }
        self.seen.insert(key);
        self.items.push(item);
        AddOutcome::Added
    }

    /// The items queued so far, in order.
    pub fn items(&self) -> &[ChangeItem] {
        &self.items
    }

    /// How many items are queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The change set, or `None` when nothing was queued.
    pub fn build(self, id: Uuid, now: OffsetDateTime) -> Option<ChangeSet> {
        if self.items.is_empty() {
            return None;
        }
        ChangeSet::new(NewChangeSet {
            id,
            agent_id: self.agent_id,
            target: self.target,
            thread_id: self.thread_id,
            run_key: self.run_key,
            items: self.items,
            created_at: now,
        })
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::ChangeItemStatus;
    use serde_json::json;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

    fn item(tool: &str, args: serde_json::Value, summary: &str) -> ChangeItem {
        ChangeItem::new(tool, args, summary)
    }

    #[test]
    fn empty_build_yields_nothing() {
        let b = ChangeSetBuilder::new("a", Target::new("task", "t"), "th", "r");
        assert!(b.build(Uuid::nil(), NOW).is_none());
    }

    #[test]
    fn keeps_order_and_drops_duplicates_ignoring_summary_and_key_order() {
        let mut b = ChangeSetBuilder::new("a", Target::new("task", "t"), "th", "r");
        assert_eq!(
            b.add(item("x", json!({"a": 1, "b": 2}), "one")),
            AddOutcome::Added
        );
        assert_eq!(b.add(item("y", json!({}), "two")), AddOutcome::Added);
        assert_eq!(
            b.add(item("x", json!({"b": 2, "a": 1}), "other summary")),
            AddOutcome::Duplicate
        );
        let set = b.build(Uuid::nil(), NOW).expect("non-empty");
        let names: Vec<_> = set.items.iter().map(|i| i.human_summary.as_str()).collect();
        assert_eq!(names, ["one", "two"]);
        assert_eq!(set.created_at, NOW);
    }

    #[test]
    fn drops_items_pending_in_earlier_sets_but_not_decided_ones() {
        let pending = item("x", json!({"a": 1}), "p");
        let mut rejected = item("y", json!({}), "r");
        rejected.status = ChangeItemStatus::Rejected;
        let mut b = ChangeSetBuilder::new("a", Target::new("task", "t"), "th", "r")
            .with_pending([&pending, &rejected]);
        assert_eq!(
            b.add(item("x", json!({"a": 1}), "again")),
            AddOutcome::Duplicate
        );
        assert_eq!(b.add(item("y", json!({}), "again")), AddOutcome::Added);
    }

    #[test]
    fn cap_refuses_past_the_limit() {
        let mut b =
            ChangeSetBuilder::new("a", Target::new("task", "t"), "th", "r").with_max_items(2);
        for i in 0..2 {
            assert_eq!(b.add(item("x", json!({"i": i}), "s")), AddOutcome::Added);
        }
        assert_eq!(
            b.add(item("x", json!({"i": 9}), "s")),
            AddOutcome::CapReached
        );
        assert_eq!(
            b.add(item("x", json!({"i": 0}), "s")),
            AddOutcome::Duplicate
        );
        assert_eq!(b.len(), 2);
        assert_eq!(
            ChangeSetBuilder::new("a", Target::new("task", "t"), "th", "r").max_items(),
            25
        );
    }
}
