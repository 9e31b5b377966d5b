-- Sweeps and gas wallets (docs/sweeps.md; decisions.md "Operating wallets, sweeps, gas and fee floors"). The
-- `sweeps` table of 0012 gains what the sweep loop needs to carry a sweep across passes and processes.

-- The deposit wallet whose key signs a SWEEP (null on a TOP_UP, which the tenant's GAS wallet signs), and the EVM
-- fee parameters decided when the sweep was planned: a native sweep's amount is its balance minus exactly
-- gas × max_fee_per_gas, and a token sweep's top-up is that product minus the native coin already there, so the
-- sweep is signed with these very figures.
ALTER TABLE sweeps
  ADD COLUMN wallet_id uuid REFERENCES wallets (id),
  ADD COLUMN gas numeric(78, 0) CHECK (gas > 0),
  ADD COLUMN max_fee_per_gas numeric(78, 0) CHECK (max_fee_per_gas > 0),
  ADD COLUMN max_priority_fee_per_gas numeric(78, 0) CHECK (max_priority_fee_per_gas >= 0),
  ADD CONSTRAINT sweeps_sweep_has_wallet CHECK (kind <> 'SWEEP' OR wallet_id IS NOT NULL);

-- One open sweep per deposit address (its nonces and its native coin are shared by all its assets), and one live
-- top-up per sweep: two sweep loops (processes) planning at once get one row, the other's insert does nothing.
CREATE UNIQUE INDEX sweeps_one_open_per_address ON sweeps (network_key, from_address)
  WHERE kind = 'SWEEP' AND status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING');
CREATE UNIQUE INDEX sweeps_one_top_up_per_sweep ON sweeps (for_sweep_id) WHERE kind = 'TOP_UP' AND status <> 'FAILED';
CREATE INDEX sweeps_open_idx ON sweeps (network_key, created_at)
  WHERE status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING');
CREATE INDEX sweeps_list_idx ON sweeps (id DESC);

-- Deposit addresses that received a credited deposit of an asset: examined by the sweep loop when a deposit was
-- credited after its last look (a balance below the threshold waits for the next deposit).
CREATE TABLE sweep_sources (
  network_key text NOT NULL REFERENCES networks (network_key),
  address text NOT NULL,
  asset_id text NOT NULL REFERENCES assets (asset_id),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  wallet_id uuid NOT NULL REFERENCES wallets (id),
  credited_at timestamptz NOT NULL,
  examined_at timestamptz,
  PRIMARY KEY (network_key, address, asset_id)
);
CREATE INDEX sweep_sources_due_idx ON sweep_sources (network_key, credited_at)
  WHERE examined_at IS NULL OR examined_at < credited_at;

-- How far each network's credited deposits were collected into sweep_sources (by transactions.updated_at; each
-- pass looks back a margin before it, so a crediting transaction that committed late is not missed).
CREATE TABLE sweep_cursors (
  network_key text PRIMARY KEY REFERENCES networks (network_key),
  collected_to timestamptz NOT NULL
);
CREATE INDEX transactions_credited_deposits_idx ON transactions (network_key, updated_at)
  WHERE kind = 'DEPOSIT' AND status = 'COMPLETED' AND sub_status IS NULL;

-- When VAULT_GAS_LOW was last recorded per tenant and network: at most once per 6 hours (spec section 8).
CREATE TABLE gas_alerts (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  network_key text NOT NULL REFERENCES networks (network_key),
  sent_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, network_key)
);
