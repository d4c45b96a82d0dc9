-- The sync imports' own audit trail (assent-store's `sync` module). Append-only: never
-- edit a shipped migration. Times as in 0001.

-- Every batch this device was asked to merge, from a file, stdin, `POST /api/sync` or
-- the answer of `sync --peer`: which batch, from which device, when, and what came of
-- it. A refused batch changes no synced state, but its refusal is recorded here (in a
-- transaction of its own, after the import's has rolled back).
CREATE TABLE sync_imports (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id         TEXT NOT NULL,
    from_host        TEXT NOT NULL,
    batch_created_at TEXT NOT NULL,
    imported_at      TEXT NOT NULL,
    outcome          TEXT NOT NULL CHECK (outcome IN ('merged', 'replayed', 'refused')),
    -- A merge's report (JSON, as `sync import --json` prints it), or why it was refused.
    detail           TEXT NOT NULL
);

CREATE INDEX sync_imports_by_batch ON sync_imports (batch_id);
