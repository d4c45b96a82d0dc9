//! The Telegram bot whose buttons approve and reject: connected (its settings and
//! token), disconnected, shown (never the token); the Telegram users who may decide and
//! the name each decides as; the `getUpdates` offset; and the Reject taps whose reason
//! was asked for, each answered once.

use crate::{Admin, ConfirmError};
use assent_store::telegram::{
    self, AskedReason, TelegramMessage, TelegramSecrets, TelegramSettings, TelegramUser,
};
use time::OffsetDateTime;
use uuid::Uuid;

/// What `assent telegram status` shows, read together: the connected bot's settings
/// (never its token) and the mapped users.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelegramStatus {
    /// The connected bot's chat, Bot API, public URL and when it was connected; `None`
    /// when no bot is connected.
    pub settings: Option<TelegramSettings>,
    /// The Telegram users who may decide, by user id.
    pub users: Vec<TelegramUser>,
}

impl Admin<'_> {
    /// Connects the Telegram bot (or replaces the connected one's settings and token),
    /// in one transaction. The door checks the values first.
    #[tracing::instrument(skip_all)]
    pub async fn connect_telegram(
        &self,
        settings: &TelegramSettings,
        secrets: &TelegramSecrets,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        telegram::connect(tx.connection(), settings, secrets).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Disconnects the Telegram bot, in one transaction: `false` when none was
    /// connected. The mapped users and posted messages stay.
    #[tracing::instrument(skip(self))]
    pub async fn disconnect_telegram(&self) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let was = telegram::disconnect(tx.connection()).await?;
        tx.commit().await?;
        Ok(was)
    }

    /// The connected bot's settings and the mapped users, read on one connection.
    pub async fn telegram_status(&self) -> Result<TelegramStatus, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(TelegramStatus {
            settings: telegram::settings(&mut conn).await?,
            users: telegram::users(&mut conn).await?,
        })
    }

    /// The connected bot's settings and token, `None` when no bot is connected: for
    /// calling the Bot API, never for display.
    pub async fn telegram_secrets(
        &self,
    ) -> Result<Option<(TelegramSettings, TelegramSecrets)>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(telegram::secrets(&mut conn).await?)
    }

    /// Lets Telegram user `user` decide as its name (replacing an earlier name), in one
    /// transaction. The door checks the id and the name first.
    #[tracing::instrument(skip(self, user), fields(user = %user.user_id))]
    pub async fn add_telegram_user(
        &self,
        user: &TelegramUser,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        telegram::add_user(tx.connection(), user, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes Telegram user `user_id`'s say away, in one transaction: `false` when they
    /// were not mapped.
    #[tracing::instrument(skip(self))]
    pub async fn remove_telegram_user(&self, user_id: &str) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let removed = telegram::remove_user(tx.connection(), user_id).await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// The Telegram users who may decide, by user id.
    pub async fn telegram_users(&self) -> Result<Vec<TelegramUser>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(telegram::users(&mut conn).await?)
    }

    /// The name Telegram user `user_id` decides as, `None` when they are not mapped.
    pub async fn telegram_user_name(&self, user_id: &str) -> Result<Option<String>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(telegram::user_name(&mut conn, user_id).await?)
    }

    /// The next `getUpdates` offset.
    pub async fn telegram_update_offset(&self) -> Result<i64, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(telegram::update_offset(&mut conn).await?)
    }

    /// Moves the `getUpdates` offset forward (never back), in one transaction: the
    /// updates before it were read, and are not read again after a restart.
    pub async fn advance_telegram_offset(&self, offset: i64) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        telegram::advance_offset(tx.connection(), offset).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records that the reason for a Reject tap was asked for with message
    /// `message_id` of `chat_id`, in one transaction.
    pub async fn ask_telegram_reason(
        &self,
        chat_id: &str,
        message_id: i64,
        asked: &AskedReason,
        now: OffsetDateTime,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        telegram::ask_reason(tx.connection(), chat_id, message_id, asked, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes the Reject tap of `user_id` a reply to message `message_id` of `chat_id`
    /// answers, once, in one transaction: a second reply, or another user's, finds none.
    pub async fn take_telegram_reason(
        &self,
        chat_id: &str,
        message_id: i64,
        user_id: &str,
    ) -> Result<Option<AskedReason>, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let taken = telegram::take_reason(tx.connection(), chat_id, message_id, user_id).await?;
        tx.commit().await?;
        Ok(taken)
    }

    /// The messages set `set` was posted as, by chat.
    pub async fn telegram_messages(&self, set: Uuid) -> Result<Vec<TelegramMessage>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(telegram::messages(&mut conn, set).await?)
    }

    /// Claims the one post of set `set` to `chat_id`, in one transaction: `true` for
    /// the caller that must post it, `false` when it was claimed before (posted, or
    /// its post lost: never posted twice).
    pub async fn claim_telegram_post(
        &self,
        set: Uuid,
        chat_id: &str,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let claimed = telegram::claim_post(tx.connection(), set, chat_id, now).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    /// Records the message set `set` was posted as in `chat_id`, or edited to, and the
    /// digest of what it says now, in one transaction.
    pub async fn record_telegram_message(
        &self,
        set: Uuid,
        chat_id: &str,
        message_id: i64,
        shown: &str,
    ) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        telegram::record_message(tx.connection(), set, chat_id, message_id, shown).await?;
        tx.commit().await?;
        Ok(())
    }
}
