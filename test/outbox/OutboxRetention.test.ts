/**
 * The outbox retention (src/outbox/OutboxRetention.ts): old events whose deliveries are all settled go, with their
 * delivery records; recent events, undispatched ones and ones with a delivery still pending stay.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { outboxRetentionDays, purgeExpiredEvents } from "../../src/outbox/OutboxRetention.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

const dayMillis = 24 * 60 * 60 * 1000

layer(makeTestAppLayer(), { excludeTestServices: true })("outbox retention", (it) => {
  it.effect("deletes expired, settled events with their deliveries, and nothing else", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* provisionTenant()
      const endpointId = yield* uuidV7
      yield* sql`INSERT INTO webhook_endpoints (id, tenant_id, url, status, active_since, created_at, updated_at)
        VALUES (${endpointId}, ${tenant.tenantId}, 'https://example.com/hook', 'ACTIVE', now(), now(), now())`
      const old = new Date(Date.now() - (outboxRetentionDays + 1) * dayMillis)
      const recent = new Date(Date.now() - (outboxRetentionDays - 1) * dayMillis)
      const event = (createdAt: Date, dispatched: boolean, delivery: "DELIVERED" | "DEAD" | "PENDING" | undefined) =>
        Effect.gen(function*() {
          const id = yield* uuidV7
          yield* sql`INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at, dispatched_at)
            VALUES (${id}, ${tenant.tenantId}, 'WALLET_CREATED', ${id}, 'created', '{}'::jsonb, ${createdAt},
              ${dispatched ? createdAt : null})`
          if (delivery !== undefined) {
            const settled = delivery !== "PENDING"
            yield* sql`INSERT INTO webhook_deliveries (event_id, endpoint_id, tenant_id, status, attempt, response_status,
                last_attempt_at, duration_ms, next_at, created_at, updated_at)
              VALUES (${id}, ${endpointId}, ${tenant.tenantId}, ${delivery}, ${delivery === "DEAD" ? 6 : settled ? 1 : 0},
                ${delivery === "DELIVERED" ? 200 : null}, ${settled ? createdAt : null}, ${settled ? 12 : null},
                ${settled ? null : createdAt}, ${createdAt}, ${createdAt})`
          }
          return id
        })
      // All in one transaction, so the running dispatcher cannot fan out (and mark dispatched) what is arranged here.
      yield* sql.withTransaction(Effect.gen(function*() {
        const expiredDelivered = yield* event(old, true, "DELIVERED")
        const expiredDead = yield* event(old, true, "DEAD")
        const expiredUnsubscribed = yield* event(old, true, undefined)
        const oldPending = yield* event(old, true, "PENDING")
        const oldUndispatched = yield* event(old, false, undefined)
        const recentDelivered = yield* event(recent, true, "DELIVERED")

        assert.strictEqual(yield* purgeExpiredEvents, 3)
        const left = (yield* sql<{ id: string }>`SELECT id FROM outbox_events WHERE tenant_id = ${tenant.tenantId}`)
          .map((row) => row.id)
          .sort()
        assert.deepStrictEqual(left, [oldPending, oldUndispatched, recentDelivered].sort())
        const deliveries = yield* sql<{ event_id: string }>`
          SELECT event_id FROM webhook_deliveries WHERE tenant_id = ${tenant.tenantId}`
        assert.deepStrictEqual(deliveries.map((row) => row.event_id).sort(), [oldPending, recentDelivered].sort())
        for (const gone of [expiredDelivered, expiredDead, expiredUnsubscribed]) assert.notInclude(left, gone)
        assert.strictEqual(yield* purgeExpiredEvents, 0, "a second run finds nothing")
      }))
    }))
})
