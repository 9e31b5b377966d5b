/**
 * Deposits end to end on a Solana node interface (docs/sol.md; docs/deposits.md): the whole service with
 * `CHAIN_RPC_URLS` pointing SOL_DEVNET at the JSON-RPC front over litesvm (test/support/SolanaRpcFront.ts). SOL sent
 * to a tenant's deposit address and the catalog's USDC sent to its associated token account are recorded CONFIRMING
 * when their block is confirmed, credited once the block is `finalized` (catalog `confirmations: finalized`; the front
 * finalizes the head minus 31 blocks), and a deposit whose block a reorganization replaces before finality (and whose
 * transaction the new chain does not have) is FAILED / DROPPED, never credited (docs/deposits.md "Reorganizations":
 * with `finalized` crediting, only unconfirmed deposits can be reorganized away; spec section 2).
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { finalityDepth, type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { assertCredited, deposits as allDeposits, networkCalls } from "../support/NetworkCalls.ts"

const port = freePortSync()
let front: SolanaRpcFront
const usdcAssetId = "SOL_DEVNET_USDC"

const { scan, depositAddress, balances } = networkCalls("SOL_DEVNET")

beforeAll(async () => {
  front = await startSolanaRpcFront({ port })
})
afterAll(() => front.close())

/** The tenant's deposits by asset, then amount. */
const deposits = (tenant: TestTenant) =>
  Effect.map(allDeposits(tenant), (items) =>
    items.toSorted((a, b) => a.assetId.localeCompare(b.assetId) || a.amountRaw.localeCompare(b.amountRaw)))

layer(
  makeTestAppLayer({ chainRpcUrls: { SOL_DEVNET: Redacted.make(`http://127.0.0.1:${port}`) } }),
  { excludeTestServices: true }
)("deposits on a Solana node interface (litesvm behind a JSON-RPC front)", (it) => {
  it.effect("SOL and SPL: CONFIRMING when confirmed, credited when finalized (block height + 31), to the wallet that owns the token account", () =>
    Effect.gen(function*() {
      const clients = yield* ChainClients
      assert.isFalse(clients.isSimulated("SOL_DEVNET"))
      const catalog = yield* Catalog
      const usdc = catalog.asset(usdcAssetId)!
      front.createMint(usdc.contract!, usdc.decimals)
      front.mine(1)
      // The watcher starts at the head it first sees: everything before it is history.
      yield* scan

      const tenant = yield* provisionTenant()
      const address = yield* depositAddress(tenant, "alice")
      const solAmount = 500_000_003n
      const usdcAmount = 5_000_001n
      const solTx = front.paySol(address.address, solAmount)
      // Into alice's associated token account, created by the same transaction: credited to alice's address.
      const usdcTx = front.payToken(address.address, usdc.contract!, usdcAmount)
      yield* scan
      const seen = yield* deposits(tenant)
      assert.deepStrictEqual(seen.map((deposit) => [deposit.assetId, deposit.status, deposit.amountRaw, deposit.txHash]), [
        ["SOL_DEVNET_SOL", "CONFIRMING", solAmount.toString(), solTx.signature],
        [usdcAssetId, "CONFIRMING", usdcAmount.toString(), usdcTx.signature]
      ])
      assert.isTrue(seen.every((deposit) => deposit.destination.address === address.address))

      // The SOL block is final once the head is 31 blocks above it; the USDC one a block later.
      front.mine(solTx.height + finalityDepth - front.headHeight())
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["COMPLETED", "CONFIRMING"])
      front.mine(1)
      yield* scan
      const credited = yield* deposits(tenant)
      assert.lengthOf(credited, 2)
      assertCredited(credited, yield* balances(tenant, address.walletId))
    }))

  it.effect("a deposit whose block a reorganization replaces before it is final is FAILED / DROPPED, and never credited", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const address = yield* depositAddress(tenant, "bob")
      const paid = front.paySol(address.address, 70_000_000n)
      front.mine(3)
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.txHash]), [["CONFIRMING", paid.signature]])

      front.reorg(front.headHeight() - paid.height + 1)
      assert.isUndefined(front.blockOf(paid.signature), "the front dropped the transaction with its block")
      yield* scan
      const dropped = (yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.subStatus])
      assert.deepStrictEqual(dropped, [["FAILED", "DROPPED"]])
      // Finality comes and goes past the height it had: nothing is credited.
      front.mine(finalityDepth + 2)
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.subStatus]), dropped)
      // The wallet lists no asset with a balance (a wallet shows an asset once something was booked to it).
      assert.isTrue((yield* balances(tenant, address.walletId)).every(([, available]) => available === "0"))
    }))
})
