-- Answers from the phone (issue 56): push through ntfy and email, each with one-time
-- signed answer links. Append-only: never edit a shipped migration.
--
-- `notify_channels`: where queued items are sent and who a tap there answers as
-- (`person`, fixed at `assent notify … add --as`). `secret` is the ntfy access token or
-- the SMTP URL with its credentials, stored like webhook and Slack secrets (the
-- database file is its user's alone) and never listed.
CREATE TABLE notify_channels (
    id         TEXT PRIMARY KEY NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('ntfy', 'email')),
    address    TEXT NOT NULL,
    person     TEXT NOT NULL,
    secret     TEXT,
    created_at TEXT NOT NULL
);

-- One-time answer links: only the SHA-256 of the token is kept. A link names one item at
-- one revision, the person of its channel, one action, and the moment the agent stops
-- waiting; `used_at` is set in the transaction of the decision it made.
CREATE TABLE answer_links (
    token_hash    TEXT PRIMARY KEY NOT NULL,
    channel_id    TEXT NOT NULL,
    change_set_id TEXT NOT NULL,
    item_index    INTEGER NOT NULL,
    revision      INTEGER NOT NULL,
    person        TEXT NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('approve', 'reject')),
    expires_at    TEXT NOT NULL,
    used_at       TEXT,
    created_at    TEXT NOT NULL
);

-- What was sent for each item to each channel. The row is claimed before the call;
-- `state`: `claimed` (being sent), `retry` (refused before it was sent: tried again at
-- `next_at`), `sent`, `unknown` (the call got no answer: it may have arrived, so it is
-- not sent again), `failed` (attempts ran out), `followed` (the follow-up naming who
-- decided went out).
CREATE TABLE notify_posts (
    channel_id    TEXT NOT NULL,
    change_set_id TEXT NOT NULL,
    item_index    INTEGER NOT NULL,
    state         TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       TEXT NOT NULL,
    detail        TEXT,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (channel_id, change_set_id, item_index)
);
