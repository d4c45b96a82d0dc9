//! How an agent's rejections are remembered (migration 0030's `agents.rejection_memory`):
//! the type, its stored JSON and its content on the consent chain. A leaf of the store's
//! modules: the agents' reads and the chain's rules entry use it, and it uses neither.

use crate::{StoreError, timefmt};
use assent_domain::{ChangeDecision, Verdict};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// How long rejections are remembered unless the agent's setting says otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::days(7);

const WINDOW_SECONDS: &str = "windowSeconds";
const FORGOTTEN: &str = "forgotten";
const FORGOTTEN_BEFORE: &str = "forgottenBefore";

/// How an agent's rejections are remembered: its window and what a person told Assent
/// to forget. The default: 7 days, nothing forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RejectionMemory {
    /// The agent's window; `None`: [`DEFAULT_WINDOW`]; zero: never remembered.
    pub window: Option<Duration>,
    /// Rejections forgotten one by one.
    pub forgotten: BTreeSet<Uuid>,
    /// Every rejection decided at or before this time is forgotten.
    pub forgotten_before: Option<OffsetDateTime>,
}

impl RejectionMemory {
    /// How long a rejection is remembered.
    pub fn window(&self) -> Duration {
        self.window.unwrap_or(DEFAULT_WINDOW)
    }

    /// Whether `decision` is a rejection remembered at `now`: rejected, within the
    /// window, and not forgotten.
    pub fn remembers(&self, decision: &ChangeDecision, now: OffsetDateTime) -> bool {
        let window = self.window();
        decision.verdict == Verdict::Rejected
            && window > Duration::ZERO
            && decision.created_at >= now - window
            && !self.forgotten.contains(&decision.id)
            && self
                .forgotten_before
                .is_none_or(|before| decision.created_at > before)
    }

    /// The stored JSON (`{}` for the default).
    pub(crate) fn to_json(&self) -> Value {
        let mut map = Map::new();
        if let Some(window) = self.window {
            map.insert(WINDOW_SECONDS.into(), json!(window.whole_seconds()));
        }
        if !self.forgotten.is_empty() {
            let ids: Vec<String> = self.forgotten.iter().map(Uuid::to_string).collect();
            map.insert(FORGOTTEN.into(), json!(ids));
        }
        if let Some(before) = self.forgotten_before {
            map.insert(FORGOTTEN_BEFORE.into(), json!(timefmt::format(before)));
        }
        Value::Object(map)
    }

    /// Reads what [`Self::to_json`] stored.
    pub(crate) fn parse(text: &str) -> Result<Self, StoreError> {
        let corrupt = |e: String| StoreError::corrupt("agents", format!("rejection_memory: {e}"));
        let value: Value = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        let Value::Object(map) = value else {
            return Err(corrupt(format!("not an object: {value}")));
        };
        let window = match map.get(WINDOW_SECONDS) {
            None => None,
            Some(seconds) => Some(Duration::seconds(
                seconds
                    .as_i64()
                    .filter(|s| *s >= 0)
                    .ok_or_else(|| corrupt(format!("{WINDOW_SECONDS} is {seconds}")))?,
            )),
        };
        let mut forgotten = BTreeSet::new();
        for id in map
            .get(FORGOTTEN)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = id
                .as_str()
                .and_then(|id| Uuid::parse_str(id).ok())
                .ok_or_else(|| corrupt(format!("{FORGOTTEN} holds {id}")))?;
            forgotten.insert(id);
        }
        let forgotten_before = map
            .get(FORGOTTEN_BEFORE)
            .map(|at| timefmt::parse("agents", at.as_str().unwrap_or_default()))
            .transpose()?;
        Ok(Self {
            window,
            forgotten,
            forgotten_before,
        })
    }

    /// The memory's content in the agent's rules entry on the consent chain: `None`
    /// for the default, which entries written before migration 0030 stand for.
    pub(crate) fn chain_content(text: &str) -> Result<Option<Value>, StoreError> {
        let memory = Self::parse(text)?;
        Ok((memory != Self::default()).then(|| memory.to_json()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::VectorClock;
    use time::macros::datetime;

    fn rejection(at: OffsetDateTime) -> ChangeDecision {
        ChangeDecision {
            id: Uuid::new_v4(),
            change_set_id: Uuid::new_v4(),
            item_index: 0,
            agent_id: "a".into(),
            target_kind: "workspace".into(),
            target_id: "/w".into(),
            tool_name: "Bash".into(),
            verdict: Verdict::Rejected,
            reason: None,
            edited_args: None,
            human_summary: String::new(),
            args: json!({"command": "rm -rf build"}),
            created_at: at,
            vector_clock: VectorClock::default(),
            decided_by: Some("alice".into()),
        }
    }

    #[test]
    fn a_rejection_is_remembered_for_its_window_unless_forgotten() {
        let now = datetime!(2026-03-10 12:00 UTC);
        let recent = rejection(now - Duration::days(6));
        let old = rejection(now - Duration::days(8));
        let memory = RejectionMemory::default();
        assert!(memory.remembers(&recent, now));
        assert!(!memory.remembers(&old, now));

        let never = RejectionMemory {
            window: Some(Duration::ZERO),
            ..RejectionMemory::default()
        };
        assert!(!never.remembers(&recent, now));

        let longer = RejectionMemory {
            window: Some(Duration::days(30)),
            ..RejectionMemory::default()
        };
        assert!(longer.remembers(&old, now));

        let forgotten = RejectionMemory {
            forgotten: BTreeSet::from([recent.id]),
            ..RejectionMemory::default()
        };
        assert!(!forgotten.remembers(&recent, now));

        let all = RejectionMemory {
            forgotten_before: Some(now - Duration::days(1)),
            ..RejectionMemory::default()
        };
        assert!(!all.remembers(&recent, now));
        assert!(all.remembers(&rejection(now - Duration::hours(1)), now));

        let confirmed = ChangeDecision {
            verdict: Verdict::Confirmed,
            ..recent
        };
        assert!(!memory.remembers(&confirmed, now));
    }

    #[test]
    fn the_stored_memory_reads_back_and_the_default_stays_off_the_chain() {
        let memory = RejectionMemory {
            window: Some(Duration::days(2)),
            forgotten: BTreeSet::from([Uuid::nil()]),
            forgotten_before: Some(datetime!(2026-03-10 12:00 UTC)),
        };
        let text = memory.to_json().to_string();
        assert_eq!(RejectionMemory::parse(&text).expect("parses"), memory);
        assert_eq!(
            RejectionMemory::parse("{}").expect("parses"),
            RejectionMemory::default()
        );
        assert_eq!(RejectionMemory::chain_content("{}").expect("parses"), None);
        assert!(RejectionMemory::parse(r#"{"windowSeconds": -1}"#).is_err());
        assert!(RejectionMemory::parse(r#"{"forgotten": ["x"]}"#).is_err());
        assert!(RejectionMemory::parse("[]").is_err());
    }
}
