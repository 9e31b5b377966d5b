-- A claim in the database before a version's bytes are given to a node (src/sending/OutgoingSends.ts, issue 32): the
-- first broadcast of a version is made by the one process whose conditional UPDATE set `broadcast_claimed_at`; another
-- process (a takeover after a freeze, a handler run twice) finds it claimed and asks the node instead of sending the
-- bytes again. A claim older than the grace (`broadcastClaimGraceMillis`) may be taken again, so a claimer that died
-- before the node got the bytes does not strand them; the new claimer first asks the node whether it holds them.
-- `broadcast_claims` counts the claims taken: above 1, an earlier claimer may have reached the node.
ALTER TABLE outgoing_versions
  ADD COLUMN broadcast_claimed_at timestamptz,
  ADD COLUMN broadcast_claims integer NOT NULL DEFAULT 0 CHECK (broadcast_claims >= 0);

-- Versions a node already took were claimed by that broadcast.
UPDATE outgoing_versions SET broadcast_claimed_at = signed_at, broadcast_claims = 1 WHERE broadcasts > 0;
