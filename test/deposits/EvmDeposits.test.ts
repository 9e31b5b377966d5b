/**
 * Deposits end to end on a real EVM node (docs/deposits.md, "EVM over JSON-RPC"): the whole service with
 * `CHAIN_RPC_URLS` pointing ETH_SEPOLIA at a local anvil node (chain id 31337: the client follows blocks and does not
 * check the chain id). ETH and the catalog's ETH_SEPOLIA_USDT sent to a tenant's deposit address are recorded
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
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { anvilAccounts, cloneTokenAt, deployToken, erc20Artifact, startAnvil } from "../support/Anvil.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const sender = anvilAccounts[0]
const usdtAssetId = "ETH_SEPOLIA_USDT"

beforeAll(() => Effect.runPromise(anvil.ready))

const get = (tenant: TestTenant, target: string) => rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })
const post = (tenant: TestTenant, target: string, body: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant })

const deposits = (tenant: TestTenant) =>
  Effect.map(get(tenant, "/v1/transactions?kind=DEPOSIT"), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return (response.json.items as Array<any>).toSorted((a, b) => a.assetId.localeCompare(b.assetId))
  })

const balances = (tenant: TestTenant, walletId: string) =>
  Effect.map(get(tenant, `/v1/wallets/${walletId}/assets`), (response) => response.json as Array<any>)

const mine = (blocks = 1) => Effect.promise(async () => {
  await node.mine({ blocks })
  return node.getBlockNumber()
})

/** Scans now rather than waiting for the background loop (which may scan too: scans of a network never overlap). */
const scan = Effect.gen(function*() {
  const watcher = yield* DepositWatcher
  return yield* watcher.scan("ETH_SEPOLIA")
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
      const address = yield* Effect.map(post(tenant, "/v1/users/alice/deposit_address", { networkKey: "ETH_SEPOLIA" }), (response) => {
        assert.strictEqual(response.json.status, "READY", response.text)
        return { walletId: response.json.walletId as string, address: response.json.address as Hex }
      })
      const ethAmount = parseEther("0.5") + 3n
      const usdtAmount = 5_000_001n
      const ethTx = yield* Effect.promise(() => node.sendTransaction({ account: sender, to: address.address, value: ethAmount }))
      const usdtTx = yield* Effect.promise(() =>
        node.sendTransaction({
          account: sender,
          to: contract,
          data: encodeFunctionData({ abi: erc20Artifact.abi, functionName: "transfer", args: [address.address, usdtAmount] })
        })
      )
      yield* scan
      assert.deepStrictEqual(yield* deposits(tenant), [], "transactions in the pool are not deposits yet")

      const minedAt = yield* mine()
      yield* scan
      const seen = yield* deposits(tenant)
      assert.deepStrictEqual(seen.map((deposit) => [deposit.assetId, deposit.status, deposit.amountRaw, deposit.txHash]), [
        ["ETH_SEPOLIA_ETH", "CONFIRMING", ethAmount.toString(), ethTx],
        [usdtAssetId, "CONFIRMING", usdtAmount.toString(), usdtTx]
      ])
      assert.isTrue(seen.every((deposit) => deposit.destination.address === address.address))

      // Block h is confirmation 1: with n = 12 it is credited when the head reaches h + 11.
      yield* mine(10)
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["CONFIRMING", "CONFIRMING"])
      assert.strictEqual(yield* mine(), minedAt + 11n)
      yield* scan
      const credited = yield* deposits(tenant)
      assert.deepStrictEqual(credited.map((deposit) => [deposit.status, deposit.subStatus]), [
        ["COMPLETED", null],
        ["COMPLETED", null]
      ])
      for (const deposit of credited) {
        assert.strictEqual(BigInt(deposit.netAmountRaw), BigInt(deposit.amountRaw) - BigInt(deposit.feeRaw))
      }
      assert.deepStrictEqual(
        (yield* balances(tenant, address.walletId)).map((balance) => [balance.assetId, balance.available]).toSorted(),
        credited.map((deposit) => [deposit.assetId, deposit.netAmountRaw])
      )

      // A reorganization replacing every block from the deposits' one: their transactions are gone from the chain.
      const head = yield* Effect.promise(() => node.getBlockNumber())
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [Number(head - minedAt + 1n), []] as any }))
      // The background loop may have seen the reorganization first (then this scan rewinds nothing): the outcome,
      // not which scan found it, is what is held.
      yield* scan
      assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["REVERSED", "REVERSED"])
      assert.deepStrictEqual(
        (yield* balances(tenant, address.walletId)).map((balance) => [balance.assetId, balance.available]).toSorted(),
        [["ETH_SEPOLIA_ETH", "0"], [usdtAssetId, "0"]]
      )
    }))
})
