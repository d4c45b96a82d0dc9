-- PostgreSQL twin of migrations/sqlite/0005_tokens_and_change_feed.sql. Append-only.

CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('agent', 'reviewer', 'admin')),
    agent_id    TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT,
    CHECK ((role = 'agent') = (agent_id IS NOT NULL))
);

CREATE TABLE change_feed (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    change_set_id TEXT NOT NULL
);

CREATE FUNCTION change_feed_record() RETURNS trigger AS $$
BEGIN
    IF TG_TABLE_NAME = 'change_items' THEN
        INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
    ELSE
        INSERT INTO change_feed (change_set_id) VALUES (NEW.id);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER change_feed_set_written AFTER INSERT OR UPDATE ON change_sets
    FOR EACH ROW EXECUTE FUNCTION change_feed_record();

CREATE TRIGGER change_feed_item_updated AFTER UPDATE ON change_items
    FOR EACH ROW EXECUTE FUNCTION change_feed_record();
