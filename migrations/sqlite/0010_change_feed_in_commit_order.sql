-- SQLite twin of migrations/postgres/0010_change_feed_in_commit_order.sql: nothing to
-- change here. SQLite has one writer at a time, so the change feed is already numbered
-- in commit order. The file keeps both backends at the same version. Append-only.

SELECT 1;
