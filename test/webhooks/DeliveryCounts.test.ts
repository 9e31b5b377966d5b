/**
 * What a webhook delivery costs the database in row writes, counted rather than timed (issue 34, "Money by the
 * batch": "claims and outcomes recorded set-based with fixed texts, at most two row writes per delivery"). Events are
 * fanned out to two endpoints and delivered to a receiver that answers 200 (the normal success path), by the endpoint
 * entities on the cluster's TestRunner (under TestClock, which stands still: every delivery is due at once); the rows
 * inserted, updated and deleted in every table of this file's database (pg_stat_user_tables) are compared before and
 * after.
 *
 * A delivery is two row writes: the fan-out's insert and the outcome's update. The claim writes none per delivery:
 * it holds one lease per endpoint (sql/0034_delivery_endpoint_leases.sql), written when taken, at most every quarter
 * lease while busy, and once more when the entity gives it up. The event's `dispatched_at` is one write per event,
 * shared by its endpoints. A write added anywhere (a per-delivery lease again, a log row, a persisted message) fails
 * here.
 *
 * The statistics of a backend reach the shared counters when it ends (or up to seconds later while it lives), so each
 * phase runs on a pool of its own, closed before the counters are read from a connection of their own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import pg from "pg"
import { dispatchPending } from "../../src/webhooks/Dispatcher.ts"
import { WebhookEndpoints } from "../../src/webhooks/WebhookEndpoints.ts"
import { baseLayer, runnerLayer, setup } from "./fixtures/DeliveryFixtures.ts"
import { eventually, makeReceiver, realSleep } from "./fixtures/Receiver.ts"

const events = 40
const endpoints = 2
const deliveries = events * endpoints
/** The bound: row writes per delivery in the success path, the event's own mark left apart. */
const writesPerDeliveryMax = 2

type Counts = ReadonlyMap<string, { readonly ins: number; readonly upd: number; readonly del: number }>

const readCounts = (client: pg.Client): Promise<Counts> =>
  client.query("SELECT pg_stat_clear_snapshot()").then(() =>
    client.query<{ relname: string; ins: string; upd: string; del: string }>(
      `SELECT relname, n_tup_ins::text AS ins, n_tup_upd::text AS upd, n_tup_del::text AS del FROM pg_stat_user_tables`
    )
  ).then((result) =>
    new Map(result.rows.map((row) => [row.relname, { ins: Number(row.ins), upd: Number(row.upd), del: Number(row.del) }]))
  )

const same = (a: Counts, b: Counts) =>
  a.size === b.size && [...a].every(([name, count]) => {
    const other = b.get(name)
    return other !== undefined && other.ins === count.ins && other.upd === count.upd && other.del === count.del
  })

/** The counters once every closed backend's statistics have arrived: the same two readings a second apart. */
const settledCounts = (client: pg.Client) =>
  Effect.promise(async () => {
    let previous = await readCounts(client)
    for (let attempt = 0; attempt < 30; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const current = await readCounts(client)
      if (same(previous, current)) return current
      previous = current
    }
    throw new Error("the table statistics did not settle within 30 s")
  })

describe("what a webhook delivery costs the database (issue 34)", () => {
  it.effect(`at most ${writesPerDeliveryMax} row writes per delivery: ${events} events to ${endpoints} endpoints, all answered 200`, () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const client = new pg.Client({ connectionString: process.env.DATABASE_URL! })
      yield* Effect.acquireRelease(Effect.promise(() => client.connect()), () => Effect.promise(() => client.end()))

      // The tenant, its endpoints and its events, on a pool closed afterwards.
      const endpointIds = yield* Effect.gen(function*() {
        const { tenantId, endpointId } = yield* setup(`${receiver.url}/first`, events)
        const second = yield* (yield* WebhookEndpoints).create(tenantId, { url: `${receiver.url}/second` })
        return [endpointId, second.id]
      }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer()))
      assert.strictEqual(endpointIds.length, endpoints)
      const before = yield* settledCounts(client)

      // Fan-out, claims, attempts and outcomes: until every delivery is DELIVERED; then the entities and pool end.
      yield* Effect.gen(function*() {
        yield* dispatchPending
        const sql = yield* SqlClient.SqlClient
        yield* eventually(
          "every delivery DELIVERED",
          Effect.map(
            sql<{ delivered: number }>`
              SELECT count(*)::int AS delivered FROM webhook_deliveries WHERE status = 'DELIVERED'`.pipe(Effect.orDie),
            (rows) => rows[0]!.delivered === deliveries ? true : undefined
          ),
          60_000
        )
        // A duplicate attempt would show here as a request too many.
        yield* realSleep(200)
      }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer()))
      assert.strictEqual(receiver.requests.length, deliveries, "each delivery sent once")
      const after = yield* settledCounts(client)

      const delta = new Map([...after].map(([name, count]) => {
        const was = before.get(name) ?? { ins: 0, upd: 0, del: 0 }
        return [name, { ins: count.ins - was.ins, upd: count.upd - was.upd, del: count.del - was.del }] as const
      }).filter(([, count]) => count.ins + count.upd + count.del > 0))
      const writes = (name: string) => {
        const count = delta.get(name)
        return count === undefined ? 0 : count.ins + count.upd + count.del
      }
      const deliveryRows = writes("webhook_deliveries")
      const leaseRows = writes("webhook_delivery_leases")
      const eventMarks = writes("outbox_events")
      console.log(`row writes: ${JSON.stringify(Object.fromEntries(delta))}; per delivery ` +
        `${((deliveryRows + leaseRows) / deliveries).toFixed(3)} (deliveries and leases), ` +
        `${((deliveryRows + leaseRows + eventMarks) / deliveries).toFixed(3)} with the events' marks`)

      // One insert and one update per delivery, nothing else on its row.
      assert.deepStrictEqual(delta.get("webhook_deliveries"), { ins: deliveries, upd: deliveries, del: 0 })
      // Each endpoint's lease: taken once, given up once when its entity ended between rounds; no renewal this soon.
      assert.isAtMost(leaseRows, 2 * endpoints)
      // Each event marked dispatched once.
      assert.deepStrictEqual(delta.get("outbox_events"), { ins: 0, upd: events, del: 0 })
      // No other table written (but the process's own liveness heartbeat, which runs whatever it does).
      assert.deepStrictEqual(
        [...delta.keys()].filter((name) =>
          !["webhook_deliveries", "webhook_delivery_leases", "outbox_events", "service_instances"].includes(name)
        ),
        []
      )
      assert.isAtMost((deliveryRows + leaseRows) / deliveries, writesPerDeliveryMax + (2 * endpoints) / deliveries)
    }), Duration.toMillis("3 minutes"))
})
