//! The Slack app whose buttons approve and reject: connected (its settings and
//! secrets), disconnected, shown (never a secret); the Slack users who may decide and
//! the name each decides as; and each signed interaction payload accepted once.

use crate::{Admin, ConfirmError};
use assent_store::slack::{self, SlackSecrets, SlackSettings, SlackUser};
use time::OffsetDateTime;

/// What `assent slack status` shows, read together: the connected app's settings
/// (never its secrets) and the mapped users.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlackStatus {
    /// The connected app's channel, Web API, public URL and when it was connected;
    /// `None` when no app is connected.
    pub settings: Option<SlackSettings>,
    /// The Slack users who may decide, by user id.
    pub users: Vec<SlackUser>,
}

impl Admin<'_> {
    /// Connects the Slack app (or replaces the connected one's settings and secrets),
    /// in one transaction. The door checks the values first (a bot token, a channel
    /// id, http(s) URLs).
    #[tracing::instrument(skip_all, fields(channel = %settings.channel))]
    pub async fn connect_slack(
        &self,
        settings: &SlackSettings,
        secrets: &SlackSecrets,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        slack::connect(tx.connection(), settings, secrets).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Disconnects the Slack app, in one transaction: `false` when none was connected.
    /// The mapped users and posted messages stay.
    #[tracing::instrument(skip(self))]
    pub async fn disconnect_slack(&self) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let was = slack::disconnect(tx.connection()).await?;
        tx.commit().await?;
        Ok(was)
    }

    /// The connected app's settings and the mapped users, read on one connection.
    pub async fn slack_status(&self) -> Result<SlackStatus, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(SlackStatus {
            settings: slack::settings(&mut conn).await?,
            users: slack::users(&mut conn).await?,
        })
    }

    /// The connected app's settings and secrets, `None` when no app is connected: for
    /// checking a payload's signature and calling Slack's Web API, never for display.
    pub async fn slack_secrets(
        &self,
    ) -> Result<Option<(SlackSettings, SlackSecrets)>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(slack::secrets(&mut conn).await?)
    }

    /// Lets Slack user `user` decide as its name (replacing an earlier name), in one
    /// transaction. The door checks the id and the name first.
    #[tracing::instrument(skip(self, user), fields(user = %user.user_id))]
    pub async fn add_slack_user(
        &self,
        user: &SlackUser,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        slack::add_user(tx.connection(), user, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes Slack user `user_id`'s say away, in one transaction: `false` when they
    /// were not mapped.
    #[tracing::instrument(skip(self))]
    pub async fn remove_slack_user(&self, user_id: &str) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let removed = slack::remove_user(tx.connection(), user_id).await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// The Slack users who may decide, by user id.
    pub async fn slack_users(&self) -> Result<Vec<SlackUser>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(slack::users(&mut conn).await?)
    }

    /// The name Slack user `user_id` decides as, `None` when they are not mapped.
    pub async fn slack_user_name(&self, user_id: &str) -> Result<Option<String>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(slack::user_name(&mut conn, user_id).await?)
    }

    /// Accepts a signed interaction payload by the digest of its signature, in one
    /// transaction: `false` when the same one was accepted before (a replay, refused).
    /// Payloads received before `forget_before` are forgotten first (their timestamps
    /// are refused by then anyway). The door verifies the signature and its timestamp
    /// before this.
    #[tracing::instrument(skip_all)]
    pub async fn accept_slack_payload(
        &self,
        digest: &str,
        now: OffsetDateTime,
        forget_before: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let accepted = slack::accept_payload(tx.connection(), digest, now, forget_before).await?;
        tx.commit().await?;
        Ok(accepted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_app_and_its_users_are_set_shown_and_a_payload_is_accepted_once() {
        let engine = crate::testing::bare_engine().await;
        let now = time::macros::datetime!(2026-11-23 10:00 UTC);
        let empty = engine.admin().slack_status().await.expect("status");
        assert_eq!((empty.settings, empty.users.len()), (None, 0));
        assert!(
            !engine
                .admin()
                .disconnect_slack()
                .await
                .expect("nothing to disconnect")
        );
        let settings = SlackSettings {
            channel: "C1".to_owned(),
            api_url: "https://slack.com/api/".to_owned(),
            public_url: None,
            connected_at: now,
        };
        let secrets = SlackSecrets {
            bot_token: "xoxb-1".to_owned(),
            signing_secret: "s".to_owned(),
        };
        engine
            .admin()
            .connect_slack(&settings, &secrets)
            .await
            .expect("connects");
        let user = SlackUser {
            user_id: "U1".to_owned(),
            name: "alice".to_owned(),
        };
        engine
            .admin()
            .add_slack_user(&user, now)
            .await
            .expect("mapped");
        let status = engine.admin().slack_status().await.expect("status");
        assert_eq!(status.settings.as_ref(), Some(&settings));
        assert_eq!(status.users, std::slice::from_ref(&user));
        assert_eq!(engine.admin().slack_users().await.expect("users"), [user]);
        let (_, kept) = engine
            .admin()
            .slack_secrets()
            .await
            .expect("read")
            .expect("connected");
        assert_eq!(kept.signing_secret, "s");
        assert_eq!(
            engine
                .admin()
                .slack_user_name("U1")
                .await
                .expect("name")
                .as_deref(),
            Some("alice")
        );
        let forget = now - time::Duration::minutes(10);
        assert!(
            engine
                .admin()
                .accept_slack_payload("d1", now, forget)
                .await
                .expect("first")
        );
        assert!(
            !engine
                .admin()
                .accept_slack_payload("d1", now, forget)
                .await
                .expect("replay")
        );
        assert!(
            engine
                .admin()
                .remove_slack_user("U1")
                .await
                .expect("removed")
        );
        assert!(!engine.admin().remove_slack_user("U1").await.expect("gone"));
        assert_eq!(
            engine.admin().slack_user_name("U1").await.expect("name"),
            None
        );
        assert!(
            engine
                .admin()
                .disconnect_slack()
                .await
                .expect("disconnected")
        );
        assert!(
            engine
                .admin()
                .slack_secrets()
                .await
                .expect("read")
                .is_none()
        );
    }
}
