-- Two-person approval (issue 29). Append-only: never edit a shipped migration.
--
-- `agents.tool_settings` (0016) gains `approvals`: how many distinct people must
-- confirm an item of that tool (`assent agent ask AGENT TOOL --approvals N`; 1, today's
-- behaviour, is not stored).
--
-- `approvals`: the partial confirmations of an item that needs more than one. Each
-- names who approved (a token's id over the API and the page, `--as` or the OS user
-- on the CLI) and the revision approved: an edit starts a new revision with the
-- edited arguments (the editor's approval counts for it), and approvals of older
-- revisions no longer count. The confirmation that meets the quorum writes the one
-- decision, in the same transaction as its check, under the item's lock.
CREATE TABLE approvals (
    change_set_id TEXT NOT NULL REFERENCES change_sets (id) ON DELETE CASCADE,
    item_index    INTEGER NOT NULL,
    revision      INTEGER NOT NULL,
    approved_by   TEXT NOT NULL,
    args          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (change_set_id, item_index, revision, approved_by)
);
