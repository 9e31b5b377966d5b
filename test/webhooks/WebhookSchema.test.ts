/**
 * The invariants sql/0004_webhooks.sql enforces by itself, whatever code writes the rows: at most 10 ACTIVE
 * endpoints per tenant, deliveries only within one tenant and once per (event, endpoint), and the delivery
 * states of spec section 3.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidV7 } from "../../src/domain/Ids.ts"

const violation = (error: SqlError.SqlError) => {
  const reason = error.reason as { readonly _tag: string; readonly constraint?: string; readonly cause?: any }
  return reason.constraint ?? reason.cause?.constraint ?? reason._tag
}

const expectViolation = <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>) =>
  Effect.flatMap(Effect.flip(effect), (error) => Effect.succeed(violation(error)))

const withDatabase = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | Ids>) =>
  effect.pipe(
    Effect.provide(Ids.layer.pipe(Layer.provide(Entropy.layer))),
    Effect.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
    Effect.orDie
  )

const tenant = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const id = yield* uuidV7
  yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${id}, 'schema', '{}', now())`
  return id
})

const endpoint = (tenantId: string, status = "ACTIVE") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    yield* sql`INSERT INTO webhook_endpoints (id, tenant_id, url, status, active_since, created_at, updated_at)
      VALUES (${id}, ${tenantId}, 'https://example.com/', ${status}, now(), now(), now())`
    return id
  })

const event = (tenantId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    yield* sql`INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
      VALUES (${id}, ${tenantId}, 'WALLET_CREATED', ${id}, 'k', '{}', now())`
    return id
  })

describe("webhook tables (sql/0004_webhooks.sql)", () => {
  it.live("an 11th ACTIVE endpoint is refused by the database, on insert and on re-activation", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenantId = yield* tenant
      for (let index = 0; index < 10; index++) yield* endpoint(tenantId)
      const disabled = yield* endpoint(tenantId, "DISABLED")
      assert.strictEqual(yield* expectViolation(endpoint(tenantId)), "webhook_endpoints_active_max")
      assert.strictEqual(
        yield* expectViolation(sql`UPDATE webhook_endpoints SET status = 'ACTIVE' WHERE id = ${disabled}`),
        "webhook_endpoints_active_max"
      )
      // Other tenants are not counted.
      yield* endpoint(yield* tenant)
    })))

  it.live("URL and events are checked: http(s) only, no whitespace, known event types", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenantId = yield* tenant
      const insert = (url: string, events: string) =>
        Effect.flatMap(uuidV7, (id) =>
          sql`INSERT INTO webhook_endpoints (id, tenant_id, url, events, status, active_since, created_at, updated_at)
            VALUES (${id}, ${tenantId}, ${url}, ${events}::text[], 'DISABLED', now(), now(), now())`)
      assert.strictEqual(yield* expectViolation(insert("ftp://x/", "{}")), "webhook_endpoints_url_check")
      assert.strictEqual(yield* expectViolation(insert("https://x/ y", "{}")), "webhook_endpoints_url_check")
      assert.strictEqual(yield* expectViolation(insert("https://x/", "{NOPE}")), "webhook_endpoints_events_check")
      yield* insert("https://x/", "{WALLET_CREATED,VAULT_GAS_LOW}")
    })))

  it.live("a delivery stays within its tenant, exists once per (event, endpoint), and keeps to its states", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const owner = yield* tenant
      const other = yield* tenant
      const endpointId = yield* endpoint(owner)
      const eventId = yield* event(owner)
      const foreignEvent = yield* event(other)
      const insert = (values: { event: string; tenant: string; status: string; attempt: number; nextAt: boolean }) =>
        sql`INSERT INTO webhook_deliveries (event_id, endpoint_id, tenant_id, status, attempt, next_at, last_attempt_at,
            duration_ms, response_status, created_at, updated_at)
          VALUES (${values.event}, ${endpointId}, ${values.tenant}, ${values.status}, ${values.attempt},
            ${values.nextAt ? new Date() : null}, ${values.attempt > 0 ? new Date() : null},
            ${values.attempt > 0 ? 5 : null}, ${values.status === "DELIVERED" ? 200 : null}, now(), now())`
      assert.strictEqual(
        yield* expectViolation(insert({ event: foreignEvent, tenant: owner, status: "PENDING", attempt: 0, nextAt: true })),
        "webhook_deliveries_event_fkey"
      )
      assert.strictEqual(
        yield* expectViolation(insert({ event: foreignEvent, tenant: other, status: "PENDING", attempt: 0, nextAt: true })),
        "webhook_deliveries_endpoint_fkey"
      )
      assert.strictEqual(
        yield* expectViolation(insert({ event: eventId, tenant: owner, status: "PENDING", attempt: 0, nextAt: false })),
        "webhook_deliveries_due_when_pending"
      )
      assert.strictEqual(
        yield* expectViolation(insert({ event: eventId, tenant: owner, status: "DEAD", attempt: 3, nextAt: false })),
        "webhook_deliveries_dead_after_six"
      )
      assert.strictEqual(
        yield* expectViolation(insert({ event: eventId, tenant: owner, status: "PENDING", attempt: 7, nextAt: true })),
        "webhook_deliveries_attempt_check"
      )
      assert.strictEqual(
        yield* expectViolation(insert({ event: eventId, tenant: owner, status: "DELIVERED", attempt: 0, nextAt: false })),
        "webhook_deliveries_delivered_2xx"
      )
      yield* insert({ event: eventId, tenant: owner, status: "PENDING", attempt: 0, nextAt: true })
      assert.strictEqual(
        yield* expectViolation(insert({ event: eventId, tenant: owner, status: "DELIVERED", attempt: 1, nextAt: false })),
        "webhook_deliveries_event_endpoint_key"
      )
    })))

  it.live("a lease is held only by a PENDING delivery, and is in no index, so taking it is a heap-only update", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const owner = yield* tenant
      const endpointId = yield* endpoint(owner)
      const eventId = yield* event(owner)
      const [row] = yield* sql<{ id: string }>`
        INSERT INTO webhook_deliveries (event_id, endpoint_id, tenant_id, status, attempt, next_at, created_at, updated_at)
        VALUES (${eventId}, ${endpointId}, ${owner}, 'PENDING', 0, now(), now(), now()) RETURNING id::text AS id`
      yield* sql`UPDATE webhook_deliveries SET leased_until = now() + interval '90 seconds' WHERE id = ${row!.id}::bigint`
      assert.strictEqual(
        yield* expectViolation(sql`
          UPDATE webhook_deliveries SET status = 'DELIVERED', attempt = 1, next_at = NULL, response_status = 200,
            last_attempt_at = now(), duration_ms = 5
          WHERE id = ${row!.id}::bigint`),
        "webhook_deliveries_leased_when_pending"
      )
      // An index on the column, or on an expression or predicate naming it, would make every claim write index entries.
      const indexed = yield* sql<{ name: string }>`
        SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'webhook_deliveries'::regclass
          AND (pg_get_indexdef(i.indexrelid) LIKE '%leased_until%'
            OR EXISTS (SELECT 1 FROM unnest(i.indkey) k JOIN pg_attribute a
              ON a.attrelid = i.indrelid AND a.attnum = k WHERE a.attname IN ('leased_until', 'updated_at')))`
      assert.deepStrictEqual(indexed, [])
    })))
})
