-- Chain following: what each network's watcher has processed (for reorg detection), and the built-in simulated
-- chain that serves every network in development and tests (operator-interface.md, "Developer chain").

-- The blocks a watcher has processed, by height, with the hash it saw: a later hash at the same height means the
-- chain reorganized. Only a window of recent blocks is kept (see DepositWatcher.ts).
CREATE TABLE chain_blocks (
  network_key text NOT NULL REFERENCES networks (network_key),
  height bigint NOT NULL CHECK (height >= 0),
  hash text NOT NULL,
  PRIMARY KEY (network_key, height)
);

-- One row per watched network: how far its watcher got, and the head it last saw (for lag in /ops/health). The row
-- is also the watcher's lock: a scan holds it FOR UPDATE, so two processes never scan one network at once.
CREATE TABLE chain_cursors (
  network_key text PRIMARY KEY REFERENCES networks (network_key),
  height bigint NOT NULL CHECK (height >= 0),
  head_height bigint NOT NULL CHECK (head_height >= 0),
  updated_at timestamptz NOT NULL
);

-- The simulated chain: blocks and transfers in PostgreSQL, so they survive a restart and every process sees one
-- chain. Height 0 is its genesis. A transfer without a block is pending and lands in the next block mined.
CREATE TABLE devnet_blocks (
  network_key text NOT NULL REFERENCES networks (network_key),
  height bigint NOT NULL CHECK (height >= 0),
  hash text NOT NULL,
  parent_hash text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (network_key, height),
  CONSTRAINT devnet_blocks_hash_key UNIQUE (network_key, hash)
);

CREATE TABLE devnet_transfers (
  network_key text NOT NULL REFERENCES networks (network_key),
  tx_hash text NOT NULL,
  output_index integer NOT NULL CHECK (output_index >= 0),
  from_address text,
  to_address text NOT NULL,
  asset_id text NOT NULL REFERENCES assets (asset_id),
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  block_height bigint,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (network_key, tx_hash, output_index),
  FOREIGN KEY (network_key, block_height) REFERENCES devnet_blocks (network_key, height) ON DELETE CASCADE
);
CREATE INDEX devnet_transfers_block_idx ON devnet_transfers (network_key, block_height);
