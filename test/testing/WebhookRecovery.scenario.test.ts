/**
 * Worked scenario 1 (docs/scenarios.md): a webhook endpoint fails every attempt: the first at once, then at 1 m,
 * 5 m, 30 m, 2 h and 12 h after each failure, to the second; the sixth failure is DEAD. The endpoint recovers, the
 * tenant resends, and the event is delivered. Only the kit and the public interfaces.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

describe("scenario: a webhook endpoint fails and recovers", () => {
  it.live("attempts at 1 m, 5 m, 30 m, 2 h, 12 h to the second, then DEAD, then resend delivers", () =>
    Effect.gen(function*() {
      const wallStart = performance.now()
      const scenario = yield* Scenario
      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      receiver.failNext(6, 503)
      const endpoint = yield* tenant.client.webhooks.create({ payload: { url: receiver.url } })
      const test = yield* tenant.client.webhooks.test({ params: { id: endpoint.id } })
      const start = scenario.now()
      yield* scenario.advance("1 day")
      const offsets = receiver.deliveries.map((delivery) => (delivery.atMillis - start) / 1000)
      // Each retry is counted from the end of the failed attempt; the receiver answers at once (0 ms).
      assert.deepStrictEqual(offsets, [0, 60, 360, 2160, 9360, 52560])
      assert.isTrue(receiver.deliveries.every((delivery) => delivery.answered === 503))
      assert.isTrue(receiver.deliveries.every((delivery) => delivery.json.eventId === test.eventId))
      const dead = yield* tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } })
      assert.strictEqual(dead.items.length, 1)
      assert.strictEqual(dead.items[0]!.status, "DEAD")
      assert.strictEqual(dead.items[0]!.attempt, 6)

      // The endpoint is back; the tenant resends; one more attempt, at once, delivered.
      const resent = yield* tenant.client.webhooks.resend({ params: { eventId: test.eventId } })
      assert.strictEqual(resent.requeued, 1)
      const resentAt = scenario.now()
      yield* scenario.advance("1 minute")
      assert.strictEqual(receiver.deliveries.length, 7)
      assert.strictEqual(receiver.deliveries[6]!.atMillis, resentAt)
      assert.strictEqual(receiver.deliveries[6]!.answered, 200)
      const delivered = yield* tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } })
      assert.strictEqual(delivered.items[0]!.status, "DELIVERED")
      assert.strictEqual(delivered.items[0]!.attempt, 1)
      yield* scenario.checks.eventInvariants
      yield* scenario.checks.ledgerAudit
      const wallSeconds = (performance.now() - wallStart) / 1000
      assert.isBelow(wallSeconds, 10, `took ${wallSeconds} s of wall time`)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "webhook-recovery" }))), 60_000)
})
