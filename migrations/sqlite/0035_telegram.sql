-- Telegram: approve and reject from a chat with a bot, with no public URL (issue 56).
-- Append-only: never edit a shipped migration.
--
-- `telegram_settings`: the one connected bot. The bot token is a secret, stored like
-- Slack's (the database file is its user's alone) and never listed or logged whole.
-- `chat_id`: where sets are posted (none: each mapped user's private chat).
-- `update_offset`: the next `getUpdates` offset, so that an update is read once across
-- restarts. `connected_at`: sets queued before it are not posted.
CREATE TABLE telegram_settings (
    id            INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    bot_token     TEXT NOT NULL,
    chat_id       TEXT,
    api_url       TEXT NOT NULL,
    public_url    TEXT,
    update_offset INTEGER NOT NULL DEFAULT 0,
    connected_at  TEXT NOT NULL
);

-- Who may decide from Telegram: a Telegram user id and the name their decisions carry.
CREATE TABLE telegram_users (
    user_id    TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- The message each change set was posted as, once per chat: the row is written before
-- the post (a crash between the two leaves a row without `message_id`, and the set is
-- never posted twice to that chat); `shown` is the digest of what the message says now,
-- so it is edited only when that changes.
CREATE TABLE telegram_messages (
    change_set_id TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    message_id    INTEGER,
    shown         TEXT,
    posted_at     TEXT NOT NULL,
    PRIMARY KEY (change_set_id, chat_id)
);

-- A Reject tapped and its reason asked for (a ForceReply message): the reply to that
-- message from the same user rejects the item at the revision the tap named.
CREATE TABLE telegram_reasons (
    chat_id       TEXT NOT NULL,
    message_id    INTEGER NOT NULL,
    user_id       TEXT NOT NULL,
    change_set_id TEXT NOT NULL,
    item_index    INTEGER NOT NULL,
    revision      INTEGER NOT NULL,
    asked_at      TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
