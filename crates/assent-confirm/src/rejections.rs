//! Remembered rejections, said aloud. A call a person rejected is refused without asking
//! anyone when its agent makes exactly that call again within the agent's window (the
//! wake's planner decides; `wake.rs` records each such refusal in the audit trail with
//! `refusedBy: {"rejectedBefore": DECISION_ID}`). Here a person lists what is
//! remembered ([`Engine::remembered_rejections`]), forgets it
//! ([`Admin::forget_rejection`], [`Admin::forget_rejections`]), sets an agent's window
//! ([`Admin::set_rejection_window`]) and reads the refusals made since some time
//! ([`Engine::refused_again`]). Every change is the agent's rules changing: one
//! transaction, entered on the consent chain with who made it.

use crate::{Admin, ConfirmError, Engine};
use assent_domain::{ChangeDecision, Uuid};
use assent_store::{decisions, rejections as stored};
use assent_tools::AuditRecord;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

pub use assent_store::rejections::{DEFAULT_WINDOW, RejectionMemory};

/// What an audit record of a call refused again says refused it.
pub fn refused_by(decision_id: Uuid) -> Value {
    json!({ "rejectedBefore": decision_id.to_string() })
}

/// The rejection an audit record's `refusedBy` names, when it names one.
pub fn rejected_before(record: &AuditRecord) -> Option<Uuid> {
    let id = record
        .refused_by
        .as_ref()?
        .get("rejectedBefore")?
        .as_str()?;
    Uuid::parse_str(id).ok()
}

/// A call refused again and the rejection that refused it (`None` when that decision
/// is not on this database).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RefusedAgain {
    /// The refusal's audit record.
    pub record: AuditRecord,
    /// The remembered rejection it names.
    pub rejection: Option<ChangeDecision>,
}

impl Engine {
    /// The rejections remembered now (agent `agent`'s, or every agent's), newest
    /// first. An unknown agent is [`ConfirmError::UnknownAgent`].
    pub async fn remembered_rejections(
        &self,
        agent: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        if let Some(agent) = agent
            && stored::memory(&mut conn, agent).await?.is_none()
        {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        }
        Ok(stored::remembered(&mut conn, agent, now).await?)
    }

    /// Agent `agent`'s rejection memory. An unknown agent is
    /// [`ConfirmError::UnknownAgent`].
    pub async fn rejection_memory(&self, agent: &str) -> Result<RejectionMemory, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        stored::memory(&mut conn, agent)
            .await?
            .ok_or_else(|| ConfirmError::UnknownAgent(agent.to_owned()))
    }
}

impl Admin<'_> {
    /// Forgets the remembered rejection `id` (a whole id, or the first 8 or more hex
    /// digits of exactly one remembered rejection's): its agent's identical calls are
    /// asked again. Entered on the consent chain as a change of the agent's rules by
    /// `by`, in one transaction. Returns the rejection forgotten; one that is not
    /// remembered (unknown, too old, forgotten already) is
    /// [`ConfirmError::RejectionNotFound`], and nothing is written.
    #[tracing::instrument(skip(self))]
    pub async fn forget_rejection(
        &self,
        id: &str,
        by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<ChangeDecision, ConfirmError> {
        let wanted = id.trim().to_ascii_lowercase();
        let not_found = || ConfirmError::RejectionNotFound(id.to_owned());
        let prefix_ok =
            wanted.len() >= 8 && wanted.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !prefix_ok {
            return Err(not_found());
        }
        let mut tx = self.engine.store.begin_write().await?;
        let found = match Uuid::parse_str(&wanted) {
            Ok(id) => decisions::by_id(tx.connection(), id).await?,
            Err(_) => {
                let remembered = stored::remembered(tx.connection(), None, now).await?;
                let mut matching = remembered
                    .into_iter()
                    .filter(|d| d.id.to_string().starts_with(&wanted));
                match (matching.next(), matching.next()) {
                    (Some(one), None) => Some(one),
                    _ => None,
                }
            }
        };
        let Some(decision) = found else {
            return Err(not_found());
        };
        let Some(mut memory) = stored::memory(tx.connection(), &decision.agent_id).await? else {
            return Err(not_found());
        };
        if !memory.remembers(&decision, now) {
            return Err(not_found());
        }
        memory.forgotten.insert(decision.id);
        stored::set_memory(tx.connection(), &decision.agent_id, &memory, by, now).await?;
        tx.commit().await?;
        tracing::info!(rejection = %decision.id, agent = %decision.agent_id, "rejection forgotten");
        Ok(decision)
    }

    /// Forgets every rejection remembered now (agent `agent`'s, or every agent's), each
    /// agent's change entered on the consent chain by `by`, in one transaction. Returns
    /// the rejections forgotten. An unknown agent is [`ConfirmError::UnknownAgent`].
    #[tracing::instrument(skip(self))]
    pub async fn forget_rejections(
        &self,
        agent: Option<&str>,
        by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Vec<ChangeDecision>, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        if let Some(agent) = agent
            && stored::memory(tx.connection(), agent).await?.is_none()
        {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        }
        let remembered = stored::remembered(tx.connection(), agent, now).await?;
        let mut agents: Vec<&str> = remembered.iter().map(|d| d.agent_id.as_str()).collect();
        agents.sort_unstable();
        agents.dedup();
        for agent in agents {
            let Some(mut memory) = stored::memory(tx.connection(), agent).await? else {
                continue;
            };
            // Everything decided up to now: the ids forgotten one by one are covered.
            memory.forgotten_before = Some(now);
            memory.forgotten.clear();
            stored::set_memory(tx.connection(), agent, &memory, by, now).await?;
        }
        tx.commit().await?;
        tracing::info!(forgotten = remembered.len(), "rejections forgotten");
        Ok(remembered)
    }

    /// Sets how long agent `agent`'s rejections are remembered (zero: never, so an
    /// identical call is asked again at once), entered on the consent chain by `by`, in
    /// one transaction. Returns whether it changed. An unknown agent is
    /// [`ConfirmError::UnknownAgent`]; a negative window [`ConfirmError::InvalidSetting`].
    #[tracing::instrument(skip(self))]
    pub async fn set_rejection_window(
        &self,
        agent: &str,
        window: Duration,
        by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        if window.is_negative() {
            return Err(ConfirmError::InvalidSetting(format!(
                "a rejection window cannot be negative ({window})"
            )));
        }
        let mut tx = self.engine.store.begin_write().await?;
        let Some(mut memory) = stored::memory(tx.connection(), agent).await? else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        memory.window = Some(window);
        let changed = stored::set_memory(tx.connection(), agent, &memory, by, now)
            .await?
            .unwrap_or(false);
        tx.commit().await?;
        Ok(changed)
    }
}

impl Engine {
    /// Every confirmation with edited arguments, with its set's run key: what the audit
    /// trail's listing needs to show who edited a record's arguments and what the agent
    /// proposed ([`assent_store::decisions::edited_with_run_keys`]).
    pub async fn edited_confirmations(
        &self,
    ) -> Result<Vec<(String, ChangeDecision)>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(decisions::edited_with_run_keys(&mut conn).await?)
    }

    /// The calls refused again since `since` (agent `agent`'s, or every agent's),
    /// newest first, at most `limit`, each with the rejection that refused it: what
    /// `assent review`, `history` and the page show as "refused again" lines.
    pub async fn refused_again(
        &self,
        agent: Option<&str>,
        since: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<RefusedAgain>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let records = stored::refusals(&mut conn, agent, since, limit).await?;
        let mut found = Vec::with_capacity(records.len());
        for record in records {
            let rejection = match rejected_before(&record) {
                Some(id) => decisions::by_id(&mut conn, id).await?,
                None => None,
            };
            found.push(RefusedAgain { record, rejection });
        }
        Ok(found)
    }
}
