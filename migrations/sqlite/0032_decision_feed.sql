-- The decision feed (issue 54): every decision, by any process or device, in the
-- order it was committed, so that a service follows decisions with a cursor
-- (`Engine::decisions_since`) instead of re-reading sets. SQLite has one writer at a
-- time, so the order of `seq` is the commit order. Decisions made before this
-- migration are entered first, oldest first. Append-only: never edit a shipped
-- migration.
CREATE TABLE decision_feed (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    decision_id TEXT NOT NULL
);

INSERT INTO decision_feed (decision_id) SELECT id FROM decisions ORDER BY created_at, rowid;

CREATE TRIGGER decision_feed_recorded AFTER INSERT ON decisions
BEGIN
    INSERT INTO decision_feed (decision_id) VALUES (NEW.id);
END;
