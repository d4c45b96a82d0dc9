//! What a coding agent's session did, on one screen (`assent sessions`, `assent session
//! show ID`, `GET /api/hook-sessions`): every call its hook was asked about, with how it
//! ended — ran unasked (which rule), asked (who answered, how long), edited (what
//! changed), refused (which rule or person), ran under a session grant, withdrawn — and
//! whether the agent reported it failed.
//!
//! Read from what is already recorded: the audit records of the hook's calls (run keys
//! `hook:SESSION:CALL`, which also carry the after events) and the change sets of the
//! calls it asked about (threads `hook-session:SESSION`), with their decisions.
//! [`calls_of`] is pure: the records in, the calls out.

use crate::HookError;
use assent_changeset::reply::NO_REASON;
use assent_confirm::{Engine, SESSION_THREAD_PREFIX};
use assent_domain::{ChangeDecision, ChangeItemStatus, ChangeSet, OffsetDateTime, format_time};
use assent_tools::{AuditKind, AuditRecord};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// How many of the newest records a listing reads (audit records and sets each).
const READ_LIMIT: u32 = 5_000;

/// The run-key prefix of every hook call (`gate.rs`'s `run_key`).
const RUN_KEY_PREFIX: &str = "hook:";

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The agent's rules allowed it: it ran unasked.
    RanUnasked,
    /// A person's session grant covered it: it ran unasked under the grant.
    Granted,
    /// A person confirmed it as proposed.
    Confirmed,
    /// A person edited it before it ran.
    Edited,
    /// A person rejected it.
    Rejected,
    /// A rule (or the category, or the arguments) refused it.
    Refused,
    /// Withdrawn before a person decided (nobody answered in time, the hook ran out
    /// of time).
    Withdrawn,
    /// Still waiting for a person.
    Waiting,
    /// Only the agent's report that it ran is recorded (the decision went another way,
    /// e.g. a retry a person's earlier confirmation released).
    Ran,
}

impl Ending {
    /// `ranUnasked`, `granted`, `confirmed`, `edited`, `rejected`, `refused`,
    /// `withdrawn`, `waiting`, `ran`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RanUnasked => "ranUnasked",
            Self::Granted => "granted",
            Self::Confirmed => "confirmed",
            Self::Edited => "edited",
            Self::Rejected => "rejected",
            Self::Refused => "refused",
            Self::Withdrawn => "withdrawn",
            Self::Waiting => "waiting",
            Self::Ran => "ran",
        }
    }

    /// A person was asked about it.
    pub fn was_asked(self) -> bool {
        matches!(
            self,
            Self::Confirmed | Self::Edited | Self::Rejected | Self::Withdrawn | Self::Waiting
        )
    }
}

/// One call of a session.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionCall {
    /// The coding agent's session.
    pub session: String,
    /// The Assent agent whose rules decided.
    pub agent: String,
    /// The workspace (the event's `cwd`).
    pub workspace: String,
    /// The call's run key (`hook:SESSION:CALL`).
    pub run_key: String,
    /// When it was first recorded.
    pub at: OffsetDateTime,
    /// The tool.
    pub tool: String,
    /// The arguments the agent proposed.
    pub args: Value,
    /// How it ended.
    pub ending: Ending,
    /// Who or what decided: a person, `rule allow PATTERN`, `grant ID (PATTERN)`.
    pub decided_by: Option<String>,
    /// What the rule, grant or person gave as the reason (a refusal's, a rejection's).
    pub reason: Option<String>,
    /// How long a person took to answer, in seconds.
    pub answered_after_secs: Option<i64>,
    /// The arguments that ran instead, when a person edited them.
    pub edited_args: Option<Value>,
    /// The change set a person was asked in.
    pub change_set: Option<uuid::Uuid>,
    /// What the agent reported after the run: `Some(true)` failed, `Some(false)` ran,
    /// `None` no report.
    pub failed: Option<bool>,
}

impl SessionCall {
    /// The command or path the call is about, as the agents show it.
    pub fn summary(&self) -> String {
        crate::summary::summary(&self.args, None)
    }

    /// One line: how it ended and who decided.
    pub fn how(&self) -> String {
        let by = self.decided_by.as_deref();
        let after = self
            .answered_after_secs
            .map(|secs| format!(" after {secs} s"))
            .unwrap_or_default();
        let mut how = match self.ending {
            Ending::RanUnasked => format!("ran unasked: {}", by.unwrap_or("the agent's rules")),
            Ending::Granted => format!("ran under {}", by.unwrap_or("a session grant")),
            Ending::Confirmed => format!("confirmed by {}{after}", by.unwrap_or("a person")),
            Ending::Edited => format!("edited by {}{after}", by.unwrap_or("a person")),
            Ending::Rejected => format!(
                "rejected by {}{after}: {}",
                by.unwrap_or("a person"),
                self.reason.as_deref().unwrap_or(NO_REASON)
            ),
            Ending::Refused => format!(
                "refused: {}",
                self.reason.as_deref().unwrap_or("no reason recorded")
            ),
            Ending::Withdrawn => {
                format!("withdrawn: {}", self.reason.as_deref().unwrap_or(NO_REASON))
            }
            Ending::Waiting => "waiting for a person".to_owned(),
            Ending::Ran => "ran".to_owned(),
        };
        if self.failed == Some(true) {
            how.push_str("; the agent reports it failed");
        }
        how
    }

    /// What a person changed, when they edited it.
    pub fn diff(&self) -> Option<String> {
        self.edited_args
            .as_ref()
            .map(|edited| crate::answer::what_changed(&self.args, edited))
    }

    /// Its JSON view.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session,
            "agentId": self.agent,
            "workspace": self.workspace,
            "runKey": self.run_key,
            "at": format_time(self.at),
            "tool": self.tool,
            "summary": self.summary(),
            "args": self.args,
            "ending": self.ending.as_str(),
            "how": self.how(),
            "decidedBy": self.decided_by,
            "reason": self.reason,
            "answeredAfterSecs": self.answered_after_secs,
            "editedArgs": self.edited_args,
            "diff": self.diff(),
            "changeSetId": self.change_set,
            "failed": self.failed,
        })
    }
}

/// One session, summed up.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The coding agent's session.
    pub session: String,
    /// The Assent agent.
    pub agent: String,
    /// The workspace of its first call.
    pub workspace: String,
    /// Its first call's time.
    pub first: OffsetDateTime,
    /// Its last call's time.
    pub last: OffsetDateTime,
    /// Its calls.
    pub calls: usize,
    /// Those a person was asked about.
    pub asked: usize,
    /// Those a person edited.
    pub edited: usize,
    /// Those refused by a rule or rejected by a person.
    pub refused: usize,
    /// Those the agent reported failed.
    pub failed: usize,
}

impl SessionSummary {
    /// Its JSON view.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session,
            "agentId": self.agent,
            "workspace": self.workspace,
            "first": format_time(self.first),
            "last": format_time(self.last),
            "calls": self.calls,
            "asked": self.asked,
            "edited": self.edited,
            "refused": self.refused,
            "failed": self.failed,
        })
    }
}

/// The calls of the hooks' sessions (of agent `agent`, and of session `session`, when
/// given), oldest first, read from the newest records.
pub async fn calls(
    engine: &Engine,
    agent: Option<&str>,
    session: Option<&str>,
) -> Result<Vec<SessionCall>, HookError> {
    let (sets, audit) = engine
        .admin()
        .hook_session_records(SESSION_THREAD_PREFIX, RUN_KEY_PREFIX, agent, READ_LIMIT)
        .await?;
    let calls = calls_of(&sets, &audit);
    Ok(match session {
        Some(session) => calls
            .into_iter()
            .filter(|call| call.session == session)
            .collect(),
        None => calls,
    })
}

/// The session and the call of a hook's run key (`hook:SESSION:CALL`); `None` for a
/// call that named no session.
fn session_of_run_key(run_key: &str) -> Option<&str> {
    let rest = run_key.strip_prefix(RUN_KEY_PREFIX)?;
    let (session, _call) = rest.rsplit_once(':')?;
    (!session.is_empty() && session != "-").then_some(session)
}

/// The calls recorded in `sets` (each with its decisions) and `audit`, grouped by run
/// key, oldest first; calls of no session are left out.
pub fn calls_of(
    sets: &[(ChangeSet, Vec<ChangeDecision>)],
    audit: &[AuditRecord],
) -> Vec<SessionCall> {
    let mut by_key: BTreeMap<&str, Vec<&AuditRecord>> = BTreeMap::new();
    for record in audit {
        by_key
            .entry(record.run_key.as_str())
            .or_default()
            .push(record);
    }
    let mut calls = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (set, decisions) in sets {
        let Some(session) = assent_confirm::session_of(set) else {
            continue;
        };
        for (index, item) in set.items.iter().enumerate() {
            let decision = decisions
                .iter()
                .rev()
                .find(|decision| decision.item_index == index);
            let records = by_key
                .get(set.run_key.as_str())
                .cloned()
                .unwrap_or_default();
            seen.insert(set.run_key.as_str());
            let ending = match item.status {
                ChangeItemStatus::Confirmed
                    if decision.is_some_and(|d| d.edited_args.is_some()) =>
                {
                    Ending::Edited
                }
                ChangeItemStatus::Confirmed => Ending::Confirmed,
                ChangeItemStatus::Rejected => Ending::Rejected,
                ChangeItemStatus::Retracted => Ending::Withdrawn,
                _ => Ending::Waiting,
            };
            calls.push(SessionCall {
                session: session.to_owned(),
                agent: set.agent_id.clone(),
                workspace: set.target_id.clone(),
                run_key: set.run_key.clone(),
                at: set.created_at,
                tool: item.tool_name.clone(),
                args: item.args.clone(),
                ending,
                decided_by: decision.and_then(|d| d.decided_by.clone()),
                reason: decision.and_then(|d| d.reason.clone()),
                answered_after_secs: decision
                    .filter(|_| ending != Ending::Waiting)
                    .map(|d| (d.created_at - set.created_at).whole_seconds()),
                edited_args: decision.and_then(|d| d.edited_args.clone()),
                change_set: Some(set.id),
                failed: reported(&records),
            });
        }
    }
    for (run_key, records) in &by_key {
        if seen.contains(run_key) {
            continue;
        }
        let (Some(session), Some(first)) = (session_of_run_key(run_key), records.first()) else {
            continue;
        };
        let (ending, decided_by, reason) = unasked(records);
        calls.push(SessionCall {
            session: session.to_owned(),
            agent: first.agent_id.clone(),
            workspace: first.target_id.clone(),
            run_key: (*run_key).to_owned(),
            at: first.created_at,
            tool: first.tool_name.clone(),
            args: first.args.clone(),
            ending,
            decided_by,
            reason,
            answered_after_secs: None,
            edited_args: None,
            change_set: None,
            failed: reported(records),
        });
    }
    calls.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.run_key.cmp(&b.run_key)));
    calls
}

/// How a call nobody was asked about ended, from its audit records: refused (the
/// refusal's words), run under a session grant, or run unasked (the rule).
fn unasked(records: &[&AuditRecord]) -> (Ending, Option<String>, Option<String>) {
    if let Some(denied) = records.iter().find(|r| r.kind == AuditKind::PolicyDenied) {
        return (Ending::Refused, None, denied.detail.clone());
    }
    let allowed = records.iter().find_map(|r| {
        r.allowed_by
            .as_ref()
            .filter(|_| r.kind == AuditKind::Action)
    });
    match allowed {
        Some(by) if by.get("grant").is_some() => {
            let grant = by["grant"].as_str().unwrap_or("?");
            (
                Ending::Granted,
                Some(format!("session grant {grant}")),
                None,
            )
        }
        Some(by) if by.get("rule").is_some() => {
            let pattern = by["rule"]["pattern"].as_str().unwrap_or("?");
            let action = by["rule"]["action"].as_str().unwrap_or("allow");
            (
                Ending::RanUnasked,
                Some(format!("rule {action} {pattern}")),
                None,
            )
        }
        Some(_) => (
            Ending::RanUnasked,
            Some("the tool runs without asking".to_owned()),
            None,
        ),
        None => (Ending::Ran, None, None),
    }
}

/// What the agent's after event reported: failed, ran, or nothing (`record_ran`'s
/// result record: no `success`, its detail `ran in KIND[ (failed)]: …`).
fn reported(records: &[&AuditRecord]) -> Option<bool> {
    records
        .iter()
        .rev()
        .filter(|r| r.kind == AuditKind::Result && r.success.is_none())
        .find_map(|r| r.detail.as_deref().filter(|d| d.starts_with("ran in ")))
        .map(|detail| {
            detail
                .split_once(':')
                .is_some_and(|(head, _)| head.ends_with("(failed)"))
        })
}

/// The sessions of `calls`, newest first.
pub fn summaries(calls: &[SessionCall]) -> Vec<SessionSummary> {
    let mut by: BTreeMap<(&str, &str), SessionSummary> = BTreeMap::new();
    for call in calls {
        let entry = by
            .entry((call.agent.as_str(), call.session.as_str()))
            .or_insert_with(|| SessionSummary {
                session: call.session.clone(),
                agent: call.agent.clone(),
                workspace: call.workspace.clone(),
                first: call.at,
                last: call.at,
                calls: 0,
                asked: 0,
                edited: 0,
                refused: 0,
                failed: 0,
            });
        entry.first = entry.first.min(call.at);
        entry.last = entry.last.max(call.at);
        entry.calls += 1;
        entry.asked += usize::from(call.ending.was_asked());
        entry.edited += usize::from(call.ending == Ending::Edited);
        entry.refused += usize::from(matches!(call.ending, Ending::Refused | Ending::Rejected));
        entry.failed += usize::from(call.failed == Some(true));
    }
    let mut list: Vec<SessionSummary> = by.into_values().collect();
    list.sort_by(|a, b| b.last.cmp(&a.last).then_with(|| a.session.cmp(&b.session)));
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{ChangeItem, ChangeSetStatus, OperationId, Uuid, Verdict};

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + secs).expect("a time")
    }

    fn record(run_key: &str, kind: AuditKind, secs: i64) -> AuditRecord {
        AuditRecord {
            operation_id: OperationId::from_stored(format!("op-{run_key}-{secs}")),
            run_key: run_key.to_owned(),
            tool_name: "Bash".to_owned(),
            agent_id: "coder".to_owned(),
            target_kind: "workspace".to_owned(),
            target_id: "/work".to_owned(),
            kind,
            args: json!({"command": "echo hi"}),
            success: Some(true),
            detail: None,
            vector_clock: None,
            created_at: at(secs),
            allowed_by: None,
            refused_by: None,
            decided_by: None,
        }
    }

    fn asked(session: &str, call: &str, status: ChangeItemStatus, secs: i64) -> ChangeSet {
        let mut item = ChangeItem::new("Bash", json!({"command": "touch a"}), "touch a".to_owned());
        item.status = status;
        ChangeSet {
            id: Uuid::new_v4(),
            agent_id: "coder".to_owned(),
            target_kind: "workspace".to_owned(),
            target_id: "/work".to_owned(),
            thread_id: assent_confirm::session_thread(session),
            run_key: format!("hook:{session}:{call}"),
            status: ChangeSetStatus::Resolved,
            items: vec![item],
            created_at: at(secs),
            resolved_at: None,
            vector_clock: Default::default(),
        }
    }

    fn decision(set: &ChangeSet, verdict: Verdict, secs: i64) -> ChangeDecision {
        ChangeDecision {
            id: Uuid::new_v4(),
            change_set_id: set.id,
            item_index: 0,
            agent_id: set.agent_id.clone(),
            target_kind: set.target_kind.clone(),
            target_id: set.target_id.clone(),
            tool_name: "Bash".to_owned(),
            verdict,
            reason: None,
            edited_args: None,
            human_summary: "touch a".to_owned(),
            args: set.items[0].args.clone(),
            created_at: at(secs),
            vector_clock: Default::default(),
            decided_by: Some("alice".to_owned()),
        }
    }

    #[test]
    fn every_ending_of_a_sessions_calls_is_told_with_who_decided() {
        // Ran unasked under a rule, and the agent reported it ran.
        let mut allowed = record("hook:s1:t1", AuditKind::Action, 1);
        allowed.allowed_by = Some(json!({"rule": {"pattern": "Bash(echo *)", "action": "allow"}}));
        let mut ran = record("hook:s1:t1", AuditKind::Result, 2);
        ran.success = None;
        ran.detail = Some("ran in claude-code: hi".to_owned());
        // Refused by a rule.
        let mut denied = record("hook:s1:t2", AuditKind::PolicyDenied, 3);
        denied.detail = Some("denied by rule deny Bash(rm *)".to_owned());
        // Under a session grant, and the agent reported it failed.
        let mut granted = record("hook:s1:t3", AuditKind::Action, 4);
        granted.allowed_by = Some(json!({"grant": "g-1", "session": "s1"}));
        let mut failed = record("hook:s1:t3", AuditKind::Result, 5);
        failed.success = None;
        failed.detail = Some("ran in claude-code (failed): exit 1".to_owned());
        // Another session's call, and a call of no session.
        let other = record("hook:s2:t1", AuditKind::Action, 6);
        let nameless = record("hook:-:t9", AuditKind::Action, 6);
        // Asked: edited by alice after 7 s; rejected by alice.
        let edited_set = asked("s1", "t4", ChangeItemStatus::Confirmed, 10);
        let mut edit = decision(&edited_set, Verdict::Confirmed, 17);
        edit.edited_args = Some(json!({"command": "touch b"}));
        let rejected_set = asked("s1", "t5", ChangeItemStatus::Rejected, 20);
        let mut rejection = decision(&rejected_set, Verdict::Rejected, 21);
        rejection.reason = Some("not here".to_owned());
        let calls = calls_of(
            &[(edited_set, vec![edit]), (rejected_set, vec![rejection])],
            &[allowed, ran, denied, granted, failed, other, nameless],
        );
        let s1: Vec<(String, String)> = calls
            .iter()
            .filter(|c| c.session == "s1")
            .map(|c| (c.ending.as_str().to_owned(), c.how()))
            .collect();
        assert_eq!(
            s1,
            [
                ("ranUnasked", "ran unasked: rule allow Bash(echo *)"),
                ("refused", "refused: denied by rule deny Bash(rm *)"),
                (
                    "granted",
                    "ran under session grant g-1; the agent reports it failed"
                ),
                ("edited", "edited by alice after 7 s"),
                ("rejected", "rejected by alice after 1 s: not here"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        let edited = calls
            .iter()
            .find(|c| c.ending == Ending::Edited)
            .expect("an edit");
        assert_eq!(
            edited.diff().as_deref(),
            Some(r#"command: "touch a" → "touch b""#)
        );
        assert!(
            calls.iter().all(|c| c.session != "-"),
            "no nameless session"
        );
        let sessions = summaries(&calls);
        assert_eq!(sessions.len(), 2);
        assert_eq!(sessions[0].session, "s1", "the newest first");
        assert_eq!(
            (
                sessions[0].calls,
                sessions[0].asked,
                sessions[0].edited,
                sessions[0].refused,
                sessions[0].failed
            ),
            (5, 2, 1, 2, 1)
        );
    }
}
