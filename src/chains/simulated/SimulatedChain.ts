/**
 * The built-in simulated chain (operator-interface.md, "Developer chain"): every catalog network in development and
 * tests runs on it. Blocks and transfers live in PostgreSQL (sql/0006_chains.sql) so they survive a restart and every
 * process sees one chain. Nothing happens on its own: transfers wait for the next block, and blocks are mined only
 * when asked (POST /ops/devnet/{networkKey}/blocks), so tests decide exactly when a deposit confirms.
 *
 * Block hashes are random (from Entropy), so a block mined again after a reorg at the same height has a new hash,
 * as on a real chain.
 *
 * This file is the service: transfers, mining and reorganizations, and the ChainClient view of a network. Its parts:
 * DevnetBlocks.ts (reading blocks, the per-network lock), DevnetSettings.ts (the operator's settings and the hot
 * wallet's balances), SimulatedWithdrawalChain.ts (the withdrawal side: parameters, fees, broadcast),
 * DevnetParameters.ts (per-family constants).
 */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeRows, decodeSingleRow, Numeric, Text } from "../../db/RowSchemas.ts"
import { type ChainClient, ChainUnavailable } from "../ChainClient.ts"
import { makeDevnetBlocks } from "./DevnetBlocks.ts"
import { makeDevnetSettings, type SimulatedChainSettings, type SimulatedChainState } from "./DevnetSettings.ts"
import { makeSimulatedWithdrawalChain } from "./SimulatedWithdrawalChain.ts"

export { hotWalletBalanceDefault } from "./DevnetParameters.ts"
export type { SimulatedChainSettings, SimulatedChainState } from "./DevnetSettings.ts"

const balanceRow = decodeSingleRow(Schema.Struct({ balance: Numeric }), "SimulatedChain.balance")
const addressBalanceRows = decodeRows(Schema.Struct({ address: Text, balance: Numeric }), "SimulatedChain.balances")

/** One request mines at most this many blocks (operator-interface.md: `count` 1-1000). */
export const mineCountMax = 1000
/** One request rolls back at most this many blocks (operator-interface.md: `depth` 1-100). */
export const reorgDepthMax = 100

export interface SimulatedTransferRequest {
  readonly networkKey: string
  /** Normalized recipient address (the ops handler validates it for the network's family). */
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
  readonly from?: string | undefined
}

export class SimulatedChain extends Context.Service<SimulatedChain, {
  /** A transfer that lands in the next block mined; returns its transaction hash. */
  readonly transfer: (request: SimulatedTransferRequest) => Effect.Effect<string>
  /** Mines `count` blocks (the first takes every pending transfer); returns the new height. */
  readonly mine: (networkKey: string, count: number) => Effect.Effect<bigint>
  /** Drops the last `depth` blocks and the transfers in them (never the genesis); returns the new height. */
  readonly reorg: (networkKey: string, depth: number) => Effect.Effect<bigint>
  readonly state: (networkKey: string) => Effect.Effect<SimulatedChainState>
  /** PATCH /ops/devnet/{networkKey}: broadcast failures, the network fee, the hot wallet's balances. */
  readonly configure: (networkKey: string, settings: SimulatedChainSettings) => Effect.Effect<SimulatedChainState>
  /**
   * What `address` holds of the asset on the simulated chain: the transfers to it less those from it, mined or
   * waiting for the next block (a node's "pending" view). Not the hot wallet: its balances are the operator's
   * setting (`hotWalletBalance`), which broadcasts draw on; every other address (GAS wallets, deposit addresses)
   * holds only what transfers gave it, and sends nothing on this chain (it has no sweeps).
   */
  readonly balance: (networkKey: string, address: string, assetId: string) => Effect.Effect<bigint>
  /** `balance` of every address that ever received or sent the asset, in one pass (the proof of reserves reads many). */
  readonly balances: (networkKey: string, assetId: string) => Effect.Effect<ReadonlyMap<string, bigint>>
  /** The ChainClient view of one network. */
  readonly client: (networkKey: string) => ChainClient
  /**
   * Keeps a transaction out of the next `blocks` blocks mined (0 lets it in again), as a congested mempool would; for
   * scenarios (src/testing). Held in this process's memory.
   */
  readonly hold: (networkKey: string, txHash: string, blocks: number) => Effect.Effect<void>
  /**
   * The network's node stops answering (`true`) or answers again: every call of its ChainClient fails with
   * ChainUnavailable meanwhile, as an unreachable node's would; for scenarios. Held in this process's memory.
   */
  readonly setNodeDown: (networkKey: string, down: boolean) => Effect.Effect<void>
}>()("coffer/SimulatedChain") {
  static readonly layer = Layer.effect(
    SimulatedChain,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const blocks = yield* makeDevnetBlocks
      const { familyOf, lockNetwork, now, randomHash, tip, transactionHash } = blocks
      const settings = yield* makeDevnetSettings(blocks)
      const { configure, state } = settings
      const withdrawalChain = yield* makeSimulatedWithdrawalChain(blocks, settings)

      const transfer = Effect.fn("SimulatedChain.transfer")(function*(request: SimulatedTransferRequest) {
        const txHash = yield* transactionHash(familyOf(request.networkKey))
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(request.networkKey)
          yield* sql`
            INSERT INTO devnet_transfers (network_key, tx_hash, output_index, from_address, to_address, asset_id,
              amount, block_height, created_at)
            VALUES (${request.networkKey}, ${txHash}, 0, ${request.from ?? null}, ${request.to}, ${request.assetId},
              ${request.amount.toString()}, NULL, ${yield* now})`
        })).pipe(Effect.orDie)
        return txHash
      })

      /** Transactions kept out of blocks: blocks still to pass before each may be mined, per network. */
      const holds = new Map<string, Map<string, number>>()
      const downNetworks = new Set<string>()

      const mine = Effect.fn("SimulatedChain.mine")(function*(networkKey: string, count: number) {
        if (!Number.isSafeInteger(count) || count < 1 || count > mineCountMax) {
          return yield* Effect.die(new RangeError(`mine count must be 1-${mineCountMax}, got ${count}`))
        }
        const held = holds.get(networkKey) ?? new Map<string, number>()
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          let { height, hash } = yield* tip(networkKey)
          const createdAt = yield* now
          for (let mined = 0; mined < count; mined++) {
            const next = yield* randomHash("devnet-block-hash")
            height += 1n
            yield* sql`
              INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
              VALUES (${networkKey}, ${height.toString()}, ${next}, ${hash}, ${createdAt})`
            if (held.size > 0) {
              // Each block takes what is pending and not held; a held transaction waits its blocks out.
              yield* sql`UPDATE devnet_transfers SET block_height = ${height.toString()}
                WHERE network_key = ${networkKey} AND block_height IS NULL
                  AND NOT (tx_hash = ANY(${`{${[...held.keys()].join(",")}}`}::text[]))`
              for (const [txHash, blocks] of held) {
                if (blocks <= 1) held.delete(txHash)
                else held.set(txHash, blocks - 1)
              }
            } else if (mined === 0) {
              yield* sql`UPDATE devnet_transfers SET block_height = ${height.toString()}
                WHERE network_key = ${networkKey} AND block_height IS NULL`
            }
            hash = next
          }
          return height
        })).pipe(Effect.orDie)
      })

      const hold = Effect.fn("SimulatedChain.hold")(function*(networkKey: string, txHash: string, blocks: number) {
        const held = holds.get(networkKey) ?? new Map<string, number>()
        holds.set(networkKey, held)
        if (blocks <= 0) held.delete(txHash)
        else held.set(txHash, blocks)
      })

      const setNodeDown = Effect.fn("SimulatedChain.setNodeDown")(function*(networkKey: string, down: boolean) {
        if (down) downNetworks.add(networkKey)
        else downNetworks.delete(networkKey)
      })

      /** `effect` unless the network's node is down (setNodeDown). */
      const answering = <A, E>(networkKey: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E | ChainUnavailable> =>
        Effect.suspend((): Effect.Effect<A, E | ChainUnavailable> =>
          downNetworks.has(networkKey)
            ? Effect.fail(new ChainUnavailable({ networkKey, message: "the simulated node does not answer" }))
            : effect
        )

      const reorg = Effect.fn("SimulatedChain.reorg")(function*(networkKey: string, depth: number) {
        if (!Number.isSafeInteger(depth) || depth < 1 || depth > reorgDepthMax) {
          return yield* Effect.die(new RangeError(`reorg depth must be 1-${reorgDepthMax}, got ${depth}`))
        }
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          const { height } = yield* tip(networkKey)
          // The genesis stays: a chain always has a block.
          const newHeight = height - BigInt(depth) < 0n ? 0n : height - BigInt(depth)
          // Transfers in the dropped blocks go with them (ON DELETE CASCADE): "their transfers are gone".
          yield* sql`DELETE FROM devnet_blocks WHERE network_key = ${networkKey} AND height > ${newHeight.toString()}`
          return newHeight
        })).pipe(Effect.orDie)
      })

      const balance = Effect.fn("SimulatedChain.balance")(function*(networkKey: string, address: string, assetId: string) {
        const row = yield* sql`
          SELECT (COALESCE(sum(amount) FILTER (WHERE to_address = ${address}), 0)
            - COALESCE(sum(amount) FILTER (WHERE from_address = ${address}), 0))::text AS balance
          FROM devnet_transfers
          WHERE network_key = ${networkKey} AND asset_id = ${assetId}
            AND (to_address = ${address} OR from_address = ${address})`.pipe(Effect.flatMap(balanceRow), Effect.orDie)
        return row.balance
      })

      const balances = Effect.fn("SimulatedChain.balances")(function*(networkKey: string, assetId: string) {
        const rows = yield* sql`
          SELECT address, sum(amount)::text AS balance FROM (
            SELECT to_address AS address, amount FROM devnet_transfers
            WHERE network_key = ${networkKey} AND asset_id = ${assetId}
            UNION ALL
            SELECT from_address, -amount FROM devnet_transfers
            WHERE network_key = ${networkKey} AND asset_id = ${assetId} AND from_address IS NOT NULL
          ) moves GROUP BY address`.pipe(Effect.flatMap(addressBalanceRows), Effect.orDie)
        return new Map(rows.map((row) => [row.address, row.balance])) as ReadonlyMap<string, bigint>
      })

      const client = (networkKey: string): ChainClient => {
        const withdrawals = withdrawalChain(networkKey)
        return {
          networkKey,
          startFromGenesis: true,
          head: answering(networkKey, blocks.head(networkKey)),
          block: (height) => answering(networkKey, blocks.block(networkKey, height)),
          transactionState: (txHash) => answering(networkKey, blocks.transactionState(networkKey, txHash)),
          withdrawals: {
            ...withdrawals,
            hotWalletCovers: (...args) => answering(networkKey, withdrawals.hotWalletCovers(...args)),
            networkFee: (assetId) => answering(networkKey, withdrawals.networkFee(assetId)),
            withdrawalParameters: (transfer) => answering(networkKey, withdrawals.withdrawalParameters(transfer)),
            broadcast: (signed) => answering(networkKey, withdrawals.broadcast(signed)),
            inclusion: (txHash) => answering(networkKey, withdrawals.inclusion(txHash))
          }
        }
      }

      return SimulatedChain.of({ transfer, mine, reorg, state, configure, balance, balances, client, hold, setNodeDown })
    })
  )
}
