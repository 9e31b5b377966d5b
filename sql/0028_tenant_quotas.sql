-- Per-tenant quotas on rows a tenant can otherwise grow without bound (issue 36; docs/operations.md, "Per-tenant
-- quotas"). Each lives on the tenant row so an operator can raise one tenant's quota without a release.

-- Users (POST /v1/users and the user a wallet or deposit-address call creates): checked against `user_seq`, the
-- count of users created, which is bumped under the tenant row lock in the creating transaction, so two requests
-- cannot both take the last place. Users are never deleted, so the count only grows.
ALTER TABLE tenants ADD COLUMN users_max integer NOT NULL DEFAULT 10000000 CHECK (users_max >= 0);

-- Webhook endpoints, ACTIVE and DISABLED together (spec section 8 caps only the active ones at 10; a disabled one is
-- kept for its delivery history, so create-then-delete would otherwise add rows forever).
ALTER TABLE tenants ADD COLUMN webhook_endpoints_max integer NOT NULL DEFAULT 100 CHECK (webhook_endpoints_max >= 0);

-- Counted under the same per-tenant advisory lock as the active cap, so a burst of creations cannot pass it.
CREATE FUNCTION webhook_endpoints_total_max() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('coffer.webhook_endpoints.active:' || NEW.tenant_id::text, 0));
  IF (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = NEW.tenant_id AND id <> NEW.id)
      >= (SELECT webhook_endpoints_max FROM tenants WHERE id = NEW.tenant_id) THEN
    RAISE EXCEPTION 'webhook endpoint quota reached'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_total_max';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER webhook_endpoints_total_max BEFORE INSERT OR UPDATE OF tenant_id ON webhook_endpoints
  FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_total_max();
