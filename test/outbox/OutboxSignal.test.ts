/**
 * The dispatcher is woken after an event's commit, by the process that committed it, and no transaction that writes
 * an event sends a NOTIFY (src/outbox/OutboxSignal.ts says why). The service's own paths are checked with the
 * dispatcher's poll and sweep an hour apart, so an event that did not wake it stays undispatched.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Queue, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidV7 } from "../../src/domain/Ids.ts"
import { Outbox, type OutboxEvent } from "../../src/outbox/Outbox.ts"
import { outboxChannel, OutboxSignal } from "../../src/outbox/OutboxSignal.ts"
import { WebhookTimings } from "../../src/webhooks/DeliverySettings.ts"
import { call, ethWalletOf, fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

const outboxLayer = Outbox.layer.pipe(
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.orDie
)

const tenantRow = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const id = yield* uuidV7
  yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${id}, 'signal', '{}', now())`
  return id
})

const event = (tenantId: string, subjectId: string): OutboxEvent => ({
  tenantId,
  type: "WALLET_CREATED",
  subjectId,
  dedupeKey: "created",
  data: {}
})

/** Whether the queue holds a wake now (taking it). */
const woken = (queue: Queue.Queue<void>) => Effect.map(Queue.poll(queue), Option.isSome)

describe("OutboxSignal", () => {
  layer(outboxLayer, { excludeTestServices: true })("the signal around a transaction", (it) => {
    it.effect("a subscribed dispatcher is woken once the transaction commits, not before, and not by a rollback", () =>
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outbox = yield* Outbox
        const wakes = yield* (yield* OutboxSignal).subscribe
        const tenantId = yield* tenantRow

        const inTransaction = yield* sql.withTransaction(Effect.gen(function*() {
          assert.isTrue(yield* outbox.record(event(tenantId, "committed")))
          return yield* woken(wakes)
        }))
        assert.isFalse(inTransaction, "no wake before the commit")
        assert.isTrue(yield* woken(wakes), "a wake after the commit")

        const rolledBack = yield* sql.withTransaction(Effect.gen(function*() {
          yield* outbox.record(event(tenantId, "rolled-back"))
          return yield* Effect.fail("roll back" as const)
        })).pipe(Effect.flip)
        assert.strictEqual(rolledBack, "roll back")
        assert.isFalse(yield* woken(wakes), "a rolled-back event wakes nothing")

        // A statement with the event in it (recordWhen) wakes once its caller says it ran.
        const fragment = yield* outbox.recordWhen(event(tenantId, "in-statement"), sql`true`)
        yield* sql`WITH e AS (${fragment}) SELECT count(*) FROM e`
        assert.isFalse(yield* woken(wakes), "building and running the fragment wakes nothing by itself")
        yield* outbox.committed
        assert.isTrue(yield* woken(wakes))
      })))

    it.effect("with no dispatcher in this process, one NOTIFY follows the commit; none is sent in the transaction", () =>
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const pg = yield* PgClient.PgClient
        const outbox = yield* Outbox
        const tenantId = yield* tenantRow
        // Answers once PostgreSQL confirmed the LISTEN.
        const received = yield* pg.listen(outboxChannel)

        yield* sql.withTransaction(Effect.gen(function*() {
          yield* outbox.record(event(tenantId, "a"))
          yield* outbox.record(event(tenantId, "b"))
        }))
        const first = yield* Queue.take(received).pipe(Effect.timeout("5 seconds"))
        assert.strictEqual(first.payload, "")
        yield* Effect.sleep("300 millis")
        assert.deepStrictEqual(yield* Queue.clear(received), [], "the two events of one commit: one NOTIFY")

        // A dispatcher here: the commit wakes it and announces nothing.
        const wakes = yield* (yield* OutboxSignal).subscribe
        yield* Effect.sleep("200 millis")
        yield* Queue.clear(received)
        yield* sql.withTransaction(outbox.record(event(tenantId, "c")))
        assert.isTrue(yield* woken(wakes))
        yield* Effect.sleep("300 millis")
        assert.deepStrictEqual(yield* Queue.clear(received), [], "no NOTIFY: not from the insert, not after it")
      })))
  })
})

const hourApart = Layer.succeed(WebhookTimings)({
  claimLeaseMillis: 90_000,
  sweepIntervalMillis: 3_600_000,
  dispatchPollIntervalMillis: 3_600_000,
  signerRetryMillis: 60_000,
  roundFailureRetryMillis: 5_000
})

/** Waits (real time) until every event about `subjectId` is dispatched; fails after `withinMillis`. */
const dispatchedWithin = (subjectId: string, withinMillis: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const deadline = Date.now() + withinMillis
    for (;;) {
      const [row] = yield* sql<{ total: number; pending: number }>`
        SELECT count(*)::int AS total, count(*) FILTER (WHERE dispatched_at IS NULL)::int AS pending
        FROM outbox_events WHERE subject_id = ${subjectId}`
      if (row!.total > 0 && row!.pending === 0) return row!.total
      if (Date.now() > deadline) return assert.fail(`events of ${subjectId}: ${row!.pending} of ${row!.total} undispatched`)
      yield* Effect.sleep("50 millis")
    }
  })

layer(makeTestAppLayer().pipe(Layer.provide(hourApart)), { excludeTestServices: true })(
  "the service's own events wake its dispatcher (poll and sweep an hour apart)",
  (it) => {
    it.effect("a wallet's creation, a transfer's statement and a withdrawal's steps", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* ethWalletOf(tenant, "signal-payer")
        const payee = yield* ethWalletOf(tenant, "signal-payee")
        // Outbox.record in the provisioning's transaction.
        yield* dispatchedWithin(payer, 5_000)

        yield* fund(tenant, payer, "ETH_SEPOLIA_ETH", 10n ** 18n)
        const transfer = yield* call(tenant, "POST", "/v1/transactions", {
          assetId: "ETH_SEPOLIA_ETH",
          source: { type: "WALLET", id: payer },
          destination: { type: "WALLET", id: payee },
          amountRaw: "100",
          externalTxId: "signal-transfer"
        })
        assert.strictEqual(transfer.status, 202, transfer.text)
        yield* dispatchedWithin(transfer.json.transactionId, 5_000)

        const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
          assetId: "ETH_SEPOLIA_ETH",
          source: { type: "WALLET", id: payer },
          destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x000000000000000000000000000000000000dEaD" } },
          amountRaw: (10n ** 16n).toString(),
          externalTxId: "signal-withdrawal"
        })
        assert.strictEqual(withdrawal.status, 202, withdrawal.text)
        const id = withdrawal.json.transactionId as string
        // Its steps (queued, signing, broadcast) each record their event in the transition's own statement.
        for (let attempt = 0; ; attempt++) {
          const current = yield* call(tenant, "GET", `/v1/transactions/${id}`)
          if (current.json.status === "CONFIRMING") break
          if (attempt > 150) assert.fail(`withdrawal stayed ${current.json.status}`)
          yield* Effect.sleep("100 millis")
        }
        const events = yield* dispatchedWithin(id, 5_000)
        assert.isAtLeast(events, 4, "created, queued, signing, broadcast")
      }), 60_000)
  }
)
