-- The ledger: double-entry bookkeeping of every unit a tenant's users hold. The database itself enforces what must
-- never happen, whatever code (or person with psql) writes here:
--   * every journal entry sums to zero per asset (a deferred constraint trigger, checked at commit);
--   * an account's balance changes only by postings (a trigger applies each posting to its account row), so a
--     balance always equals the sum of its postings;
--   * the journal is append-only (no UPDATE, DELETE or TRUNCATE of entries and postings);
--   * a debit may not leave a wallet's (or fee account's) available balance below zero, except a deposit
--     reversal after a reorganization (decisions.md, Deposits); frozen never goes below zero;
--   * one entry per (kind, reference): a deposit is credited once, a withdrawal frozen once, whatever retries;
--   * an entry moves value between accounts of one tenant only.
--
-- Sign convention: a balance is the sum of its postings. Value entering custody is taken from the tenant's CHAIN
-- account (which goes negative: minus what the tenant's users hold on chain), and value leaving is given back to
-- it. So for each tenant and asset: WALLET + FEES + NETWORK_FEES + CHAIN = 0.

CREATE TABLE ledger_accounts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  -- WALLET: a user wallet's holding; FEES: fees charged to users (the tenant's income); NETWORK_FEES: miner fees
  -- the tenant's vault paid (spec section 1, rule 4); CHAIN: the outside world, see above.
  kind text NOT NULL CHECK (kind IN ('WALLET', 'FEES', 'NETWORK_FEES', 'CHAIN')),
  wallet_id uuid REFERENCES wallets (id),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  available numeric(78, 0) NOT NULL DEFAULT 0,
  frozen numeric(78, 0) NOT NULL DEFAULT 0 CHECK (frozen >= 0),
  created_at timestamptz NOT NULL,
  CHECK ((kind = 'WALLET') = (wallet_id IS NOT NULL)),
  -- Only a wallet can have frozen funds (withdrawals and transfers awaiting approval reserve from it).
  CHECK (kind = 'WALLET' OR frozen = 0),
  CONSTRAINT ledger_accounts_owner_key UNIQUE NULLS NOT DISTINCT (tenant_id, kind, wallet_id, asset_id)
);
CREATE INDEX ledger_accounts_wallet_idx ON ledger_accounts (wallet_id) WHERE wallet_id IS NOT NULL;

CREATE TABLE ledger_entries (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  kind text NOT NULL CHECK (kind IN (
    'DEPOSIT_CREDIT', 'DEPOSIT_REVERSAL', 'MANUAL_DEPOSIT_CREDIT',
    'WITHDRAWAL_FREEZE', 'WITHDRAWAL_RELEASE', 'WITHDRAWAL_SETTLE', 'NETWORK_FEE',
    'TRANSFER', 'TRANSFER_FREEZE', 'TRANSFER_RELEASE', 'TRANSFER_SETTLE'
  )),
  -- What the entry books: a transaction (deposit, withdrawal, transfer) id.
  reference_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  CONSTRAINT ledger_entries_kind_reference_key UNIQUE (kind, reference_id)
);
CREATE INDEX ledger_entries_reference_idx ON ledger_entries (reference_id);

CREATE TABLE ledger_postings (
  entry_id uuid NOT NULL REFERENCES ledger_entries (id),
  account_id bigint NOT NULL REFERENCES ledger_accounts (id),
  bucket text NOT NULL CHECK (bucket IN ('AVAILABLE', 'FROZEN')),
  amount numeric(78, 0) NOT NULL CHECK (amount <> 0),
  PRIMARY KEY (entry_id, account_id, bucket)
);
CREATE INDEX ledger_postings_account_idx ON ledger_postings (account_id);

-- A posting moves its account's balance, in the same statement. The row lock this UPDATE takes serializes
-- concurrent movements of one account, so the check after it sees the balance every earlier commit left.
CREATE FUNCTION ledger_apply_posting() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  entry ledger_entries%ROWTYPE;
  account ledger_accounts%ROWTYPE;
BEGIN
  SELECT * INTO STRICT entry FROM ledger_entries WHERE id = NEW.entry_id;
  UPDATE ledger_accounts SET
    available = available + CASE WHEN NEW.bucket = 'AVAILABLE' THEN NEW.amount ELSE 0 END,
    frozen = frozen + CASE WHEN NEW.bucket = 'FROZEN' THEN NEW.amount ELSE 0 END
  WHERE id = NEW.account_id
  RETURNING * INTO STRICT account;
  IF account.tenant_id <> entry.tenant_id THEN
    RAISE EXCEPTION 'ledger entry % of tenant % posts to account % of tenant %',
      entry.id, entry.tenant_id, account.id, account.tenant_id;
  END IF;
  IF NEW.bucket = 'AVAILABLE' AND NEW.amount < 0 AND account.available < 0
     AND account.kind IN ('WALLET', 'FEES') AND entry.kind <> 'DEPOSIT_REVERSAL' THEN
    RAISE EXCEPTION USING
      ERRCODE = 'CF001',
      MESSAGE = format('insufficient available balance on ledger account %s', account.id),
      DETAIL = format('available would be %s', account.available);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER ledger_postings_apply AFTER INSERT ON ledger_postings
  FOR EACH ROW EXECUTE FUNCTION ledger_apply_posting();

-- At commit: the entry of each new posting balances per asset and has at least two postings.
CREATE FUNCTION ledger_check_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  unbalanced record;
  posting_count integer;
BEGIN
  SELECT a.asset_id, sum(p.amount) AS total INTO unbalanced
  FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
  WHERE p.entry_id = NEW.entry_id
  GROUP BY a.asset_id
  HAVING sum(p.amount) <> 0
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry % does not balance: % sums to %', NEW.entry_id, unbalanced.asset_id, unbalanced.total;
  END IF;
  SELECT count(*) INTO posting_count FROM ledger_postings WHERE entry_id = NEW.entry_id;
  IF posting_count < 2 THEN
    RAISE EXCEPTION 'ledger entry % has a single posting', NEW.entry_id;
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER ledger_postings_balance AFTER INSERT ON ledger_postings
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_entry();

-- An entry without postings would be a booking of nothing that still claims its (kind, reference).
CREATE FUNCTION ledger_check_entry_has_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM ledger_postings WHERE entry_id = NEW.id) THEN
    RAISE EXCEPTION 'ledger entry % has no postings', NEW.id;
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER ledger_entries_have_postings AFTER INSERT ON ledger_entries
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_entry_has_postings();

-- The journal is history: corrections are new entries, never edits.
CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
END
$$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_postings_append_only BEFORE UPDATE OR DELETE ON ledger_postings
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_postings_no_truncate BEFORE TRUNCATE ON ledger_postings
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Balances move only through postings: ledger_apply_posting runs at trigger depth 1, so its UPDATE arrives here at
-- depth 2; any other UPDATE of a balance (depth 1) is refused. Accounts are never deleted.
CREATE FUNCTION ledger_guard_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'ledger_accounts rows are never deleted';
  END IF;
  IF (NEW.available, NEW.frozen) IS DISTINCT FROM (OLD.available, OLD.frozen) AND pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'ledger balances change only through ledger_postings';
  END IF;
  IF (NEW.tenant_id, NEW.kind, NEW.wallet_id, NEW.asset_id) IS DISTINCT FROM
     (OLD.tenant_id, OLD.kind, OLD.wallet_id, OLD.asset_id) THEN
    RAISE EXCEPTION 'a ledger account never changes owner or asset';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_accounts_guard BEFORE UPDATE OR DELETE ON ledger_accounts
  FOR EACH ROW EXECUTE FUNCTION ledger_guard_account();
CREATE TRIGGER ledger_accounts_no_truncate BEFORE TRUNCATE ON ledger_accounts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A new account starts at zero: its balance, too, is only what postings made it.
CREATE FUNCTION ledger_check_new_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.available <> 0 OR NEW.frozen <> 0 THEN
    RAISE EXCEPTION 'a ledger account opens with a zero balance';
  END IF;
  IF NEW.wallet_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM wallets w JOIN assets a ON a.asset_id = NEW.asset_id JOIN networks n ON n.network_key = a.network_key
    WHERE w.id = NEW.wallet_id AND w.tenant_id = NEW.tenant_id AND w.chain_family = n.chain_family
  ) THEN
    RAISE EXCEPTION 'wallet % is not a wallet of tenant % in the chain family of %', NEW.wallet_id, NEW.tenant_id, NEW.asset_id;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_accounts_open BEFORE INSERT ON ledger_accounts
  FOR EACH ROW EXECUTE FUNCTION ledger_check_new_account();
