-- The chain books (docs/ledger.md "Chain books"): what the platform's operating addresses (HOT, SWEEP, GAS) received
-- on chain, as the deposit watcher saw it in the blocks it followed. The service books its own movements already
-- (outgoing_sends: every withdrawal, sweep, top-up and nonce fill with its network fee; transactions: every deposit);
-- what it cannot know otherwise is money put on an operating address from outside (an operator funding HOT or a GAS
-- wallet). Every transfer to an operating address is recorded, the service's own sweeps included (they give the
-- address its role here even before it ever sends); the books count a receipt as outside money only when its hash
-- is none of the service's own signed versions.
--
-- Keyed like a deposit, (network, txHash, output index): seeing a block again never records a receipt twice. A
-- reorganization deletes the receipts of the blocks it removed; the block that replaces them records theirs.
CREATE TABLE platform_receipts (
  network_key text NOT NULL REFERENCES networks (network_key),
  tx_hash text NOT NULL,
  output_index integer NOT NULL CHECK (output_index >= 0),
  from_address text,
  to_address text NOT NULL,
  role text NOT NULL CHECK (role IN ('HOT', 'SWEEP', 'GAS')),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  block_height bigint NOT NULL CHECK (block_height >= 0),
  block_hash text NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (network_key, tx_hash, output_index)
);
CREATE INDEX platform_receipts_address_idx ON platform_receipts (network_key, to_address, asset_id);
CREATE INDEX platform_receipts_height_idx ON platform_receipts (network_key, block_height);
