-- Approvals that stay true: a hold window (issue 28). Append-only: never edit a shipped migration.
--
-- `agents.tool_settings`: per-tool settings of an agent, as a JSON object keyed by tool
-- name, e.g. {"update_task_priority": {"holdSeconds": 12}}. `assent agent hold AGENT
-- TOOL SECS` writes `holdSeconds` (0 removes it).
ALTER TABLE agents ADD COLUMN tool_settings TEXT NOT NULL DEFAULT '{}';
-- A confirmation of a held tool is a job that stays `approved` with `held` = 1 and
-- `due_at` at the end of the window: until then a person may cancel it (the item ends
-- rejected). The confirmation becomes a decision only when the window ends, in the
-- transaction that claims the job, so a cancelled confirmation never reaches the
-- decisions table, the agent or another device. `held` stays 1 afterwards: the job
-- was held once.
ALTER TABLE execution_jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
