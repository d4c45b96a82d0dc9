-- Reviewer and admin tokens name the person they were issued to (issue 52): a token
-- decides as that person (`token:ID (alice)`), so alice's token and alice's Slack
-- click or `--as alice` count once toward a quorum. Tokens made before this migration
-- keep a NULL person: they still decide what one person may, and are refused for
-- items that need more than one (re-issue them with `assent tokens add --person`).
-- Append-only: never edit a shipped migration.
ALTER TABLE api_tokens ADD COLUMN person TEXT;
