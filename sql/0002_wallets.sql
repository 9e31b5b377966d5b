-- Wallets, their per-network deposit addresses (the watch registry the chain watchers read), the event outbox and
-- the idempotency records of POST /v1/wallets and POST /v1/transactions.

CREATE TABLE wallets (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  user_id uuid NOT NULL REFERENCES users (id),
  chain_family text NOT NULL CHECK (chain_family IN ('EVM', 'TRON', 'BTC', 'SOL')),
  -- Per user and family, from 1; the derivation index W is seq - 1 (chains notes, HD scheme).
  seq integer NOT NULL CHECK (seq >= 1),
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 40),
  is_default boolean NOT NULL,
  status text NOT NULL CHECK (status IN ('PROVISIONING', 'ACTIVE', 'HIDDEN', 'FROZEN', 'CLOSED')),
  -- The address of the family's primary network (all EVM networks share it); null until allocated.
  address text,
  derivation_path text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT wallets_user_family_seq_key UNIQUE (user_id, chain_family, seq),
  -- Only a provisioned wallet can be active (or hidden, frozen, closed later).
  CHECK (status = 'PROVISIONING' OR (address IS NOT NULL AND derivation_path IS NOT NULL)),
  CHECK (status <> 'PROVISIONING' OR address IS NULL)
);
-- The first wallet of a family is its default; never two.
CREATE UNIQUE INDEX wallets_one_default_idx ON wallets (user_id, chain_family) WHERE is_default;
CREATE INDEX wallets_tenant_list_idx ON wallets (tenant_id, id DESC);
CREATE INDEX wallets_user_idx ON wallets (user_id, chain_family);
CREATE INDEX wallets_provisioning_idx ON wallets (created_at) WHERE status = 'PROVISIONING';

-- One row per (wallet, network) the wallet receives on. A (network, address) pair belongs to one wallet only: this
-- is how a deposit is attributed, and how `isInternal` is decided.
CREATE TABLE wallet_addresses (
  wallet_id uuid NOT NULL REFERENCES wallets (id),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  network_key text NOT NULL REFERENCES networks (network_key),
  address text NOT NULL,
  watch_status text NOT NULL CHECK (watch_status IN ('ALLOCATED', 'REGISTERING', 'ACTIVE', 'DEGRADED', 'FROZEN')),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (wallet_id, network_key),
  CONSTRAINT wallet_addresses_network_address_key UNIQUE (network_key, address)
);
CREATE INDEX wallet_addresses_tenant_idx ON wallet_addresses (tenant_id, network_key, address);

-- Events written in the same transaction as the state change they report; the webhook dispatcher reads them.
CREATE TABLE outbox_events (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  event_type text NOT NULL,
  -- What the event is about (wallet id, transaction id): one event per (type, subject, dedupe key).
  subject_id text NOT NULL,
  dedupe_key text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  dispatched_at timestamptz,
  CONSTRAINT outbox_events_dedupe_key UNIQUE (tenant_id, event_type, subject_id, dedupe_key)
);
CREATE INDEX outbox_events_pending_idx ON outbox_events (created_at) WHERE dispatched_at IS NULL;

-- Idempotency records (spec section 7, rules 1-8), scoped by tenant, API key, endpoint and key, kept long-term.
CREATE TABLE idempotency_records (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  key_id text NOT NULL,
  endpoint text NOT NULL,
  idempotency_key text NOT NULL CHECK (idempotency_key ~ '^[A-Za-z0-9_.:-]{1,128}$'),
  request_sha256 text NOT NULL CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),
  state text NOT NULL CHECK (state IN ('IN_PROGRESS', 'COMPLETED', 'RETRYABLE_FAILURE')),
  response_status integer,
  response_body text,
  -- IN_PROGRESS: a request that crashed is considered abandoned after this; RETRYABLE_FAILURE: re-execution allowed
  -- from this time on (rule 7).
  locked_until timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- Rule 8: a tenant-wide key (`externalTxId`) may be used by one API key of the tenant only.
  tenant_wide boolean NOT NULL DEFAULT false,
  PRIMARY KEY (tenant_id, key_id, endpoint, idempotency_key),
  CHECK ((state = 'COMPLETED') = (response_status IS NOT NULL AND response_body IS NOT NULL))
);
CREATE UNIQUE INDEX idempotency_records_tenant_wide_idx ON idempotency_records (tenant_id, endpoint, idempotency_key)
  WHERE tenant_wide;
