-- Webhooks (spec 4.5 and section 6): the endpoints tenants register and one delivery record per (event, endpoint).
-- PostgreSQL is the source of truth for delivery: the endpoint entities only cache and act on these rows, so every
-- rule that must survive a restart or a second process is a constraint or a trigger here.

-- Deliveries reference (event, tenant) so that a delivery can never carry another tenant's event.
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_id_tenant_key UNIQUE (id, tenant_id);

CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  -- Section 8: at most 2048 characters; never whitespace; the scheme rules per environment live in WebhookUrl.ts.
  url text NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048 AND url ~ '^https?://' AND url !~ '[[:space:]]'),
  -- Empty = every event type (spec 6, rule 5). Only known types, no NULL element.
  events text[] NOT NULL DEFAULT '{}' CHECK (
    events <@ ARRAY['TRANSACTION_CREATED', 'TRANSACTION_STATUS_UPDATED', 'WALLET_CREATED', 'DEPOSIT_REVERSED',
      'MANUAL_DEPOSIT_CREDITED', 'VAULT_GAS_LOW', 'WEBHOOK_TEST']::text[]
    AND array_position(events, NULL) IS NULL),
  description text CHECK (char_length(description) <= 500),
  status text NOT NULL CHECK (status IN ('ACTIVE', 'DISABLED')),
  -- When the endpoint last became ACTIVE: events created before it are never fanned out to it, so events produced
  -- while it was disabled (or before it existed) are not back-filled (spec 6, rule 3).
  active_since timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT webhook_endpoints_id_tenant_key UNIQUE (id, tenant_id)
);
-- GET /v1/webhooks lists newest first.
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

-- Section 8: at most 10 ACTIVE endpoints per tenant, whatever runs concurrently. The transaction-scoped advisory
-- lock serialises activations per tenant (without blocking the tenant row, which user creation locks); the count
-- runs after the lock is held, and a VOLATILE function takes a fresh snapshot per statement, so it sees every
-- activation committed before it.
CREATE FUNCTION webhook_endpoints_active_max() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'ACTIVE' AND (TG_OP = 'INSERT' OR OLD.status <> 'ACTIVE' OR OLD.tenant_id <> NEW.tenant_id) THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('coffer.webhook_endpoints.active:' || NEW.tenant_id::text, 0));
    IF (SELECT count(*) FROM webhook_endpoints
        WHERE tenant_id = NEW.tenant_id AND status = 'ACTIVE' AND id <> NEW.id) >= 10 THEN
      RAISE EXCEPTION 'at most 10 active webhook endpoints'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_active_max';
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER webhook_endpoints_active_max BEFORE INSERT OR UPDATE OF status, tenant_id ON webhook_endpoints
  FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_active_max();

CREATE TABLE webhook_deliveries (
  -- The paging key of GET /v1/webhooks/deliveries (`before`), allocated in fan-out order.
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id uuid NOT NULL,
  endpoint_id uuid NOT NULL,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  status text NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'DEAD')),
  -- Attempts made: the first plus at most five retries (spec 6, rule 2).
  attempt integer NOT NULL DEFAULT 0 CHECK (attempt BETWEEN 0 AND 6),
  -- The URL of the last attempt (an endpoint's URL may change between attempts).
  url text CHECK (char_length(url) <= 2048),
  -- Null on a connection failure, a timeout or a refused address.
  response_status integer CHECK (response_status BETWEEN 100 AND 599),
  last_error text CHECK (char_length(last_error) <= 1000),
  duration_ms integer CHECK (duration_ms >= 0),
  last_attempt_at timestamptz,
  -- PENDING: when the next attempt is due (while an attempt is in flight: when it counts as lost); otherwise null.
  next_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- Fan-out is idempotent: an event reaches an endpoint through one record, however often it is dispatched.
  CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (event_id, endpoint_id),
  CONSTRAINT webhook_deliveries_event_fkey FOREIGN KEY (event_id, tenant_id) REFERENCES outbox_events (id, tenant_id),
  CONSTRAINT webhook_deliveries_endpoint_fkey FOREIGN KEY (endpoint_id, tenant_id)
    REFERENCES webhook_endpoints (id, tenant_id),
  CONSTRAINT webhook_deliveries_due_when_pending CHECK ((status = 'PENDING') = (next_at IS NOT NULL)),
  -- DEAD only after the sixth failed attempt (spec 3, "Webhook delivery statuses").
  CONSTRAINT webhook_deliveries_dead_after_six CHECK (status <> 'DEAD' OR attempt = 6),
  CONSTRAINT webhook_deliveries_delivered_2xx
    CHECK (status <> 'DELIVERED' OR (attempt >= 1 AND response_status BETWEEN 200 AND 299)),
  CONSTRAINT webhook_deliveries_attempt_recorded
    CHECK ((attempt = 0 AND last_attempt_at IS NULL AND duration_ms IS NULL)
      OR (attempt > 0 AND last_attempt_at IS NOT NULL AND duration_ms IS NOT NULL))
);
CREATE INDEX webhook_deliveries_tenant_idx ON webhook_deliveries (tenant_id, id DESC);
CREATE INDEX webhook_deliveries_tenant_status_idx ON webhook_deliveries (tenant_id, status, id DESC);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id DESC);
-- What an endpoint's entity and the sweeper look for: pending work by due time.
CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, next_at) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_at) WHERE status = 'PENDING';

-- Wakes the dispatcher of every process when events commit (NOTIFY is delivered at commit, folded per transaction);
-- the dispatcher also polls, so a lost notification only delays.
CREATE FUNCTION outbox_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('coffer_outbox', '');
  RETURN NULL;
END $$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify();
