/**
 * Which client follows each network, from configuration (docs/deposits.md, "Chain clients"):
 *
 * - an enabled EVM network with a URL in `CHAIN_RPC_URLS` is followed on that node (chains/evm/);
 * - any other enabled network runs on the simulated chain when `SIMULATED_CHAINS` is on, and is not watched
 *   otherwise;
 * - a URL for a network the catalog does not have, or for a non-EVM network (whose RPC clients are not built),
 *   fails the start: silently watching nothing where the operator asked for a node would hide the mistake;
 * - so does a node on another chain than the catalog's (decisions.md, "Sending on real networks": EVM
 *   `eth_chainId` against the catalog's `evmChainId`), or one that does not answer whose chain it is: the service
 *   would credit deposits it never received there, and sign for the wrong chain.
 */
import { Effect, Layer, Schedule } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { AppConfig, ConfigInvalid } from "../Config.ts"
import { type ChainClient, ChainClients } from "./ChainClient.ts"
import { makeEvmChainClient } from "./evm/EvmChainClient.ts"
import { SimulatedChain } from "./simulated/SimulatedChain.ts"

/** A node that does not answer `eth_chainId` at start is asked this many times, this far apart, before the start fails. */
export const chainIdAttemptsMax = 3
export const chainIdRetryMillis = 1_000

export const chainClientsLayer = Layer.effect(
  ChainClients,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const catalog = yield* Catalog
    const chain = yield* SimulatedChain
    const clients = new Map<string, ChainClient>()
    const simulated = new Set<string>()
    for (const [networkKey, rpcUrl] of Object.entries(config.chainRpcUrls)) {
      const network = catalog.network(networkKey)
      if (network === undefined) {
        return yield* new ConfigInvalid({ message: `CHAIN_RPC_URLS names ${networkKey}, which is not in the catalog` })
      }
      if (network.chainFamily !== "EVM") {
        return yield* new ConfigInvalid({
          message: `CHAIN_RPC_URLS names ${networkKey}, a ${network.chainFamily} network: only EVM networks have an RPC client`
        })
      }
      if (!network.enabled) {
        yield* Effect.logInfo(`${networkKey} has an RPC URL but is disabled in the catalog: not watched`)
        continue
      }
      const client = makeEvmChainClient({
        networkKey,
        rpcUrl,
        nativeAssetId: network.nativeAssetId,
        tokens: catalog.assets
          .filter((asset) => asset.networkKey === networkKey && asset.kind === "TOKEN" && asset.contract !== null)
          .map((asset) => ({ assetId: asset.assetId, contract: asset.contract! })),
        // Checked against the node below before the client is used; signatures commit to the catalog's id.
        sending: { chainId: network.evmChainId!, feeRateCap: network.feeRateCap }
      })
      const reported = yield* client.chainId.pipe(
        Effect.retry({ schedule: Schedule.spaced(chainIdRetryMillis), times: chainIdAttemptsMax - 1 }),
        Effect.mapError((error) =>
          new ConfigInvalid({
            message: `CHAIN_RPC_URLS: the node for ${networkKey} did not say which chain it is on (${error.message}); ` +
              `refusing to start rather than follow an unverified chain`
          })
        )
      )
      if (reported !== network.evmChainId) {
        return yield* new ConfigInvalid({
          message: `CHAIN_RPC_URLS: the node for ${networkKey} is on chain id ${reported}, the catalog's ${networkKey} ` +
            `is chain id ${network.evmChainId}: refusing to start`
        })
      }
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
