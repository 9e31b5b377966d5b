/**
 * The EVM entry of chains/NodeClients.ts: the client of a network named in `CHAIN_RPC_URLS`, and the start-up check
 * that its node is on the catalog's chain (`eth_chainId` against the catalog's `evmChainId`; signatures commit to it).
 */
import { Effect } from "effect"
import { tokenContracts } from "../../catalog/Catalog.ts"
import type { NodeClientFactory } from "../NodeClients.ts"
import { makeEvmChainClient } from "./EvmChainClient.ts"

export const evmNodeClientFactory: NodeClientFactory = {
  make: ({ assets, network, rpcUrl }) =>
    makeEvmChainClient({
      networkKey: network.networkKey,
      rpcUrl,
      nativeAssetId: network.nativeAssetId,
      tokens: tokenContracts(assets).map(({ assetId, contract }) => ({ assetId, contract })),
      // Checked against the node before the client is used; signatures commit to the catalog's id.
      sending: { chainId: network.evmChainId!, feeRateCap: network.feeRateCap }
    }),
  identityMismatch: (client, network) =>
    Effect.map(
      (client as ReturnType<typeof makeEvmChainClient>).chainId,
      (reported) => reported === network.evmChainId ? undefined : `chain id ${reported}, the catalog's ${network.networkKey} is chain id ${network.evmChainId}`
    )
}
