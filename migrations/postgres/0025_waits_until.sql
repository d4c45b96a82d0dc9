-- How long the caller of a queued call still waits (issue 39): the moment until which
-- the MCP gateway's `--wait` holds the client's request, so a reviewer can be told
-- "the agent waits 42 s more" or "the agent stopped waiting". Untrusted display data
-- of this device: never read by a decision, never synced. Append-only: never edit a
-- shipped migration.
CREATE TABLE change_set_waits (
    change_set_id TEXT PRIMARY KEY,
    waits_until   TEXT NOT NULL
);

-- A wait recorded just after its set was queued reaches reviewers' screens through
-- the change feed like any other write to the set.
CREATE FUNCTION change_feed_wait() RETURNS trigger AS $$
BEGIN
    INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER change_feed_wait_recorded AFTER INSERT OR UPDATE ON change_set_waits
    FOR EACH ROW EXECUTE FUNCTION change_feed_wait();
