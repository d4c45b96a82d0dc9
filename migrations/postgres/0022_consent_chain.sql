-- The consent chain (issue 38). Append-only: never edit a shipped migration.
--
-- `consent_chain`: one entry per thing decided or done (a decision, an approval, an
-- audit record, a job's status, an agent's rules after a change, a grant), in the
-- order this device wrote them. Each entry holds its canonical content and the
-- SHA-256 of (the previous entry's hash, its own position, kind, subject and
-- content), so editing, removing or reordering any entry breaks every hash after it;
-- a head written down elsewhere (`assent audit head`) also catches a rewritten tail.
-- Chains are per device: sync never rewrites another device's entries.
--
-- `consent_chain_origin`: where the chain begins on a database that had history
-- before this migration. Nothing written before it is claimed: the first entry
-- ("chainBegins") copies this row, and `audit verify` checks effects whose audit id
-- is above `audit_id_floor` only.
CREATE TABLE consent_chain (
    device_id  TEXT NOT NULL,
    seq        BIGINT NOT NULL CHECK (seq >= 1),
    kind       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    content    TEXT NOT NULL,
    prev       TEXT NOT NULL,
    hash       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (device_id, seq)
);

CREATE INDEX consent_chain_by_subject ON consent_chain (kind, subject);

CREATE TABLE consent_chain_origin (
    singleton      INTEGER PRIMARY KEY NOT NULL CHECK (singleton = 1),
    audit_id_floor BIGINT NOT NULL,
    had_history    INTEGER NOT NULL
);

INSERT INTO consent_chain_origin (singleton, audit_id_floor, had_history)
SELECT 1, COALESCE(MAX(id), 0),
       CASE WHEN EXISTS (SELECT 1 FROM decisions) OR EXISTS (SELECT 1 FROM audit_records) THEN 1 ELSE 0 END
FROM audit_records;
