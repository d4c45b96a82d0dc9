-- PostgreSQL twin of migrations/sqlite/0003_delegation.sql: the same tables in PostgreSQL types
-- (BIGINT for every integer, identity columns for AUTOINCREMENT). Never edit once shipped.
-- Delegated confirmation: sub-agents asking their parent's session. Append-only: never
-- edit a shipped migration. Times and JSON as in 0001.

-- "Always" answers: run this tool for this agent path without asking, for calls whose
-- arguments contain args_pattern (every call when NULL). A revoked grant is kept, with
-- the time it was revoked, so the history of who allowed what stays readable.
CREATE TABLE grants (
    id             TEXT PRIMARY KEY NOT NULL,
    agent_path     TEXT NOT NULL,
    tool_name      TEXT NOT NULL,
    args_pattern   TEXT,
    correlation_id TEXT NOT NULL,   -- the answer that created it
    created_at     TEXT NOT NULL,
    revoked_at     TEXT
);

-- "Active grants of this agent for this tool", read before every delegated question.
CREATE INDEX grants_active ON grants (agent_path, tool_name) WHERE revoked_at IS NULL;

-- Every question a sub-agent's call raised and how it ended. decision_id links the
-- decision written on the answer (in the same transaction), which attributes that
-- decision to the asking agent path; it is NULL when nothing was decided (timeout,
-- nobody listening, cancelled, deferred): the item then stays pending for review.
CREATE TABLE delegations (
    -- SQLite's implicit rowid, spelled out: the store orders ties on insertion order
    -- (`ORDER BY created_at, rowid`) with the same SQL on both backends.
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
    correlation_id TEXT PRIMARY KEY NOT NULL,
    agent_path     TEXT NOT NULL,
    change_set_id  TEXT NOT NULL REFERENCES change_sets (id) ON DELETE CASCADE,
    item_index     BIGINT NOT NULL CHECK (item_index >= 0),
    tool_name      TEXT NOT NULL,
    outcome        TEXT NOT NULL CHECK (outcome IN ('proceedOnce', 'proceedAlways', 'proceedWithEdits', 'reject', 'deferred', 'cancelled', 'granted', 'unanswered')),
    reason         TEXT,
    decision_id    TEXT REFERENCES decisions (id) ON DELETE CASCADE,
    grant_id       TEXT REFERENCES grants (id),
    created_at     TEXT NOT NULL
);

CREATE INDEX delegations_by_change_set ON delegations (change_set_id, item_index);
