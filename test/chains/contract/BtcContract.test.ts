/**
 * The chain client contract (ChainClientContract.ts, issue 11) on the BTC client (chains/btc) against a regtest
 * Litecoin Core 0.21 node standing in for Bitcoin Core (docs/btc.md). The catalog's BTC_TESTNET is a `test` network:
 * the service spells its addresses `tb1...`, the node the same scripts `rltc1...`; the client matches by script.
 * Coin selection reserves outputs in this file's PostgreSQL (sql/0018_btc_outputs.sql), as in the service.
 *
 * Also here: the node identity check of NodeClients.ts (decisions.md "Sending on real networks": a node on another
 * chain than the catalog's refuses the start, naming both; a BTC testnet network accepts a regtest node).
 */
import { assert, describe, it } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { type CatalogFile, type CatalogNetwork, loadCatalogFile } from "../../../src/catalog/Catalog.ts"
import { bitcoinNetworks } from "../../../src/chains/BitcoinNetwork.ts"
import type { ChainClient } from "../../../src/chains/ChainClient.ts"
import { makeNodeClient } from "../../../src/chains/NodeClients.ts"
import * as Database from "../../../src/db/Database.ts"
import { startLitecoind } from "../../support/Litecoind.ts"
import { chainClientContract, hotAddress } from "./ChainClientContract.ts"

const node = startLitecoind()
const networkKey = "BTC_TESTNET"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect as Effect.Effect<A, never>)

const catalog: CatalogFile = await run(loadCatalogFile("preproduction"))
const network: CatalogNetwork = catalog.networks.find((candidate) => candidate.networkKey === networkKey)!
let client: ChainClient
let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown> | undefined

describe("BTC node identity (NodeClients.ts)", () => {
  const check = (btcNetwork: "main" | "test" | "regtest") =>
    Effect.gen(function*() {
      yield* Effect.promise(() => node.ready)
      const file = yield* loadCatalogFile("preproduction").pipe(Effect.orDie)
      const testnet = file.networks.find((candidate) => candidate.networkKey === networkKey)!
      return yield* makeNodeClient({
        network: { ...testnet, btcNetwork },
        assets: [],
        rpcUrl: Redacted.make(node.url)
      }).pipe(Effect.flip, Effect.map((error) => error.message), Effect.orElseSucceed(() => "accepted"))
    })

  it.live("a testnet (and a regtest) network accepts the regtest node", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* check("test"), "accepted")
      assert.strictEqual(yield* check("regtest"), "accepted")
    }), 60_000)

  it.live("a mainnet network refuses it, naming both chains and never the URL with its password", () =>
    Effect.gen(function*() {
      const message = yield* check("main")
      assert.include(message, `chain "regtest"`)
      assert.include(message, "BTC_TESTNET is a main network")
      assert.notInclude(message, "regtest-password")
    }), 60_000)
})

chainClientContract({
  name: "litecoind regtest (BTC_TESTNET)",
  network,
  assets: catalog.assets.filter((asset) => asset.networkKey === networkKey),
  start: async () => {
    await node.ready
    runtime = ManagedRuntime.make(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!)))
    const sql = await runtime.runPromise(Effect.gen(function*() {
      return yield* SqlClient.SqlClient
    }))
    // The reservations refer to the catalog's network row, which the service's Catalog layer writes at start.
    await run(sql`
      INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
        withdraw_enabled, new_wallets_enabled, confirmations, btc_network, native_asset_id)
      VALUES (${networkKey}, 'BTC', 'Bitcoin Testnet', true, true, true, true, true, '{"mode":"confirmations","n":2}'::jsonb,
        'test', ${network.nativeAssetId})
      ON CONFLICT (network_key) DO NOTHING`)
    // Through NodeClients.ts, as the service makes it (the node's identity checked first).
    client = await run(makeNodeClient({
      network,
      assets: catalog.assets.filter((asset) => asset.networkKey === networkKey),
      rpcUrl: Redacted.make(node.url),
      sql
    }))
  },
  // The node goes after the file (Litecoind.ts).
  stop: async () => {
    await runtime?.dispose()
  },
  client: () => client,
  // A P2WPKH address of 20 random bytes: nobody holds its key.
  freshAddress: async () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network: bitcoinNetworks.test }).address!,
  pay: (to, _assetId, amount) => node.pay(to, "test", amount),
  mine: (count) => node.mine(count),
  reorg: (depth) => node.reorg(depth),
  fundHot: async (_assetId, amount) => {
    await node.pay(await hotAddress(network), "test", amount)
  },
  smallAmount: () => 100_000n
})
