-- Two-step verification attempts (spec 4.4: more than 10 checks per user in 15 minutes is 429 RATE_LIMITED). One
-- row per check, in the database so the bound holds across processes; rows older than the window are deleted as new
-- checks arrive.
CREATE TABLE two_factor_checks (
  user_id uuid NOT NULL REFERENCES users (id),
  checked_at timestamptz NOT NULL
);
CREATE INDEX two_factor_checks_user_idx ON two_factor_checks (user_id, checked_at);
