/**
 * Worked scenario 2 (docs/scenarios.md): a withdrawal whose transaction the chain keeps out of blocks is replaced
 * after 20 blocks with a higher fee (same nonce); the replacement displaces the original, which is never included,
 * the replacement completes, and the books are exact: the ledger audit, the wallet's balance, the network fee booked
 * once at the replacement's fee, the hot wallet debited once, and the exact webhook sequence. Only the kit and the
 * public interfaces.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

const network = "BSC_TESTNET"
const bnb = "BSC_TESTNET_BNB"
const destination = "0x2222222222222222222222222222222222222222"

describe("scenario: a withdrawal stuck 20 blocks is replaced with a higher fee", () => {
  it.live("the original never confirms, the replacement does, and the books are exact", () =>
    Effect.gen(function*() {
      const scenario = yield* Scenario
      const tenant = yield* scenario.newTenant()
      const receiver = yield* scenario.webhookReceiver
      yield* tenant.request("POST", "/v1/webhooks", { url: receiver.url })
      const address = yield* tenant.request("POST", "/v1/users/dora/deposit_address", { networkKey: network })
      assert.strictEqual(address.json?.status, "READY", address.text)
      const walletId: string = address.json.walletId
      yield* scenario.chain.transfer(network, { to: address.json.address, assetId: bnb, amountRaw: 10n ** 18n })
      yield* scenario.chain.mine(network, 15)
      yield* scenario.advance("1 minute")
      const deposit = (yield* tenant.request("GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
      assert.strictEqual(deposit.status, "COMPLETED")
      const credited = BigInt(deposit.netAmountRaw)
      const hotBefore = (yield* scenario.chain.state(network)).hotWalletBalance[bnb]!

      // The withdrawal is signed and broadcast; the chain keeps its transaction out of the next 25 blocks.
      const amount = 10n ** 17n
      const receipt = yield* tenant.request("POST", "/v1/transactions", {
        assetId: bnb,
        source: { type: "WALLET", id: walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: destination } },
        amountRaw: amount.toString(),
        externalTxId: "stuck-1"
      })
      assert.strictEqual(receipt.status, 202, receipt.text)
      const id: string = receipt.json.transactionId
      const fee = BigInt(receipt.json.feeRaw)
      // The confirmation loop (every second; the stride wakes it even if the loops were quiet) sees it sent and not
      // in a block at this height: the 20 blocks count from here.
      yield* scenario.advance("5 seconds", { pollStride: "1 second" })
      const sent = (yield* tenant.request("GET", `/v1/transactions/${id}`)).json
      assert.strictEqual(sent.status, "CONFIRMING", JSON.stringify(sent))
      const original: string = sent.txHash
      yield* scenario.chain.hold(network, original, 25)

      yield* scenario.chain.mine(network, 19)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original), "PENDING", "19 blocks: not replaced yet")
      assert.strictEqual((yield* scenario.chain.state(network)).pendingTransfers, 1)
      // The 20th block: replaced with the same nonce and higher fees; the replacement displaces the original.
      yield* scenario.chain.mine(network, 1)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original), "UNKNOWN", "displaced")
      assert.strictEqual((yield* scenario.chain.state(network)).pendingTransfers, 1, "only the replacement waits")
      assert.strictEqual((yield* tenant.request("GET", `/v1/transactions/${id}`)).json.status, "CONFIRMING")

      // Included in the next block, final 15 blocks later; the original's hold has run out by then.
      yield* scenario.chain.mine(network, 15)
      yield* scenario.advance("1 minute")
      const done = (yield* tenant.request("GET", `/v1/transactions/${id}`)).json
      assert.strictEqual(done.status, "COMPLETED", JSON.stringify(done))
      const replacement: string = done.txHash
      assert.notStrictEqual(replacement, original)
      assert.strictEqual(yield* scenario.chain.transactionState(network, replacement), "INCLUDED")
      assert.strictEqual(yield* scenario.chain.transactionState(network, original), "UNKNOWN", "never included")
      yield* scenario.chain.mine(network, 10)
      assert.strictEqual(yield* scenario.chain.transactionState(network, original), "UNKNOWN", "past its hold: still never")
      assert.strictEqual((yield* scenario.chain.state(network)).pendingTransfers, 0)

      // The fee: 21,000 gas at 1 gwei signed first; the replacement raised it by 12.5 % to 1.125 gwei.
      const replacementFee = 21_000n * 1_125_000_000n
      assert.strictEqual(done.networkFeeRaw, replacementFee.toString())
      assert.strictEqual(done.networkFeeAssetId, bnb)
      assert.strictEqual(done.feeRaw, fee.toString())
      // The books: the wallet paid amount + fee once; the ledger audit holds every entry to the transaction (one
      // NETWORK_FEE of exactly networkFeeRaw); the chain took the amount and the replacement's fee from the hot
      // wallet once (the displaced original's debit came back).
      const balances = yield* scenario.checks.balances(tenant.tenantId)
      assert.deepStrictEqual(balances.map((row) => [row.walletId, row.assetId, row.available, row.frozen]), [
        [walletId, bnb, credited - amount - fee, 0n]
      ])
      yield* scenario.checks.ledgerAudit
      yield* scenario.checks.eventInvariants
      const hotAfter = (yield* scenario.chain.state(network)).hotWalletBalance[bnb]!
      assert.strictEqual(hotBefore - hotAfter, amount + replacementFee)

      // What the tenant heard, in order: one event per transition (the event invariants above hold the outbox to
      // that). A TRANSACTION_* body carries the transaction as it is at delivery (spec section 6), so the events of
      // the submission's quick steps, delivered while the withdrawal moves on, show a status at or past the one they
      // announce; the replacement announces nothing (it is no status change), and COMPLETED names the replacement.
      const heard = receiver.deliveries
        .map((delivery) => delivery.json)
        .filter((event) => event.type !== "WALLET_CREATED")
      assert.deepStrictEqual(heard.map((event) => [event.type, event.data.id === id ? "withdrawal" : "deposit"]), [
        ["TRANSACTION_CREATED", "deposit"],
        ["TRANSACTION_STATUS_UPDATED", "deposit"],
        ["TRANSACTION_CREATED", "withdrawal"],
        ["TRANSACTION_STATUS_UPDATED", "withdrawal"], // QUEUED
        ["TRANSACTION_STATUS_UPDATED", "withdrawal"], // PENDING_SIGNATURE
        ["TRANSACTION_STATUS_UPDATED", "withdrawal"], // CONFIRMING
        ["TRANSACTION_STATUS_UPDATED", "withdrawal"] // COMPLETED
      ])
      const order = ["SUBMITTED", "QUEUED", "PENDING_SIGNATURE", "CONFIRMING", "COMPLETED"]
      const shown = heard.slice(2).map((event) => order.indexOf(event.data.status))
      assert.isTrue(shown.every((at, index) => at >= index && (index === 0 || at >= shown[index - 1]!)), JSON.stringify(shown))
      assert.deepStrictEqual(heard.slice(5).map((event) => [event.data.status, event.data.txHash, event.data.networkFeeRaw]), [
        ["CONFIRMING", original, null],
        ["COMPLETED", replacement, replacementFee.toString()]
      ])
      assert.isTrue(receiver.deliveries.every((delivery) => delivery.answered === 200))
    }).pipe(Effect.provide(scenarioLayer({ server, seed: "withdrawal-replaced" }))), 120_000)
})
