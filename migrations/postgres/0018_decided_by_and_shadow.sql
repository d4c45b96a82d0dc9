-- Who decided, and what a shadow rule said (issue 29). Append-only: never edit a shipped migration.
--
-- `decided_by`: the person a decision made on this device names (a token's id over the
-- API, `--as` or the OS user on the CLI); NULL when not known (a library caller that
-- named nobody, decisions from before this migration, and decisions synced from
-- another device, which carry no person). Grant suggestions count `reviewers` by it.
-- `shadow`: `{"rule": "allow"|"ask"|"deny", "agreed": true|false}` when a shadow rule
-- of the agent covered the decided tool (`assent agent allow A T --shadow`): what the
-- rule would have done beside what the person did. Neither travels in sync.
ALTER TABLE decisions ADD COLUMN decided_by TEXT;
ALTER TABLE decisions ADD COLUMN shadow TEXT;
