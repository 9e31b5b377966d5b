-- The per-key requests-per-second cap (spec section 5, check 11; section 8), counted once for the key across every
-- process (issue 32): one row per key, its current one-second window and the fresh requests counted in it. The
-- statement that records a request's nonce (src/auth/NonceStore.ts) counts it here too, so the cap costs no round
-- trip of its own. A window is a Unix second of the recording process's clock; a process whose clock is behind the
-- row's window counts into that newer window (never a second count for the same requests). One row per key that
-- ever made a request: nothing to purge.
CREATE TABLE auth_rate_windows (
  key_id text PRIMARY KEY,
  window_second bigint NOT NULL,
  requests integer NOT NULL CHECK (requests >= 0)
);
