//! What happened, read the same way by every door: the audit trail (`assent audit`,
//! `GET /api/audit`, the demos), the consent chain's head (`assent audit head`, `GET
//! /api/audit/head`), the proof anyone can run on the database (`assent audit verify`,
//! `GET /api/audit/verify`), and the change feed the server, `assent serve --notify`
//! and `assent review` follow to learn of writes made by other processes. The doors
//! call these [`Engine`] methods, never the store's tables, so `audit verify` proves
//! the same thing whichever door asks.
//!
//! The one record a door writes of its own accord, a coding agent's after event (what
//! the agent reports it ran), is [`record_agent_run`]: one transaction.

use crate::{Admin, ConfirmError, Engine};
use assent_domain::{ChangeDecision, ChangeSet};
use assent_store::{Store, agents, audit, chain, change_feed, proof, verified_heads};
use assent_tools::AuditRecord;
use uuid::Uuid;

pub use assent_store::audit::AuditFilter;
pub use assent_store::chain::Head;
pub use assent_store::proof::{ProofRule, Report, VerifyOptions, Violation};
pub use assent_store::verified_heads::VerifiedHead;

/// What the change feed says after a position: the sets written since, each once, in
/// the order of their first write, and the position to read on from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeedPage {
    /// The change sets written after the position asked for.
    pub sets: Vec<Uuid>,
    /// Where to read on from (the position asked for when nothing was written).
    pub position: i64,
}

impl Admin<'_> {
    /// The audit records `filter` names, in the order they were written (at most
    /// `limit`, the newest ones).
    pub async fn audit_trail(
        &self,
        filter: &AuditFilter,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(audit::list(&mut conn, filter, limit).await?)
    }

    /// This device's consent chain head: what to write down, publish, or compare with
    /// [`VerifyOptions::head`] later.
    pub async fn chain_head(&self) -> Result<Head, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(chain::head(&mut conn).await?)
    }

    /// The proof of `assent audit verify`: the chain intact, every chained row as its
    /// entry says, and every effect with the consent it needed, as `options` asks. The
    /// report lists every violation; it is the same for every door.
    ///
    /// It checks the entries after the head the last clean verify stored, with what
    /// they need of the ones before (the report's `started_after`), or the whole chain
    /// under [`VerifyOptions::full`], on the first verify, or when the stored head is
    /// no longer on the chain (a violation too). A verify that found nothing wrong,
    /// over every effect (no `since`), stores where it stopped; one that found
    /// anything never moves the stored head. A database it cannot write to is still
    /// verified (the next verify starts from the older head).
    #[tracing::instrument(skip_all, fields(full = options.full))]
    pub async fn verify_proof(&self, options: &VerifyOptions) -> Result<Report, ConfirmError> {
        let report = {
            let mut conn = self.engine.store.read_connection().await?;
            proof::verify(&mut conn, options).await?
        };
        if report.verified() && options.since.is_none() {
            let saved = async {
                let mut tx = self.engine.store.begin_write().await?;
                verified_heads::save(tx.connection(), &report.chains, self.engine.now()).await?;
                tx.commit().await
            }
            .await;
            if let Err(error) = saved {
                tracing::warn!(%error, "the verified head was not stored: the next verify starts from the one before");
            }
        }
        Ok(report)
    }
}

impl Engine {
    /// The newest position in the change feed (0 when empty): where a new follower
    /// starts.
    pub async fn feed_position(&self) -> Result<i64, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(change_feed::latest(&mut conn).await?)
    }

    /// The change sets written after feed position `after`, from at most `limit` feed
    /// entries.
    pub async fn feed_since(&self, after: i64, limit: i64) -> Result<FeedPage, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let (sets, position) = change_feed::since(&mut conn, after, limit).await?;
        Ok(FeedPage { sets, position })
    }
}

impl Admin<'_> {
    /// Drops all but the newest entries of the change feed (what a long-running
    /// follower does now and then), in one transaction. Returns how many went.
    #[tracing::instrument(skip(self))]
    pub async fn prune_feed(&self) -> Result<u64, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let pruned = change_feed::prune(tx.connection()).await?;
        tx.commit().await?;
        Ok(pruned)
    }
}

/// Appends `record` to the audit trail (with its outbox message) in one transaction,
/// when its agent exists ([`ConfirmError::UnknownAgent`] otherwise, and nothing is
/// written); returns the record's row id. What a coding agent's hook writes for an
/// after event: what the agent reports it ran. It takes the store, not an [`Engine`],
/// because that door records what ran without building the engine of the call's host.
#[tracing::instrument(skip_all, fields(agent = %record.agent_id, tool = %record.tool_name))]
pub async fn record_agent_run(store: &Store, record: &AuditRecord) -> Result<i64, ConfirmError> {
    let mut tx = store.begin_write().await?;
    if agents::policy_at(tx.connection(), &record.agent_id, record.created_at)
        .await?
        .is_none()
    {
        return Err(ConfirmError::UnknownAgent(record.agent_id.clone()));
    }
    let id = audit::insert(tx.connection(), record).await?;
    tx.commit().await?;
    Ok(id)
}

/// What the coding agents' hooks recorded of their sessions (`assent sessions`): the
/// newest `limit` hook change sets (threads `thread_prefix…`) with their decisions, and
/// the newest `limit` audit records of hook calls (run keys `run_key_prefix…`), of
/// agent `agent` when given, oldest first.
pub type HookSessionRecords = (Vec<(ChangeSet, Vec<ChangeDecision>)>, Vec<AuditRecord>);

impl Admin<'_> {
    /// See [`HookSessionRecords`].
    pub async fn hook_session_records(
        &self,
        thread_prefix: &'static str,
        run_key_prefix: &'static str,
        agent: Option<&str>,
        limit: u32,
    ) -> Result<HookSessionRecords, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        let audit = audit::with_run_key_prefix(&mut conn, run_key_prefix, agent, limit).await?;
        let sets =
            assent_store::change_sets::with_thread_prefix(&mut conn, thread_prefix, agent, limit)
                .await?;
        let mut decided = Vec::with_capacity(sets.len());
        for set in sets {
            let decisions = assent_store::decisions::for_change_set(&mut conn, set.id).await?;
            decided.push((set, decisions));
        }
        Ok((decided, audit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WakeRequest;
    use assent_changeset::parse_tool_calls;
    use assent_domain::{OperationId, Target};
    use assent_tools::AuditKind;
    use serde_json::json;
    use time::OffsetDateTime;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    use crate::testing::send_engine as engine;

    fn ran(agent: &str) -> AuditRecord {
        AuditRecord {
            operation_id: OperationId::derive("run-1", "send", &json!({}), &["api"]),
            run_key: "run-1".to_owned(),
            tool_name: "send".to_owned(),
            agent_id: agent.to_owned(),
            target_kind: "service".to_owned(),
            target_id: "api".to_owned(),
            kind: AuditKind::Result,
            args: json!({}),
            success: None,
            detail: Some("ran by the agent".to_owned()),
            vector_clock: None,
            created_at: T0,
            allowed_by: None,
            refused_by: None,
            decided_by: None,
        }
    }

    #[tokio::test]
    async fn an_agents_run_is_recorded_once_for_a_known_agent_and_the_proof_still_holds() {
        let engine = engine().await;
        let empty = engine.admin().chain_head().await.expect("a head");
        assert_eq!((empty.entries, empty.hash.as_str()), (0, chain::GENESIS));

        let refused = record_agent_run(engine.store(), &ran("nobody")).await;
        assert!(
            matches!(&refused, Err(ConfirmError::UnknownAgent(a)) if a == "nobody"),
            "{refused:?}"
        );
        let all = engine
            .admin()
            .audit_trail(&AuditFilter::All, 10)
            .await
            .expect("read");
        assert!(all.is_empty(), "nothing written: {all:?}");

        engine
            .set_categories("a", &["ops".to_owned()], T0)
            .await
            .expect("created");
        let before = engine.admin().chain_head().await.expect("a head");
        record_agent_run(engine.store(), &ran("a"))
            .await
            .expect("recorded");
        let run = engine
            .admin()
            .audit_trail(&AuditFilter::Run("run-1".to_owned()), 10)
            .await
            .expect("read");
        assert_eq!(run, [ran("a")]);
        let other = engine
            .admin()
            .audit_trail(&AuditFilter::Target(Target::new("service", "db")), 10)
            .await
            .expect("read");
        assert!(other.is_empty());
        let after = engine.admin().chain_head().await.expect("a head");
        assert_eq!(after.entries, before.entries + 1, "the record is chained");

        let report = engine
            .admin()
            .verify_proof(&VerifyOptions::default())
            .await
            .expect("proven");
        assert!(report.verified(), "{report:?}");
        assert_eq!((report.entries, &report.head), (after.entries, &after.hash));
        let stale = VerifyOptions {
            head: Some("f".repeat(64)),
            ..VerifyOptions::default()
        };
        let report = engine.admin().verify_proof(&stale).await.expect("proven");
        assert!(!report.verified(), "a head the chain never had: {report:?}");
    }

    #[tokio::test]
    async fn the_feed_names_each_written_set_once_from_where_a_follower_stands() {
        let engine = engine().await;
        assert_eq!(engine.feed_position().await.expect("read"), 0);
        let nothing = engine.feed_since(0, 10).await.expect("read");
        assert_eq!(
            nothing,
            FeedPage {
                sets: Vec::new(),
                position: 0
            }
        );

        engine
            .set_categories("a", &["ops".to_owned()], T0)
            .await
            .expect("created");
        let calls = parse_tool_calls(&json!([{"type": "tool_use", "id": "c1",
            "name": "send", "input": {}}]))
        .expect("calls");
        let request = WakeRequest::new("a", Target::new("service", "api"), "run-1", calls);
        let wake = engine.wakes().wake(request, T0).await.expect("woken");
        let set = wake.change_set.expect("queued").id;

        let page = engine.feed_since(0, 10).await.expect("read");
        assert_eq!(page.sets, [set]);
        assert_eq!(page.position, engine.feed_position().await.expect("read"));
        let later = engine.feed_since(page.position, 10).await.expect("read");
        assert_eq!(later.sets, Vec::<Uuid>::new());
        assert_eq!(later.position, page.position);
        assert_eq!(
            engine.admin().prune_feed().await.expect("pruned"),
            0,
            "few entries are kept"
        );
        assert_eq!(engine.feed_since(0, 10).await.expect("read").sets, [set]);
    }
}
