/**
 * Which client follows each network, from configuration (docs/deposits.md, "Chain clients"):
 *
 * - any other enabled network runs on the simulated chain when `SIMULATED_CHAINS` is on, and is not watched
 *   otherwise;
 * - an enabled network of any family with a URL in `CHAIN_RPC_URLS` is followed on that node, through its family's
 *   client (NodeClients.ts), once the node proved it is on the catalog's chain;
 * - a URL for a network the catalog does not have, or of a family without a client, fails the start: silently
 *   watching nothing where the operator asked for a node would hide the mistake;
 * - so does a node on another chain than the catalog's, or one that does not answer whose chain it is: the service
 *   would credit deposits it never received there, and sign for the wrong chain.
 */
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { AppConfig, ConfigInvalid } from "../Config.ts"
import { type ChainClient, ChainClients } from "./ChainClient.ts"
import { makeNodeClient } from "./NodeClients.ts"
import { SimulatedChain } from "./simulated/SimulatedChain.ts"

export const chainClientsLayer = Layer.effect(
  ChainClients,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const catalog = yield* Catalog
    const chain = yield* SimulatedChain
    // Optional so the layer's requirements stay as they were; the service always has it (BTC reserves outputs there).
    const sql = Option.getOrUndefined(yield* Effect.serviceOption(SqlClient.SqlClient))
    const clients = new Map<string, ChainClient>()
    const simulated = new Set<string>()
    for (const [networkKey, rpcUrl] of Object.entries(config.chainRpcUrls)) {
      const network = catalog.network(networkKey)
      if (network === undefined) {
        return yield* new ConfigInvalid({ message: `CHAIN_RPC_URLS names ${networkKey}, which is not in the catalog` })
      }
      if (!network.enabled) {
        yield* Effect.logInfo(`${networkKey} has an RPC URL but is disabled in the catalog: not watched`)
        continue
      }
      const client = yield* makeNodeClient({
        network,
        assets: catalog.assets.filter((asset) => asset.networkKey === networkKey),
        rpcUrl,
        sql
      })
      clients.set(networkKey, client)
    }
    if (config.simulatedChains) {
      for (const network of catalog.networks) {
        if (!network.enabled || clients.has(network.networkKey)) continue
        clients.set(network.networkKey, chain.client(network.networkKey))
        simulated.add(network.networkKey)
      }
    }
    // Catalog order, so scans and health reports list networks as the catalog does.
    const networkKeys = catalog.networks.map((network) => network.networkKey).filter((key) => clients.has(key))
    return ChainClients.of({
      get: (networkKey) => clients.get(networkKey),
      networkKeys,
      isSimulated: (networkKey) => simulated.has(networkKey)
    })
  })
)
