//! The engine's side of a hook event: the call routed through the agent's rules by the
//! engine's own wake (the one decision point of every door), a queued call waited for
//! through the change feed, and the person's decision turned into an [`Answer`].
//!
//! The coding agent runs its tools itself; Assent's part of a call is the permission.
//! So every tool of an agent's hook is a tool of one host per agent
//! ([`hook_host`]) whose handler runs nothing and records that the agent may run the
//! call ([`ALLOWED`]). A call the rules allow is "run" (allowed and audited) in the
//! wake; a confirmed one becomes a job of that host, which the waiting hook (or, after
//! `--on-timeout deny`, the retried call) claims by its id (`Engine::run_job`), so the
//! permission is handed out and audited once.

use crate::{Answer, HookError, HookEvent, Phase};
use assent_changeset::{ToolArguments, ToolCall, reply};
use assent_confirm::agents;
use assent_confirm::records::{JobStatus, PendingFilter};
use assent_confirm::{Engine, HostError, SimpleHost, WakeRequest};
use assent_domain::{
    ChangeItemStatus, OffsetDateTime, OperationId, Target, Uuid, canonical_json, head_and_tail,
};
use assent_store::{Connection, Store};
use assent_tools::{
    AuditKind, AuditRecord, BoxFuture, ToolInvocation, ToolMode, ToolRegistry, ToolSpec,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The kind of a hook call's target: the workspace (the event's `cwd`) the agent works in.
pub const TARGET_KIND: &str = "workspace";

/// The category of a workspace unless `--category` says otherwise.
pub const DEFAULT_CATEGORY: &str = "code";

/// What the hook host's handler records for a call it lets the agent run: the run is
/// the agent's own.
pub const ALLOWED: &str = "Allowed: the coding agent runs the call itself.";

/// The reason of a queued call withdrawn when nobody answered in time and the agent's
/// own prompt took over (`--on-timeout ask`).
pub const ANSWERED_IN_CLIENT: &str = "answered in the client";

/// How long one look at a waited-for set lasts before the hook checks its job.
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// What to do when nobody decided in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// Withdraw the item and let the agent's own prompt ask (deny where it cannot ask).
    Ask,
    /// Deny, naming the set: a retry of the same call once a person confirmed it is
    /// allowed once.
    Deny,
}

/// How a hook answers for one agent.
#[derive(Debug, Clone)]
pub struct HookOptions {
    /// The agent kind, for the dialect and whether it can ask.
    pub kind: crate::AgentKind,
    /// The Assent agent whose rules decide.
    pub agent: String,
    /// The workspace's category, checked against the agent's allowlist.
    pub category: String,
    /// How long a queued call waits for a person.
    pub wait: Duration,
    /// What happens when nobody decided in time.
    pub on_timeout: OnTimeout,
    /// When the hook's run began (its process's start, or the request's arrival): the
    /// wait and the whole run are counted from here, not from when the database
    /// answered (the whole run is `--wait`, at least a few seconds).
    pub started: Instant,
}

/// The least time a hook's whole run is given, whatever its wait: opening the
/// database and queueing the call (so `--wait 0` still queues it).
pub(crate) const MIN_RUN: Duration = Duration::from_secs(5);

/// What a hook keeps of its wait for the answer after it: withdrawing its item and
/// writing the reply.
const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// What every agent's hook timeout leaves beyond the hook's whole run ([`run_limit`]):
/// the process's start and exit, and withdrawing an item when the database was busy
/// at the end ([`WITHDRAW_LIMIT`]).
pub(crate) const AGENT_MARGIN: Duration = Duration::from_secs(10);

/// How long a hook that ran out of time still tries to withdraw the item it queued.
const WITHDRAW_LIMIT: Duration = Duration::from_secs(3);

/// The hook's whole run for a wait of `wait`, counted from its start: by then it has
/// answered, a denial if the database kept it busy. The wait for a person ends a
/// moment before (`ANSWER_MARGIN`).
pub(crate) fn run_limit(wait: Duration) -> Duration {
    wait.max(MIN_RUN)
}

/// The timeout an agent must give the hook for a wait of `wait` (what `assent hook
/// install` writes): above its whole run, so the agent never kills a hook that is still
/// deciding and runs the call (issue 52).
pub(crate) fn agent_timeout(wait: Duration) -> Duration {
    run_limit(wait) + AGENT_MARGIN
}

impl HookOptions {
    /// When the hook's whole run ends (the wait, at least a few seconds, after its
    /// start): whatever is still undecided then (the database busy) is denied.
    pub fn run_ends(&self) -> Instant {
        self.started + run_limit(self.wait)
    }

    /// The denial of a call the hook could not decide by [`HookOptions::run_ends`].
    pub fn out_of_time(&self) -> Answer {
        Answer::Deny {
            reason: out_of_time(self.wait),
        }
    }
}

/// Why a call the hook could not decide within its run (a busy database) is refused.
fn out_of_time(wait: Duration) -> String {
    format!(
        "Assent could not decide within {} s (its database stayed busy), so the call did not run; no rule or person refused it: retry the same call",
        run_limit(wait).as_secs()
    )
}

/// A few seconds under each agent's own default hook timeout (after which the agent
/// goes on without the hook, or blocks where told to).
pub fn default_wait(kind: crate::AgentKind) -> Duration {
    use crate::AgentKind;
    Duration::from_secs(match kind {
        AgentKind::ClaudeCode | AgentKind::Codex => 590,
        AgentKind::Gemini => 55,
        AgentKind::Cursor | AgentKind::Copilot | AgentKind::Vscode => 25,
    })
}

/// The host of agent `agent`'s hook calls: `hook_` and the agent's name, ASCII letters
/// and digits kept, `_` doubled, any other character as `_`, its code point in hex,
/// `_` (so two agents never share a host, and never claim each other's jobs).
pub fn hook_host(agent: &str) -> String {
    let mut out = String::from("hook_");
    for c in agent.chars() {
        match c {
            '_' => out.push_str("__"),
            c if c.is_ascii_alphanumeric() => out.push(c),
            c => out.push_str(&format!("_{:x}_", u32::from(c))),
        }
    }
    out
}

/// The decision about `event` (a before event or Codex's permission request) for
/// the agent of `options`: see the module documentation. Answered within the hook's
/// whole run (its wait, at least a few seconds) after `options.started`: a call still
/// undecided then (the database busy) is denied, and the item it queued withdrawn.
#[tracing::instrument(skip_all, fields(kind = %options.kind, agent = %options.agent, tool = %event.tool_name, cwd = %event.cwd))]
pub async fn decide(
    store: &Store,
    options: &HookOptions,
    event: &HookEvent,
) -> Result<Answer, HookError> {
    debug_assert!(event.phase != Phase::After);
    let limit = options.run_ends();
    // The sets this call queued, so a run cut short withdraws them.
    let queued = std::sync::Mutex::new(Vec::new());
    match tokio::time::timeout_at(limit, decide_within(store, options, event, &queued)).await {
        Ok(answer) => answer,
        Err(_) => {
            let sets = queued.lock().map(|sets| sets.clone()).unwrap_or_default();
            tracing::warn!(?sets, "out of time: denied, and what it queued withdrawn");
            if !sets.is_empty() {
                let withdrawn = tokio::time::timeout(
                    WITHDRAW_LIMIT,
                    withdraw(store, options, &event.tool_name, &sets),
                )
                .await;
                if !matches!(withdrawn, Ok(Ok(()))) {
                    tracing::error!(?sets, "could not withdraw what it queued");
                }
            }
            Ok(options.out_of_time())
        }
    }
}

/// Withdraws item 0 of each set in `sets` (a set never written, or already decided,
/// is left as it is).
async fn withdraw(
    store: &Store,
    options: &HookOptions,
    tool: &str,
    sets: &[Uuid],
) -> Result<(), HookError> {
    let engine = engine(store, options, tool).await?;
    let confirmations = engine.confirmations().by(format!("{}-hook", options.kind));
    for set in sets {
        let withdrawn = confirmations
            .withdraw_item(
                assent_confirm::ItemRef::new(*set, 0),
                "the hook ran out of time",
                OffsetDateTime::now_utc(),
            )
            .await;
        if let Err(error) = withdrawn {
            tracing::info!(change_set = %set, %error, "not withdrawn");
        }
    }
    Ok(())
}

/// What one turn of [`decide_within`] came to.
enum Turn {
    /// The answer.
    Answer(Answer),
    /// A person confirmed the item this call waited for, and another identical call
    /// took that confirmation: this one asks again, with an item of its own.
    Again,
}

/// [`decide`] without its time limit; the sets it queues are pushed on `queued`.
async fn decide_within(
    store: &Store,
    options: &HookOptions,
    event: &HookEvent,
    queued: &std::sync::Mutex<Vec<Uuid>>,
) -> Result<Answer, HookError> {
    loop {
        match turn(store, options, event, queued).await? {
            Turn::Answer(answer) => return Ok(answer),
            Turn::Again => {
                tracing::info!("another identical call took the confirmation: asking again");
            }
        }
    }
}

async fn turn(
    store: &Store,
    options: &HookOptions,
    event: &HookEvent,
    queued: &std::sync::Mutex<Vec<Uuid>>,
) -> Result<Turn, HookError> {
    let engine = engine(store, options, &event.tool_name).await?;
    crate::kind::record(store, &options.agent, options.kind).await?;
    let target = Target::new(TARGET_KIND, event.cwd.clone());
    if let Some(set) = released_to_retry(&engine, options, &target, event).await? {
        tracing::info!(change_set = %set, "a retry after a person confirmed: allowed once");
        return Ok(Turn::Answer(Answer::Allow {
            updated_input: None,
            reason: Some(confirmed(set, None)),
        }));
    }
    let run_key = run_key(event);
    if let Some(answer) =
        crate::session::granted(&engine, &options.agent, &target, event, &run_key).await?
    {
        return Ok(Turn::Answer(answer));
    }
    let call = ToolCall::new(
        event
            .tool_use_id
            .clone()
            .unwrap_or_else(|| "call-1".to_owned()),
        event.tool_name.clone(),
        ToolArguments::Value(event.tool_input.clone()),
    );
    let mut request = WakeRequest::new(
        options.agent.clone(),
        target.clone(),
        run_key.clone(),
        vec![call],
    );
    // The agents' own limit on a call's input (a large `Write`), not the other doors'
    // 64 KiB: the event itself is capped at `MAX_EVENT_BYTES`, and the item's summary
    // is cut for display (`summary.rs`).
    request.planner.max_args_bytes = crate::MAX_EVENT_BYTES;
    // The set names the coding agent's session, so a person can answer "yes, for this
    // session" (`assent_confirm::session_of`).
    if let Some(session) = &event.session_id {
        request.thread_id = assent_confirm::session_thread(session);
    }
    // Its set's id is known before the wake, so a hook stopped meanwhile withdraws it.
    let set_id = engine.new_id();
    request.change_set_id = Some(set_id);
    if let Ok(mut sets) = queued.lock() {
        sets.push(set_id);
    }
    let wake = engine
        .wakes()
        .wake(request, OffsetDateTime::now_utc())
        .await?;
    let said = wake
        .responses
        .first()
        .map(|r| r.content.clone())
        .unwrap_or_default();
    if let Some(set) = wake.change_set {
        tracing::info!(change_set = %set.id, "queued for a person");
        return wait_for(&engine, options, set.id, 0, deadline(options)).await;
    }
    if said == reply::DUPLICATE
        && let Some((set, index)) = waiting(&engine, options, &target, event).await?
    {
        tracing::info!(change_set = %set, "joined an identical call that waits");
        return wait_for(&engine, options, set, index, deadline(options)).await;
    }
    if said == ALLOWED {
        tracing::info!("allowed by the rules");
        return Ok(Turn::Answer(Answer::Allow {
            updated_input: None,
            reason: None,
        }));
    }
    // Anything else refused the call: a rule, the category, the arguments, a recent
    // rejection. Whatever it is, it is never an allow.
    tracing::info!(%said, "refused");
    if let Err(error) = record_refused(&engine, options, event, &run_key, &said).await {
        // The refusal stands whether or not it could be recorded.
        tracing::error!(%error, "the refusal could not be recorded");
    }
    let said = naming_the_rejection(&engine, options, &run_key, said).await;
    Ok(Turn::Answer(Answer::Deny { reason: said }))
}

/// `said`, for a call refused because a person rejected exactly it before, followed by
/// who rejected it and when (the wake's words name no person, and the model should
/// know a person decided, not a rule); `said` as it is for any other refusal, or when
/// the rejection cannot be read (the refusal stands either way).
async fn naming_the_rejection(
    engine: &Engine,
    options: &HookOptions,
    run_key: &str,
    said: String,
) -> String {
    // The wake that refused this call recorded it a moment ago.
    let since = OffsetDateTime::now_utc() - time::Duration::minutes(10);
    let refused = match engine.refused_again(Some(&options.agent), since, 50).await {
        Ok(refused) => refused,
        Err(error) => {
            tracing::warn!(%error, "the remembered rejection could not be read");
            return said;
        }
    };
    let Some(rejection) = refused
        .into_iter()
        .find(|refused| refused.record.run_key == run_key)
        .and_then(|refused| refused.rejection)
    else {
        return said;
    };
    // To the second, as people read it: the stored stamp's microseconds say nothing here.
    let at = rejection.created_at;
    let when = at
        .replace_nanosecond(0)
        .unwrap_or(at)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| assent_domain::format_time(at));
    format!(
        "{said} It was rejected by {} in Assent on {when}, so the call did not run; only the user can let it be asked again (`assent rejections forget`).",
        rejection.decided_by.as_deref().unwrap_or("a person"),
    )
}

/// Records a call the rules refused in the audit trail (a `policyDenied` record of the
/// call's run key, with the words the model was told), so `assent session show` and
/// `assent audit` show it: unless something (the engine's wake) already recorded this
/// run key.
async fn record_refused(
    engine: &Engine,
    options: &HookOptions,
    event: &HookEvent,
    run_key: &str,
    said: &str,
) -> Result<(), HookError> {
    let recorded = engine
        .admin()
        .audit_trail(
            &assent_confirm::history::AuditFilter::Run(run_key.to_owned()),
            1,
        )
        .await?;
    if !recorded.is_empty() {
        return Ok(());
    }
    let record = AuditRecord {
        operation_id: OperationId::derive(
            run_key,
            &event.tool_name,
            &event.tool_input,
            &[event.cwd.as_str()],
        ),
        run_key: run_key.to_owned(),
        tool_name: event.tool_name.clone(),
        agent_id: options.agent.clone(),
        target_kind: TARGET_KIND.to_owned(),
        target_id: event.cwd.clone(),
        kind: AuditKind::PolicyDenied,
        args: event.tool_input.clone(),
        success: Some(false),
        detail: Some(said.to_owned()),
        vector_clock: None,
        created_at: OffsetDateTime::now_utc(),
        allowed_by: None,
        refused_by: None,
        // The policy's refusals the wake recorded itself, with the rule: what is left
        // here is the arguments' or the wake's own.
        decided_by: Some(assent_confirm::why::refusal_decided_by(said)),
    };
    assent_confirm::history::record_agent_run(engine.store(), &record).await?;
    Ok(())
}

/// When the wait for a person ends: `--wait` after the hook's start, less the time
/// its answer needs, and never past its whole run.
fn deadline(options: &HookOptions) -> Instant {
    let limit = run_limit(options.wait).saturating_sub(ANSWER_MARGIN);
    options.started + options.wait.min(limit)
}

/// The run key of a call: `hook:SESSION:TOOL_USE_ID` when the agent names its call, so
/// the after event's audit record carries the same key as the decision's; otherwise a
/// fresh one, still under the session when the event names one (`hook:SESSION:UUID`),
/// so `assent session show` finds every call of the session.
fn run_key(event: &HookEvent) -> String {
    match (&event.tool_use_id, &event.session_id) {
        (Some(id), session) => format!("hook:{}:{id}", session.as_deref().unwrap_or("-")),
        (None, Some(session)) => format!("hook:{session}:{}", Uuid::new_v4()),
        (None, None) => format!("hook:{}", Uuid::new_v4()),
    }
}

/// How much of what a tool answered an after event's audit record keeps (its head and
/// its tail).
const RAN_DETAIL_CHARS: usize = 2_000;

/// Records an after event (`PostToolUse`, `afterShellExecution`, `AfterTool`) in the
/// audit trail through the engine ([`assent_confirm::history::record_agent_run`], one
/// transaction): a result record of the agent's run key (`run_key`, so it is linked
/// to the decision by `tool_use_id`), with what the tool answered and no `success`
/// (the agent ran it, not Assent). The agent must exist; its rules are not asked (the
/// call ran).
#[tracing::instrument(skip_all, fields(kind = %options.kind, agent = %options.agent, tool = %event.tool_name))]
pub async fn record_ran(
    store: &Store,
    options: &HookOptions,
    event: &HookEvent,
) -> Result<(), HookError> {
    let now = OffsetDateTime::now_utc();
    let run_key = run_key(event);
    let response = event.tool_response.clone().unwrap_or(Value::Null);
    let failed = response.get("is_error").and_then(Value::as_bool) == Some(true)
        || response.get("error").is_some_and(|e| !e.is_null());
    let shown = match &response {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let record = AuditRecord {
        operation_id: OperationId::derive(
            &run_key,
            &event.tool_name,
            &event.tool_input,
            &[event.cwd.as_str()],
        ),
        run_key,
        tool_name: event.tool_name.clone(),
        agent_id: options.agent.clone(),
        target_kind: TARGET_KIND.to_owned(),
        target_id: event.cwd.clone(),
        kind: AuditKind::Result,
        args: event.tool_input.clone(),
        // What the agent reports it ran, not an effect Assent ran: the effect the
        // proof (`audit verify`) checks is the permission this call got before it ran
        // (its own record, of the same run key), so this one leaves `success` unset.
        success: None,
        detail: Some(format!(
            "ran in {}{}: {}",
            options.kind,
            if failed { " (failed)" } else { "" },
            head_and_tail(&shown, RAN_DETAIL_CHARS)
        )),
        vector_clock: None,
        created_at: now,
        allowed_by: None,
        refused_by: None,
        decided_by: None,
    };
    assent_confirm::history::record_agent_run(store, &record).await?;
    tracing::info!("what ran is in the audit trail");
    Ok(())
}

/// The engine of the agent's hook host: every tool it has met so far and `tool`, each
/// deferred unless a rule says otherwise, with the same generic schema (any object),
/// summarised as the agents show them.
async fn engine(store: &Store, options: &HookOptions, tool: &str) -> Result<Engine, HookError> {
    let host_name = hook_host(&options.agent);
    let mut names: BTreeSet<String> = {
        let mut conn = store.read_connection().await?;
        agents::tools_for_host(&mut conn, &host_name)
            .await?
            .into_iter()
            .map(|tool| tool.tool_name)
            .collect()
    };
    names.insert(tool.to_owned());
    let mut registry = ToolRegistry::new();
    let mut host = SimpleHost::new(host_name);
    for name in names {
        registry.register(
            ToolSpec::new(
                name.clone(),
                "A tool of a coding agent, ruled on through its hook",
                ToolMode::Deferred,
                json!({"type": "object"}),
            )
            .with_summary(crate::summary::summary),
        )?;
        host = host.handle(name, allowed);
    }
    let category = options.category.clone();
    let host = host.category(move |_conn, _target| {
        let category = category.clone();
        Box::pin(async move { Ok(Some(category)) })
    });
    let host = crate::workspace::WorkspaceHost(host);
    Ok(Engine::open(store.clone(), Arc::new(registry), Arc::new(host)).await?)
}

/// The hook host's handler: the agent runs the call, Assent records that it may.
fn allowed<'a>(
    _conn: &'a mut Connection,
    _call: &'a ToolInvocation,
) -> BoxFuture<'a, Result<&'static str, HostError>> {
    Box::pin(async { Ok(ALLOWED) })
}

/// A retried call (`--on-timeout deny` told it to come back) whose identical item a
/// person confirmed since: its job, claimed by this call alone ([`Engine::run_job`]:
/// one claim wins), is the permission, handed out once; the set's id, or `None`.
async fn released_to_retry(
    engine: &Engine,
    options: &HookOptions,
    target: &Target,
    event: &HookEvent,
) -> Result<Option<Uuid>, HookError> {
    let approved = engine.approved_jobs(&options.agent, target).await?;
    let wanted = canonical_json(&event.tool_input);
    for job in approved {
        if job.tool_name != event.tool_name || canonical_json(&job.args) != wanted {
            continue;
        }
        let run = engine.run_job(job.id, OffsetDateTime::now_utc()).await?;
        if run.applied == 1 {
            return Ok(Some(job.change_set_id));
        }
    }
    Ok(None)
}

/// The open item of this agent on `target` with the event's tool and input (the one an
/// identical call is waiting for), as its set and index.
async fn waiting(
    engine: &Engine,
    options: &HookOptions,
    target: &Target,
    event: &HookEvent,
) -> Result<Option<(Uuid, usize)>, HookError> {
    let sets = engine
        .open_sets(
            &PendingFilter::all()
                .target(target.clone())
                .agent(options.agent.clone()),
        )
        .await?;
    let wanted = canonical_json(&event.tool_input);
    Ok(sets.iter().find_map(|set| {
        set.items
            .iter()
            .position(|item| {
                item.tool_name == event.tool_name
                    && matches!(
                        item.status,
                        ChangeItemStatus::Pending | ChangeItemStatus::Deferred
                    )
                    && canonical_json(&item.args) == wanted
            })
            .map(|index| (set.id, index))
    }))
}

/// Waits for a person's decision about item `index` of set `set` until `deadline`,
/// woken by the change feed. A confirmation is handed out once: only the waiter whose
/// claim of the item's job wins ([`Engine::run_job`]) is allowed; any other identical
/// call that waited for the same item asks again ([`Turn::Again`]).
async fn wait_for(
    engine: &Engine,
    options: &HookOptions,
    set: Uuid,
    index: usize,
    deadline: Instant,
) -> Result<Turn, HookError> {
    {
        // For reviewers' screens only ("the agent waits 42 s more").
        let left = deadline.saturating_duration_since(Instant::now());
        let until = OffsetDateTime::now_utc() + left;
        // Whether the hook withdraws the item itself when its wait ends (handing the call
        // to the agent's prompt): a confirmation after that finds nobody to take it.
        let withdraws = options.on_timeout == OnTimeout::Ask && options.kind.can_ask();
        engine.record_wait_ending(set, until, withdraws).await?;
    }
    let answer = |answer| Ok(Turn::Answer(answer));
    let confirmations = engine.confirmations();
    // Whether this call's claim of the item's job won: the permission is its own.
    let mut claimed = false;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let outcome = confirmations
            .wait_outcome(set, remaining.min(WAIT_SLICE))
            .await?;
        let Some(item) = outcome.items.get(index) else {
            return answer(Answer::Deny {
                reason: format!(
                    "Assent refused the call: change set {set}, which this call waited for, has no item {index}, so nobody could decide it"
                ),
            });
        };
        let edited = item.decision.as_ref().and_then(|d| d.edited_args.clone());
        let reason = item.decision.as_ref().and_then(|d| d.reason.clone());
        match item.status {
            ChangeItemStatus::Pending | ChangeItemStatus::Deferred => {
                // A held confirmation: its job waits out the window with the item still
                // open; claimed here once due.
                if let Some(run) = item
                    .run
                    .as_ref()
                    .filter(|run| run.status == JobStatus::Approved)
                {
                    if remaining.is_zero() {
                        let by = decider(engine, set, index).await;
                        return answer(Answer::Deny {
                            reason: format!(
                                "{}, but the agent's rules hold it until its window ends, so it did not run yet; retry the same call then",
                                confirmed(set, by.as_deref())
                            ),
                        });
                    }
                    let run = engine
                        .run_job(run.job_id, OffsetDateTime::now_utc())
                        .await?;
                    claimed |= run.applied == 1;
                    continue;
                }
                if remaining.is_zero() {
                    return timed_out(engine, options, set, index).await;
                }
            }
            ChangeItemStatus::Rejected => {
                tracing::info!(change_set = %set, "rejected by a person");
                let by = decider(engine, set, index).await;
                return answer(Answer::Deny {
                    reason: format!(
                        "{} ({} in Assent, change set {set}; the call did not run)",
                        reply::waited_rejected(reason.as_deref()),
                        by.map_or_else(|| "rejected".to_owned(), |by| format!("rejected by {by}"))
                    ),
                });
            }
            // Another identical call waited too and handed it to the agent's prompt.
            ChangeItemStatus::Retracted
                if reason.as_deref() == Some(ANSWERED_IN_CLIENT) && options.kind.can_ask() =>
            {
                return answer(Answer::Ask {
                    reason: handed_to_prompt(&format!("in time (change set {set})")),
                });
            }
            ChangeItemStatus::Retracted => {
                return answer(Answer::Deny {
                    reason: format!(
                        "The call was withdrawn in Assent before anyone decided it (change set {set}: {}), so it did not run",
                        reason
                            .as_deref()
                            .unwrap_or(assent_changeset::reply::NO_REASON)
                    ),
                });
            }
            ChangeItemStatus::Confirmed => {
                let status = item.run.as_ref().map(|run| run.status);
                match status {
                    Some(JobStatus::Applied) if claimed => {
                        tracing::info!(change_set = %set, edited = edited.is_some(), "confirmed by a person");
                        // The reason of an allow is shown to a person, never to the model
                        // (kept as it was); the model is told of an edit, naming who
                        // made it (`answer.rs`).
                        let reason = match &edited {
                            Some(_) => confirmed(set, decider(engine, set, index).await.as_deref()),
                            None => confirmed(set, None),
                        };
                        return answer(Answer::Allow {
                            updated_input: edited,
                            reason: Some(reason),
                        });
                    }
                    // Handed out to another call (an identical one that waited too, or
                    // a retry): not this call's permission. It asks again while it may
                    // still wait.
                    Some(JobStatus::Applied) if !remaining.is_zero() => {
                        return Ok(Turn::Again);
                    }
                    // Or confirmed with no job to claim (not how a hook's call is
                    // confirmed): nothing to hand out, so never an allow.
                    Some(JobStatus::Applied) | None => {
                        return answer(Answer::Deny {
                            reason: format!(
                                "A person confirmed one identical call (change set {set}), and another identical call that waited for it took that confirmation, so this call did not run; retry it to ask for it"
                            ),
                        });
                    }
                    Some(JobStatus::Approved | JobStatus::Running) if remaining.is_zero() => {
                        let by = decider(engine, set, index).await;
                        return answer(Answer::Deny {
                            reason: format!(
                                "{}, but not released yet (the agent's rules hold it for a window), so it did not run yet; retry the same call later",
                                confirmed(set, by.as_deref())
                            ),
                        });
                    }
                    Some(JobStatus::Approved | JobStatus::Running) => {
                        if let Some(run) = &item.run {
                            let run = engine
                                .run_job(run.job_id, OffsetDateTime::now_utc())
                                .await?;
                            claimed |= run.applied == 1;
                        }
                    }
                    // Failed, in doubt, retracted, or a status this hook has no words
                    // for yet: not allowed (fail closed).
                    Some(_) => {
                        let error = item.run.as_ref().and_then(|run| run.last_error.clone());
                        return answer(Answer::Deny {
                            reason: reply::waited_failed(error.as_deref()),
                        });
                    }
                }
            }
            // A status this hook has no words for yet: never an allow (fail closed).
            other => {
                return answer(Answer::Deny {
                    reason: format!(
                        "Assent refused the call: change set {set} is {other}, which this hook cannot act on, so the call did not run"
                    ),
                });
            }
        }
    }
}

/// Nobody decided in time: the agent's own prompt takes over (the item withdrawn,
/// "answered in the client"), or the call is denied naming the set.
async fn timed_out(
    engine: &Engine,
    options: &HookOptions,
    set: Uuid,
    index: usize,
) -> Result<Turn, HookError> {
    let waited = options.wait.as_secs();
    if options.on_timeout == OnTimeout::Ask && options.kind.can_ask() {
        let withdrawn = engine
            .confirmations()
            .by(format!("{}-client", options.kind))
            .withdraw_item(
                assent_confirm::ItemRef::new(set, index),
                ANSWERED_IN_CLIENT,
                OffsetDateTime::now_utc(),
            )
            .await;
        match withdrawn {
            Ok(_) => {
                tracing::info!(change_set = %set, "nobody answered: handed to the agent's prompt");
                return Ok(Turn::Answer(Answer::Ask {
                    reason: handed_to_prompt(&format!("within {waited} s (change set {set})")),
                }));
            }
            // Decided at the last moment: the decision stands.
            Err(assent_confirm::ConfirmError::Conflict { .. }) => {
                return Box::pin(wait_for(engine, options, set, index, Instant::now())).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
    tracing::info!(change_set = %set, "nobody answered: denied for now");
    Ok(Turn::Answer(Answer::Deny {
        reason: format!(
            "Waiting for a person's review in Assent (change set {set}); retry the same call after the person confirms it"
        ),
    }))
}

/// Why a call nobody answered in Assent goes to the agent's own permission prompt
/// (`--on-timeout ask`), `when` saying how long it waited. Read by a person at the
/// prompt, and by the model where there is none (a headless run such as `claude -p`
/// turns the ask into a denial): what happened, and what the model may do next.
fn handed_to_prompt(when: &str) -> String {
    format!(
        "Nobody answered this call in Assent {when}, so Assent withdrew it and handed it to the agent's own permission prompt. If the call was refused there (or no person is at this session, as in a headless run), it did not run: do not retry it unchanged; tell the user it needs their approval in Assent (`assent review`) or a rule that allows it"
    )
}

/// `Confirmed by PERSON in Assent (change set SET)`: who allowed a call a person
/// confirmed (the person's name left out when the decision names none).
fn confirmed(set: Uuid, by: Option<&str>) -> String {
    match by {
        Some(by) => format!("Confirmed by {by} in Assent (change set {set})"),
        None => format!("Confirmed in Assent (change set {set})"),
    }
}

/// Who made the latest decision about item `index` of set `set`, when it names anyone:
/// the words to the model say which person decided. A failed read names nobody (the
/// decision itself stands).
async fn decider(engine: &Engine, set: Uuid, index: usize) -> Option<String> {
    let decisions = engine.decisions_of(set).await.ok()?;
    decisions
        .into_iter()
        .rev()
        .find(|decision| decision.item_index == index)
        .and_then(|decision| decision.decided_by)
}
