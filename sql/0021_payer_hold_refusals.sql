-- A movement (an internal transfer, a withdrawal) is created in one statement with no transaction around it
-- (transfers/CreateMovement.ts): its own rows, then the payer's hold, then its ledger entry. A refusal can then no longer
-- be looked at by the caller between the hold and the commit, so the hold raises it, in the order of the checks
-- (spec 4.4; decisions.md "Daily limit"): the limit, then the user, then the wallet. The balance is the posting
-- trigger's (CF001, sql/0003_ledger.sql), after all of them. Each refusal has its own SQLSTATE; the caller maps it to
-- the spec's error.
--   CF010 daily limit exceeded      CF011 payer's user not ACTIVE      CF012 payer's wallet not ACTIVE
--   CF013 payer's wallet not found  CF014 a row of the movement was not written (an idempotency claim taken over)
--
-- `p_written`: whether the statement wrote every row of the movement before this call. A function's arguments are
-- evaluated before it runs, so those writes come before the hold's locks (they lock nothing another creator waits
-- on, and are then not part of the time the limit's lock is held); one of them missing fails the statement whole.
CREATE FUNCTION hold_payer_or_refuse(p_wallet uuid, p_limit_key text, p_limit numeric, p_amount numeric,
  p_tenant uuid, p_user uuid, p_asset text, p_since timestamptz, p_movement uuid, p_written boolean)
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
    CASE WHEN p_limit IS NULL THEN NULL ELSE daily_spent(p_tenant, p_user, p_asset, p_since, p_movement) END AS spent
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

-- Replaced by hold_payer_or_refuse.
DROP FUNCTION hold_payer(uuid, text, uuid, uuid, text, timestamptz, uuid);
