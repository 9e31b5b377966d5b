/**
 * The chain client contract on anvil, through the client NodeClients.ts makes for ETH_SEPOLIA (identity check
 * included): ETH and the catalog's USDT (an ERC-20 put at the catalog's contract address), and a token transfer
 * that reverts as the failed-but-included case.
 */
import { Effect, Redacted } from "effect"
import { type Hex, parseEther } from "viem"
import type { CatalogAsset, CatalogNetwork } from "../../../src/catalog/Catalog.ts"
import type { ChainClient } from "../../../src/chains/ChainClient.ts"
import { makeNodeClient } from "../../../src/chains/NodeClients.ts"
import developmentCatalog from "../../../src/catalog/development.json" with { type: "json" }
import { anvilAccounts, cloneTokenAt, deployToken, erc20Artifact, startAnvil } from "../../support/Anvil.ts"
import { chainClientContract, freshWalletAddress } from "./ChainClientContract.ts"

const network = developmentCatalog.networks.find((candidate) => candidate.networkKey === "ETH_SEPOLIA")! as unknown as CatalogNetwork
const assets = developmentCatalog.assets.filter((asset) => asset.networkKey === "ETH_SEPOLIA") as unknown as ReadonlyArray<CatalogAsset>
const usdt = assets.find((asset) => asset.kind === "TOKEN")!
const token = usdt.contract!.toLowerCase() as Hex
const holder = anvilAccounts[0]

const anvil = startAnvil({ chainId: network.evmChainId! })
const node = anvil.client
let client: ChainClient

const mined = async (hash: Hex) => {
  await node.mine({ blocks: 1 })
  const receipt = await node.getTransactionReceipt({ hash })
  return { txHash: hash as string, height: receipt.blockNumber }
}

const sendToken = (to: string, amount: bigint) =>
  node.writeContract({
    account: holder,
    address: token,
    abi: erc20Artifact.abi,
    functionName: "transfer",
    args: [to as Hex, amount]
  })

chainClientContract({
  name: "anvil (EVM JSON-RPC)",
  network,
  assets,
  start: async () => {
    await Effect.runPromise(anvil.ready)
    const source = await Effect.runPromise(deployToken(anvil, 10n ** 30n))
    await Effect.runPromise(cloneTokenAt(anvil, source, token, holder, 10n ** 30n))
    client = await Effect.runPromise(makeNodeClient({ network, assets, rpcUrl: Redacted.make(anvil.url) }))
  },
  stop: async () => anvil.stop(),
  client: () => client,
  freshAddress: () => freshWalletAddress(network),
  pay: async (to, assetId, amount) =>
    mined(assetId === usdt.assetId ? await sendToken(to, amount) : await node.sendTransaction({ account: holder, to: to as Hex, value: amount })),
  mine: (count) => node.mine({ blocks: count }),
  reorg: async (depth) => {
    await node.request({ method: "anvil_reorg" as never, params: [depth, []] as never })
    await node.mine({ blocks: 1 })
  },
  fundHot: async (assetId, amount) => {
    const hot = (await import("./ChainClientContract.ts")).hotAddress(network)
    if (assetId === usdt.assetId) {
      await mined(await sendToken(await hot, amount))
    } else {
      const address = (await hot) as Hex
      await node.setBalance({ address, value: (await node.getBalance({ address })) + amount })
    }
  },
  // More than HOT holds: the token's transfer reverts, and the node still includes it (the client sends a call that
  // would revert with a fixed gas, decisions.md: the chain decides).
  failingTransfer: async (hot) => ({ from: hot, to: await freshWalletAddress(network), assetId: usdt.assetId, amount: 10n ** 29n }),
  smallAmount: (assetId) => assetId === usdt.assetId ? 1_000_000n : parseEther("0.001")
})
