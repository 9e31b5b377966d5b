/**
 * The simulated chain's scenario controls: a held transaction stays out of the next N blocks and goes into the one
 * after; a node that is down fails every ChainClient call with ChainUnavailable and answers again when back. And its
 * EVM mempool's nonce rules, which let a stuck transaction be replaced: a same-nonce transaction with fees 10 % higher
 * displaces a pending one (its hot-wallet debit returned), a lower one is refused for now, a nonce in a block refuses
 * every other transaction, and one the node forgot is displaced by any.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit } from "effect"
import { keccak256 } from "viem"
import { privateKeyToAccount } from "viem/accounts"
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

  it.live("EVM nonces: a replacement with 10 % higher fees displaces the pending original, which is then never included", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const network = "BSC_TESTNET"
      const bnb = "BSC_TESTNET_BNB"
      const chain = Context.get(scenario.services as Context.Context<SimulatedChain>, SimulatedChain)
      const withdrawals = chain.client(network).withdrawals!
      const account = privateKeyToAccount(`0x${"11".repeat(32)}`)
      const from = account.address.toLowerCase()
      const to = "0x3333333333333333333333333333333333333333"
      const gwei = 1_000_000_000n
      /** A transfer of 5 wei with nonce 0 at `maxFeePerGas` (tip the same), as the pipeline hands it to the chain. */
      const signed = (maxFeePerGas: bigint) =>
        Effect.promise(async () => {
          const raw = await account.signTransaction({
            type: "eip1559",
            chainId: 97,
            nonce: 0,
            gas: 21_000n,
            maxFeePerGas,
            maxPriorityFeePerGas: maxFeePerGas,
            to,
            value: 5n
          })
          return { withdrawalId: "n/a", from, to, assetId: bnb, amount: 5n, raw, txHash: keccak256(raw), networkFee: 21_000n * maxFeePerGas }
        })
      const hot = Effect.map(scenario.chain.state(network), (state) => state.hotWalletBalance[bnb]!)
      const failure = <E>(effect: Effect.Effect<unknown, E>) =>
        Effect.map(Effect.flip(effect), (error) => JSON.stringify(error))
      const start = yield* hot

      const original = yield* signed(gwei)
      yield* withdrawals.broadcast(original)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original.txHash), "PENDING")
      assert.strictEqual(start - (yield* hot), 5n + original.networkFee)
      // 5 % more is not enough to replace it: not now (the pipeline retries), nothing changes.
      const low = yield* signed(gwei * 105n / 100n)
      assert.include(yield* failure(withdrawals.broadcast(low)), "replacement transaction underpriced")
      assert.strictEqual(yield* scenario.chain.transactionState(network, low.txHash), "UNKNOWN")
      // 12.5 % more displaces it: the hot wallet paid the replacement only.
      const replacement = yield* signed(gwei * 1125n / 1000n)
      yield* withdrawals.broadcast(replacement)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original.txHash), "UNKNOWN")
      assert.strictEqual(yield* scenario.chain.transactionState(network, replacement.txHash), "PENDING")
      assert.strictEqual(start - (yield* hot), 5n + replacement.networkFee)
      // The original's bytes again: underpriced while the replacement waits, "nonce too low" once it is in a block.
      assert.include(yield* failure(withdrawals.broadcast(original)), "replacement transaction underpriced")
      yield* scenario.chain.mine(network, 1)
      assert.strictEqual(yield* scenario.chain.transactionState(network, replacement.txHash), "INCLUDED")
      const tooLow = yield* failure(withdrawals.broadcast(original))
      assert.include(tooLow, "nonce too low")
      assert.include(tooLow, "\"nonceUsed\":true")
      yield* scenario.chain.mine(network, 5)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original.txHash), "UNKNOWN")
      assert.strictEqual(start - (yield* hot), 5n + replacement.networkFee)
      // A reorganization takes the replacement's block: the node forgot it, so the original may take the slot again,
      // and the hot wallet pays for the original alone.
      yield* scenario.chain.reorg(network, 6)
      assert.strictEqual(yield* scenario.chain.transactionState(network, replacement.txHash), "UNKNOWN")
      yield* withdrawals.broadcast(original)
      yield* scenario.chain.mine(network, 1)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original.txHash), "INCLUDED")
      assert.strictEqual(start - (yield* hot), 5n + original.networkFee)
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "chain-nonces" }))), 60_000)
})
