-- Each running process records the broadcast claim's grace it uses (BROADCAST_CLAIM_GRACE_MS; sql/0030,
-- src/sending/ClaimGraceAgreement.ts): every process should use the same one, and a process that finds a live one with
-- another logs an error naming both. NULL for processes started before this migration.
ALTER TABLE service_instances ADD COLUMN broadcast_claim_grace_ms integer;
