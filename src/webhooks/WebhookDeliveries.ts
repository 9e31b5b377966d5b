/**
 * Reading and re-queueing delivery records (spec 4.5, `GET /v1/webhooks/deliveries` and
 * `POST /v1/webhooks/events/{eventId}/resend`; section 3 "Webhook delivery statuses").
 */
import { Clock, Context, Effect, Layer, Schema, Scope } from "effect"
import type { Sharding } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { decodeRows, Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { NotFound } from "../domain/ApiError.ts"
import { wakeEndpointsInBackground } from "../entities/WebhookEndpointEntity.ts"
import { dueTime } from "./DeliveryDue.ts"

export const DeliveryStatus = ["PENDING", "DELIVERED", "DEAD"] as const
export type DeliveryStatus = (typeof DeliveryStatus)[number]

export interface DeliveryRecord {
  readonly id: number
  readonly eventId: string
  readonly eventType: string
  readonly endpointId: string
  readonly url: string
  readonly status: DeliveryStatus
  readonly attempt: number
  readonly responseStatus: number | null
  readonly lastError: string | null
  readonly durationMs: number | null
  readonly lastAttemptAt: Date | null
  readonly nextAt: Date | null
}

/** The columns `list` selects, decoded (db/RowSchemas.ts); `id` is the identity column selected as text. */
const Row = Schema.Struct({
  id: Numeric,
  event_id: Text,
  event_type: Text,
  endpoint_id: Text,
  url: Text,
  status: Schema.Literals(DeliveryStatus),
  attempt: Int4,
  response_status: Nullable(Int4),
  last_error: Nullable(Text),
  duration_ms: Nullable(Int4),
  last_attempt_at: Nullable(Timestamp),
  next_at: Nullable(Timestamp)
})
type Row = typeof Row.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const listedRows = decodeRows(Row, "WebhookDeliveries.list")
const resentRows = decodeRows(Schema.Struct({ endpoint_id: Text }), "WebhookDeliveries.resend")

const fromRow = (row: Row): DeliveryRecord => ({
  // Identity values stay far below 2^53 (one per event and endpoint).
  id: Number(row.id),
  eventId: row.event_id,
  eventType: row.event_type,
  endpointId: row.endpoint_id,
  url: row.url,
  status: row.status,
  attempt: row.attempt,
  responseStatus: row.response_status,
  lastError: row.last_error,
  durationMs: row.duration_ms,
  lastAttemptAt: row.last_attempt_at,
  nextAt: row.next_at
})

export interface DeliveryFilter {
  readonly endpointId?: string | undefined
  readonly status?: DeliveryStatus | undefined
  readonly limit: number
  /** Only records with a smaller id: the `id` of the last record of the previous page. */
  readonly before?: number | undefined
}

export class WebhookDeliveries extends Context.Service<WebhookDeliveries, {
  /** Newest first (by id); another tenant's endpoint id simply matches nothing. */
  readonly list: (tenantId: string, filter: DeliveryFilter) => Effect.Effect<ReadonlyArray<DeliveryRecord>>
  /**
   * Every delivery of the event, whatever its status, back to PENDING and due now with its counters reset; answers
   * how many. The endpoints are woken at once; a DISABLED endpoint's delivery waits for re-enabling.
   */
  readonly resend: (tenantId: string, eventId: string) => Effect.Effect<number, NotFound>
}>()("coffer/WebhookDeliveries") {
  static readonly layer: Layer.Layer<WebhookDeliveries, never, SqlClient.SqlClient | Sharding.Sharding> = Layer.effect(
    WebhookDeliveries,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const context = yield* Effect.context<Sharding.Sharding>()
      const scope = yield* Scope.Scope

      const list = Effect.fn("WebhookDeliveries.list")(function*(tenantId: string, filter: DeliveryFilter) {
        // `nextAt` of a PENDING delivery is when it is (or was) due; a delivery in flight has passed it (its round holds
        // the endpoint's lease, not the row: WebhookDelivery.ts); one leased by an older build shows its lease's end.
        // (DELIVERED and DEAD rows have neither column, so it is null for them.)
        const before = filter.before === undefined ? sql`` : sql`AND d.id < ${String(filter.before)}::bigint`
        // Without a status or endpoint filter, the newest of each status from `webhook_deliveries_tenant_status_idx`,
        // merged by id: the table has no (tenant_id, id) index, so the row an attempt rewrites enters one index fewer
        // (sql/0038_delivery_indexes_trimmed.sql).
        const matching = filter.status === undefined && filter.endpointId === undefined
          ? sql`(${
            sql.join(" UNION ALL ", false)(DeliveryStatus.map((status) =>
              sql`(SELECT d.* FROM webhook_deliveries d WHERE d.tenant_id = ${tenantId} AND d.status = ${status} ${before}
                ORDER BY d.id DESC LIMIT ${filter.limit})`
            ))
          })`
          : sql`(SELECT d.* FROM webhook_deliveries d WHERE d.tenant_id = ${tenantId}
              ${filter.endpointId === undefined ? sql`` : sql`AND d.endpoint_id = ${filter.endpointId}`}
              ${filter.status === undefined ? sql`` : sql`AND d.status = ${filter.status}`}
              ${before}
            ORDER BY d.id DESC LIMIT ${filter.limit})`
        const rows = yield* sql`
          SELECT d.id::text AS id, d.event_id, e.event_type, d.endpoint_id, coalesce(d.url, w.url) AS url, d.status,
            d.attempt, d.response_status, d.last_error, d.duration_ms, d.last_attempt_at,
            ${dueTime(sql, "d")} AS next_at
          FROM ${matching} d
            JOIN outbox_events e ON e.id = d.event_id
            JOIN webhook_endpoints w ON w.id = d.endpoint_id
          ORDER BY d.id DESC
          LIMIT ${filter.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        return rows.map(fromRow)
      })

      const resend = Effect.fn("WebhookDeliveries.resend")(function*(tenantId: string, eventId: string) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const [event] = yield* sql`SELECT id FROM outbox_events WHERE id = ${eventId} AND tenant_id = ${tenantId}`
          if (event === undefined) return undefined
          return yield* sql`
            UPDATE webhook_deliveries SET status = 'PENDING', attempt = 0, response_status = NULL, last_error = NULL,
              duration_ms = NULL, last_attempt_at = NULL, next_at = ${now}, leased_until = NULL, updated_at = ${now}
            WHERE event_id = ${eventId} AND tenant_id = ${tenantId}
            RETURNING endpoint_id`.pipe(Effect.flatMap(resentRows))
        })).pipe(Effect.orDie)
        if (result === undefined) return yield* new NotFound({ message: "event not found" })
        // In the background: the deliveries are committed due, and the answer does not wait for another runner.
        yield* wakeEndpointsInBackground(new Set(result.map((row) => row.endpoint_id)), scope).pipe(
          Effect.provideContext(context)
        )
        return result.length
      })

      return WebhookDeliveries.of({ list, resend })
    })
  )
}
