-- "Yes, for this session". Append-only: never edit a shipped migration.

-- A grant a person gave while answering a coding agent's hook call: it covers only
-- later calls of the same agent in the same session of that coding agent (the hook
-- event's session_id), of the same tool, whose arguments the pattern covers: a rule
-- pattern the person saw (call_pattern, e.g. Bash(git status*)), or, when NULL,
-- exactly the arguments of the call answered (args_pattern). Grants of sub-agents
-- (delegation) keep both NULL.
ALTER TABLE grants ADD COLUMN session_id TEXT;
ALTER TABLE grants ADD COLUMN call_pattern TEXT;
-- Not over agent_id, so a column an older migration added can still be dropped in tests.
CREATE INDEX grants_active_by_session ON grants (session_id, tool_name) WHERE revoked_at IS NULL AND session_id IS NOT NULL;
