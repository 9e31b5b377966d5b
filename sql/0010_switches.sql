-- Operator switches (operator-interface.md, "Switches"; docs/operations.md): a network's deposit and withdrawal
-- switches and its watch, an asset's status and withdrawal switch. They live beside the catalog columns, not in
-- them: the catalog is re-upserted from its file at every start and must not undo an operator's decision, and a
-- switch can only narrow what the catalog (and the chain client) allows, so both values are kept. Every process
-- reads them from here when it uses them, so a change holds everywhere at once. A wallet's switch is its
-- `wallets.status` (0002).
ALTER TABLE networks
  ADD COLUMN switch_deposit_enabled boolean NOT NULL DEFAULT true,
  ADD COLUMN switch_withdraw_enabled boolean NOT NULL DEFAULT true,
  ADD COLUMN switch_watch text NOT NULL DEFAULT 'ACTIVE' CHECK (switch_watch IN ('ACTIVE', 'FROZEN')),
  ADD COLUMN switched_at timestamptz;

ALTER TABLE assets
  ADD COLUMN switch_status text NOT NULL DEFAULT 'ENABLED' CHECK (switch_status IN ('ENABLED', 'DEPOSIT_PAUSED')),
  ADD COLUMN switch_withdraw_enabled boolean NOT NULL DEFAULT true,
  ADD COLUMN switched_at timestamptz;

-- Every switch change as the operator sent it, with when it was made: the history an audit asks for ("who froze
-- this wallet, and since when?"). Written in the transaction of the change itself.
CREATE TABLE switch_changes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  target text NOT NULL CHECK (target IN ('NETWORK', 'ASSET', 'WALLET')),
  -- networkKey, assetId or wallet id.
  target_id text NOT NULL,
  -- Set for wallet changes only.
  tenant_id uuid REFERENCES tenants (id),
  -- The fields set, e.g. {"withdrawEnabled": false}.
  change jsonb NOT NULL,
  changed_at timestamptz NOT NULL,
  CHECK ((target = 'WALLET') = (tenant_id IS NOT NULL))
);
CREATE INDEX switch_changes_target_idx ON switch_changes (target, target_id, changed_at);
