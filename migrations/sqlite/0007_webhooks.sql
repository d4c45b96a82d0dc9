-- Webhooks (assent-store's `webhooks` module, delivered by assent-webhooks). Append-only.

-- Who is told about what. The signing secret is kept here because every delivery is
-- signed with it; no query that lists subscriptions selects it.
CREATE TABLE webhook_subscriptions (
    id         TEXT PRIMARY KEY NOT NULL,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL, -- JSON array of event types; empty means every event
    format     TEXT NOT NULL CHECK (format IN ('standard', 'slack')),
    agent_id   TEXT,          -- only this agent's sets, when set
    secret     TEXT NOT NULL,
    created_at TEXT NOT NULL
) WITHOUT ROWID;

-- Events, written in the transaction of the write that caused them, and only when a
-- subscription wants them. The id is the `webhook-id` of every delivery of it.
CREATE TABLE webhook_events (
    id            TEXT PRIMARY KEY NOT NULL,
    event_type    TEXT NOT NULL,
    change_set_id TEXT,
    payload       TEXT NOT NULL, -- JSON {type, timestamp, data}
    created_at    TEXT NOT NULL
) WITHOUT ROWID;

-- One row per event and subscription: the delivery queue, its retries and its dead
-- letters.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT NOT NULL REFERENCES webhook_events (id),
    subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'inFlight', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    claimed_until   TEXT,
    last_status     INTEGER, -- the receiver's last HTTP status, if it answered
    last_error      TEXT,    -- escaped and truncated; never the raw body
    delivered_at    TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (event_id, subscription_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('pending', 'inFlight');
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id);

-- Sets already warned about (`changeSet.expiring`): once per set.
CREATE TABLE webhook_expiry_warnings (
    change_set_id TEXT PRIMARY KEY NOT NULL,
    warned_at     TEXT NOT NULL
) WITHOUT ROWID;
