//! The JSON shapes of change sets, wakes, confirmations and audit records, shared by
//! the API and the command line's `--json` output so that both always agree.

use assent_changeset::{
    CallReply, ChangesetError, Dialect, ParsedCalls, ReplyMessages, exact_reply_messages,
};
use assent_confirm::records::{Job, Quorum, Undoes};
use assent_confirm::{
    CallResult, ConfirmAllResult, ConfirmOutcome, ItemResult, ScheduledWake, WakeOutcome,
};
use assent_domain::{ChangeDecision, ChangeSet, OffsetDateTime, Uuid, Verdict};
use assent_tools::AuditRecord;
use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One item of a change set: `{index, toolName, args, humanSummary, status, before?}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetItemView<'a> {
    /// Its position in the set; the `{index}` of the item routes.
    pub index: usize,
    /// The tool that runs when it is confirmed.
    pub tool_name: &'a str,
    /// The arguments a confirmation runs (or ran): a person's edit when one confirmed
    /// the item with edited arguments (see [`SetView::with_edits`]), the current
    /// revision's under a quorum, else the proposal's.
    pub args: &'a Value,
    /// The agent's own arguments, when a person's edit replaced them in `args` (any
    /// item, with or without a quorum); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_args: Option<&'a Value>,
    /// Who edited `args`, when a person did; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_by: Option<&'a str>,
    /// The item's current revision: a confirmation names the one it was shown
    /// (`revision` in the confirm body) and is refused (409) once it moved.
    pub revision: u32,
    /// What a person reads.
    pub human_summary: &'a str,
    /// `pending`, `confirmed`, `rejected`, `deferred` or `retracted`.
    pub status: &'a str,
    /// The value the change would replace, when known.
    pub before: Option<&'a Value>,
    /// Why a person rejected it or why it was withdrawn, when said (API only; see
    /// [`SetView::with_reasons`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    /// For a confirmed item of a tool with an external effect, how its run stands:
    /// `{jobId, status: approved|running|applied|failed|inDoubt|retracted, attempts,
    /// lastError, result}` (see [`SetView::with_jobs`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
    /// Its tool's definition changed since a person accepted it (an MCP server that
    /// described the tool anew under the same name; see [`SetView::with_changed_tools`]):
    /// `true`, else absent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tool_changed: bool,
    /// The target changed since the proposal (found when it was confirmed or when its
    /// job was to run): nothing was applied to what it became, and `before` shows the
    /// target as it was found then.
    pub stale: bool,
    /// Why, in one line (`target changed since proposed: priority was P2, now P1; …`);
    /// null when not stale.
    pub stale_detail: Option<&'a str>,
    /// A confirmed item whose tool declares how to reverse it and whose run (if it has
    /// a job) is applied: `POST …/items/{index}/undo` may propose its reversal (see
    /// [`SetView::with_undoable`]). `true`, else absent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub undoable: bool,
    /// For an item whose tool needs more than one person (`assent agent ask …
    /// --approvals N`): who approved its current revision, `[{by, at}]` (see
    /// [`SetView::with_quorum`]). Absent for other items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Vec<Value>>,
    /// How many distinct people must approve it; absent when one is enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
    /// Who made its last decision, when known (see [`SetView::with_reasons`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<&'a str>,
    /// What a shadow rule of the agent said beside its last decision, `{rule, agreed}`
    /// (see [`SetView::with_shadows`]); absent when none covered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<&'a Value>,
}

/// The id a journal task's views have always carried as `taskId`; absent for other
/// hosts' targets, which carry only `targetKind` and `targetId`.
pub fn task_id_of(set: &ChangeSet) -> Option<&str> {
    (set.target_kind == assent_domain::LEGACY_TARGET_KIND).then_some(set.target_id.as_str())
}

/// A change set: `{id, agentId, targetKind, targetId, taskId (a journal task's),
/// status, createdAt, items}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetView<'a> {
    /// The set's id.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: &'a str,
    /// The kind of target it would change.
    pub target_kind: &'a str,
    /// The target it would change.
    pub target_id: &'a str,
    /// The target's id when it is a journal task (the field of release 0.1.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<&'a str>,
    /// `pending`, `partiallyResolved`, `resolved` or `expired`.
    pub status: &'a str,
    /// When the wake produced it.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Its items, in order.
    pub items: Vec<SetItemView<'a>>,
    /// For a set that reverses an applied item (`assent undo`): `{changeSetId,
    /// itemIndex, operationId}` of that item; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undoes: Option<Undoes>,
    /// A coding agent's hook set: the agent's session it came from, which a person
    /// may answer "yes, for this session" (`forSession`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
    /// Until when the agent's request waits for an answer (the MCP gateway's
    /// `--wait`), when its door said so (see [`SetView::with_wait`]); display data
    /// only, absent otherwise.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub waits_until: Option<OffsetDateTime>,
}

impl<'a> SetView<'a> {
    /// The view of `set`.
    pub fn of(set: &'a ChangeSet) -> Self {
        Self {
            id: set.id,
            agent_id: &set.agent_id,
            target_kind: &set.target_kind,
            target_id: &set.target_id,
            task_id: task_id_of(set),
            status: set.status.as_str(),
            created_at: set.created_at,
            undoes: None,
            session: assent_confirm::session_of(set),
            waits_until: None,
            items: set
                .items
                .iter()
                .enumerate()
                .map(|(index, item)| SetItemView {
                    index,
                    tool_name: &item.tool_name,
                    args: &item.args,
                    proposed_args: None,
                    edited_by: None,
                    revision: item.revision,
                    human_summary: &item.human_summary,
                    status: item.status.as_str(),
                    before: item.before.as_ref(),
                    reason: None,
                    execution: None,
                    tool_changed: false,
                    stale: item.stale_detail.is_some(),
                    stale_detail: item.stale_detail.as_deref(),
                    undoable: false,
                    approvals: None,
                    approvals_needed: None,
                    decided_by: None,
                    shadow: None,
                })
                .collect(),
        }
    }

    /// The same view with each rejected or withdrawn item's reason (the one the agent
    /// is told), and who decided each item, taken from `decisions` (the set's, oldest
    /// first: the last word on an item wins).
    #[must_use]
    pub fn with_reasons(mut self, decisions: &'a [ChangeDecision]) -> Self {
        self = self.with_edits(decisions);
        for decision in decisions {
            if let Some(item) = self.items.get_mut(decision.item_index) {
                item.decided_by = decision.decided_by.as_deref();
                item.reason = match decision.verdict {
                    Verdict::Rejected | Verdict::Retracted => decision.reason.as_deref(),
                    _ => None,
                };
            }
        }
        self
    }
}

impl<'a> SetView<'a> {
    /// The same view with the arguments each item ran (or runs) with when a person
    /// confirmed it with edited arguments (`decisions`, the set's): `args` is what
    /// ran, `proposedArgs` the agent's, `editedBy` who edited. [`Self::with_reasons`]
    /// does this too.
    #[must_use]
    pub fn with_edits(mut self, decisions: &'a [ChangeDecision]) -> Self {
        for decision in decisions {
            let Some(item) = self.items.get_mut(decision.item_index) else {
                continue;
            };
            let edited = decision
                .edited_args
                .as_ref()
                .filter(|edited| decision.verdict == Verdict::Confirmed && *edited != item.args);
            if let Some(edited) = edited {
                item.proposed_args.get_or_insert(item.args);
                item.args = edited;
                item.edited_by = Some(decision.decided_by.as_deref().unwrap_or("a person"));
            }
        }
        self
    }

    /// The same view with until when its agent waits
    /// ([`assent_confirm::SetRecord::waits_until`]).
    #[must_use]
    pub fn with_wait(mut self, until: Option<OffsetDateTime>) -> Self {
        self.waits_until = until;
        self
    }

    /// The same view with its items' quorums ([`assent_confirm::SetRecord::quorum`]):
    /// who approved, how many are needed, and the arguments the current revision runs
    /// with when a person's edit changed them (with who edited).
    #[must_use]
    pub fn with_quorum(mut self, quorum: &'a Quorum) -> Self {
        for (index, needed, revision) in &quorum.items {
            if let Some(item) = self.items.get_mut(*index) {
                item.approvals_needed = Some(*needed);
                item.approvals = Some(
                    revision
                        .approvals
                        .iter()
                        .map(|a| json!({"by": a.by, "at": assent_domain::format_time(a.at)}))
                        .collect(),
                );
                if let Some(args) = revision.args.as_ref().filter(|args| *args != item.args) {
                    item.proposed_args = Some(item.args);
                    item.args = args;
                    item.edited_by = revision.edited_by.as_deref();
                }
            }
        }
        self
    }

    /// The same view with the shadow verdict recorded beside each item's last decision
    /// (`shadows` from [`assent_confirm::SetDetail::shadows`], `decisions` the set's,
    /// oldest first).
    #[must_use]
    pub fn with_shadows(
        mut self,
        decisions: &[ChangeDecision],
        shadows: &'a [(Uuid, Value)],
    ) -> Self {
        for decision in decisions {
            if let Some(item) = self.items.get_mut(decision.item_index) {
                item.shadow = shadows
                    .iter()
                    .find(|(id, _)| *id == decision.id)
                    .map(|(_, shadow)| shadow);
            }
        }
        self
    }

    /// The same view with each item's execution job (the set's, from
    /// [`assent_confirm::SetRecord::jobs`]).
    #[must_use]
    pub fn with_jobs(mut self, jobs: &[Job]) -> Self {
        for job in jobs {
            if let Some(item) = self.items.get_mut(job.item_index) {
                item.execution = Some(job.execution_json());
            }
        }
        self
    }

    /// Marks the confirmed items that may be undone: `reversible(tool, args, before)`
    /// (the engine's registry declares a compensation that what was recorded allows)
    /// and their job, if any, applied. Call after [`SetView::with_jobs`].
    #[must_use]
    pub fn with_undoable(
        mut self,
        reversible: impl Fn(&str, &Value, Option<&Value>) -> bool,
    ) -> Self {
        for item in &mut self.items {
            let ran = item
                .execution
                .as_ref()
                .is_none_or(|run| run["status"] == "applied");
            item.undoable = item.status == "confirmed"
                && ran
                && reversible(item.tool_name, item.args, item.before);
        }
        self
    }

    /// Marks the items at `indexes` (from [`assent_confirm::SetRecord::changed_tools`])
    /// as items of a tool whose definition changed since a person accepted it.
    pub fn with_changed_tools(mut self, indexes: &[usize]) -> Self {
        for index in indexes {
            if let Some(item) = self.items.get_mut(*index) {
                item.tool_changed = true;
            }
        }
        self
    }
}

/// One record of the audit trail: the record's own fields, and `taskId` beside
/// `targetKind` and `targetId` when the target is a journal task, as release 0.1.0
/// had it (and as [`SetView`] keeps it). The record itself stays as sync batches carry
/// it; only the views add the field.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditView<'a> {
    /// The record, field by field.
    #[serde(flatten)]
    pub record: &'a AuditRecord,
    /// The target's id when it is a journal task (the field of release 0.1.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<&'a str>,
    /// Who edited the arguments the record shows, when a person confirmed the call with
    /// edited arguments (see [`AuditView::with_edits`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_by: Option<&'a str>,
    /// The agent's own arguments beside them, when a person's edit replaced them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_args: Option<&'a Value>,
}

impl<'a> AuditView<'a> {
    /// The view of `record`.
    pub fn of(record: &'a AuditRecord) -> Self {
        let is_task = record.target_kind == assent_domain::LEGACY_TARGET_KIND;
        Self {
            record,
            task_id: is_task.then_some(record.target_id.as_str()),
            edited_by: None,
            proposed_args: None,
        }
    }

    /// The views of `records`, in their order.
    pub fn all(records: &'a [AuditRecord]) -> Vec<Self> {
        records.iter().map(Self::of).collect()
    }

    /// The same view naming who edited the arguments it ran with and what the agent
    /// proposed, when one of `edited` (confirmations with edited arguments, each with
    /// its set's run key) is of the record's run, tool and arguments.
    #[must_use]
    pub fn with_edits(mut self, edited: &'a [(String, ChangeDecision)]) -> Self {
        let record = self.record;
        let found = edited.iter().rev().find(|(run_key, decision)| {
            *run_key == record.run_key
                && decision.tool_name == record.tool_name
                && decision.edited_args.as_ref() == Some(&record.args)
        });
        if let Some((_, decision)) = found {
            self.edited_by = Some(decision.decided_by.as_deref().unwrap_or("a person"));
            self.proposed_args = Some(&decision.args);
        }
        self
    }
}

/// `{"changeSetId", "responses": [{"toolCallId", "content"}]}` (callers add
/// `messages` from [`wake_messages`], with [`WakeWithMessages`]).
pub fn wake_json(outcome: &WakeOutcome) -> Value {
    json!({
        "changeSetId": outcome.change_set.as_ref().map(|s| s.id),
        "responses": outcome.responses,
    })
}

/// The wake's replies as the messages the caller appends to its conversation, in
/// `format` (the `messages` of a wake's JSON; `responses` stays as it is). One answer
/// per call of `parsed`, which the wake's responses follow one by one. Each id is the
/// one its call was sent with, token for token (an MCP request id may be any JSON
/// number), so write them with serde_json, as [`WakeWithMessages`] does, and never
/// through a [`Value`].
pub fn wake_messages(
    parsed: &ParsedCalls,
    format: Dialect,
    outcome: &WakeOutcome,
) -> Result<ReplyMessages, ChangesetError> {
    let replies: Vec<CallReply<'_>> = outcome
        .responses
        .iter()
        .map(|r| CallReply {
            tool_call_id: &r.tool_call_id,
            content: &r.content,
        })
        .collect();
    exact_reply_messages(parsed, format, &replies)
}

/// A wake's JSON ([`wake_json`] or [`scheduled_wake_json`]) with its `messages` from
/// [`wake_messages`], to be written with serde_json: the keys in the order a [`Value`]
/// writes them, every id in `messages` exactly as its call sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeWithMessages {
    body: Value,
    messages: ReplyMessages,
}

impl WakeWithMessages {
    /// `body` (an object) with `messages` added.
    pub fn new(body: Value, messages: ReplyMessages) -> Self {
        Self { body, messages }
    }
}

impl Serialize for WakeWithMessages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// One field: the body's, or the messages.
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Field<'a> {
            Body(&'a Value),
            Messages(&'a ReplyMessages),
        }
        let body = self
            .body
            .as_object()
            .ok_or_else(|| S::Error::custom("a wake's JSON is not an object"))?;
        let mut fields: BTreeMap<&str, Field<'_>> = body
            .iter()
            .map(|(key, value)| (key.as_str(), Field::Body(value)))
            .collect();
        fields.insert("messages", Field::Messages(&self.messages));
        fields.serialize(serializer)
    }
}

/// A sub-agent's wake: [`wake_json`] plus `agentPath` and `calls`, one per queued call:
/// `{itemIndex, toolName, strategy, outcome, correlationIds, result, reply}`, where
/// `result` is `applied`, `rejected`, `waiting` or `refused` and `reply` is the text
/// for the model.
pub fn scheduled_wake_json(scheduled: &ScheduledWake, agent_path: &str) -> Value {
    let mut body = wake_json(&scheduled.wake);
    let calls: Vec<Value> = scheduled
        .calls
        .iter()
        .map(|call| {
            let result = match &call.result {
                CallResult::Applied(_) => "applied",
                CallResult::Rejected(_) => "rejected",
                CallResult::Waiting { .. } => "waiting",
                CallResult::Refused(_) => "refused",
            };
            json!({
                "itemIndex": call.item_index,
                "toolName": call.tool_name,
                "strategy": call.strategy,
                "outcome": call.outcome,
                "correlationIds": call.correlation_ids,
                "result": result,
                "reply": call.reply(),
            })
        })
        .collect();
    body["agentPath"] = json!(agent_path);
    body["calls"] = Value::Array(calls);
    body
}

/// `{"decision", "message"}` of one confirmation, with `scheduled` when a hold window
/// holds it and `approvals: {count, needed}` when it left the item short of its quorum.
pub fn confirmed_json(outcome: &ConfirmOutcome) -> Value {
    let mut shown = json!({"decision": outcome.decision, "message": outcome.message()});
    if let Some(scheduled) = scheduled_json(outcome) {
        shown["scheduled"] = scheduled;
    }
    if let assent_confirm::ExecutionOutcome::AwaitingApprovals { approvals, needed } =
        outcome.execution
    {
        shown["approvals"] = json!({"count": approvals, "needed": needed});
    }
    shown
}

/// One rejection: the decision's own fields (what the route answered before), plus
/// confirm's `{"decision", "message"}`, so a client reads both answers one way.
pub fn rejected_json(decision: &ChangeDecision) -> Value {
    let mut shown = serde_json::to_value(decision).unwrap_or_else(|_| json!({}));
    let message = match decision.reason.as_deref() {
        Some(reason) => format!("Rejected; it will not run (reason: \"{reason}\")."),
        None => "Rejected; it will not run.".to_owned(),
    };
    if let Value::Object(fields) = &mut shown {
        fields.insert(
            "decision".to_owned(),
            serde_json::to_value(decision).unwrap_or_default(),
        );
        fields.insert("message".to_owned(), Value::String(message));
    }
    shown
}

/// `{"jobId", "notBefore"}` of a confirmation held by its tool's hold window: the
/// decision is written when the window ends, unless the job is cancelled first.
fn scheduled_json(outcome: &ConfirmOutcome) -> Option<Value> {
    match &outcome.execution {
        assent_confirm::ExecutionOutcome::Scheduled {
            job_id, not_before, ..
        } => Some(json!({
            "jobId": job_id,
            "notBefore": assent_domain::format_time(*not_before),
        })),
        _ => None,
    }
}

/// `{"changeSetId", "items": [{"index", "humanSummary", "result", "message", …}]}` of a
/// confirm-all, one entry per item.
pub fn confirm_all_json(result: &ConfirmAllResult) -> Value {
    let items: Vec<Value> = result
        .items
        .iter()
        .map(|item| {
            let (index, summary) = (item.index, &item.summary);
            match &item.result {
                ItemResult::Confirmed(outcome) => {
                    let mut shown = json!({
                        "index": index, "humanSummary": summary, "result": "confirmed",
                        "decision": outcome.decision, "message": outcome.message(),
                    });
                    if let Some(scheduled) = scheduled_json(outcome) {
                        shown["scheduled"] = scheduled;
                    }
                    shown
                }
                ItemResult::Skipped(why) => json!({
                    "index": index, "humanSummary": summary, "result": "skipped", "message": why,
                }),
                ItemResult::Failed(error) => json!({
                    "index": index, "humanSummary": summary, "result": "failed",
                    "message": error.to_string(), "conflict": error.is_conflict(),
                }),
                // An outcome this server does not know yet: never reported as confirmed.
                other => json!({
                    "index": index, "humanSummary": summary, "result": "failed",
                    "message": format!("{other:?}"), "conflict": false,
                }),
            }
        })
        .collect();
    json!({"changeSetId": result.change_set_id, "items": items})
}
