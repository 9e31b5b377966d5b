/**
 * Moving the kit's clock by any stride runs every retry at its due instant (docs/scenarios.md, "Time"): a failing
 * endpoint's schedule (0, 60, 360, 2160, 9360, 52560 s) is kept to the second whether time moves in one long jump
 * with a long `pollStride`, or in short and odd advances that end one second before a retry, exactly on it, or just
 * after it. After each advance every attempt due by then has been made, none early.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

/** The attempts of an endpoint that fails every one: at once, then 1 m, 5 m, 30 m, 2 h, 12 h after each. */
const schedule = [0, 60, 360, 2160, 9360, 52560]

const failingEndpoint = Effect.gen(function*() {
  const scenario = yield* Scenario
  const tenant = yield* scenario.newTenant()
  const receiver = yield* scenario.webhookReceiver
  receiver.failNext(6, 503)
  const endpoint = yield* tenant.client.webhooks.create({ payload: { url: receiver.url } })
  yield* tenant.client.webhooks.test({ params: { id: endpoint.id } })
  const start = scenario.now()
  const offsets = () => receiver.deliveries.map((delivery) => (delivery.atMillis - start) / 1000)
  return { scenario, start, offsets }
})

describe("advance by any stride", () => {
  it.live("short and odd advances around each retry: every attempt in the advance its instant falls in", () =>
    Effect.gen(function*() {
      const { offsets, scenario, start } = yield* failingEndpoint
      // Ends: 59, 61, 359, 360 (on the retry), 2159, 2161, 9360 (on it), 9361, 52559, 52561, 52621.
      const strides = [59, 2, 298, 1, 1799, 2, 7199, 1, 43198, 2, 60]
      for (const seconds of strides) {
        yield* scenario.advance(`${seconds} seconds`)
        const elapsed = (scenario.now() - start) / 1000
        assert.deepStrictEqual(offsets(), schedule.filter((at) => at <= elapsed), `after the advance to ${elapsed} s`)
      }
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "advance-strides" }))), 120_000)

  it.live("one jump with a long pollStride keeps the schedule", () =>
    Effect.gen(function*() {
      const { offsets, scenario } = yield* failingEndpoint
      yield* scenario.advance("1 day", { pollStride: "1 day" })
      assert.deepStrictEqual(offsets(), schedule)
      yield* scenario.advance("10 days", { pollStride: "10 days" })
      assert.deepStrictEqual(offsets(), schedule)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "advance-stride-day" }))), 120_000)
})
