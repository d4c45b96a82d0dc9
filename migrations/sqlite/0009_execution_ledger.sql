-- The execution ledger: tools whose effect lies outside the database (an HTTP call,
-- an e-mail, an MCP server's tool) cannot run inside the confirming transaction.
-- The wake records on the item which host serves it and whether its effect is
-- external (NULL: transactional, today's path); confirming such an item writes one
-- job per operation id, and an executor of that host claims it with a lease, calls,
-- and records the outcome. A lease that runs out with no outcome leaves the job
-- 'inDoubt' until the host reconciles it or a person settles it.

ALTER TABLE change_items ADD COLUMN effect TEXT CHECK (effect IN ('external', 'externalIdempotent'));
ALTER TABLE change_items ADD COLUMN host TEXT;

CREATE TABLE execution_jobs (
    id             TEXT PRIMARY KEY NOT NULL,
    operation_id   TEXT NOT NULL UNIQUE,
    change_set_id  TEXT NOT NULL REFERENCES change_sets (id) ON DELETE CASCADE,
    item_index     INTEGER NOT NULL,
    host           TEXT NOT NULL,
    tool_name      TEXT NOT NULL,
    args           TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    target_kind    TEXT NOT NULL,
    target_id      TEXT NOT NULL,
    run_key        TEXT NOT NULL,
    idempotent     INTEGER NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('approved', 'running', 'applied', 'failed', 'inDoubt', 'retracted')),
    attempts       INTEGER NOT NULL DEFAULT 0,
    attempt_limit  INTEGER NOT NULL,
    doubts         INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT,
    result         TEXT,
    due_at         TEXT NOT NULL,
    started_at     TEXT,
    lease_until    TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    UNIQUE (change_set_id, item_index)
);
CREATE INDEX execution_jobs_due ON execution_jobs (host, due_at) WHERE status = 'approved';
CREATE INDEX execution_jobs_leased ON execution_jobs (host, lease_until) WHERE status = 'running';

-- A job's new status reaches open review pages like any write to its set.
CREATE TRIGGER change_feed_job_status AFTER UPDATE OF status ON execution_jobs
WHEN OLD.status IS NOT NEW.status
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
END;
