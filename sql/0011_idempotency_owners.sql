-- Idempotency after a crash (docs/wallets.md "Idempotency"): a request whose process died must not hold its key
-- until a lease runs out, and a re-execution must never race the execution it replaces.
--
-- Each running service process is one row here. It holds a PostgreSQL advisory lock (classid = the constant of
-- src/idempotency/ServiceInstance.ts, objid = lock_key) on a connection of its own for as long as it lives, and
-- refreshes heartbeat_at every few seconds. A process is live while both hold: the lock is gone the moment its
-- connection closes (kill -9 included, the kernel closes the socket), the heartbeat goes stale when its host vanished
-- without closing anything (power cut, network partition).
CREATE TABLE service_instances (
  id uuid PRIMARY KEY,
  lock_key serial NOT NULL UNIQUE,
  started_at timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL
);

-- An IN_PROGRESS record names the process executing it and that execution's claim (a fencing token): the response
-- is stored only under the same claim, so after a take-over the replaced execution can no longer commit its effect.
-- Both are cleared when the record is settled. Records written before this migration have neither and keep the
-- lease of locked_until.
ALTER TABLE idempotency_records ADD COLUMN owner_instance uuid;
ALTER TABLE idempotency_records ADD COLUMN claim_id uuid;
ALTER TABLE idempotency_records ADD CONSTRAINT idempotency_records_owner_in_progress
  CHECK (state = 'IN_PROGRESS' OR (owner_instance IS NULL AND claim_id IS NULL));
CREATE INDEX idempotency_records_in_progress_owner_idx ON idempotency_records (owner_instance)
  WHERE state = 'IN_PROGRESS';
