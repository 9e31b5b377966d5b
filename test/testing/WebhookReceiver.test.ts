/**
 * The kit's webhook receiver misbehaving on request, and the service's answer to it (docs/webhooks.md): an endpoint
 * that answers after the 10 s timeout fails the attempt, which is retried per schedule counted from the timeout; an
 * endpoint that has gone away (connections refused) is retried per schedule and is DEAD after the sixth failure, and
 * the event is delivered once it is back and resent. Only the kit and the public interfaces.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

describe("webhook receiver faults", () => {
  it.live("slow answers: an attempt not answered within 10 s fails and is retried 1 m, then 5 m after its timeout", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      receiver.answerAfter(15_000)
      const endpoint = yield* tenant.client.webhooks.create({ payload: { url: receiver.url } })
      const test = yield* tenant.client.webhooks.test({ params: { id: endpoint.id } })
      const start = scenario.now()
      yield* scenario.advance("100 seconds")
      // Attempt 1 at 0 s times out at 10 s; attempt 2 one minute later, at 70 s, times out at 80 s.
      assert.deepStrictEqual(receiver.deliveries.map((delivery) => (delivery.atMillis - start) / 1000), [0, 70])
      assert.deepStrictEqual(receiver.deliveries.map((delivery) => delivery.answered), ["no answer", "no answer"])
      const pending = (yield* tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } })).items
      assert.strictEqual(pending.length, 1)
      assert.strictEqual(pending[0]!.status, "PENDING")
      assert.strictEqual(pending[0]!.attempt, 2)
      assert.strictEqual(pending[0]!.responseStatus, null)
      assert.strictEqual(pending[0]!.lastError, "no response within 10 s")
      assert.strictEqual(Date.parse(String(pending[0]!.nextAt)) - start, 380_000, "5 m after the timeout at 80 s")

      // The endpoint answers at once again: attempt 3 at 380 s is delivered.
      receiver.answerAfter(0)
      yield* scenario.advance("10 minutes")
      assert.deepStrictEqual(receiver.deliveries.map((delivery) => (delivery.atMillis - start) / 1000), [0, 70, 380])
      assert.strictEqual(receiver.deliveries[2]!.answered, 200)
      assert.isTrue(receiver.deliveries.every((delivery) => delivery.json.eventId === test.eventId))
      const delivered = (yield* tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } })).items
      assert.strictEqual(delivered[0]!.status, "DELIVERED")
      assert.strictEqual(delivered[0]!.attempt, 3)
      assert.strictEqual(delivered[0]!.responseStatus, 200)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "receiver-slow" }))), 60_000)

  it.live("gone away: connections refused are retried at 1 m, 5 m, 30 m, 2 h, 12 h, then DEAD; back and resent, delivered", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      const endpoint = yield* tenant.client.webhooks.create({ payload: { url: receiver.url } })
      yield* receiver.goAway
      const test = yield* tenant.client.webhooks.test({ params: { id: endpoint.id } })
      const start = scenario.now()
      const record = Effect.map(
        tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } }),
        (page) => page.items[0]!
      )
      yield* scenario.advance("1 day")
      // Six refused attempts at 0, 1 m, then 5 m, 30 m, 2 h and 12 h after each (a refusal takes no time): the last
      // at 52,560 s to the millisecond, and the sixth failure is DEAD.
      const dead = yield* record
      assert.strictEqual(dead.status, "DEAD")
      assert.strictEqual(dead.attempt, 6)
      assert.strictEqual(Date.parse(String(dead.lastAttemptAt)) - start, 52_560_000)
      assert.strictEqual(dead.responseStatus, null)
      assert.match(String(dead.lastError), /ECONNREFUSED/)
      assert.strictEqual(receiver.deliveries.length, 0, "nothing reached the receiver while it was away")
      yield* scenario.advance("1 day")
      assert.strictEqual((yield* record).attempt, 6, "nothing after DEAD")

      yield* receiver.comeBack
      const resent = yield* tenant.client.webhooks.resend({ params: { eventId: test.eventId } })
      assert.strictEqual(resent.requeued, 1)
      yield* scenario.advance("1 minute")
      assert.strictEqual(receiver.deliveries.length, 1)
      assert.strictEqual(receiver.deliveries[0]!.answered, 200)
      assert.strictEqual(receiver.deliveries[0]!.json.eventId, test.eventId)
      const delivered = yield* record
      assert.strictEqual(delivered.status, "DELIVERED")
      assert.strictEqual(delivered.attempt, 1)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "receiver-away" }))), 60_000)
})
