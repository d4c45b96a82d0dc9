-- Writers of different targets commit side by side since decisions lock their target
-- only (Store::begin_write_on), so identity values of the change feed could become
-- visible out of order: a reader that saw seq 11 would skip seq 10 committed after it.
-- The feed's trigger therefore takes a transaction-scoped advisory lock before it
-- numbers an entry: from a transaction's first feed entry to its commit, feed writers
-- queue, and the feed's order is the commit order. The handler's work before it (the
-- slow part of a confirmation) still runs in parallel. Append-only.

CREATE OR REPLACE FUNCTION change_feed_record() RETURNS trigger AS $$
BEGIN
    -- 0x4153_5345_4e54_4644: "ASSENTFD", beside the writer lock's "ASSENT".
    PERFORM pg_advisory_xact_lock(4707197592664294980);
    IF TG_TABLE_NAME = 'change_items' THEN
        INSERT INTO change_feed (change_set_id) VALUES (NEW.change_set_id);
    ELSE
        INSERT INTO change_feed (change_set_id) VALUES (NEW.id);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
