-- A movement (an internal transfer, a withdrawal) is created in one statement with no transaction around it
-- (transfers/CreateMovement.ts): its own rows, then the payer's hold, then its ledger entry. A refusal can then no
-- longer be looked at by the caller between the hold and the commit, so the hold raises it, in the order of the checks
-- (spec 4.4; decisions.md "Daily limit"): the limit, then the user, then the wallet. The balance is the posting
-- trigger's (CF001, sql/0003_ledger.sql), after all of them. Each refusal has its own SQLSTATE; the caller maps it to
-- the spec's error.
--   CF010 daily limit exceeded      CF011 payer's user not ACTIVE      CF012 payer's wallet not ACTIVE
--   CF013 payer's wallet not found  CF014 a row of the movement was not written (an idempotency claim taken over)
--
-- `p_written`: whether the statement wrote every row of the movement before this call. A function's arguments are
-- evaluated before it runs, so those writes come before the hold's locks (they lock nothing another creator waits
-- on, and are then not part of the time the limit's lock is held); one of them missing fails the statement whole.
--
-- The daily limit's part of the hold is a running total (below), no longer a sum.

-- decisions.md "Daily limit": what counts against a user's daily limit of an asset, kept as a running total per
-- (user, asset, UTC day of `created_at`) instead of summed at every movement. The sum (`daily_spent`, 0020) walked
-- every movement of the user's day, twice per movement and once under the limit's lock: 0.7 ms each after 1,600
-- transfers of one payer, growing all day (quadratic in a busy user's day, and serialized).
--
-- What counts is defined once, here (`counts_against_daily_limit`): on-chain withdrawals and cross-user internal
-- transfers that did not end FAILED, REJECTED or CANCELLED. A trigger on `transactions` keeps the totals: a movement
-- counts from its insert, and stops counting when it reaches one of those statuses (no status leads back). The
-- totals change in the transaction of the change, so they commit and roll back with it.
CREATE FUNCTION counts_against_daily_limit(p_kind text, p_status text, p_source_user uuid, p_destination_user uuid)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_source_user IS NOT NULL
    AND p_status NOT IN ('FAILED', 'REJECTED', 'CANCELLED')
    AND (p_kind = 'WITHDRAWAL' OR (p_kind = 'INTERNAL_TRANSFER' AND p_destination_user IS DISTINCT FROM p_source_user))
$$;

CREATE TABLE daily_spend (
  user_id uuid NOT NULL REFERENCES users (id),
  asset_id text NOT NULL REFERENCES assets (asset_id),
  day date NOT NULL,
  spent numeric(78, 0) NOT NULL CHECK (spent >= 0),
  PRIMARY KEY (user_id, asset_id, day)
);

INSERT INTO daily_spend (user_id, asset_id, day, spent)
SELECT source_user_id, asset_id, (created_at AT TIME ZONE 'UTC')::date, sum(amount)
FROM transactions
WHERE counts_against_daily_limit(kind, status, source_user_id, destination_user_id)
GROUP BY 1, 2, 3;

-- The movement's contribution leaves its day's total when it stops counting, and joins it when it starts (an insert,
-- or a change of the columns that say what and how much counts, which no code path makes after the insert).
CREATE FUNCTION daily_spend_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  counted boolean := TG_OP = 'UPDATE'
    AND counts_against_daily_limit(OLD.kind, OLD.status, OLD.source_user_id, OLD.destination_user_id);
  counts boolean := counts_against_daily_limit(NEW.kind, NEW.status, NEW.source_user_id, NEW.destination_user_id);
BEGIN
  IF counted AND counts AND (OLD.source_user_id, OLD.asset_id, OLD.created_at, OLD.amount)
      = (NEW.source_user_id, NEW.asset_id, NEW.created_at, NEW.amount) THEN
    RETURN NULL;
  END IF;
  IF counted THEN
    UPDATE daily_spend SET spent = spent - OLD.amount
    WHERE user_id = OLD.source_user_id AND asset_id = OLD.asset_id AND day = (OLD.created_at AT TIME ZONE 'UTC')::date;
  END IF;
  IF counts THEN
    INSERT INTO daily_spend (user_id, asset_id, day, spent)
    VALUES (NEW.source_user_id, NEW.asset_id, (NEW.created_at AT TIME ZONE 'UTC')::date, NEW.amount)
    ON CONFLICT (user_id, asset_id, day) DO UPDATE SET spent = daily_spend.spent + EXCLUDED.spent;
  END IF;
  RETURN NULL;
END
$$;
-- Deposits never count (and are most of the rows): their changes do not call the function at all.
CREATE TRIGGER transactions_daily_spend_insert AFTER INSERT ON transactions
  FOR EACH ROW WHEN (NEW.kind <> 'DEPOSIT') EXECUTE FUNCTION daily_spend_track();
CREATE TRIGGER transactions_daily_spend_update
  AFTER UPDATE OF status, kind, amount, asset_id, source_user_id, destination_user_id, created_at ON transactions
  FOR EACH ROW WHEN (NEW.kind <> 'DEPOSIT' OR OLD.kind <> 'DEPOSIT') EXECUTE FUNCTION daily_spend_track();

-- What counts today, now one row: the quote's early read and the hold's binding one (transfers/DailyLimit.ts).
DROP FUNCTION daily_spent(uuid, uuid, text, timestamptz, uuid);
CREATE FUNCTION daily_spent(p_user uuid, p_asset text, p_day date)
RETURNS numeric
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT spent FROM daily_spend WHERE user_id = p_user AND asset_id = p_asset AND day = p_day), 0)
$$;

-- The hold reads the day's total. The movement's own row, written earlier in the same statement, is not in it: the
-- trigger that adds it fires at the end of that statement, after the hold (and before COMMIT, so the next holder of
-- the limit's lock sees it).
CREATE FUNCTION hold_payer_or_refuse(p_wallet uuid, p_limit_key text, p_limit numeric, p_amount numeric,
  p_user uuid, p_asset text, p_day date, p_movement uuid, p_written boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  held record;
BEGIN
  IF p_written IS NOT TRUE THEN
    RAISE EXCEPTION USING ERRCODE = 'CF014', MESSAGE = format('movement %s: not all of its rows were written', p_movement);
  END IF;
  IF p_limit_key IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_limit_key, 0));
  END IF;
  -- A statement started once the lock is held: in READ COMMITTED it sees every earlier holder's commit.
  SELECT w.status AS wallet_status, u.status AS user_status,
    CASE WHEN p_limit IS NULL THEN NULL ELSE daily_spent(p_user, p_asset, p_day) END AS spent
  INTO held
  FROM wallets w JOIN users u ON u.id = w.user_id
  WHERE w.id = p_wallet
  FOR SHARE OF w, u;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'CF013', MESSAGE = format('wallet %s not found', p_wallet);
  END IF;
  IF p_limit IS NOT NULL AND held.spent + p_amount > p_limit THEN
    RAISE EXCEPTION USING ERRCODE = 'CF010', MESSAGE = 'daily limit exceeded';
  END IF;
  IF held.user_status <> 'ACTIVE' THEN
    RAISE EXCEPTION USING ERRCODE = 'CF011', MESSAGE = format('user %s is %s', p_user, held.user_status);
  END IF;
  IF held.wallet_status <> 'ACTIVE' THEN
    RAISE EXCEPTION USING ERRCODE = 'CF012', MESSAGE = format('wallet %s is %s', p_wallet, held.wallet_status);
  END IF;
  RETURN true;
END
$$;

-- Replaced by hold_payer_or_refuse; the index served the sum, which the totals replace.
DROP FUNCTION hold_payer(uuid, text, uuid, uuid, text, timestamptz, uuid);
DROP INDEX transactions_daily_spend_idx;
