/**
 * Deposits end to end on a real EVM node (docs/deposits.md, "EVM over JSON-RPC"): the whole service with
 * `CHAIN_RPC_URLS` pointing ETH_SEPOLIA at a local anvil node (chain id 11155111, the catalog's: the service checks a
 * node's chain id at start). ETH and the catalog's ETH_SEPOLIA_USDT sent to a tenant's deposit address are recorded
 * CONFIRMING, credited at the 12th confirmation, and reversed when a reorganization drops them.
 *
 * The catalog's USDT contract (0xaa8e...33d0, a Sepolia address) gets code on anvil with `anvil_setCode`: an
 * OpenZeppelin ERC-20 deployed normally is cloned there, with the sender's balance written into its storage. So the
 * real preproduction catalog is used as is, and no test-only catalog or override path exists in the service.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { encodeFunctionData, type Hex, parseEther } from "viem"
import { beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { anvilAccounts, cloneTokenAt, deployToken, erc20Artifact, startAnvil } from "../support/Anvil.ts"
import { assertCredited, deposits, networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const sender = anvilAccounts[0]
const usdtAssetId = "ETH_SEPOLIA_USDT"

beforeAll(() => Effect.runPromise(anvil.ready))

const { scan, depositAddress, balances } = networkCalls("ETH_SEPOLIA")

/** The tenant's deposits by asset (ETH before USDT), whichever landed first. */
const depositsByAsset = (tenant: TestTenant) =>
  Effect.map(deposits(tenant), (items) => items.toSorted((a, b) => a.assetId.localeCompare(b.assetId)))

const mine = (blocks = 1) => Effect.promise(async () => {
  await node.mine({ blocks })
  return node.getBlockNumber()
})

layer(
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(anvil.url) } }),
  { excludeTestServices: true }
)("deposits on an EVM node (anvil)", (it) => {
  it.effect("ETH_SEPOLIA is on the RPC client: not simulated, so /ops/devnet/ETH_SEPOLIA is 404; others stay simulated", () =>
    Effect.gen(function*() {
      const clients = yield* ChainClients
      assert.isFalse(clients.isSimulated("ETH_SEPOLIA"))
      assert.isFalse(clients.get("ETH_SEPOLIA")!.startFromGenesis)
      assert.isTrue(clients.isSimulated("BTC_TESTNET"))
      const ops = yield* opsClient
      const error = yield* Effect.flip(ops.devnet.state({ params: { networkKey: "ETH_SEPOLIA" } }))
      assert.strictEqual(error._tag, "NotFound")
      const mined = yield* Effect.flip(ops.devnet.mine({ params: { networkKey: "ETH_SEPOLIA" }, payload: { count: 1 } }))
      assert.strictEqual(mined._tag, "NotFound")
      const simulated = yield* ops.devnet.state({ params: { networkKey: "BTC_TESTNET" } }).pipe(Effect.orDie)
      assert.strictEqual(simulated.networkKey, "BTC_TESTNET")
    }))

  it.effect("ETH and a catalog token: CONFIRMING when mined, credited at the 12th confirmation, REVERSED by a reorg", () =>
    Effect.gen(function*() {
      const catalog = yield* Catalog
      const usdt = catalog.asset(usdtAssetId)!
      const contract = usdt.contract!.toLowerCase() as Hex
      const source = yield* deployToken(anvil, 10n ** 24n)
      yield* cloneTokenAt(anvil, source, contract, sender, 10n ** 12n)
      yield* mine()
      // The watcher starts at the head it first sees: everything before it is history.
      yield* scan

      const tenant = yield* provisionTenant()
      const address = yield* depositAddress(tenant, "alice")
      const to = address.address as Hex
      const ethAmount = parseEther("0.5") + 3n
      const usdtAmount = 5_000_001n
      const ethTx = yield* Effect.promise(() => node.sendTransaction({ account: sender, to, value: ethAmount }))
      const usdtTx = yield* Effect.promise(() =>
        node.sendTransaction({
          account: sender,
          to: contract,
          data: encodeFunctionData({ abi: erc20Artifact.abi, functionName: "transfer", args: [to, usdtAmount] })
        })
      )
      yield* scan
      assert.deepStrictEqual(yield* depositsByAsset(tenant), [], "transactions in the pool are not deposits yet")

      const minedAt = yield* mine()
      yield* scan
      const seen = yield* depositsByAsset(tenant)
      assert.deepStrictEqual(seen.map((deposit) => [deposit.assetId, deposit.status, deposit.amountRaw, deposit.txHash]), [
        ["ETH_SEPOLIA_ETH", "CONFIRMING", ethAmount.toString(), ethTx],
        [usdtAssetId, "CONFIRMING", usdtAmount.toString(), usdtTx]
      ])
      assert.isTrue(seen.every((deposit) => deposit.destination.address === address.address))

      // Block h is confirmation 1: with n = 12 it is credited when the head reaches h + 11.
      yield* mine(10)
      yield* scan
      assert.deepStrictEqual((yield* depositsByAsset(tenant)).map((deposit) => deposit.status), ["CONFIRMING", "CONFIRMING"])
      assert.strictEqual(yield* mine(), minedAt + 11n)
      yield* scan
      const credited = yield* depositsByAsset(tenant)
      assert.lengthOf(credited, 2)
      assertCredited(credited, yield* balances(tenant, address.walletId))

      // A reorganization replacing every block from the deposits' one: their transactions are gone from the chain.
      const head = yield* Effect.promise(() => node.getBlockNumber())
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [Number(head - minedAt + 1n), []] as any }))
      // The background loop may have seen the reorganization first (then this scan rewinds nothing): the outcome,
      // not which scan found it, is what is held.
      yield* scan
      assert.deepStrictEqual((yield* depositsByAsset(tenant)).map((deposit) => deposit.status), ["REVERSED", "REVERSED"])
      assert.deepStrictEqual(yield* balances(tenant, address.walletId), [["ETH_SEPOLIA_ETH", "0"], [usdtAssetId, "0"]])
    }))
})
