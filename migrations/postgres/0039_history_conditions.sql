-- Rules over the session's history (issue 57): a rule's condition (a rate, a sequence,
-- a running total) reads the agent's audit records of a recent window inside each
-- decision's transaction (assent-store's `run_history`). Append-only: never edit a
-- shipped migration.
--
-- A rule's condition itself lives in its JSON in `agents.rules` (and `shadow_rules`):
-- no column changes, and rows written before have none.
CREATE INDEX audit_records_by_agent_time ON audit_records (agent_id, created_at);
