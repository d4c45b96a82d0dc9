//! Live updates: the events the server publishes, and `GET /api/events`, which streams
//! them as server-sent events until the client goes away or the server shuts down.
//! Reviewers and admins hear every event; an agent hears only of its own agent's sets
//! ([`EventBus::agent_stream`]).

use assent_confirm::{ConfirmError, records};
use assent_confirm::{ConfirmationRequest, ConfirmationResolution};
use assent_domain::{ChangeSet, Uuid};
use assent_store::Store;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How many events a slow subscriber may fall behind before it is told to resync. Set
/// events name a set rather than carry it, so this bounds what a stalled client holds
/// to a few kilobytes (delegated requests carry one tool call each).
const EVENT_BUFFER: usize = 256;

/// How many sets an agent's stream remembers the agent of; past this the oldest is
/// forgotten, and read again from the database if it is written again.
const KNOWN_SETS: usize = 1_024;

/// How often an idle stream sends a comment, so that proxies do not drop it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Something reviewers' screens should learn about at once.
///
/// New kinds are new variants with their own SSE event name.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A wake queued a new change set: `{id, agentId, taskId, status}`; its content is
    /// at `GET /api/change-sets/{id}`.
    ChangeSetCreated(Value),
    /// A change set was written (a decision, expiry, a sync import, a write by another
    /// process): `{id}`.
    ChangeSetUpdated(Value),
    /// A sub-agent asks the server's session to confirm a call (the bus's request).
    ConfirmationRequested(Value),
    /// A delegated request stopped waiting: answered, or withdrawn (timed out,
    /// cancelled, its asker gone, the server stopping).
    ConfirmationResolved(Value),
}

impl ServerEvent {
    /// A created set, named with what a page needs to decide whether to fetch it.
    pub fn created(set: &ChangeSet) -> Self {
        Self::ChangeSetCreated(json!({
            "id": set.id,
            "agentId": set.agent_id,
            "targetKind": set.target_kind,
            "targetId": set.target_id,
            "taskId": crate::shapes::task_id_of(set),
            "status": set.status,
        }))
    }

    /// A set that was written.
    pub fn updated(id: Uuid) -> Self {
        Self::ChangeSetUpdated(json!({ "id": id }))
    }

    /// A sub-agent's request, in the bus's wire shape.
    pub fn confirmation_requested(request: &ConfirmationRequest) -> Self {
        Self::ConfirmationRequested(wire_json(request))
    }

    /// A request that stopped waiting, in the bus's wire shape.
    pub fn confirmation_resolved(resolution: &ConfirmationResolution) -> Self {
        Self::ConfirmationResolved(wire_json(resolution))
    }

    /// The SSE `event:` name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ChangeSetCreated(_) => "changeSetCreated",
            Self::ChangeSetUpdated(_) => "changeSetUpdated",
            Self::ConfirmationRequested(_) => "confirmationRequested",
            Self::ConfirmationResolved(_) => "confirmationResolved",
        }
    }

    /// The SSE `data:` payload: `{changeSet}`, `{request}` or `{resolution}`.
    pub fn data(&self) -> Value {
        match self {
            Self::ChangeSetCreated(set) | Self::ChangeSetUpdated(set) => json!({"changeSet": set}),
            Self::ConfirmationRequested(request) => json!({"request": request}),
            Self::ConfirmationResolved(resolution) => json!({"resolution": resolution}),
        }
    }

    fn to_sse(&self) -> Event {
        Event::default()
            .event(self.name())
            .data(self.data().to_string())
    }
}

/// `resync`: the subscriber missed events and should reload everything.
fn resync(missed: u64) -> Event {
    Event::default()
        .event("resync")
        .data(json!({"missed": missed}).to_string())
}

fn wire_json(value: &impl serde::Serialize) -> Value {
    // Views and bus messages of plain strings and JSON values always serialize.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The publishing side of the event stream, and the signal that ends every stream on
/// shutdown (open streams would otherwise keep a graceful shutdown waiting forever).
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<ServerEvent>,
    closing: watch::Sender<bool>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    /// A bus without subscribers.
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(EVENT_BUFFER);
        let (closing, _) = watch::channel(false);
        Self { sender, closing }
    }

    /// Sends `event` to every open stream; nobody listening is fine.
    pub fn publish(&self, event: ServerEvent) {
        tracing::debug!(event = event.name(), "publishing");
        let _ = self.sender.send(event);
    }

    /// Ends every open stream, now and for streams opened later.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Completes once [`Self::close`] was called.
    pub async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        // `self` holds the sender, so `changed` cannot fail while we wait.
        while !*closing.borrow_and_update() {
            if closing.changed().await.is_err() {
                return;
            }
        }
    }

    /// A stream of SSE events: `ready` first, then every published event, until the
    /// bus closes. A subscriber that fell behind gets `resync` (reload everything).
    pub fn stream(&self) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
        let state = (self.sender.subscribe(), self.closing.subscribe(), true);
        futures_util::stream::unfold(state, |(mut receiver, mut closing, first)| async move {
            if first {
                let ready = Event::default().event("ready").data("{}");
                return Some((Ok(ready), (receiver, closing, false)));
            }
            if *closing.borrow_and_update() {
                return None;
            }
            let event = tokio::select! {
                received = receiver.recv() => match received {
                    Ok(event) => event.to_sse(),
                    Err(broadcast::error::RecvError::Lagged(missed)) => resync(missed),
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = closing.changed() => return None,
            };
            Some((Ok(event), (receiver, closing, false)))
        })
    }

    /// The `GET /api/events` response over [`EventBus::stream`], with keep-alives so
    /// that proxies do not drop an idle stream.
    pub fn response(&self) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
        Sse::new(self.stream()).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
    }

    /// What an agent token hears: `ready`, then `changeSetCreated` and
    /// `changeSetUpdated` of `agent_id`'s own sets only, and `resync`; never a delegated
    /// request or its resolution, nor anything about another agent's sets. An update
    /// names only its set, so the set's agent is remembered from its creation or read
    /// from `store` (a short read on a pooled connection, returned before the stream
    /// waits again). A set that cannot be looked up is not sent; `resync` is, so the
    /// agent reloads through the routes it may read.
    pub fn agent_stream(
        &self,
        store: Store,
        agent_id: String,
    ) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
        let state = AgentStream {
            receiver: self.sender.subscribe(),
            closing: self.closing.subscribe(),
            filter: AgentFilter::new(agent_id),
            store,
            first: true,
        };
        futures_util::stream::unfold(state, |mut state| async move {
            let event = state.next().await?;
            Some((Ok(event), state))
        })
    }

    /// The `GET /api/events` response of an agent token, over
    /// [`EventBus::agent_stream`].
    pub fn agent_response(
        &self,
        store: Store,
        agent_id: String,
    ) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
        Sse::new(self.agent_stream(store, agent_id))
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
    }
}

/// One agent's subscription: the bus, the shutdown signal and what it knows of sets.
struct AgentStream {
    receiver: broadcast::Receiver<ServerEvent>,
    closing: watch::Receiver<bool>,
    filter: AgentFilter,
    store: Store,
    first: bool,
}

impl AgentStream {
    /// The next event for the agent; `None` once the bus closes.
    async fn next(&mut self) -> Option<Event> {
        if std::mem::take(&mut self.first) {
            return Some(Event::default().event("ready").data("{}"));
        }
        loop {
            if *self.closing.borrow_and_update() {
                return None;
            }
            let event = tokio::select! {
                received = self.receiver.recv() => match received {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(missed)) => return Some(resync(missed)),
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.closing.changed() => return None,
            };
            let own = match self.filter.judge(&event) {
                Judged::Own => true,
                Judged::Other => false,
                Judged::Unknown(id) => {
                    let looked = tokio::select! {
                        looked = agent_of(&self.store, id) => looked,
                        _ = self.closing.changed() => return None,
                    };
                    match looked {
                        Ok(agent) => self.filter.learn(id, agent.as_deref()),
                        Err(error) => {
                            tracing::warn!(%error, set = %id, "cannot read the agent of a set for an agent's events");
                            return Some(resync(1));
                        }
                    }
                }
            };
            if own {
                return Some(event.to_sse());
            }
        }
    }
}

/// The agent of set `id` (`None` when there is no such set), on a connection held for
/// this read only.
async fn agent_of(store: &Store, id: Uuid) -> Result<Option<String>, ConfirmError> {
    Ok(records::change_set(store, id)
        .await?
        .map(|set| set.agent_id))
}

/// Whether an event is about the agent's own sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    /// About one of its own sets: send it.
    Own,
    /// Not for the agent: another agent's set, or a delegated request.
    Other,
    /// About a set whose agent is not known yet: look it up.
    Unknown(Uuid),
}

/// What an agent's stream knows of sets: whether each is the agent's own, for at most
/// [`KNOWN_SETS`] sets, the oldest forgotten first.
#[derive(Debug)]
struct AgentFilter {
    agent_id: String,
    own: HashMap<Uuid, bool>,
    order: VecDeque<Uuid>,
}

impl AgentFilter {
    fn new(agent_id: String) -> Self {
        Self {
            agent_id,
            own: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Judges `event`, remembering the agent of a created set.
    fn judge(&mut self, event: &ServerEvent) -> Judged {
        match event {
            ServerEvent::ChangeSetCreated(set) => {
                let Some(id) = set_id(set) else {
                    return Judged::Other;
                };
                if self.learn(id, set["agentId"].as_str()) {
                    Judged::Own
                } else {
                    Judged::Other
                }
            }
            ServerEvent::ChangeSetUpdated(set) => match set_id(set) {
                None => Judged::Other,
                Some(id) => match self.own.get(&id) {
                    Some(true) => Judged::Own,
                    Some(false) => Judged::Other,
                    None => Judged::Unknown(id),
                },
            },
            ServerEvent::ConfirmationRequested(_) | ServerEvent::ConfirmationResolved(_) => {
                Judged::Other
            }
        }
    }

    /// Remembers that set `id` belongs to `agent` (`None`: no such set); returns
    /// whether it is the agent's own.
    fn learn(&mut self, id: Uuid, agent: Option<&str>) -> bool {
        let own = agent == Some(self.agent_id.as_str());
        if self.own.insert(id, own).is_none() {
            self.order.push_back(id);
            if self.order.len() > KNOWN_SETS
                && let Some(oldest) = self.order.pop_front()
            {
                self.own.remove(&oldest);
            }
        }
        own
    }
}

/// The `id` of a set event's payload.
fn set_id(set: &Value) -> Option<Uuid> {
    set["id"].as_str().and_then(|id| Uuid::parse_str(id).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(id: Uuid, agent: &str) -> ServerEvent {
        ServerEvent::ChangeSetCreated(json!({"id": id, "agentId": agent, "status": "pending"}))
    }

    #[test]
    fn an_agent_hears_of_its_own_sets_only() {
        let (own, other, unknown) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut filter = AgentFilter::new("triage".to_owned());
        assert_eq!(filter.judge(&created(own, "triage")), Judged::Own);
        assert_eq!(filter.judge(&created(other, "other")), Judged::Other);
        assert_eq!(filter.judge(&ServerEvent::updated(own)), Judged::Own);
        assert_eq!(filter.judge(&ServerEvent::updated(other)), Judged::Other);
        assert_eq!(
            filter.judge(&ServerEvent::updated(unknown)),
            Judged::Unknown(unknown)
        );
        assert!(
            !filter.learn(unknown, None),
            "a set that is gone is nobody's"
        );
        assert_eq!(filter.judge(&ServerEvent::updated(unknown)), Judged::Other);
        let delegated = json!({"correlationId": "c", "agentPath": "review/triage"});
        assert_eq!(
            filter.judge(&ServerEvent::ConfirmationRequested(delegated.clone())),
            Judged::Other
        );
        assert_eq!(
            filter.judge(&ServerEvent::ConfirmationResolved(delegated)),
            Judged::Other
        );
    }

    #[test]
    fn an_agents_stream_remembers_a_bounded_number_of_sets() {
        let mut filter = AgentFilter::new("triage".to_owned());
        let first = Uuid::new_v4();
        filter.learn(first, Some("triage"));
        for _ in 0..KNOWN_SETS {
            filter.learn(Uuid::new_v4(), Some("other"));
        }
        assert_eq!(filter.own.len(), KNOWN_SETS);
        assert_eq!(filter.order.len(), KNOWN_SETS);
        assert_eq!(
            filter.judge(&ServerEvent::updated(first)),
            Judged::Unknown(first),
            "the oldest is forgotten and looked up again"
        );
    }
}
