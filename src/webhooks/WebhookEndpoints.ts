/**
 * Webhook endpoints of a tenant (spec 4.5, section 3 "Webhook endpoint statuses"): register, list, change, disable,
 * and send a test event. The input rules are EndpointRules.ts; the limit of 10 ACTIVE endpoints is enforced by
 * PostgreSQL (the `webhook_endpoints_active_max` trigger, race-free), and its refusal becomes LIMIT_EXCEEDED here.
 * Every query is scoped by tenant, so another tenant's endpoint is simply not found (404).
 */
import { Clock, Context, Effect, Layer, Schema, Scope } from "effect"
import type { Sharding } from "effect/cluster"
import { SqlClient, type SqlError } from "effect/sql"
import { AppConfig } from "../Config.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { BadRequest, LimitExceeded, NotFound } from "../domain/ApiError.ts"
import { Ids } from "../domain/Ids.ts"
import { wakeEndpointsInBackground } from "../entities/WebhookEndpointEntity.ts"
import { Outbox } from "../outbox/Outbox.ts"
import { testEventMessage } from "./DeliverySettings.ts"
import {
  activeLimitMessage,
  checkDescription,
  checkEvents,
  checkWebhookUrl,
  webhookEndpointsListMax
} from "./EndpointRules.ts"
import { type EventType, eventTypes } from "./EventTypes.ts"

export const WebhookEndpointStatus = ["ACTIVE", "DISABLED"] as const
export type WebhookEndpointStatus = (typeof WebhookEndpointStatus)[number]

export interface WebhookEndpoint {
  readonly id: string
  readonly tenantId: string
  readonly url: string
  readonly events: ReadonlyArray<EventType>
  readonly description: string | null
  readonly status: WebhookEndpointStatus
  readonly createdAt: Date
}

/** The columns of `columns` below, decoded (db/RowSchemas.ts); `events` is text[] and only holds known types. */
const Row = Schema.Struct({
  id: Text,
  tenant_id: Text,
  url: Text,
  events: Schema.Array(Schema.Literals(eventTypes)),
  description: Nullable(Text),
  status: Schema.Literals(WebhookEndpointStatus),
  created_at: Timestamp
})
type Row = typeof Row.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const createdRow = decodeSingleRow(Row, "WebhookEndpoints.create")
const listedRows = decodeRows(Row, "WebhookEndpoints.list")
const lockedRow = decodeFirstRow(Row, "WebhookEndpoints.update (lock)")
const updatedRow = decodeSingleRow(Row, "WebhookEndpoints.update")
const endpointIdRow = decodeFirstRow(Schema.Struct({ id: Text }), "WebhookEndpoints.sendTest")

const fromRow = (row: Row): WebhookEndpoint => ({
  id: row.id,
  tenantId: row.tenant_id,
  url: row.url,
  events: row.events,
  description: row.description,
  status: row.status,
  createdAt: row.created_at
})

export interface CreateEndpointInput {
  readonly url: string
  readonly events?: ReadonlyArray<string> | null | undefined
  readonly description?: string | null | undefined
}

export interface UpdateEndpointInput {
  readonly url?: string | undefined
  /** null leaves the subscription as it is, like an absent field. */
  readonly events?: ReadonlyArray<string> | null | undefined
  /** null or "" clears it. */
  readonly description?: string | null | undefined
  readonly active?: boolean | undefined
}

/**
 * The active-endpoint cap (`webhook_endpoints_active_max`) and the tenant's quota of endpoints active and disabled
 * together (`webhook_endpoints_total_max`, issue 36) are constraints: LIMIT_EXCEEDED; any other, a defect.
 */
const activeLimitReached = (violation: SqlError.ConstraintError, error: SqlError.SqlError) => {
  const constraint = (violation.cause as { readonly constraint?: unknown } | undefined)?.constraint
  return constraint === "webhook_endpoints_active_max"
    ? Effect.fail(new LimitExceeded({ message: activeLimitMessage }))
    : constraint === "webhook_endpoints_total_max"
    ? Effect.fail(new LimitExceeded({ message: endpointQuotaMessage }))
    : Effect.die(error)
}
/** A database failure other than the caught reason: a defect. */
const sqlDefect = (_: unknown, error: SqlError.SqlError) => Effect.die(error)

/** The quota is per tenant (`tenants.webhook_endpoints_max`, default 100), so the message names no number. */
export const endpointQuotaMessage =
  "webhook endpoint quota reached (active and disabled endpoints count); ask the operator to raise it"

const endpointNotFound = () => new NotFound({ message: "webhook endpoint not found" })

export class WebhookEndpoints extends Context.Service<WebhookEndpoints, {
  readonly create: (tenantId: string, input: CreateEndpointInput) => Effect.Effect<WebhookEndpoint, BadRequest | LimitExceeded>
  /** Newest first, disabled ones included; at most `webhookEndpointsListMax`. */
  readonly list: (tenantId: string) => Effect.Effect<ReadonlyArray<WebhookEndpoint>>
  readonly update: (
    tenantId: string,
    endpointId: string,
    input: UpdateEndpointInput
  ) => Effect.Effect<WebhookEndpoint, BadRequest | LimitExceeded | NotFound>
  /** DELETE: the endpoint becomes DISABLED, the record is kept; disabling a disabled one is not an error. */
  readonly disable: (tenantId: string, endpointId: string) => Effect.Effect<void, NotFound>
  /** Records a WEBHOOK_TEST event for this endpoint only; answers its id. */
  readonly sendTest: (tenantId: string, endpointId: string) => Effect.Effect<string, NotFound>
}>()("coffer/WebhookEndpoints") {
  static readonly layer: Layer.Layer<
    WebhookEndpoints,
    never,
    SqlClient.SqlClient | Ids | Outbox | AppConfig | Sharding.Sharding
  > = Layer.effect(
    WebhookEndpoints,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ids = yield* Ids
      const outbox = yield* Outbox
      const config = yield* AppConfig
      const context = yield* Effect.context<Sharding.Sharding>()
      const columns = sql`id, tenant_id, url, events, description, status, created_at`
      // A text[] parameter passed as JSON, so no array literal is ever built by hand.
      const textArray = (values: ReadonlyArray<string>) =>
        sql`(SELECT coalesce(array_agg(value), '{}') FROM jsonb_array_elements_text(${JSON.stringify(values)}::jsonb))`
      const scope = yield* Scope.Scope
      // In the background: the answer does not wait for the runner holding the endpoint's entity.
      const wake = (endpointId: string) => wakeEndpointsInBackground([endpointId], scope).pipe(Effect.provideContext(context))

      const checkUrl = (text: string) => {
        const checked = checkWebhookUrl(text, config.serviceEnv)
        return "error" in checked
          ? Effect.fail(new BadRequest({ message: checked.error }))
          : Effect.succeed(checked.url)
      }
      const checkSubscription = (values: ReadonlyArray<string>) => {
        const checked = checkEvents(values)
        return "error" in checked
          ? Effect.fail(new BadRequest({ message: checked.error }))
          : Effect.succeed(checked.events)
      }
      const checkText = (value: string | null) => {
        const checked = checkDescription(value)
        return "error" in checked
          ? Effect.fail(new BadRequest({ message: checked.error }))
          : Effect.succeed(checked.description)
      }

      const create = Effect.fn("WebhookEndpoints.create")(function*(tenantId: string, input: CreateEndpointInput) {
        const url = yield* checkUrl(input.url)
        const events = yield* checkSubscription(input.events ?? [])
        const description = yield* checkText(input.description ?? null)
        const id = yield* ids.uuidV7For("webhook-endpoint")
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* sql`
          INSERT INTO webhook_endpoints (id, tenant_id, url, events, description, status, active_since, created_at,
            updated_at)
          VALUES (${id}, ${tenantId}, ${url}, ${textArray(events)}, ${description}, 'ACTIVE', ${now}, ${now}, ${now})
          RETURNING ${columns}`.pipe(
          Effect.catchReason("SqlError", "ConstraintError", activeLimitReached, sqlDefect),
          Effect.flatMap(createdRow)
        )
        return fromRow(row)
      })

      const list = Effect.fn("WebhookEndpoints.list")(function*(tenantId: string) {
        const rows = yield* sql`
          SELECT ${columns} FROM webhook_endpoints WHERE tenant_id = ${tenantId}
          ORDER BY created_at DESC, id DESC
          LIMIT ${webhookEndpointsListMax}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        return rows.map(fromRow)
      })

      const update = Effect.fn("WebhookEndpoints.update")(function*(
        tenantId: string,
        endpointId: string,
        input: UpdateEndpointInput
      ) {
        const url = input.url === undefined ? undefined : yield* checkUrl(input.url)
        const events = input.events == null ? undefined : yield* checkSubscription(input.events)
        const description = input.description === undefined ? undefined : yield* checkText(input.description)
        const now = new Date(yield* Clock.currentTimeMillis)
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const current = yield* sql`
            SELECT ${columns} FROM webhook_endpoints WHERE id = ${endpointId} AND tenant_id = ${tenantId} FOR UPDATE`
            .pipe(Effect.flatMap(lockedRow))
          if (current === undefined) return undefined
          const status: WebhookEndpointStatus = input.active === undefined
            ? current.status
            : input.active ? "ACTIVE" : "DISABLED"
          const activated = current.status === "DISABLED" && status === "ACTIVE"
          const row = yield* sql`
            UPDATE webhook_endpoints SET
              url = ${url ?? current.url},
              events = ${textArray(events ?? current.events)},
              description = ${description === undefined ? current.description : description},
              status = ${status},
              active_since = ${activated ? sql`${now}` : sql`active_since`},
              updated_at = ${now}
            WHERE id = ${endpointId}
            RETURNING ${columns}`.pipe(Effect.flatMap(updatedRow))
          return { endpoint: fromRow(row), activated }
        })).pipe(Effect.catchReason("SqlError", "ConstraintError", activeLimitReached, sqlDefect))
        if (result === undefined) return yield* endpointNotFound()
        // Deliveries that waited while it was disabled (a test event, a resend) go out now.
        if (result.activated) yield* wake(endpointId)
        return result.endpoint
      })

      const disable = Effect.fn("WebhookEndpoints.disable")(function*(tenantId: string, endpointId: string) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const rows = yield* sql`
          UPDATE webhook_endpoints SET status = 'DISABLED',
            updated_at = CASE WHEN status = 'DISABLED' THEN updated_at ELSE ${now} END
          WHERE id = ${endpointId} AND tenant_id = ${tenantId}
          RETURNING id`.pipe(Effect.orDie)
        if (rows.length === 0) return yield* new NotFound({ message: "webhook not found" })
      })

      const sendTest = Effect.fn("WebhookEndpoints.sendTest")(function*(tenantId: string, endpointId: string) {
        const endpoint = yield* sql`
          SELECT id FROM webhook_endpoints WHERE id = ${endpointId} AND tenant_id = ${tenantId}`.pipe(
          Effect.orDie,
          Effect.flatMap(endpointIdRow)
        )
        if (endpoint === undefined) return yield* endpointNotFound()
        const dedupeKey = yield* ids.uuidV7For("webhook-resend")
        // The dispatcher routes it to this endpoint only (Dispatcher.ts), woken once it commits (outbox/OutboxSignal.ts).
        const eventId = yield* outbox.recordReturningId({
          tenantId,
          type: "WEBHOOK_TEST",
          subjectId: endpointId,
          dedupeKey,
          data: { message: testEventMessage, endpointId }
        })
        if (eventId === undefined) return yield* Effect.die(new Error(`test event key ${dedupeKey} was used before`))
        return eventId
      })

      return WebhookEndpoints.of({ create, list, update, disable, sendTest })
    })
  )
}
