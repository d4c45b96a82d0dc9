//! The Slack app (migration 0024): the one connected app's settings and secrets, the
//! Slack users who may decide and the names their decisions carry, the message each
//! change set was posted as, and the interaction payloads already accepted.
//!
//! The bot token and the signing secret are secrets, kept like webhook secrets: read
//! only through [`secrets`] (for the poster and the interactions route), never through
//! [`settings`], which is what listings show.

use crate::Connection;
use crate::{StoreError, timefmt};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

const SETTINGS: &str = "slack_settings";
const USERS: &str = "slack_users";

/// The connected app as listed: everything but its secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackSettings {
    /// The channel each queued set is posted to (`C…`).
    pub channel: String,
    /// The Web API's base URL, ending in `/` (`https://slack.com/api/` by default).
    pub api_url: String,
    /// The review page's public address, for the messages' Open button.
    pub public_url: Option<String>,
    /// Sets queued before this are not posted.
    pub connected_at: OffsetDateTime,
}

/// The app's secrets: for the poster and the interactions route only, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct SlackSecrets {
    /// `xoxb-…`: the bot's Web API token.
    pub bot_token: String,
    /// What Slack signs interaction requests with.
    pub signing_secret: String,
}

impl std::fmt::Debug for SlackSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlackSecrets { .. }")
    }
}

/// A Slack user who may decide, and the name their decisions carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackUser {
    /// `U…`.
    pub user_id: String,
    /// The person's name in Assent (`--as`).
    pub name: String,
}

/// The message a set was posted as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackMessage {
    /// Where.
    pub channel: String,
    /// Its `ts` (Slack's id of a message); `None` when the post was claimed but its
    /// answer never recorded (a crash, a failed post): the set is not posted again.
    pub ts: Option<String>,
    /// The digest of what the message says now.
    pub shown: Option<String>,
}

/// Connects the app (or replaces the connected one's settings and secrets).
pub async fn connect(
    conn: &mut Connection,
    settings: &SlackSettings,
    secrets: &SlackSecrets,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO slack_settings (id, bot_token, signing_secret, channel, api_url, public_url, connected_at)
         VALUES (1, $1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET bot_token = excluded.bot_token,
           signing_secret = excluded.signing_secret, channel = excluded.channel,
           api_url = excluded.api_url, public_url = excluded.public_url,
           connected_at = excluded.connected_at",
    )
    .bind(&secrets.bot_token)
    .bind(&secrets.signing_secret)
    .bind(&settings.channel)
    .bind(&settings.api_url)
    .bind(&settings.public_url)
    .bind(timefmt::format(settings.connected_at))
    .execute(conn)
    .await?;
    Ok(())
}

/// Disconnects the app; `false` when none was connected. Users and messages stay.
pub async fn disconnect(conn: &mut Connection) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM slack_settings WHERE id = 1")
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

fn decode_settings(row: &AnyRow) -> Result<SlackSettings, StoreError> {
    let at: String = row.try_get("connected_at")?;
    Ok(SlackSettings {
        channel: row.try_get("channel")?,
        api_url: row.try_get("api_url")?,
        public_url: row.try_get("public_url")?,
        connected_at: timefmt::parse(SETTINGS, &at)?,
    })
}

/// The connected app's settings, without its secrets.
pub async fn settings(conn: &mut Connection) -> Result<Option<SlackSettings>, StoreError> {
    let row = sqlx::query(
        "SELECT channel, api_url, public_url, connected_at FROM slack_settings WHERE id = 1",
    )
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode_settings).transpose()
}

/// The connected app's settings and secrets: for the poster and the interactions route
/// only, never for display.
pub async fn secrets(
    conn: &mut Connection,
) -> Result<Option<(SlackSettings, SlackSecrets)>, StoreError> {
    let row = sqlx::query("SELECT * FROM slack_settings WHERE id = 1")
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some((
        decode_settings(&row)?,
        SlackSecrets {
            bot_token: row.try_get("bot_token")?,
            signing_secret: row.try_get("signing_secret")?,
        },
    )))
}

/// Maps Slack user `user_id` to `name` (replacing an earlier name).
pub async fn add_user(
    conn: &mut Connection,
    user: &SlackUser,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO slack_users (user_id, name, created_at) VALUES ($1, $2, $3)
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
    let done = sqlx::query("DELETE FROM slack_users WHERE user_id = $1")
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Every mapped user, by user id.
pub async fn users(conn: &mut Connection) -> Result<Vec<SlackUser>, StoreError> {
    let rows = sqlx::query("SELECT user_id, name FROM slack_users ORDER BY user_id")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(SlackUser {
                user_id: row.try_get("user_id")?,
                name: row.try_get("name")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(|e| StoreError::corrupt(USERS, e))
}

/// The name Slack user `user_id` decides as, when they are mapped.
pub async fn user_name(conn: &mut Connection, user_id: &str) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT name FROM slack_users WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(conn)
            .await?,
    )
}

/// Claims the one post of set `set` to `channel`: `true` for the caller that must post
/// it, `false` when it was claimed before (posted, or its post lost).
pub async fn claim_post(
    conn: &mut Connection,
    set: Uuid,
    channel: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO slack_messages (change_set_id, channel, posted_at) VALUES ($1, $2, $3)
         ON CONFLICT (change_set_id) DO NOTHING",
    )
    .bind(set.to_string())
    .bind(channel)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records the message set `set` was posted as (`ts`) or rewritten to, and the digest
/// of what it says now.
pub async fn record_message(
    conn: &mut Connection,
    set: Uuid,
    ts: &str,
    shown: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE slack_messages SET ts = $1, shown = $2 WHERE change_set_id = $3")
        .bind(ts)
        .bind(shown)
        .bind(set.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// The message set `set` was posted as, if it was.
pub async fn message(conn: &mut Connection, set: Uuid) -> Result<Option<SlackMessage>, StoreError> {
    let row = sqlx::query("SELECT channel, ts, shown FROM slack_messages WHERE change_set_id = $1")
        .bind(set.to_string())
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(SlackMessage {
        channel: row.try_get("channel")?,
        ts: row.try_get("ts")?,
        shown: row.try_get("shown")?,
    }))
}

/// Accepts an interaction payload by the digest of its signature: `false` when the
/// same one was accepted before (a replay). Payloads received before `forget_before`
/// are forgotten first: their timestamps are refused by then anyway.
pub async fn accept_payload(
    conn: &mut Connection,
    digest: &str,
    now: OffsetDateTime,
    forget_before: OffsetDateTime,
) -> Result<bool, StoreError> {
    sqlx::query("DELETE FROM slack_payloads WHERE received_at < $1")
        .bind(timefmt::format(forget_before))
        .execute(&mut *conn)
        .await?;
    let done = sqlx::query(
        "INSERT INTO slack_payloads (digest, received_at) VALUES ($1, $2)
         ON CONFLICT (digest) DO NOTHING",
    )
    .bind(digest)
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[tokio::test]
    async fn settings_users_messages_and_payloads_round_trip() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(settings(&mut conn).await.expect("reads"), None);
        let listed = SlackSettings {
            channel: "C1".into(),
            api_url: "https://slack.com/api/".into(),
            public_url: None,
            connected_at: now,
        };
        let kept = SlackSecrets {
            bot_token: "xoxb-1".into(),
            signing_secret: "s".into(),
        };
        connect(&mut conn, &listed, &kept).await.expect("connects");
        connect(&mut conn, &listed, &kept).await.expect("again");
        assert_eq!(settings(&mut conn).await.expect("reads"), Some(listed));
        assert_eq!(
            secrets(&mut conn).await.expect("reads").map(|(_, s)| s),
            Some(kept.clone())
        );
        assert_eq!(format!("{kept:?}"), "SlackSecrets { .. }");

        let alice = SlackUser {
            user_id: "U1".into(),
            name: "alice".into(),
        };
        add_user(&mut conn, &alice, now).await.expect("adds");
        assert_eq!(
            user_name(&mut conn, "U1").await.expect("reads").as_deref(),
            Some("alice")
        );
        assert_eq!(user_name(&mut conn, "U2").await.expect("reads"), None);
        assert_eq!(users(&mut conn).await.expect("lists"), [alice]);

        let set = Uuid::from_u128(1);
        assert!(claim_post(&mut conn, set, "C1", now).await.expect("claims"));
        assert!(!claim_post(&mut conn, set, "C1", now).await.expect("once"));
        record_message(&mut conn, set, "1.2", "d")
            .await
            .expect("records");
        let posted = message(&mut conn, set).await.expect("reads").expect("one");
        assert_eq!(
            (posted.ts.as_deref(), posted.shown.as_deref()),
            (Some("1.2"), Some("d"))
        );

        let later = now + time::Duration::minutes(10);
        assert!(
            accept_payload(&mut conn, "p", now, now)
                .await
                .expect("accepts")
        );
        assert!(
            !accept_payload(&mut conn, "p", now, now)
                .await
                .expect("replay")
        );
        assert!(
            accept_payload(&mut conn, "p", later, later)
                .await
                .expect("forgotten"),
            "forgotten once its timestamp is refused anyway"
        );
        assert!(remove_user(&mut conn, "U1").await.expect("removes"));
        assert!(disconnect(&mut conn).await.expect("disconnects"));
    }
}
