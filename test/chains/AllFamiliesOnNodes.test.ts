/**
 * Honest networks with every family on a real node interface (issue 11, "Honest networks"; decisions.md "Sending on
 * real networks"): the service is started with SIMULATED_CHAINS off and one node per family in CHAIN_RPC_URLS
 * (anvil, litecoind regtest, the TRON HTTP stand-in, the Solana JSON-RPC front over litesvm). Each configured network
 * has a client that watches and sends, so its assets show `networkDepositEnabled` and `networkWithdrawEnabled`, its
 * wallets' address items are `ACTIVE` once its watcher follows the head, and a deposit address is handed out; the one
 * network left without a node (BSC_TESTNET) shows neither, and hands out no address.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { startAnvil } from "../support/Anvil.ts"
import { call } from "../support/Funds.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { startTronNode, type TronNode } from "../support/TronNode.ts"

// The in-process nodes start before the layer is built: it needs their URLs.
const anvil = startAnvil({ chainId: 11155111 })
const litecoind = startLitecoind()
const solana: SolanaRpcFront = await startSolanaRpcFront()
const tron: TronNode = await startTronNode()

beforeAll(async () => {
  await Effect.runPromise(anvil.ready)
  await litecoind.ready
}, 120_000)
afterAll(async () => {
  await solana.close()
  await tron.stop()
})

/** The networks given a node here, with their family. */
const followed = { ETH_SEPOLIA: "EVM", TRON_NILE: "TRON", BTC_TESTNET: "BTC", SOL_DEVNET: "SOL" } as const

const appLayer = makeTestAppLayer({
  simulatedChains: false,
  chainRpcUrls: {
    ETH_SEPOLIA: Redacted.make(anvil.url),
    BTC_TESTNET: Redacted.make(litecoind.url),
    TRON_NILE: Redacted.make(tron.url),
    SOL_DEVNET: Redacted.make(solana.url)
  }
})

layer(appLayer, { excludeTestServices: true, timeout: 120_000 })(
  "every family on its node: honest networks",
  (it) => {
    it.effect("each configured network has a real client that watches and sends; the one without a node has none", () =>
      Effect.gen(function*() {
        const clients = yield* ChainClients
        assert.sameMembers([...clients.networkKeys], Object.keys(followed))
        for (const networkKey of Object.keys(followed)) {
          assert.isFalse(clients.isSimulated(networkKey), networkKey)
          assert.isDefined(clients.get(networkKey)?.withdrawals, `${networkKey} sends`)
        }
        assert.isUndefined(clients.get("BSC_TESTNET"))
        const tenant = yield* provisionTenant()
        const assets = (yield* call(tenant, "GET", "/v1/supported_assets")).json as Array<any>
        for (const asset of assets) {
          const on = asset.networkKey in followed
          assert.deepStrictEqual(
            [asset.networkDepositEnabled, asset.networkWithdrawEnabled],
            [on, on],
            `${asset.assetId}: deposits and withdrawals follow the client`
          )
        }
      }))

    it.effect("once each watcher follows its head, every family's deposit address is handed out ACTIVE; BSC_TESTNET's is not", () =>
      Effect.gen(function*() {
        const watcher = yield* DepositWatcher
        for (const networkKey of Object.keys(followed)) yield* watcher.scan(networkKey)
        const tenant = yield* provisionTenant()
        for (const [networkKey, family] of Object.entries(followed)) {
          const deposit = yield* call(tenant, "POST", "/v1/users/honest/deposit_address", { networkKey })
          assert.strictEqual(deposit.status, 200, deposit.text)
          assert.strictEqual(deposit.json.status, "READY", `${networkKey}: ${deposit.text}`)
          assert.isString(deposit.json.address)
          const items = (yield* call(tenant, "GET", `/v1/wallets/${deposit.json.walletId}/addresses`)).json as Array<any>
          const item = items.find((entry) => entry.networkKey === networkKey)
          assert.strictEqual(item?.watchStatus, "ACTIVE", `${family} ${networkKey}: ${JSON.stringify(items)}`)
          assert.strictEqual(item?.address, deposit.json.address)
        }
        const bsc = yield* call(tenant, "POST", "/v1/users/honest/deposit_address", { networkKey: "BSC_TESTNET" })
        assert.deepStrictEqual([bsc.json.address, bsc.json.status], [null, "PROVISIONING"], bsc.text)
      }))
  }
)
