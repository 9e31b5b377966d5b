/**
 * The chain client contract on a Solana JSON-RPC front over litesvm (test/support/SolanaRpcFront.ts: every
 * transaction executed by a real SVM), through the client NodeClients.ts makes for SOL_DEVNET (genesis hash check
 * included): SOL and the catalog's USDC (a Token-program mint put at the catalog's mint address), and a token
 * transfer above HOT's balance as the failed-but-included case (sent with skipPreflight, so the chain records its
 * meta.err and charges its fee).
 */
import { Effect, Redacted } from "effect"
import type { CatalogAsset, CatalogNetwork } from "../../../src/catalog/Catalog.ts"
import type { ChainClient } from "../../../src/chains/ChainClient.ts"
import { makeNodeClient } from "../../../src/chains/NodeClients.ts"
import developmentCatalog from "../../../src/catalog/development.json" with { type: "json" }
import { type SolanaRpcFront, startSolanaRpcFront } from "../../support/SolanaRpcFront.ts"
import { chainClientContract, freshWalletAddress, hotAddress } from "./ChainClientContract.ts"

const catalogNetwork = developmentCatalog.networks.find((candidate) => candidate.networkKey === "SOL_DEVNET")! as unknown as CatalogNetwork
const assets = developmentCatalog.assets.filter((asset) => asset.networkKey === "SOL_DEVNET") as unknown as ReadonlyArray<CatalogAsset>
const usdc = assets.find((asset) => asset.kind === "TOKEN")!
const mint = usdc.contract!

let front: SolanaRpcFront
let client: ChainClient
// The catalog names no genesis hash for devnet; this run names the front's, so the identity check compares.
let network: CatalogNetwork = catalogNetwork

const pay = async (to: string, assetId: string, amount: bigint) => {
  const paid = assetId === usdc.assetId ? front.payToken(to, mint, amount) : front.paySol(to, amount)
  return { txHash: paid.signature, height: BigInt(paid.height) }
}

chainClientContract({
  name: "litesvm behind a Solana JSON-RPC front",
  get network() {
    return network
  },
  assets,
  start: async () => {
    front = await startSolanaRpcFront({ basicAuth: { user: "coffer", password: "s3cret" } })
    front.createMint(mint, usdc.decimals)
    network = { ...catalogNetwork, genesisHash: front.genesisHash }
    const url = front.url.replace("http://", "http://coffer:s3cret@")
    client = await Effect.runPromise(makeNodeClient({ network, assets, rpcUrl: Redacted.make(url) }))
  },
  stop: async () => front.close(),
  client: () => client,
  freshAddress: () => freshWalletAddress(network),
  pay,
  mine: async (count) => front.mine(count),
  reorg: async (depth) => front.reorg(depth),
  fundHot: async (assetId, amount) => {
    await pay(await hotAddress(network), assetId, amount)
  },
  // More than HOT holds: the Token program fails the TransferChecked (InsufficientFunds), and the chain includes it.
  failingTransfer: async (hot) => ({ from: hot, to: await freshWalletAddress(network), assetId: usdc.assetId, amount: 10n ** 15n }),
  smallAmount: (assetId) => assetId === usdc.assetId ? 1_000_000n : 10_000_000n
})
