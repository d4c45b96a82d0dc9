-- The coding agent behind an agent's hook (issue 52), recorded when its first hook
-- event arrives, with the tool names that kind of agent sends: a rule naming a tool
-- the agent never sends (`Bash(rm *)` for Gemini CLI, whose shell is
-- `run_shell_command`) would never match, so setting one is refused. Append-only:
-- never edit a shipped migration.
CREATE TABLE agent_kinds (
    agent_id    TEXT PRIMARY KEY NOT NULL,
    kind        TEXT NOT NULL,
    -- A JSON array of the tool names the kind sends (MCP tools aside).
    tool_names  TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
