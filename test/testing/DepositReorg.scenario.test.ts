/**
 * Worked scenario 3 (docs/scenarios.md): a credited deposit reversed by a reorganization; the balance and the exact
 * webhook sequence follow. Only the kit and the public interfaces.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { scenarioLayer } from "../../src/testing/index.ts"
import { depositReorgScenario } from "./DepositReorgScenario.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

describe("scenario: a credited deposit reversed by a reorg", () => {
  it.live("the balance goes back to 0 and the tenant hears CREATED, COMPLETED, DEPOSIT_REVERSED, REVERSED", () =>
    Effect.gen(function*() {
      const { depositId, receiver } = yield* depositReorgScenario
      const about = receiver.deliveries
        .map((delivery) => delivery.json)
        .filter((event) => event.type !== "WALLET_CREATED")
        .map((event) => [event.type, event.data?.status ?? event.data?.depositId])
      assert.deepStrictEqual(about, [
        ["TRANSACTION_CREATED", "CONFIRMING"],
        ["TRANSACTION_STATUS_UPDATED", "COMPLETED"],
        ["DEPOSIT_REVERSED", depositId],
        ["TRANSACTION_STATUS_UPDATED", "REVERSED"]
      ])
      assert.isTrue(receiver.deliveries.every((delivery) => delivery.answered === 200))
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "deposit-reorg" }))), 60_000)
})
