//! A change set: the proposals of one agent wake, each decided on its own.

use crate::status::{ChangeItemStatus, ChangeSetStatus, Verdict, derive_set_status};
use crate::{DomainError, Target, VectorClock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// The most items one change set holds: a wake proposes no more (past it, proposals are
/// refused, so a runaway agent cannot bury the reviewer), and device sync refuses a set
/// with more, so no way in makes a larger one.
pub const MAX_ITEMS_PER_SET: usize = 25;

/// One proposed mutation: a single tool call waiting for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeItem {
    /// The tool that will run when confirmed (the singular tool for exploded batches).
    pub tool_name: String,
    /// Its arguments, already validated against the tool's schema.
    pub args: Value,
    /// What a person reads, e.g. `Set priority to P2`.
    pub human_summary: String,
    /// Where it stands; an item JSON without a status is `pending`.
    #[serde(default)]
    pub status: ChangeItemStatus,
    /// The current value when the proposal was made, so a reviewer sees
    /// `OPEN → GROOMED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// What the fields the call would touch held when it was proposed (the host's
    /// fingerprint): a confirmation, and the run of its job, refuse to apply it when
    /// the target's fields no longer match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Value>,
    /// Set when the target changed since the proposal (see [`stale_detail`]): why, in
    /// one line. The item's `before` and `fingerprint` were refreshed then, so a new
    /// confirmation applies to the target as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_detail: Option<String>,
    /// How many distinct people must confirm it, fixed when it was proposed (the
    /// agent's quorum for its tool then). It travels with the item, so every device
    /// enforces it, even one where the agent has no such setting; `None`: one person
    /// (or an item from before quorums were fixed at proposal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
    /// The item's current revision on this device: an edit under a quorum and a
    /// stale-target refresh each start a new one. A confirmation may name the revision
    /// it was shown and is refused once it moved. Not part of the wire: approvals stay
    /// on the device they were given on.
    #[serde(skip)]
    pub revision: u32,
}

impl ChangeItem {
    /// A new, pending item.
    pub fn new(
        tool_name: impl Into<String>,
        args: Value,
        human_summary: impl Into<String>,
    ) -> Self {
        Self {
            tool_name: tool_name.into(),
            args,
            human_summary: human_summary.into(),
            status: ChangeItemStatus::Pending,
            before: None,
            fingerprint: None,
            stale_detail: None,
            approvals_needed: None,
            revision: 0,
        }
    }

    /// How many people must confirm it: what it was proposed with, at least one.
    pub fn approvals_needed(&self) -> u32 {
        self.approvals_needed.unwrap_or(1).max(1)
    }

    /// The same item, carrying the value it would replace.
    #[must_use]
    pub fn with_before(mut self, before: Option<Value>) -> Self {
        self.before = before;
        self
    }

    /// The same item, carrying the fingerprint of the fields it would touch.
    #[must_use]
    pub fn with_fingerprint(mut self, fingerprint: Option<Value>) -> Self {
        self.fingerprint = fingerprint;
        self
    }
}

/// One item of a change set: the set and the item's position in it (from 0). What a
/// person decides on, so the engine's decisions take one instead of a bare id and
/// number that could be passed the wrong way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemRef {
    /// The change set's id.
    pub change_set_id: Uuid,
    /// The item's position in the set, from 0.
    pub index: usize,
}

impl ItemRef {
    /// Item `index` (from 0) of change set `change_set_id`.
    pub const fn new(change_set_id: Uuid, index: usize) -> Self {
        Self {
            change_set_id,
            index,
        }
    }
}

impl std::fmt::Display for ItemRef {
    /// `SET#INDEX`, as the CLI's `SET IDX` arguments and the logs name an item.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.change_set_id, self.index)
    }
}

/// The proposals of one agent wake about one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeSet {
    /// Unique id.
    pub id: Uuid,
    /// The agent that proposed it.
    pub agent_id: String,
    /// The kind of entity it would change, as its host names it.
    #[serde(default = "crate::target::legacy_target_kind")]
    pub target_kind: String,
    /// The entity it would change (`taskId` in batches of release 0.1.0).
    #[serde(alias = "taskId")]
    pub target_id: String,
    /// The conversation thread of the wake.
    pub thread_id: String,
    /// The wake run; part of every operation id derived from this set.
    pub run_key: String,
    /// Derived from the items, except `expired`.
    pub status: ChangeSetStatus,
    /// The proposals, in the order the agent made them.
    pub items: Vec<ChangeItem>,
    /// When the wake produced it.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When its last open item was decided.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub resolved_at: Option<OffsetDateTime>,
    /// Causality for cross-device sync.
    #[serde(default)]
    pub vector_clock: VectorClock,
}

/// Everything needed to create a change set; ids and time come from the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChangeSet {
    /// Unique id.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: String,
    /// The entity it would change.
    pub target: Target,
    /// The wake's thread.
    pub thread_id: String,
    /// The wake's run key.
    pub run_key: String,
    /// The proposals, at least one.
    pub items: Vec<ChangeItem>,
    /// Creation time.
    pub created_at: OffsetDateTime,
}

impl ChangeSet {
    /// Creates a pending set; a set without items is refused.
    pub fn new(new: NewChangeSet) -> Result<Self, DomainError> {
        if new.items.is_empty() {
            return Err(DomainError::EmptyChangeSet {
                change_set_id: new.id,
            });
        }
        let mut set = Self {
            id: new.id,
            agent_id: new.agent_id,
            target_kind: new.target.kind,
            target_id: new.target.id,
            thread_id: new.thread_id,
            run_key: new.run_key,
            status: ChangeSetStatus::Pending,
            items: new.items,
            created_at: new.created_at,
            resolved_at: None,
            vector_clock: VectorClock::default(),
        };
        set.rederive_status(new.created_at);
        Ok(set)
    }

    /// The entity it would change.
    pub fn target(&self) -> Target {
        Target::new(&self.target_kind, &self.target_id)
    }

    /// The item at `index`, or an error naming the set and its length.
    pub fn item(&self, index: usize) -> Result<&ChangeItem, DomainError> {
        self.items.get(index).ok_or(DomainError::ItemOutOfRange {
            change_set_id: self.id,
            index,
            len: self.items.len(),
        })
    }

    /// Checks, without changing anything, that `verdict` may be applied to item
    /// `index` now: the set is not expired, the index exists, the item is open, and a
    /// deferred item is not deferred again.
    pub fn check_verdict(&self, index: usize, verdict: Verdict) -> Result<(), DomainError> {
        if self.status == ChangeSetStatus::Expired {
            return Err(DomainError::SetExpired {
                change_set_id: self.id,
            });
        }
        let item = self.item(index)?;
        if item.status.is_decided() {
            return Err(DomainError::AlreadyDecided {
                change_set_id: self.id,
                index,
                status: item.status,
            });
        }
        if item.status == ChangeItemStatus::Deferred && verdict == Verdict::Deferred {
            return Err(DomainError::InvalidTransition {
                change_set_id: self.id,
                index,
                from: item.status,
                verdict,
            });
        }
        Ok(())
    }

    /// Applies `verdict` to item `index` and re-derives the set's status. On error
    /// nothing changes.
    pub fn apply_verdict(
        &mut self,
        index: usize,
        verdict: Verdict,
        now: OffsetDateTime,
    ) -> Result<(), DomainError> {
        self.check_verdict(index, verdict)?;
        self.items[index].status = verdict.item_status();
        self.rederive_status(now);
        Ok(())
    }

    /// Re-derives `status` and `resolved_at` from the items.
    pub fn rederive_status(&mut self, now: OffsetDateTime) {
        let derived = derive_set_status(
            self.status,
            self.items.iter().map(|i| i.status),
            self.resolved_at,
            now,
        );
        self.status = derived.status;
        self.resolved_at = derived.resolved_at;
    }

    /// Indexes of the items still open (pending or deferred), in order.
    pub fn open_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.items
            .iter()
            .enumerate()
            .filter(|(_, i)| i.status.is_open())
            .map(|(n, _)| n)
    }

    /// Whether the set is still open and was created more than `ttl` before `now`.
    pub fn is_stale(&self, now: OffsetDateTime, ttl: Duration) -> bool {
        self.status.is_open() && now - self.created_at > ttl
    }

    /// Marks an open set expired. Items keep their statuses: nobody decided them.
    /// Returns whether anything changed.
    pub fn expire(&mut self) -> bool {
        if !self.status.is_open() {
            return false;
        }
        self.status = ChangeSetStatus::Expired;
        self.resolved_at = None;
        true
    }
}

/// The one line a person reads when a target changed between a proposal and its
/// confirmation (or its run): each field of the fingerprint that differs, `priority was
/// P2, now P1`, or `it was X, now Y` for a fingerprint that is a single value.
pub fn stale_detail(then: &Value, now: &Value) -> String {
    fn shown(value: Option<&Value>) -> String {
        match value {
            None | Some(Value::Null) => "none".to_owned(),
            Some(Value::String(text)) => crate::one_line(text).into_owned(),
            Some(other) => crate::one_line(&other.to_string()).into_owned(),
        }
    }
    let changes: Vec<String> = match (then, now) {
        (Value::Object(then), Value::Object(now)) => {
            let mut keys: Vec<&String> = then.keys().chain(now.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .filter(|key| then.get(*key) != now.get(*key))
                .map(|key| {
                    format!(
                        "{} was {}, now {}",
                        crate::one_line(key),
                        shown(then.get(key)),
                        shown(now.get(key))
                    )
                })
                .collect()
        }
        _ => vec![format!(
            "it was {}, now {}",
            shown(Some(then)),
            shown(Some(now))
        )],
    };
    let changes = if changes.is_empty() {
        "its fields differ".to_owned()
    } else {
        changes.join(", ")
    };
    format!("target changed since proposed: {changes}; review and confirm again")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_detail_names_each_field_that_changed() {
        use serde_json::json;
        assert_eq!(
            stale_detail(&json!({"priority": "P2"}), &json!({"priority": "P1"})),
            "target changed since proposed: priority was P2, now P1; review and confirm again"
        );
        assert_eq!(
            stale_detail(&json!({"a": 1, "b": 2}), &json!({"a": 1, "b": null})),
            "target changed since proposed: b was 2, now none; review and confirm again"
        );
        assert_eq!(
            stale_detail(&json!("Old"), &json!("New\nline")),
            "target changed since proposed: it was Old, now New⏎line; review and confirm again"
        );
    }
    use proptest::prelude::*;
    use serde_json::json;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

    pub(crate) fn set_with(n: usize) -> ChangeSet {
        ChangeSet::new(NewChangeSet {
            id: Uuid::nil(),
            agent_id: "agent".into(),
            target: Target::new("task", "task"),
            thread_id: "thread".into(),
            run_key: "run".into(),
            items: (0..n)
                .map(|i| ChangeItem::new("set_task_title", json!({"title": i}), format!("#{i}")))
                .collect(),
            created_at: T0,
        })
        .expect("non-empty")
    }

    #[test]
    fn empty_set_is_refused() {
        let err = ChangeSet::new(NewChangeSet {
            id: Uuid::nil(),
            agent_id: "a".into(),
            target: Target::new("task", "t"),
            thread_id: "th".into(),
            run_key: "r".into(),
            items: vec![],
            created_at: T0,
        });
        assert!(matches!(err, Err(DomainError::EmptyChangeSet { .. })));
    }

    #[test]
    fn deciding_twice_is_an_error_and_changes_nothing() {
        let mut set = set_with(2);
        set.apply_verdict(0, Verdict::Confirmed, T0).expect("first");
        let before = set.clone();
        let err = set.apply_verdict(0, Verdict::Rejected, T0).unwrap_err();
        assert!(matches!(err, DomainError::AlreadyDecided { index: 0, .. }));
        assert_eq!(set, before);
        assert_eq!(set.status, ChangeSetStatus::PartiallyResolved);
    }

    #[test]
    fn out_of_range_and_expired_are_errors() {
        let mut set = set_with(1);
        assert!(matches!(
            set.apply_verdict(5, Verdict::Confirmed, T0),
            Err(DomainError::ItemOutOfRange {
                index: 5,
                len: 1,
                ..
            })
        ));
        assert!(set.expire());
        assert!(matches!(
            set.apply_verdict(0, Verdict::Confirmed, T0),
            Err(DomainError::SetExpired { .. })
        ));
        assert!(!set.expire(), "expiring twice changes nothing");
    }

    #[test]
    fn deferred_can_be_decided_later_but_not_deferred_again() {
        let mut set = set_with(1);
        set.apply_verdict(0, Verdict::Deferred, T0).expect("defer");
        assert_eq!(set.status, ChangeSetStatus::Pending);
        assert!(matches!(
            set.apply_verdict(0, Verdict::Deferred, T0),
            Err(DomainError::InvalidTransition { .. })
        ));
        set.apply_verdict(0, Verdict::Confirmed, T0)
            .expect("confirm");
        assert_eq!(set.status, ChangeSetStatus::Resolved);
        assert_eq!(set.resolved_at, Some(T0));
    }

    #[test]
    fn staleness_uses_the_ttl() {
        let set = set_with(1);
        assert!(!set.is_stale(T0 + Duration::days(7), Duration::days(7)));
        assert!(set.is_stale(
            T0 + Duration::days(7) + Duration::seconds(1),
            Duration::days(7)
        ));
    }

    #[test]
    fn item_without_status_decodes_as_pending() {
        let item: ChangeItem = serde_json::from_value(json!({
            "toolName": "set_task_title", "args": {"title": "x"}, "humanSummary": "s"
        }))
        .expect("decodes");
        assert_eq!(item.status, ChangeItemStatus::Pending);
        assert_eq!(item.before, None);
    }

    #[test]
    fn a_set_of_release_0_1_0_is_about_a_task() {
        let mut v = serde_json::to_value(set_with(1)).expect("serialises");
        let object = v.as_object_mut().expect("object");
        object.remove("targetKind");
        let id = object.remove("targetId").expect("targetId");
        object.insert("taskId".into(), id);
        let set: ChangeSet = serde_json::from_value(v).expect("decodes");
        assert_eq!(set.target(), Target::new("task", "task"));
    }

    #[test]
    fn wire_format_is_camel_case() {
        let set = set_with(1);
        let v = serde_json::to_value(&set).expect("serialises");
        for key in [
            "id",
            "agentId",
            "targetKind",
            "targetId",
            "threadId",
            "runKey",
            "status",
            "items",
            "createdAt",
            "resolvedAt",
            "vectorClock",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert_eq!(v["items"][0]["toolName"], "set_task_title");
        assert_eq!(v["items"][0]["humanSummary"], "#0");
        assert_eq!(v["createdAt"], "2026-03-01T12:00:00Z");
    }

    fn verdict() -> impl Strategy<Value = Verdict> {
        prop::sample::select(Verdict::ALL.to_vec())
    }

    proptest! {
        /// Any sequence of decisions ends `resolved` exactly when no item is open, and
        /// refused decisions never change the set.
        #[test]
        fn resolved_exactly_when_no_item_is_open(
            n in 1usize..6,
            steps in prop::collection::vec((0usize..8, verdict()), 0..24),
        ) {
            let mut set = set_with(n);
            for (index, v) in steps {
                let before = set.clone();
                if set.apply_verdict(index, v, T0).is_err() {
                    prop_assert_eq!(&set, &before);
                }
                let open = set.items.iter().any(|i| i.status.is_open());
                prop_assert_eq!(set.status == ChangeSetStatus::Resolved, !open);
                prop_assert_eq!(set.resolved_at.is_some(), !open);
                let decided = set.items.iter().any(|i| i.status.is_decided());
                prop_assert_eq!(set.status == ChangeSetStatus::PartiallyResolved, open && decided);
            }
        }

        #[test]
        fn change_set_json_round_trips(n in 1usize..4, status_picks in prop::collection::vec(0usize..5, 4)) {
            let mut set = set_with(n);
            for (item, pick) in set.items.iter_mut().zip(status_picks) {
                item.status = ChangeItemStatus::ALL[pick];
                item.before = (pick % 2 == 0).then(|| json!({"v": pick}));
            }
            set.rederive_status(T0);
            set.vector_clock.tick("host-a");
            let text = serde_json::to_string(&set).expect("serialises");
            let back: ChangeSet = serde_json::from_str(&text).expect("deserialises");
            prop_assert_eq!(back, set);
        }
    }
}
