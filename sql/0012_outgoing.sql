-- Every transaction the service signs and sends on a network (docs/sending.md): a withdrawal's, a sweep's, a gas
-- top-up's, and the 0-value self-transfer that fills an EVM nonce whose transaction was rejected for good.
--
-- `outgoing_sends` is one logical send: who it is for (purpose, owner) and the account slot it takes (EVM: sending
-- address and nonce). The unique keys are the exactly-once rules: an owner has at most one send, so a withdrawal can
-- never take a second nonce; a nonce of an address belongs to one send. `outgoing_versions` holds what was signed
-- for it: version 1, then each replacement (EVM: same nonce and payload, fees raised; BTC: replace-by-fee), and a
-- nonce fill. Signed bytes never change once stored (trigger); a retry rebroadcasts the latest version's bytes.

-- The next EVM nonce per (network, sending address): seeded from the node's pending count on the first send,
-- advanced only in the database transaction that stores the signed bytes using it (so a crash before that commit
-- re-signs the same nonce, and one after it never signs a second).
CREATE TABLE evm_nonces (
  network_key text NOT NULL REFERENCES networks (network_key),
  address text NOT NULL,
  next_nonce bigint NOT NULL CHECK (next_nonce >= 0),
  PRIMARY KEY (network_key, address)
);

CREATE TABLE outgoing_sends (
  id uuid PRIMARY KEY,
  network_key text NOT NULL REFERENCES networks (network_key),
  purpose text NOT NULL CHECK (purpose IN ('WITHDRAWAL', 'SWEEP', 'TOP_UP')),
  -- The withdrawal (transactions.id) or the sweep (sweeps.id) this send pays out.
  owner_id uuid NOT NULL,
  from_address text NOT NULL,
  to_address text NOT NULL,
  asset_id text NOT NULL REFERENCES assets (asset_id),
  amount numeric(78, 0) NOT NULL CHECK (amount >= 0),
  -- Whose key signs (signer/TransactionRequest.ts SigningKey): replacements are signed by the same key.
  signing_key jsonb NOT NULL,
  -- EVM only; null on the other families.
  nonce bigint CHECK (nonce >= 0),
  -- PENDING until one of its versions is final on chain (CONFIRMED: succeeded, REVERTED: included and failed), or
  -- rejected for good: FILLING while the 0-value FILL version that takes its EVM nonce waits to be final, then
  -- REJECTED.
  state text NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'CONFIRMED', 'REVERTED', 'FILLING', 'REJECTED')),
  -- The version included on chain and what it cost (gasUsed × effectiveGasPrice, ...), once known.
  included_tx_hash text,
  included_height bigint,
  network_fee numeric(78, 0) CHECK (network_fee >= 0),
  created_at timestamptz NOT NULL,
  UNIQUE (purpose, owner_id),
  UNIQUE (network_key, from_address, nonce)
);
CREATE INDEX outgoing_sends_open_idx ON outgoing_sends (network_key, from_address) WHERE state IN ('PENDING', 'FILLING');

CREATE TABLE outgoing_versions (
  send_id uuid NOT NULL REFERENCES outgoing_sends (id),
  version integer NOT NULL CHECK (version >= 1),
  -- PAYLOAD: the send's transfer; FILL: a 0-value self-transfer taking the nonce of a rejected payload.
  kind text NOT NULL CHECK (kind IN ('PAYLOAD', 'FILL')),
  network_key text NOT NULL REFERENCES networks (network_key),
  tx_hash text NOT NULL,
  raw text NOT NULL,
  -- The fee parameters signed (EVM), and the most this version can cost in the native coin.
  gas numeric(78, 0),
  max_fee_per_gas numeric(78, 0),
  max_priority_fee_per_gas numeric(78, 0),
  network_fee_max numeric(78, 0) NOT NULL CHECK (network_fee_max >= 0),
  signed_at timestamptz NOT NULL,
  -- The head when a confirmation check first found it sent and not yet in a block: an EVM version still not
  -- included 20 blocks later is replaced.
  sent_height bigint,
  -- Broadcast calls the node accepted (the first and every rebroadcast of the same bytes).
  broadcasts integer NOT NULL DEFAULT 0 CHECK (broadcasts >= 0),
  PRIMARY KEY (send_id, version),
  UNIQUE (network_key, tx_hash)
);

CREATE FUNCTION outgoing_versions_signed_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.raw IS DISTINCT FROM OLD.raw OR NEW.tx_hash IS DISTINCT FROM OLD.tx_hash OR NEW.kind IS DISTINCT FROM OLD.kind
      OR NEW.send_id IS DISTINCT FROM OLD.send_id OR NEW.version IS DISTINCT FROM OLD.version THEN
    RAISE EXCEPTION 'outgoing version % of send % is signed already; its bytes never change', OLD.version, OLD.send_id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER outgoing_versions_signed_once BEFORE UPDATE ON outgoing_versions
  FOR EACH ROW EXECUTE FUNCTION outgoing_versions_signed_once();

-- Withdrawals signed before this migration (the simulated chain) become sends with their one version, so every
-- withdrawal is read one way. Their sending address is not recorded: the platform HOT of their network.
INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id, amount,
  signing_key, state, created_at)
SELECT w.transaction_id, t.network_key, 'WITHDRAWAL', w.transaction_id, 'HOT', t.destination_address, t.asset_id,
  t.amount, '{"_tag": "Platform", "role": "HOT"}'::jsonb, CASE WHEN t.status = 'COMPLETED' THEN 'CONFIRMED' WHEN t.status = 'FAILED' THEN 'REJECTED' ELSE 'PENDING' END,
  w.signed_at
FROM withdrawals w JOIN transactions t ON t.id = w.transaction_id
WHERE w.signed_raw IS NOT NULL;

INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at, broadcasts)
SELECT w.transaction_id, 1, 'PAYLOAD', t.network_key, w.signed_tx_hash, w.signed_raw, w.network_fee, w.signed_at,
  w.broadcasts
FROM withdrawals w JOIN transactions t ON t.id = w.transaction_id
WHERE w.signed_raw IS NOT NULL;

-- Platform movements that are not withdrawals (decisions.md "Operating wallets, sweeps, gas and fee floors"): a
-- deposit address's balance swept to HOT or SWEEP, and the exact native top-up a tenant's GAS wallet sends first
-- for a token sweep. They never touch a user's balance nor /v1/transactions; GET /ops/sweeps lists them.
CREATE TABLE sweeps (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  network_key text NOT NULL REFERENCES networks (network_key),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  kind text NOT NULL CHECK (kind IN ('SWEEP', 'TOP_UP')),
  -- A top-up names the sweep it pays for.
  for_sweep_id uuid REFERENCES sweeps (id),
  from_address text NOT NULL,
  to_address text NOT NULL,
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  status text NOT NULL CHECK (status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING', 'COMPLETED', 'FAILED')),
  tx_hash text,
  -- The actual network fee once included, in the native coin.
  network_fee numeric(78, 0) CHECK (network_fee >= 0),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK ((kind = 'TOP_UP') = (for_sweep_id IS NOT NULL))
);
CREATE INDEX sweeps_recent_idx ON sweeps (network_key, asset_id, kind, updated_at DESC) WHERE status = 'COMPLETED';
