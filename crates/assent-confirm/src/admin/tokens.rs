//! The API's tokens: made (the secret shown once), listed (never a secret), revoked,
//! and looked up by the hash of a presented secret.

use crate::{Admin, ConfirmError};
use assent_store::Store;
use assent_store::tokens::{self, ApiToken, IssuedToken, Role};
use time::OffsetDateTime;

/// The unrevoked token whose secret is `secret`, if any: the store's lookup by the
/// secret's hash, unchanged (a secret without the generated prefix is not looked up).
/// For a door that holds the store but no engine (the MCP gateway's HTTP door, which
/// serves several gateways' engines); with an engine, call
/// [`Admin::authenticate_token`].
pub async fn authenticate_token(
    store: &Store,
    secret: &str,
) -> Result<Option<ApiToken>, ConfirmError> {
    let mut conn = store.read_connection().await?;
    Ok(tokens::authenticate(&mut conn, secret).await?)
}

impl Admin<'_> {
    /// Makes a token of `role`, in one transaction. An agent token needs `agent`, an
    /// agent that exists; the other roles take none (refused as
    /// `ConfirmError::Store(StoreError::InvalidToken)`, naming what was wrong). The
    /// returned secret is the only copy: the database keeps its hash.
    #[tracing::instrument(skip(self))]
    pub async fn issue_token(
        &self,
        role: Role,
        agent: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<IssuedToken, ConfirmError> {
        self.issue_named_token(role, agent, None, now).await
    }

    /// [`Admin::issue_token`] for a token issued to `person`, who decides through it
    /// (`token:ID (PERSON)`): a reviewer or admin token; an agent token names nobody.
    /// A token naming no person is refused for items needing more than one person.
    #[tracing::instrument(skip(self))]
    pub async fn issue_named_token(
        &self,
        role: Role,
        agent: Option<&str>,
        person: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<IssuedToken, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let issued = tokens::issue_named(tx.connection(), role, agent, person, now).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// Every token, revoked ones included, oldest first; never a secret.
    pub async fn tokens(&self) -> Result<Vec<ApiToken>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(tokens::list(&mut conn).await?)
    }

    /// Revokes token `id` (its id, not its secret), in one transaction: `None` when no
    /// token has that id. Revoking a revoked token keeps its first revocation time.
    #[tracing::instrument(skip(self))]
    pub async fn revoke_token(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<ApiToken>, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let revoked = tokens::revoke(tx.connection(), id, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    /// The unrevoked token whose secret is `secret`, if any (see
    /// [`authenticate_token`]).
    pub async fn authenticate_token(&self, secret: &str) -> Result<Option<ApiToken>, ConfirmError> {
        authenticate_token(&self.engine.store, secret).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_store::StoreError;

    fn at(minute: i64) -> OffsetDateTime {
        time::macros::datetime!(2026-11-23 10:00 UTC) + time::Duration::minutes(minute)
    }

    use crate::testing::bare_engine as engine;

    #[tokio::test]
    async fn a_token_is_issued_listed_authenticated_and_revoked() {
        let engine = engine().await;
        let refused = engine
            .admin()
            .issue_token(Role::Agent, Some("nobody"), at(0))
            .await;
        assert!(
            matches!(refused, Err(ConfirmError::Store(StoreError::InvalidToken(ref why))) if why.contains("nobody")),
            "{refused:?}"
        );
        engine
            .set_categories("triage", &["work".to_owned()], at(0))
            .await
            .expect("agent");
        let issued = engine
            .admin()
            .issue_token(Role::Agent, Some("triage"), at(1))
            .await
            .expect("issued");
        assert_eq!(
            engine.admin().tokens().await.expect("list"),
            std::slice::from_ref(&issued.token)
        );
        let found = engine
            .admin()
            .authenticate_token(&issued.secret)
            .await
            .expect("lookup");
        assert_eq!(found.as_ref(), Some(&issued.token));
        assert_eq!(
            engine
                .admin()
                .authenticate_token("assent_wrong")
                .await
                .expect("lookup"),
            None
        );
        let revoked = engine
            .admin()
            .revoke_token(&issued.token.id, at(2))
            .await
            .expect("revoke")
            .expect("known");
        assert_eq!(revoked.revoked_at, Some(at(2)));
        assert_eq!(
            authenticate_token(engine.store(), &issued.secret)
                .await
                .expect("lookup"),
            None,
            "a revoked token opens nothing"
        );
        assert_eq!(
            engine
                .admin()
                .revoke_token("nope", at(3))
                .await
                .expect("revoke"),
            None
        );
    }
}
