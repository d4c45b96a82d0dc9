-- PostgreSQL twin of migrations/sqlite/0032_decision_feed.sql. Append-only.
--
-- Writers of different targets commit side by side here, so an identity alone would
-- not be in commit order (a reader could pass a number whose transaction commits
-- later). The trigger first takes the change feed's commit-order lock (migration
-- 0010): feed entries are numbered one transaction at a time, in commit order. A
-- decision is written at the end of its transaction, after the handler ran, so the
-- lock is held only for its last statements.
CREATE TABLE decision_feed (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decision_id TEXT NOT NULL
);

INSERT INTO decision_feed (decision_id) SELECT id FROM decisions ORDER BY created_at, rowid;

CREATE FUNCTION decision_feed_record() RETURNS trigger AS $$
BEGIN
    -- 0x4153_5345_4e54_4644: "ASSENTFD", the change feed's lock (0010).
    PERFORM pg_advisory_xact_lock(4707197592664294980);
    INSERT INTO decision_feed (decision_id) VALUES (NEW.id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER decision_feed_recorded AFTER INSERT ON decisions
    FOR EACH ROW EXECUTE FUNCTION decision_feed_record();
