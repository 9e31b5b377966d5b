/**
 * The simulated chain's scenario controls: a held transaction stays out of the next N blocks and goes into the one
 * after; a node that is down fails every ChainClient call with ChainUnavailable and answers again when back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit } from "effect"
import { inject } from "vitest"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

describe("simulated chain controls", () => {
  it.live("hold keeps a transaction out of N blocks; nodeDown fails the client until it is back", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const network = "BSC_TESTNET"
      const to = "0x000000000000000000000000000000000000dEaD"
      const held = yield* scenario.chain.transfer(network, { to, assetId: "BSC_TESTNET_BNB", amountRaw: 5n })
      yield* scenario.chain.hold(network, held, 3)
      yield* scenario.chain.mine(network, 3)
      assert.strictEqual((yield* scenario.chain.state(network)).pendingTransfers, 1)
      yield* scenario.chain.mine(network, 1)
      assert.strictEqual((yield* scenario.chain.state(network)).pendingTransfers, 0)
      const client = Context.get(scenario.services as Context.Context<SimulatedChain>, SimulatedChain).client(network)
      const state = yield* client.transactionState(held)
      assert.strictEqual(state, "INCLUDED")

      yield* scenario.chain.nodeDown(network, true)
      const down = yield* Effect.exit(client.head)
      assert.isTrue(Exit.isFailure(down))
      assert.include(JSON.stringify(down), "ChainUnavailable")
      yield* scenario.chain.nodeDown(network, false)
      const head = yield* client.head
      assert.strictEqual(head.height, 4n)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "chain-controls" }))), 60_000)
})
