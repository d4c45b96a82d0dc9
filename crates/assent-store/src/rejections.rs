//! Remembered rejections (migration 0030): a call a person rejected is refused without
//! asking anyone when the agent makes exactly that call again within the agent's window
//! (`assent agent set A --remember-rejections 7d|0`), unless a person told Assent to
//! forget it (`assent rejections forget ID|--all`). What is remembered lives in the
//! agent's row (`rejection_memory`), so changing it is a change of the agent's rules,
//! entered on the consent chain with who made it.

use crate::{StoreError, chain, decisions, timefmt};
use assent_domain::{ChangeDecision, Verdict};
use serde_json::{Map, Value, json};
use sqlx::AnyConnection;
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// How long rejections are remembered unless the agent's setting says otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::days(7);

/// How many of the newest rejections a listing or a wake reads at most.
pub const LOOKBACK: u32 = 200;

const WINDOW_SECONDS: &str = "windowSeconds";
const FORGOTTEN: &str = "forgotten";
const FORGOTTEN_BEFORE: &str = "forgottenBefore";

/// How an agent's rejections are remembered: its window and what a person told Assent
/// to forget. The default: 7 days, nothing forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
    fn to_json(&self) -> Value {
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

/// Agent `agent_id`'s rejection memory, or `None` for an unknown agent.
pub async fn memory(
    conn: &mut AnyConnection,
    agent_id: &str,
) -> Result<Option<RejectionMemory>, StoreError> {
    let text: Option<String> =
        sqlx::query_scalar("SELECT rejection_memory FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(conn)
            .await?;
    text.as_deref().map(RejectionMemory::parse).transpose()
}

/// Writes agent `agent_id`'s rejection memory, entered on the consent chain as a change
/// of its rules, naming `by` when known. `None` for an unknown agent, else whether it
/// changed (writing the memory it has writes nothing).
pub async fn set_memory(
    conn: &mut AnyConnection,
    agent_id: &str,
    memory: &RejectionMemory,
    by: Option<&str>,
    now: OffsetDateTime,
) -> Result<Option<bool>, StoreError> {
    let Some(old) = self::memory(conn, agent_id).await? else {
        return Ok(None);
    };
    if old == *memory {
        return Ok(Some(false));
    }
    sqlx::query("UPDATE agents SET rejection_memory = $1, updated_at = $2 WHERE id = $3")
        .bind(memory.to_json().to_string())
        .bind(timefmt::format(now))
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
    chain::append_rules_by(conn, agent_id, by, now).await?;
    Ok(Some(true))
}

/// Every agent's rejection memory (agents whose memory is the default included), by
/// agent id.
pub async fn memories(
    conn: &mut AnyConnection,
) -> Result<Vec<(String, RejectionMemory)>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT id, rejection_memory FROM agents ORDER BY id")
            .fetch_all(conn)
            .await?;
    rows.into_iter()
        .map(|(id, text)| Ok((id, RejectionMemory::parse(&text)?)))
        .collect()
}

/// The rejections remembered at `now` (agent `agent_id`'s, or every agent's), newest
/// first, at most [`LOOKBACK`] per agent, each with its agent's memory.
pub async fn remembered(
    conn: &mut AnyConnection,
    agent_id: Option<&str>,
    now: OffsetDateTime,
) -> Result<Vec<ChangeDecision>, StoreError> {
    let mut found = Vec::new();
    for (agent, memory) in memories(conn).await? {
        if agent_id.is_some_and(|wanted| wanted != agent) {
            continue;
        }
        if memory.window() <= Duration::ZERO {
            continue;
        }
        let since = now - memory.window();
        let rejected = decisions::rejected_since(conn, &agent, since, LOOKBACK).await?;
        found.extend(rejected.into_iter().filter(|d| memory.remembers(d, now)));
    }
    found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    Ok(found)
}

/// The records of calls refused again since `since` (a remembered rejection refused
/// them; `refused_by` set), agent `agent_id`'s or every agent's, newest first, at most
/// `limit`.
pub async fn refusals(
    conn: &mut AnyConnection,
    agent_id: Option<&str>,
    since: OffsetDateTime,
    limit: u32,
) -> Result<Vec<assent_tools::AuditRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM audit_records WHERE refused_by IS NOT NULL AND created_at >= $1
           AND ($2 IS NULL OR agent_id = $2)
         ORDER BY id DESC LIMIT $3",
    )
    .bind(timefmt::format(since))
    .bind(agent_id)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter().map(crate::audit::decode).collect()
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
