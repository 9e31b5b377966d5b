/**
 * Withdrawals on TRON (docs/tron.md; decisions.md "Sending on real networks"): the whole service with TRON_NILE on
 * the java-tron HTTP API stand-in (test/support/TronNode.ts), blocks made only when the test asks. The platform HOT
 * address is funded on the node with TRX and the catalog's USDT (hosted at its Nile address).
 *
 * Held here: TRX and USDT withdrawals reach COMPLETED once their block is solidified, with the recipient paid, HOT
 * debited by amount + the fee, and networkFeeRaw = the transaction info's `fee` (1.1 TRX for a TRX transfer that
 * creates the recipient's account; the burned energy for USDT); a USDT transfer that reverts on chain (its sender
 * blacklisted, as USDT's contract can) is FAILED / REVERTED_ON_CHAIN with the funds back and the burned fee booked;
 * bytes that can never be included any more (the node forgot them and their expiration passed) are signed again on a
 * fresh reference block, only once the solidified block's time is past their expiration (decisions.md: TRON
 * re-signs only after expiry), and the withdrawal keeps one record showing the included transaction; a block
 * dropped by a reorganization gets the same bytes again.
 */
import { assert, layer } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TronWeb } from "tronweb"
import { afterAll } from "vitest"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { startTronNode, tronParameters, trc20Energy } from "../support/TronNode.ts"
import { balance, entryCount, fund, hotAddress, waitFor, walletOf, withdraw, withdrawAccepted } from "./WithdrawalHelpers.ts"

const usdtContract = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
const trx = "TRON_NILE_TRX"
const usdt = "TRON_NILE_USDT"
const node = await startTronNode({ tokens: [{ contract: usdtContract, supply: 10n ** 15n }] })
afterAll(() => node.stop())

/** Runs the confirmation check now rather than waiting for the background loop (both are safe together). */
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm("TRON_NILE")
})

/** The signed versions of a withdrawal's send, oldest first. */
const sends = (withdrawalId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ version: number; tx_hash: string }>`
      SELECT v.version, v.tx_hash FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
      WHERE s.owner_id = ${withdrawalId} ORDER BY v.version`
  })

const recipient = () => TronWeb.address.fromPrivateKey(bytesToHex(secp256k1.utils.randomSecretKey())) as string

/** Mines until the withdrawal's block is solidified (TRON_NILE's rule) and checks it. */
const mineToFinal = (tenant: TestTenant, id: string, status = "COMPLETED", subStatus: string | null = null) =>
  Effect.gen(function*() {
    node.mine(19)
    yield* confirm
    return yield* waitFor(tenant, id, status, subStatus)
  })

const fundedWallet = (tenant: TestTenant, name: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    const wallet = yield* walletOf(tenant, name, "TRON_NILE")
    yield* fund(tenant, wallet.walletId, assetId, amount)
    return wallet
  })

/** The withdrawal's transaction is in the node's pool: one block takes it. */
const mineIncluding = (txHash: string) =>
  Effect.sync(() => {
    node.mine(1)
    const info = node.transactionInfo(txHash)
    assert.strictEqual(info.blockNumber, node.head().number, "included in the block just made")
    return info as { readonly fee?: bigint; readonly receipt: { readonly result?: string; readonly energy_usage_total?: bigint } }
  })

layer(
  makeTestAppLayer({ chainRpcUrls: { TRON_NILE: Redacted.make(node.url) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("withdrawals on TRON (java-tron HTTP API stand-in)", (it) => {
  it.effect("setup: HOT funded with TRX and the catalog's USDT on the node", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress("TRON_NILE")
      yield* Effect.promise(() => node.fund(hot, 10_000_000_000n))
      yield* Effect.promise(() => node.fund(hot, 10n ** 12n, usdtContract))
      assert.strictEqual(node.trxBalance(hot), 10_000_000_000n)
      assert.strictEqual(node.tokenBalance(usdtContract, hot), 10n ** 12n)
    }))

  it.effect("TRX: COMPLETED once solidified, the recipient paid, HOT debited by amount + the info's fee (1.1 TRX: a new account)", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("TRON_NILE")
      const wallet = yield* fundedWallet(tenant, "trx-payer", trx, 500_000_000n)
      const to = recipient()
      const amount = 123_456_789n
      const hotBefore = node.trxBalance(hot)
      const created = yield* withdraw(tenant, wallet.walletId, trx, to, amount, "trx-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      assert.match(confirming.txHash, /^[0-9a-f]{64}$/)
      const info = yield* mineIncluding(confirming.txHash)
      const fee = info.fee!
      assert.strictEqual(fee, tronParameters.createAccountFee + tronParameters.createNewAccountFeeInSystemContract)
      // Not final before its block is solidified.
      node.mine(17)
      yield* confirm
      assert.strictEqual((yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")).status, "CONFIRMING")
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual(done.networkFeeRaw, fee.toString())
      assert.strictEqual(done.networkFeeAssetId, trx)
      assert.strictEqual(node.trxBalance(to), amount)
      assert.strictEqual(hotBefore - node.trxBalance(hot), amount + fee)
      const payer = yield* balance(tenant, wallet.walletId, trx)
      assert.strictEqual(payer.frozen, "0")
      assert.strictEqual(BigInt(payer.available), 500_000_000n - amount - BigInt(done.feeRaw))
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("USDT: COMPLETED with the token moved from HOT to the recipient and the burned energy paid in TRX", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("TRON_NILE")
      const wallet = yield* fundedWallet(tenant, "usdt-payer", usdt, 500_000_000n)
      const to = recipient()
      const amount = 120_000_000n
      const [hotTrx, hotToken] = [node.trxBalance(hot), node.tokenBalance(usdtContract, hot)]
      const created = yield* withdraw(tenant, wallet.walletId, usdt, to, amount, "usdt-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      const info = yield* mineIncluding(confirming.txHash)
      assert.strictEqual(info.receipt.result, "SUCCESS")
      assert.strictEqual(info.receipt.energy_usage_total, trc20Energy.toNewHolder)
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      assert.strictEqual(done.networkFeeRaw, info.fee!.toString())
      assert.isTrue(info.fee! >= trc20Energy.toNewHolder * tronParameters.energyFee, "the energy burned, and bandwidth beyond the free allowance")
      assert.strictEqual(node.tokenBalance(usdtContract, to), amount)
      assert.strictEqual(hotToken - node.tokenBalance(usdtContract, hot), amount)
      assert.strictEqual(hotTrx - node.trxBalance(hot), info.fee!)
    }))

  it.effect("a USDT transfer that reverts on chain: FAILED / REVERTED_ON_CHAIN, funds back to available, the burned fee booked", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("TRON_NILE")
      const wallet = yield* fundedWallet(tenant, "revert", usdt, 300_000_000n)
      const created = yield* withdraw(tenant, wallet.walletId, usdt, recipient(), 100_000_000n, "revert-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      // Blacklisted after the node took the transaction, before it is in a block: the call reverts.
      node.blacklist(usdtContract, hot, true)
      const info = yield* mineIncluding(confirming.txHash)
      node.blacklist(usdtContract, hot, false)
      assert.strictEqual(info.receipt.result, "REVERT")
      const failed = yield* mineToFinal(tenant, created.json.withdrawalId, "FAILED", "REVERTED_ON_CHAIN")
      assert.strictEqual(failed.networkFeeRaw, info.fee!.toString())
      assert.isAbove(Number(info.fee!), 0)
      assert.deepStrictEqual(yield* balance(tenant, wallet.walletId, usdt), { available: "300000000", frozen: "0" })
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "WITHDRAWAL_RELEASE"), 1)
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("a transaction the node forgot and that expired unincluded: signed again on a fresh reference block only once provably expired; one payment, one record", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "expiry", trx, 500_000_000n)
      const to = recipient()
      const amount = 20_000_000n
      const id = yield* withdrawAccepted(tenant, wallet.walletId, trx, to, amount, "expiry-1")
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      // The node restarts without its pool, and the chain moves past the expiration (60 s after the reference
      // block) before anything gives it the bytes again: from now on they are refused as expired.
      assert.strictEqual(node.dropPending(), 1)
      node.mine(21)
      yield* confirm
      assert.strictEqual((yield* sends(id)).length, 1, "not signed again while the solidified block is before the expiration")
      node.mine(19)
      yield* confirm
      const versions = yield* sends(id)
      assert.strictEqual(versions.length, 2, "signed again once provably expired")
      assert.strictEqual(versions[0]!.tx_hash, first.txHash)
      const second = versions[1]!.tx_hash
      const info = yield* mineIncluding(second)
      const done = yield* mineToFinal(tenant, id)
      assert.strictEqual(done.txHash, second, "the record shows the transaction that was included")
      assert.strictEqual(done.networkFeeRaw, info.fee!.toString())
      assert.strictEqual(node.trxBalance(to), amount, "paid once")
      assert.deepStrictEqual(node.transactionInfo(first.txHash), {})
    }))

  it.effect("a reorganization drops the withdrawal's block before it is solidified: the same bytes again, included once, never a second transaction", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "reorg", trx, 500_000_000n)
      const to = recipient()
      const amount = 15_000_000n
      const id = yield* withdrawAccepted(tenant, wallet.walletId, trx, to, amount, "reorg-1")
      const confirming = yield* waitFor(tenant, id, "CONFIRMING")
      yield* mineIncluding(confirming.txHash)
      // The block is replaced by a longer fork without the transaction (its reference block stays on the chain).
      node.reorg(1)
      assert.deepStrictEqual(node.transactionInfo(confirming.txHash), {})
      assert.strictEqual(node.trxBalance(to), 0n)
      // The check finds it in no block and unknown to the node: it gives the same bytes again. The background loop
      // may hold the broadcast claim when this check runs (it then leaves the send to that loop), so the check runs
      // until the node has the bytes.
      for (let round = 0; !node.isPending(confirming.txHash); round++) {
        assert.isBelow(round, 50, "the node was never given the bytes again")
        yield* confirm
        if (!node.isPending(confirming.txHash)) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      }
      const info = yield* mineIncluding(confirming.txHash)
      const done = yield* mineToFinal(tenant, id)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual(done.networkFeeRaw, info.fee!.toString())
      assert.strictEqual(node.trxBalance(to), amount, "paid once")
      assert.strictEqual((yield* sends(id)).length, 1, "one signed version")
    }))
})
