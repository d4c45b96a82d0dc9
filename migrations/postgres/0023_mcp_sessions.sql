-- The MCP gateway's sessions (issue 41): a call answered with a receipt, or held by
-- `--wait`, belongs to the chat that made it. A call a person confirms after that
-- chat ended runs in no other session unless the operator marked its tool
-- run-after-disconnect for the agent. Append-only: never edit a shipped migration.
--
-- One row per running gateway of a server (a process serving one client over stdio,
-- or the HTTP clients of one process): `seen_at` is refreshed every few seconds while
-- it runs, `ended_at` set when its client leaves; a row neither ended nor seen lately
-- is a gateway that died.
CREATE TABLE mcp_sessions (
    id         TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    server     TEXT NOT NULL,
    started_at TEXT NOT NULL,
    seen_at    TEXT NOT NULL,
    ended_at   TEXT
);

-- The session that made each queued call (a call returned as an MCP task has none: a
-- task outlives its session by design).
CREATE TABLE mcp_session_calls (
    change_set_id TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL
);

-- The operator's word that a tool's calls may run after their chat ended (`assent
-- agent run-after-disconnect AGENT TOOL`).
CREATE TABLE agent_run_after_disconnect_tools (
    agent_id   TEXT NOT NULL,
    tool_name  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, tool_name)
);
