-- API tokens with roles, and the change feed the review server polls. Append-only.

-- Bearer tokens of `assent serve` beyond the one given at start (which stays admin).
-- Only a SHA-256 of the secret is kept: the secret is shown once, when made.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('agent', 'reviewer', 'admin')),
    agent_id    TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT,
    -- An agent token is bound to its agent; the other roles to none.
    CHECK ((role = 'agent') = (agent_id IS NOT NULL))
);

-- Every write to a change set or one of its items, from any process (wakes, decisions,
-- expiry, sync imports): the review server reads it to tell open pages what changed.
-- Filled by triggers, so no write path can forget it; old rows are pruned by readers.
CREATE TABLE change_feed (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    change_set_id TEXT NOT NULL
);

CREATE TRIGGER change_feed_set_inserted AFTER INSERT ON change_sets
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.id);
END;

CREATE TRIGGER change_feed_set_updated AFTER UPDATE ON change_sets
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.id);
END;

CREATE TRIGGER change_feed_item_updated AFTER UPDATE ON change_items
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
END;
