//! The decision point of a person's decision, as pure functions over what its
//! transaction read (no I/O, no clock): which way a confirmation goes (refused, into
//! the execution ledger, or run here by this engine's host) and how an approval counts
//! toward an item's quorum. The shell around them (`confirmation.rs`) reads the set in
//! one statement, asks these, lets the host act between the read and the write plan,
//! and writes the plan; so every door's decision is decided by the same code, which is
//! tested here over plain values, without a database.

use crate::{ConfirmError, ConflictKind};
use assent_domain::{ChangeSet, Verdict};
use assent_store::approvals::{Approval, Revision};
use assent_store::jobs::{ExternalItem, ServedItem};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// Which way a confirmation of an item goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Into the execution ledger: its effect lies outside the database, or its host is
    /// not this engine's (a transactional item of another service, confirmed from the
    /// CLI, the page or any process without that service's code). An executor of the
    /// item's host runs it.
    Queued(ExternalItem),
    /// Run here, by this engine's host, in the deciding transaction: an item of this
    /// engine's host, or one whose host was never recorded (written before release
    /// 0.2, or synced).
    Here,
}

/// Refuses a person's edit of a call of `tool` whose arguments, for a tool that takes
/// its target from them (`from`), name another target than the `proposed` arguments
/// did (the set's target `set_target` stands for a proposal that named none): the
/// set, its rules and its state are that target's, and the call would act on another.
pub(crate) fn check_edit_target(
    from: Option<&assent_tools::TargetFrom>,
    tool: &str,
    set_target: &assent_domain::Target,
    proposed: &Value,
    edited: &Value,
) -> Result<(), ConfirmError> {
    let Some(from) = from else {
        return Ok(());
    };
    let before = from.target_in(proposed);
    let after = from.target_in(edited);
    if before == after {
        return Ok(());
    }
    Err(ConfirmError::EditMovesTarget {
        tool: tool.to_owned(),
        proposed: before.unwrap_or_else(|| set_target.clone()),
        edited: after.unwrap_or_else(|| assent_domain::Target::new(from.kind.clone(), "")),
    })
}

/// The route of a person's confirmation of item `index` of `set`, served as `served`
/// says, shown to the person at revision `shown_revision` (when the door knows it), on
/// an engine whose host is `own_host`. Refused when the item is decided, the set
/// expired, the item moved past the revision shown, or its confirmation waits out a
/// hold window.
pub(crate) fn route(
    set: &ChangeSet,
    index: usize,
    served: Option<&ServedItem>,
    shown_revision: Option<u32>,
    own_host: &str,
) -> Result<Route, ConfirmError> {
    set.check_verdict(index, Verdict::Confirmed)?;
    if let Some(shown) = shown_revision {
        let now = set.items[index].revision;
        if now != shown {
            return Err(ConfirmError::conflict(
                ConflictKind::RevisionMoved,
                format!(
                    "item {index} changed since it was shown (revision {shown}, now {now}: edited by another person or refreshed against its target); nothing was counted: look at it again and decide on revision {now}"
                ),
            ));
        }
    }
    let Some(served) = served else {
        return Ok(Route::Here);
    };
    if let Some((job, until)) = served.held {
        return Err(held(index, job, until));
    }
    Ok(match (&served.host, served.external) {
        (Some(host), Some(idempotent)) => Route::Queued(ExternalItem {
            host: host.clone(),
            idempotent,
        }),
        (Some(host), None) if host != own_host => Route::Queued(ExternalItem {
            host: host.clone(),
            idempotent: false,
        }),
        _ => Route::Here,
    })
}

/// Whether a rejection or a deferral (`verdict`) of item `index` of `set`, served as
/// `served` says, may be recorded: refused when the item is decided, the set expired,
/// or the item's confirmation waits out a hold window.
pub(crate) fn check_plain(
    set: &ChangeSet,
    index: usize,
    verdict: Verdict,
    served: Option<&ServedItem>,
) -> Result<(), ConfirmError> {
    set.check_verdict(index, verdict)?;
    match served.and_then(|served| served.held) {
        Some((job, until)) => Err(held(index, job, until)),
        None => Ok(()),
    }
}

/// The refusal of a decision on item `index`, confirmed and held by job `job` until
/// `until`: it is taken back only by cancelling its job.
pub(crate) fn held(index: usize, job: Uuid, until: OffsetDateTime) -> ConfirmError {
    ConfirmError::conflict(
        ConflictKind::Held,
        format!(
            "item {index} is confirmed and held until {}; to take it back, cancel job {job} (assent jobs cancel {job})",
            assent_store::timefmt::format(until),
        ),
    )
}

/// An approval to record: of revision `revision`, by `by`, of `args`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewApproval {
    pub(crate) revision: i64,
    pub(crate) by: String,
    pub(crate) args: Value,
}

/// How a confirmation counts toward its item's quorum ([`count_approval`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Count {
    /// The quorum is met, or none is needed: run the item with `edited_args` (`None`:
    /// the proposal's), and record `approval` beside the decision once it ran.
    Met {
        edited_args: Option<Value>,
        approval: Option<NewApproval>,
    },
    /// Short of the quorum: record `approval` (first, when `new_revision` is set, the
    /// item's new revision number, which an edit started); `revision` is the revision
    /// with it, `count` of `needed` distinct people.
    Short {
        approval: NewApproval,
        new_revision: Option<u32>,
        revision: Revision,
        count: usize,
    },
}

/// How a confirmation by `by` (`None`: the door named nobody), with `edited_args` (an
/// edit, or `None`), counts toward the quorum of `needed` distinct people on an item
/// proposed with `proposal` (item `index` of a tool `tool`), whose current revision
/// is `revision`, at `at`.
///
/// An edit that changes the revision's arguments starts a new revision: approvals of
/// the old arguments no longer count, and the edit is its editor's approval. A person
/// counts once per revision, whichever door they came through.
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_approval(
    mut revision: Revision,
    proposal: &Value,
    tool: &str,
    index: usize,
    by: Option<&str>,
    edited_args: Option<Value>,
    needed: u32,
    at: OffsetDateTime,
) -> Result<Count, ConfirmError> {
    if needed <= 1 {
        return Ok(Count::Met {
            edited_args,
            approval: None,
        });
    }
    let Some(by) = by else {
        return Err(ConfirmError::conflict(
            ConflictKind::ApproverNotNamed,
            format!(
                "{tool} needs {needed} approvals by distinct people: say who approves (--as NAME on the CLI, a reviewer token over the API)"
            ),
        ));
    };
    if assent_domain::answered_in_client(by) {
        return Err(ConfirmError::conflict(
            ConflictKind::ApproverNotNamed,
            format!(
                "{by} is an answer in the agent's client, not a person: {tool} needs {needed} approvals by distinct people (--as NAME on the CLI, a reviewer token naming its person over the API)"
            ),
        ));
    }
    let current_args = revision.args.clone().unwrap_or_else(|| proposal.clone());
    let mut new_revision = None;
    let args = match edited_args {
        Some(edited) if edited != current_args => {
            revision = Revision {
                number: revision.number + 1,
                args: Some(edited.clone()),
                approvals: Vec::new(),
                edited_by: Some(by.to_owned()),
            };
            new_revision = Some(u32::try_from(revision.number).map_err(|_| {
                ConfirmError::conflict(
                    ConflictKind::TooManyRevisions,
                    format!("item {index} has too many revisions"),
                )
            })?);
            edited
        }
        _ => current_args,
    };
    if revision.approved_by(by) {
        return Err(ConfirmError::conflict(
            ConflictKind::SamePersonTwice,
            format!(
                "{by} has approved item {index} already: it needs {needed} approvals by distinct people ({} so far)",
                revision.people()
            ),
        ));
    }
    let approval = NewApproval {
        revision: revision.number,
        by: by.to_owned(),
        args,
    };
    let count = revision.people() + 1;
    if count < needed as usize {
        revision.args = Some(approval.args.clone());
        revision.approvals.push(Approval {
            by: approval.by.clone(),
            at,
        });
        return Ok(Count::Short {
            approval,
            new_revision,
            revision,
            count,
        });
    }
    Ok(Count::Met {
        edited_args: (approval.args != *proposal).then(|| approval.args.clone()),
        approval: Some(approval),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{ChangeItem, ChangeItemStatus, ChangeSetStatus, VectorClock};
    use proptest::prelude::*;
    use serde_json::json;

    const OWN: &str = "journal";

    fn set_of(statuses: &[ChangeItemStatus]) -> ChangeSet {
        let items = statuses
            .iter()
            .map(|&status| ChangeItem {
                status,
                ..ChangeItem::new("set_priority", json!({"priority": "P1"}), "Priority to P1")
            })
            .collect();
        ChangeSet {
            id: Uuid::from_u128(7),
            agent_id: "triage".into(),
            target_kind: "task".into(),
            target_id: "t1".into(),
            thread_id: "thread".into(),
            run_key: "run".into(),
            status: ChangeSetStatus::Pending,
            items,
            created_at: OffsetDateTime::UNIX_EPOCH,
            resolved_at: None,
            vector_clock: VectorClock::default(),
        }
    }

    fn served(host: Option<&str>, external: Option<bool>) -> ServedItem {
        ServedItem::new(host.map(str::to_owned), external, None)
    }

    fn conflict(result: Result<impl std::fmt::Debug, ConfirmError>) -> ConflictKind {
        match result {
            Err(error) => error
                .conflict_kind()
                .unwrap_or_else(|| panic!("expected a conflict, got {error:?}")),
            Ok(other) => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn a_pending_item_of_this_host_or_of_no_recorded_host_runs_here() {
        let set = set_of(&[ChangeItemStatus::Pending]);
        let here = [
            None,
            Some(served(Some(OWN), None)),
            Some(served(None, None)),
        ];
        for served in &here {
            assert_eq!(
                route(&set, 0, served.as_ref(), None, OWN).unwrap(),
                Route::Here
            );
        }
    }

    #[test]
    fn an_external_item_or_another_hosts_item_goes_to_the_ledger() {
        let set = set_of(&[ChangeItemStatus::Deferred]);
        let external = served(Some(OWN), Some(true));
        assert_eq!(
            route(&set, 0, Some(&external), None, OWN).unwrap(),
            Route::Queued(ExternalItem {
                host: OWN.into(),
                idempotent: true
            })
        );
        let other = served(Some("billing"), None);
        assert_eq!(
            route(&set, 0, Some(&other), None, OWN).unwrap(),
            Route::Queued(ExternalItem {
                host: "billing".into(),
                idempotent: false
            })
        );
    }

    #[test]
    fn an_edit_that_names_another_target_is_refused() {
        let from = assent_tools::TargetFrom {
            kind: "order".into(),
            pointer: "/order_id".into(),
        };
        let set_target = assent_domain::Target::new("order", "o-7");
        let proposed = serde_json::json!({"order_id": "o-7", "cents": 500});
        let check = |edited: Value| {
            check_edit_target(Some(&from), "issue_refund", &set_target, &proposed, &edited)
        };
        assert!(check(serde_json::json!({"order_id": "o-7", "cents": 300})).is_ok());
        let moved = check(serde_json::json!({"order_id": "o-8", "cents": 500}));
        let Err(ConfirmError::EditMovesTarget {
            proposed: from_target,
            edited,
            ..
        }) = moved
        else {
            panic!("moved: {moved:?}");
        };
        assert_eq!(
            (from_target.id.as_str(), edited.id.as_str()),
            ("o-7", "o-8")
        );
        assert!(
            moved_text(check(serde_json::json!({"cents": 500})))
                .starts_with("an edit cannot move the call to another target"),
            "an edit that drops the target moves it too"
        );
        let plain = check_edit_target(None, "t", &set_target, &proposed, &serde_json::json!({}));
        assert!(plain.is_ok(), "a tool without target_from edits freely");
    }

    fn moved_text(result: Result<(), ConfirmError>) -> String {
        result.expect_err("refused").to_string()
    }

    #[test]
    fn a_held_item_a_moved_revision_and_a_decided_item_are_refused() {
        let set = set_of(&[ChangeItemStatus::Pending, ChangeItemStatus::Confirmed]);
        let held = ServedItem::new(
            Some(OWN.to_owned()),
            None,
            Some((Uuid::from_u128(9), OffsetDateTime::UNIX_EPOCH)),
        );
        assert_eq!(
            conflict(route(&set, 0, Some(&held), None, OWN)),
            ConflictKind::Held
        );
        assert_eq!(
            conflict(route(&set, 0, None, Some(3), OWN)),
            ConflictKind::RevisionMoved
        );
        assert!(route(&set, 0, None, Some(0), OWN).is_ok());
        assert!(route(&set, 1, None, None, OWN).is_err(), "decided already");
    }

    fn empty_revision() -> Revision {
        Revision {
            number: 0,
            args: None,
            approvals: Vec::new(),
            edited_by: None,
        }
    }

    #[test]
    fn a_quorum_needs_someone_named_and_an_edit_starts_a_new_revision() {
        let proposal = json!({"priority": "P1"});
        let at = OffsetDateTime::UNIX_EPOCH;
        let count = |by, edit| count_approval(empty_revision(), &proposal, "t", 0, by, edit, 2, at);
        assert_eq!(conflict(count(None, None)), ConflictKind::ApproverNotNamed);
        assert_eq!(
            conflict(count(Some("mcp-client:claude-code"), None)),
            ConflictKind::ApproverNotNamed,
            "an answer in the client counts toward no quorum"
        );
        let Count::Short {
            new_revision,
            count,
            revision,
            ..
        } = count(Some("alice"), Some(json!({"priority": "P2"}))).unwrap()
        else {
            panic!("one approval is short of two")
        };
        assert_eq!((new_revision, count), (Some(1), 1));
        assert_eq!(revision.edited_by.as_deref(), Some("alice"));
        // No quorum: the edit runs as given, nothing to record.
        let met = count_approval(empty_revision(), &proposal, "t", 0, None, None, 1, at);
        assert_eq!(
            met.unwrap(),
            Count::Met {
                edited_args: None,
                approval: None
            }
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Approvals by a sequence of people (some of them again, some through another
        /// door: `slack:U1 (alice)` is `alice`) meet a quorum of `needed` exactly when
        /// the `needed`-th distinct person approves; a person already counted is
        /// refused and counts for nothing.
        #[test]
        fn a_quorum_is_met_by_the_needed_th_distinct_person(
            people in proptest::collection::vec(0usize..4, 1..12),
            needed in 2u32..5,
            through_slack in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let names = ["alice", "bob", "carol", "dave"];
            let proposal = json!({"priority": "P1"});
            let at = OffsetDateTime::UNIX_EPOCH;
            let mut revision = empty_revision();
            let mut counted: Vec<usize> = Vec::new();
            for (turn, &person) in people.iter().enumerate() {
                let by = if through_slack[turn] {
                    format!("slack:U{person} ({})", names[person])
                } else {
                    names[person].to_owned()
                };
                let result = count_approval(
                    revision.clone(), &proposal, "t", 0, Some(&by), None, needed, at,
                );
                if counted.contains(&person) {
                    prop_assert_eq!(conflict(result), ConflictKind::SamePersonTwice);
                    continue;
                }
                counted.push(person);
                match result.unwrap() {
                    Count::Short { revision: with, count, new_revision, .. } => {
                        prop_assert!(counted.len() < needed as usize);
                        prop_assert_eq!(count, counted.len());
                        prop_assert_eq!(new_revision, None);
                        revision = with;
                    }
                    Count::Met { edited_args, approval } => {
                        prop_assert_eq!(counted.len(), needed as usize);
                        prop_assert_eq!(edited_args, None);
                        prop_assert_eq!(approval.map(|a| a.revision), Some(0));
                        return Ok(());
                    }
                }
            }
            prop_assert!(counted.len() < needed as usize);
        }

        /// Whatever approvals a revision holds, an edit that changes its arguments
        /// counts as one approval of a new revision, so it is never enough for a
        /// quorum of two or more.
        #[test]
        fn an_edit_restarts_the_count(
            approvers in proptest::collection::vec("[a-z]{1,6}", 0..6),
            number in 0i64..100,
            needed in 2u32..6,
            value in 0u32..1000,
        ) {
            let proposal = json!({"priority": "P1"});
            let at = OffsetDateTime::UNIX_EPOCH;
            let revision = Revision {
                number,
                args: None,
                approvals: approvers.iter().map(|by| Approval { by: by.clone(), at }).collect(),
                edited_by: None,
            };
            let edit = json!({"priority": format!("P{value}x")});
            let result = count_approval(
                revision, &proposal, "t", 0, Some("editor"), Some(edit.clone()), needed, at,
            ).unwrap();
            let Count::Short { approval, new_revision, count, revision } = result else {
                return Err(TestCaseError::fail("an edit met a quorum"));
            };
            prop_assert_eq!(count, 1);
            prop_assert_eq!(new_revision, u32::try_from(number + 1).ok());
            prop_assert_eq!(approval.args, edit);
            prop_assert_eq!(revision.approvals.len(), 1);
        }
    }
}
