-- Approvals that stay true. Append-only: never edit a shipped migration.
--
-- `fingerprint`: what the fields a proposal would touch held when it was made (the
-- host's `TargetState::fingerprint`, JSON), compared with the target's state when the
-- item is confirmed and again when its job runs: a difference means the target
-- changed since the proposal, and the item is not applied to what it has become.
-- `stale_detail`: why an item was found stale (its "before" was refreshed then).
-- `undoes`: a change set that reverses an applied item (`assent undo`), as
-- {changeSetId, itemIndex, operationId}.
ALTER TABLE change_items ADD COLUMN fingerprint TEXT;
ALTER TABLE change_items ADD COLUMN stale_detail TEXT;
ALTER TABLE change_sets ADD COLUMN undoes TEXT;
-- The agent's history marks an item undone: its undo sets are few, found by agent.
CREATE INDEX change_sets_undoing ON change_sets (agent_id) WHERE undoes IS NOT NULL;
