-- A round of an endpoint's deliveries holds one lease for the endpoint instead of one per delivery
-- (src/webhooks/WebhookDelivery.ts, claim; docs/webhooks.md). The per-delivery lease (sql/0024) was a row write per
-- delivery on top of the fan-out's insert and the outcome's update: three per delivered delivery. Now a claim reads the
-- due deliveries of an endpoint whose lease it holds, and writes this row only when it takes the lease or when less than
-- three quarters of it are left: two row writes per delivery (the insert and the outcome), plus one per endpoint
-- every quarter lease while it is busy.
-- `holder` is one instance of the endpoint's entity: its rounds share the lease, another instance (another process
-- after a crash or a shard move) takes it only once it has ended, as the deliveries' own leases did. A process that dies
-- mid-attempt leaves it to expire, and every delivery it had not recorded is due again: at least once.
-- `instance` is the holder's process (service_instances, sql/0011): a lease whose process no longer holds its
-- advisory lock (gone in any way, kill -9 included) counts as ended, so a kill -9 holds the endpoint for the seconds the
-- cluster takes to move its shard, not for the rest of the lease (issue 32, failover in seconds).
-- webhook_deliveries.leased_until stays: rows leased by an older build are due once it passes (webhooks/DeliveryDue.ts).
CREATE TABLE webhook_delivery_leases (
  endpoint_id uuid PRIMARY KEY REFERENCES webhook_endpoints (id),
  holder uuid NOT NULL,
  instance uuid NOT NULL,
  leased_until timestamptz NOT NULL
);
-- Renewals change no key: room on the page keeps them heap-only.
ALTER TABLE webhook_delivery_leases SET (fillfactor = 50);
