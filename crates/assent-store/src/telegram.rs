//! The Telegram bot (migration 0035): the one connected bot's settings and token, the
//! Telegram users who may decide and the names their decisions carry, the message each
//! change set was posted as in each chat, the `getUpdates` offset read up to, and the
//! Reject taps whose reason was asked for.
//!
//! The bot token is a secret, kept like Slack's: read only through [`secrets`] (for the
//! poster and the poller), never through [`settings`], which is what listings show.

use crate::Connection;
use crate::{StoreError, timefmt};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

const SETTINGS: &str = "telegram_settings";
const USERS: &str = "telegram_users";
const MESSAGES: &str = "telegram_messages";
const REASONS: &str = "telegram_reasons";

/// The connected bot as listed: everything but its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramSettings {
    /// The chat each queued set is posted to; `None`: each mapped user's private chat.
    pub chat_id: Option<String>,
    /// The Bot API's base URL, without the `bot<token>` part (`https://api.telegram.org`
    /// by default; a self-hosted Bot API server or a test's fake otherwise).
    pub api_url: String,
    /// The review page's public address, for the messages' View button.
    pub public_url: Option<String>,
    /// Sets queued before this are not posted.
    pub connected_at: OffsetDateTime,
}

/// The bot's token: for the poster and the poller only, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct TelegramSecrets {
    /// `123456:ABC…`, as BotFather gives it.
    pub bot_token: String,
}

impl std::fmt::Debug for TelegramSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TelegramSecrets { .. }")
    }
}

/// A Telegram user who may decide, and the name their decisions carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramUser {
    /// Telegram's numeric user id, as text.
    pub user_id: String,
    /// The person's name in Assent (`--as`).
    pub name: String,
}

/// The message a set was posted as in one chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramMessage {
    /// Where.
    pub chat_id: String,
    /// Its id in the chat; `None` when the post was claimed but its answer never
    /// recorded (a crash, a failed post): the set is not posted to that chat again.
    pub message_id: Option<i64>,
    /// The digest of what the message says now.
    pub shown: Option<String>,
}

/// A Reject tap whose reason was asked for with a ForceReply message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedReason {
    /// The user who tapped; only their reply counts.
    pub user_id: String,
    /// The set, the item and the revision the tap named.
    pub set: Uuid,
    /// See [`AskedReason::set`].
    pub index: usize,
    /// See [`AskedReason::set`].
    pub revision: u32,
}

/// Connects the bot (or replaces the connected one's settings and token); the update
/// offset starts again.
pub async fn connect(
    conn: &mut Connection,
    settings: &TelegramSettings,
    secrets: &TelegramSecrets,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO telegram_settings (id, bot_token, chat_id, api_url, public_url, update_offset, connected_at)
         VALUES (1, $1, $2, $3, $4, 0, $5)
         ON CONFLICT (id) DO UPDATE SET bot_token = excluded.bot_token,
           chat_id = excluded.chat_id, api_url = excluded.api_url,
           public_url = excluded.public_url, update_offset = 0,
           connected_at = excluded.connected_at",
    )
    .bind(&secrets.bot_token)
    .bind(&settings.chat_id)
    .bind(&settings.api_url)
    .bind(&settings.public_url)
    .bind(timefmt::format(settings.connected_at))
    .execute(conn)
    .await?;
    Ok(())
}

/// Disconnects the bot; `false` when none was connected. Users and messages stay.
pub async fn disconnect(conn: &mut Connection) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM telegram_settings WHERE id = 1")
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

fn decode_settings(row: &AnyRow) -> Result<TelegramSettings, StoreError> {
    let at: String = row.try_get("connected_at")?;
    Ok(TelegramSettings {
        chat_id: row.try_get("chat_id")?,
        api_url: row.try_get("api_url")?,
        public_url: row.try_get("public_url")?,
        connected_at: timefmt::parse(SETTINGS, &at)?,
    })
}

/// The connected bot's settings, without its token.
pub async fn settings(conn: &mut Connection) -> Result<Option<TelegramSettings>, StoreError> {
    let row = sqlx::query(
        "SELECT chat_id, api_url, public_url, connected_at FROM telegram_settings WHERE id = 1",
    )
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode_settings).transpose()
}

/// The connected bot's settings and token: for the poster and the poller only, never
/// for display.
pub async fn secrets(
    conn: &mut Connection,
) -> Result<Option<(TelegramSettings, TelegramSecrets)>, StoreError> {
    let row = sqlx::query("SELECT * FROM telegram_settings WHERE id = 1")
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some((
        decode_settings(&row)?,
        TelegramSecrets {
            bot_token: row.try_get("bot_token")?,
        },
    )))
}

/// The next `getUpdates` offset (0 before the first update was read).
pub async fn update_offset(conn: &mut Connection) -> Result<i64, StoreError> {
    let offset: Option<i64> =
        sqlx::query_scalar("SELECT update_offset FROM telegram_settings WHERE id = 1")
            .fetch_optional(conn)
            .await?;
    Ok(offset.unwrap_or(0))
}

/// Moves the `getUpdates` offset forward to `offset` (never back).
pub async fn advance_offset(conn: &mut Connection, offset: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE telegram_settings SET update_offset = $1 WHERE id = 1 AND update_offset < $1",
    )
    .bind(offset)
    .execute(conn)
    .await?;
    Ok(())
}

/// Maps Telegram user `user_id` to `name` (replacing an earlier name).
pub async fn add_user(
    conn: &mut Connection,
    user: &TelegramUser,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO telegram_users (user_id, name, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (user_id) DO UPDATE SET name = excluded.name",
    )
    .bind(&user.user_id)
    .bind(&user.name)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes a mapped user; `false` when there was none.
pub async fn remove_user(conn: &mut Connection, user_id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM telegram_users WHERE user_id = $1")
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Every mapped user, by user id.
pub async fn users(conn: &mut Connection) -> Result<Vec<TelegramUser>, StoreError> {
    let rows = sqlx::query("SELECT user_id, name FROM telegram_users ORDER BY user_id")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(TelegramUser {
                user_id: row.try_get("user_id")?,
                name: row.try_get("name")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(|e| StoreError::corrupt(USERS, e))
}

/// The name Telegram user `user_id` decides as, when they are mapped.
pub async fn user_name(conn: &mut Connection, user_id: &str) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT name FROM telegram_users WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(conn)
            .await?,
    )
}

/// Claims the one post of set `set` to `chat_id`: `true` for the caller that must post
/// it, `false` when it was claimed before (posted, or its post lost).
pub async fn claim_post(
    conn: &mut Connection,
    set: Uuid,
    chat_id: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO telegram_messages (change_set_id, chat_id, posted_at) VALUES ($1, $2, $3)
         ON CONFLICT (change_set_id, chat_id) DO NOTHING",
    )
    .bind(set.to_string())
    .bind(chat_id)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records the message set `set` was posted as in `chat_id` (`message_id`) or edited
/// to, and the digest of what it says now.
pub async fn record_message(
    conn: &mut Connection,
    set: Uuid,
    chat_id: &str,
    message_id: i64,
    shown: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE telegram_messages SET message_id = $1, shown = $2
         WHERE change_set_id = $3 AND chat_id = $4",
    )
    .bind(message_id)
    .bind(shown)
    .bind(set.to_string())
    .bind(chat_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The messages set `set` was posted as, by chat.
pub async fn messages(
    conn: &mut Connection,
    set: Uuid,
) -> Result<Vec<TelegramMessage>, StoreError> {
    let rows = sqlx::query(
        "SELECT chat_id, message_id, shown FROM telegram_messages
         WHERE change_set_id = $1 ORDER BY chat_id",
    )
    .bind(set.to_string())
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(TelegramMessage {
                chat_id: row.try_get("chat_id")?,
                message_id: row.try_get("message_id")?,
                shown: row.try_get("shown")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(|e| StoreError::corrupt(MESSAGES, e))
}

/// Records that a reason was asked for with message `message_id` of `chat_id`.
pub async fn ask_reason(
    conn: &mut Connection,
    chat_id: &str,
    message_id: i64,
    asked: &AskedReason,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO telegram_reasons
           (chat_id, message_id, user_id, change_set_id, item_index, revision, asked_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (chat_id, message_id) DO NOTHING",
    )
    .bind(chat_id)
    .bind(message_id)
    .bind(&asked.user_id)
    .bind(asked.set.to_string())
    .bind(i64::try_from(asked.index).unwrap_or(i64::MAX))
    .bind(i64::from(asked.revision))
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes the asked reason message `message_id` of `chat_id` stands for, when `user_id`
/// is who tapped Reject, once: the row is removed as it is read, so a second reply
/// decides nothing, and another user's reply finds none.
pub async fn take_reason(
    conn: &mut Connection,
    chat_id: &str,
    message_id: i64,
    user_id: &str,
) -> Result<Option<AskedReason>, StoreError> {
    let row = sqlx::query(
        "DELETE FROM telegram_reasons WHERE chat_id = $1 AND message_id = $2 AND user_id = $3
         RETURNING user_id, change_set_id, item_index, revision",
    )
    .bind(chat_id)
    .bind(message_id)
    .bind(user_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let set: String = row.try_get("change_set_id")?;
    let index: i64 = row.try_get("item_index")?;
    let revision: i64 = row.try_get("revision")?;
    let bad = |what: &str| StoreError::corrupt(REASONS, format!("{what} out of range"));
    Ok(Some(AskedReason {
        user_id: row.try_get("user_id")?,
        set: Uuid::parse_str(&set).map_err(|e| StoreError::corrupt(REASONS, e))?,
        index: usize::try_from(index).map_err(|_| bad("item_index"))?,
        revision: u32::try_from(revision).map_err(|_| bad("revision"))?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[tokio::test]
    async fn settings_users_messages_offsets_and_reasons_round_trip() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        round_trip(&store).await;
    }

    /// The same on PostgreSQL, in a database of its own, when `ASSENT_TEST_POSTGRES_URL`
    /// names a server (the integration suite's variable).
    #[tokio::test]
    async fn the_same_round_trip_on_postgres() {
        use sqlx::Connection as _;
        let Ok(server) = std::env::var("ASSENT_TEST_POSTGRES_URL") else {
            return;
        };
        sqlx::any::install_default_drivers();
        let name = format!("assent_telegram_{}", Uuid::new_v4().simple());
        let mut admin = sqlx::AnyConnection::connect(&server)
            .await
            .expect("connects");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("creates");
        let (without_query, query) = server
            .split_once('?')
            .map_or((server.as_str(), None), |(u, q)| (u, Some(q)));
        let base = without_query
            .rsplit_once('/')
            .filter(|(base, _)| base.contains("://"))
            .map_or(without_query, |(base, _)| base);
        let url = match query {
            Some(query) => format!("{base}/{name}?{query}"),
            None => format!("{base}/{name}"),
        };
        let store = Store::open(&url).await.expect("opens");
        round_trip(&store).await;
    }

    async fn round_trip(store: &Store) {
        let mut conn = store.read_connection().await.expect("conn");
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(settings(&mut conn).await.expect("reads"), None);
        assert_eq!(update_offset(&mut conn).await.expect("reads"), 0);
        let listed = TelegramSettings {
            chat_id: Some("-100".into()),
            api_url: "https://api.telegram.org".into(),
            public_url: None,
            connected_at: now,
        };
        let kept = TelegramSecrets {
            bot_token: "1:abc".into(),
        };
        connect(&mut conn, &listed, &kept).await.expect("connects");
        assert_eq!(
            settings(&mut conn).await.expect("reads"),
            Some(listed.clone())
        );
        assert_eq!(
            secrets(&mut conn).await.expect("reads").map(|(_, s)| s),
            Some(kept.clone())
        );
        assert_eq!(format!("{kept:?}"), "TelegramSecrets { .. }");
        advance_offset(&mut conn, 7).await.expect("advances");
        advance_offset(&mut conn, 3).await.expect("never back");
        assert_eq!(update_offset(&mut conn).await.expect("reads"), 7);
        connect(&mut conn, &listed, &kept).await.expect("again");
        assert_eq!(update_offset(&mut conn).await.expect("reads"), 0);

        let alice = TelegramUser {
            user_id: "42".into(),
            name: "alice".into(),
        };
        add_user(&mut conn, &alice, now).await.expect("adds");
        assert_eq!(
            user_name(&mut conn, "42").await.expect("reads").as_deref(),
            Some("alice")
        );
        assert_eq!(user_name(&mut conn, "43").await.expect("reads"), None);
        assert_eq!(users(&mut conn).await.expect("lists"), [alice]);

        let set = Uuid::from_u128(1);
        assert!(
            claim_post(&mut conn, set, "-100", now)
                .await
                .expect("claims")
        );
        assert!(!claim_post(&mut conn, set, "-100", now).await.expect("once"));
        assert!(
            claim_post(&mut conn, set, "42", now)
                .await
                .expect("another chat")
        );
        record_message(&mut conn, set, "-100", 5, "d")
            .await
            .expect("records");
        let posted = messages(&mut conn, set).await.expect("reads");
        assert_eq!(posted.len(), 2);
        assert_eq!(
            (posted[0].message_id, posted[0].shown.as_deref()),
            (Some(5), Some("d"))
        );
        assert_eq!(posted[1].message_id, None);

        let asked = AskedReason {
            user_id: "42".into(),
            set,
            index: 1,
            revision: 2,
        };
        ask_reason(&mut conn, "-100", 9, &asked, now)
            .await
            .expect("asks");
        assert_eq!(
            take_reason(&mut conn, "-100", 9, "43")
                .await
                .expect("not bob's"),
            None
        );
        assert_eq!(
            take_reason(&mut conn, "-100", 9, "42")
                .await
                .expect("takes"),
            Some(asked)
        );
        assert_eq!(
            take_reason(&mut conn, "-100", 9, "42").await.expect("once"),
            None
        );
        assert!(remove_user(&mut conn, "42").await.expect("removes"));
        assert!(disconnect(&mut conn).await.expect("disconnects"));
    }
}
