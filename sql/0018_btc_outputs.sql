-- BTC outputs a withdrawal is about to spend or has spent (docs/btc.md "Coin selection"): HOT's outputs and credited
-- deposit outputs (decisions.md: BTC has no sweeps; withdrawals spend deposit outputs directly). The primary key is
-- what keeps two concurrent withdrawals from choosing the same output: the second one's INSERT conflicts and it
-- chooses again. A reservation holds while a version of its owner's send (outgoing_sends, same network and owner id)
-- was signed on the output (outgoing_versions.parameters names it) and the send is not final; before the owner has
-- a send at all, for `btcReservationGraceMinutes` (the time between choosing the inputs and the signature's commit;
-- a withdrawal that never got signed lets its outputs go after that). A refused send's reservations go. Those of a
-- final send stay: they are the record of which withdrawal spent which output (and keep spent deposit outputs out
-- of coin selection without asking the node).
CREATE TABLE btc_output_reservations (
  network_key text NOT NULL REFERENCES networks (network_key),
  txid text NOT NULL CHECK (txid ~ '^[0-9a-f]{64}$'),
  vout integer NOT NULL CHECK (vout >= 0),
  -- The owner's id as WithdrawalTransfer.withdrawalId gives it (a withdrawal id; any text for a direct caller).
  owner_id text NOT NULL,
  value numeric(78, 0) NOT NULL CHECK (value > 0),
  reserved_at timestamptz NOT NULL,
  PRIMARY KEY (network_key, txid, vout)
);
CREATE INDEX btc_output_reservations_owner_idx ON btc_output_reservations (network_key, owner_id);
