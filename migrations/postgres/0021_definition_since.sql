-- Since when a host tool's current definition is in force (issue 37). Append-only:
-- never edit a shipped migration.
--
-- `defined_at`: when the host first listed the definition `hash` stands for; a new
-- hash sets it again. Grant suggestions count only decisions made at or after it: a
-- person's confirmations of an older definition say nothing about the one in force.
-- Rows from before this migration do not know when their hash changed: an unchanged
-- tool takes the time it was first seen, a changed one (its hash not pinned) the time
-- it was last listed, so evidence from before the change cannot count (fail closed).
ALTER TABLE host_tools ADD COLUMN defined_at TEXT;
UPDATE host_tools SET defined_at = CASE WHEN hash = pinned_hash THEN first_seen_at ELSE updated_at END;
