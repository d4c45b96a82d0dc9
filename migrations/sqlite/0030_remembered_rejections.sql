-- Rejections that are remembered, and said so (issue 53, point 6). Append-only: never
-- edit a shipped migration.
--
-- `agents.rejection_memory`: how the agent's calls a person rejected are remembered, as
-- a JSON object: `windowSeconds` (how long an identical later call is refused without
-- asking anyone; absent: 7 days, 0: never), `forgotten` (ids of rejections a person
-- told Assent to forget, `assent rejections forget ID`) and `forgottenBefore` (every
-- rejection decided up to that time is forgotten, `--all`). Part of the agent's rules
-- entry on the consent chain when not empty, so who changed it is on the record.
ALTER TABLE agents ADD COLUMN rejection_memory TEXT NOT NULL DEFAULT '{}';

-- `refused_by`: on the record of a call refused without asking anyone, what refused it
-- (`{"rejectedBefore": DECISION_ID}`: a person rejected exactly this call before). NULL
-- otherwise, and for records written before this migration.
ALTER TABLE audit_records ADD COLUMN refused_by TEXT;
-- `assent review` looks for refusals often: only the few refused rows are indexed.
CREATE INDEX audit_records_refused ON audit_records (created_at) WHERE refused_by IS NOT NULL;
