/**
 * Which client follows each network (docs/deposits.md, "Chain clients"): CHAIN_RPC_URLS picks the EVM RPC client,
 * the simulated chain covers the rest only when SIMULATED_CHAINS is on, and a URL the service cannot use fails the
 * start with a message that never repeats the URL. A configured node is asked its chain id at start (decisions.md,
 * "Sending on real networks"): these tests run anvil nodes on the catalog's chain ids and one on another chain, and
 * TRON stand-ins on Nile and on mainnet (block 0 against the catalog's genesis hash).
 */
import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { Effect, Layer, Redacted } from "effect"
import { Catalog, loadCatalogFile } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { chainClientsLayer } from "../../src/chains/ChainClientsLayer.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig, type AppConfigShape, parseChainRpcUrls } from "../../src/Config.ts"
import { startAnvil } from "../support/Anvil.ts"
import { startTronNode } from "../support/TronNode.ts"

const sepolia = startAnvil({ chainId: 11155111 })
const bscTestnet = startAnvil({ chainId: 97 })
const otherChain = startAnvil()
beforeAll(() => Effect.runPromise(Effect.all([sepolia.ready, bscTestnet.ready, otherChain.ready], { concurrency: "unbounded" })))
const tronMainnetGenesis = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc"
const tronNile = await startTronNode()
const tronMainnet = await startTronNode({ genesisBlockId: tronMainnetGenesis })
afterAll(() => Promise.all([tronNile.stop(), tronMainnet.stop()]))

const secretUrl = "https://node.example/v3/secret-api-key"

/** Building the layer asks each configured node its chain id, nothing else. The simulated chain is never used here. */
const build = (overrides: Partial<AppConfigShape>) =>
  Effect.gen(function*() {
    const catalog = Catalog.make(yield* loadCatalogFile("preproduction"))
    const simulated = SimulatedChain.of({
      transfer: () => Effect.die("unused"),
      mine: () => Effect.die("unused"),
      reorg: () => Effect.die("unused"),
      state: () => Effect.die("unused"),
      configure: () => Effect.die("unused"),
      balance: () => Effect.die("unused"),
      balances: () => Effect.die("unused"),
      hold: () => Effect.die("unused"),
      setNodeDown: () => Effect.die("unused"),
      client: (networkKey) => ({
        networkKey,
        startFromGenesis: true,
        head: Effect.die("unused"),
        block: () => Effect.die("unused"),
        transactionState: () => Effect.die("unused")
      })
    })
    return yield* Effect.service(ChainClients).pipe(
      Effect.provide(chainClientsLayer.pipe(
        Layer.provide(Layer.mergeAll(
          AppConfig.layerTest(overrides),
          Layer.succeed(Catalog)(catalog),
          Layer.succeed(SimulatedChain)(simulated)
        ))
      ))
    )
  })

describe("chain clients per configuration", () => {
  it.live("an EVM network with a URL is on the RPC client; the others on the simulated chain when it is on", () =>
    Effect.gen(function*() {
      const clients = yield* build({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(sepolia.url) } })
      assert.deepStrictEqual(clients.networkKeys, ["ETH_SEPOLIA", "BSC_TESTNET", "TRON_NILE", "BTC_TESTNET", "SOL_DEVNET"])
      assert.isFalse(clients.isSimulated("ETH_SEPOLIA"))
      assert.isFalse(clients.get("ETH_SEPOLIA")!.startFromGenesis)
      assert.isTrue(clients.isSimulated("BSC_TESTNET"))
    }))

  it.live("without the simulated chain only the configured network is watched", () =>
    Effect.gen(function*() {
      const clients = yield* build({ simulatedChains: false, chainRpcUrls: { BSC_TESTNET: Redacted.make(bscTestnet.url) } })
      assert.deepStrictEqual(clients.networkKeys, ["BSC_TESTNET"])
      assert.isUndefined(clients.get("ETH_SEPOLIA"))
    }))

  it.effect("a URL for an unknown network fails the start, naming the network and not the URL", () =>
    Effect.gen(function*() {
      const unknown = yield* Effect.flip(build({ chainRpcUrls: { ETH_MAINNET: Redacted.make(secretUrl) } }))
      assert.strictEqual(unknown._tag, "ConfigInvalid")
      assert.include(unknown.message, "ETH_MAINNET")
      assert.notInclude(unknown.message, "secret-api-key")
    }))

  it.live("a TRON node whose block 0 is not the catalog's genesis hash fails the start, naming both; Nile's is followed", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(build({ chainRpcUrls: { TRON_NILE: Redacted.make(tronMainnet.url) } }))
      assert.strictEqual(error._tag, "ConfigInvalid")
      assert.include(error.message, "TRON_NILE")
      assert.include(error.message, `genesis block ${tronMainnetGenesis}`)
      assert.include(error.message, tronNile.genesisBlockId)
      const clients = yield* build({ chainRpcUrls: { TRON_NILE: Redacted.make(tronNile.url) } })
      assert.isFalse(clients.isSimulated("TRON_NILE"))
    }))

  it.live("a node on another chain than the catalog's fails the start, naming both chain ids", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(build({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(otherChain.url) } }))
      assert.strictEqual(error._tag, "ConfigInvalid")
      assert.include(error.message, "ETH_SEPOLIA")
      assert.include(error.message, "chain id 31337")
      assert.include(error.message, "chain id 11155111")
      // The catalog's other EVM network on that same node: its own id is named.
      const bsc = yield* Effect.flip(build({ chainRpcUrls: { BSC_TESTNET: Redacted.make(sepolia.url) } }))
      assert.include(bsc.message, "chain id 11155111, the catalog's BSC_TESTNET is chain id 97")
    }))

  it.live("a node that cannot say its chain fails the start after a few attempts, without repeating the URL", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(build({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(`${secretUrl.replace("https://node.example", "http://127.0.0.1:9")}`) } }))
      assert.strictEqual(error._tag, "ConfigInvalid")
      assert.include(error.message, "ETH_SEPOLIA")
      assert.include(error.message, "did not say which chain")
      assert.notInclude(error.message, "secret-api-key")
    }), 30_000)

  it.effect("CHAIN_RPC_URLS: a JSON object of http(s) URLs, kept Redacted; bad input never echoed", () =>
    Effect.gen(function*() {
      const urls = yield* parseChainRpcUrls(JSON.stringify({ ETH_SEPOLIA: secretUrl }))
      assert.strictEqual(Redacted.value(urls.ETH_SEPOLIA!), secretUrl)
      assert.notInclude(String(urls.ETH_SEPOLIA), "secret")
      for (const text of [`{"ETH_SEPOLIA": "ftp://secret-api-key"}`, `secret-api-key`, `["secret-api-key"]`, `{"A": 1}`]) {
        const error = yield* Effect.flip(parseChainRpcUrls(text))
        assert.strictEqual(error._tag, "ConfigInvalid")
        assert.notInclude(error.message, "secret-api-key")
      }
    }))
})
