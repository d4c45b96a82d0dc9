-- Where `assent audit verify` last found the consent chain whole (issue 55). Append-only.
--
-- One row per chain (device): the last entry a verify that found nothing wrong
-- covered, its hash, when, which version of the binary verified it, and the highest
-- audit record id it saw. The next verify starts after that entry (`--full` ignores
-- the row); a row whose entry is no longer on the chain with the same hash is itself
-- a violation and makes the verify run in full. Only a clean verify writes here.
CREATE TABLE verified_heads (
    device_id   TEXT PRIMARY KEY NOT NULL,
    seq         BIGINT NOT NULL CHECK (seq >= 0),
    hash        TEXT NOT NULL,
    audit_id    BIGINT NOT NULL,
    verified_at TEXT NOT NULL,
    version     TEXT NOT NULL
);
