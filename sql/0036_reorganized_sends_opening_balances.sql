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

-- Opening balances (issue 35; docs/ledger.md "Opening balances"): what an operating address (HOT, SWEEP, a GAS wallet)
-- held at the end of the block its network's deposit watcher started from, so that money there before the service
-- first watched the network (funded early, or carried over from a previous system) is in the chain books rather
-- than unexplained forever. The watcher records every receipt after that block; an opening at any other block would
-- miss or double some. Recorded by the operator (POST /ops/networks/{networkKey}/opening_balances) with who and when
-- (the operator audit entry of the same transaction, found by its request id), never changed afterwards. BTC by outputs
-- (txid, vout): the books compare outputs one for one (ledger/ChainOutputs.ts).
ALTER TABLE chain_cursors ADD COLUMN started_height bigint CHECK (started_height >= 0);

CREATE TABLE opening_balances (
  id uuid PRIMARY KEY,
  network_key text NOT NULL REFERENCES networks (network_key),
  address text NOT NULL,
  role text NOT NULL CHECK (role IN ('HOT', 'SWEEP', 'GAS')),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  -- The block it was held at: the watcher's start.
  height bigint NOT NULL CHECK (height >= 0),
  txid text,
  vout integer CHECK (vout >= 0),
  recorded_at timestamptz NOT NULL,
  recorded_by text NOT NULL,
  request_id text NOT NULL,
  CHECK ((txid IS NULL) = (vout IS NULL))
);
-- One opening per address and asset (account families), one per output (BTC).
CREATE UNIQUE INDEX opening_balances_account_key ON opening_balances (network_key, address, asset_id) WHERE txid IS NULL;
CREATE UNIQUE INDEX opening_balances_output_key ON opening_balances (network_key, txid, vout) WHERE txid IS NOT NULL;

-- Never changed once recorded: a correction is a discrepancy the audit shows, not a silent edit.
CREATE FUNCTION opening_balances_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'opening_balances is append-only';
END $$;
CREATE TRIGGER opening_balances_append_only BEFORE UPDATE OR DELETE ON opening_balances
  FOR EACH ROW EXECUTE FUNCTION opening_balances_refuse_change();
