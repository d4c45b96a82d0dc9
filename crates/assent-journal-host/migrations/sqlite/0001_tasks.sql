-- The journal host's migration 1: its tables, exactly as engine migration 0002 made them
-- (migrations/sqlite/0002_journal.sql) when the journal was the engine's only host.
-- Since engine migration 0008 the engine no longer runs 0002; the journal host runs
-- this instead (Store::migrate_host("journal", ...)). Every statement says IF NOT
-- EXISTS: on a database upgraded from a release that ran 0002 it changes nothing, on a
-- new database it creates the tables. Append-only: never edit once shipped.
-- The tasks live in the engine's database, so a confirmed change and its decision
-- commit in one transaction.

CREATE TABLE IF NOT EXISTS tasks (
    id               TEXT PRIMARY KEY NOT NULL,
    title            TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('OPEN', 'IN PROGRESS', 'GROOMED', 'BLOCKED', 'ON HOLD')),
    status_reason    TEXT,
    priority         TEXT CHECK (priority IN ('P0', 'P1', 'P2', 'P3')),
    estimate_minutes INTEGER CHECK (estimate_minutes BETWEEN 1 AND 1440),
    due_date         TEXT,
    language         TEXT,
    category         TEXT,
    vector_clock     TEXT NOT NULL DEFAULT '{}',
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS task_labels (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    label   TEXT NOT NULL COLLATE NOCASE,
    PRIMARY KEY (task_id, label)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS checklist_items (
    id         TEXT PRIMARY KEY NOT NULL,
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    title      TEXT NOT NULL,
    is_checked INTEGER NOT NULL DEFAULT 0 CHECK (is_checked IN (0, 1))
);

CREATE INDEX IF NOT EXISTS checklist_items_by_task ON checklist_items (task_id, position);

-- Local tools: the agent's own output about a task.
CREATE TABLE IF NOT EXISTS agent_reports (
    agent_id   TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    markdown   TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, task_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS agent_observations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    observation TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
