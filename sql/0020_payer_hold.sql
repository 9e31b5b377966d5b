-- The daily limit's sum and the payer's hold as functions (transfers/DailyLimit.ts, transfers/PayerHold.ts): one
-- definition of what counts against a limit, and the hold in one round trip.

-- decisions.md "Daily limit": what counts against the user's daily limit of an asset from `since` (midnight UTC of
-- the new movement's day): on-chain withdrawals and cross-user internal transfers that did not end FAILED, REJECTED or
-- CANCELLED. `p_excluding` leaves out the new movement's own row when its transaction inserted it already.
CREATE FUNCTION daily_spent(p_tenant uuid, p_user uuid, p_asset text, p_since timestamptz, p_excluding uuid)
RETURNS numeric
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(amount), 0) FROM transactions
  WHERE tenant_id = p_tenant AND source_user_id = p_user AND asset_id = p_asset AND created_at >= p_since
    AND status NOT IN ('FAILED', 'REJECTED', 'CANCELLED')
    AND (kind = 'WITHDRAWAL' OR (kind = 'INTERNAL_TRANSFER' AND destination_user_id IS DISTINCT FROM source_user_id))
    AND (p_excluding IS NULL OR id <> p_excluding)
$$;

-- The payer's hold, first among the locks of a transaction that moves its funds (docs/ledger.md "Lock order"): the
-- daily limit's advisory lock when `p_limit_key` is given, then the payer's wallet and user rows FOR SHARE with the
-- day's sum. The function is VOLATILE, so its second statement takes a fresh snapshot once the lock is held: in READ
-- COMMITTED it sees every earlier holder's commit, as a separate statement would, without a round trip in between
-- while the lock is held. `spent` is NULL without a limit.
CREATE FUNCTION hold_payer(p_wallet uuid, p_limit_key text, p_tenant uuid, p_user uuid, p_asset text,
  p_since timestamptz, p_movement uuid)
RETURNS TABLE (wallet_status text, user_status text, spent numeric)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF p_limit_key IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_limit_key, 0));
  END IF;
  RETURN QUERY
    SELECT w.status, u.status,
      CASE WHEN p_limit_key IS NULL THEN NULL ELSE daily_spent(p_tenant, p_user, p_asset, p_since, p_movement) END
    FROM wallets w JOIN users u ON u.id = w.user_id
    WHERE w.id = p_wallet
    FOR SHARE OF w, u;
END
$$;
