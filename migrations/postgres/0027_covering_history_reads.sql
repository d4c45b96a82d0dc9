-- The history reads served from their indexes (issue 42): "pending sets of a target /
-- of an agent" and "recent decisions of an agent about a target" name only the columns
-- their callers decode. Each index replaces the narrower one of the same query (a write
-- still updates as many indexes as before) and carries the query's whole order, ties
-- included (`id DESC` for sets, `rowid DESC` for decisions). The open sets' indexes
-- include every column the read returns (an index-only scan where the visibility map
-- allows); a decision's index does not include its text columns: a B-tree entry is
-- limited to about 2.7 kB and a call's arguments may be longer, so its rows are read
-- from the table, in the index's order. Append-only: never edit a shipped migration.

DROP INDEX change_sets_open_by_target;
CREATE INDEX change_sets_open_by_target_covering ON change_sets
    (target_kind, target_id, created_at DESC, id DESC)
    INCLUDE (agent_id, thread_id, run_key, status, resolved_at, vector_clock)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

DROP INDEX change_sets_open_by_agent;
CREATE INDEX change_sets_open_by_agent_covering ON change_sets
    (agent_id, created_at DESC, id DESC)
    INCLUDE (target_kind, target_id, thread_id, run_key, status, resolved_at, vector_clock)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

DROP INDEX decisions_recent_by_agent_target;
CREATE INDEX decisions_recent_by_agent_target_covering ON decisions
    (agent_id, target_kind, target_id, created_at DESC, rowid DESC);

-- The history section's third read: which of the agent's confirmed items a confirmed
-- undo set reverses (the set's id joins its first item; `undoes` is the answer).
DROP INDEX change_sets_undoing;
CREATE INDEX change_sets_undoing_covering ON change_sets (agent_id)
    INCLUDE (id, undoes) WHERE undoes IS NOT NULL;
