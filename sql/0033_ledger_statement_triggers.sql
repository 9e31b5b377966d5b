-- Issue 34, "Money by the batch": the ledger's guards run once per statement instead of once per row. What they
-- enforce is unchanged (sql/0003_ledger.sql); how often they run is not:
--   * before, every posting ran `ledger_apply_posting` (a read of its entry, an UPDATE of its account, a check) and,
--     at commit, `ledger_check_entry` (two reads of its entry's postings): about ten queries per transfer inside
--     PostgreSQL, a fifth of its time in the transfers load (docs/benchmarks.md);
--   * now one statement-level trigger per INSERT into ledger_postings reads the statement's new postings (a
--     transition table) and, in a few set-based queries whatever their number: checks that each posts to an account
--     of its entry's tenant, locks the accounts in ascending id, applies each account's summed change once (a fee
--     account or a payer posted to by many entries of a batch is updated once), refuses an overdraft, and checks
--     that every entry the statement posted to balances per asset with at least two postings.
--
-- Choices:
--   * The overdraft check is on the balance at the statement's end: an account with a debit in the statement (a
--     non-reversal AVAILABLE posting below zero) may not end it below zero (CF001, as before). Within one statement
--     the postings' order no longer matters: a batch is accepted when its net leaves every debited account at zero
--     or more, which some serial order of its entries would also have (credits first).
--   * The double-entry check is immediate, at the statement's end, not deferred to commit: every writer (Ledger.ts)
--     inserts an entry's postings in one statement. An entry's postings spread over several statements are refused
--     unless each statement leaves the entry balanced. The "no postings at all" check stays deferred (a row
--     constraint trigger on ledger_entries, one per entry at commit), since an entry is inserted before its postings.
--   * The balance guard (`ledger_guard_account`) is unchanged: the UPDATE below runs at trigger depth 2.
--   * The daily totals (`daily_spend`, sql/0021) are kept by a statement-level trigger on inserts too: one upsert per
--     (user, asset, day) in key order per statement instead of one per movement. Updates keep their row trigger.

DROP TRIGGER ledger_postings_apply ON ledger_postings;
DROP FUNCTION ledger_apply_posting();
DROP TRIGGER ledger_postings_balance ON ledger_postings;
DROP FUNCTION ledger_check_entry();

-- Every query below reaches the tables through their keys, from the transition table, by a lateral subquery or an
-- `= ANY (array)`: the planner knows nothing of a transition table's rows, and a join of one with `ledger_postings`
-- by `IN (SELECT ... FROM new_postings)` was planned as a scan of the whole journal (docs/benchmarks.md, an earlier
-- attempt at this trigger: 6.3 ms of PostgreSQL's CPU per transfer).
CREATE FUNCTION ledger_apply_postings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  found_row record;
  account_ids bigint[];
  available_changes numeric[];
  frozen_changes numeric[];
  debits boolean[];
BEGIN
  SELECT p.entry_id, e.tenant_id AS entry_tenant, a.id AS account_id, a.tenant_id AS account_tenant INTO found_row
  FROM new_postings p
  CROSS JOIN LATERAL (SELECT tenant_id FROM ledger_entries WHERE id = p.entry_id) e
  CROSS JOIN LATERAL (SELECT id, tenant_id FROM ledger_accounts WHERE id = p.account_id) a
  WHERE a.tenant_id <> e.tenant_id
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry % of tenant % posts to account % of tenant %',
      found_row.entry_id, found_row.entry_tenant, found_row.account_id, found_row.account_tenant;
  END IF;

  -- Each account's change, summed over the statement's postings; `debits`: whether a posting that may not overdraw
  -- (an AVAILABLE debit of any entry but a deposit reversal) took from it.
  SELECT array_agg(s.account_id ORDER BY s.account_id), array_agg(s.available ORDER BY s.account_id),
    array_agg(s.frozen ORDER BY s.account_id), array_agg(s.debited ORDER BY s.account_id)
  INTO account_ids, available_changes, frozen_changes, debits
  FROM (
    SELECT p.account_id,
      coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'AVAILABLE'), 0) AS available,
      coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'FROZEN'), 0) AS frozen,
      bool_or(p.bucket = 'AVAILABLE' AND p.amount < 0 AND e.kind <> 'DEPOSIT_REVERSAL') AS debited
    FROM new_postings p
    CROSS JOIN LATERAL (SELECT kind FROM ledger_entries WHERE id = p.entry_id) e
    GROUP BY p.account_id
  ) s;
  IF account_ids IS NULL THEN
    RETURN NULL;
  END IF;

  -- The accounts' row locks in ascending id: two statements over the same accounts never wait on each other in a
  -- cycle (docs/ledger.md "Lock order"). The UPDATE below then finds them locked by this transaction. NO KEY UPDATE,
  -- the lock that UPDATE takes: FOR UPDATE would conflict with the KEY SHARE locks the postings' foreign-key checks
  -- hold on the same rows (every concurrent writer's), a deadlock between two writers of one account.
  PERFORM 1 FROM ledger_accounts WHERE id = ANY (account_ids) ORDER BY id FOR NO KEY UPDATE;

  WITH applied AS (
    UPDATE ledger_accounts a SET available = a.available + s.available, frozen = a.frozen + s.frozen
    FROM unnest(account_ids, available_changes, frozen_changes, debits) AS s(id, available, frozen, debited)
    WHERE a.id = s.id AND a.id = ANY (account_ids)
    RETURNING a.id, a.kind, a.available, s.debited
  )
  SELECT id, available INTO found_row FROM applied
  WHERE debited AND available < 0 AND kind IN ('WALLET', 'FEES')
  ORDER BY id LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING
      ERRCODE = 'CF001',
      MESSAGE = format('insufficient available balance on ledger account %s', found_row.id),
      DETAIL = format('available would be %s', found_row.available);
  END IF;

  -- Each entry posted to, with all its postings (earlier statements' too), once.
  SELECT n.entry_id, x.asset_id, x.total INTO found_row
  FROM (SELECT DISTINCT entry_id FROM new_postings) n
  CROSS JOIN LATERAL (
    SELECT a.asset_id, sum(p.amount) AS total
    FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
    WHERE p.entry_id = n.entry_id
    GROUP BY a.asset_id
  ) x
  WHERE x.total <> 0
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry % does not balance: % sums to %', found_row.entry_id, found_row.asset_id, found_row.total;
  END IF;
  SELECT n.entry_id INTO found_row
  FROM (SELECT DISTINCT entry_id FROM new_postings) n
  WHERE (SELECT count(*) FROM ledger_postings p WHERE p.entry_id = n.entry_id) < 2
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger entry % has a single posting', found_row.entry_id;
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER ledger_postings_apply AFTER INSERT ON ledger_postings
  REFERENCING NEW TABLE AS new_postings
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_apply_postings();

DROP TRIGGER transactions_daily_spend_insert ON transactions;
CREATE FUNCTION daily_spend_track_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO daily_spend (user_id, asset_id, day, spent)
  SELECT t.source_user_id, t.asset_id, (t.created_at AT TIME ZONE 'UTC')::date, sum(t.amount)
  FROM new_transactions t
  WHERE t.kind <> 'DEPOSIT' AND counts_against_daily_limit(t.kind, t.status, t.source_user_id, t.destination_user_id)
  GROUP BY 1, 2, 3
  ORDER BY 1, 2, 3
  ON CONFLICT (user_id, asset_id, day) DO UPDATE SET spent = daily_spend.spent + EXCLUDED.spent;
  RETURN NULL;
END
$$;
CREATE TRIGGER transactions_daily_spend_insert AFTER INSERT ON transactions
  REFERENCING NEW TABLE AS new_transactions
  FOR EACH STATEMENT EXECUTE FUNCTION daily_spend_track_inserts();

-- The holds of every movement of a statement of fixed text (transfers/Movements.ts, `transfersStatement`), set-based:
-- the same checks, refusals and lock order as `hold_payer_or_refuse` (sql/0021) asked once per movement, for a list of
-- movements passed as one JSON array, so the statement's text is the same whatever their number and is planned once.
-- `p_members`: [{ord, movement_id, wallet_id, user_id, asset_id, amount, lock_key, daily_limit, day}], `ord` the
-- movements' lock order (their payers' users, then their limits). In that order: the limits' advisory locks, each key
-- once; then the payers' wallet and user rows FOR SHARE (in wallet id order: shared locks, which creators never wait
-- on among themselves, and a freeze locks one row); then one read of every movement's standing and day's total. A
-- movement is over its limit when the day's total plus its amount and those of the movements before it in the list
-- with the same limit (user, asset, day) exceeds it: their totals join the day's only at the statement's end. The
-- first movement in the list that fails a check is refused with that check's SQLSTATE, in the checks' order (not
-- found, limit, user, wallet), its id in the message; the statement fails whole.
CREATE FUNCTION hold_payers_or_refuse(p_members jsonb, p_written boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  failed record;
BEGIN
  IF p_written IS NOT TRUE THEN
    RAISE EXCEPTION USING ERRCODE = 'CF014', MESSAGE = format('movement %s: not all of its rows were written',
      (SELECT string_agg(x->>'movement_id', ', ' ORDER BY (x->>'ord')::int) FROM jsonb_array_elements(p_members) x));
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended(k.lock_key, 0))
  FROM (
    SELECT m.lock_key, min(m.ord) AS ord
    FROM jsonb_to_recordset(p_members) AS m(ord integer, lock_key text)
    WHERE m.lock_key IS NOT NULL
    GROUP BY m.lock_key
    ORDER BY 2
  ) k
  ORDER BY k.ord;
  PERFORM 1 FROM wallets w JOIN users u ON u.id = w.user_id
  WHERE w.id = ANY (ARRAY(SELECT m.wallet_id FROM jsonb_to_recordset(p_members) AS m(wallet_id uuid)))
  ORDER BY w.id
  FOR SHARE OF w, u;
  -- A statement started once the locks are held: in READ COMMITTED it sees every earlier holder's commit.
  SELECT * INTO failed FROM (
    SELECT m.ord, m.movement_id, m.wallet_id, m.user_id, w.status AS wallet_status, u.status AS user_status,
      m.daily_limit IS NOT NULL AND coalesce(d.spent, 0)
        + sum(m.amount) OVER (PARTITION BY m.lock_key, m.day ORDER BY m.ord) > m.daily_limit AS over_limit
    FROM jsonb_to_recordset(p_members) AS m(ord integer, movement_id uuid, wallet_id uuid, user_id uuid, asset_id text,
      amount numeric, lock_key text, daily_limit numeric, day date)
    LEFT JOIN LATERAL (SELECT status, user_id FROM wallets WHERE id = m.wallet_id) w ON true
    LEFT JOIN LATERAL (SELECT status FROM users WHERE id = w.user_id) u ON true
    LEFT JOIN LATERAL (SELECT spent FROM daily_spend
      WHERE m.daily_limit IS NOT NULL AND user_id = m.user_id AND asset_id = m.asset_id AND day = m.day) d ON true
  ) c
  WHERE c.wallet_status IS NULL OR c.over_limit OR c.user_status <> 'ACTIVE' OR c.wallet_status <> 'ACTIVE'
  ORDER BY c.ord
  LIMIT 1;
  IF NOT FOUND THEN
    RETURN true;
  END IF;
  IF failed.wallet_status IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'CF013', MESSAGE = format('wallet %s not found', failed.wallet_id),
      DETAIL = failed.movement_id::text;
  END IF;
  IF failed.over_limit THEN
    RAISE EXCEPTION USING ERRCODE = 'CF010', MESSAGE = 'daily limit exceeded', DETAIL = failed.movement_id::text;
  END IF;
  IF failed.user_status <> 'ACTIVE' THEN
    RAISE EXCEPTION USING ERRCODE = 'CF011', MESSAGE = format('user %s is %s', failed.user_id, failed.user_status),
      DETAIL = failed.movement_id::text;
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'CF012', MESSAGE = format('wallet %s is %s', failed.wallet_id, failed.wallet_status),
    DETAIL = failed.movement_id::text;
END
$$;
