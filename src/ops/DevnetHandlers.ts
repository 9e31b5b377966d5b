/**
 * Handlers of the developer chain (operator-interface.md, "Developer chain"). Mining and reorgs answer after the
 * network's deposit watcher has scanned the new chain, so a caller sees deposits recorded, credited or reversed as
 * soon as the call returns (the background scan would get there within a second anyway).
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Catalog } from "../catalog/Catalog.ts"
import { validateAddress } from "../chains/AddressValidation.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { SimulatedChain, type SimulatedChainState } from "../chains/simulated/SimulatedChain.ts"
import { DepositWatcher } from "../deposits/DepositWatcher.ts"
import { AssetNotSupported, BadRequest, InvalidAddress, NotFound } from "../domain/ApiError.ts"
import { WithdrawalProcessor } from "../withdrawals/WithdrawalProcessor.ts"
import { queuedWithdrawalsRelease } from "../withdrawals/WithdrawalSupervisor.ts"
import { OpsApi } from "./OpsApi.ts"

const stateObject = (state: SimulatedChainState) => ({
  networkKey: state.networkKey,
  height: Number(state.height),
  hash: state.hash,
  finalizedHeight: Number(state.finalizedHeight),
  pendingTransfers: state.pendingTransfers,
  broadcastFails: state.broadcastFails,
  networkFeeRaw: state.networkFee.toString(),
  hotWalletBalance: Object.fromEntries(Object.entries(state.hotWalletBalance).map(([assetId, raw]) => [assetId, raw.toString()]))
})

export const OpsDevnetHandlers = HttpApiBuilder.group(OpsApi, "devnet", (handlers) =>
  Effect.gen(function*() {
    const chain = yield* SimulatedChain
    const clients = yield* ChainClients
    const catalog = yield* Catalog
    const watcher = yield* DepositWatcher
    const withdrawals = yield* WithdrawalProcessor
    const releaseQueued = yield* queuedWithdrawalsRelease
    /** After the chain changed: deposits scanned, withdrawals confirmed (or rebroadcast after a reorg). */
    const follow = (networkKey: string) =>
      Effect.andThen(watcher.scan(networkKey), withdrawals.confirm(networkKey))

    /** A network served by the simulated chain; any other (unknown, or on a real client) is 404. */
    const simulatedNetwork = (networkKey: string) => {
      const network = catalog.network(networkKey)
      return network !== undefined && clients.isSimulated(networkKey)
        ? Effect.succeed(network)
        : Effect.fail(new NotFound({ message: `no simulated network ${networkKey}` }))
    }

    return handlers
      .handle("transfer", ({ params, payload }) =>
        Effect.gen(function*() {
          const network = yield* simulatedNetwork(params.networkKey)
          const asset = catalog.asset(payload.assetId)
          if (asset === undefined || asset.networkKey !== network.networkKey) {
            return yield* new AssetNotSupported({ message: `asset ${payload.assetId} is not on ${network.networkKey}` })
          }
          if (payload.amountRaw <= 0n) return yield* new BadRequest({ message: "amount must be positive" })
          const checked = validateAddress({
            family: network.chainFamily,
            btcNetwork: network.btcNetwork ?? undefined,
            address: payload.to
          })
          if (!checked.isValid) return yield* new InvalidAddress({ message: "invalid address" })
          const txHash = yield* chain.transfer({
            networkKey: network.networkKey,
            to: checked.normalized,
            assetId: asset.assetId,
            amount: payload.amountRaw,
            from: payload.from
          })
          return { txHash }
        }))
      .handle("mine", ({ params, payload }) =>
        Effect.gen(function*() {
          const network = yield* simulatedNetwork(params.networkKey)
          const height = yield* chain.mine(network.networkKey, payload.count ?? 1)
          yield* follow(network.networkKey)
          return { height: Number(height) }
        }))
      .handle("reorg", ({ params, payload }) =>
        Effect.gen(function*() {
          const network = yield* simulatedNetwork(params.networkKey)
          const height = yield* chain.reorg(network.networkKey, payload.depth)
          yield* follow(network.networkKey)
          return { height: Number(height) }
        }))
      .handle("configure", ({ params, payload }) =>
        Effect.gen(function*() {
          const network = yield* simulatedNetwork(params.networkKey)
          for (const assetId of Object.keys(payload.hotWalletBalance ?? {})) {
            if (catalog.asset(assetId)?.networkKey !== network.networkKey) {
              return yield* new AssetNotSupported({ message: `asset ${assetId} is not on ${network.networkKey}` })
            }
          }
          const state = yield* chain.configure(network.networkKey, {
            broadcastFails: payload.broadcastFails,
            networkFee: payload.networkFeeRaw,
            hotWalletBalance: payload.hotWalletBalance
          })
          // Withdrawals waiting for the hot wallet try again now rather than at the next sweep.
          if (payload.hotWalletBalance !== undefined) {
            yield* releaseQueued({ networkKey: network.networkKey })
          }
          return stateObject(state)
        }))
      .handle("state", ({ params }) =>
        Effect.gen(function*() {
          const network = yield* simulatedNetwork(params.networkKey)
          return stateObject(yield* chain.state(network.networkKey))
        }))
  }))
