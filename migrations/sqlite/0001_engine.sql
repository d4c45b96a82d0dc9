-- Assent engine tables (SQLite). Append-only: never edit a shipped migration.
-- Times are UTC text in one fixed-width RFC 3339 format (YYYY-MM-DDTHH:MM:SS.ffffffZ),
-- so text order is time order. JSON values are stored as canonical text.

CREATE TABLE agents (
    id          TEXT PRIMARY KEY NOT NULL,
    categories  TEXT NOT NULL,              -- JSON array of allowed category ids
    rules       TEXT NOT NULL DEFAULT '[]', -- JSON array of {"pattern","action"}
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE change_sets (
    id           TEXT PRIMARY KEY NOT NULL,
    agent_id     TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    run_key      TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'partiallyResolved', 'resolved', 'expired')),
    created_at   TEXT NOT NULL,
    resolved_at  TEXT,
    deleted_at   TEXT,
    vector_clock TEXT NOT NULL DEFAULT '{}'
);

-- "Pending sets of a task / of an agent, newest first" and expiry scans touch only open rows.
CREATE INDEX change_sets_open_by_task ON change_sets (task_id, created_at DESC)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;
CREATE INDEX change_sets_open_by_agent ON change_sets (agent_id, created_at DESC)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;
CREATE INDEX change_sets_open_by_age ON change_sets (created_at)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

CREATE TABLE change_items (
    change_set_id TEXT NOT NULL REFERENCES change_sets (id) ON DELETE CASCADE,
    item_index    INTEGER NOT NULL CHECK (item_index >= 0),
    tool_name     TEXT NOT NULL,
    args          TEXT NOT NULL,
    human_summary TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'rejected', 'deferred', 'retracted')),
    before_value  TEXT,
    PRIMARY KEY (change_set_id, item_index)
) WITHOUT ROWID;

CREATE TABLE decisions (
    id            TEXT PRIMARY KEY NOT NULL,
    change_set_id TEXT NOT NULL REFERENCES change_sets (id) ON DELETE CASCADE,
    item_index    INTEGER NOT NULL,
    agent_id      TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    tool_name     TEXT NOT NULL,
    verdict       TEXT NOT NULL CHECK (verdict IN ('confirmed', 'rejected', 'deferred', 'retracted')),
    reason        TEXT,
    edited_args   TEXT,
    human_summary TEXT NOT NULL,
    args          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    vector_clock  TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX decisions_recent_by_agent ON decisions (agent_id, created_at DESC);
CREATE INDEX decisions_recent_by_agent_task ON decisions (agent_id, task_id, created_at DESC);
CREATE INDEX decisions_by_change_set ON decisions (change_set_id, created_at);
-- The last line of defence for exactly-once: one final decision per item, whatever
-- the code above does.
CREATE UNIQUE INDEX decisions_one_final_per_item ON decisions (change_set_id, item_index)
    WHERE verdict IN ('confirmed', 'rejected', 'retracted');

CREATE TABLE audit_records (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL,
    run_key      TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('action', 'result', 'policyDenied')),
    args         TEXT NOT NULL,
    success      INTEGER,
    detail       TEXT,
    vector_clock TEXT,
    created_at   TEXT NOT NULL
);

CREATE INDEX audit_records_by_task ON audit_records (task_id, id);
CREATE INDEX audit_records_by_run ON audit_records (run_key, id);
CREATE INDEX audit_records_by_operation ON audit_records (operation_id);

-- Operations whose effects were applied, keyed by their deterministic id: a retry
-- after a crash finds its id here and applies nothing.
CREATE TABLE applied_operations (
    operation_id TEXT PRIMARY KEY NOT NULL,
    tool_name    TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    message      TEXT NOT NULL,
    applied_at   TEXT NOT NULL
) WITHOUT ROWID;

-- The sync queue. At most one unsent ('pending') message per entity: a newer write
-- replaces the payload of the older, unsent one.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    entity_type   TEXT NOT NULL,
    entity_id     TEXT NOT NULL,
    payload       TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'inFlight', 'sent', 'dead')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    claimed_until TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE UNIQUE INDEX outbox_one_pending_per_entity ON outbox (entity_type, entity_id)
    WHERE status = 'pending';
CREATE INDEX outbox_claimable ON outbox (status, id);
