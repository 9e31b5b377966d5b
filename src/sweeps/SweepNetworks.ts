/**
 * The networks that sweep (docs/sweeps.md "Which networks sweep"): EVM, TRON and SOL networks whose client is a real node
 * that sends and reads balances; and what sweeps and gas wallets ask of such a network's fees.
 */
import { Effect } from "effect"
import type { Catalog, CatalogNetwork } from "../catalog/Catalog.ts"
import type { ChainClient, ChainClients, ChainUnavailable, WithdrawalChain } from "../chains/ChainClient.ts"
import { nativeTransferGas } from "../chains/evm/EvmGas.ts"
import { lamportsPerSignature } from "../chains/sol/SolWithdrawals.ts"

/** One network's sending side, as sweeps need it. */
export interface SweepNetwork {
  readonly network: CatalogNetwork
  readonly client: ChainClient
  readonly chain: WithdrawalChain
  readonly balance: (address: string, assetId: string) => Effect.Effect<bigint, ChainUnavailable>
}

/** decisions.md: EVM, TRON and SOL sweep; BTC has no sweeps (its withdrawals spend credited deposit outputs). */
const sweepingFamilies = new Set(["EVM", "TRON", "SOL"])

export const sweepNetworks = (
  clients: ChainClients["Service"],
  catalog: Catalog["Service"]
): ReadonlyMap<string, SweepNetwork> => {
  const networks = new Map<string, SweepNetwork>()
  for (const networkKey of clients.networkKeys) {
    const client = clients.get(networkKey)
    const network = catalog.network(networkKey)
    const chain = client?.withdrawals
    if (client === undefined || network === undefined || chain?.balance === undefined) continue
    if (clients.isSimulated(networkKey) || !sweepingFamilies.has(network.chainFamily)) continue
    networks.set(networkKey, { network, client, chain, balance: chain.balance })
  }
  return networks
}

/** maxFeePerGas now: the node's fee for a plain transfer is exactly 21,000 × it (chains/evm/EvmWithdrawals). */
export const maxFeePerGas = (context: SweepNetwork) =>
  Effect.map(context.chain.networkFee(context.network.nativeAssetId), (fee) => fee / nativeTransferGas)

/**
 * One token sweep's cost to a GAS wallet at current fees: the sweep's fee (at the nominal ERC-20 transfer gas) plus
 * the top-up's own (on SOL, where GAS pays the sweep's fee directly, its second signature), priced on the network's
 * first catalog token; 0 on a network without tokens.
 */
export const tokenSweepCost = (context: SweepNetwork, catalog: Catalog["Service"]) =>
  Effect.gen(function*() {
    const token = catalog.assets.find((asset) =>
      asset.networkKey === context.network.networkKey && asset.kind === "TOKEN"
    )
    if (token === undefined) return 0n
    // SOL: no top-up; the GAS wallet pays the sweep itself, which carries its signature beside the address's (one
    // more 5,000 lamports), priced as creating the destination's token account (docs/sol.md).
    if (context.network.chainFamily === "SOL") return (yield* context.chain.networkFee(token.assetId)) + lamportsPerSignature
    return (yield* context.chain.networkFee(token.assetId)) +
      (yield* context.chain.networkFee(context.network.nativeAssetId))
  })
