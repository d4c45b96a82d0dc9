-- Slack: approve and reject with buttons (issue 39). Append-only: never edit a shipped
-- migration.
--
-- `slack_settings`: the one connected Slack app. The bot token and the signing secret
-- are secrets, stored like webhook secrets (the database file is its user's alone) and
-- never listed or logged whole. `connected_at`: sets queued before it are not posted.
CREATE TABLE slack_settings (
    id             INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    bot_token      TEXT NOT NULL,
    signing_secret TEXT NOT NULL,
    channel        TEXT NOT NULL,
    api_url        TEXT NOT NULL,
    public_url     TEXT,
    connected_at   TEXT NOT NULL
);

-- Who may decide from Slack: a Slack user id and the name their decisions carry.
CREATE TABLE slack_users (
    user_id    TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- The message each change set was posted as, once: the row is written before the post
-- (a crash between the two leaves a row without `ts`, and the set is never posted
-- twice); `shown` is the digest of what the message says now, so it is rewritten only
-- when that changes.
CREATE TABLE slack_messages (
    change_set_id TEXT PRIMARY KEY NOT NULL,
    channel       TEXT NOT NULL,
    ts            TEXT,
    shown         TEXT,
    posted_at     TEXT NOT NULL
);

-- Interaction payloads accepted, by the digest of their signature, so that a replayed
-- one is refused; older than the accepted clock skew they are refused anyway and pruned.
CREATE TABLE slack_payloads (
    digest      TEXT PRIMARY KEY NOT NULL,
    received_at TEXT NOT NULL
);

-- An approval short of a quorum changes no set or item row, yet every follower of the
-- change feed must learn of it (the Slack message says who approved, `assent review`
-- stops showing the item to its approver).
CREATE TRIGGER change_feed_approval_recorded AFTER INSERT ON approvals
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
END;
