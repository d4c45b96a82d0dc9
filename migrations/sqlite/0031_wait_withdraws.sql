-- Whether the caller of a queued call withdraws it when its wait ends (issue 53): a
-- coding agent's hook in `--on-timeout ask` mode hands the call to the agent's own
-- prompt then, so nothing will ever claim a confirmation given after that moment. A
-- confirmation reads it only to refuse such an item ("the session that asked for it
-- has ended") and withdraw it: it can make nothing run. Append-only: never edit a
-- shipped migration.
ALTER TABLE change_set_waits ADD COLUMN withdrawn_at_end INTEGER NOT NULL DEFAULT 0;
