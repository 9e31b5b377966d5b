-- Two of webhook_deliveries' seven indexes go (issue 34, docs/benchmarks.md): a delivery is inserted by the fan-out
-- and rewritten by its outcome, which changes `status` and `next_at`, so it is never heap-only and every index that
-- takes the row takes it twice. What the two served is answered by the indexes that stay:
-- - `webhook_deliveries_tenant_idx` (tenant_id, id DESC): GET /v1/webhooks/deliveries without a status or endpoint
--   filter reads the three statuses from `webhook_deliveries_tenant_status_idx` and merges them by id
--   (src/webhooks/WebhookDeliveries.ts, `list`);
-- - `webhook_deliveries_due_idx` (next_at) WHERE PENDING: the sweeper asks each ACTIVE endpoint through
--   `webhook_deliveries_endpoint_due_idx` (src/webhooks/Dispatcher.ts, `dueEndpoints`).
DROP INDEX webhook_deliveries_tenant_idx;
DROP INDEX webhook_deliveries_due_idx;
