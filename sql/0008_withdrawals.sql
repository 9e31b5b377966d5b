-- On-chain withdrawals (docs/transfers.md, decisions.md "Withdrawal life cycle"): the status lives on the transaction
-- row (0005); this table holds what only a withdrawal has, above all the signed bytes. They are stored before the
-- first broadcast and can never change afterwards, so a retry rebroadcasts the same bytes and a withdrawal is never
-- signed twice with a different nonce or inputs, however often its entity's handler runs.
CREATE TABLE withdrawals (
  transaction_id uuid PRIMARY KEY REFERENCES transactions (id),
  -- The signed transaction as the network's broadcast call takes it, and its hash (the future transactions.tx_hash).
  signed_raw text,
  signed_tx_hash text,
  -- The network fee the signed transaction pays, in the network's native coin (written to the transaction when it
  -- completes: spec section 2 `networkFeeRaw`).
  network_fee numeric(78, 0) CHECK (network_fee >= 0),
  network_fee_asset_id text REFERENCES assets (asset_id),
  signed_at timestamptz,
  -- Broadcast calls made (the first and every rebroadcast of the same bytes), for operations.
  broadcasts integer NOT NULL DEFAULT 0 CHECK (broadcasts >= 0),
  CHECK ((signed_raw IS NULL) = (signed_tx_hash IS NULL)),
  CHECK ((signed_raw IS NULL) = (network_fee IS NULL)),
  CHECK ((network_fee IS NULL) = (network_fee_asset_id IS NULL))
);
CREATE UNIQUE INDEX withdrawals_signed_tx_hash_key ON withdrawals (signed_tx_hash) WHERE signed_tx_hash IS NOT NULL;

-- Signed once: the signature columns may go from null to a value, never change or go back.
CREATE FUNCTION withdrawals_signed_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.signed_raw IS NOT NULL AND (NEW.signed_raw IS DISTINCT FROM OLD.signed_raw
      OR NEW.signed_tx_hash IS DISTINCT FROM OLD.signed_tx_hash OR NEW.network_fee IS DISTINCT FROM OLD.network_fee) THEN
    RAISE EXCEPTION 'withdrawal % is signed already; its signed bytes never change', OLD.transaction_id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER withdrawals_signed_once BEFORE UPDATE ON withdrawals FOR EACH ROW EXECUTE FUNCTION withdrawals_signed_once();

-- Withdrawals still on their way, per status: what the supervisor and the confirmation check look at.
CREATE INDEX transactions_open_withdrawals_idx ON transactions (network_key, status)
  WHERE kind = 'WITHDRAWAL' AND status IN ('SUBMITTED', 'QUEUED', 'PENDING_SIGNATURE', 'CONFIRMING');

-- The simulated chain's side of withdrawals (operator-interface.md, PATCH /ops/devnet/{networkKey}): per network,
-- whether broadcasts fail and the network fee a withdrawal pays; the platform hot wallet's balance per asset (a
-- missing row is the default balance, see SimulatedChain.ts); the next EVM nonce per sending address; and every
-- signed transaction broadcast, with its bytes (a rebroadcast must carry the same ones).
CREATE TABLE devnet_networks (
  network_key text PRIMARY KEY REFERENCES networks (network_key),
  broadcast_fails boolean NOT NULL DEFAULT false,
  network_fee numeric(78, 0) CHECK (network_fee >= 0)
);

CREATE TABLE devnet_hot_wallet_balances (
  network_key text NOT NULL REFERENCES networks (network_key),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  balance numeric(78, 0) NOT NULL CHECK (balance >= 0),
  PRIMARY KEY (network_key, asset_id)
);

CREATE TABLE devnet_nonces (
  network_key text NOT NULL REFERENCES networks (network_key),
  address text NOT NULL,
  next_nonce bigint NOT NULL CHECK (next_nonce >= 0),
  PRIMARY KEY (network_key, address)
);

CREATE TABLE devnet_broadcasts (
  network_key text NOT NULL REFERENCES networks (network_key),
  tx_hash text NOT NULL,
  raw text NOT NULL,
  broadcasts integer NOT NULL CHECK (broadcasts >= 1),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (network_key, tx_hash)
);
