//! Live updates: the events the server publishes, and `GET /api/events`, which streams
//! them as server-sent events until the client goes away or the server shuts down.

use assent_confirm::{ConfirmationRequest, ConfirmationResolution};
use assent_domain::{ChangeSet, Uuid};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How many events a slow subscriber may fall behind before it is told to resync. Set
/// events name a set rather than carry it, so this bounds what a stalled client holds
/// to a few kilobytes (delegated requests carry one tool call each).
const EVENT_BUFFER: usize = 256;

/// Something reviewers' screens should learn about at once.
///
/// New kinds are new variants with their own SSE event name.
#[derive(Debug, Clone, PartialEq)]
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
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        Event::default().event("resync").data(json!({"missed": missed}).to_string())
                    }
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
        Sse::new(self.stream()).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    }
}
