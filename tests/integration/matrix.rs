//! The enforcement matrix (issue 37, `../shared/THREATS.md`): every rule kind × every
//! way of naming a tool × every path a call or a decision takes, one row each, on
//! SQLite and PostgreSQL. A row is the proof that a rule holds on that path; a rule
//! accepted and shown as in force but ignored on one path fails its row.
//!
//! [`the_matrix_names_every_kind_naming_and_path`] keeps it complete: a rule kind, a
//! naming or a path without its rows (or a written reason why a row cannot exist)
//! fails it, and [`kind_of_action`] stops compiling when the policy gains an action,
//! so adding a rule kind or a path means adding its rows.
//!
//! Rows elsewhere, for the doors this engine-level matrix does not drive: the CLI's and
//! the API's doors in `crates/assent-cli/tests/cli/consent.rs` (revisions, patterns,
//! the policy answering first) and the server's tests; `SERVER__tool` names through the
//! MCP gateway's own tests; a held confirmation across devices in `hold.rs`; the
//! gateway's run-after-disconnect mark (a call confirmed after its chat ended runs in no
//! later session unless marked) in `crates/assent-cli/tests/mcp.rs`
//! (`a_call_confirmed_after_its_chat_ended_runs_in_no_later_session_unless_marked`)
//! and `assent_mcp::after_disconnect`'s unit test: it binds only MCP sessions, which
//! this journal-host matrix has none of. A session grant ("yes, for this session", issue
//! 40) binds only a coding agent's hook session: its rows (a covered call of the session
//! runs unasked; another session, another agent and a chained command are still asked;
//! a quorum or a deny set after it binds as ever; revoked, it asks again; a run outside
//! it fails the proof) are `crates/assent-cli/tests/cli/hooks.rs`'s
//! `yes_for_this_session_runs_the_sessions_covered_calls_unasked_until_revoked`,
//! `a_session_grant_never_overrides_a_quorum_or_a_deny_set_after_it`,
//! `a_set_with_no_session_takes_no_session_answer_and_nothing_changes` and
//! `the_api_route_the_page_uses_answers_yes_for_this_session`. An answer given in an MCP
//! client (`--ask-in-client`) counts for no quorum: its rows (approve, decline, a client
//! without the capability, a tool needing two people never asked) are
//! `crates/assent-cli/tests/mcp.rs`'s
//! `ask_in_client_asks_the_clients_user_where_it_can_and_records_the_client_not_a_person`.
//! The hook's own failure paths (issue 52): "a database found in the workspace" and "a
//! timeout shorter than the wait" are `crates/assent-cli/tests/cli/hooks.rs`'s
//! `a_database_found_in_the_workspace_is_refused_naming_it` and
//! `a_timeout_shorter_than_the_wait_is_never_written_and_the_wait_counts_from_the_start`.
//! Issue 52's nested JSON, symlinked paths and rules in another agent's naming are hook
//! rows there too (`a_json_pattern_never_allows_a_nested_copy_and_a_named_argument_is_exact`,
//! `a_path_rule_is_unsure_of_a_symlink_out_of_the_workspace_and_no_diff_reads_it`,
//! `a_rule_in_another_agents_naming_is_refused_once_its_kind_is_known`,
//! `a_session_grant_covers_only_the_workspace_it_was_given_in`), the matcher's in
//! `assent_tools::policy`.
//! One person through every pair of doors (CLI `--as`, API token, Slack; issue 52) is one
//! approver: `consent.rs`'s `one_person_through_every_pair_of_doors_is_one_approver`,
//! `crates/assent-cli/tests/cli/consent.rs`'s
//! `one_person_through_the_command_line_and_their_token_is_one_approver`, the server's
//! `slack.rs` `alice_in_slack_and_through_her_token_is_one_approver_and_a_token_naming_nobody_counts_for_none`,
//! and `proof.rs`'s `the_agent_through_any_door_is_the_agent_and_a_client_answer_is_counted_apart`.

use assent_confirm::ItemRef;
use assent_confirm::WakeRequest;
use assent_confirm::{ConfirmError, ExecutionOutcome, ItemResult, RuleChange};
use assent_store::{agents, audit, decisions};
use assent_tests::{NOW, TestApp, TestBackend, backends};
use assent_tools::{AuditKind, RuleAction, ToolRule, When};
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// A kind of rule a person sets about an agent's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Allow,
    Ask,
    Deny,
    /// `agent ask … --approvals 2`.
    Quorum,
    /// `agent hold … 30`.
    Hold,
    /// `agent allow … --shadow`: tried without effect.
    Shadow,
    /// A grant suggestion applied (`grants suggest --apply`): an allow that expires.
    Suggestion,
    /// `agent audit` (issue 57): runs as an allow does, its record marked `audited`.
    Audit,
    /// A rate over the history (issue 57): `agent ask … --after 1/1h --approvals 2`, a
    /// quorum once one call it covers ran in the hour before.
    Rate,
    /// A sequence: `agent allow … --only-after set_task_title --within 15m
    /// --succeeded`, an allow only once a title was set (and it succeeded) here in the
    /// quarter hour before.
    Sequence,
    /// A running total: `agent ask … --total /minutes --over 100 --per 1d --approvals
    /// 2` on the estimate tool, a quorum once the day's minutes, this call's included,
    /// are over 100.
    Total,
}

const KINDS: [Kind; 11] = [
    Kind::Allow,
    Kind::Ask,
    Kind::Deny,
    Kind::Quorum,
    Kind::Hold,
    Kind::Shadow,
    Kind::Suggestion,
    Kind::Audit,
    Kind::Rate,
    Kind::Sequence,
    Kind::Total,
];

/// Whether `kind` sets a quorum (a quorum set after a held job was scheduled binds
/// later confirmations, not the job).
fn sets_a_quorum(kind: Kind) -> bool {
    matches!(kind, Kind::Quorum | Kind::Rate | Kind::Total)
}

/// The call a row proposes for `kind`: the priority for most, the estimate (a number
/// to sum) for a running total.
fn call_of(kind: Kind) -> (&'static str, serde_json::Value) {
    match kind {
        Kind::Total => ("update_task_estimate", json!({"minutes": 60})),
        _ => ("update_task_priority", json!({"priority": "P0"})),
    }
}

/// Whether the call of `kind`'s row ran on `task`.
async fn applied(app: &TestApp, task: &str, kind: Kind) -> bool {
    let now = app.load(task).await;
    match kind {
        Kind::Total => now.estimate_minutes == Some(60),
        _ => now.priority.as_deref() == Some("P0"),
    }
}

/// Every action the policy knows has its kind here: a new one fails to compile until
/// it has its rows.
fn kind_of_action(action: RuleAction) -> Kind {
    match action {
        RuleAction::Allow => Kind::Allow,
        RuleAction::Ask => Kind::Ask,
        RuleAction::Deny => Kind::Deny,
        RuleAction::Audit => Kind::Audit,
    }
}

/// How the rule names the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    Exact,
    Pattern,
    /// An argument pattern (issue 40), in the coding agents' `Tool(ARGUMENT)` syntax:
    /// for a tool with no command or path, a glob over its arguments' canonical JSON.
    Argument,
}

const NAMINGS: [Naming; 3] = [Naming::Exact, Naming::Pattern, Naming::Argument];

impl Naming {
    fn name(self) -> &'static str {
        match self {
            Self::Exact => "update_task_priority",
            Self::Pattern => "update_task_*",
            Self::Argument => r#"update_task_priority(*"priority":"P0"*)"#,
        }
    }

    /// The rule's pattern for `kind`: [`Naming::name`], or the estimate tool's for a
    /// running total ([`call_of`]).
    fn pattern(self, kind: Kind) -> &'static str {
        match (kind, self) {
            (Kind::Total, Self::Exact) => "update_task_estimate",
            (Kind::Total, Self::Argument) => r#"update_task_estimate(*"minutes":60*)"#,
            _ => self.name(),
        }
    }
}

/// A path a call or its decision takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The rule is in force when the agent proposes.
    Wake,
    /// The call was queued before the rule; a person confirms it after.
    Confirm,
    /// The same, through confirm-all.
    ConfirmAll,
    /// A held confirmation's job, claimed when its window ends, the rule set meanwhile.
    Claim,
    /// Proposed on another device without the rule, synced here, confirmed here.
    Sync,
}

const PATHS: [Path; 5] = [
    Path::Wake,
    Path::Confirm,
    Path::ConfirmAll,
    Path::Claim,
    Path::Sync,
];

/// What the row asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Runs without a person; its audit record names what allowed it.
    RunsUnasked,
    /// Queued for a person; nothing runs.
    Queued,
    /// Queued, and fixed at proposal to need two people.
    QueuedForTwo,
    /// Refused; nothing queued or run.
    Refused,
    /// The person's confirmation applies it.
    Applies,
    /// The confirmation applies it, and the decision records the shadow rule's verdict.
    AppliesWithShadowVerdict,
    /// One person's confirmation counts, short of two: nothing runs.
    AwaitsSecondPerson,
    /// The confirmation waits out the window: nothing runs before it ends.
    Scheduled,
    /// The setting is refused when it is set (it would never apply); the call is routed
    /// as without it.
    SettingRefused,
    /// A condition over the history at the wake: the first call (nothing ran before)
    /// is queued for one person; once a person confirmed it and it ran, the next is
    /// queued for two.
    QueuedForTwoOnceItHolds,
    /// A sequence at the wake: queued until the call before ran (and succeeded) here,
    /// then run unasked, its record naming the rule and its condition.
    RunsUnaskedOnceItHolds,
    /// A condition over the history set after two calls were queued, judged at each
    /// confirmation on what ran before it: the first confirmation applies its call;
    /// the second (the first having run) counts short of the two people it needs.
    SecondAwaitsSecondPerson,
    /// The row cannot exist, for the reason given.
    NotApplicable(&'static str),
}

/// The matrix itself: what `kind` named by `naming` does on `path`.
fn expect(kind: Kind, naming: Naming, path: Path) -> Expect {
    use Expect::*;
    match (kind, naming, path) {
        (Kind::Rate | Kind::Sequence | Kind::Total, _, path) => expect_for_history(kind, path),
        // Quorums and holds are kept per tool name: on an argument pattern they would
        // be accepted and never apply, so every door refuses them.
        (Kind::Quorum | Kind::Hold, Naming::Argument, _) => SettingRefused,
        (kind, _, path) => expect_for_names(kind, path),
    }
}

/// What a rule with a condition over the history does on `path`, in any naming: a
/// conditional quorum is kept in its rule, so an argument pattern takes it too.
fn expect_for_history(kind: Kind, path: Path) -> Expect {
    use Expect::*;
    match (kind, path) {
        (Kind::Sequence, Path::Wake) => RunsUnaskedOnceItHolds,
        (_, Path::Wake) => QueuedForTwoOnceItHolds,
        (Kind::Sequence, _) => Applies,
        (_, Path::Confirm | Path::ConfirmAll | Path::Sync) => SecondAwaitsSecondPerson,
        (_, Path::Claim) => NotApplicable(
            "a held job is one whole confirmation: a quorum its condition sets after it was scheduled binds later confirmations",
        ),
    }
}

/// What `kind` does on `path` for a tool name or `*` pattern.
fn expect_for_names(kind: Kind, path: Path) -> Expect {
    use Expect::*;
    match (kind, path) {
        (Kind::Allow | Kind::Suggestion | Kind::Audit, Path::Wake) => RunsUnasked,
        (Kind::Ask | Kind::Hold | Kind::Shadow, Path::Wake) => Queued,
        (Kind::Quorum, Path::Wake) => QueuedForTwo,
        (Kind::Deny, _) => Refused,
        (Kind::Quorum, Path::Confirm | Path::ConfirmAll | Path::Sync) => AwaitsSecondPerson,
        (Kind::Quorum, Path::Claim) => NotApplicable(
            "a held job is one whole confirmation: a quorum set after it was scheduled binds later confirmations",
        ),
        (Kind::Hold, Path::Confirm | Path::ConfirmAll | Path::Sync) => Scheduled,
        (Kind::Hold, Path::Claim) => Applies,
        (Kind::Shadow, Path::Confirm | Path::ConfirmAll | Path::Sync) => AppliesWithShadowVerdict,
        (Kind::Allow | Kind::Ask | Kind::Suggestion | Kind::Shadow | Kind::Audit, _) => Applies,
        (Kind::Rate | Kind::Sequence | Kind::Total, path) => expect_for_history(kind, path),
    }
}

/// Sets `kind` for `naming` on `app`'s `agent` at `at`.
async fn set_rule(app: &TestApp, agent: &str, kind: Kind, naming: Naming, at: OffsetDateTime) {
    try_set_rule(app, agent, kind, naming, at)
        .await
        .unwrap_or_else(|why| panic!("{kind:?} × {naming:?}: {why}"));
}

/// [`set_rule`], or why it was refused.
async fn try_set_rule(
    app: &TestApp,
    agent: &str,
    kind: Kind,
    naming: Naming,
    at: OffsetDateTime,
) -> Result<(), String> {
    let name = naming.pattern(kind);
    let engine = &app.engine;
    let change = |action| RuleChange::new(name, action);
    match kind {
        Kind::Allow | Kind::Ask | Kind::Deny | Kind::Audit => {
            let action = match kind {
                Kind::Allow => RuleAction::Allow,
                Kind::Audit => RuleAction::Audit,
                Kind::Ask => RuleAction::Ask,
                _ => RuleAction::Deny,
            };
            assert_eq!(kind_of_action(action), kind);
            engine
                .change_rule(agent, &change(action), at)
                .await
                .map_err(|e| e.to_string())?;
        }
        Kind::Quorum => {
            let quorum = RuleChange {
                approvals: Some(2),
                ..change(RuleAction::Ask)
            };
            engine
                .change_rule(agent, &quorum, at)
                .await
                .map_err(|e| e.to_string())?;
        }
        Kind::Suggestion => {
            let suggested = RuleChange {
                until: Some(at + Duration::days(30)),
                ..change(RuleAction::Allow)
            };
            engine
                .change_rule(agent, &suggested, at)
                .await
                .map_err(|e| e.to_string())?;
        }
        Kind::Hold => {
            let mut conn = app.store.read_connection().await.unwrap();
            agents::set_hold(&mut conn, agent, name, 30, at)
                .await
                .map_err(|e| e.to_string())?
                .expect("the agent exists");
        }
        Kind::Rate | Kind::Sequence | Kind::Total => {
            let (action, approvals, when) = match kind {
                Kind::Rate => (
                    RuleAction::Ask,
                    Some(2),
                    When::After {
                        count: 1,
                        window_seconds: 3_600,
                    },
                ),
                Kind::Sequence => (
                    RuleAction::Allow,
                    None,
                    When::OnlyAfter {
                        pattern: "set_task_title".into(),
                        within_seconds: 900,
                        succeeded: true,
                    },
                ),
                _ => (
                    RuleAction::Ask,
                    Some(2),
                    When::Total {
                        pointer: "/minutes".into(),
                        over: 100,
                        per_seconds: 86_400,
                    },
                ),
            };
            let conditional = RuleChange {
                approvals,
                condition: Some(when),
                ..change(action)
            };
            engine
                .change_rule(agent, &conditional, at)
                .await
                .map_err(|e| e.to_string())?;
        }
        Kind::Shadow => {
            let mut conn = app.store.read_connection().await.unwrap();
            let rule = ToolRule::new(name, RuleAction::Allow).unwrap();
            agents::set_shadow_rule(&mut conn, agent, rule, at)
                .await
                .map_err(|e| e.to_string())?
                .expect("the agent exists");
        }
    }
    Ok(())
}

fn at(minutes: i64) -> OffsetDateTime {
    NOW + Duration::minutes(minutes)
}

/// A new task of agent-1's (P1) on `app`.
async fn task(app: &TestApp) -> String {
    app.task(assent_journal_host::NewTask {
        title: "Matrix".into(),
        category: Some("work".into()),
        priority: Some("P1".into()),
        ..Default::default()
    })
    .await
}

/// `agent` proposes P0 for `task`: the set, when one was queued, and the reply.
async fn propose(
    app: &TestApp,
    agent: &str,
    task: &str,
) -> (Option<assent_domain::ChangeSet>, String) {
    let calls = assent_tests::tool_calls(&[("update_task_priority", json!({"priority": "P0"}))]);
    let request = WakeRequest::new(
        agent,
        assent_journal_host::task_target(task),
        Uuid::new_v4().to_string(),
        calls,
    );
    let outcome = app.engine.wakes().wake(request, NOW).await.unwrap();
    let reply = outcome.responses[0].content.clone();
    (outcome.change_set, reply)
}

/// `agent` proposes `tool` with `args` for `task` at `when`: the set, when one was
/// queued, and the reply.
async fn propose_call(
    app: &TestApp,
    agent: &str,
    task: &str,
    (tool, args): (&str, serde_json::Value),
    when: OffsetDateTime,
) -> (Option<assent_domain::ChangeSet>, String) {
    let calls = assent_tests::tool_calls(&[(tool, args)]);
    let request = WakeRequest::new(
        agent,
        assent_journal_host::task_target(task),
        Uuid::new_v4().to_string(),
        calls,
    );
    let outcome = app.engine.wakes().wake(request, when).await.unwrap();
    let reply = outcome.responses[0].content.clone();
    (outcome.change_set, reply)
}

/// The `allowedBy` of `task`'s result record.
async fn allowed_by(app: &TestApp, task: &str, here: &str) -> serde_json::Value {
    let mut conn = app.store.read_connection().await.unwrap();
    let trail = audit::list(
        &mut conn,
        &audit::AuditFilter::Target(assent_journal_host::task_target(task)),
        10,
    )
    .await
    .unwrap();
    let result = trail
        .iter()
        .find(|r| r.kind == AuditKind::Result)
        .unwrap_or_else(|| panic!("{here}: a result record"));
    result.allowed_by.clone().expect("allowedBy")
}

/// Checks a row of a rule with a condition over the history (its `expected` one of
/// the history expectations).
async fn history_row(
    app: &TestApp,
    peer: &TestApp,
    kind: Kind,
    naming: Naming,
    path: Path,
    expected: Expect,
) {
    let here = format!("{kind:?} × {naming:?} × {path:?}");
    let agent = &agent_of(path);
    let device = if path == Path::Sync { peer } else { app };
    let (first, second) = (task(device).await, task(device).await);
    match expected {
        Expect::QueuedForTwoOnceItHolds => {
            set_rule(app, agent, kind, naming, at(0)).await;
            let (set, reply) = propose_call(app, agent, &first, call_of(kind), at(0)).await;
            let set = set.unwrap_or_else(|| panic!("{here}: queued: {reply}"));
            assert_eq!(
                set.items[0].approvals_needed, None,
                "{here}: nothing ran yet"
            );
            let Confirmed::Outcome(outcome) = confirm(app, set.id, false, at(1)).await else {
                panic!("{here}: the first confirmation refused")
            };
            assert!(outcome.is_success(), "{here}: {outcome:?}");
            assert!(applied(app, &first, kind).await, "{here}");
            let (set, reply) = propose_call(app, agent, &second, call_of(kind), at(2)).await;
            let set = set.unwrap_or_else(|| panic!("{here}: queued: {reply}"));
            assert_eq!(
                set.items[0].approvals_needed,
                Some(2),
                "{here}: it holds now"
            );
            assert!(!applied(app, &second, kind).await, "{here}");
        }
        Expect::RunsUnaskedOnceItHolds => {
            set_rule(app, agent, kind, naming, at(0)).await;
            let (set, reply) = propose_call(app, agent, &first, call_of(kind), at(0)).await;
            assert!(set.is_some(), "{here}: asked before the title: {reply}");
            let title = ("set_task_title", json!({"title": "Renamed"}));
            let (set, reply) = propose_call(app, agent, &second, title, at(1)).await;
            let set = set.unwrap_or_else(|| panic!("{here}: the title is asked: {reply}"));
            let Confirmed::Outcome(outcome) = confirm(app, set.id, false, at(2)).await else {
                panic!("{here}: the title refused")
            };
            assert!(outcome.is_success(), "{here}: {outcome:?}");
            let third = task(app).await;
            let (set, reply) = propose_call(app, agent, &third, call_of(kind), at(3)).await;
            assert!(set.is_none(), "{here}: runs after the title: {reply}");
            assert!(applied(app, &third, kind).await, "{here}");
            let by = allowed_by(app, &third, &here).await;
            assert_eq!(by["rule"]["pattern"], naming.pattern(kind), "{here}: {by}");
            assert_eq!(
                by["rule"]["condition"]["when"]["kind"], "onlyAfter",
                "{here}: {by}"
            );
        }
        Expect::SecondAwaitsSecondPerson => {
            let mut sets = Vec::new();
            for task in [&first, &second] {
                let (set, reply) = propose_call(device, agent, task, call_of(kind), at(0)).await;
                let set = set.unwrap_or_else(|| panic!("{here}: queued: {reply}"));
                assert_eq!(
                    set.items[0].approvals_needed, None,
                    "{here}: before the rule"
                );
                sets.push(set.id);
            }
            if path == Path::Sync {
                peer.send_to(app).await;
            }
            set_rule(app, agent, kind, naming, at(1)).await;
            let all = path == Path::ConfirmAll;
            match confirm(app, sets[0], all, at(2)).await {
                Confirmed::Outcome(outcome) => assert!(outcome.is_success(), "{here}: {outcome:?}"),
                Confirmed::Refused(error) => panic!("{here}: the first refused: {error}"),
            }
            assert!(applied(app, &first, kind).await, "{here}");
            match confirm(app, sets[1], all, at(3)).await {
                Confirmed::Outcome(outcome) => assert!(
                    matches!(
                        outcome,
                        ExecutionOutcome::AwaitingApprovals { needed: 2, .. }
                    ),
                    "{here}: the condition holds at the second: {outcome:?}"
                ),
                Confirmed::Refused(error) => panic!("{here}: the second refused: {error}"),
            }
            assert!(!applied(app, &second, kind).await, "{here}");
        }
        other => panic!("{here}: no history row for {other:?}"),
    }
}

/// What a person's confirmation led to, as the row compares it.
enum Confirmed {
    Outcome(ExecutionOutcome),
    Refused(ConfirmError),
}

async fn confirm(app: &TestApp, set: Uuid, all: bool, when: OffsetDateTime) -> Confirmed {
    let person = app.engine.confirmations().by("alice");
    if all {
        let mut result = person.confirm_all(set, when).await.unwrap();
        return match result.items.remove(0).result {
            ItemResult::Confirmed(outcome) => Confirmed::Outcome(outcome.execution),
            ItemResult::Failed(error) => Confirmed::Refused(error),
            ItemResult::Skipped(why) => panic!("skipped: {why}"),
            other => panic!("an unknown result: {other:?}"),
        };
    }
    match person.confirm_item(ItemRef::new(set, 0), when).await {
        Ok(outcome) => Confirmed::Outcome(outcome.execution),
        Err(error) => Confirmed::Refused(error),
    }
}

/// Checks one row on `app` (and `peer`, the other device of the sync path).
async fn row(app: &TestApp, peer: &TestApp, kind: Kind, naming: Naming, path: Path) {
    let here = format!("{kind:?} × {naming:?} × {path:?}");
    // Each path has an agent of its own: a rule is the agent's, and one path's rule
    // must not route another path's proposal.
    let agent = &agent_of(path);
    let expected = expect(kind, naming, path);
    if let Expect::NotApplicable(_) = expected {
        return;
    }
    if matches!(
        expected,
        Expect::QueuedForTwoOnceItHolds
            | Expect::RunsUnaskedOnceItHolds
            | Expect::SecondAwaitsSecondPerson
    ) {
        return history_row(app, peer, kind, naming, path, expected).await;
    }
    let task = task(if path == Path::Sync { peer } else { app }).await;
    if expected == Expect::SettingRefused {
        let device = if path == Path::Sync { peer } else { app };
        let why = try_set_rule(device, agent, kind, naming, at(0))
            .await
            .expect_err(&here);
        assert!(why.contains("argument pattern"), "{here}: {why}");
        let (set, reply) = propose(device, agent, &task).await;
        let set = set.unwrap_or_else(|| panic!("{here}: queued as without it: {reply}"));
        assert_eq!(set.items[0].approvals_needed, None, "{here}");
        return;
    }

    match path {
        Path::Wake => {
            set_rule(app, agent, kind, naming, at(0)).await;
            let (set, reply) = propose(app, agent, &task).await;
            match expected {
                Expect::RunsUnasked => {
                    assert!(set.is_none(), "{here}: {reply}");
                    assert_eq!(
                        app.load(&task).await.priority.as_deref(),
                        Some("P0"),
                        "{here}"
                    );
                    let mut conn = app.store.read_connection().await.unwrap();
                    let trail = audit::list(
                        &mut conn,
                        &audit::AuditFilter::Target(assent_journal_host::task_target(&task)),
                        10,
                    )
                    .await
                    .unwrap();
                    let result = trail
                        .iter()
                        .find(|r| r.kind == AuditKind::Result)
                        .unwrap_or_else(|| panic!("{here}: a result record"));
                    let allowed = result.allowed_by.as_ref().expect("allowedBy");
                    assert_eq!(allowed["rule"]["pattern"], naming.name(), "{here}");
                    // An audit rule's call is marked for the digest; an allow's is not.
                    let audited = allowed.get("audited") == Some(&json!(true));
                    assert_eq!(audited, kind == Kind::Audit, "{here}: {allowed}");
                }
                Expect::Queued | Expect::QueuedForTwo => {
                    let set = set.unwrap_or_else(|| panic!("{here}: queued: {reply}"));
                    let needed = (expected == Expect::QueuedForTwo).then_some(2);
                    assert_eq!(set.items[0].approvals_needed, needed, "{here}");
                    assert_eq!(
                        app.load(&task).await.priority.as_deref(),
                        Some("P1"),
                        "{here}"
                    );
                }
                Expect::Refused => {
                    assert!(set.is_none(), "{here}");
                    assert!(reply.contains("denied by policy"), "{here}: {reply}");
                    assert_eq!(
                        app.load(&task).await.priority.as_deref(),
                        Some("P1"),
                        "{here}"
                    );
                }
                other => panic!("{here}: no wake row for {other:?}"),
            }
        }
        Path::Confirm | Path::ConfirmAll | Path::Sync => {
            let (deciding, set) = if path == Path::Sync {
                let set = propose(peer, agent, &task)
                    .await
                    .0
                    .expect("queued on the other device");
                peer.send_to(app).await;
                (app, set.id)
            } else {
                (app, propose(app, agent, &task).await.0.expect("queued").id)
            };
            set_rule(deciding, agent, kind, naming, at(1)).await;
            let confirmed = confirm(deciding, set, path == Path::ConfirmAll, at(2)).await;
            let now = deciding.load(&task).await.priority;
            match (expected, confirmed) {
                (Expect::Applies, Confirmed::Outcome(outcome)) => {
                    assert!(outcome.is_success(), "{here}: {outcome:?}");
                    assert_eq!(now.as_deref(), Some("P0"), "{here}");
                }
                (Expect::AppliesWithShadowVerdict, Confirmed::Outcome(outcome)) => {
                    assert!(outcome.is_success(), "{here}: {outcome:?}");
                    assert_eq!(now.as_deref(), Some("P0"), "{here}");
                    let mut conn = deciding.store.read_connection().await.unwrap();
                    let decided = decisions::for_change_set(&mut conn, set).await.unwrap();
                    let shadows = decisions::shadows_of(&mut conn, &decided).await.unwrap();
                    assert!(!shadows.is_empty(), "{here}: a shadow verdict recorded");
                }
                (Expect::Refused, Confirmed::Refused(ConfirmError::PolicyDenied { .. })) => {
                    assert_eq!(now.as_deref(), Some("P1"), "{here}");
                }
                (Expect::AwaitsSecondPerson, Confirmed::Outcome(outcome)) => {
                    assert!(
                        matches!(
                            outcome,
                            ExecutionOutcome::AwaitingApprovals { needed: 2, .. }
                        ),
                        "{here}: {outcome:?}"
                    );
                    assert_eq!(now.as_deref(), Some("P1"), "{here}");
                }
                (Expect::Scheduled, Confirmed::Outcome(outcome)) => {
                    assert!(
                        matches!(outcome, ExecutionOutcome::Scheduled { .. }),
                        "{here}: {outcome:?}"
                    );
                    assert_eq!(now.as_deref(), Some("P1"), "{here}");
                }
                (expected, Confirmed::Outcome(outcome)) => {
                    panic!("{here}: expected {expected:?}, got {outcome:?}")
                }
                (expected, Confirmed::Refused(error)) => {
                    panic!("{here}: expected {expected:?}, refused: {error}")
                }
            }
        }
        Path::Claim => {
            // Held by exact name; the row's rule comes while the window runs.
            let mut conn = app.store.read_connection().await.unwrap();
            agents::set_hold(&mut conn, agent, "update_task_priority", 30, at(0))
                .await
                .unwrap();
            drop(conn);
            let set = propose(app, agent, &task).await.0.expect("queued").id;
            let Confirmed::Outcome(ExecutionOutcome::Scheduled { not_before, .. }) =
                confirm(app, set, false, at(1)).await
            else {
                panic!("{here}: a held confirmation");
            };
            set_rule(app, agent, kind, naming, at(1) + Duration::SECOND).await;
            let early = app.engine.run_due_jobs(not_before - Duration::SECOND).await;
            assert_eq!(
                early.unwrap().claimed,
                0,
                "{here}: nothing before the window ends"
            );
            let run = app
                .engine
                .run_due_jobs(not_before + Duration::SECOND)
                .await
                .unwrap();
            let now = app.load(&task).await.priority;
            match expected {
                Expect::Applies => {
                    assert_eq!(run.applied, 1, "{here}: {run:?}");
                    assert_eq!(now.as_deref(), Some("P0"), "{here}");
                }
                Expect::Refused => {
                    assert_eq!(run.applied, 0, "{here}: {run:?}");
                    assert_eq!(now.as_deref(), Some("P1"), "{here}");
                }
                other => panic!("{here}: no claim row for {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn every_rule_kind_holds_on_every_path_for_every_naming() {
    for backend in backends() {
        for kind in KINDS {
            for naming in NAMINGS {
                // One pair of devices per rule: rules are per agent, and each row
                // works on a task of its own.
                let (app, peer) = devices(&backend).await;
                for path in PATHS {
                    row(&app, &peer, kind, naming, path).await;
                }
            }
        }
    }
}

/// Device A with an agent per path (no rules) and device B with the same agent, on `backend`.
async fn devices(backend: &TestBackend) -> (TestApp, TestApp) {
    let app = TestApp::device_on(backend, "device-a").await;
    let peer = TestApp::device_on(backend, "device-b").await;
    for path in PATHS {
        app.agent(&agent_of(path), &["work"]).await;
        peer.agent(&agent_of(path), &["work"]).await;
    }
    (app, peer)
}

fn agent_of(path: Path) -> String {
    format!("agent-{path:?}").to_lowercase()
}

#[test]
fn the_matrix_names_every_kind_naming_and_path() {
    let mut rows = 0;
    let mut gaps = Vec::new();
    for kind in KINDS {
        for path in PATHS {
            for naming in NAMINGS {
                match expect(kind, naming, path) {
                    Expect::NotApplicable(why) => {
                        assert!(!why.trim().is_empty(), "{kind:?} × {path:?}: say why");
                        gaps.push((kind, naming, path));
                    }
                    _ => rows += 1,
                }
            }
        }
    }
    // Every action of the policy is a kind of the matrix.
    for action in [
        RuleAction::Allow,
        RuleAction::Audit,
        RuleAction::Ask,
        RuleAction::Deny,
    ] {
        assert!(KINDS.contains(&kind_of_action(action)));
    }
    assert_eq!(rows + gaps.len(), KINDS.len() * PATHS.len() * NAMINGS.len());
    // The only rows that cannot exist: a quorum set after a held job was scheduled.
    for (kind, naming, path) in &gaps {
        assert!(
            sets_a_quorum(*kind) && *path == Path::Claim,
            "{kind:?} × {naming:?} × {path:?}: a gap the matrix does not explain"
        );
    }
    // Each condition over the history has a row on every path but that one.
    for kind in [Kind::Rate, Kind::Sequence, Kind::Total] {
        for path in PATHS {
            for naming in NAMINGS {
                let gap = matches!(expect(kind, naming, path), Expect::NotApplicable(_));
                assert_eq!(
                    gap,
                    sets_a_quorum(kind) && path == Path::Claim,
                    "{kind:?} × {path:?}"
                );
            }
        }
    }
}

/// Issue 53, point 7: rows for a chained shell command, judged part by part, on every
/// path above and both backends. The journal has no shell, so these rows run on a
/// device whose host adds one: `run_command {command}` (a command-like tool, read as
/// the coding agents' shells are), whose run sets the task's priority to P0 so a row
/// sees whether it ran.
mod split_commands {
    use super::*;
    use assent_confirm::{Engine, Host, LoadedState};
    use assent_journal_host::JournalHost;
    use assent_store::{Connection, Store, StoreOptions};
    use assent_tools::{
        BoxFuture, CategoryResolver, ToolHandler, ToolInvocation, ToolMode, ToolOutcome, ToolSpec,
        ToolsError,
    };
    use std::sync::Arc;

    const SHELL: &str = "run_command";

    struct ShellHost {
        journal: JournalHost,
        shell: ShellHandler,
    }

    struct ShellHandler {
        journal: JournalHost,
    }

    impl ToolHandler<Connection> for ShellHandler {
        fn execute<'a>(
            &'a self,
            ctx: &'a mut Connection,
            invocation: &'a ToolInvocation,
        ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
            Box::pin(async move {
                let priority = self
                    .journal
                    .handler("update_task_priority")
                    .expect("the journal sets priorities");
                let mut ran = invocation.clone();
                ran.tool_name = "update_task_priority".into();
                ran.args = json!({"priority": "P0"});
                priority.execute(ctx, &ran).await
            })
        }
    }

    impl Host for ShellHost {
        fn name(&self) -> &str {
            self.journal.name()
        }
        fn migrations(&self) -> &[assent_store::HostMigration] {
            self.journal.migrations()
        }
        fn entities(&self) -> Option<&dyn assent_store::sync::HostEntities> {
            self.journal.entities()
        }
        fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
            if tool_name == SHELL {
                Some(&self.shell)
            } else {
                self.journal.handler(tool_name)
            }
        }
        fn resolver(&self) -> &dyn CategoryResolver<Connection> {
            self.journal.resolver()
        }
        fn snapshot<'a>(
            &'a self,
            conn: &'a mut Connection,
            target: &'a assent_domain::Target,
        ) -> BoxFuture<'a, Result<LoadedState, String>> {
            self.journal.snapshot(conn, target)
        }
    }

    /// A device with the journal and a shell, on `backend`, with an agent per path.
    async fn device(backend: &TestBackend, host_id: &str) -> TestApp {
        let (url, dir) = backend.fresh_database().await;
        let store = Store::open_with({
            let mut options = StoreOptions::new(url.clone());
            options.device_id = host_id.into();
            options
        })
        .await
        .expect("store opens");
        let mut registry = assent_journal::catalog();
        registry
            .register(ToolSpec::new(
                SHELL,
                "Run a shell command.",
                ToolMode::Deferred,
                json!({"type": "object", "properties": {"command": {"type": "string"}},
                    "required": ["command"]}),
            ))
            .expect("a shell tool");
        let host = ShellHost {
            journal: JournalHost::new(host_id),
            shell: ShellHandler {
                journal: JournalHost::new(host_id),
            },
        };
        let engine = Engine::open(store.clone(), Arc::new(registry), Arc::new(host))
            .await
            .expect("the journal's tables");
        let app = TestApp {
            dir,
            url,
            store,
            engine,
            failures_left: Default::default(),
            faulty_calls: Default::default(),
        };
        for path in PATHS {
            app.agent(&agent_of(path), &["work"]).await;
        }
        app
    }

    /// A command line and the rule set for it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Case {
        /// `deny run_command(rm -rf *)`, and `ls && rm -rf build`: a part it covers.
        PartDenied,
        /// The same deny, and `ls | wc -l`: no part it covers (once denied whole).
        PipeNotDenied,
        /// The same deny, and a heredoc: a part that cannot be read asks, never denies.
        UnreadableAsks,
        /// `allow run_command(ls:*)`, and `ls | rm x`: not every part allowed.
        AllowNeedsEveryPart,
    }

    const CASES: [Case; 4] = [
        Case::PartDenied,
        Case::PipeNotDenied,
        Case::UnreadableAsks,
        Case::AllowNeedsEveryPart,
    ];

    impl Case {
        fn rule(self) -> (&'static str, RuleAction) {
            match self {
                Self::AllowNeedsEveryPart => ("run_command(ls:*)", RuleAction::Allow),
                _ => ("run_command(rm -rf *)", RuleAction::Deny),
            }
        }

        fn command(self) -> &'static str {
            match self {
                Self::PartDenied => "ls && rm -rf build",
                Self::PipeNotDenied => "ls | wc -l",
                Self::UnreadableAsks => "cat <<EOF\nrm -rf /\nEOF",
                Self::AllowNeedsEveryPart => "ls | rm x",
            }
        }

        /// What the row asserts on `path`: refused everywhere for a denied part;
        /// otherwise asked at the wake and applied once a person confirms.
        fn expect(self, path: Path) -> Expect {
            match (self, path) {
                (Self::PartDenied, _) => Expect::Refused,
                (_, Path::Wake) => Expect::Queued,
                _ => Expect::Applies,
            }
        }
    }

    async fn propose(
        app: &TestApp,
        agent: &str,
        task: &str,
        command: &str,
    ) -> (Option<Uuid>, String) {
        let calls = assent_tests::tool_calls(&[(SHELL, json!({ "command": command }))]);
        let request = WakeRequest::new(
            agent,
            assent_journal_host::task_target(task),
            Uuid::new_v4().to_string(),
            calls,
        );
        let outcome = app.engine.wakes().wake(request, NOW).await.unwrap();
        (
            outcome.change_set.map(|set| set.id),
            outcome.responses[0].content.clone(),
        )
    }

    async fn set(app: &TestApp, agent: &str, case: Case, when: OffsetDateTime) {
        let (pattern, action) = case.rule();
        app.engine
            .change_rule(agent, &RuleChange::new(pattern, action), when)
            .await
            .unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }

    async fn split_row(app: &TestApp, peer: &TestApp, case: Case, path: Path) {
        let here = format!("{case:?} × {path:?}");
        let agent = &agent_of(path);
        let expected = case.expect(path);
        let device = if path == Path::Sync { peer } else { app };
        let task = task(device).await;
        match path {
            Path::Wake => {
                set(app, agent, case, at(0)).await;
                let (set, reply) = propose(app, agent, &task, case.command()).await;
                match expected {
                    Expect::Refused => {
                        assert!(set.is_none(), "{here}: {reply}");
                        assert!(
                            reply.contains(
                                "denied by rule deny run_command(rm -rf *) (part 2 of 2: rm -rf build)"
                            ),
                            "{here}: {reply}"
                        );
                    }
                    Expect::Queued => assert!(set.is_some(), "{here}: asked: {reply}"),
                    other => panic!("{here}: {other:?}"),
                }
                assert_eq!(
                    app.load(&task).await.priority.as_deref(),
                    Some("P1"),
                    "{here}"
                );
            }
            Path::Confirm | Path::ConfirmAll | Path::Sync => {
                let (set_id, reply) = propose(device, agent, &task, case.command()).await;
                let set_id = set_id.unwrap_or_else(|| panic!("{here}: queued: {reply}"));
                if path == Path::Sync {
                    peer.send_to(app).await;
                }
                set(app, agent, case, at(1)).await;
                let confirmed = confirm(app, set_id, path == Path::ConfirmAll, at(2)).await;
                let now = app.load(&task).await.priority;
                match (expected, confirmed) {
                    (Expect::Applies, Confirmed::Outcome(outcome)) => {
                        assert!(outcome.is_success(), "{here}: {outcome:?}");
                        assert_eq!(now.as_deref(), Some("P0"), "{here}");
                    }
                    (
                        Expect::Refused,
                        Confirmed::Refused(ConfirmError::PolicyDenied { reason, .. }),
                    ) => {
                        // Refused at the run, naming the rule and the part as the wake does.
                        assert!(
                            reason.contains(
                                "denied by rule deny run_command(rm -rf *) (part 2 of 2: rm -rf build)"
                            ),
                            "{here}: {reason}"
                        );
                        assert_eq!(now.as_deref(), Some("P1"), "{here}");
                    }
                    (Expect::Refused, Confirmed::Outcome(outcome)) => {
                        assert!(!outcome.is_success(), "{here}: {outcome:?}");
                        assert_eq!(now.as_deref(), Some("P1"), "{here}");
                    }
                    (expected, Confirmed::Outcome(outcome)) => {
                        panic!("{here}: expected {expected:?}, got {outcome:?}")
                    }
                    (expected, Confirmed::Refused(error)) => {
                        panic!("{here}: expected {expected:?}, refused: {error}")
                    }
                }
            }
            Path::Claim => {
                let mut conn = app.store.read_connection().await.unwrap();
                agents::set_hold(&mut conn, agent, SHELL, 30, at(0))
                    .await
                    .unwrap();
                drop(conn);
                let set_id = propose(app, agent, &task, case.command())
                    .await
                    .0
                    .expect("queued");
                let Confirmed::Outcome(ExecutionOutcome::Scheduled { not_before, .. }) =
                    confirm(app, set_id, false, at(1)).await
                else {
                    panic!("{here}: a held confirmation");
                };
                set(app, agent, case, at(1) + Duration::SECOND).await;
                let run = app
                    .engine
                    .run_due_jobs(not_before + Duration::SECOND)
                    .await
                    .unwrap();
                let now = app.load(&task).await.priority;
                match expected {
                    Expect::Applies => {
                        assert_eq!(run.applied, 1, "{here}: {run:?}");
                        assert_eq!(now.as_deref(), Some("P0"), "{here}");
                    }
                    Expect::Refused => {
                        assert_eq!(run.applied, 0, "{here}: {run:?}");
                        assert_eq!(now.as_deref(), Some("P1"), "{here}");
                    }
                    other => panic!("{here}: no claim row for {other:?}"),
                }
            }
        }
    }

    #[tokio::test]
    async fn a_chained_command_is_judged_part_by_part_on_every_path() {
        for backend in backends() {
            for case in CASES {
                let app = device(&backend, "device-a").await;
                let peer = device(&backend, "device-b").await;
                for path in PATHS {
                    split_row(&app, &peer, case, path).await;
                }
            }
        }
    }

    #[test]
    fn every_case_has_a_row_on_every_path() {
        for case in CASES {
            for path in PATHS {
                assert!(
                    !matches!(case.expect(path), Expect::NotApplicable(_)),
                    "{case:?} × {path:?}"
                );
            }
        }
    }
}
