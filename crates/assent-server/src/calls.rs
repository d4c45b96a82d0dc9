//! Client-executed calls (`POST /api/calls`, `POST /api/wakes` with `"executedBy":
//! "client"`): the hook door's model over HTTP, for Python and TypeScript agents that
//! run their tools themselves. Assent decides (the rules at once, or a person from any
//! door), the client awaits the decision (`GET …/items/{i}/decision`, a long poll or
//! server-sent events), runs the tool with the arguments that were approved, and
//! reports the run (`POST …/items/{i}/ran`, or `POST /api/calls/{runKey}/ran` for a call
//! the rules allowed at once), which enters the consent chain as a hook's after event
//! does.
//!
//! Every client application has a host of its own, named after its agent
//! ([`client_host`]): its tools are the names it proposed so far, each deferred unless
//! a rule says otherwise, and its handler runs nothing: it records that the client may
//! run the call ([`CLIENT_ALLOWED`]). A confirmed call becomes a job of that host,
//! claimed once, by the report of its run: one approval, one accepted report. A report
//! of another item, of an item not approved, or with other arguments than approved is
//! refused (409) and the refusal recorded.
//!
//! The contract is written down in `docs/guide/from-python-and-typescript.md`.

use crate::api::{ApiResult, Body, Params, TargetParams, now, ok, parse_index, parse_set_id};
use crate::auth::Principal;
use crate::events::ServerEvent;
use crate::shapes::WakeWithMessages;
use crate::{AppState, ServerError, tools};
use assent_changeset::{CallReply, ToolArguments, ToolCall, exact_reply_messages, reply};
use assent_confirm::records::JobStatus;
use assent_confirm::{Engine, HostError, SimpleHost, WakeRequest, agents};
use assent_confirm::{ItemOutcome, SetOutcome};
use assent_domain::{
    ChangeItemStatus, ChangeSet, OperationId, Target, Uuid, canonical_json, head_and_tail,
};
use assent_store::{Connection, Store};
use assent_tools::{
    AuditKind, AuditRecord, BoxFuture, ToolInvocation, ToolMode, ToolRegistry, ToolSpec,
};
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The kind of a client-executed call's target (its id is the request's `target`).
pub(crate) const CLIENT_TARGET_KIND: &str = "client";

/// The category of every client target, checked against the agent's allowlist
/// (`assent agent create --id shop --categories client`): the client names its targets,
/// so a category it could choose would guard nothing.
pub(crate) const CLIENT_CATEGORY: &str = "client";

/// What a client host's handler records for a call it lets the client run.
pub(crate) const CLIENT_ALLOWED: &str = "Allowed: the client application runs the call itself.";

/// The target of a call that names none.
const DEFAULT_TARGET: &str = "default";

/// How a report of a run begins in the audit trail (`detail`).
const RAN: &str = "ran in the client";

/// How much of what a tool answered the report's record keeps (its head and tail).
const RAN_DETAIL_CHARS: usize = 2_000;

/// How long one look at an awaited item lasts: a confirmation leaves the set unsettled
/// (its job waits for the report), so the long poll looks again this often.
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// The longest `?wait=` of the decision's long poll, in seconds.
const MAX_WAIT_SECS: u64 = 60;

/// The host of agent `agent`'s client application: `client_` and the agent's name,
/// ASCII letters and digits kept, `_` doubled, any other character as `_`, its code
/// point in hex, `_` (so two agents never share a host, nor claim each other's jobs).
pub(crate) fn client_host(agent: &str) -> String {
    let mut out = String::from("client_");
    for c in agent.chars() {
        match c {
            '_' => out.push_str("__"),
            c if c.is_ascii_alphanumeric() => out.push(c),
            c => out.push_str(&format!("_{:x}_", u32::from(c))),
        }
    }
    out
}

/// The engine of agent `agent`'s client host on `store`: every tool it has met so far
/// and `tool`, each deferred unless a rule says otherwise, any object as arguments.
async fn client_engine(store: &Store, agent: &str, tool: &str) -> Result<Engine, ServerError> {
    let host_name = client_host(agent);
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
        registry
            .register(ToolSpec::new(
                name.clone(),
                "A tool of a client application, run by the client once allowed",
                ToolMode::Deferred,
                json!({"type": "object"}),
            ))
            .map_err(|e| ServerError::BadRequest(format!("tool {name:?}: {e}")))?;
        host = host.handle(name, allowed);
    }
    let host =
        host.category(|_conn, _target| Box::pin(async { Ok(Some(CLIENT_CATEGORY.to_owned())) }));
    Ok(Engine::open(store.clone(), Arc::new(registry), Arc::new(host)).await?)
}

/// The client host's handler: the client runs the call, Assent records that it may.
fn allowed<'a>(
    _conn: &'a mut Connection,
    _call: &'a ToolInvocation,
) -> BoxFuture<'a, Result<&'static str, HostError>> {
    Box::pin(async { Ok(CLIENT_ALLOWED) })
}

/// The id of the set a call of agent `agent` with the framework's id `tool_call_id`
/// is queued in: the same call proposed again (a LangGraph node re-run on resume, the
/// AI SDK asking `needsApproval` again) finds its set and gets the same answer.
fn set_id_of(agent: &str, tool_call_id: &str) -> Uuid {
    let hash = OperationId::derive(
        "client-call",
        agent,
        &Value::String(tool_call_id.to_owned()),
        &[] as &[&str],
    );
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hash.as_str()[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// A path segment with every byte but the unreserved ones percent-encoded.
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What Assent decided about one client-executed call (the contract's decision).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Decision {
    /// `run`, `ask` or `deny`.
    decision: &'static str,
    /// Which rule or person decided, in words for a person.
    why: String,
    tool: String,
    /// The arguments to run with (a person's edit when `edited`).
    args: Value,
    edited: bool,
    /// Why not, for a denial.
    reason: Option<String>,
    decided_by: Option<String>,
    tool_call_id: String,
    run_key: String,
    change_set_id: Option<Uuid>,
    item: Option<usize>,
    revision: Option<u32>,
    ran_url: Option<String>,
    outcome_url: Option<String>,
    waits_until: Option<String>,
    /// The run was reported already.
    reported: bool,
    /// The reply for the model (a denial's or a wait's words).
    message: String,
}

/// `why` for a call the rules let run: the allowing rule's pattern, or the tool's mode.
fn allowed_why(agent: &str, tool: &str, allowed_by: Option<&Value>) -> String {
    match allowed_by {
        Some(by) => match by.get("rule").and_then(|rule| rule.get("pattern")) {
            Some(Value::String(pattern)) => {
                format!("the rule of agent {agent} for {pattern}: allow")
            }
            _ => format!("the rules of agent {agent} let {tool} run ({by})"),
        },
        None => format!("the rules of agent {agent} let {tool} run"),
    }
}

/// The decision about item `index` of `set` as `outcome` shows it.
async fn from_item(
    engine: &Engine,
    set: &ChangeSet,
    outcome: &SetOutcome,
    index: usize,
    tool_call_id: &str,
) -> Result<Decision, ServerError> {
    let (Some(item), Some(shown)) = (set.items.get(index), outcome.items.get(index)) else {
        return Err(ServerError::NotFound(format!(
            "change set {} has no item {index}",
            set.id
        )));
    };
    let base = format!("/api/change-sets/{}/items/{index}", set.id);
    let edited = shown.decision.as_ref().and_then(|d| d.edited_args.clone());
    let decided_by = if matches!(shown.status, ChangeItemStatus::Pending) {
        None
    } else {
        decider(engine, set.id, index).await
    };
    let mut decision = Decision {
        decision: "ask",
        why: format!(
            "waiting for a person: the rules of agent {} ask for {}",
            set.agent_id, item.tool_name
        ),
        tool: item.tool_name.clone(),
        args: edited.clone().unwrap_or_else(|| item.args.clone()),
        edited: edited.is_some(),
        reason: None,
        decided_by: decided_by.clone(),
        tool_call_id: tool_call_id.to_owned(),
        run_key: set.run_key.clone(),
        change_set_id: Some(set.id),
        item: Some(index),
        revision: Some(item.revision),
        ran_url: Some(format!("{base}/ran")),
        outcome_url: Some(format!("{base}/decision")),
        waits_until: None,
        reported: false,
        message: reply::QUEUED.to_owned(),
    };
    let by = decided_by.as_deref().unwrap_or("a person");
    let deny = |decision: &mut Decision, reason: String, why: String| {
        decision.decision = "deny";
        decision.message = reason.clone();
        decision.reason = Some(reason);
        decision.why = why;
        decision.ran_url = None;
    };
    match shown.status {
        ChangeItemStatus::Confirmed => match shown.run.as_ref().map(|run| run.status) {
            Some(JobStatus::Approved | JobStatus::Running | JobStatus::Applied) => {
                decision.decision = "run";
                decision.reported = shown
                    .run
                    .as_ref()
                    .is_some_and(|run| run.status == JobStatus::Applied);
                decision.why = if decision.edited {
                    format!("confirmed by {by}, with edited arguments")
                } else {
                    format!("confirmed by {by}")
                };
                decision.message = format!("Confirmed by {by} in Assent (change set {})", set.id);
            }
            other => {
                let error = shown.run.as_ref().and_then(|run| run.last_error.clone());
                deny(
                    &mut decision,
                    reply::waited_failed(error.as_deref()),
                    format!("confirmed by {by}, but its permission is {other:?}"),
                );
            }
        },
        ChangeItemStatus::Rejected => {
            let reason = shown
                .decision
                .as_ref()
                .and_then(|d| d.reason.clone())
                .unwrap_or_else(|| reply::NO_REASON.to_owned());
            decision.message = reply::waited_rejected(Some(&reason));
            deny(&mut decision, reason, format!("rejected by {by}"));
            decision.message = reply::waited_rejected(decision.reason.as_deref());
        }
        ChangeItemStatus::Retracted => {
            let reason = shown
                .decision
                .as_ref()
                .and_then(|d| d.reason.clone())
                .unwrap_or_else(|| reply::NO_REASON.to_owned());
            deny(
                &mut decision,
                format!("withdrawn before anyone decided it: {reason}"),
                "withdrawn".to_owned(),
            );
        }
        ChangeItemStatus::Pending | ChangeItemStatus::Deferred => {}
        other => deny(
            &mut decision,
            format!("the call is {other}, which a client cannot act on"),
            format!("the call is {other}"),
        ),
    }
    Ok(decision)
}

/// Who made the latest decision about item `index` of set `set`, when it names anyone.
async fn decider(engine: &Engine, set: Uuid, index: usize) -> Option<String> {
    let decisions = engine.decisions_of(set).await.ok()?;
    decisions
        .into_iter()
        .rev()
        .find(|decision| decision.item_index == index)
        .and_then(|decision| decision.decided_by)
}

/// The audit record that let the call of `run_key` run at once (the client host's
/// handler's result), if any.
async fn allowed_record(
    engine: &Engine,
    run_key: &str,
) -> Result<(Option<AuditRecord>, bool), ServerError> {
    let records = engine
        .admin()
        .audit_trail(
            &assent_confirm::history::AuditFilter::Run(run_key.to_owned()),
            50,
        )
        .await?;
    let reported = records.iter().any(is_report);
    let allowed = records.into_iter().find(|record| {
        record.kind == AuditKind::Result
            && record.success == Some(true)
            && record.detail.as_deref() == Some(CLIENT_ALLOWED)
            // Unasked: a confirmed item's job writes the same result, without it.
            && record.allowed_by.is_some()
    });
    Ok((allowed, reported))
}

fn is_report(record: &AuditRecord) -> bool {
    record.kind == AuditKind::Result
        && record.success.is_none()
        && record
            .detail
            .as_deref()
            .is_some_and(|detail| detail.starts_with(RAN))
}

/// The decision about a call the rules allowed at once, from its record.
fn from_allowed(record: &AuditRecord, tool_call_id: &str, reported: bool) -> Decision {
    Decision {
        decision: "run",
        why: allowed_why(
            &record.agent_id,
            &record.tool_name,
            record.allowed_by.as_ref(),
        ),
        tool: record.tool_name.clone(),
        args: record.args.clone(),
        edited: false,
        reason: None,
        decided_by: None,
        tool_call_id: tool_call_id.to_owned(),
        run_key: record.run_key.clone(),
        change_set_id: None,
        item: None,
        revision: None,
        ran_url: Some(format!("/api/calls/{}/ran", path_segment(&record.run_key))),
        outcome_url: None,
        waits_until: None,
        reported,
        message: CLIENT_ALLOWED.to_owned(),
    }
}

/// Proposes `call` of agent `agent` on client target `target`: the same decision when
/// the call (by the framework's id) was proposed before, otherwise the rules' answer
/// from a wake of the agent's client host (a queued call's set published).
async fn propose_one(
    state: &AppState,
    agent: &str,
    target: &str,
    call: ToolCall,
) -> Result<Decision, ServerError> {
    let tool = call.name.trim().to_owned();
    if tool.is_empty() {
        return Err(ServerError::BadRequest("tool must not be empty".to_owned()));
    }
    let fresh = call.id.trim().is_empty();
    let tool_call_id = if fresh {
        Uuid::new_v4().to_string()
    } else {
        call.id.clone()
    };
    let run_key = format!("client:{agent}:{tool_call_id}");
    let set_id = set_id_of(agent, &tool_call_id);
    let args = match &call.arguments {
        ToolArguments::Value(value) => value.clone(),
        ToolArguments::Text(text) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        // A shape this door has no reading of: the wake refuses it, the record keeps none.
        _ => Value::Null,
    };
    let engine = client_engine(state.engine.store(), agent, &tool).await?;
    // The same call again: the same answer. Another call under the same id: refused, so
    // that one decision never covers two calls.
    let same = |name: &str, proposed: &Value| {
        name == tool && canonical_json(proposed) == canonical_json(&args)
    };
    if let Some(set) = engine.change_set(set_id).await? {
        if set.agent_id != agent
            || !set
                .items
                .first()
                .is_some_and(|i| same(&i.tool_name, &i.args))
        {
            return Err(ServerError::Conflict(format!(
                "toolCallId {tool_call_id:?} already names another call of agent {agent:?}"
            )));
        }
        let outcome = engine.confirmations().outcome(set_id).await?;
        return from_item(&engine, &set, &outcome, 0, &tool_call_id).await;
    }
    if let (Some(record), reported) = allowed_record(&engine, &run_key).await? {
        if record.agent_id != agent || !same(&record.tool_name, &record.args) {
            return Err(ServerError::Conflict(format!(
                "toolCallId {tool_call_id:?} already names another call of agent {agent:?}"
            )));
        }
        return Ok(from_allowed(&record, &tool_call_id, reported));
    }
    let call = ToolCall::new(tool_call_id.clone(), tool.clone(), call.arguments);
    let mut request = WakeRequest::new(
        agent.to_owned(),
        Target::new(CLIENT_TARGET_KIND, target),
        run_key.clone(),
        vec![call],
    );
    request.change_set_id = Some(set_id);
    let wake = engine.wakes().wake(request, now()).await?;
    if let Some(set) = wake.change_set {
        state.events.publish(ServerEvent::created(&set));
        let outcome = engine.confirmations().outcome(set.id).await?;
        return from_item(&engine, &set, &outcome, 0, &tool_call_id).await;
    }
    let said = wake
        .responses
        .first()
        .map(|r| r.content.clone())
        .unwrap_or_default();
    if said == CLIENT_ALLOWED
        && let (Some(record), reported) = allowed_record(&engine, &run_key).await?
    {
        return Ok(from_allowed(&record, &tool_call_id, reported));
    }
    // Anything else refused the call (a rule, the category, the arguments, a recent
    // rejection, an identical call waiting): never a run.
    let record = AuditRecord {
        operation_id: OperationId::derive(&run_key, &tool, &args, &[target]),
        run_key: run_key.clone(),
        tool_name: tool.clone(),
        agent_id: agent.to_owned(),
        target_kind: CLIENT_TARGET_KIND.to_owned(),
        target_id: target.to_owned(),
        kind: AuditKind::PolicyDenied,
        args: args.clone(),
        success: Some(false),
        detail: Some(said.clone()),
        vector_clock: None,
        created_at: now(),
        allowed_by: None,
        refused_by: None,
        // Written only when the wake recorded nothing (it records the policy's
        // refusals, with the rule): the arguments' refusal or the wake's own.
        decided_by: Some(assent_confirm::why::refusal_decided_by(&said)),
    };
    let recorded = engine
        .admin()
        .audit_trail(
            &assent_confirm::history::AuditFilter::Run(run_key.clone()),
            1,
        )
        .await?;
    if recorded.is_empty()
        && let Err(error) =
            assent_confirm::history::record_agent_run(state.engine.store(), &record).await
    {
        // The refusal stands whether or not it could be recorded.
        tracing::error!(%error, "the refusal could not be recorded");
    }
    Ok(Decision {
        decision: "deny",
        why: format!("the rules of agent {agent} refuse {tool}"),
        tool,
        args,
        edited: false,
        reason: Some(said.clone()),
        decided_by: None,
        tool_call_id,
        run_key,
        change_set_id: None,
        item: None,
        revision: None,
        ran_url: None,
        outcome_url: None,
        waits_until: None,
        reported: false,
        message: said,
    })
}

/// `POST /api/calls`: one call the client runs itself (the contract's body).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CallBody {
    tool: String,
    args: Value,
    target: Option<String>,
    tool_call_id: Option<String>,
    executed_by: Option<String>,
    dialect: Option<String>,
    agent_id: Option<String>,
}

/// `executedBy` must say `client` when given: no other executor is offered here.
pub(crate) fn check_executed_by(executed_by: Option<&str>) -> Result<(), ServerError> {
    match executed_by {
        None | Some("client") => Ok(()),
        Some(other) => Err(ServerError::BadRequest(format!(
            "executedBy {other:?}: expected \"client\""
        ))),
    }
}

/// The agent a client request acts for: the token's own, or `agentId` for a
/// reviewer's or admin's token.
fn agent_of(caller: &Principal, asked: Option<String>) -> Result<String, ServerError> {
    caller
        .scope_agent(asked.filter(|a| !a.trim().is_empty()))?
        .map(|agent| agent.trim().to_owned())
        .ok_or_else(|| ServerError::BadRequest("agentId is required".to_owned()))
}

fn target_of(target: Option<String>) -> Result<String, ServerError> {
    let target = target.unwrap_or_else(|| DEFAULT_TARGET.to_owned());
    let target = target.trim();
    if target.is_empty() {
        return Err(ServerError::BadRequest(
            "target must not be empty".to_owned(),
        ));
    }
    Ok(target.to_owned())
}

pub(crate) async fn propose(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    body: Body<CallBody>,
) -> ApiResult {
    let axum::Json(body) = body?;
    check_executed_by(body.executed_by.as_deref())?;
    // Validated, though a single call's reply is one text in every dialect.
    tools::dialect(body.dialect.as_deref(), "dialect")?;
    let agent = agent_of(&caller, body.agent_id)?;
    if !body.args.is_object() {
        return Err(ServerError::BadRequest(
            "args must be a JSON object".to_owned(),
        ));
    }
    let target = target_of(body.target)?;
    let call = ToolCall::new(
        body.tool_call_id.unwrap_or_default(),
        body.tool,
        ToolArguments::Value(body.args),
    );
    ok(propose_one(&state, &agent, &target, call).await?)
}

/// `POST /api/wakes` with `"executedBy": "client"`: each call of the turn proposed as
/// by `POST /api/calls` on the target's id, answered with the wake's `messages` in the
/// SDK's dialect and `calls`, one decision each.
pub(crate) async fn client_wake(
    state: &AppState,
    agent: &str,
    target: &TargetParams,
    parsed: &assent_changeset::ParsedCalls,
    reply_format: Option<assent_changeset::Dialect>,
) -> ApiResult {
    let target = target.target()?.map(|t| t.id);
    let target = target_of(target)?;
    let mut decisions = Vec::with_capacity(parsed.calls.len());
    for call in &parsed.calls {
        decisions.push(propose_one(state, agent, &target, call.clone()).await?);
    }
    let replies: Vec<CallReply<'_>> = parsed
        .calls
        .iter()
        .zip(&decisions)
        .map(|(call, decision)| CallReply {
            tool_call_id: &call.id,
            content: &decision.message,
        })
        .collect();
    let format = reply_format.unwrap_or(parsed.dialect);
    let messages = exact_reply_messages(parsed, format, &replies)
        .map_err(|e| ServerError::Internal(format!("the replies do not answer the calls: {e}")))?;
    let sets: Vec<Uuid> = decisions.iter().filter_map(|d| d.change_set_id).collect();
    let body = json!({
        "executedBy": "client",
        "changeSetIds": sets,
        "calls": decisions,
    });
    ok(WakeWithMessages::new(body, messages))
}

/// `?wait=SECS`.
#[derive(Debug, Deserialize)]
pub(crate) struct WaitQuery {
    wait: Option<String>,
}

fn parse_wait(text: Option<&str>) -> Result<Duration, ServerError> {
    let Some(text) = text else {
        return Ok(Duration::ZERO);
    };
    match text.trim().parse::<u64>() {
        Ok(secs @ 0..=MAX_WAIT_SECS) => Ok(Duration::from_secs(secs)),
        _ => Err(ServerError::BadRequest(format!(
            "invalid wait {text:?}: expected 0 to {MAX_WAIT_SECS} seconds"
        ))),
    }
}

/// The set and item a path names, checked against the caller, with the engine of the
/// set's agent's client host.
async fn item_of(
    state: &AppState,
    caller: &Principal,
    id: &str,
    index: &str,
) -> Result<(Engine, ChangeSet, usize), ServerError> {
    let id = parse_set_id(id)?;
    let index = parse_index(index)?;
    let set = state
        .engine
        .change_set(id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("no change set {id}")))?;
    caller.may_act_for(&set.agent_id)?;
    let item = set
        .items
        .get(index)
        .ok_or_else(|| ServerError::NotFound(format!("change set {id} has no item {index}")))?;
    let engine = client_engine(state.engine.store(), &set.agent_id, &item.tool_name).await?;
    Ok((engine, set, index))
}

/// The framework's id of item `index`'s call: the end of the set's run key.
fn tool_call_id_of(set: &ChangeSet) -> String {
    let prefix = format!("client:{}:", set.agent_id);
    set.run_key
        .strip_prefix(&prefix)
        .unwrap_or(&set.run_key)
        .to_owned()
}

/// The decision about item `index` of `set` once decided, or as it stands at
/// `deadline`.
async fn await_decision(
    engine: &Engine,
    set: &ChangeSet,
    index: usize,
    deadline: Option<Instant>,
) -> Result<Decision, ServerError> {
    let confirmations = engine.confirmations();
    let tool_call_id = tool_call_id_of(set);
    loop {
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let outcome = match remaining {
            Some(left) if left.is_zero() => confirmations.outcome(set.id).await?,
            Some(left) => {
                confirmations
                    .wait_outcome(set.id, left.min(WAIT_SLICE))
                    .await?
            }
            None => confirmations.wait_outcome(set.id, WAIT_SLICE).await?,
        };
        let shown: Option<&ItemOutcome> = outcome.items.get(index);
        let decided = shown.is_some_and(|item| {
            !matches!(
                item.status,
                ChangeItemStatus::Pending | ChangeItemStatus::Deferred
            )
        });
        if decided || remaining.is_some_and(|left| left.is_zero()) {
            let fresh = engine
                .change_set(set.id)
                .await?
                .unwrap_or_else(|| set.clone());
            return from_item(engine, &fresh, &outcome, index, &tool_call_id).await;
        }
    }
}

/// `GET /api/change-sets/{id}/items/{index}/decision?wait=SECS`: the decision about a
/// client-executed call, at once, when decided (a long poll of at most `SECS`), or as
/// server-sent events (`Accept: text/event-stream`): one `decision` event once a person
/// decided, then the end.
pub(crate) async fn show_decision(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Params<WaitQuery>,
) -> ApiResult {
    let Path((id, index)) = path?;
    let Query(query) = query?;
    let wait = parse_wait(query.wait.as_deref())?;
    let (engine, set, index) = item_of(&state, &caller, &id, &index).await?;
    let streams = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !streams {
        let deadline = Instant::now() + wait;
        return ok(await_decision(&engine, &set, index, Some(deadline)).await?);
    }
    let events = state.events.clone();
    let stream = futures_util::stream::once(async move {
        let decided = tokio::select! {
            decided = await_decision(&engine, &set, index, None) => decided,
            () = events.closed() => {
                return Ok::<Event, Infallible>(Event::default().event("closed").data("{}"));
            }
        };
        let event = match decided {
            Ok(decision) => Event::default()
                .event("decision")
                .json_data(&decision)
                .unwrap_or_else(|_| Event::default().event("error").data("{}")),
            Err(error) => Event::default()
                .event("error")
                .json_data(json!({"detail": error.to_string()}))
                .unwrap_or_else(|_| Event::default().event("error").data("{}")),
        };
        Ok(event)
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// `POST …/ran {args, ok, result | error}`: what the client ran, and how it went.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RanBody {
    args: Value,
    ok: bool,
    result: Option<Value>,
    error: Option<String>,
}

impl RanBody {
    /// The report's audit detail: `ran in the client: RESULT` or `… (failed): ERROR`.
    fn detail(&self) -> String {
        let shown = if self.ok {
            match &self.result {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            }
        } else {
            self.error.clone().unwrap_or_default()
        };
        format!(
            "{RAN}{}: {}",
            if self.ok { "" } else { " (failed)" },
            head_and_tail(&shown, RAN_DETAIL_CHARS)
        )
    }
}

/// What a report is about, for its record.
struct Reported<'a> {
    run_key: &'a str,
    operation_id: OperationId,
    tool: &'a str,
    agent: &'a str,
    target: Target,
}

/// Appends `body` as the report of a run (a result record of the call's run key, no
/// `success`: the client ran it, the proof checks the permission it got), or as a
/// refused report (`refused`, a policy-denied record) in the consent chain.
async fn record_report(
    state: &AppState,
    about: &Reported<'_>,
    body: &RanBody,
    refused: Option<&str>,
) -> Result<(), ServerError> {
    let record = AuditRecord {
        operation_id: about.operation_id.clone(),
        run_key: about.run_key.to_owned(),
        tool_name: about.tool.to_owned(),
        agent_id: about.agent.to_owned(),
        target_kind: about.target.kind.clone(),
        target_id: about.target.id.clone(),
        kind: if refused.is_some() {
            AuditKind::PolicyDenied
        } else {
            AuditKind::Result
        },
        args: body.args.clone(),
        success: refused.map(|_| false),
        detail: Some(match refused {
            Some(why) => format!("a report of a client run refused: {why}"),
            None => body.detail(),
        }),
        vector_clock: None,
        created_at: now(),
        allowed_by: None,
        refused_by: None,
        // A refused report: no approval or rule covers the run it reports.
        decided_by: refused.map(|why| serde_json::json!({ "approval": why })),
    };
    assent_confirm::history::record_agent_run(state.engine.store(), &record).await?;
    Ok(())
}

/// Refuses a report with 409 after recording the refusal.
async fn refuse(state: &AppState, about: &Reported<'_>, body: &RanBody, why: String) -> ApiResult {
    tracing::warn!(run_key = about.run_key, %why, "a report of a client run refused");
    if let Err(error) = record_report(state, about, body, Some(&why)).await {
        tracing::error!(%error, "the refused report could not be recorded");
    }
    Err(ServerError::Conflict(why))
}

fn check_ran_body(body: &RanBody) -> Result<(), ServerError> {
    if !body.args.is_object() {
        return Err(ServerError::BadRequest(
            "args must be a JSON object".to_owned(),
        ));
    }
    if body.ok && body.error.is_some() {
        return Err(ServerError::BadRequest(
            "error goes with \"ok\": false".to_owned(),
        ));
    }
    if !body.ok && body.result.is_some() {
        return Err(ServerError::BadRequest(
            "result goes with \"ok\": true".to_owned(),
        ));
    }
    Ok(())
}

/// `POST /api/change-sets/{id}/items/{index}/ran`: the report of a confirmed item's run.
pub(crate) async fn ran_item(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Body<RanBody>,
) -> ApiResult {
    let Path((id, index)) = path?;
    // Whose item it is first: another agent's gets 403 whatever the body.
    let (engine, set, index) = item_of(&state, &caller, &id, &index).await?;
    let axum::Json(body) = body?;
    check_ran_body(&body)?;
    let item = &set.items[index];
    let target = Target::new(set.target_kind.clone(), set.target_id.clone());
    let mut about = Reported {
        run_key: &set.run_key,
        operation_id: OperationId::derive(
            &set.run_key,
            &item.tool_name,
            &item.args,
            &[set.target_id.as_str()],
        ),
        tool: &item.tool_name,
        agent: &set.agent_id,
        target: target.clone(),
    };
    let job = engine
        .approved_jobs(&set.agent_id, &target)
        .await?
        .into_iter()
        .find(|job| job.change_set_id == set.id && job.item_index == index);
    let Some(job) = job else {
        let outcome = engine.confirmations().outcome(set.id).await?;
        let why = match outcome.items.get(index) {
            Some(shown) if shown.status == ChangeItemStatus::Confirmed => match &shown.run {
                Some(run) if run.status == JobStatus::Applied => format!(
                    "the run of item {index} of change set {} was reported already",
                    set.id
                ),
                _ => format!(
                    "item {index} of change set {} is not a call of agent {}'s client application awaiting its run",
                    set.id, set.agent_id
                ),
            },
            Some(shown) => format!(
                "item {index} of change set {} is {}, not approved: it must not run",
                set.id, shown.status
            ),
            None => format!("change set {} has no item {index}", set.id),
        };
        return refuse(&state, &about, &body, why).await;
    };
    about.operation_id = job.operation_id.clone();
    if canonical_json(&body.args) != canonical_json(&job.args) {
        return refuse(
            &state,
            &about,
            &body,
            format!(
                "the arguments reported differ from those approved for item {index} of change set {}: approved {}",
                set.id,
                canonical_json(&job.args)
            ),
        )
        .await;
    }
    let run = engine.run_job(job.id, now()).await?;
    if run.applied != 1 {
        return refuse(
            &state,
            &about,
            &body,
            format!(
                "the run of item {index} of change set {} was reported already",
                set.id
            ),
        )
        .await;
    }
    record_report(&state, &about, &body, None).await?;
    crate::api::publish_update(&state, set.id);
    ok(json!({
        "recorded": true,
        "changeSetId": set.id,
        "item": index,
        "runKey": set.run_key,
    }))
}

/// `POST /api/calls/{runKey}/ran`: the report of a call the rules allowed at once.
pub(crate) async fn ran_call(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    body: Body<RanBody>,
) -> ApiResult {
    let Path(run_key) = path?;
    let Some(rest) = run_key.strip_prefix("client:") else {
        return Err(ServerError::NotFound(format!(
            "no client-executed call with run key {run_key:?}"
        )));
    };
    let agent = rest.split(':').next().unwrap_or_default().to_owned();
    caller.may_act_for(&agent)?;
    let axum::Json(body) = body?;
    check_ran_body(&body)?;
    let engine = state.engine.clone();
    let (record, reported) = allowed_record(&engine, &run_key).await?;
    let Some(record) = record.filter(|r| r.agent_id == agent) else {
        return Err(ServerError::NotFound(format!(
            "no call the rules allowed at once with run key {run_key:?}"
        )));
    };
    let about = Reported {
        run_key: &run_key,
        operation_id: record.operation_id.clone(),
        tool: &record.tool_name,
        agent: &record.agent_id,
        target: Target::new(record.target_kind.clone(), record.target_id.clone()),
    };
    if reported {
        return refuse(
            &state,
            &about,
            &body,
            format!("the run of the call {run_key:?} was reported already"),
        )
        .await;
    }
    if canonical_json(&body.args) != canonical_json(&record.args) {
        return refuse(
            &state,
            &about,
            &body,
            format!(
                "the arguments reported differ from those allowed for the call {run_key:?}: allowed {}",
                canonical_json(&record.args)
            ),
        )
        .await;
    }
    record_report(&state, &about, &body, None).await?;
    ok(json!({
        "recorded": true,
        "changeSetId": null,
        "item": null,
        "runKey": run_key,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn client_hosts_of_two_agents_never_meet() {
        assert_eq!(client_host("shop"), "client_shop");
        assert_eq!(client_host("a_b"), "client_a__b");
        assert_eq!(client_host("a-b"), "client_a_2d_b");
        assert_ne!(client_host("a_2d_b"), client_host("a-b"));
    }

    #[test]
    fn one_call_id_names_one_set_per_agent() {
        assert_eq!(set_id_of("shop", "c1"), set_id_of("shop", "c1"));
        assert_ne!(set_id_of("shop", "c1"), set_id_of("shop", "c2"));
        assert_ne!(set_id_of("shop", "c1"), set_id_of("shop2", "c1"));
    }

    #[test]
    fn run_keys_are_one_path_segment() {
        assert_eq!(
            path_segment("client:shop:c/1 x"),
            "client%3Ashop%3Ac%2F1%20x"
        );
    }

    #[test]
    fn only_the_client_executes_here() {
        assert!(check_executed_by(None).is_ok());
        assert!(check_executed_by(Some("client")).is_ok());
        assert!(check_executed_by(Some("assent")).is_err());
    }
}
