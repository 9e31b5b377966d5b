/**
 * The chain client contract (ChainClientContract.ts) on the TRON client against the java-tron HTTP API stand-in
 * (test/support/TronNode.ts; no TRON node runs here, docs/tron.md). The stand-in hosts the catalog's TRON_NILE_USDT
 * at its real Nile address, so the preproduction catalog is used as is; the client is made by NodeClients.ts, as
 * the service makes it. The failing withdrawal is a USDT transfer beyond HOT's balance: included as REVERT, its
 * energy burned (decisions.md "Sending on real networks").
 */
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect, Redacted } from "effect"
import { TronWeb } from "tronweb"
import { loadCatalogFile } from "../../../src/catalog/Catalog.ts"
import type { ChainClient } from "../../../src/chains/ChainClient.ts"
import { tronNodeClientFactory } from "../../../src/chains/tron/TronNodeClient.ts"
import { startTronNode, type TronNode } from "../../support/TronNode.ts"
import { chainClientContract, type ContractNode, hotAddress } from "./ChainClientContract.ts"

const catalog = await Effect.runPromise(loadCatalogFile("preproduction"))
const network = catalog.networks.find((candidate) => candidate.networkKey === "TRON_NILE")!
const assets = catalog.assets.filter((asset) => asset.networkKey === "TRON_NILE")
  .toSorted((a, b) => (a.kind === "NATIVE" ? -1 : b.kind === "NATIVE" ? 1 : 0))
const usdt = assets.find((asset) => asset.kind === "TOKEN")!

let node: TronNode
let client: ChainClient

const freshAddress = async () => TronWeb.address.fromPrivateKey(bytesToHex(secp256k1.utils.randomSecretKey())) as string

const tronStandIn: ContractNode = {
  name: "java-tron HTTP API stand-in",
  network,
  assets,
  start: async () => {
    node = await startTronNode({ tokens: [{ contract: usdt.contract!, supply: 10n ** 15n }] })
    client = tronNodeClientFactory.make({ network, assets, rpcUrl: Redacted.make(node.url) })
  },
  stop: () => node.stop(),
  client: () => client,
  freshAddress,
  pay: (to, assetId, amount) => node.fund(to, amount, assetId === usdt.assetId ? usdt.contract! : undefined),
  mine: async (count) => node.mine(count),
  reorg: async (depth) => node.reorg(depth),
  fundHot: async (assetId, amount) => {
    await node.fund(await hotAddress(network), amount, assetId === usdt.assetId ? usdt.contract! : undefined)
  },
  failingTransfer: async (hot) => ({
    from: hot,
    to: await freshAddress(),
    assetId: usdt.assetId,
    amount: node.tokenBalance(usdt.contract!, hot) + 1n
  }),
  smallAmount: (assetId) => (assetId === usdt.assetId ? 2_500_000n : 5_000_000n)
}

chainClientContract(tronStandIn)
