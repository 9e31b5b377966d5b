/**
 * Issue 35 on a real EVM node (anvil): a withdrawal COMPLETED 12 confirmations deep, then `anvil_reorg` replaces every
 * block from its own with empty ones, so the chain no longer has its transaction. The watcher's rewind reopens the
 * send (GET /ops/health lists it, the chain books show HOT in flight against the node), the follow-up gives the node
 * the same signed bytes (same hash, same nonce), and once they are final again the send is CONFIRMED as before, the
 * ledger audit passes and HOT's books equal the node. The re-inclusion block gets the original block's base fee
 * (`anvil_setNextBlockBaseFeePerGas`), so the fee is the one booked. A second withdrawal is re-included at half as
 * much base fee again: the send records the chain's fee (HOT's chain books equal the node), the tenant's record and
 * the journal keep the first, and the ledger audit names the send with both figures (`sendFeesBooked`): reported, not
 * booked (docs/sending.md "Reorganized after it was final", docs/ledger.md "Chain books").
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type Hex, parseEther } from "viem"
import { beforeAll } from "vitest"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { compareLine, readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { auditLedger } from "../../src/ledger/LedgerAudit.ts"
import { followReorganizedSends } from "../../src/sending/ReorganizedSends.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { anvilAccounts, startAnvil } from "../support/Anvil.ts"
import { deposits } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsRequest, provisionTenant } from "../support/TestApp.ts"
import { hotAddress, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const eth = "ETH_SEPOLIA_ETH"
const sender = anvilAccounts[0]

beforeAll(() => Effect.runPromise(anvil.ready))

/** Scans until the watcher's cursor stands at the node's head. */
const scanToHead = Effect.gen(function*() {
  const head = yield* Effect.promise(() => node.getBlockNumber())
  const watcher = yield* DepositWatcher
  for (let attempt = 0; attempt < 100; attempt++) {
    if ((yield* watcher.scan("ETH_SEPOLIA")).height >= head) return head
    yield* Effect.sleep("100 millis")
  }
  return assert.fail(`the watcher did not reach block ${head}`)
})
const mine = (blocks = 1) => Effect.andThen(Effect.promise(() => node.mine({ blocks })), scanToHead)

const hotLine = (hot: string) =>
  Effect.gen(function*() {
    const books = yield* readChainBooks(["ETH_SEPOLIA"])
    const line = books.lines.find((entry) => entry.address === hot && entry.assetId === eth)!
    const asOf = books.networks[0]!.asOf!
    return compareLine(line, yield* Effect.promise(() => node.getBalance({ address: hot as Hex, blockNumber: asOf })))
  })

const reorganized = Effect.map(opsRequest("GET", "/ops/health"), (response) => response.json.reorganizedSends as Array<any>)

const auditOk = Effect.gen(function*() {
  const report = yield* auditLedger
  assert.isTrue(report.ok, JSON.stringify(report.firstDiscrepancy))
}).pipe(Effect.orDie)

layer(
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(anvil.url) }, autoSweeps: false }),
  { excludeTestServices: true, timeout: 240_000 }
)("a COMPLETED withdrawal reorganized away on anvil", (it) => {
  it.effect("reopened, broadcast again with the same bytes, final again: CONFIRMED as before, HOT's books equal the node", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* mine()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const tenant = yield* provisionTenant()
      const deposit = yield* walletOf(tenant, "rita", "ETH_SEPOLIA")
      yield* Effect.promise(() => node.sendTransaction({ account: sender, to: hot as Hex, value: parseEther("10") }))
      yield* Effect.promise(() => node.sendTransaction({ account: sender, to: deposit.address as Hex, value: parseEther("2") }))
      yield* mine()
      yield* mine(11)
      assert.deepStrictEqual((yield* deposits(tenant)).map((row) => row.status), ["COMPLETED"])

      const submitted = yield* withdraw(tenant, deposit.walletId, eth, "0x00000000000000000000000000000000beef0002", parseEther("0.5"), "reorg-1")
      assert.strictEqual(submitted.status, 202, submitted.text)
      const id: string = submitted.json.withdrawalId
      yield* waitFor(tenant, id, "CONFIRMING")
      const includedAt = yield* mine()
      const baseFee = (yield* Effect.promise(() => node.getBlock({ blockNumber: includedAt }))).baseFeePerGas!
      yield* mine(11)
      yield* Effect.flatMap(WithdrawalProcessor, (processor) => processor.confirm("ETH_SEPOLIA"))
      const completed = yield* waitFor(tenant, id, "COMPLETED")
      const txHash = completed.txHash as Hex
      yield* mine(2)
      assert.strictEqual((yield* hotLine(hot)).verdict, "ok")

      // Every block from the withdrawal's on replaced by empty ones: its transaction is on the chain no more.
      const head = yield* Effect.promise(() => node.getBlockNumber())
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [Number(head - includedAt + 1n), []] as any }))
      yield* scanToHead
      // In no block now (the node may hold it in its pool again, or the service's loop may have given it back already).
      const inBlock = yield* Effect.promise(() => node.getTransaction({ hash: txHash }).then((found) => found.blockNumber !== null, () => false))
      assert.isFalse(inBlock, "the reorganization took the transaction off the chain")
      const listed = yield* reorganized
      assert.deepStrictEqual(listed.map((entry) => [entry.kind, entry.ownerId, entry.txHash]), [["withdrawal", id, txHash]])
      // The books no longer take the payment and its fee from HOT, which holds them again on chain: equal, with the
      // withdrawal named in flight (it may be in the next block).
      const inFlight = yield* hotLine(hot)
      assert.deepInclude(inFlight, { expected: parseEther("10"), onChain: parseEther("10"), verdict: "ok" })
      assert.include(inFlight.inFlight, `withdrawal ${id} (send PENDING)`)
      assert.isAbove(Number(inFlight.mayHoldLess), 0)
      yield* auditOk

      // A node that forgot them (dropped from its pool) gets the same bytes again: held under the same hash.
      yield* Effect.promise(() => node.request({ method: "anvil_dropTransaction" as any, params: [txHash] as any }))
      // The service's own loop may hold the broadcast claim when this pass runs (the pass then leaves the send to
      // it): passes until the node has the bytes.
      const heldByNode = () => node.getTransaction({ hash: txHash }).then(() => true, () => false)
      for (let round = 0; !(yield* Effect.promise(heldByNode)); round++) {
        assert.isBelow(round, 50, "the node was never given the bytes again")
        yield* followReorganizedSends
        if (!(yield* Effect.promise(heldByNode))) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      }
      const pending = yield* Effect.promise(() => node.getTransaction({ hash: txHash }))
      assert.isNull(pending.blockNumber)
      const meanwhile = yield* waitFor(tenant, id, "COMPLETED")
      assert.deepStrictEqual([meanwhile.txHash, meanwhile.networkFeeRaw], [txHash, completed.networkFeeRaw])

      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${baseFee.toString(16)}`] as any }))
      yield* mine()
      yield* mine(11)
      // Restored by this pass or by the service's own loop (every 2 s), whichever came first.
      yield* followReorganizedSends
      assert.deepStrictEqual(yield* reorganized, [])
      const [send] = yield* sql<{ state: string; included_tx_hash: string; network_fee: string; reorganizations: number }>`
        SELECT state, included_tx_hash, network_fee::text AS network_fee, reorganizations FROM outgoing_sends WHERE owner_id = ${id}`
      assert.deepStrictEqual({ ...send }, { state: "CONFIRMED", included_tx_hash: txHash, network_fee: completed.networkFeeRaw, reorganizations: 1 })
      const after = yield* hotLine(hot)
      assert.strictEqual(after.verdict, "ok")
      assert.strictEqual(after.expected, parseEther("10") - parseEther("0.5") - BigInt(completed.networkFeeRaw))
      yield* auditOk
    }))
  it.effect("re-included at another base fee: the send records the chain's fee, HOT's books equal the node, the journal keeps the first fee and the audit names the difference", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const tenant = yield* provisionTenant()
      const deposit = yield* walletOf(tenant, "sam", "ETH_SEPOLIA")
      yield* Effect.promise(() => node.sendTransaction({ account: sender, to: deposit.address as Hex, value: parseEther("2") }))
      yield* mine()
      yield* mine(11)
      const submitted = yield* withdraw(tenant, deposit.walletId, eth, "0x00000000000000000000000000000000beef0003", parseEther("0.3"), "reorg-2")
      assert.strictEqual(submitted.status, 202, submitted.text)
      const id: string = submitted.json.withdrawalId
      yield* waitFor(tenant, id, "CONFIRMING")
      const includedAt = yield* mine()
      const baseFee = (yield* Effect.promise(() => node.getBlock({ blockNumber: includedAt }))).baseFeePerGas!
      yield* mine(11)
      yield* Effect.flatMap(WithdrawalProcessor, (processor) => processor.confirm("ETH_SEPOLIA"))
      const completed = yield* waitFor(tenant, id, "COMPLETED")
      const txHash = completed.txHash as Hex
      yield* mine(2)
      yield* auditOk

      const head = yield* Effect.promise(() => node.getBlockNumber())
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [Number(head - includedAt + 1n), []] as any }))
      yield* scanToHead
      yield* Effect.promise(() => node.request({ method: "anvil_dropTransaction" as any, params: [txHash] as any }))
      yield* followReorganizedSends
      // The same bytes, in a block whose base fee is half as much again (still below the bytes' maxFeePerGas): the
      // price paid per gas, base fee + tip, differs, and so does the fee.
      yield* Effect.promise(() =>
        node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${(baseFee + baseFee / 2n).toString(16)}`] as any })
      )
      yield* mine()
      const receipt = yield* Effect.promise(() => node.getTransactionReceipt({ hash: txHash }))
      const fee = receipt.gasUsed * receipt.effectiveGasPrice
      assert.notStrictEqual(fee.toString(), completed.networkFeeRaw, "re-included at another fee")
      yield* mine(11)
      yield* followReorganizedSends
      assert.deepStrictEqual(yield* reorganized, [])
      const [send] = yield* sql<{ state: string; included_tx_hash: string; network_fee: string }>`
        SELECT state, included_tx_hash, network_fee::text AS network_fee FROM outgoing_sends WHERE owner_id = ${id}`
      assert.deepStrictEqual({ ...send }, { state: "CONFIRMED", included_tx_hash: txHash, network_fee: fee.toString() })
      // The chain books follow the chain: HOT is charged the fee the chain took.
      const line = yield* hotLine(hot)
      assert.strictEqual(line.verdict, "ok")
      assert.strictEqual(line.difference, 0n)
      // The tenant's record and the journal keep the first fee; the audit names the send and both figures.
      const shown = yield* waitFor(tenant, id, "COMPLETED")
      assert.strictEqual(shown.networkFeeRaw, completed.networkFeeRaw)
      const report = yield* auditLedger.pipe(Effect.orDie)
      assert.isFalse(report.ok)
      // This send's discrepancy (another test's send of this file may be named too, should its re-inclusion differ).
      const named = report.checks.find((check) => check.check === "sendFeesBooked")?.discrepancies ?? []
      assert.isTrue(
        named.some((discrepancy) =>
          discrepancy.message.includes(`paid a network fee of ${fee}; its withdrawal (COMPLETED) books ${completed.networkFeeRaw}`)
        ),
        JSON.stringify(named)
      )
    }))
})
