/**
 * The SOL entry of chains/NodeClients.ts: the client of a network named in `CHAIN_RPC_URLS`, and the start-up check
 * that its node is on the catalog's cluster (`getGenesisHash`, compared where the catalog names a `genesisHash`).
 */
import { Effect } from "effect"
import { tokenContracts } from "../../catalog/Catalog.ts"
import type { NodeClientFactory } from "../NodeClients.ts"
import { makeSolChainClient, type SolChainClient } from "./SolChainClient.ts"

export const solNodeClientFactory: NodeClientFactory = {
  make: ({ assets, network, rpcUrl }) =>
    makeSolChainClient({
      networkKey: network.networkKey,
      rpcUrl,
      nativeAssetId: network.nativeAssetId,
      tokens: tokenContracts(assets).map(({ asset, assetId, contract }) =>
        ({ assetId, mint: contract, programId: asset.tokenProgram ?? undefined })),
      feeRateCap: network.feeRateCap
    }),
  // The node must answer `getGenesisHash` (which cluster it is on); compared only where the catalog names one.
  identityMismatch: (client, network) =>
    Effect.map(
      (client as SolChainClient).genesisHash,
      (reported) =>
        network.genesisHash == null || reported === network.genesisHash
          ? undefined
          : `genesis hash ${reported}, the catalog's ${network.networkKey} has genesis hash ${network.genesisHash}`
    )
}
