//! Following the change feed: writes made by other processes (a CLI run, another
//! server, a sync import) reach open pages as `changeSetUpdated` events within about
//! one poll interval.

use crate::events::{EventBus, ServerEvent};
use assent_confirm::Engine;
use std::time::Duration;

/// Feed entries read per poll; a burst larger than this is read over several polls.
const BATCH: i64 = 1_000;
/// Polls between prunings of the feed.
const PRUNE_EVERY: u32 = 600;

/// Where the feed ends now: the position a server starts following from, read before
/// it accepts anyone, so a write made the moment after it started is announced.
/// `None` when it cannot be read now ([`follow`] then reads it at its first poll).
pub(crate) async fn start(engine: &Engine) -> Option<i64> {
    match engine.feed_position().await {
        Ok(latest) => Some(latest),
        Err(error) => {
            tracing::warn!(%error, "cannot read the change feed");
            None
        }
    }
}

/// Reads the feed every `interval` from `position` (see [`start`]) and announces each
/// written set, until `events` closes. Failures are logged and retried at the next
/// poll: a database that is busy or briefly unreachable must not end live updates.
pub(crate) async fn follow(
    engine: Engine,
    events: EventBus,
    interval: Duration,
    mut position: Option<i64>,
) {
    let mut polls = 0_u32;
    let closed = events.closed();
    let mut closed = std::pin::pin!(closed);
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = &mut closed => return,
        }
        let span = tracing::debug_span!("change_feed_poll");
        let _entered = span.enter();
        let after = match position {
            Some(after) => after,
            // Start at the end: what happened before the server started is on the page
            // when it loads.
            None => match engine.feed_position().await {
                Ok(latest) => {
                    position = Some(latest);
                    continue;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read the change feed");
                    continue;
                }
            },
        };
        match engine.feed_since(after, BATCH).await {
            Ok(page) => {
                for id in page.sets {
                    events.publish(ServerEvent::updated(id));
                }
                position = Some(page.position);
            }
            Err(error) => tracing::warn!(%error, "cannot read the change feed"),
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(PRUNE_EVERY)
            && let Err(error) = engine.admin().prune_feed().await
        {
            tracing::debug!(%error, "cannot prune the change feed");
        }
    }
}
