/**
 * Keeps the event outbox and the webhook delivery records bounded: an event older than `outboxRetentionDays`,
 * fanned out, with no delivery still pending, is deleted together with its delivery records. Until then it can be
 * resent (`POST /v1/webhooks/events/{eventId}/resend`); afterwards that answers 404 `event not found`, and tenants
 * reconcile through `GET /v1/transactions` (spec section 6, "Reconciliation guidance").
 */
import { Clock, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { pollingLoop } from "../domain/Polling.ts"

export const outboxRetentionDays = 30
export const outboxRetentionIntervalMillis = 60 * 60 * 1000
/** Events removed per statement, so one run never holds long locks. */
export const outboxRetentionBatchRows = 1_000

/** Deletes expired events and their deliveries in bounded batches; returns how many events went. */
export const purgeExpiredEvents = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const cutoff = new Date(now - outboxRetentionDays * 24 * 60 * 60 * 1000)
  let deleted = 0
  for (;;) {
    // One statement: the deliveries and then their events, so no delivery is ever left pointing at nothing. Only
    // counted: its rows stay untyped (nothing is read from them).
    const rows = yield* sql`
      WITH expired AS (
        SELECT e.id FROM outbox_events e
        WHERE e.dispatched_at IS NOT NULL AND e.created_at < ${cutoff}
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'PENDING')
        ORDER BY e.created_at
        LIMIT ${outboxRetentionBatchRows}
      ), deliveries AS (
        DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM expired)
      )
      DELETE FROM outbox_events WHERE id IN (SELECT id FROM expired)
      RETURNING id`
    deleted += rows.length
    if (rows.length < outboxRetentionBatchRows) return deleted
  }
})

export const OutboxRetention = Layer.effectDiscard(
  purgeExpiredEvents.pipe(
    Effect.catchCause((cause) => Effect.logWarning("outbox retention failed", cause).pipe(Effect.as(0))),
    Effect.repeat(Schedule.spaced(outboxRetentionIntervalMillis)),
    pollingLoop,
    Effect.forkScoped
  )
)
