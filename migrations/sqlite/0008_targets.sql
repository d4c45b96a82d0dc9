-- The engine's tables speak of a target (a host's kind and id), not of the journal's
-- task: any service gates its own tools. Rows written before this migration were all
-- about the journal's tasks, hence the default kind 'task'; the code always names one.
-- The journal's own tables (migration 0002) stay where they are: from now on the
-- journal host creates them as its own migration 1 (IF NOT EXISTS), and the engine's
-- migrator skips 0002, so a new database gets no task tables unless a host asks.

ALTER TABLE change_sets RENAME COLUMN task_id TO target_id;
ALTER TABLE change_sets ADD COLUMN target_kind TEXT NOT NULL DEFAULT 'task';
DROP INDEX change_sets_open_by_task;
CREATE INDEX change_sets_open_by_target ON change_sets (target_kind, target_id, created_at DESC)
    WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL;

ALTER TABLE decisions RENAME COLUMN task_id TO target_id;
ALTER TABLE decisions ADD COLUMN target_kind TEXT NOT NULL DEFAULT 'task';
DROP INDEX decisions_recent_by_agent_task;
CREATE INDEX decisions_recent_by_agent_target ON decisions (agent_id, target_kind, target_id, created_at DESC);

ALTER TABLE audit_records RENAME COLUMN task_id TO target_id;
ALTER TABLE audit_records ADD COLUMN target_kind TEXT NOT NULL DEFAULT 'task';
DROP INDEX audit_records_by_task;
CREATE INDEX audit_records_by_target ON audit_records (target_kind, target_id, id);

ALTER TABLE applied_operations RENAME COLUMN task_id TO target_id;
ALTER TABLE applied_operations ADD COLUMN target_kind TEXT NOT NULL DEFAULT 'task';

ALTER TABLE sync_conflicts RENAME COLUMN task_id TO target_id;
ALTER TABLE sync_conflicts ADD COLUMN target_kind TEXT NOT NULL DEFAULT 'task';

