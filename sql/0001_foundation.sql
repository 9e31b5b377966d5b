-- Foundation: tenants, API keys, durable JWT nonces, end users, and the network/asset catalog.
-- Every rule the spec states about these rows is also a constraint here, so a bug in the service cannot store a
-- value the interface promises never to return.

CREATE TABLE tenants (
  id uuid PRIMARY KEY,
  -- The derivation index T of the HD scheme (chains notes): allocated by the database, never hashed from the id.
  -- T = 0 is reserved for platform wallets, so identities start at 1.
  seq integer GENERATED ALWAYS AS IDENTITY (START WITH 1) UNIQUE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  status text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'SUSPENDED')),
  subscription_expires_at timestamptz,
  settings jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(settings) = 'object'),
  networks text[] NOT NULL,
  -- Next user derivation index U; bumped under the tenant row lock when a user is created.
  user_seq integer NOT NULL DEFAULT 0 CHECK (user_seq >= 0),
  created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
  key_id text PRIMARY KEY CHECK (key_id ~ '^ak_[0-9a-f]{24}$'),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  public_key text NOT NULL CHECK (public_key ~ '^[0-9a-f]{64}$'),
  allowed_ips text[] NOT NULL DEFAULT '{}',
  rate_limit_per_second integer NOT NULL DEFAULT 50 CHECK (rate_limit_per_second BETWEEN 1 AND 1000),
  status text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'REVOKED')),
  created_at timestamptz NOT NULL,
  revoked_at timestamptz,
  CHECK ((status = 'REVOKED') = (revoked_at IS NOT NULL))
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);

-- A nonce matters only while a JWT carrying it could still pass the time checks (exp > now), so rows are kept
-- until their JWT's exp and then purged. The primary key is what rejects a replay, across restarts and processes.
CREATE TABLE auth_nonces (
  key_id text NOT NULL,
  nonce text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (key_id, nonce)
);
CREATE INDEX auth_nonces_expiry_idx ON auth_nonces (expires_at);

CREATE TABLE users (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  -- The derivation index U of the HD scheme, unique per tenant.
  seq integer NOT NULL CHECK (seq >= 0),
  uid text NOT NULL CHECK (uid ~ '^[0-9]{8}$'),
  customer_ref_id text NOT NULL CHECK (char_length(customer_ref_id) BETWEEN 1 AND 128),
  email text CHECK (email = lower(email)),
  password_hash text,
  nickname text CHECK (char_length(nickname) <= 32),
  source text NOT NULL CHECK (source IN ('B_API', 'C_DIRECT')),
  status text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'FROZEN', 'CLOSED')),
  cooldown_until timestamptz,
  totp_secret text,
  -- The last TOTP time step accepted: each code is usable once.
  totp_last_step bigint,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK (password_hash IS NULL OR email IS NOT NULL),
  CONSTRAINT users_tenant_customer_ref_key UNIQUE (tenant_id, customer_ref_id),
  CONSTRAINT users_tenant_uid_key UNIQUE (tenant_id, uid),
  CONSTRAINT users_tenant_seq_key UNIQUE (tenant_id, seq),
  CONSTRAINT users_tenant_email_key UNIQUE (tenant_id, email)
);
-- Lists are newest first by `seq` (allocated in creation order); users_tenant_seq_key serves them.

-- The catalog is data: loaded from src/catalog/<SERVICE_ENV>.json at start and upserted here, so SQL can join it.
CREATE TABLE networks (
  network_key text PRIMARY KEY,
  chain_family text NOT NULL CHECK (chain_family IN ('EVM', 'TRON', 'BTC', 'SOL')),
  display_name text NOT NULL,
  is_testnet boolean NOT NULL,
  enabled boolean NOT NULL,
  deposit_enabled boolean NOT NULL,
  withdraw_enabled boolean NOT NULL,
  -- Whether new wallets of this family may be opened on this network (NETWORK_DISABLED otherwise).
  new_wallets_enabled boolean NOT NULL,
  confirmations jsonb NOT NULL,
  -- BTC only: which address network (main, test, regtest) deposit addresses and withdrawals use.
  btc_network text CHECK (btc_network IN ('main', 'test', 'regtest')),
  native_asset_id text NOT NULL,
  CHECK ((chain_family = 'BTC') = (btc_network IS NOT NULL))
);

CREATE TABLE assets (
  asset_id text PRIMARY KEY,
  network_key text NOT NULL REFERENCES networks (network_key),
  kind text NOT NULL CHECK (kind IN ('NATIVE', 'TOKEN')),
  contract text,
  token_program text,
  symbol text NOT NULL,
  name text NOT NULL,
  decimals integer NOT NULL CHECK (decimals BETWEEN 0 AND 36),
  status text NOT NULL CHECK (status IN ('ENABLED', 'DEPOSIT_PAUSED', 'DISABLED')),
  withdraw_enabled boolean NOT NULL,
  min_deposit numeric(78, 0) NOT NULL CHECK (min_deposit >= 0),
  min_withdraw numeric(78, 0) NOT NULL CHECK (min_withdraw >= 0),
  withdraw_fee_floor numeric(78, 0) NOT NULL CHECK (withdraw_fee_floor >= 0),
  deposit_fee_floor numeric(78, 0) NOT NULL CHECK (deposit_fee_floor >= 0),
  single_limit_cap numeric(78, 0) CHECK (single_limit_cap >= 0),
  daily_limit_cap numeric(78, 0) CHECK (daily_limit_cap >= 0),
  icon_url text,
  sort_order integer NOT NULL DEFAULT 0,
  CHECK ((kind = 'NATIVE') = (contract IS NULL))
);
CREATE INDEX assets_network_idx ON assets (network_key);
