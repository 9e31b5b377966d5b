/**
 * Delivery and retry rules (spec section 6, section 3 "Webhook delivery statuses") under TestClock: the endpoint
 * entity runs on the cluster's TestRunner, attempts go over real HTTP to a local receiver, and every time the
 * service reads (the X-Coffer-Timestamp header, the record's times) comes from the TestClock, so the schedule is
 * asserted to the second.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { sweepDue, dispatchPending, fanOutBatch } from "../../src/webhooks/Dispatcher.ts"
import { EventDataRenderer } from "../../src/webhooks/EventData.ts"
import { retryScheduleSeconds } from "../../src/webhooks/EventTypes.ts"
import { WebhookDeliveries } from "../../src/webhooks/WebhookDeliveries.ts"
import { WebhookDelivery } from "../../src/webhooks/WebhookDelivery.ts"
import { ServiceInstance } from "../../src/idempotency/ServiceInstance.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { SqlClient } from "effect/sql"
import { recordEvent } from "../../src/outbox/Outbox.ts"
import { WebhookEndpoints } from "../../src/webhooks/WebhookEndpoints.ts"
import { baseLayer, deliveryRows, deliveryWhen, runnerLayer, setup, testSigner } from "./fixtures/DeliveryFixtures.ts"
import { makeReceiver, realSleep, verifyDelivery } from "./fixtures/Receiver.ts"

const publicKey = Effect.flatMap(Effect.service(Signer), (signer) => Effect.orDie(signer.webhookPublicKey()))

describe("webhook delivery under TestClock", () => {
  it.effect("retries after 1m, 5m, 30m, 2h, 12h; the sixth failure is DEAD; every attempt signed afresh", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver(() => 500)
      const { endpointId, eventIds } = yield* setup(receiver.url)
      const startMillis = yield* Clock.currentTimeMillis
      yield* dispatchPending
      yield* receiver.waitForRequests(1)
      const first = yield* deliveryWhen(endpointId, "first attempt recorded", (row) => row.attempt === 1)
      assert.strictEqual(first.status, "PENDING")
      assert.strictEqual(first.response_status, 500)
      assert.strictEqual(first.last_error, "HTTP 500")
      assert.strictEqual(first.duration_ms, 0)
      assert.strictEqual(first.last_attempt_at!.getTime(), startMillis)
      assert.strictEqual(first.next_at!.getTime(), startMillis + 60_000)

      let attemptAt = startMillis
      for (const [index, delaySeconds] of retryScheduleSeconds.entries()) {
        // One second early nothing happens...
        yield* TestClock.adjust(Duration.seconds(delaySeconds - 1))
        yield* realSleep(150)
        assert.strictEqual(receiver.requests.length, index + 1, `no attempt before ${delaySeconds} s`)
        // ...and on the second the next attempt goes out.
        yield* TestClock.adjust("1 second")
        attemptAt += delaySeconds * 1000
        yield* receiver.waitForRequests(index + 2)
        const row = yield* deliveryWhen(endpointId, `attempt ${index + 2}`, (candidate) => candidate.attempt === index + 2)
        assert.strictEqual(row.last_attempt_at!.getTime(), attemptAt)
        if (index + 2 < 6) {
          assert.strictEqual(row.status, "PENDING")
          assert.strictEqual(row.next_at!.getTime(), attemptAt + retryScheduleSeconds[index + 1]! * 1000)
        }
      }
      const dead = (yield* deliveryRows(endpointId))[0]!
      assert.strictEqual(dead.status, "DEAD")
      assert.strictEqual(dead.attempt, 6)
      assert.isNull(dead.next_at)
      assert.strictEqual(dead.response_status, 500)

      // X-Coffer-Timestamp is fresh on every attempt: 0, 1m, 6m, 36m, 2h36m, 14h36m after the first.
      const offsets = receiver.requests.map((request) =>
        Number(request.headers["x-coffer-timestamp"]) - Math.floor(startMillis / 1000)
      )
      assert.deepStrictEqual(offsets, [0, 60, 360, 2160, 9360, 52560])
      const key = yield* publicKey
      for (const request of receiver.requests) {
        const verified = verifyDelivery(request, key)
        assert.isTrue(verified.ok, JSON.stringify(verified))
        if (verified.ok) assert.strictEqual(verified.body.eventId, eventIds[0])
      }
      // DEAD means no more automatic attempts.
      yield* TestClock.adjust("1 day")
      yield* realSleep(200)
      assert.strictEqual(receiver.requests.length, 6)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())), 60_000)

  it.effect("a receiver that answers 500 then 200: DELIVERED on the second attempt, a minute later", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver((_, index) => index === 0 ? 500 : 200)
      const { endpointId } = yield* setup(receiver.url)
      const startMillis = yield* Clock.currentTimeMillis
      yield* dispatchPending
      yield* deliveryWhen(endpointId, "first attempt", (row) => row.attempt === 1)
      yield* TestClock.adjust("1 minute")
      const delivered = yield* deliveryWhen(endpointId, "delivered", (row) => row.status === "DELIVERED")
      assert.strictEqual(delivered.attempt, 2)
      assert.strictEqual(delivered.response_status, 200)
      assert.isNull(delivered.last_error)
      assert.isNull(delivered.next_at)
      assert.strictEqual(delivered.last_attempt_at!.getTime(), startMillis + 60_000)
      yield* TestClock.adjust("1 day")
      yield* realSleep(200)
      assert.strictEqual(receiver.requests.length, 2)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("no answer within 10 s is a failure (responseStatus null), retried after a minute", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver((_, index) => index === 0 ? "hang" : 204)
      const { endpointId } = yield* setup(receiver.url)
      const startMillis = yield* Clock.currentTimeMillis
      yield* dispatchPending
      yield* receiver.waitForRequests(1)
      yield* TestClock.adjust("9 seconds")
      yield* realSleep(150)
      const inFlight = (yield* deliveryRows(endpointId))[0]!
      assert.strictEqual(inFlight.attempt, 0, "still waiting at 9 s")
      yield* TestClock.adjust("1 second")
      const timedOut = yield* deliveryWhen(endpointId, "timeout recorded", (row) => row.attempt === 1)
      assert.strictEqual(timedOut.status, "PENDING")
      assert.isNull(timedOut.response_status)
      assert.strictEqual(timedOut.last_error, "no response within 10 s")
      assert.strictEqual(timedOut.duration_ms, 10_000)
      assert.strictEqual(timedOut.last_attempt_at!.getTime(), startMillis)
      assert.strictEqual(timedOut.next_at!.getTime(), startMillis + 10_000 + 60_000)
      yield* TestClock.adjust("1 minute")
      const delivered = yield* deliveryWhen(endpointId, "delivered", (row) => row.status === "DELIVERED")
      assert.strictEqual(delivered.attempt, 2)
      assert.strictEqual(delivered.response_status, 204)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("a refused connection is a failure with responseStatus null and the reason in lastError", () =>
    Effect.gen(function*() {
      // A port nothing listens on: take one from a receiver, then close it.
      const url = yield* Effect.scoped(Effect.map(makeReceiver(), (receiver) => receiver.url))
      const { endpointId } = yield* setup(url)
      yield* dispatchPending
      const failed = yield* deliveryWhen(endpointId, "failure recorded", (row) => row.attempt === 1)
      assert.strictEqual(failed.status, "PENDING")
      assert.isNull(failed.response_status)
      assert.match(failed.last_error!, /ECONNREFUSED/)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("resend of a DEAD delivery: PENDING with counters reset, sent at once, DELIVERED on attempt 1", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const { tenantId, endpointId, eventIds } = yield* setup(receiver.url)
      // Fanned out without waking anyone, then marked DEAD as six failures would leave it.
      yield* fanOutBatch
      const sql = yield* SqlClient.SqlClient
      const now = new Date(yield* Clock.currentTimeMillis)
      yield* sql`UPDATE webhook_deliveries SET status = 'DEAD', attempt = 6, response_status = 500, last_error = 'HTTP 500',
        duration_ms = 3, last_attempt_at = ${now}, next_at = NULL WHERE endpoint_id = ${endpointId}`
      const requeued = yield* (yield* WebhookDeliveries).resend(tenantId, eventIds[0]!)
      assert.strictEqual(requeued, 1)
      yield* receiver.waitForRequests(1)
      const delivered = yield* deliveryWhen(endpointId, "delivered", (row) => row.status === "DELIVERED")
      assert.strictEqual(delivered.attempt, 1, "the attempt counter was reset")
      assert.strictEqual(delivered.last_attempt_at!.getTime(), now.getTime(), "immediately, not on a schedule")
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("an attempt lost with its process (restart mid-request) is due again after its lease and sent again", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver((_, index) => index === 0 ? "hang" : 200)
      const startMillis = yield* Clock.currentTimeMillis
      // The first "process" takes the delivery and dies while the receiver has not answered.
      const { endpointId } = yield* Effect.gen(function*() {
        const ids = yield* setup(receiver.url)
        yield* dispatchPending
        yield* receiver.waitForRequests(1)
        return ids
      }).pipe(Effect.provide(runnerLayer))
      const leased = (yield* deliveryRows(endpointId))[0]!
      assert.strictEqual(leased.status, "PENDING")
      assert.strictEqual(leased.attempt, 0, "the lost attempt is not counted")
      assert.strictEqual(leased.next_at!.getTime(), startMillis, "still due since the fan-out")
      assert.isNull(leased.leased_until, "no lease on the delivery itself")
      const sql = yield* SqlClient.SqlClient
      const [lease] = yield* sql<{ leased_until: Date }>`
        SELECT leased_until FROM webhook_delivery_leases WHERE endpoint_id = ${endpointId}`
      assert.strictEqual(lease!.leased_until.getTime(), startMillis + 90_000, "the endpoint leased for 90 s")
      // A new "process": its sweeper finds the delivery due and wakes the endpoint, whose new instance sends nothing
      // while the dead one's lease lasts.
      yield* Effect.gen(function*() {
        assert.include(yield* sweepDue, endpointId)
        yield* realSleep(200)
        yield* TestClock.adjust("89 seconds")
        yield* realSleep(300)
        assert.strictEqual(receiver.requests.length, 1, "nothing sent again while the lease lasts")
        yield* TestClock.adjust("1 second")
        const delivered = yield* deliveryWhen(endpointId, "delivered", (row) => row.status === "DELIVERED")
        assert.strictEqual(delivered.attempt, 1)
        assert.strictEqual(delivered.last_attempt_at!.getTime(), startMillis + 90_000)
      }).pipe(Effect.provide(runnerLayer))
      // At least once: the receiver saw it twice, which the event id lets it de-duplicate.
      assert.strictEqual(receiver.requests.length, 2)
      assert.strictEqual(receiver.requests[0]!.headers["x-coffer-event-id"], receiver.requests[1]!.headers["x-coffer-event-id"])
    }).pipe(Effect.provide(baseLayer())))

  it.effect("two instances delivering one endpoint at once send each delivery once (one holds the lease)", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const { endpointId } = yield* setup(receiver.url, 8)
      const startMillis = yield* Clock.currentTimeMillis
      yield* fanOutBatch
      const delivery = yield* WebhookDelivery
      const holders = [yield* delivery.newHolder, yield* delivery.newHolder]
      const nexts = yield* Effect.all(holders.map((holder) => delivery.deliverDue(endpointId, holder)), { concurrency: 2 })
      // The one that sent them has nothing left to wait for; the other, if it looked before they were all recorded,
      // waits for that lease to end.
      assert.include(nexts, undefined)
      for (const next of nexts) assert.include([undefined, startMillis + 90_000], next)
      const rows = yield* deliveryRows(endpointId)
      assert.strictEqual(rows.length, 8)
      for (const row of rows) {
        assert.strictEqual(row.status, "DELIVERED")
        assert.strictEqual(row.attempt, 1)
      }
      assert.strictEqual(receiver.requests.length, 8)
      assert.strictEqual(new Set(receiver.requests.map((request) => request.headers["x-coffer-event-id"])).size, 8)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("a lease whose process is gone (kill -9) is taken over at once; a live process's lease is waited for", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const { endpointId } = yield* setup(receiver.url, 2)
      const startMillis = yield* Clock.currentTimeMillis
      yield* fanOutBatch
      const sql = yield* SqlClient.SqlClient
      const delivery = yield* WebhookDelivery
      const live = (yield* ServiceInstance).id
      // Another holder in this (live) process holds the endpoint for 90 s: nothing is sent until it ends.
      yield* sql`INSERT INTO webhook_delivery_leases (endpoint_id, holder, instance, leased_until)
        VALUES (${endpointId}, ${yield* delivery.newHolder}, ${live}, ${new Date(startMillis + 90_000)})`
      const waited = yield* delivery.deliverDue(endpointId, yield* delivery.newHolder)
      assert.strictEqual(waited, startMillis + 90_000, "a live process's lease is waited for")
      assert.strictEqual(receiver.requests.length, 0)
      // The same lease, held by a process that no longer exists (no advisory lock, no heartbeat): taken over now.
      yield* sql`UPDATE webhook_delivery_leases SET instance = ${"00000000-0000-7000-8000-00000000dead"}
        WHERE endpoint_id = ${endpointId}`
      const next = yield* delivery.deliverDue(endpointId, yield* delivery.newHolder)
      assert.isUndefined(next)
      const rows = yield* deliveryRows(endpointId)
      assert.deepStrictEqual(rows.map((row) => row.status), ["DELIVERED", "DELIVERED"])
      assert.strictEqual(receiver.requests.length, 2)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("fan-out is idempotent: dispatching again creates no second delivery", () =>
    Effect.gen(function*() {
      const { tenantId, endpointId } = yield* setup("http://127.0.0.1:9/unused", 3)
      const first = yield* fanOutBatch
      assert.strictEqual(first.events, 3)
      assert.deepStrictEqual(first.endpoints, [endpointId])
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE outbox_events SET dispatched_at = NULL WHERE tenant_id = ${tenantId}`
      const again = yield* fanOutBatch
      assert.strictEqual(again.events, 3)
      assert.deepStrictEqual(again.endpoints, [])
      assert.strictEqual((yield* deliveryRows(endpointId)).length, 3)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("events created while an endpoint was disabled are not back-filled, even when fanned out after re-enabling", () =>
    Effect.gen(function*() {
      const { tenantId, endpointId } = yield* setup("http://127.0.0.1:9/unused", 0)
      const endpoints = yield* WebhookEndpoints
      const event = (subjectId: string) =>
        recordEvent({ tenantId, type: "WALLET_CREATED", subjectId, dedupeKey: "created", data: { walletId: subjectId } })
      yield* endpoints.update(tenantId, endpointId, { active: false })
      yield* TestClock.adjust("1 second")
      yield* event("while-disabled")
      yield* TestClock.adjust("1 second")
      yield* endpoints.update(tenantId, endpointId, { active: true })
      yield* TestClock.adjust("1 second")
      yield* event("after-enabling")
      // Neither was dispatched yet: the dispatcher lagged behind the re-enabling.
      const batch = yield* fanOutBatch
      assert.isAtLeast(batch.events, 2)
      const sql = yield* SqlClient.SqlClient
      const delivered = yield* sql<{ subject_id: string }>`
        SELECT e.subject_id FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
        WHERE d.endpoint_id = ${endpointId}`
      assert.deepStrictEqual(delivered.map((row) => row.subject_id), ["after-enabling"])
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer())))

  it.effect("without a signer (preproduction) nothing is sent and the attempt is not counted; it waits", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const { endpointId } = yield* setup(receiver.url)
      const startMillis = yield* Clock.currentTimeMillis
      yield* dispatchPending
      const waiting = yield* deliveryWhen(endpointId, "not sent", (row) => row.last_error !== null)
      assert.strictEqual(waiting.status, "PENDING")
      assert.strictEqual(waiting.attempt, 0)
      assert.strictEqual(waiting.last_error, "not sent: signer is disabled in this environment")
      assert.strictEqual(waiting.next_at!.getTime(), startMillis + 60_000)
      assert.strictEqual(receiver.requests.length, 0)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer({ signer: Signer.layerDisabled }))))

  it.effect("an event sent to two endpoints in the same second is signed once: the same bytes and signature to both", () => {
    let signatures = 0
    const countingSigner = Layer.effect(Signer)(Effect.map(Effect.service(Signer), (signer) =>
      Signer.of({
        ...signer,
        signWebhook: (message) => Effect.flatMap(Effect.sync(() => signatures++), () => signer.signWebhook(message))
      }))).pipe(Layer.provide(testSigner))
    return Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const { tenantId, endpointId } = yield* setup(`${receiver.url}/first`)
      const second = yield* (yield* WebhookEndpoints).create(tenantId, { url: `${receiver.url}/second` })
      yield* dispatchPending
      yield* deliveryWhen(endpointId, "first endpoint delivered", (row) => row.status === "DELIVERED")
      yield* deliveryWhen(second.id, "second endpoint delivered", (row) => row.status === "DELIVERED")
      assert.deepStrictEqual(receiver.requests.map((request) => request.path).sort(), ["/hooks/first", "/hooks/second"])
      const [one, two] = receiver.requests
      assert.isTrue(one!.rawBody.equals(two!.rawBody))
      assert.strictEqual(one!.headers["x-coffer-signature"], two!.headers["x-coffer-signature"])
      assert.strictEqual(one!.headers["x-coffer-timestamp"], two!.headers["x-coffer-timestamp"])
      const key = yield* publicKey
      for (const request of receiver.requests) assert.isTrue(verifyDelivery(request, key).ok)
      assert.strictEqual(signatures, 1)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer({ signer: countingSigner })))
  })

  it.effect("data is rendered at every attempt (the TRANSACTION_* seam), and each body is signed as sent", () => {
    let renders = 0
    const renderer = Layer.succeed(EventDataRenderer)({
      render: (event) => Effect.sync(() => ({ ...(event.data as object), render: ++renders }))
    })
    return Effect.gen(function*() {
      const receiver = yield* makeReceiver((_, index) => index === 0 ? 500 : 200)
      const { endpointId } = yield* setup(receiver.url)
      yield* dispatchPending
      yield* deliveryWhen(endpointId, "first attempt", (row) => row.attempt === 1)
      yield* TestClock.adjust("1 minute")
      yield* deliveryWhen(endpointId, "delivered", (row) => row.status === "DELIVERED")
      const key = yield* publicKey
      const bodies = receiver.requests.map((request) => {
        const verified = verifyDelivery(request, key)
        assert.isTrue(verified.ok)
        return verified.ok ? verified.body : undefined
      })
      assert.deepStrictEqual(bodies.map((body) => body.data.render), [1, 2])
      assert.strictEqual(bodies[0].eventId, bodies[1].eventId)
    }).pipe(Effect.provide(runnerLayer), Effect.provide(baseLayer({ renderer })))
  })
})
