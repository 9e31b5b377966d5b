-- A send that was final (CONFIRMED, REVERTED, or a nonce fill's REJECTED) whose block a reorganization deeper than
-- the confirmation rule took away (issue 35; docs/sending.md "Reorganized after it was final"). The deposit
-- watcher's rewind reopens it in the transaction that rewinds the block (state PENDING, FILLING for a fill, no
-- inclusion), so the chain books show it in flight; `reorganized_from_state` and `reorganized_tx_hash` keep what it
-- was and which version's bytes were on the chain, and are set exactly while it is reopened. The ReorganizedSends
-- loop gives a node those same bytes again until a version is final again, then restores the state (the journal
-- booked that inclusion already; nothing is booked twice). `reorganized_at` and `reorganizations` stay as history.
ALTER TABLE outgoing_sends
  ADD COLUMN reorganized_from_state text CHECK (reorganized_from_state IN ('CONFIRMED', 'REVERTED', 'REJECTED')),
  ADD COLUMN reorganized_tx_hash text,
  ADD COLUMN reorganized_at timestamptz,
  ADD COLUMN reorganizations integer NOT NULL DEFAULT 0 CHECK (reorganizations >= 0),
  ADD CONSTRAINT outgoing_sends_reorganized_check CHECK (
    (reorganized_from_state IS NULL) = (reorganized_tx_hash IS NULL)
    AND (reorganized_from_state IS NULL OR (state IN ('PENDING', 'FILLING') AND included_height IS NULL))
  );
-- The loop's and /ops/health's question, asked every few seconds: which sends are reopened now (almost always none).
CREATE INDEX outgoing_sends_reorganized_idx ON outgoing_sends (network_key) WHERE reorganized_from_state IS NOT NULL;
