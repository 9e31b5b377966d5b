/**
 * Deposits end to end on TRON (docs/tron.md; docs/deposits.md): the whole service with `CHAIN_RPC_URLS` pointing
 * TRON_NILE at the java-tron HTTP API stand-in (test/support/TronNode.ts), which hosts the catalog's TRON_NILE_USDT
 * at its Nile address. TRX and USDT paid to a tenant's deposit address are recorded CONFIRMING when their block is
 * scanned and credited once the block is solidified (the catalog's `solidified` rule: 19 blocks below the head);
 * a deposit whose block a reorganization removes before it is solidified is FAILED / DROPPED, never credited
 * (docs/deposits.md "Reorganizations"), and one whose transaction the new chain holds again is credited at its new
 * block. A USDT transfer that fails on chain (REVERT) is no deposit.
 */
import { assert, layer } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect, Redacted } from "effect"
import { TronWeb } from "tronweb"
import { afterAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { startTronNode } from "../support/TronNode.ts"
import { assertCredited, deposits as allDeposits, networkCalls } from "../support/NetworkCalls.ts"

const usdtContract = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
const node = await startTronNode({ tokens: [{ contract: usdtContract, supply: 10n ** 15n }] })
afterAll(() => node.stop())

const { scan, depositAddress, balances } = networkCalls("TRON_NILE")

/** The tenant's deposits by transaction hash. */
const deposits = (tenant: TestTenant) =>
  Effect.map(allDeposits(tenant), (items) => items.toSorted((a, b) => a.txHash.localeCompare(b.txHash)))

layer(
  makeTestAppLayer({ chainRpcUrls: { TRON_NILE: Redacted.make(node.url) } }),
  { excludeTestServices: true }
)("deposits on TRON (java-tron HTTP API stand-in)", (it) => {
  it.effect("TRX and USDT: CONFIRMING when in a block, credited when the block is solidified, with the exact amounts", () =>
    Effect.gen(function*() {
      const clients = yield* ChainClients
      assert.isFalse(clients.isSimulated("TRON_NILE"))
      const catalog = yield* Catalog
      assert.strictEqual(catalog.asset("TRON_NILE_USDT")!.contract, usdtContract)
      // The watcher starts at the head it first sees: everything before it is history.
      yield* scan
      const tenant = yield* provisionTenant()
      const wallet = yield* depositAddress(tenant, "alice")
      assert.match(wallet.address, /^T[1-9A-HJ-NP-Za-km-z]{33}$/)

      const trxAmount = 12_345_678n
      // Above the deposit fee floor (with no sweep history: the estimate of a sweep and its TRX top-up, about 5 USDT).
      const usdtAmount = 50_000_001n
      const trxPaid = yield* Effect.promise(() => node.fund(wallet.address, trxAmount))
      const usdtPaid = yield* Effect.promise(() => node.fund(wallet.address, usdtAmount, usdtContract))
      // A USDT transfer beyond the sender's balance: included, REVERT, no deposit.
      const poor = yield* Effect.promise(async () => {
        const { privateKey, address } = await freshFundedKey()
        const tx = await node.sign(privateKey, wallet.address, 10n ** 9n, { token: usdtContract, feeLimit: 50_000_000n })
        assert.isTrue(node.broadcastHex(tx.hex).result)
        node.mine(1)
        return { tx, address }
      })
      assert.strictEqual((node.transactionInfo(poor.tx.txId).receipt as { result?: string }).result, "REVERT")

      yield* scan
      const seen = yield* deposits(tenant)
      assert.deepStrictEqual(
        seen.map((deposit) => [deposit.assetId, deposit.status, deposit.amountRaw, deposit.txHash]).toSorted(),
        [
          ["TRON_NILE_TRX", "CONFIRMING", trxAmount.toString(), trxPaid.txHash],
          ["TRON_NILE_USDT", "CONFIRMING", usdtAmount.toString(), usdtPaid.txHash]
        ]
      )
      assert.isTrue(seen.every((deposit) => deposit.destination.address === wallet.address))

      // Solidified when 19 blocks are on top of it: the later block (USDT's) is solidified at its height + 19.
      const lastHeight = node.head().number
      node.mine(Number(usdtPaid.height + 18n - lastHeight))
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status).toSorted(), ["COMPLETED", "CONFIRMING"])
      node.mine(1)
      assert.strictEqual(node.solidified(), usdtPaid.height)
      yield* scan
      const credited = yield* deposits(tenant)
      assert.lengthOf(credited, 2)
      assertCredited(credited, yield* balances(tenant, wallet.walletId))
    }), 60_000)

  it.effect("a reorganization before solidification: a dropped deposit is FAILED / DROPPED, one mined again is credited at its new block", () =>
    Effect.gen(function*() {
      yield* scan
      const tenant = yield* provisionTenant()
      const wallet = yield* depositAddress(tenant, "bob")
      const dropped = yield* Effect.promise(() => node.fund(wallet.address, 3_000_000n))
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.txHash]), [["CONFIRMING", dropped.txHash]])
      node.reorg(Number(node.head().number - dropped.height) + 1)
      yield* scan
      assert.deepStrictEqual(
        (yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.subStatus]),
        [["FAILED", "DROPPED"]]
      )

      const again = yield* Effect.promise(() => node.fund(wallet.address, 40_000_000n, usdtContract))
      yield* scan
      // Replaced by a fork that holds the same transaction again, in a block of its own.
      node.reorg(1, { keepTransactions: true })
      const movedTo = node.head().number - 1n
      yield* scan
      const waiting = (yield* deposits(tenant)).find((deposit) => deposit.txHash === again.txHash)
      assert.strictEqual(waiting.status, "CONFIRMING")
      node.mine(Number(movedTo + 19n - node.head().number))
      yield* scan
      const credited = (yield* deposits(tenant)).find((deposit) => deposit.txHash === again.txHash)
      assert.strictEqual(credited.status, "COMPLETED")
      assert.deepStrictEqual(
        yield* balances(tenant, wallet.walletId),
        [["TRON_NILE_USDT", credited.netAmountRaw]],
        "the dropped TRX was never credited"
      )
    }), 60_000)
})

/** An account with TRX for fees and no USDT. */
const freshFundedKey = async () => {
  const privateKey = bytesToHex(secp256k1.utils.randomSecretKey())
  const address = TronWeb.address.fromPrivateKey(privateKey) as string
  await node.fund(address, 100_000_000n)
  return { privateKey, address }
}
