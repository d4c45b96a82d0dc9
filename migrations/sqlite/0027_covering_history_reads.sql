-- The history reads answered from their indexes alone (issue 42): "pending sets of a
-- target / of an agent" and "recent decisions of an agent about a target" name only the
-- columns their callers decode, and these indexes hold every one of them, so SQLite
-- reads the matching index entries and never the table (`USING COVERING INDEX`). Each
-- replaces the narrower index of the same query: a write still updates as many
-- indexes as before. An open set's `deleted_at` is always NULL, but SQLite counts a
-- partial index as covering only when it also holds the columns of its own `WHERE`.
-- `id DESC` finishes the sets' order inside the index; decisions that tie on
-- `created_at` are still sorted by rowid among themselves, as before (`ORDER BY
-- created_at DESC, rowid DESC`; the index delivers them in `created_at` order, so a
-- `LIMIT` still stops the search early). Append-only: never edit a shipped migration.

DROP INDEX change_sets_open_by_target;
CREATE INDEX change_sets_open_by_target_covering ON change_sets
    (target_kind, target_id, created_at DESC, id DESC,
     agent_id, thread_id, run_key, status, resolved_at, vector_clock, deleted_at)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

DROP INDEX change_sets_open_by_agent;
CREATE INDEX change_sets_open_by_agent_covering ON change_sets
    (agent_id, created_at DESC, id DESC,
     target_kind, target_id, thread_id, run_key, status, resolved_at, vector_clock, deleted_at)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

DROP INDEX decisions_recent_by_agent_target;
CREATE INDEX decisions_recent_by_agent_target_covering ON decisions
    (agent_id, target_kind, target_id, created_at DESC,
     id, change_set_id, item_index, tool_name, verdict, reason, edited_args,
     human_summary, args, vector_clock, decided_by);

-- The history section's third read: which of the agent's confirmed items a confirmed
-- undo set reverses (the set's id joins its first item; `undoes` is the answer).
DROP INDEX change_sets_undoing;
CREATE INDEX change_sets_undoing_covering ON change_sets (agent_id, id, undoes)
    WHERE undoes IS NOT NULL;
