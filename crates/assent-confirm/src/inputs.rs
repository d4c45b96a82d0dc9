//! Time and new ids as inputs of the engine, not reads it makes on its own: the engine
//! asks its [`Clock`] when a loop of its own (the worker, [`Engine::open`]'s catalog)
//! needs the time, and its [`IdSource`] for every id it mints (a decision, a grant, an
//! undo's change set, a prompt's correlation id). A service passes the system's
//! ([`SystemClock`], [`RandomIds`], the defaults); a test or a replay passes
//! [`FixedClock`] and [`SequentialIds`] and gets the same rows twice. Everything else
//! the engine does takes `now` from its caller, as quinn-proto and str0m take theirs.
//!
//! This file and the doors (the CLI, the server, the gateway, the hooks) are where
//! the engine's time and ids come from; a tidy test keeps the clock and random ids
//! out of the rest of the engine.

use crate::Engine;
use assent_domain::Uuid;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use time::OffsetDateTime;

/// Where the engine reads the time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> OffsetDateTime;
}

/// Where the engine's new ids come from.
pub trait IdSource: Send + Sync + fmt::Debug {
    /// A new id, never handed out before by this source.
    fn new_id(&self) -> Uuid;
}

/// The system's clock, in UTC.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// Random (version 4) ids: unique across devices without coordination, which sync
/// needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn new_id(&self) -> Uuid {
        Uuid::new_v4()
    }
}

/// A clock that always says the same time: for tests and replays.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub OffsetDateTime);

impl Clock for FixedClock {
    fn now(&self) -> OffsetDateTime {
        self.0
    }
}

/// Ids counted up from `prefix` in the high half: the same run mints the same ids,
/// for tests and replays. Two sources with the same prefix mint the same ids, so give
/// each device of a sync test its own.
#[derive(Debug)]
pub struct SequentialIds {
    prefix: u64,
    next: AtomicU64,
}

impl SequentialIds {
    /// Ids `prefix:1`, `prefix:2`, … (as the two halves of a UUID).
    pub fn new(prefix: u64) -> Self {
        Self {
            prefix,
            next: AtomicU64::new(1),
        }
    }
}

impl IdSource for SequentialIds {
    fn new_id(&self) -> Uuid {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Uuid::from_u64_pair(self.prefix, n)
    }
}

/// The engine's clock and id source, shared by its clones.
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ids: Arc<dyn IdSource>,
}

impl Default for Inputs {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            ids: Arc::new(RandomIds),
        }
    }
}

impl Engine {
    /// This engine reading the time from `clock` (the system's by default).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.inputs.clock = clock;
        self
    }

    /// This engine minting its ids from `ids` (random by default).
    #[must_use]
    pub fn with_ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.inputs.ids = ids;
        self
    }

    /// The time on this engine's clock.
    pub fn now(&self) -> OffsetDateTime {
        self.inputs.clock.now()
    }

    /// A new id from this engine's source.
    pub fn new_id(&self) -> Uuid {
        self.inputs.ids.new_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_up_and_keep_their_prefix() {
        let ids = SequentialIds::new(7);
        let (first, second) = (ids.new_id(), ids.new_id());
        assert_eq!(first.as_u64_pair(), (7, 1));
        assert_eq!(second.as_u64_pair(), (7, 2));
        assert_ne!(SequentialIds::new(8).new_id(), first);
    }

    #[test]
    fn a_fixed_clock_stands_still() {
        let at = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(FixedClock(at).now(), at);
        assert_eq!(FixedClock(at).now(), FixedClock(at).now());
    }
}
