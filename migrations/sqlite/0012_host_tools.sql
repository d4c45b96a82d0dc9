-- The tools a host serves, as the host described them (an MCP gateway's upstream
-- tools/list). Append-only: never edit a shipped migration.
--
-- Kept in the database so that any process, not only the host's own, can validate a
-- person's edit of the host's items against the tool's input schema and show the
-- tool's annotations, and so that a definition that changed after it was first seen
-- (a "rug pull": same name, new description or schema) is caught: `hash` is the
-- definition now, `pinned_hash` the one a person last accepted (the first seen, or
-- the one current when a person allowed the tool again). While they differ, the tool
-- is asked about on every call, whatever rules or hints say.
CREATE TABLE host_tools (
    host          TEXT NOT NULL,
    tool_name     TEXT NOT NULL,
    agent_id      TEXT,
    trust         TEXT,
    definition    TEXT NOT NULL,
    input_schema  TEXT NOT NULL,
    hash          TEXT NOT NULL,
    pinned_hash   TEXT NOT NULL,
    first_seen_at TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (host, tool_name)
);
CREATE INDEX host_tools_by_agent ON host_tools (agent_id, tool_name);

-- The operator's word that a tool is idempotent for an agent (`assent agent idempotent
-- AGENT TOOL`): an approved call of it that a crash left in doubt simply runs again.
-- A host's own hints (an MCP server's idempotentHint) count only under `--trust
-- hints`; this is how an operator says so without trusting the server.
CREATE TABLE agent_idempotent_tools (
    agent_id   TEXT NOT NULL,
    tool_name  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, tool_name)
);
