-- An approval binds the exact action. Append-only: never edit a shipped migration.
--
-- `approval_digest`: SHA-256 over the effective action a person approved (the tool, the
-- arguments that run, the target's fingerprint seen, the tool definition's hash), on
-- the confirmation and on the job that runs it later; the executor recomputes it
-- before the run and refuses, audited, when it no longer matches.
ALTER TABLE decisions ADD COLUMN approval_digest TEXT;
ALTER TABLE execution_jobs ADD COLUMN approval_digest TEXT;
