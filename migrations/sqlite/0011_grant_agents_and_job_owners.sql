-- Second security round (SQLite twin of the PostgreSQL file). Append-only: never edit a shipped migration.

-- A grant is bound to the agent it was given to, not only to a sub-agent path: the
-- path is built from a name the caller chooses (`subAgent`), so two agents could
-- name the same one. Grants given before this migration take the agent of the change
-- set whose answer created them; one whose answer cannot be found keeps NULL and
-- allows nothing (fail closed).
ALTER TABLE grants ADD COLUMN agent_id TEXT;
UPDATE grants SET agent_id = (
    SELECT change_sets.agent_id FROM delegations
    JOIN change_sets ON change_sets.id = delegations.change_set_id
    WHERE delegations.correlation_id = grants.correlation_id
);
CREATE INDEX grants_active_by_agent ON grants (agent_id, agent_path, tool_name) WHERE revoked_at IS NULL;

-- Jobs travel in device sync so every device shows an external item's run, but only
-- the device whose executor owns a job runs it: a job copied from another device
-- names that device here (NULL: this device's own).
ALTER TABLE execution_jobs ADD COLUMN owner_device TEXT;
