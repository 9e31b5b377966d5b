/**
 * The built-in simulated chain (operator-interface.md, "Developer chain"): every catalog network in development and
 * tests runs on it. Blocks and transfers live in PostgreSQL (sql/0006_chains.sql) so they survive a restart and every
 * process sees one chain. Nothing happens on its own: transfers wait for the next block, and blocks are mined only
 * when asked (POST /ops/devnet/{networkKey}/blocks), so tests decide exactly when a deposit confirms.
 *
 * Block hashes are random (from Entropy), so a block mined again after a reorg at the same height has a new hash,
 * as on a real chain.
 */
import { base58 } from "@scure/base"
import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { Entropy } from "../../domain/Entropy.ts"
import { fromNumeric } from "../../domain/RawAmount.ts"
import { type ChainBlock, type ChainClient, type ChainHead, type TransactionState } from "../ChainClient.ts"
import type { ChainFamily } from "../ChainFamily.ts"

/** Blocks behind the head a network treats as final, as the real networks roughly do (TRON solidity, SOL roots). */
const finalityDepthBlocks: Readonly<Record<ChainFamily, bigint>> = { EVM: 64n, TRON: 19n, BTC: 6n, SOL: 32n }

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

export interface SimulatedChainState {
  readonly networkKey: string
  readonly height: bigint
  readonly hash: string
  readonly finalizedHeight: bigint
  readonly pendingTransfers: number
}

const bytesToHex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

export class SimulatedChain extends Context.Service<SimulatedChain, {
  /** A transfer that lands in the next block mined; returns its transaction hash. */
  readonly transfer: (request: SimulatedTransferRequest) => Effect.Effect<string>
  /** Mines `count` blocks (the first takes every pending transfer); returns the new height. */
  readonly mine: (networkKey: string, count: number) => Effect.Effect<bigint>
  /** Drops the last `depth` blocks and the transfers in them (never the genesis); returns the new height. */
  readonly reorg: (networkKey: string, depth: number) => Effect.Effect<bigint>
  readonly state: (networkKey: string) => Effect.Effect<SimulatedChainState>
  /** The ChainClient view of one network. */
  readonly client: (networkKey: string) => ChainClient
}>()("coffer/SimulatedChain") {
  static readonly layer = Layer.effect(
    SimulatedChain,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entropy = yield* Entropy
      const catalog = yield* Catalog

      const familyOf = (networkKey: string): ChainFamily => {
        const network = catalog.network(networkKey)
        if (network === undefined) throw new Error(`no network ${networkKey} in the catalog`)
        return network.chainFamily
      }

      const randomHash = Effect.map(entropy.bytes(32), bytesToHex)

      /** A transaction hash in the family's usual notation. */
      const transactionHash = (family: ChainFamily) =>
        family === "SOL"
          ? Effect.map(entropy.bytes(64), (bytes) => base58.encode(bytes))
          : family === "EVM"
          ? Effect.map(randomHash, (hash) => `0x${hash}`)
          : randomHash

      /**
       * Serializes writers of one network's chain (mining, reorgs, transfers) across processes, for the
       * transaction; readers need no lock.
       */
      const lockNetwork = (networkKey: string) =>
        sql`SELECT pg_advisory_xact_lock(hashtextextended(${`coffer-devnet:${networkKey}`}, 0))`

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const ensureGenesis = (networkKey: string) =>
        Effect.gen(function*() {
          const hash = yield* randomHash
          yield* sql`
            INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
            VALUES (${networkKey}, 0, ${hash}, ${"0".repeat(64)}, ${yield* now})
            ON CONFLICT DO NOTHING`
        })

      const tip = (networkKey: string) =>
        Effect.gen(function*() {
          yield* ensureGenesis(networkKey)
          const [row] = yield* sql<{ height: string; hash: string }>`
            SELECT b.height::text AS height, b.hash FROM devnet_blocks b
            WHERE b.network_key = ${networkKey} ORDER BY b.height DESC LIMIT 1`
          return { height: BigInt(row!.height), hash: row!.hash }
        })

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

      const mine = Effect.fn("SimulatedChain.mine")(function*(networkKey: string, count: number) {
        if (!Number.isSafeInteger(count) || count < 1 || count > mineCountMax) {
          return yield* Effect.die(new RangeError(`mine count must be 1-${mineCountMax}, got ${count}`))
        }
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          let { height, hash } = yield* tip(networkKey)
          const createdAt = yield* now
          for (let mined = 0; mined < count; mined++) {
            const next = yield* randomHash
            height += 1n
            yield* sql`
              INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
              VALUES (${networkKey}, ${height.toString()}, ${next}, ${hash}, ${createdAt})`
            if (mined === 0) {
              yield* sql`UPDATE devnet_transfers SET block_height = ${height.toString()}
                WHERE network_key = ${networkKey} AND block_height IS NULL`
            }
            hash = next
          }
          return height
        })).pipe(Effect.orDie)
      })

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

      const head = (networkKey: string): Effect.Effect<ChainHead> =>
        Effect.map(tip(networkKey), ({ height, hash }) => {
          const depth = finalityDepthBlocks[familyOf(networkKey)]
          return { height, hash, finalizedHeight: height > depth ? height - depth : 0n }
        }).pipe(Effect.orDie)

      const state = Effect.fn("SimulatedChain.state")(function*(networkKey: string) {
        const current = yield* head(networkKey)
        const [pending] = yield* sql<{ count: number }>`
          SELECT count(*)::int AS count FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height IS NULL`
          .pipe(Effect.orDie)
        return {
          networkKey,
          height: current.height,
          hash: current.hash,
          finalizedHeight: current.finalizedHeight,
          pendingTransfers: pending!.count
        }
      })

      const block = (networkKey: string, height: bigint): Effect.Effect<ChainBlock | undefined> =>
        Effect.gen(function*() {
          const [row] = yield* sql<{ hash: string; parent_hash: string }>`
            SELECT hash, parent_hash FROM devnet_blocks WHERE network_key = ${networkKey} AND height = ${height.toString()}`
          if (row === undefined) return undefined
          const transfers = yield* sql<{
            tx_hash: string
            output_index: number
            from_address: string | null
            to_address: string
            asset_id: string
            amount: string
          }>`
            SELECT tx_hash, output_index, from_address, to_address, asset_id, amount::text AS amount
            FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height = ${height.toString()}
            ORDER BY created_at, tx_hash, output_index`
          return {
            height,
            hash: row.hash,
            parentHash: row.parent_hash,
            transfers: transfers.map((transfer) => ({
              txHash: transfer.tx_hash,
              outputIndex: transfer.output_index,
              from: transfer.from_address,
              to: transfer.to_address,
              assetId: transfer.asset_id,
              amount: fromNumeric(transfer.amount)
            }))
          }
        }).pipe(Effect.orDie)

      const transactionState = (networkKey: string, txHash: string): Effect.Effect<TransactionState> =>
        Effect.map(
          sql<{ block_height: string | null }>`
            SELECT block_height::text AS block_height FROM devnet_transfers
            WHERE network_key = ${networkKey} AND tx_hash = ${txHash} LIMIT 1`,
          ([row]) => (row === undefined ? "UNKNOWN" : row.block_height === null ? "PENDING" : "INCLUDED")
        ).pipe(Effect.orDie)

      const client = (networkKey: string): ChainClient => ({
        networkKey,
        startFromGenesis: true,
        head: head(networkKey),
        block: (height) => block(networkKey, height),
        transactionState: (txHash) => transactionState(networkKey, txHash)
      })

      return SimulatedChain.of({ transfer, mine, reorg, state, client })
    })
  )
}
