/**
 * The outbox dispatcher (spec section 6): fans each undispatched `outbox_events` row out to one delivery per target
 * endpoint, marks it dispatched, and wakes the endpoints' entities; and the sweeper, which wakes every ACTIVE
 * endpoint that has due deliveries, so nothing depends on an entity being alive (a killed process, a passivated
 * entity, a lost wake). It runs apart from the API, so a slow receiver never slows a request.
 *
 * Targets of an event:
 * - `WEBHOOK_TEST`: only the endpoint it names (its `subjectId`), whatever its status: a DISABLED endpoint's test
 *   delivery waits and goes out once the endpoint is re-enabled (spec 4.5);
 * - every other type: the tenant's ACTIVE endpoints subscribed to it (empty `events` = all), which were already
 *   active when the event was created (`active_since`): events produced while an endpoint was disabled are not
 *   back-filled (spec 6, rule 3).
 *
 * Fan-out is one statement: the batch is locked with SKIP LOCKED (several processes share the work), the deliveries
 * are inserted with ON CONFLICT DO NOTHING on (event, endpoint), and the events are marked in the same statement, so
 * a crash either does all of it or none, and a repeat is harmless.
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Effect, Layer, Queue, Schedule, Schema } from "effect"
import type { Sharding } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { wakeEndpoints } from "../entities/WebhookEndpointEntity.ts"
import { isDue } from "./DeliveryDue.ts"
import { outboxChannel, OutboxSignal } from "../outbox/OutboxSignal.ts"
import { fanOutBatchMax, sweepEndpointsMax, WebhookTimings } from "./DeliverySettings.ts"
import { pollingLoop } from "../domain/Polling.ts"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const fannedRows = decodeRows(
  Schema.Struct({ kind: Schema.Literals(["event", "endpoint"]), id: Text }),
  "Dispatcher.fanOutBatch"
)
const dueEndpointRows = decodeRows(Schema.Struct({ endpoint_id: Text }), "Dispatcher.dueEndpoints")

/** Fans out one batch; answers how many events it dispatched and which endpoints got new deliveries. */
export const fanOutBatch = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = new Date(yield* Clock.currentTimeMillis)
  const rows = yield* sql`
    WITH batch AS (
      SELECT id, tenant_id, event_type, subject_id, created_at FROM outbox_events
      WHERE dispatched_at IS NULL
      ORDER BY created_at, id
      LIMIT ${fanOutBatchMax}
      FOR UPDATE SKIP LOCKED
    ), marked AS (
      UPDATE outbox_events o SET dispatched_at = ${now} FROM batch WHERE o.id = batch.id RETURNING o.id
    ), fanned AS (
      INSERT INTO webhook_deliveries (event_id, endpoint_id, tenant_id, status, attempt, next_at, created_at, updated_at)
      SELECT b.id, w.id, b.tenant_id, 'PENDING', 0, ${now}, ${now}, ${now}
      FROM batch b JOIN webhook_endpoints w ON w.tenant_id = b.tenant_id
      WHERE CASE WHEN b.event_type = 'WEBHOOK_TEST' THEN w.id::text = b.subject_id
        ELSE w.status = 'ACTIVE' AND w.active_since <= b.created_at
          AND (cardinality(w.events) = 0 OR b.event_type = ANY (w.events)) END
      ORDER BY b.created_at, b.id, w.id
      ON CONFLICT ON CONSTRAINT webhook_deliveries_event_endpoint_key DO NOTHING
      RETURNING endpoint_id
    )
    SELECT 'event' AS kind, id::text AS id FROM marked
    UNION ALL
    SELECT DISTINCT 'endpoint' AS kind, endpoint_id::text AS id FROM fanned`.pipe(Effect.orDie, Effect.flatMap(fannedRows))
  return {
    events: rows.filter((row) => row.kind === "event").length,
    endpoints: rows.filter((row) => row.kind === "endpoint").map((row) => row.id)
  }
})

/** Fans out every undispatched event, batch by batch, and wakes the endpoints that got deliveries. */
export const dispatchPending: Effect.Effect<number, never, SqlClient.SqlClient | Sharding.Sharding> = Effect.gen(
  function*() {
    let dispatched = 0
    const endpoints = new Set<string>()
    for (;;) {
      const batch = yield* fanOutBatch
      dispatched += batch.events
      for (const endpointId of batch.endpoints) endpoints.add(endpointId)
      if (batch.events < fanOutBatchMax) break
    }
    yield* wakeEndpoints(endpoints)
    return dispatched
  }
)

/**
 * ACTIVE endpoints with deliveries due now (leased ones are not due until their lease ends): each endpoint asked
 * through `webhook_deliveries_endpoint_due_idx`, the only index of pending deliveries by due time
 * (sql/0038_delivery_indexes_trimmed.sql), so the sweep costs one probe per ACTIVE endpoint whatever the backlog.
 */
export const dueEndpoints = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = new Date(yield* Clock.currentTimeMillis)
  const rows = yield* sql`
    SELECT w.id AS endpoint_id FROM webhook_endpoints w
    WHERE w.status = 'ACTIVE' AND EXISTS (
      SELECT 1 FROM webhook_deliveries d
      WHERE d.endpoint_id = w.id AND d.status = 'PENDING' AND ${isDue(sql, "d", now)})
    LIMIT ${sweepEndpointsMax}`.pipe(Effect.orDie, Effect.flatMap(dueEndpointRows))
  return rows.map((row) => row.endpoint_id)
})

/** Wakes every ACTIVE endpoint with due deliveries; answers which. */
export const sweepDue: Effect.Effect<ReadonlyArray<string>, never, SqlClient.SqlClient | Sharding.Sharding> = Effect
  .gen(function*() {
    const endpoints = yield* dueEndpoints
    yield* wakeEndpoints(endpoints)
    return endpoints
  })

const logged = <A, R>(label: string, effect: Effect.Effect<A, never, R>) =>
  effect.pipe(
    Effect.asVoid,
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning(`${label} failed`, cause)
    )
  )

/**
 * The background loop: dispatches when this process commits events (OutboxSignal), on every notification of another
 * process that has no dispatcher, and at least every poll interval; sweeps at least every sweep interval.
 */
export const WebhookDispatcher = Layer.effectDiscard(Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  const timings = yield* WebhookTimings
  const signals = yield* (yield* OutboxSignal).subscribe

  yield* Effect.scoped(Effect.gen(function*() {
    const notifications = yield* pg.listen(outboxChannel)
    // Anything committed while not listening is found by the first round.
    yield* Queue.offer(signals, undefined)
    for (;;) {
      yield* Queue.take(notifications)
      yield* Queue.offer(signals, undefined)
    }
  })).pipe(
    Effect.tapCause((cause) => Effect.logWarning("outbox listener failed; reconnecting", cause)),
    Effect.retry(Schedule.spaced("1 second")),
    Effect.forkScoped
  )

  let lastSweepMillis = Number.NEGATIVE_INFINITY
  yield* Effect.gen(function*() {
    for (;;) {
      yield* logged("webhook dispatch", dispatchPending)
      const now = yield* Clock.currentTimeMillis
      if (now - lastSweepMillis >= timings.sweepIntervalMillis) {
        lastSweepMillis = now
        yield* logged("webhook sweep", sweepDue)
      }
      const untilSweep = Math.max(0, lastSweepMillis + timings.sweepIntervalMillis - now)
      yield* Effect.raceFirst(
        Effect.sleep(Math.min(timings.dispatchPollIntervalMillis, untilSweep)),
        Queue.take(signals)
      )
    }
  }).pipe(pollingLoop, Effect.forkScoped)
}))
