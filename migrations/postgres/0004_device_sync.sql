-- PostgreSQL twin of migrations/sqlite/0004_device_sync.sql: the same tables in PostgreSQL types
-- (BIGINT for every integer, identity columns for AUTOINCREMENT). Never edit once shipped.
-- Device sync (assent-sync, assent-store's `sync` module). Append-only.

-- This device's host id in vector clocks: generated once, on the first open.
CREATE TABLE sync_device (
    singleton BIGINT PRIMARY KEY NOT NULL CHECK (singleton = 1),
    host_id   TEXT NOT NULL CHECK (host_id <> '')
);

-- Items carry the clock of their set as of their last status change.
ALTER TABLE change_items ADD COLUMN vector_clock TEXT NOT NULL DEFAULT '{}';

-- Where a row came from. NULL means this device (rows written before sync existed,
-- and every local write), so the local write paths need not know the host id.
ALTER TABLE decisions ADD COLUMN origin_host TEXT;
ALTER TABLE audit_records ADD COLUMN origin_host TEXT;
-- An imported audit record's id on the device that wrote it.
ALTER TABLE audit_records ADD COLUMN origin_id BIGINT;
CREATE UNIQUE INDEX audit_records_by_origin ON audit_records (origin_host, origin_id)
    WHERE origin_host IS NOT NULL;

-- Final decisions that lost to an earlier one on the same item (made on two devices
-- while apart). Kept whole, out of the decisions table, whose unique index admits one
-- final decision per item.
CREATE TABLE sync_conflicts (
    decision_id        TEXT PRIMARY KEY NOT NULL,
    change_set_id      TEXT NOT NULL,
    item_index         BIGINT NOT NULL,
    task_id            TEXT NOT NULL,
    origin_host        TEXT NOT NULL,
    decision           TEXT NOT NULL, -- the losing decision, JSON
    winner_decision_id TEXT NOT NULL,
    winner_host        TEXT NOT NULL,
    winner_verdict     TEXT NOT NULL,
    recorded_at        TEXT NOT NULL
);

CREATE INDEX sync_conflicts_by_item ON sync_conflicts (change_set_id, item_index);

-- Batches already merged: a replayed batch is recognised and changes nothing.
CREATE TABLE sync_applied_batches (
    batch_id   TEXT PRIMARY KEY NOT NULL,
    from_host  TEXT NOT NULL,
    applied_at TEXT NOT NULL
);

-- Per peer: the last batch merged from it, and how many.
CREATE TABLE sync_peers (
    host_id        TEXT PRIMARY KEY NOT NULL,
    last_batch_id  TEXT NOT NULL,
    last_merged_at TEXT NOT NULL,
    batches_merged BIGINT NOT NULL
);
