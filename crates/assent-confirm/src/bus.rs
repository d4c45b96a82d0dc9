//! The confirmation bus: how a headless sub-agent asks its parent's interactive session.
//!
//! The parent owns the root [`ConfirmationBus`]: it subscribes to requests, lists the
//! pending ones and answers them by correlation id. A sub-agent only ever gets an
//! [`AgentBus`] made by [`ConfirmationBus::derive`] (or [`AgentBus::derive`] for its own
//! children), and an `AgentBus` can ask but never subscribe or answer, so a child cannot
//! confirm its own requests. The bus is untrusted: whatever identity or decision a
//! request claims, the bus overwrites the path with the one it was derived with and
//! strips the rest.
//!
//! It fails closed everywhere and never hangs: nobody subscribed gives an immediate
//! denial, every wait has a timeout that denies, the last subscription going away
//! denies every open wait at once, and cancellation ends a wait with
//! [`ConfirmationOutcome::Cancelled`].

use crate::{CancellationToken, ConfirmError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use uuid::Uuid;

/// How long a sub-agent waits for its parent by default.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(300);

/// The reason given to the model when no parent session is listening.
pub const NOBODY_TO_ASK: &str =
    "confirmation required but nobody could be asked: no parent session is listening";

/// The reason given when the parent stopped listening during the wait.
pub const PARENT_STOPPED_LISTENING: &str = "the parent session stopped listening before answering";

/// How many resolutions a slow watcher may fall behind before it misses some.
const RESOLUTION_BUFFER: usize = 256;

/// Keys a sub-agent may not smuggle into a request's details: the bus alone says who
/// asks and nobody but the parent decides.
const RESERVED_DETAIL_KEYS: &[&str] = &[
    "agentPath",
    "correlationId",
    "forcedOutcome",
    "outcome",
    "decision",
    "confirmed",
];

/// The call a sub-agent wants to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// How a confirmation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ConfirmationOutcome {
    /// Run it this once.
    ProceedOnce,
    /// Run it, and from now on run this tool for this agent without asking, for calls
    /// whose arguments match `args_pattern` (every call when absent).
    ProceedAlways {
        /// A JSON value the call's arguments must contain (see `grant_matches`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args_pattern: Option<Value>,
    },
    /// Run it with these arguments instead (validated against the tool's schema).
    ProceedWithEdits {
        /// The replacement arguments.
        args: Value,
    },
    /// Do not run it; the reason is fed back to the model.
    Reject {
        /// Why, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Queued for a person's review in this change set.
    Deferred {
        /// The change set holding the call.
        change_set_id: Uuid,
    },
    /// The wait was cancelled; nothing was decided.
    Cancelled,
    /// Nobody answered: no parent was listening, the parent left, or the wait timed
    /// out. Fails closed: the call is not run, and the reason is fed back to the model.
    Unanswered {
        /// What happened, for the model.
        reason: String,
    },
}

impl ConfirmationOutcome {
    /// A rejection with `reason`.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::Reject {
            reason: Some(reason.into()),
        }
    }

    /// Nobody answered, because of `reason`.
    pub fn unanswered(reason: impl Into<String>) -> Self {
        Self::Unanswered {
            reason: reason.into(),
        }
    }

    /// The outcome's kind as on the wire (`proceedOnce`, `reject`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ProceedOnce => "proceedOnce",
            Self::ProceedAlways { .. } => "proceedAlways",
            Self::ProceedWithEdits { .. } => "proceedWithEdits",
            Self::Reject { .. } => "reject",
            Self::Deferred { .. } => "deferred",
            Self::Cancelled => "cancelled",
            Self::Unanswered { .. } => "unanswered",
        }
    }
}

/// A sub-agent's question to its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationRequest {
    /// Pairs the answer with the question; a request without one is refused.
    #[serde(default)]
    pub correlation_id: Option<String>,
    /// The call to confirm.
    pub tool_call: ToolCallRequest,
    /// Who asks, as `root/child/grandchild`; set by the bus, never by the asker.
    #[serde(default)]
    pub agent_path: String,
    /// One line for a person.
    pub summary: String,
    /// Serializable details for the review screen (no callbacks).
    #[serde(default)]
    pub details: Value,
    /// A decision the asker claims in advance. Never honoured: a derived bus strips it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_outcome: Option<ConfirmationOutcome>,
}

impl ConfirmationRequest {
    /// A request with a fresh correlation id.
    pub fn new(tool_call: ToolCallRequest, summary: impl Into<String>, details: Value) -> Self {
        Self {
            correlation_id: Some(Uuid::new_v4().to_string()),
            tool_call,
            agent_path: String::new(),
            summary: summary.into(),
            details,
            forced_outcome: None,
        }
    }
}

/// The parent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationResponse {
    /// The request answered.
    pub correlation_id: String,
    /// The decision.
    pub outcome: ConfirmationOutcome,
}

/// A request that stopped waiting: answered by the parent, or withdrawn (timed out,
/// cancelled, the asker gone, the parent stopped listening).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationResolution {
    /// The request that ended.
    pub correlation_id: String,
    /// Who had asked.
    pub agent_path: String,
    /// How it ended: the parent's answer, or why nobody answered.
    pub outcome: ConfirmationOutcome,
}

/// Tunables of a bus.
#[derive(Debug, Clone, Copy)]
pub struct BusConfig {
    /// How long an ask waits for an answer before it is denied.
    pub wait_timeout: Duration,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

struct Waiting {
    request: ConfirmationRequest,
    reply: oneshot::Sender<ConfirmationOutcome>,
}

#[derive(Default)]
struct State {
    next_subscriber: u64,
    subscribers: Vec<(u64, mpsc::UnboundedSender<ConfirmationRequest>)>,
    waiting: HashMap<String, Waiting>,
}

struct Shared {
    config: BusConfig,
    state: Mutex<State>,
    resolutions: broadcast::Sender<ConfirmationResolution>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock, and every update leaves the maps
        // consistent, so a poisoned lock still holds valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the watchers that `request` stopped waiting with `outcome`; nobody
    /// watching is fine.
    fn announce(&self, request: &ConfirmationRequest, outcome: &ConfirmationOutcome) {
        let _ = self.resolutions.send(ConfirmationResolution {
            correlation_id: request.correlation_id.clone().unwrap_or_default(),
            agent_path: request.agent_path.clone(),
            outcome: outcome.clone(),
        });
    }
}

/// The parent's side of the bus: subscribe, list, answer, derive children's buses.
#[derive(Clone)]
pub struct ConfirmationBus {
    shared: Arc<Shared>,
    root: String,
}

impl ConfirmationBus {
    /// The bus of the interactive session `root` (the first segment of every path).
    pub fn new(root: &str, config: BusConfig) -> Result<Self, ConfirmError> {
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                state: Mutex::new(State::default()),
                resolutions: broadcast::channel(RESOLUTION_BUFFER).0,
            }),
            root: check_segment(root)?,
        })
    }

    /// The root's name.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The bus of the sub-agent `name`: its path is `root/name`, and it is untrusted.
    pub fn derive(&self, name: &str) -> Result<AgentBus, ConfirmError> {
        Ok(AgentBus {
            shared: self.shared.clone(),
            path: format!("{}/{}", self.root, check_segment(name)?),
        })
    }

    /// Receives every request from now on, and the ones already waiting.
    pub fn subscribe(&self) -> Subscription {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.shared.lock();
        for waiting in state.waiting.values() {
            // The receiver is ours and alive: the send cannot fail.
            let _ = sender.send(waiting.request.clone());
        }
        let id = state.next_subscriber;
        state.next_subscriber += 1;
        state.subscribers.push((id, sender));
        Subscription {
            shared: self.shared.clone(),
            id,
            receiver,
        }
    }

    /// Every request that stops waiting from now on, answered or withdrawn, so that a
    /// screen listing [`Self::pending`] can drop it. Watching is not listening: it
    /// answers nothing and does not keep asks from failing closed.
    pub fn resolutions(&self) -> broadcast::Receiver<ConfirmationResolution> {
        self.shared.resolutions.subscribe()
    }

    /// The requests waiting for an answer, sorted by correlation id so the listing is
    /// stable.
    pub fn pending(&self) -> Vec<ConfirmationRequest> {
        let state = self.shared.lock();
        let mut pending: Vec<ConfirmationRequest> =
            state.waiting.values().map(|w| w.request.clone()).collect();
        pending.sort_by(|a, b| a.correlation_id.cmp(&b.correlation_id));
        pending
    }

    /// Answers the request `correlation_id`. The first valid answer wins; an unknown or
    /// already answered id is refused (and logged), and no waiting request is touched.
    #[tracing::instrument(skip(self, outcome), fields(outcome = outcome.kind()))]
    pub fn respond(
        &self,
        correlation_id: &str,
        outcome: ConfirmationOutcome,
    ) -> Result<(), ConfirmError> {
        let waiting = self.shared.lock().waiting.remove(correlation_id);
        let Some(waiting) = waiting else {
            tracing::warn!("answer for an unknown or already answered request ignored");
            return Err(ConfirmError::UnknownCorrelationId(
                correlation_id.to_owned(),
            ));
        };
        let request = waiting.request;
        if waiting.reply.send(outcome.clone()).is_err() {
            // The asker gave up (cancelled or dropped) between our lookup and now.
            tracing::warn!("answer arrived after the asker stopped waiting");
            self.shared
                .announce(&request, &ConfirmationOutcome::Cancelled);
            return Err(ConfirmError::UnknownCorrelationId(
                correlation_id.to_owned(),
            ));
        }
        tracing::info!(agent = %request.agent_path, "confirmation answered");
        self.shared.announce(&request, &outcome);
        Ok(())
    }

    /// [`Self::respond`] for a wire response.
    pub fn respond_with(&self, response: ConfirmationResponse) -> Result<(), ConfirmError> {
        self.respond(&response.correlation_id, response.outcome)
    }
}

/// A parent's stream of requests. Dropping the last subscription denies every request
/// still waiting: nobody is left to answer it.
pub struct Subscription {
    shared: Arc<Shared>,
    id: u64,
    receiver: mpsc::UnboundedReceiver<ConfirmationRequest>,
}

impl Subscription {
    /// The next request; `None` never happens while the subscription lives, so this
    /// waits until a sub-agent asks.
    pub async fn recv(&mut self) -> Option<ConfirmationRequest> {
        self.receiver.recv().await
    }

    /// The next request if one is already there.
    pub fn try_recv(&mut self) -> Option<ConfirmationRequest> {
        self.receiver.try_recv().ok()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state
            .subscribers
            .retain(|(id, sender)| *id != self.id && !sender.is_closed());
        if state.subscribers.is_empty() {
            let abandoned: Vec<(String, Waiting)> = state.waiting.drain().collect();
            drop(state);
            let outcome = ConfirmationOutcome::unanswered(PARENT_STOPPED_LISTENING);
            for (correlation_id, waiting) in abandoned {
                tracing::warn!(%correlation_id, agent = %waiting.request.agent_path, "parent stopped listening; request denied");
                self.shared.announce(&waiting.request, &outcome);
                let _ = waiting.reply.send(outcome.clone());
            }
        }
    }
}

/// A sub-agent's side of the bus: it can ask and derive its own children's buses.
/// Untrusted: its path is fixed when it is derived.
#[derive(Clone)]
pub struct AgentBus {
    shared: Arc<Shared>,
    path: String,
}

impl std::fmt::Debug for AgentBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBus")
            .field("path", &self.path)
            .finish()
    }
}

impl AgentBus {
    /// Who asks through this bus, as `root/child/...`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The bus of this agent's own sub-agent `name` (`path/name`).
    pub fn derive(&self, name: &str) -> Result<AgentBus, ConfirmError> {
        Ok(AgentBus {
            shared: self.shared.clone(),
            path: format!("{}/{}", self.path, check_segment(name)?),
        })
    }

    /// How long an ask waits.
    pub fn wait_timeout(&self) -> Duration {
        self.shared.config.wait_timeout
    }

    /// Asks the parent and waits for the answer, the timeout or `cancel`.
    ///
    /// A request without a correlation id, or with one already waiting, is refused. The
    /// request's path is overwritten and any claimed decision stripped. Nobody
    /// subscribed: an immediate `Unanswered`. Timeout or the parent leaving: `Unanswered`.
    /// Cancellation: [`ConfirmationOutcome::Cancelled`].
    #[tracing::instrument(skip_all, fields(agent = %self.path, tool = %request.tool_call.name, correlation_id))]
    pub async fn ask(
        &self,
        request: ConfirmationRequest,
        cancel: &CancellationToken,
    ) -> Result<ConfirmationOutcome, ConfirmError> {
        let request = self.sanitize(request)?;
        let Some(correlation_id) = request.correlation_id.clone() else {
            return Err(ConfirmError::MissingCorrelationId);
        };
        tracing::Span::current().record("correlation_id", correlation_id.as_str());
        if cancel.is_cancelled() {
            return Ok(ConfirmationOutcome::Cancelled);
        }
        let answer = {
            let mut state = self.shared.lock();
            state.subscribers.retain(|(_, sender)| !sender.is_closed());
            if state.subscribers.is_empty() {
                tracing::warn!("no parent session is listening; denied at once");
                return Ok(ConfirmationOutcome::unanswered(NOBODY_TO_ASK));
            }
            if state.waiting.contains_key(&correlation_id) {
                return Err(ConfirmError::DuplicateCorrelationId(correlation_id));
            }
            for (_, sender) in &state.subscribers {
                let _ = sender.send(request.clone());
            }
            let (reply, answer) = oneshot::channel();
            state
                .waiting
                .insert(correlation_id.clone(), Waiting { request, reply });
            answer
        };
        let mut forget_on_exit = ForgetOnExit {
            shared: &self.shared,
            correlation_id: &correlation_id,
            // Until the wait ends, a drop means the asker went away.
            outcome: ConfirmationOutcome::Cancelled,
        };
        let timeout = self.shared.config.wait_timeout;
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => ConfirmationOutcome::Cancelled,
            answer = answer => answer.unwrap_or_else(|_| ConfirmationOutcome::unanswered(PARENT_STOPPED_LISTENING)),
            () = tokio::time::sleep(timeout) => {
                tracing::warn!(?timeout, "no answer in time; denied");
                ConfirmationOutcome::unanswered(format!(
                    "no answer from the parent session within {} s",
                    timeout.as_secs()
                ))
            }
        };
        tracing::info!(outcome = outcome.kind(), "confirmation ended");
        forget_on_exit.outcome = outcome.clone();
        drop(forget_on_exit);
        Ok(outcome)
    }

    fn sanitize(
        &self,
        mut request: ConfirmationRequest,
    ) -> Result<ConfirmationRequest, ConfirmError> {
        let has_id = request
            .correlation_id
            .as_deref()
            .is_some_and(|id| !id.trim().is_empty());
        if !has_id {
            return Err(ConfirmError::MissingCorrelationId);
        }
        if !request.agent_path.is_empty() && request.agent_path != self.path {
            tracing::warn!(claimed = %request.agent_path, "sub-agent claimed another identity; overwritten");
        }
        request.agent_path = self.path.clone();
        if request.forced_outcome.take().is_some() {
            tracing::warn!("sub-agent claimed a decision; stripped");
        }
        if let Value::Object(details) = &mut request.details {
            for key in RESERVED_DETAIL_KEYS {
                if details.remove(*key).is_some() {
                    tracing::warn!(key, "reserved key in a sub-agent's details; stripped");
                }
            }
        }
        Ok(request)
    }
}

/// Removes a wait from the table however the ask ends (answer, timeout, cancellation,
/// or the ask's future being dropped), so a late answer is refused as unknown, and
/// announces a wait that ended without an answer as withdrawn with `outcome`.
struct ForgetOnExit<'a> {
    shared: &'a Shared,
    correlation_id: &'a str,
    outcome: ConfirmationOutcome,
}

impl Drop for ForgetOnExit<'_> {
    fn drop(&mut self) {
        let withdrawn = self.shared.lock().waiting.remove(self.correlation_id);
        // An answered wait was removed, and announced, by `respond`.
        if let Some(waiting) = withdrawn {
            self.shared.announce(&waiting.request, &self.outcome);
        }
    }
}

fn check_segment(name: &str) -> Result<String, ConfirmError> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.contains('/') || trimmed != name {
        return Err(ConfirmError::InvalidAgentName(name.to_owned()));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests;
