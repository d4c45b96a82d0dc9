//! The sets and what became of them, read the same way by every door: a set with its
//! decisions, jobs, changed tools, quorum and wait ([`SetRecord`], [`SetDetail`]), the
//! decision history beside its runs and shadow verdicts ([`RecentDecisions`]), the
//! execution ledger's jobs, and the one write a door makes of its own accord about a
//! set: until when its caller waits ([`Engine::record_wait`]).
//!
//! The CLI (`assent pending`, `show`, `review`, `jobs`), the API (`/api/change-sets`,
//! `/api/decisions`, `/api/jobs`), the MCP gateway and the coding agents' hooks call
//! these [`Engine`] methods, never the store's tables (`change_sets`, `decisions`,
//! `approvals`, `waits`, `jobs`), so a set reads the same through every door. The plain
//! types they return are re-exported here.
//!
//! A service's own review screen reads the same way: the items waiting for a person
//! ([`Engine::pending`], one [`PendingItem`] each) and the decisions as they are
//! committed, followed with a [`DecisionCursor`] ([`Engine::decisions_since`], or the
//! stream [`Engine::decisions`]).
//!
//! A door that holds the store without an engine (the server's event stream, the
//! gateway's checks before its engine is built and its ledger guard) reads through the
//! few functions here that take a [`Store`].

use crate::{ConfirmError, Engine};
use assent_domain::{ChangeDecision, ChangeSet, ChangeSetStatus, ItemRef, Target};
use assent_store::{Connection, Store, approvals, change_sets, decisions, host_tools, jobs, waits};
use assent_tools::{AuditKind, AuditRecord, PastCall};

/// How many records of a coding agent's run [`Engine::set_detail`] reads for what the
/// agent reported it ran.
const AGENT_RUNS_READ: u32 = 50;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

pub use assent_store::approvals::{Approval, Quorum, Revision};
pub use assent_store::change_sets::{ItemFilter, PendingFilter, PendingItem, Undoes};
/// The prefix of a decider named for an MCP client's elicitation answer
/// (`mcp-client:NAME`): the client's word, never a named person's.
pub use assent_store::decisions::MCP_CLIENT_PREFIX;
pub use assent_store::jobs::{AGENT_RUNS_KIND, ExternalItem, Job, JobStatus, ServedItem};

/// A set as a person's screens show it, read together: what `assent pending`, `assent
/// review` and `GET /api/change-sets` list.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SetRecord {
    /// The set with its items.
    pub set: ChangeSet,
    /// Every decision about it, oldest first (the last word on an item wins).
    pub decisions: Vec<ChangeDecision>,
    /// The execution jobs of its items, by item index.
    pub jobs: Vec<Job>,
    /// The indexes of its items whose tool's definition changed since a person
    /// accepted it.
    pub changed_tools: Vec<usize>,
    /// Its items' quorums: who approved, how many are needed.
    pub quorum: Quorum,
    /// Until when its caller waits for an answer, when its door said so (display data
    /// only).
    pub waits_until: Option<OffsetDateTime>,
}

/// One set whole, as `assent show` and `GET /api/change-sets/{id}` show it: its
/// [`SetRecord`], the shadow verdicts beside its decisions and what it reverses.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SetDetail {
    /// The set as lists show it.
    pub record: SetRecord,
    /// The shadow verdicts (`{rule, agreed}`) recorded beside its decisions, by
    /// decision id.
    pub shadows: Vec<(Uuid, Value)>,
    /// For an undo set, the applied item it reverses.
    pub undoes: Option<Undoes>,
    /// For a coding agent's set, what the agent reported it ran (its hook's after
    /// events, by the set's run key), oldest first: how a confirmed call went, which
    /// only the agent knows ([`assent_store::jobs::Job::agent_outcome`]).
    pub agent_runs: Vec<AuditRecord>,
}

/// An agent's most recent decisions with what the decision history shows beside them:
/// what `GET /api/decisions` lists.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecentDecisions {
    /// The decisions, newest first.
    pub decisions: Vec<ChangeDecision>,
    /// The jobs of the items they confirmed (an item without a job, a transactional
    /// one, has none here).
    pub runs: Vec<Job>,
    /// The shadow verdicts recorded beside them, by decision id.
    pub shadows: Vec<(Uuid, Value)>,
}

impl SetRecord {
    /// `sets`' records, read on `conn` (the waits in one statement).
    async fn read_all(
        conn: &mut Connection,
        sets: Vec<ChangeSet>,
    ) -> Result<Vec<Self>, ConfirmError> {
        let ids: Vec<Uuid> = sets.iter().map(|set| set.id).collect();
        let waits = waits::of(conn, &ids).await?;
        let mut records = Vec::with_capacity(sets.len());
        for set in sets {
            let waits_until = waits.get(&set.id).copied();
            records.push(Self::read(conn, set, waits_until).await?);
        }
        Ok(records)
    }

    async fn read(
        conn: &mut Connection,
        set: ChangeSet,
        waits_until: Option<OffsetDateTime>,
    ) -> Result<Self, ConfirmError> {
        Ok(Self {
            decisions: decisions::for_change_set(conn, set.id).await?,
            jobs: jobs::for_change_set(conn, set.id).await?,
            changed_tools: host_tools::changed_items(conn, set.id).await?,
            quorum: approvals::quorum_of(conn, &set).await?,
            waits_until,
            set,
        })
    }
}

/// Change set `id` with its items, or `None` when there is none; on a connection held
/// for this read only. For a door that holds the store without an engine (the
/// server's event stream); others call [`Engine::change_set`].
pub async fn change_set(store: &Store, id: Uuid) -> Result<Option<ChangeSet>, ConfirmError> {
    let mut conn = store.read_connection().await?;
    Ok(change_sets::load(&mut conn, id).await?)
}

/// The first target other than `except` that host `host` serves in `store`: a job's
/// (oldest first, retracted ones included), else an open set's external item's. An MCP
/// gateway asks before it opens its engine, to refuse a server name whose host already
/// serves another server.
pub async fn other_target_of_host(
    store: &Store,
    host: &str,
    except: &Target,
) -> Result<Option<Target>, ConfirmError> {
    let mut conn = store.read_connection().await?;
    for job in jobs::list(&mut conn, true, u32::MAX).await? {
        if job.host == host && job.target != *except {
            return Ok(Some(job.target));
        }
    }
    let open = change_sets::pending(&mut conn, &PendingFilter::default()).await?;
    for set in open {
        let target = Target::new(set.target_kind.clone(), set.target_id.clone());
        if target == *except {
            continue;
        }
        for index in 0..set.items.len() {
            let item = jobs::external_item(&mut conn, set.id, index).await?;
            if item.is_some_and(|item| item.host == host) {
                return Ok(Some(target));
            }
        }
    }
    Ok(None)
}

/// The fingerprint stored with the item whose job runs operation `operation_id` (what
/// its host read when it was proposed, or last refreshed), or `None` when it has none.
/// A host that checks its target itself just before an external call compares with
/// it; it holds the store, not the engine (its guard runs inside the ledger's handler).
pub async fn item_fingerprint(
    store: &Store,
    operation_id: &str,
) -> Result<Option<Value>, ConfirmError> {
    let mut conn = store.read_connection().await?;
    Ok(jobs::item_fingerprint(&mut conn, operation_id).await?)
}

/// Where a follower of decisions stands: after which committed decision it reads on.
/// Opaque: keep it as the string its `Display` gives (`dc-N`) and parse it back with
/// `FromStr` (or serde); start at [`DecisionCursor::start`] for every decision ever
/// made, or at [`Engine::decision_cursor`] for those made from now on.
///
/// ```
/// use assent_confirm::records::DecisionCursor;
///
/// let cursor: DecisionCursor = "dc-0".parse()?;
/// assert_eq!(cursor, DecisionCursor::start());
/// assert_eq!(cursor.to_string().parse::<DecisionCursor>()?, cursor);
/// assert!("12".parse::<DecisionCursor>().is_err());
/// # Ok::<(), assent_confirm::ConfirmError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DecisionCursor(i64);

/// The text before a cursor's position.
const CURSOR_PREFIX: &str = "dc-";

impl DecisionCursor {
    /// Before the first decision: a follower starting here reads every decision.
    pub const fn start() -> Self {
        Self(0)
    }
}

impl std::fmt::Display for DecisionCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{CURSOR_PREFIX}{}", self.0)
    }
}

impl std::str::FromStr for DecisionCursor {
    type Err = ConfirmError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.strip_prefix(CURSOR_PREFIX)
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<i64>().ok())
            .map(Self)
            .ok_or_else(|| ConfirmError::InvalidCursor(text.to_owned()))
    }
}

impl serde::Serialize for DecisionCursor {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for DecisionCursor {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One decision as a follower reads it: the decision (set and item, verdict, who,
/// reason, edited arguments, when) and the cursor just after it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DecisionEntry {
    /// The decision.
    pub decision: ChangeDecision,
    /// Where to read on from after this decision (keep it once the decision is
    /// handled: a restart there reads none twice and misses none).
    pub cursor: DecisionCursor,
}

/// The decisions committed after a cursor ([`Engine::decisions_since`]), in commit
/// order, and where to read on from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DecisionPage {
    /// The decisions, oldest first.
    pub decisions: Vec<DecisionEntry>,
    /// Where to read on from: after the last decision here, or the cursor asked for
    /// when there was none.
    pub next: DecisionCursor,
}

impl Engine {
    /// The items waiting for a person that `filter` names, one row each: set and
    /// index, agent, target, tool, the arguments as they would run, the summary, when
    /// it was proposed and its revision. What a service's own review screen lists.
    ///
    /// ```
    /// # use assent_confirm::{Engine, SimpleHost};
    /// # use assent_store::Store;
    /// # use assent_tools::ToolRegistry;
    /// # use std::sync::Arc;
    /// use assent_confirm::records::ItemFilter;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let store = Store::open("sqlite::memory:").await?;
    /// # let host = Arc::new(SimpleHost::new("billing"));
    /// # let engine = Engine::open(store, Arc::new(ToolRegistry::new()), host).await?;
    /// let waiting = engine
    ///     .pending(&ItemFilter::new().agent("billing-agent").oldest_first().limit(50))
    ///     .await?;
    /// for row in &waiting {
    ///     println!("{} {} {}: {}", row.item, row.target, row.tool_name, row.summary);
    /// }
    /// # assert!(waiting.is_empty());
    /// # Ok(())
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(run())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn pending(&self, filter: &ItemFilter) -> Result<Vec<PendingItem>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(change_sets::pending_items(&mut conn, filter).await?)
    }

    /// The cursor after the newest decision committed so far: a follower starting
    /// here reads only decisions made from now on.
    pub async fn decision_cursor(&self) -> Result<DecisionCursor, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(DecisionCursor(decisions::feed_position(&mut conn).await?))
    }

    /// At most `limit` decisions committed after `cursor` (by any process or device
    /// on this database), in commit order, and the cursor to read on from. A
    /// decision committed later than another is never read before it, on SQLite or
    /// PostgreSQL alike, so a follower that keeps `next` misses none.
    ///
    /// ```
    /// # use assent_confirm::{Engine, SimpleHost};
    /// # use assent_store::Store;
    /// # use assent_tools::ToolRegistry;
    /// # use std::sync::Arc;
    /// use assent_confirm::records::DecisionCursor;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let store = Store::open("sqlite::memory:").await?;
    /// # let host = Arc::new(SimpleHost::new("billing"));
    /// # let engine = Engine::open(store, Arc::new(ToolRegistry::new()), host).await?;
    /// let mut cursor = DecisionCursor::start(); // or: the one you saved, parsed
    /// let page = engine.decisions_since(cursor, 100).await?;
    /// for entry in &page.decisions {
    ///     let d = &entry.decision;
    ///     println!("{}/{}: {} by {:?}", d.change_set_id, d.item_index, d.verdict, d.decided_by);
    /// }
    /// cursor = page.next; // save `cursor.to_string()` with what you did
    /// # assert_eq!(cursor, DecisionCursor::start());
    /// # Ok(())
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(run())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn decisions_since(
        &self,
        cursor: DecisionCursor,
        limit: u32,
    ) -> Result<DecisionPage, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let rows = decisions::feed_since(&mut conn, cursor.0, limit.max(1)).await?;
        let decisions: Vec<DecisionEntry> = rows
            .into_iter()
            .map(|(position, decision)| DecisionEntry {
                decision,
                cursor: DecisionCursor(position),
            })
            .collect();
        let next = decisions.last().map_or(cursor, |entry| entry.cursor);
        Ok(DecisionPage { decisions, next })
    }

    /// Every decision committed after `cursor`, as it is committed: a stream that
    /// never ends by itself (drop it to stop). It reads the decision feed every
    /// [`crate::OUTCOME_POLL_INTERVAL`] while nothing is new (as
    /// [`crate::ConfirmationService::wait_outcome`] does), holding no connection in
    /// between. A failed read is yielded as an error and tried again a little later;
    /// the entry's cursor is where to start again after a restart.
    pub fn decisions(
        &self,
        cursor: DecisionCursor,
    ) -> impl futures_util::Stream<Item = Result<DecisionEntry, ConfirmError>> + Send + 'static
    {
        /// Decisions read at once while catching up.
        const PAGE: u32 = 100;
        /// After a failed read, how long before the next (a lasting failure is not
        /// yielded on every poll).
        const AFTER_ERROR: std::time::Duration = std::time::Duration::from_secs(1);
        let state = (self.clone(), cursor, std::collections::VecDeque::new());
        futures_util::stream::unfold(state, |(engine, mut cursor, mut ready)| async move {
            loop {
                if let Some(entry) = ready.pop_front() {
                    return Some((Ok(entry), (engine, cursor, ready)));
                }
                match engine.decisions_since(cursor, PAGE).await {
                    Ok(page) if page.decisions.is_empty() => {
                        tokio::time::sleep(crate::OUTCOME_POLL_INTERVAL).await;
                    }
                    Ok(page) => {
                        cursor = page.next;
                        ready.extend(page.decisions);
                    }
                    Err(error) => {
                        tokio::time::sleep(AFTER_ERROR).await;
                        return Some((Err(error), (engine, cursor, ready)));
                    }
                }
            }
        })
    }
}

impl Engine {
    /// Change set `id` with its items, or `None` when there is none.
    pub async fn change_set(&self, id: Uuid) -> Result<Option<ChangeSet>, ConfirmError> {
        change_set(&self.store, id).await
    }

    /// The change set `text` names: its whole id, or the first
    /// `assent_store::change_sets::MIN_PREFIX_DIGITS` or more hex digits of exactly one
    /// set's id. A prefix no set has, one several have, or text that is no id is
    /// [`ConfirmError::Store`] with the store's error saying which.
    pub async fn resolve_set_id(&self, text: &str) -> Result<Uuid, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(change_sets::resolve_id(&mut conn, text).await?)
    }

    /// The open sets `filter` names (newest first), with their items only: what a door
    /// that looks for a call waiting already reads.
    pub async fn open_sets(&self, filter: &PendingFilter) -> Result<Vec<ChangeSet>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(change_sets::pending(&mut conn, filter).await?)
    }

    /// The sets `filter` names, each with what the screens show of it ([`SetRecord`]):
    /// the open ones (pending or partly resolved, newest first) when `status` is
    /// `None`, else those with `status`.
    pub async fn set_records(
        &self,
        filter: &PendingFilter,
        status: Option<ChangeSetStatus>,
    ) -> Result<Vec<SetRecord>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let sets = match status {
            None => change_sets::pending(&mut conn, filter).await?,
            Some(status) => change_sets::with_status(&mut conn, status, filter).await?,
        };
        SetRecord::read_all(&mut conn, sets).await
    }

    /// Set `id` whole ([`SetDetail`]); [`ConfirmError::ChangeSetNotFound`] when there
    /// is none.
    pub async fn set_detail(&self, id: Uuid) -> Result<SetDetail, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let set = change_sets::load(&mut conn, id)
            .await?
            .ok_or(ConfirmError::ChangeSetNotFound(id))?;
        let waits_until = waits::of(&mut conn, &[id]).await?.remove(&id);
        let agent_runs = if set.target_kind == jobs::AGENT_RUNS_KIND {
            let filter = assent_store::audit::AuditFilter::Run(set.run_key.clone());
            assent_store::audit::list(&mut conn, &filter, AGENT_RUNS_READ)
                .await?
                .into_iter()
                .filter(|record| record.kind == AuditKind::Result && record.success.is_none())
                .collect()
        } else {
            Vec::new()
        };
        let record = SetRecord::read(&mut conn, set, waits_until).await?;
        Ok(SetDetail {
            shadows: decisions::shadows_of(&mut conn, &record.decisions).await?,
            undoes: change_sets::undoes(&mut conn, id).await?,
            record,
            agent_runs,
        })
    }

    /// What set `id` reverses, when it is an undo set.
    pub async fn undoes(&self, id: Uuid) -> Result<Option<Undoes>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(change_sets::undoes(&mut conn, id).await?)
    }

    /// Every decision about set `id`, oldest first.
    pub async fn decisions_of(&self, id: Uuid) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(decisions::for_change_set(&mut conn, id).await?)
    }

    /// Who serves `item` and where its effect lands, as the wake recorded it (and its
    /// hold, if it waits out one), or `None` when there is no such item.
    pub async fn served_item(&self, item: ItemRef) -> Result<Option<ServedItem>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(jobs::served_item(&mut conn, item.change_set_id, item.index).await?)
    }

    /// Agent `agent`'s most recent `limit` decisions (about `target` when given),
    /// newest first, with the runs of those that confirmed an external call and the
    /// shadow verdicts beside them.
    pub async fn recent_decisions(
        &self,
        agent: &str,
        target: Option<&Target>,
        limit: u32,
    ) -> Result<RecentDecisions, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let list = decisions::recent(&mut conn, agent, target, limit).await?;
        Ok(RecentDecisions {
            runs: jobs::for_confirmations(&mut conn, &list).await?,
            shadows: decisions::shadows_of(&mut conn, &list).await?,
            decisions: list,
        })
    }

    /// The final decisions made at or after `since` (of agent `agent` when given),
    /// oldest first, as the history's pure readers take them
    /// ([`assent_tools::suggest_grants`], [`assent_tools::backtest`],
    /// [`assent_tools::shadow_report`]).
    pub async fn past_calls(
        &self,
        agent: Option<&str>,
        since: OffsetDateTime,
    ) -> Result<Vec<PastCall>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(decisions::past_calls(&mut conn, agent, since).await?)
    }

    /// Every job of the execution ledger, oldest first; retracted ones only when
    /// `include_retracted`.
    pub async fn list_jobs(&self, include_retracted: bool) -> Result<Vec<Job>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(jobs::list(&mut conn, include_retracted, u32::MAX).await?)
    }

    /// The approved jobs (confirmed, not yet run) of this engine's host for agent
    /// `agent` on `target`, oldest first: what a coding agent's hook may hand to a
    /// retried call.
    pub async fn approved_jobs(
        &self,
        agent: &str,
        target: &Target,
    ) -> Result<Vec<Job>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(jobs::approved_of(&mut conn, self.host.name(), agent, target).await?)
    }

    /// Records that the caller of set `set` waits for an answer until `until` (a later
    /// wait on the same set replaces it), in one transaction: display data for
    /// reviewers' screens ("the agent waits 42 s more"); no decision reads it.
    #[tracing::instrument(skip(self), fields(change_set = %set))]
    pub async fn record_wait(&self, set: Uuid, until: OffsetDateTime) -> Result<(), ConfirmError> {
        self.record_wait_ending(set, until, false).await
    }

    /// [`Engine::record_wait`], saying whether the caller withdraws the set's item when
    /// its wait ends (`withdrawn_at_end`: a coding agent's hook that hands the call to
    /// the agent's own prompt then). A confirmation given after `until` (and a few
    /// seconds' grace) is then refused, "the session that asked for it has ended", and
    /// the item withdrawn: nothing would ever claim it (the caller was killed before it
    /// could withdraw it itself).
    #[tracing::instrument(skip(self), fields(change_set = %set))]
    pub async fn record_wait_ending(
        &self,
        set: Uuid,
        until: OffsetDateTime,
        withdrawn_at_end: bool,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.store.begin_write().await?;
        waits::record_ending(tx.connection(), set, until, withdrawn_at_end).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WakeRequest;
    use assent_changeset::parse_tool_calls;
    use serde_json::json;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    async fn engine() -> Engine {
        let engine = crate::testing::send_engine().await;
        engine
            .set_categories("a", &["ops".to_owned()], T0)
            .await
            .expect("an agent");
        engine
    }

    /// A wake of agent `a` on `target` with `calls` sends at `now`: its set's id.
    async fn queue(
        engine: &Engine,
        target: &str,
        run: &str,
        calls: usize,
        now: OffsetDateTime,
    ) -> Uuid {
        let document: Vec<Value> = (0..calls)
            .map(|n| json!({"type": "tool_use", "id": format!("c{n}"), "name": "send", "input": {"n": n}}))
            .collect();
        let calls = parse_tool_calls(&json!(document)).expect("calls");
        let request = WakeRequest::new("a", Target::new("service", target), run, calls);
        let wake = engine.wakes().wake(request, now).await.expect("a wake");
        wake.change_set.expect("a set").id
    }

    #[tokio::test]
    async fn a_set_reads_with_its_decisions_jobs_and_wait_in_one_view() {
        let engine = engine().await;
        let first = queue(&engine, "api", "run-1", 2, T0).await;
        let later = T0 + time::Duration::seconds(1);
        let second = queue(&engine, "db", "run-2", 1, later).await;
        engine
            .confirmations()
            .reject_item(ItemRef::new(first, 1), Some("not now".to_owned()), T0)
            .await
            .expect("rejected");
        let until = T0 + time::Duration::seconds(42);
        engine.record_wait(first, until).await.expect("recorded");

        let open = engine
            .set_records(&PendingFilter::default(), None)
            .await
            .expect("listed");
        let ids: Vec<Uuid> = open.iter().map(|r| r.set.id).collect();
        assert_eq!(ids, [second, first], "newest first");
        let record = &open[1];
        assert_eq!(record.waits_until, Some(until));
        assert_eq!(record.decisions.len(), 1);
        assert_eq!(record.decisions[0].item_index, 1);
        assert!(record.jobs.is_empty() && record.changed_tools.is_empty());
        assert_eq!(open[0].waits_until, None);

        let about_db = PendingFilter::all().target(Target::new("service", "db"));
        let only = engine.set_records(&about_db, None).await.expect("listed");
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].set.id, second);
        let resolved = engine
            .set_records(&PendingFilter::default(), Some(ChangeSetStatus::Resolved))
            .await
            .expect("listed");
        assert!(resolved.is_empty());

        let detail = engine.set_detail(first).await.expect("shown");
        assert_eq!(detail.record, *record);
        assert_eq!((detail.shadows.len(), detail.undoes.clone()), (0, None));
        assert_eq!(
            engine.decisions_of(first).await.expect("read"),
            record.decisions
        );
        let missing = Uuid::from_u128(7);
        assert!(matches!(
            engine.set_detail(missing).await,
            Err(ConfirmError::ChangeSetNotFound(id)) if id == missing
        ));
        assert_eq!(engine.change_set(missing).await.expect("read"), None);

        let recent = engine.recent_decisions("a", None, 10).await.expect("read");
        assert_eq!(recent.decisions, record.decisions);
        assert!(recent.runs.is_empty() && recent.shadows.is_empty());
        let served = engine
            .served_item(ItemRef::new(first, 0))
            .await
            .expect("read")
            .expect("an item");
        assert_eq!(served.held, None);
        assert_eq!(
            engine
                .served_item(ItemRef::new(first, 9))
                .await
                .expect("read"),
            None
        );
    }

    #[tokio::test]
    async fn a_set_id_resolves_from_a_prefix_and_a_bad_one_says_why() {
        let engine = engine().await;
        let set = queue(&engine, "api", "run-1", 1, T0).await;
        let prefix = &set.simple().to_string()[..8];
        assert_eq!(engine.resolve_set_id(prefix).await.expect("found"), set);
        let short = engine.resolve_set_id("abc").await.expect_err("too short");
        assert!(
            matches!(
                short,
                ConfirmError::Store(assent_store::StoreError::InvalidChangeSetId { .. })
            ),
            "{short:?}"
        );
        let open = engine
            .open_sets(&PendingFilter::default())
            .await
            .expect("read");
        assert_eq!(open.len(), 1);
        assert!(engine.list_jobs(true).await.expect("read").is_empty());
        assert!(
            engine
                .approved_jobs("a", &Target::new("service", "api"))
                .await
                .expect("read")
                .is_empty()
        );
        assert!(
            engine
                .past_calls(Some("a"), T0)
                .await
                .expect("read")
                .is_empty()
        );
        let ours = Target::new("service", "api");
        assert_eq!(
            other_target_of_host(engine.store(), "ops", &ours)
                .await
                .expect("read"),
            None
        );
        assert_eq!(
            item_fingerprint(engine.store(), "no-such-operation")
                .await
                .expect("read"),
            None
        );
    }
}
