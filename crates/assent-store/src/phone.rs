//! Answers from the phone (migration 0034): the ntfy topics and email addresses queued
//! items are sent to, with the person a tap there answers as; the one-time answer links
//! those messages carry; and what was sent for each item to each channel.
//!
//! A link's token is never stored: only its SHA-256 ([`token_hash`]), so a copy of the
//! database answers nothing. [`use_link`] marks a link used and is meant to run in the
//! write transaction of the decision it makes, so a decision and its link's use stand
//! or fall together. A channel's secret (the ntfy access token, the SMTP URL with its
//! credentials) is read only through [`channel_secret`], never listed, as Slack's and
//! webhooks' secrets are kept.

use crate::{Connection, StoreError, timefmt};
use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

const CHANNELS: &str = "notify_channels";
const LINKS: &str = "answer_links";
const POSTS: &str = "notify_posts";

/// Where a channel's messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// An ntfy topic (`https://ntfy.sh/my-topic`).
    Ntfy,
    /// An email address, sent through an SMTP server.
    Email,
}

impl ChannelKind {
    /// `ntfy` or `email`, as stored and as the decisions' `by` starts.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ntfy => "ntfy",
            Self::Email => "email",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "ntfy" => Ok(Self::Ntfy),
            "email" => Ok(Self::Email),
            other => Err(StoreError::corrupt(CHANNELS, format!("kind {other:?}"))),
        }
    }
}

/// A channel as listed: everything but its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// Its id (`n` and 8 hex digits).
    pub id: String,
    /// ntfy or email.
    pub kind: ChannelKind,
    /// The topic URL or the email address.
    pub address: String,
    /// Who a tap on its links answers as (`--as`).
    pub person: String,
    /// Items queued before it are not sent.
    pub created_at: OffsetDateTime,
}

/// What an answer link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkAction {
    /// Approves the item.
    Approve,
    /// Rejects the item.
    Reject,
}

impl LinkAction {
    /// `approve` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Reject => "reject",
        }
    }
}

/// A one-time answer link, as stored (its token is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerLink {
    /// The channel whose message carried it.
    pub channel_id: String,
    /// The item's set.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// The item's revision the message showed.
    pub revision: u32,
    /// Who it answers as.
    pub person: String,
    /// What it does.
    pub action: LinkAction,
    /// When the agent stops waiting: the link answers nothing from then on.
    pub expires_at: OffsetDateTime,
    /// When it was used, if it was.
    pub used_at: Option<OffsetDateTime>,
}

/// The state of what was sent for one item to one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostState {
    /// Claimed, being sent.
    Claimed,
    /// Refused before it was sent: tried again at `next_at`.
    Retry,
    /// Sent.
    Sent,
    /// The call got no answer: it may have arrived, so it is not sent again.
    Unknown,
    /// The attempts ran out.
    Failed,
    /// The follow-up naming who decided went out (or was given up on).
    Followed,
}

impl PostState {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Retry => "retry",
            Self::Sent => "sent",
            Self::Unknown => "unknown",
            Self::Failed => "failed",
            Self::Followed => "followed",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "claimed" => Self::Claimed,
            "retry" => Self::Retry,
            "sent" => Self::Sent,
            "unknown" => Self::Unknown,
            "failed" => Self::Failed,
            "followed" => Self::Followed,
            other => return Err(StoreError::corrupt(POSTS, format!("state {other:?}"))),
        })
    }
}

/// What was sent for one item to one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    /// The channel.
    pub channel_id: String,
    /// The item's set.
    pub change_set_id: Uuid,
    /// The item.
    pub item_index: usize,
    /// Where it stands.
    pub state: PostState,
    /// Calls made so far.
    pub attempts: u32,
    /// When a `retry` is due.
    pub next_at: OffsetDateTime,
}

/// The stored form of a link's token: the lowercase hex SHA-256 of its text.
pub fn token_hash(token: &str) -> String {
    assent_domain::lower_hex(&Sha256::digest(token.as_bytes()))
}

/// Adds a channel.
pub async fn add_channel(
    conn: &mut Connection,
    channel: &Channel,
    secret: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO notify_channels (id, kind, address, person, secret, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&channel.id)
    .bind(channel.kind.as_str())
    .bind(&channel.address)
    .bind(&channel.person)
    .bind(secret)
    .bind(timefmt::format(channel.created_at))
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes channel `id`; `false` when there was none. Its links stop working.
pub async fn remove_channel(conn: &mut Connection, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM notify_channels WHERE id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM answer_links WHERE channel_id = $1 AND used_at IS NULL")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

fn decode_channel(row: &AnyRow) -> Result<Channel, StoreError> {
    let get = |e: sqlx::Error| StoreError::corrupt(CHANNELS, e);
    let kind: String = row.try_get("kind").map_err(get)?;
    let at: String = row.try_get("created_at").map_err(get)?;
    Ok(Channel {
        id: row.try_get("id").map_err(get)?,
        kind: ChannelKind::parse(&kind)?,
        address: row.try_get("address").map_err(get)?,
        person: row.try_get("person").map_err(get)?,
        created_at: timefmt::parse(CHANNELS, &at)?,
    })
}

/// Every channel, oldest first, without secrets.
pub async fn channels(conn: &mut Connection) -> Result<Vec<Channel>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, kind, address, person, created_at FROM notify_channels ORDER BY created_at, id",
    )
    .fetch_all(conn)
    .await?;
    rows.iter().map(decode_channel).collect()
}

/// Channel `id`, if there is one.
pub async fn channel(conn: &mut Connection, id: &str) -> Result<Option<Channel>, StoreError> {
    let row = sqlx::query(
        "SELECT id, kind, address, person, created_at FROM notify_channels WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode_channel).transpose()
}

/// Channel `id`'s secret: for the sender only, never for display.
pub async fn channel_secret(conn: &mut Connection, id: &str) -> Result<Option<String>, StoreError> {
    let secret: Option<Option<String>> =
        sqlx::query_scalar("SELECT secret FROM notify_channels WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?;
    Ok(secret.flatten())
}

/// Stores link `link` under the hash of its token.
pub async fn insert_link(
    conn: &mut Connection,
    hash: &str,
    link: &AnswerLink,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO answer_links (token_hash, channel_id, change_set_id, item_index, revision,
            person, action, expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(hash)
    .bind(&link.channel_id)
    .bind(link.change_set_id.to_string())
    .bind(i64::try_from(link.item_index).unwrap_or(i64::MAX))
    .bind(i64::from(link.revision))
    .bind(&link.person)
    .bind(link.action.as_str())
    .bind(timefmt::format(link.expires_at))
    .bind(timefmt::format(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// The link whose token hashes to `hash`, if there is one.
pub async fn link(conn: &mut Connection, hash: &str) -> Result<Option<AnswerLink>, StoreError> {
    let row = sqlx::query(
        "SELECT channel_id, change_set_id, item_index, revision, person, action, expires_at, used_at
         FROM answer_links WHERE token_hash = $1",
    )
    .bind(hash)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let get = |e: sqlx::Error| StoreError::corrupt(LINKS, e);
    let set: String = row.try_get("change_set_id").map_err(get)?;
    let index: i64 = row.try_get("item_index").map_err(get)?;
    let revision: i64 = row.try_get("revision").map_err(get)?;
    let action: String = row.try_get("action").map_err(get)?;
    let expires: String = row.try_get("expires_at").map_err(get)?;
    let used: Option<String> = row.try_get("used_at").map_err(get)?;
    Ok(Some(AnswerLink {
        channel_id: row.try_get("channel_id").map_err(get)?,
        change_set_id: Uuid::parse_str(&set).map_err(|e| StoreError::corrupt(LINKS, e))?,
        item_index: usize::try_from(index).map_err(|e| StoreError::corrupt(LINKS, e))?,
        revision: u32::try_from(revision).map_err(|e| StoreError::corrupt(LINKS, e))?,
        person: row.try_get("person").map_err(get)?,
        action: match action.as_str() {
            "approve" => LinkAction::Approve,
            "reject" => LinkAction::Reject,
            other => return Err(StoreError::corrupt(LINKS, format!("action {other:?}"))),
        },
        expires_at: timefmt::parse(LINKS, &expires)?,
        used_at: used.map(|at| timefmt::parse(LINKS, &at)).transpose()?,
    }))
}

/// Marks the link of `hash` used at `now`, when it is unused and not expired: `true`
/// for the one caller that may act on it. Run it in the decision's transaction.
pub async fn use_link(
    conn: &mut Connection,
    hash: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let at = timefmt::format(now);
    let done = sqlx::query(
        "UPDATE answer_links SET used_at = $1
         WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1",
    )
    .bind(&at)
    .bind(hash)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Claims the one post of item `index` of set `set` to channel `channel`: `true` for
/// the caller that must send it, `false` when it was claimed before.
pub async fn claim_post(
    conn: &mut Connection,
    channel: &str,
    set: Uuid,
    index: usize,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let at = timefmt::format(now);
    let done = sqlx::query(
        "INSERT INTO notify_posts (channel_id, change_set_id, item_index, state, attempts, next_at, created_at)
         VALUES ($1, $2, $3, 'claimed', 0, $4, $4)
         ON CONFLICT (channel_id, change_set_id, item_index) DO NOTHING",
    )
    .bind(channel)
    .bind(set.to_string())
    .bind(i64::try_from(index).unwrap_or(i64::MAX))
    .bind(&at)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records where a post stands after a call.
pub async fn record_post(
    conn: &mut Connection,
    post: &Post,
    detail: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE notify_posts SET state = $1, attempts = $2, next_at = $3, detail = $4
         WHERE channel_id = $5 AND change_set_id = $6 AND item_index = $7",
    )
    .bind(post.state.as_str())
    .bind(i64::from(post.attempts))
    .bind(timefmt::format(post.next_at))
    .bind(detail)
    .bind(&post.channel_id)
    .bind(post.change_set_id.to_string())
    .bind(i64::try_from(post.item_index).unwrap_or(i64::MAX))
    .execute(conn)
    .await?;
    Ok(())
}

/// The posts in state `state`, oldest first.
pub async fn posts_in(conn: &mut Connection, state: PostState) -> Result<Vec<Post>, StoreError> {
    let rows = sqlx::query(
        "SELECT channel_id, change_set_id, item_index, state, attempts, next_at FROM notify_posts
         WHERE state = $1 ORDER BY created_at",
    )
    .bind(state.as_str())
    .fetch_all(conn)
    .await?;
    decode_posts(&rows)
}

/// Every post of set `set`, to any channel: read before claiming, so that a sweep
/// writes only for what is new.
pub async fn posts_of(conn: &mut Connection, set: Uuid) -> Result<Vec<Post>, StoreError> {
    let rows = sqlx::query(
        "SELECT channel_id, change_set_id, item_index, state, attempts, next_at FROM notify_posts
         WHERE change_set_id = $1",
    )
    .bind(set.to_string())
    .fetch_all(conn)
    .await?;
    decode_posts(&rows)
}

fn decode_posts(rows: &[AnyRow]) -> Result<Vec<Post>, StoreError> {
    rows.iter()
        .map(|row| {
            let get = |e: sqlx::Error| StoreError::corrupt(POSTS, e);
            let set: String = row.try_get("change_set_id").map_err(get)?;
            let index: i64 = row.try_get("item_index").map_err(get)?;
            let attempts: i64 = row.try_get("attempts").map_err(get)?;
            let state: String = row.try_get("state").map_err(get)?;
            let next: String = row.try_get("next_at").map_err(get)?;
            Ok(Post {
                channel_id: row.try_get("channel_id").map_err(get)?,
                change_set_id: Uuid::parse_str(&set).map_err(|e| StoreError::corrupt(POSTS, e))?,
                item_index: usize::try_from(index).map_err(|e| StoreError::corrupt(POSTS, e))?,
                state: PostState::parse(&state)?,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                next_at: timefmt::parse(POSTS, &next)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_only_hashed() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        assert_ne!(token_hash(&a), token_hash(&b));
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), a);
        assert_eq!(token_hash(&a).len(), 64);
    }
}
