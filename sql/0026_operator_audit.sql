-- The operator's audit trail (operator-interface.md, "Listing, audit and documents"): one row per operator request
-- that changed something, inserted in the transaction of the change itself (src/ops/OperatorAudit.ts), so a change
-- without its entry, or an entry without its change, cannot be committed. Rows are never edited: the triggers below
-- refuse UPDATE, DELETE and TRUNCATE for every role, the table owner and superusers included (a privilege alone
-- would not bind the role the service connects as, which owns its tables).
CREATE TABLE operator_audit (
  id uuid PRIMARY KEY,
  -- The listing's order (newest first): allocated at insert, so entries of two processes in one millisecond still
  -- have one order, which uuidv7 ids alone would not give.
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  at timestamptz NOT NULL,
  action text NOT NULL CHECK (action ~ '^[A-Z][A-Z_]{0,63}$'),
  target_type text NOT NULL CHECK (target_type ~ '^[A-Z][A-Z_]{0,31}$'),
  -- Null where the action names no single thing (a PUT /ops/prices of several assets).
  target_id text CHECK (char_length(target_id) BETWEEN 1 AND 200),
  -- The tenant the change belongs to; null for platform-wide changes (switches of networks and assets, prices).
  tenant_id uuid REFERENCES tenants (id),
  change jsonb NOT NULL CHECK (jsonb_typeof(change) = 'object'),
  -- X-Request-Id of the operator's request (given by the caller, up to 200 chars, or generated).
  request_id text NOT NULL CHECK (char_length(request_id) BETWEEN 1 AND 200),
  -- Who the caller said it is (X-Operator), or 'ops-token' (the one bearer token has no accounts).
  operator text NOT NULL CHECK (char_length(operator) BETWEEN 1 AND 200)
);

CREATE INDEX operator_audit_tenant_idx ON operator_audit (tenant_id, seq DESC) WHERE tenant_id IS NOT NULL;
CREATE INDEX operator_audit_at_idx ON operator_audit (at);

CREATE FUNCTION operator_audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'operator_audit is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER operator_audit_no_update_or_delete BEFORE UPDATE OR DELETE ON operator_audit
  FOR EACH ROW EXECUTE FUNCTION operator_audit_refuse_change();
CREATE TRIGGER operator_audit_no_truncate BEFORE TRUNCATE ON operator_audit
  FOR EACH STATEMENT EXECUTE FUNCTION operator_audit_refuse_change();

-- GET /ops/approvals reads what waits for an operator, oldest first, without scanning every transaction.
CREATE INDEX transactions_awaiting_operator_idx ON transactions (id)
  WHERE status = 'PENDING_AUTHORIZATION' OR (kind = 'DEPOSIT' AND sub_status = 'MANUAL_REVIEW');
