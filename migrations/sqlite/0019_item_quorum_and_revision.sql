-- What a person's confirmation binds to (issue 37). Append-only: never edit a shipped
-- migration.
--
-- `approvals_needed`: the quorum an item's tool needed when it was proposed (the
-- agent's settings then, matched by pattern as rules are); it travels with the item in
-- sync, so a device without the setting still enforces it. NULL: one person (and items
-- written before this migration, which take the settings in force when confirmed).
-- `revision`: the item's current revision. An edit under a quorum and a stale-target
-- refresh each start a new one; approvals of older revisions no longer count, and a
-- confirmation that names the revision it was shown is refused once it moved.
ALTER TABLE change_items ADD COLUMN approvals_needed INTEGER;
ALTER TABLE change_items ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;

-- `allowed_by`: on the records of a call that ran without a person, what let it run
-- (`{"rule": {pattern, action, expiresAt?}}`, `{"mode": "immediate"}`, `{"grant": id}`),
-- so the trail says why each unasked run was allowed. NULL for calls a person
-- confirmed, and for records written before this migration.
ALTER TABLE audit_records ADD COLUMN allowed_by TEXT;
