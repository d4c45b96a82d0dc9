//! Standing grants: a parent's "always" for a sub-agent's tool, and a person's "yes,
//! for this session" for a coding agent's calls. The CLI (`assent grants`, `assent
//! grants revoke ID`), the demos and the hook read and revoke them through these
//! [`Admin`] methods, never the store's tables; a revocation is one transaction
//! (the grant, its consent chain entry and its outbox message, or none of them).
//!
//! A grant covers only the calls of the agent it was given to: the session lookup a
//! hook makes ([`covering_session_grant`]) is keyed by that agent, on every call.

use crate::{Admin, ConfirmError};
use assent_store::{Connection, delegation};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

pub use crate::session::suggested_session_pattern;
pub use assent_store::delegation::{Grant, GrantFilter, Revocation};

impl Admin<'_> {
    /// The grants `filter` names, oldest first.
    pub async fn grants(&self, filter: &GrantFilter) -> Result<Vec<Grant>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(delegation::list_grants(&mut conn, filter).await?)
    }

    /// Revokes grant `id` at `now`, in one transaction with its consent chain entry and
    /// its outbox message (other devices must honour it too). Returns what revoking
    /// found: [`Revocation::Revoked`], or, writing nothing,
    /// [`Revocation::AlreadyRevoked`] or [`Revocation::NotFound`].
    #[tracing::instrument(skip(self))]
    pub async fn revoke_grant(
        &self,
        id: Uuid,
        now: OffsetDateTime,
    ) -> Result<Revocation, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let revocation = delegation::revoke_grant(tx.connection(), id, now).await?;
        tx.commit().await?;
        Ok(revocation)
    }
}

/// The first active session grant of agent `agent` (and no other agent) for `tool` in
/// coding-agent session `session` that covers a call with `args` in workspace
/// `target_id`, oldest first; `None` when none does. It reads on the caller's
/// connection because the hook looks the grant up and runs the call under it in one
/// write transaction on the target: a revocation committed before it is seen, and one
/// after it finds the run already recorded.
pub async fn covering_session_grant(
    conn: &mut Connection,
    agent: &str,
    session: &str,
    tool: &str,
    args: &Value,
    target_id: &str,
) -> Result<Option<Grant>, ConfirmError> {
    Ok(delegation::covering_session_grant(conn, agent, session, tool, args, target_id).await?)
}

/// What a session grant given without a pattern binds of a call's `args`: its command
/// (and how it runs) or its path, never the agent's free-text `description`
/// (`assent_store::delegation::session_binding`, which the hook and the proof match
/// with). A door shows it before the person answers.
pub fn session_binding(args: &Value) -> Value {
    delegation::session_binding(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;
    use serde_json::json;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    use crate::testing::bare_engine as engine;

    /// Agent `agent`'s session grant of `Bash` in session `s-1`, for `git status*`.
    fn session_grant(agent: &str) -> Grant {
        Grant {
            id: Uuid::from_u128(1),
            agent_id: Some(agent.to_owned()),
            agent_path: agent.to_owned(),
            tool_name: "Bash".to_owned(),
            args_pattern: None,
            correlation_id: Uuid::from_u128(2).to_string(),
            created_at: T0,
            revoked_at: None,
            session_id: Some("s-1".to_owned()),
            call_pattern: Some("Bash(git status*)".to_owned()),
        }
    }

    /// Stores `grant`, given by confirming a call in workspace `/w`.
    async fn stored(engine: &Engine, grant: &Grant) {
        let mut tx = engine.store().begin_write().await.expect("a transaction");
        let set = assent_domain::ChangeSet::new(assent_domain::NewChangeSet {
            id: Uuid::from_u128(9),
            agent_id: grant.agent_path.clone(),
            target: assent_domain::Target::new("workspace", "/w"),
            thread_id: "t".into(),
            run_key: "r".into(),
            items: vec![assent_domain::ChangeItem::new(
                "Bash",
                json!({"command": "git status"}),
                "Bash: git status",
            )],
            created_at: T0,
        })
        .expect("a set");
        assent_store::change_sets::insert(tx.connection(), &set, T0)
            .await
            .expect("set stored");
        let decision = assent_domain::ChangeDecision {
            id: Uuid::parse_str(&grant.correlation_id).expect("a decision id"),
            change_set_id: set.id,
            item_index: 0,
            agent_id: set.agent_id.clone(),
            target_kind: "workspace".into(),
            target_id: "/w".into(),
            tool_name: "Bash".into(),
            verdict: assent_domain::Verdict::Confirmed,
            reason: None,
            edited_args: None,
            human_summary: "Bash: git status".into(),
            args: json!({"command": "git status"}),
            created_at: T0,
            vector_clock: assent_domain::VectorClock::default(),
            decided_by: None,
        };
        assent_store::decisions::insert(tx.connection(), &decision, T0)
            .await
            .expect("decision stored");
        delegation::insert_grant(tx.connection(), grant, T0)
            .await
            .expect("stored");
        tx.commit().await.expect("committed");
    }

    async fn covering(engine: &Engine, agent: &str) -> Option<Grant> {
        covering_in(engine, agent, "/w").await
    }

    /// The grant covering `git status --short` of session `s-1` in `workspace`.
    async fn covering_in(engine: &Engine, agent: &str, workspace: &str) -> Option<Grant> {
        let mut conn = engine
            .store()
            .read_connection()
            .await
            .expect("a connection");
        let args = json!({"command": "git status --short"});
        covering_session_grant(&mut conn, agent, "s-1", "Bash", &args, workspace)
            .await
            .expect("read")
    }

    #[tokio::test]
    async fn a_session_grant_covers_its_own_agent_only_until_it_is_revoked_once() {
        let engine = engine().await;
        let grant = session_grant("a");
        stored(&engine, &grant).await;
        assert_eq!(covering(&engine, "a").await.map(|g| g.id), Some(grant.id));
        assert_eq!(covering(&engine, "b").await, None, "another agent's grant");
        // Issue 52: the grant covers the workspace the person saw, no other.
        assert_eq!(
            covering_in(&engine, "a", "/elsewhere").await,
            None,
            "another workspace"
        );
        assert_eq!(
            engine
                .admin()
                .grants(&GrantFilter::default())
                .await
                .expect("listed"),
            std::slice::from_ref(&grant)
        );

        let later = T0 + time::Duration::minutes(5);
        let Revocation::Revoked(revoked) = engine
            .admin()
            .revoke_grant(grant.id, later)
            .await
            .expect("ok")
        else {
            panic!("not revoked");
        };
        assert_eq!(revoked.revoked_at, Some(later));
        assert!(matches!(
            engine.admin().revoke_grant(grant.id, later).await.expect("ok"),
            Revocation::AlreadyRevoked(g) if g.revoked_at == Some(later)
        ));
        assert_eq!(
            engine
                .admin()
                .revoke_grant(Uuid::nil(), later)
                .await
                .expect("ok"),
            Revocation::NotFound
        );
        assert_eq!(covering(&engine, "a").await, None, "revoked");
        assert!(
            engine
                .admin()
                .grants(&GrantFilter::default())
                .await
                .expect("listed")
                .is_empty()
        );
        let all = GrantFilter {
            include_revoked: true,
            ..GrantFilter::default()
        };
        assert_eq!(
            engine.admin().grants(&all).await.expect("listed"),
            [revoked]
        );
    }
}
