/**
 * Delivering an endpoint's due deliveries (spec section 6), one round at a time; the endpoint's entity calls this
 * from its fiber. PostgreSQL holds the whole state, and every step is a conditional UPDATE, so two instances of one
 * endpoint (a restart, a shard move) at worst send a delivery twice, never record it wrongly:
 *
 * 1. claim: one statement takes (or keeps) the endpoint's lease for this instance of its entity and reads a batch of
 *    its due PENDING deliveries (`next_at` passed). The lease is one row per endpoint (`webhook_delivery_leases`,
 *    sql/0034_delivery_endpoint_leases.sql), written only when taken or when less than three quarters of it are left,
 *    so a delivery costs two row writes: the fan-out's insert and the outcome's update. Another instance (another
 *    process after a crash or a shard move) waits for the lease to end; a process that dies mid-attempt leaves it to
 *    expire, and every delivery it had not recorded is due again: at least once;
 * 2. send: the body `{eventId, type, tenantId, createdAt, data}` with `data` rendered now (EventData.ts), signed over
 *    `<timestamp>.<body>` with a fresh timestamp (the signature is reused for the same bytes at the same timestamp:
 *    `signedBody`), POSTed with a 10 s limit on Effect's Clock;
 * 3. record: DELIVERED on a 2xx; otherwise the next due time from the retry schedule, or DEAD after the sixth
 *    attempt, again only if the delivery is still the one claimed; the lease ends with the record.
 *
 * A round is one fiber (issue 34): it prepares each attempt in turn (render, sign) and starts its POST with a plain
 * callback (WebhookTransport `send`); the callback frees the attempt's slot and hands its record to the service-wide
 * recorder, also plain callbacks. One watcher fiber per round holds the attempts' 10 s limits on Effect's Clock. A
 * fiber, a semaphore permit, a timeout race and two deferred results per delivery were a fifth of the service's CPU
 * in the deliveries bench (docs/benchmarks.md, issue 34).
 */
import { type Cause, Clock, Context, Effect, Fiber, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { makeBoundedCache } from "../domain/BoundedCache.ts"
import { dueTime, isDue } from "./DeliveryDue.ts"
import { toRfc3339 } from "../domain/Time.ts"
import { Ids } from "../domain/Ids.ts"
import { ownerHoldsLock, ServiceInstance } from "../idempotency/ServiceInstance.ts"
import { countDeliveryUnsafe } from "../observability/ServiceMetrics.ts"
import { Signer } from "../signer/Signer.ts"
import {
  deliveryAttemptsMax,
  deliveryBatchMax,
  deliveryConcurrencyPerEndpoint,
  deliveryTimeoutMillis,
  lastErrorLengthMax,
  roundBatchesMax,
  sharedSignaturesMax,
  WebhookTimings
} from "./DeliverySettings.ts"
import { EventDataRenderer } from "./EventData.ts"
import { retryScheduleSeconds, webhookHeaders, webhookKeyId } from "./EventTypes.ts"
import { type AttemptOutcome, WebhookTransport } from "./WebhookTransport.ts"

const EndpointRow = Schema.Struct({ id: Text, url: Text, status: Text })
type EndpointRow = typeof EndpointRow.Type

/** A claimed delivery with its event; `id` is the identity column, selected as text and decoded to bigint. */
const DueRow = Schema.Struct({
  id: Numeric,
  attempt: Int4,
  due_at: Timestamp,
  event_id: Text,
  tenant_id: Text,
  event_type: Text,
  subject_id: Text,
  data: Schema.Unknown,
  event_created_at: Timestamp
})
type DueRow = typeof DueRow.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const endpointRow = decodeFirstRow(EndpointRow, "WebhookDelivery.deliverDue (endpoint)")
const claimedRows = decodeRows(DueRow, "WebhookDelivery.deliverDue (claim)")
const nextDueRow = decodeSingleRow(Schema.Struct({ next_at: Nullable(Timestamp) }), "WebhookDelivery.deliverDue (next)")

/**
 * A claim renews the endpoint's lease once less than this share of it is left. What is left at a claim must outlast
 * the attempts of the batch it reads (WebhookTimings.claimLeaseMillis: 60 s of the default 90 s; three quarters are
 * 67.5 s), and a busy endpoint writes its lease row once per quarter lease instead of once per batch.
 */
const leaseRenewShare = 0.75

/** A delivery's bytes and their signature (the X-Coffer-Signature value's `sig`). */
interface SignedBody {
  readonly body: Buffer
  readonly signature: string
}

/** What one attempt writes to its delivery row. */
interface AttemptRecord {
  readonly id: string
  /** The attempt count the round claimed it at: the row is written only if it still has it. */
  readonly claimedAttempt: number
  readonly status: "DELIVERED" | "DEAD" | "PENDING"
  readonly attempt: number
  readonly url: string
  readonly responseStatus: number | null
  readonly lastError: string | null
  readonly durationMs: number
  readonly startedAt: number
  readonly nextAt: number | null
  readonly endedAt: number
}

/** Attempt records per UPDATE at most. */
const recordBatchMax = 500

/** One attempt on the wire. */
interface InFlight {
  readonly due: DueRow
  readonly url: string
  readonly startedAt: number
  /** When it counts as unanswered: the start plus the delivery timeout, on Effect's Clock. */
  readonly deadline: number
  /** Aborts the request (its connection is dropped); its callback is then never called. */
  abort: () => void
}

/**
 * A round's attempts, shared by its fiber and the plain callbacks its attempts end in. Every field is read and
 * written in synchronous steps only (one JavaScript thread), so no lock is needed.
 */
interface Round {
  /** In start order, so in deadline order: the watcher looks at the first. */
  readonly inFlight: Set<InFlight>
  slotsFree: number
  /** Attempts started whose record is not written yet. */
  outstanding: number
  /** A record that could not be written: the round dies with it. */
  failure: Cause.Cause<never> | undefined
  /** The round's fiber, waiting for a slot or for its records; called after every change. */
  wake: (() => void) | undefined
  /** The watcher of the attempts' deadlines, while it runs. */
  watcher: Fiber.Fiber<void> | undefined
}

/** What an attempt's outcome means for the record (spec 3, "Webhook delivery statuses"). */
export interface AttemptResult {
  readonly delivered: boolean
  readonly responseStatus: number | null
  readonly lastError: string | null
}

const truncate = (text: string) => text.length > lastErrorLengthMax ? text.slice(0, lastErrorLengthMax) : text

export const classifyOutcome = (outcome: Option.Option<AttemptOutcome>): AttemptResult => {
  if (Option.isNone(outcome)) {
    return { delivered: false, responseStatus: null, lastError: `no response within ${deliveryTimeoutMillis / 1000} s` }
  }
  const value = outcome.value
  if (value._tag === "NoResponse") return { delivered: false, responseStatus: null, lastError: truncate(value.reason) }
  // Node's parser takes any three digits; the record keeps real HTTP statuses only.
  if (value.status < 100 || value.status > 599) {
    return { delivered: false, responseStatus: null, lastError: `invalid HTTP status ${value.status}` }
  }
  if (value.status >= 200 && value.status <= 299) return { delivered: true, responseStatus: value.status, lastError: null }
  return { delivered: false, responseStatus: value.status, lastError: `HTTP ${value.status}` }
}

/**
 * After attempt number `attempt` (1-based) failed at `failedAtMillis`: when the next one is due, or undefined when
 * that was the last (DEAD).
 */
export const nextAttemptAt = (attempt: number, failedAtMillis: number): number | undefined =>
  attempt >= deliveryAttemptsMax ? undefined : failedAtMillis + retryScheduleSeconds[attempt - 1]! * 1000

export class WebhookDelivery extends Context.Service<WebhookDelivery, {
  /**
   * One round for an endpoint: sends up to `deliveryBatchMax` due deliveries if the endpoint is ACTIVE, and answers
   * when its next delivery is due (epoch millis; possibly already), or undefined when there is nothing to wait for
   * (no pending delivery, or the endpoint is DISABLED or gone: re-enabling wakes it).
   */
  readonly deliverDue: (endpointId: string, holder: string) => Effect.Effect<number | undefined>
  /**
   * A new holder: one instance of an endpoint's entity. Its rounds share the endpoint's lease; another holder's round
   * sends nothing until that lease ends.
   */
  readonly newHolder: Effect.Effect<string>
  /**
   * Ends `holder`'s lease on the endpoint at once (an entity deactivated between rounds: its successor need not wait
   * for the lease). Only between rounds: an attempt still in flight would then be sent again alongside.
   */
  readonly release: (endpointId: string, holder: string) => Effect.Effect<void>
}>()("coffer/WebhookDelivery") {
  static readonly layer = Layer.effect(
    WebhookDelivery,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const signer = yield* Signer
      const transport = yield* WebhookTransport
      const renderer = yield* EventDataRenderer
      const ids = yield* Ids
      const instance = yield* ServiceInstance

      /**
       * An attempt's outcome, recorded only if the delivery is still the one claimed. Attempts of every endpoint
       * share one UPDATE of fixed text per flush: `record` queues a record with the callback its round counts it
       * with, and one fiber of this layer writes whatever is queued, statement after statement, while anything is.
       * The ids also go in as an array: with only the join on the record set (which the planner guesses at 100
       * rows) it hashed the record set and scanned the whole table for every flush (3 ms each after 10,000
       * deliveries); `id = ANY(...)` is a primary-key lookup whatever the table's size.
       */
      const writeRecords = (batch: ReadonlyArray<AttemptRecord>) =>
        sql`
          UPDATE webhook_deliveries d SET status = r.status, attempt = r.attempt, url = r.url,
            response_status = r.response_status, last_error = r.last_error, duration_ms = r.duration_ms,
            last_attempt_at = r.last_attempt_at, next_at = r.next_at, leased_until = NULL, updated_at = r.updated_at
          FROM jsonb_to_recordset(${
          JSON.stringify(batch.map((row) => ({
            id: row.id,
            claimed_attempt: row.claimedAttempt,
            status: row.status,
            attempt: row.attempt,
            url: row.url,
            response_status: row.responseStatus,
            last_error: row.lastError,
            duration_ms: row.durationMs,
            last_attempt_at: new Date(row.startedAt).toISOString(),
            next_at: row.nextAt === null ? null : new Date(row.nextAt).toISOString(),
            updated_at: new Date(row.endedAt).toISOString()
          })))
        }::jsonb) AS r(id bigint, claimed_attempt int, status text, attempt int, url text, response_status int,
            last_error text, duration_ms int, last_attempt_at timestamptz, next_at timestamptz, updated_at timestamptz)
          WHERE d.id = r.id AND d.id = ANY(${`{${batch.map((row) => row.id).join(",")}}`}::bigint[])
            AND d.status = 'PENDING' AND d.attempt = r.claimed_attempt`.pipe(Effect.asVoid, Effect.orDie)

      const queued: Array<AttemptRecord> = []
      const written: Array<(failure: Cause.Cause<never> | undefined) => void> = []
      let wakeRecorder: (() => void) | undefined
      const record = (item: AttemptRecord, done: (failure: Cause.Cause<never> | undefined) => void) => {
        queued.push(item)
        written.push(done)
        wakeRecorder?.()
      }
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        if (queued.length === 0) {
          yield* Effect.callback<void>((resume) => {
            wakeRecorder = () => {
              wakeRecorder = undefined
              resume(Effect.void)
            }
            return Effect.sync(() => {
              wakeRecorder = undefined
            })
          })
        }
        const batch = queued.splice(0, recordBatchMax)
        const callbacks = written.splice(0, recordBatchMax)
        const exit = yield* Effect.exit(writeRecords(batch))
        const failure = exit._tag === "Failure" ? exit.cause : undefined
        for (const done of callbacks) done(failure)
      })))

      /**
       * The last signature made for each event at one timestamp (a second), with the bytes it signed: the event's other
       * endpoints, sending it within that second, reuse it when their body is the same bytes (a fan-out to 10
       * endpoints signs once instead of 10 times). Ed25519 is deterministic, so the reused signature is the one each
       * would have made. The body itself is rendered for every attempt (a `TRANSACTION_*` event carries the
       * transaction as it is at that attempt, spec 6), and a different body is signed afresh.
       */
      const signatures = makeBoundedCache<SignedBody>(sharedSignaturesMax)

      /** The body and signature for `due` at `timestamp`; none when the signer is not available (the delivery waits). */
      const signedBody = (due: DueRow, timestamp: string, startedAt: number) =>
        Effect.gen(function*() {
          const data = yield* renderer.render({
            id: due.event_id,
            tenantId: due.tenant_id,
            type: due.event_type,
            subjectId: due.subject_id,
            data: due.data,
            createdAt: due.event_created_at
          })
          const body = Buffer.from(JSON.stringify({
            eventId: due.event_id,
            type: due.event_type,
            tenantId: due.tenant_id,
            createdAt: toRfc3339(due.event_created_at),
            data
          }))
          const key = `${due.event_id}/${timestamp}`
          const signed = signatures.get(key)
          if (signed !== undefined && signed.body.equals(body)) return Option.some(signed)
          const timings = yield* WebhookTimings
          return yield* signer.signWebhook(Buffer.concat([Buffer.from(`${timestamp}.`), body])).pipe(
            Effect.map((signature) => {
              signatures.set(key, { body, signature })
              return Option.some({ body, signature })
            }),
            Effect.catchTag("SignerUnavailable", (error) =>
              // Our outage, not the receiver's: the delivery waits and the attempt is not counted.
              sql`
                UPDATE webhook_deliveries SET next_at = ${new Date(startedAt + timings.signerRetryMillis)}, leased_until = NULL,
                  last_error = ${truncate(`not sent: ${error.message}`)}, updated_at = ${new Date(startedAt)}
                WHERE id = ${due.id}::bigint AND status = 'PENDING' AND attempt = ${due.attempt}`.pipe(
                Effect.as(Option.none<SignedBody>())
              ))
          )
        })

      /**
       * An attempt ended (`outcome` none: no answer within the delivery timeout): its slot is free, its outcome is
       * counted and its record queued. The round's next POST does not wait for the record (the endpoint's lease holds
       * the delivery meanwhile, so nothing can take it twice); the round ends only once all of its records are written.
       * Answers nothing when the attempt had already ended (a timeout and an answer at once).
       */
      const finish = (
        round: Round,
        flight: InFlight,
        outcome: Option.Option<AttemptOutcome>,
        endedAt: number,
        context: Context.Context<never>
      ) => {
        if (!round.inFlight.delete(flight)) return
        round.slotsFree++
        if (round.inFlight.size === 0 && round.watcher !== undefined) {
          // Nothing left to time out: the watcher's sleep ends now, as each attempt's own timeout used to, rather than
          // staying registered on the Clock until its deadline (the testers' virtual clock wakes what is registered).
          round.watcher.interruptUnsafe()
          round.watcher = undefined
        }
        const result = classifyOutcome(outcome)
        const attempt = flight.due.attempt + 1
        const nextAt = result.delivered ? undefined : nextAttemptAt(attempt, endedAt)
        countDeliveryUnsafe(result.delivered ? "delivered" : nextAt === undefined ? "dead" : "retry", context)
        record({
          id: flight.due.id.toString(),
          claimedAttempt: flight.due.attempt,
          status: result.delivered ? "DELIVERED" : nextAt === undefined ? "DEAD" : "PENDING",
          attempt,
          url: flight.url,
          responseStatus: result.responseStatus,
          lastError: result.lastError,
          durationMs: Math.max(0, endedAt - flight.startedAt),
          startedAt: flight.startedAt,
          nextAt: nextAt ?? null,
          endedAt
        }, (failure) => {
          round.outstanding--
          if (failure !== undefined && round.failure === undefined) round.failure = failure
          round.wake?.()
        })
        round.wake?.()
      }

      /**
       * The attempts' 10 s limits, on Effect's Clock: sleeps until the oldest attempt's deadline, ends every attempt
       * past its own (aborted, recorded as unanswered), and stops once none is in flight (the round starts it again
       * with its next attempt). Deadlines follow start order, so the oldest attempt is the first to reach its own.
       */
      const watch = (round: Round, clock: Clock.Clock, context: Context.Context<never>): Effect.Effect<void> =>
        Effect.gen(function*() {
          for (;;) {
            const oldest = round.inFlight.values().next()
            if (oldest.done === true) {
              round.watcher = undefined
              return
            }
            const now = clock.currentTimeMillisUnsafe()
            if (oldest.value.deadline > now) {
              yield* Effect.sleep(oldest.value.deadline - now)
              continue
            }
            for (const flight of round.inFlight) {
              if (flight.deadline > now) break
              flight.abort()
              finish(round, flight, Option.none(), now, context)
            }
          }
        })

      /** Waits until `ready` holds, woken by the round's callbacks; dies with a record that could not be written. */
      const until = (round: Round, ready: () => boolean): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (round.failure !== undefined) return Effect.failCause(round.failure)
          if (ready()) return Effect.void
          return Effect.callback<void>((resume) => {
            round.wake = () => {
              if (round.failure !== undefined) {
                round.wake = undefined
                resume(Effect.failCause(round.failure))
              } else if (ready()) {
                round.wake = undefined
                resume(Effect.void)
              }
            }
            return Effect.sync(() => {
              round.wake = undefined
            })
          })
        })

      /**
       * A delivery deliverDue claimed, once a slot is free: rendered, signed and POSTed; it ends in `finish`. A
       * delivery that cannot be signed now waits (`signedBody`) and frees its slot at once.
       */
      const attemptOne = (
        round: Round,
        endpoint: EndpointRow,
        due: DueRow,
        clock: Clock.Clock,
        context: Context.Context<never>
      ) =>
        Effect.gen(function*() {
          yield* until(round, () => round.slotsFree > 0)
          round.slotsFree--
          const startedAt = clock.currentTimeMillisUnsafe()
          const timestamp = String(Math.floor(startedAt / 1000))
          const signed = yield* signedBody(due, timestamp, startedAt)
          if (Option.isNone(signed)) {
            round.slotsFree++
            return
          }
          const { body, signature } = signed.value
          const flight: InFlight = {
            due,
            url: endpoint.url,
            startedAt,
            deadline: startedAt + deliveryTimeoutMillis,
            abort: () => undefined
          }
          round.inFlight.add(flight)
          round.outstanding++
          if (round.watcher === undefined) round.watcher = yield* Effect.forkChild(watch(round, clock, context))
          const abort = transport.send({
            url: endpoint.url,
            headers: {
              "content-type": "application/json",
              "user-agent": "Coffer-Webhooks/1",
              [webhookHeaders.eventId]: due.event_id,
              [webhookHeaders.eventType]: due.event_type,
              [webhookHeaders.timestamp]: timestamp,
              [webhookHeaders.signature]: `keyId=${webhookKeyId},sig=${signature}`
            },
            body
          }, (outcome) => finish(round, flight, Option.some(outcome), clock.currentTimeMillisUnsafe(), context))
          flight.abort = abort
        })

      /**
       * Up to `deliveryBatchMax` due deliveries of the endpoint, in one statement of fixed text, if `holder` holds the
       * endpoint's lease: it takes the lease when it is free or has ended, renews its own once less than
       * `leaseRenewShare` is left, and otherwise writes nothing. Another holder's live lease answers no rows. Deliveries
       * this round already took (`taken`, attempts perhaps not recorded yet) are left out.
       */
      const claim = (endpointId: string, holder: string, taken: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const timings = yield* WebhookTimings
          const now = yield* Clock.currentTimeMillis
          const claimed = yield* sql`
            WITH taken_lease AS (
              INSERT INTO webhook_delivery_leases AS lease (endpoint_id, holder, instance, leased_until)
              SELECT ${endpointId}, ${holder}, ${instance.id}, ${new Date(now + timings.claimLeaseMillis)}
              -- Not even tried while this holder's lease is fresh or another's lasts: a tried upsert locks the row
              -- (a WAL record) even when it changes nothing. The conflict's condition below stays the authority.
              -- Another holder's lease lasts only while its process holds its instance lock (sql/0034): after a kill -9
              -- the endpoint is taken over as soon as its entity runs elsewhere. The liveness read (pg_locks) is the costliest
              -- condition, so PostgreSQL evaluates it last, only for a lease another holder still has.
              WHERE NOT EXISTS (
                SELECT 1 FROM webhook_delivery_leases c WHERE c.endpoint_id = ${endpointId}
                  AND (c.holder = ${holder} AND c.leased_until >= ${new Date(now + timings.claimLeaseMillis * leaseRenewShare)}
                    OR c.holder <> ${holder} AND c.leased_until > ${new Date(now)}
                      AND ${ownerHoldsLock(sql, sql.literal("c.instance"))}))
              ON CONFLICT (endpoint_id) DO UPDATE
                SET holder = excluded.holder, instance = excluded.instance, leased_until = excluded.leased_until
              WHERE lease.leased_until <= ${new Date(now)}
                OR (lease.holder = excluded.holder AND lease.leased_until < ${new Date(now + timings.claimLeaseMillis * leaseRenewShare)})
                OR (lease.holder <> excluded.holder AND NOT ${ownerHoldsLock(sql, sql.literal("lease.instance"))})
              RETURNING lease.endpoint_id
            ), held AS (
              SELECT endpoint_id FROM taken_lease
              UNION ALL
              SELECT endpoint_id FROM webhook_delivery_leases
              WHERE endpoint_id = ${endpointId} AND holder = ${holder}
                AND leased_until >= ${new Date(now + timings.claimLeaseMillis * leaseRenewShare)}
            )
            SELECT d.id::text AS id, d.attempt, d.next_at AS due_at, e.id AS event_id, e.tenant_id, e.event_type,
              e.subject_id, e.data, e.created_at AS event_created_at
            FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
            WHERE EXISTS (SELECT 1 FROM held)
              AND d.endpoint_id = ${endpointId} AND d.status = 'PENDING' AND ${isDue(sql, "d", new Date(now))}
              AND d.id <> ALL (${`{${taken.join(",")}}`}::bigint[])
            ORDER BY d.next_at, d.id
            LIMIT ${deliveryBatchMax}`.pipe(Effect.flatMap(claimedRows))
          return claimed
        })

      /**
       * A round: batches of due deliveries, at most `deliveryConcurrencyPerEndpoint` POSTs in flight, started in the
       * claim's order. The next batch is claimed (with the endpoint read again, so a disabled or changed endpoint stops
       * or moves within a batch, as before) once every delivery of the current one has started: the last POSTs of a
       * batch overlap the next claim instead of leaving the endpoint idle in between (WebhookTimings.claimLeaseMillis
       * allows for that; the next claim leaves out the deliveries this round took, whose records may not be written
       * yet). The round ends after a short batch or `roundBatchesMax`, once every attempt's record is written; an
       * interrupted round aborts its attempts in flight (their deliveries are sent again once the lease ends).
       * `holder` is the entity instance whose lease the round uses; while another holder's lease lasts, the round
       * sends nothing and answers when it ends.
       */
      const deliverDue = Effect.fn("WebhookDelivery.deliverDue")(function*(endpointId: string, holder: string) {
        const clock = yield* Clock.Clock
        const context = yield* Effect.context<never>()
        const round: Round = {
          inFlight: new Set(),
          slotsFree: deliveryConcurrencyPerEndpoint,
          outstanding: 0,
          failure: undefined,
          wake: undefined,
          watcher: undefined
        }
        const taken: Array<string> = []
        const sendAll = Effect.gen(function*() {
          for (let batch = 0; batch < roundBatchesMax; batch++) {
            const endpoint = yield* sql`
              SELECT id, url, status FROM webhook_endpoints WHERE id = ${endpointId}`.pipe(Effect.flatMap(endpointRow))
            if (endpoint === undefined || endpoint.status !== "ACTIVE") {
              if (batch === 0) return true
              break
            }
            const due = yield* claim(endpointId, holder, taken)
            if (due.length === 0) break
            for (const row of due) taken.push(row.id.toString())
            for (const row of due) yield* attemptOne(round, endpoint, row, clock, context)
            if (due.length < deliveryBatchMax) break
          }
          yield* until(round, () => round.outstanding === 0)
          return false
        }).pipe(Effect.onExit(() =>
          Effect.suspend(() => {
            // Interrupted or failed: the attempts still in flight are dropped, as their fibers were.
            for (const flight of round.inFlight) flight.abort()
            round.inFlight.clear()
            const watcher = round.watcher
            round.watcher = undefined
            return watcher === undefined ? Effect.void : Fiber.interrupt(watcher)
          })
        ))
        const inactive = yield* sendAll
        if (inactive) return undefined
        // Another holder's live lease (a process that died mid-attempt, or still finishing) holds the endpoint's due
        // deliveries until it ends.
        const next = yield* sql`
          SELECT CASE WHEN min(${dueTime(sql, "d")}) IS NULL THEN NULL ELSE GREATEST(min(${dueTime(sql, "d")}),
            (SELECT l.leased_until FROM webhook_delivery_leases l WHERE l.endpoint_id = ${endpointId} AND l.holder <> ${holder}))
            END AS next_at
          FROM webhook_deliveries d
          WHERE d.endpoint_id = ${endpointId} AND d.status = 'PENDING'`.pipe(Effect.flatMap(nextDueRow))
        return next.next_at === null ? undefined : next.next_at.getTime()
      }, (effect) => Effect.orDie(effect))

      const release = Effect.fn("WebhookDelivery.release")(function*(endpointId: string, holder: string) {
        const now = yield* Clock.currentTimeMillis
        yield* sql`
          UPDATE webhook_delivery_leases SET leased_until = ${new Date(now)}
          WHERE endpoint_id = ${endpointId} AND holder = ${holder} AND leased_until > ${new Date(now)}`
      }, (effect) => Effect.orDie(effect))

      return WebhookDelivery.of({ deliverDue, newHolder: ids.uuidV7, release })
    })
  )
}
