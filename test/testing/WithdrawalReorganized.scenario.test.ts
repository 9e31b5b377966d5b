/**
 * Issue 35: a reorganization deeper than the confirmation rule removes the block of a withdrawal that was already
 * COMPLETED. The service notices (the deposit watcher's rewind reopens the send), tells the operator (an error log,
 * `coffer_sends_reorganized_open`, `reorganizedSends` on GET /ops/health), shows the send in flight in the chain
 * books, and gives the node the same signed bytes again until they are final again: same txHash, no second debit of
 * the hot wallet, no new entry in the journal, and for the tenant nothing changes (spec section 3: a terminal status
 * stays; docs/decisions.md).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { inject } from "vitest"
import { readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"
import { scenarioOpsToken } from "../../src/testing/Scenario.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

const network = "BSC_TESTNET"
const bnb = "BSC_TESTNET_BNB"
const destination = "0x3333333333333333333333333333333333333333"

describe("scenario: a COMPLETED withdrawal whose block a deep reorganization removed", () => {
  it.live("is broadcast again with the same bytes until final again; the operator is told, the tenant sees no change", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const sql = Context.get(scenario.services as Context.Context<SqlClient.SqlClient>, SqlClient.SqlClient)
      const ops = (path: string) =>
        Effect.promise(() =>
          fetch(`${scenario.opsUrl}${path}`, { headers: { authorization: `Bearer ${scenarioOpsToken}` } })
            .then(async (response) => ({ status: response.status, text: await response.text() }))
        )
      const health = Effect.map(ops("/ops/health"), (response) => JSON.parse(response.text))
      const openGauge = Effect.map(ops("/metrics"), (response) => {
        const found = response.text.match(/^coffer_sends_reorganized_open\{network="BSC_TESTNET"\} (\d+)/m)
        return found === null ? undefined : Number(found[1])
      })
      const books = readChainBooks([network]).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)

      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      yield* tenant.request("POST", "/v1/webhooks", { url: receiver.url })
      const address = yield* tenant.request("POST", "/v1/users/fay/deposit_address", { networkKey: network })
      assert.strictEqual(address.json?.status, "READY", address.text)
      yield* scenario.chain.transfer(network, { to: address.json.address, assetId: bnb, amountRaw: 10n ** 18n })
      yield* scenario.chain.mine(network, 20)
      yield* scenario.advance("1 minute")
      const deposit = (yield* tenant.request("GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
      assert.strictEqual(deposit.status, "COMPLETED")
      const hotBefore = (yield* scenario.chain.state(network)).hotWalletBalance[bnb]!

      const amount = 10n ** 17n
      const receipt = yield* tenant.request("POST", "/v1/transactions", {
        assetId: bnb,
        source: { type: "WALLET", id: address.json.walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: destination } },
        amountRaw: amount.toString(),
        externalTxId: "reorganized-1"
      })
      assert.strictEqual(receipt.status, 202, receipt.text)
      const id: string = receipt.json.transactionId
      yield* scenario.advance("5 seconds", { pollStride: "1 second" })
      assert.strictEqual((yield* tenant.request("GET", `/v1/transactions/${id}`)).json.status, "CONFIRMING")
      // In the next block mined, final 15 blocks later; then 10 more, so the reorganization is deeper than the rule.
      const includedAt = (yield* scenario.chain.state(network)).height + 1n
      yield* scenario.chain.mine(network, 15)
      yield* scenario.advance("1 minute")
      const completed = (yield* tenant.request("GET", `/v1/transactions/${id}`)).json
      assert.strictEqual(completed.status, "COMPLETED", JSON.stringify(completed))
      const txHash: string = completed.txHash
      yield* scenario.chain.mine(network, 10)
      assert.strictEqual(yield* scenario.chain.transactionState(network, txHash), "INCLUDED")
      const heardBefore = receiver.deliveries.length
      assert.deepStrictEqual((yield* health).reorganizedSends, [])

      // The reorganization takes the withdrawal's block and everything after it (not the deposit's).
      const height = (yield* scenario.chain.state(network)).height
      yield* scenario.chain.reorg(network, Number(height - includedAt + 1n))
      // Reopened by the watcher's rewind: in flight in the chain books, on /ops/health and in the gauge.
      const reopened = yield* health
      assert.strictEqual(reopened.reorganizedSends.length, 1, JSON.stringify(reopened))
      assert.deepInclude(reopened.reorganizedSends[0], { networkKey: network, kind: "withdrawal", ownerId: id, txHash })
      assert.strictEqual(yield* openGauge, 1)
      const inFlight = (yield* books).lines.filter((line) => line.inFlight.includes(`withdrawal ${id} (send PENDING)`))
      assert.isAbove(inFlight.length, 0, "the chain books name the withdrawal in flight")
      yield* scenario.checks.ledgerAudit

      // The loop gives the node the same bytes again: in the mempool under the same hash, the hot wallet not
      // debited again, the tenant's withdrawal unchanged.
      yield* scenario.advance("10 seconds", { pollStride: "1 second" })
      assert.strictEqual(yield* scenario.chain.transactionState(network, txHash), "PENDING")
      const meanwhile = (yield* tenant.request("GET", `/v1/transactions/${id}`)).json
      assert.deepStrictEqual(
        [meanwhile.status, meanwhile.txHash, meanwhile.networkFeeRaw],
        [completed.status, txHash, completed.networkFeeRaw]
      )
      const networkFee = BigInt(completed.networkFeeRaw)
      assert.strictEqual(hotBefore - (yield* scenario.chain.state(network)).hotWalletBalance[bnb]!, amount + networkFee)

      // Included again and final again: no longer reported, nothing in flight, the books as before.
      yield* scenario.chain.mine(network, 16)
      yield* scenario.advance("10 seconds", { pollStride: "1 second" })
      assert.strictEqual(yield* scenario.chain.transactionState(network, txHash), "INCLUDED")
      assert.deepStrictEqual((yield* health).reorganizedSends, [])
      assert.strictEqual(yield* openGauge, 0)
      assert.deepStrictEqual((yield* books).lines.flatMap((line) => line.inFlight), [])
      const [send] = yield* sql<{ state: string; included_tx_hash: string; reorganizations: number }>`
        SELECT state, included_tx_hash, reorganizations FROM outgoing_sends WHERE owner_id = ${id}`.pipe(Effect.orDie)
      assert.deepStrictEqual({ ...send }, { state: "CONFIRMED", included_tx_hash: txHash, reorganizations: 1 })
      assert.strictEqual(hotBefore - (yield* scenario.chain.state(network)).hotWalletBalance[bnb]!, amount + networkFee)
      const after = (yield* tenant.request("GET", `/v1/transactions/${id}`)).json
      assert.deepStrictEqual([after.status, after.txHash, after.networkFeeRaw], [completed.status, txHash, completed.networkFeeRaw])
      yield* scenario.checks.ledgerAudit
      yield* scenario.checks.eventInvariants
      assert.strictEqual(receiver.deliveries.length, heardBefore, "the tenant hears nothing of it")
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "withdrawal-reorganized" }))), 120_000)
})
