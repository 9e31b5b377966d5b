/**
 * The chain client contract on the built-in simulated chain, one network per family: the simulator keeps the same
 * contract as the real clients (where they disagree, the simulator is wrong).
 */
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { afterAll } from "vitest"
import { Catalog } from "../../../src/catalog/Catalog.ts"
import { SimulatedChain } from "../../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig } from "../../../src/Config.ts"
import * as Database from "../../../src/db/Database.ts"
import { Entropy } from "../../../src/domain/Entropy.ts"
import { Ids } from "../../../src/domain/Ids.ts"
import { chainClientContract, type ContractNode, freshWalletAddress } from "./ChainClientContract.ts"
import developmentCatalog from "../../../src/catalog/development.json" with { type: "json" }

const layer = SimulatedChain.layer.pipe(
  Layer.provideMerge(Catalog.layer),
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest()),
  Layer.orDie
)
const runtime = ManagedRuntime.make(layer)
const chain = <A>(use: (simulated: SimulatedChain["Service"]) => Effect.Effect<A>) =>
  runtime.runPromise(Effect.flatMap(Effect.service(SimulatedChain), use))

afterAll(() => runtime.dispose())

for (const networkKey of ["ETH_SEPOLIA", "TRON_NILE", "BTC_TESTNET", "SOL_DEVNET"]) {
  const network = developmentCatalog.networks.find((candidate) => candidate.networkKey === networkKey)!
  const assets = developmentCatalog.assets.filter((asset) => asset.networkKey === networkKey)
  let client: ContractNode["client"] extends () => infer C ? C : never
  const node: ContractNode = {
    name: `simulated ${networkKey}`,
    network: network as never,
    assets: assets as never,
    start: async () => {
      client = await chain((simulated) => Effect.succeed(simulated.client(networkKey)))
      // The simulated chain starts at its genesis: give the contract a few blocks to read back.
      await chain((simulated) => simulated.mine(networkKey, 4))
    },
    stop: async () => {},
    client: () => client,
    freshAddress: () => freshWalletAddress(network as never),
    pay: async (to, assetId, amount) => {
      const txHash = await chain((simulated) => simulated.transfer({ networkKey, to, assetId, amount }))
      const height = await chain((simulated) => simulated.mine(networkKey, 1))
      return { txHash, height }
    },
    mine: (count) => chain((simulated) => simulated.mine(networkKey, count)).then(() => undefined),
    reorg: async (depth) => {
      await chain((simulated) => simulated.reorg(networkKey, depth))
      await chain((simulated) => simulated.mine(networkKey, depth + 1))
    },
    fundHot: async (assetId, amount) => {
      const state = await chain((simulated) => simulated.state(networkKey))
      const balance = state.hotWalletBalance[assetId] ?? 0n
      await chain((simulated) => simulated.configure(networkKey, { hotWalletBalance: { [assetId]: balance + amount } }))
    },
    smallAmount: (assetId) => {
      const asset = assets.find((candidate) => candidate.assetId === assetId)!
      return 10n ** BigInt(Math.max(asset.decimals - 3, 0))
    }
  }
  chainClientContract(node)
}
