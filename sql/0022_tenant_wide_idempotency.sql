-- Tenant-wide idempotency records (spec section 7 rule 8: an `externalTxId`) move to an endpoint name of their own,
-- `<endpoint> (tenant-wide)` (idempotency/Idempotency.ts `recordEndpoint`). Under one name with the per-API-key
-- records (rule 2: an `Idempotency-Key`), an `Idempotency-Key` and an `externalTxId` of the same text met on one
-- record, which the second request could neither hold nor replay: it answered 500. The records written before keep
-- answering their requests under the new name.
UPDATE idempotency_records SET endpoint = endpoint || ' (tenant-wide)' WHERE tenant_wide;
