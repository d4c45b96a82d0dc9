//! The MCP gateway's client sessions: each gateway process records the session it
//! serves (opened, still running, ended), which session made each call it queued, and,
//! when a person confirms a call after its chat ended, whether it may still run
//! (the operator's run-after-disconnect word, set through [`Admin::set_run_after_disconnect`]).
//! And moving an agent's calls from a host a previous release named to the gateway's
//! own ([`rehost`]). The gateway writes these through the [`Admin`] methods here, each
//! one transaction, never the store's tables; no upstream MCP server runs inside any
//! of them.
//!
//! Two functions take the [`Store`] instead of an engine, because the gateway needs
//! them before its engine exists (the engine holds the host, and the host holds the
//! session guard): [`call_provenance`], what the host's session guard reads before a
//! confirmed call runs, and [`rehost`], what a gateway takes over when it starts.

use crate::{Admin, ConfirmError};
use assent_domain::Target;
use assent_store::{Store, mcp_sessions, rehost as stored_rehost};
use time::OffsetDateTime;
use uuid::Uuid;

pub use assent_store::mcp_sessions::CallSession;
pub use assent_store::rehost::Rehosted;

/// How long a gateway session may go without saying it runs before it counts as
/// ended (its gateway died): a few of its heartbeats.
pub const SESSION_STALE: time::Duration = time::Duration::seconds(30);

/// Whether the session that made a call ended by `now`: its client left (`ended_at`),
/// or its gateway was last seen (`seen_at`) [`SESSION_STALE`] or more before.
pub fn session_ended(
    seen_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    ended_at.or_else(|| (now - seen_at >= SESSION_STALE).then_some(seen_at))
}

impl Admin<'_> {
    /// Records the start of session `id` of agent `agent`'s gateway of server `server`
    /// at `now`, in one transaction.
    #[tracing::instrument(skip(self))]
    pub async fn open_client_session(
        &self,
        id: Uuid,
        agent: &str,
        server: &str,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        mcp_sessions::open(tx.connection(), id, agent, server, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that session `id` still runs at `now` (its gateway's heartbeat); an
    /// ended session stays ended.
    #[tracing::instrument(skip(self))]
    pub async fn client_session_seen(
        &self,
        id: Uuid,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        mcp_sessions::seen(tx.connection(), id, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that session `id`'s client left at `now`: a call it made and a person
    /// confirms later runs in no other session unless its tool may run after
    /// disconnect. Ending it again changes nothing.
    #[tracing::instrument(skip(self))]
    pub async fn end_client_session(
        &self,
        id: Uuid,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        mcp_sessions::end(tx.connection(), id, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that session `session` made the call of change set `change_set_id` (the
    /// first session recorded for a set keeps it).
    #[tracing::instrument(skip(self))]
    pub async fn record_client_call(
        &self,
        change_set_id: Uuid,
        session: Uuid,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        mcp_sessions::record_call(tx.connection(), change_set_id, session).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Where a confirmed call came from, read before it runs: what decides whether a call
/// confirmed after its chat ended may still run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallProvenance {
    /// The session that made the call, with when it was confirmed; `None` for a call
    /// of no recorded session (a task, or queued before sessions were recorded).
    pub made_by: Option<CallSession>,
    /// Whether the operator said the agent's calls of this tool may run after their
    /// chat ended (a name or `*` pattern matched as rules are).
    pub run_after_disconnect: bool,
}

/// The provenance of agent `agent`'s call of `tool` whose execution job runs under
/// `operation_id`, read on one connection. Takes the store because the gateway's
/// session guard, which reads it, is built before the engine that holds it.
pub async fn call_provenance(
    store: &Store,
    operation_id: &str,
    agent: &str,
    tool: &str,
) -> Result<CallProvenance, ConfirmError> {
    let mut conn = store.read_connection().await?;
    let made_by = mcp_sessions::of_operation(&mut conn, operation_id).await?;
    // Matched as rules are (`name_matches`): a pattern marks every tool it covers.
    let run_after_disconnect = mcp_sessions::run_after_disconnect_tools(&mut conn, agent)
        .await?
        .iter()
        .any(|marked| assent_tools::name_matches(marked, tool));
    Ok(CallProvenance {
        made_by,
        run_after_disconnect,
    })
}

/// Whether the operator said agent `agent`'s calls of `tool` may run after their chat
/// ended (`assent agent run-after-disconnect`, a name or `*` pattern matched as rules
/// are): such a call is kept for a person when its client stops waiting, not withdrawn.
pub async fn runs_after_disconnect(
    store: &Store,
    agent: &str,
    tool: &str,
) -> Result<bool, ConfirmError> {
    let mut conn = store.read_connection().await?;
    Ok(mcp_sessions::run_after_disconnect_tools(&mut conn, agent)
        .await?
        .iter()
        .any(|marked| assent_tools::name_matches(marked, tool)))
}

/// Moves agent `agent`'s items and jobs on `target` from host `from` to host `to`, and
/// copies `from`'s catalog to `to` with each tool's name prefixed by `tool_prefix`
/// (keeping its pins), in one write transaction. Unless `with_catalog`, a read first
/// looks whether `from` holds any item or job of the agent there, and nothing is
/// written (and nothing is [`Rehosted`]) when it holds none. Takes the store because a
/// gateway takes over what a previous release's host held before it opens its engine.
#[tracing::instrument(skip(store))]
pub async fn rehost(
    store: &Store,
    from: &str,
    to: &str,
    agent: &str,
    target: &Target,
    tool_prefix: &str,
    with_catalog: bool,
) -> Result<Rehosted, ConfirmError> {
    if !with_catalog {
        let mut conn = store.read_connection().await?;
        if !stored_rehost::holds(&mut conn, from, agent, target).await? {
            return Ok(Rehosted::default());
        }
    }
    let mut tx = store.begin_write().await?;
    let moved =
        stored_rehost::rehost(tx.connection(), from, to, agent, target, tool_prefix).await?;
    tx.commit().await?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;
    use sqlx::Row;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);
    const SESSION: Uuid = Uuid::from_u128(7);

    use crate::testing::bare_engine as engine;

    /// Session `SESSION`'s `seen_at` and `ended_at` as stored.
    async fn session_row(engine: &Engine) -> (String, Option<String>) {
        let mut conn = engine
            .store()
            .read_connection()
            .await
            .expect("a connection");
        let row = sqlx::query("SELECT seen_at, ended_at FROM mcp_sessions WHERE id = $1")
            .bind(SESSION.to_string())
            .fetch_one(&mut *conn)
            .await
            .expect("the session");
        (
            row.try_get("seen_at").expect("seen_at"),
            row.try_get("ended_at").expect("ended_at"),
        )
    }

    #[tokio::test]
    async fn a_session_is_seen_until_it_ends_and_stays_ended() {
        let engine = engine().await;
        engine
            .admin()
            .open_client_session(SESSION, "a", "files", T0)
            .await
            .expect("opened");
        let (opened, ended) = session_row(&engine).await;
        assert_eq!(ended, None);
        let seen = T0 + time::Duration::seconds(5);
        engine
            .admin()
            .client_session_seen(SESSION, seen)
            .await
            .expect("seen");
        let (seen_at, _) = session_row(&engine).await;
        assert_ne!(seen_at, opened, "the heartbeat moved it");
        engine
            .admin()
            .record_client_call(Uuid::from_u128(1), SESSION)
            .await
            .expect("recorded");
        engine
            .admin()
            .record_client_call(Uuid::from_u128(1), SESSION)
            .await
            .expect("recorded again: kept as it was");
        let end = T0 + time::Duration::seconds(9);
        engine
            .admin()
            .end_client_session(SESSION, end)
            .await
            .expect("ended");
        let ended = session_row(&engine).await;
        engine
            .admin()
            .client_session_seen(SESSION, end + time::Duration::seconds(5))
            .await
            .expect("seen");
        engine
            .admin()
            .end_client_session(SESSION, end + time::Duration::seconds(5))
            .await
            .expect("ended again");
        assert_eq!(
            session_row(&engine).await,
            ended,
            "an ended session stays ended"
        );
        assert!(ended.1.is_some());
    }

    #[tokio::test]
    async fn a_calls_provenance_names_the_operators_word_for_its_agent_only() {
        let engine = engine().await;
        engine
            .set_categories("a", &["ops".to_owned()], T0)
            .await
            .expect("created");
        engine
            .admin()
            .set_run_after_disconnect("a", "files__*", true, T0)
            .await
            .expect("said");
        let of = |agent: &'static str, tool: &'static str| {
            let store = engine.store().clone();
            async move {
                call_provenance(&store, "no-such-operation", agent, tool)
                    .await
                    .expect("read")
            }
        };
        let marked = of("a", "files__write").await;
        assert_eq!(marked.made_by, None, "no job, no recorded session");
        assert!(marked.run_after_disconnect);
        assert!(!of("a", "mail__send").await.run_after_disconnect);
        assert!(!of("b", "files__write").await.run_after_disconnect);
    }

    #[tokio::test]
    async fn rehosting_nothing_writes_nothing() {
        let engine = engine().await;
        let target = Target::new("mcp", "files");
        for with_catalog in [false, true] {
            let moved = rehost(
                engine.store(),
                "mcp_files",
                "mcpa_a_x_files",
                "a",
                &target,
                "",
                with_catalog,
            )
            .await
            .expect("moved");
            assert_eq!(moved, Rehosted::default());
        }
    }
}
