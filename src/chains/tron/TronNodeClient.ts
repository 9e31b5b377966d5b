/**
 * The TRON entry of chains/NodeClients.ts: the client of a network named in `CHAIN_RPC_URLS`, and the start-up check
 * that its node is on the catalog's chain (block 0's id, compared where the catalog names a `genesisHash`).
 */
import { Effect } from "effect"
import { tokenContracts } from "../../catalog/Catalog.ts"
import type { NodeClientFactory } from "../NodeClients.ts"
import { makeTronChainClient, type TronChainClient } from "./TronChainClient.ts"

export const tronNodeClientFactory: NodeClientFactory = {
  make: ({ assets, network, rpcUrl }) =>
    makeTronChainClient({
      networkKey: network.networkKey,
      rpcUrl,
      nativeAssetId: network.nativeAssetId,
      tokens: tokenContracts(assets).map(({ assetId, contract }) => ({ assetId, contract })),
      sending: { feeRateCap: network.feeRateCap }
    }),
  // Block 0 is read even when the catalog names no genesis hash: a node that cannot answer it is not used.
  identityMismatch: (client, network) =>
    Effect.map(
      (client as TronChainClient).genesisBlockId,
      (reported) =>
        network.genesisHash == null || reported === network.genesisHash.toLowerCase()
          ? undefined
          : `genesis block ${reported}, the catalog's ${network.networkKey} has genesis block ${network.genesisHash}`
    )
}
