-- Transactions (spec section 2, "Transaction object"): deposits, on-chain withdrawals and internal transfers, one row
-- each, holding the fields of the object tenants read. Money moves only through the ledger (0003); a row here is the
-- record of what the ledger booked and why.

CREATE TABLE transactions (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  kind text NOT NULL CHECK (kind IN ('DEPOSIT', 'WITHDRAWAL', 'INTERNAL_TRANSFER')),
  settlement text NOT NULL CHECK (settlement IN ('ON_CHAIN', 'OFF_CHAIN')),
  status text NOT NULL CHECK (status IN (
    'SUBMITTED', 'PENDING_AUTHORIZATION', 'QUEUED', 'PENDING_SIGNATURE', 'CONFIRMING',
    'COMPLETED', 'FAILED', 'REJECTED', 'CANCELLED', 'REVERSED'
  )),
  sub_status text CHECK (sub_status IN (
    'BELOW_MIN_DEPOSIT', 'MANUAL_REVIEW', 'DROPPED', 'INSUFFICIENT_FUNDS_PLATFORM', 'CANCELLED_BY_USER',
    'BLOCKED_BY_POLICY', 'REJECTED_BY_OPERATOR', 'SIGNING_FAILED', 'BROADCAST_FAILED', 'REVERTED_ON_CHAIN'
  )),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  network_key text NOT NULL REFERENCES networks (network_key),
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  -- Deposits: null until crediting decides it. Withdrawals and transfers: charged in addition to the amount.
  fee numeric(78, 0) CHECK (fee >= 0),
  network_fee numeric(78, 0) CHECK (network_fee >= 0),
  network_fee_asset_id text REFERENCES assets (asset_id),
  source_wallet_id uuid REFERENCES wallets (id),
  source_address text,
  source_user_id uuid REFERENCES users (id),
  destination_wallet_id uuid REFERENCES wallets (id),
  destination_address text,
  destination_user_id uuid REFERENCES users (id),
  tx_hash text,
  -- Deposits: which output (BTC vout, EVM log index, ...) of tx_hash paid the address; with the network and the
  -- hash it names the deposit (decisions.md: seeing it again never creates a second record).
  output_index integer CHECK (output_index >= 0),
  block_height bigint,
  block_hash text,
  external_tx_id text CHECK (char_length(external_tx_id) BETWEEN 1 AND 128),
  note text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK (kind <> 'DEPOSIT' OR settlement = 'ON_CHAIN'),
  CHECK (kind <> 'DEPOSIT' OR (tx_hash IS NOT NULL AND output_index IS NOT NULL AND destination_wallet_id IS NOT NULL)),
  CHECK (kind <> 'INTERNAL_TRANSFER' OR (settlement = 'OFF_CHAIN' AND tx_hash IS NULL)),
  CHECK (kind <> 'WITHDRAWAL' OR settlement = 'ON_CHAIN'),
  CHECK (fee IS NULL OR kind <> 'DEPOSIT' OR fee <= amount),
  -- A deposit credited is credited net of its fee, so the fee is known once it is COMPLETED without a sub-status.
  CHECK (kind <> 'DEPOSIT' OR status <> 'COMPLETED' OR sub_status IS NOT NULL OR fee IS NOT NULL),
  CHECK ((network_fee IS NULL) = (network_fee_asset_id IS NULL))
);
CREATE UNIQUE INDEX transactions_deposit_key ON transactions (network_key, tx_hash, output_index) WHERE kind = 'DEPOSIT';
CREATE UNIQUE INDEX transactions_external_tx_id_key ON transactions (tenant_id, external_tx_id)
  WHERE external_tx_id IS NOT NULL;
-- Lists are newest first by id (UUID v7, time-ordered) within a tenant, with these filters.
CREATE INDEX transactions_tenant_list_idx ON transactions (tenant_id, id DESC);
CREATE INDEX transactions_source_wallet_idx ON transactions (source_wallet_id, id DESC) WHERE source_wallet_id IS NOT NULL;
CREATE INDEX transactions_destination_wallet_idx ON transactions (destination_wallet_id, id DESC)
  WHERE destination_wallet_id IS NOT NULL;
CREATE INDEX transactions_created_idx ON transactions (tenant_id, created_at);
-- Deposits still waiting for their confirmations, per network: what a watcher re-examines on each new block.
CREATE INDEX transactions_confirming_deposits_idx ON transactions (network_key, block_height)
  WHERE kind = 'DEPOSIT' AND status = 'CONFIRMING';
