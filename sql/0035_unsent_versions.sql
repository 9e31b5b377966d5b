-- Issue 34, withdrawals by the batch: the QUEUED step reads what HOT's sends that no node has taken yet will spend
-- (OutgoingSends.ts `reservedPart`). It was driven from the address's PENDING sends, which stay PENDING until final
-- (12 blocks on ETH_SEPOLIA): with N withdrawals waiting for confirmations each QUEUED step probed 2N versions, 3 ms
-- of PostgreSQL per withdrawal in the bench's burst of 200. Driven from the first versions never broadcast instead
-- (recently signed ones; a handful otherwise), the read no longer grows with the sends waiting for their blocks.
-- The first broadcast count of a version moves it out of this index (that update is no longer HOT: two index entries
-- more, once per send).
CREATE INDEX outgoing_versions_unsent_idx ON outgoing_versions (network_key) WHERE broadcasts = 0 AND version = 1;
