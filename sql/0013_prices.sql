-- Prices and fee floors (decisions.md "Operating wallets, sweeps, gas and fee floors": Dynamic floor, Prices;
-- docs/operations.md "Prices and fee floors").
--
-- The operator's price of an asset (PUT /ops/prices), over the catalog's `priceUsd`: the catalog is re-read from its
-- file at every start and must not undo an operator's price, so the override lives apart from it. Every process reads
-- it when it computes a fee, so a change holds everywhere at once. `numeric` without a scale keeps the decimal exactly
-- as given ("0.25" stays "0.25"); a price is positive (a zero price would make any fee infinite).
CREATE TABLE asset_prices (
  asset_id text PRIMARY KEY REFERENCES assets (asset_id),
  price_usd numeric NOT NULL CHECK (price_usd > 0),
  set_by text NOT NULL,
  set_at timestamptz NOT NULL
);

-- Every price change as the operator sent it, who sent it and when (the audit trail of switch_changes, 0010); a null
-- price is an override removed (back to the catalog's price). Written in the transaction of the change itself.
CREATE TABLE price_changes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id text NOT NULL REFERENCES assets (asset_id),
  price_usd numeric CHECK (price_usd > 0),
  previous_price_usd numeric,
  set_by text NOT NULL,
  set_at timestamptz NOT NULL
);
CREATE INDEX price_changes_asset_idx ON price_changes (asset_id, set_at);

-- Fee rule 3 reads the last 20 COMPLETED withdrawals of an asset on its network (all tenants): an index that holds
-- only those rows, newest first, so the read stays a short index scan however many transactions there are.
CREATE INDEX transactions_completed_withdrawals_idx ON transactions (network_key, asset_id, updated_at DESC)
  WHERE kind = 'WITHDRAWAL' AND status = 'COMPLETED';
