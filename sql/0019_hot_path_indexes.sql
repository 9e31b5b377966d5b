-- Indexes for the statements every transfer and withdrawal runs, found with pg_stat_statements under the bench's
-- load (docs/performance.md):
-- The daily limit's sum (transfers/DailyLimit.ts `spentToday`) reads one user's movements of one asset today. Through
-- transactions_created_idx (tenant_id, created_at) it walked every movement of the whole tenant today, so a transfer's
-- cost grew with the tenant's traffic (4 ms per sum, twice per transfer, after 10,000 deposits).
CREATE INDEX transactions_daily_spend_idx ON transactions (source_user_id, asset_id, created_at)
  WHERE source_user_id IS NOT NULL;
