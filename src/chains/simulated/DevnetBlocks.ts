/**
 * The simulated chain's blocks as every part of it reads them: the tip (a genesis block is created on first use), the
 * head with its finalized height, a block with its transfers, a transaction's state; and what writers share: random
 * hashes, the current time, and the per-network lock.
 */
import { base58 } from "@scure/base"
import { Clock, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { Entropy } from "../../domain/Entropy.ts"
import { fromNumeric } from "../../domain/RawAmount.ts"
import type { ChainBlock, ChainHead, TransactionState } from "../ChainClient.ts"
import type { ChainFamily } from "../ChainFamily.ts"
import { finalityDepthBlocks } from "./DevnetParameters.ts"

const bytesToHex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

export const makeDevnetBlocks = Effect.gen(function*() {
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

  const head = (networkKey: string): Effect.Effect<ChainHead> =>
    Effect.map(tip(networkKey), ({ height, hash }) => {
      const depth = finalityDepthBlocks[familyOf(networkKey)]
      return { height, hash, finalizedHeight: height > depth ? height - depth : 0n }
    }).pipe(Effect.orDie)

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

  return { familyOf, randomHash, transactionHash, lockNetwork, now, tip, head, block, transactionState }
})

export type DevnetBlocks = Effect.Success<typeof makeDevnetBlocks>
