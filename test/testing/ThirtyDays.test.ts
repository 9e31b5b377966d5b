/**
 * Thirty days of virtual time with every background duty running (issue 33, "Speed"): the whole service's loops
 * (deposit scans, withdrawal confirmations, the webhook dispatcher and sweeper, outbox retention, nonce purge, the
 * cluster's own) are due all along; the kit wakes them at the instants something falls due instead of every second.
 * The duties did run: a failing webhook endpoint got its whole retry schedule (1 m, 5 m, 30 m, 2 h, 12 h, then DEAD)
 * to the second, while another tenant's deposit was scanned and credited. The wall time of the jump is printed and
 * held under 30 s (measured 5-9 s on a shared 2-core machine).
 *
 * Not shown: a duty that acts on time alone and finds the database quiet (outbox retention, the nonce purge) does
 * not run in a quiet jump: the kit wakes quiet loops only when something falls due or after `pollStride`
 * (docs/scenarios.md, "Time").
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

describe("thirty days of virtual time", () => {
  it.live("every background duty runs; the jump takes under 30 s of wall time", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      receiver.failNext(6, 503)
      const endpoint = yield* tenant.client.webhooks.create({ payload: { url: receiver.url } })
      const test = yield* tenant.client.webhooks.test({ params: { id: endpoint.id } })
      const start = scenario.now()
      // A deposit credited on the way (another tenant's: this receiver fails only the test event), so the scans, the
      // books and the ledger have something to carry.
      const depositor = yield* scenario.newTenant()
      const address = yield* depositor.request("POST", "/v1/users/tom/deposit_address", { networkKey: "BSC_TESTNET" })
      yield* scenario.chain.transfer("BSC_TESTNET", { to: address.json.address, assetId: "BSC_TESTNET_BNB", amountRaw: 10n ** 17n })
      yield* scenario.chain.mine("BSC_TESTNET", 15)

      const wallStart = performance.now()
      yield* scenario.advance("30 days")
      const wallSeconds = (performance.now() - wallStart) / 1000
      console.log(`thirty days of virtual time: ${wallSeconds.toFixed(1)} s of wall time`)

      assert.isAtLeast(scenario.now() - start, 30 * 24 * 3_600_000)
      // The retry schedule ran to the second, and the delivery died at attempt 6.
      const offsets = receiver.deliveries
        .filter((delivery) => delivery.json.eventId === test.eventId)
        .map((delivery) => (delivery.atMillis - start) / 1000)
      assert.deepStrictEqual(offsets, [0, 60, 360, 2160, 9360, 52560])
      assert.strictEqual(receiver.deliveries.length, 6)
      const dead = yield* tenant.client.webhooks.deliveries({ query: { endpointId: endpoint.id } })
      assert.deepStrictEqual(dead.items.map((item) => [item.eventId, item.status, item.attempt]), [[test.eventId, "DEAD", 6]])
      const deposit = (yield* depositor.request("GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
      assert.strictEqual(deposit.status, "COMPLETED")
      yield* scenario.checks.ledgerAudit
      yield* scenario.checks.eventInvariants
      assert.isBelow(wallSeconds, 30, `thirty days took ${wallSeconds} s of wall time`)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "thirty-days" }))), 180_000)
})
