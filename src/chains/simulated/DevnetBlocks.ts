/**
 * The simulated chain's blocks as every part of it reads them: the tip (a genesis block is created on first use), the
 * head with its finalized height, a block with its transfers, a transaction's state; and what writers share: random
 * hashes, the current time, and the per-network lock.
 */
import { base58 } from "@scure/base"
import { Clock, Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text } from "../../db/RowSchemas.ts"
import { Entropy } from "../../domain/Entropy.ts"
import type { ChainBlock, ChainHead, TransactionState } from "../ChainClient.ts"
import type { ChainFamily } from "../ChainFamily.ts"
import { finalityDepthBlocks } from "./DevnetParameters.ts"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const tipRow = decodeSingleRow(Schema.Struct({ height: Numeric, hash: Text }), "DevnetBlocks.tip")
const blockRow = decodeFirstRow(Schema.Struct({ hash: Text, parent_hash: Text }), "DevnetBlocks.block")
const transferRows = decodeRows(
  Schema.Struct({
    tx_hash: Text,
    output_index: Int4,
    from_address: Nullable(Text),
    to_address: Text,
    asset_id: Text,
    amount: Numeric
  }),
  "DevnetBlocks.block (transfers)"
)
const inclusionRow = decodeFirstRow(Schema.Struct({ block_height: Nullable(Numeric) }), "DevnetBlocks.transactionState")

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

  const randomHash = (purpose: string) => Effect.map(entropy.bytes(32, purpose), bytesToHex)

  /** A transaction hash in the family's usual notation. */
  const transactionHash = (family: ChainFamily) =>
    family === "SOL"
      ? Effect.map(entropy.bytes(64, "devnet-tx-hash"), (bytes) => base58.encode(bytes))
      : family === "EVM"
      ? Effect.map(randomHash("devnet-tx-hash"), (hash) => `0x${hash}`)
      : randomHash("devnet-tx-hash")

  /**
   * Serializes writers of one network's chain (mining, reorgs, transfers) across processes, for the
   * transaction; readers need no lock.
   */
  const lockNetwork = (networkKey: string) =>
    sql`SELECT pg_advisory_xact_lock(hashtextextended(${`coffer-devnet:${networkKey}`}, 0))`

  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

  const ensureGenesis = (networkKey: string) =>
    Effect.gen(function*() {
      const hash = yield* randomHash("devnet-genesis-hash")
      yield* sql`
        INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
        VALUES (${networkKey}, 0, ${hash}, ${"0".repeat(64)}, ${yield* now})
        ON CONFLICT DO NOTHING`
    })

  const tip = (networkKey: string) =>
    Effect.gen(function*() {
      yield* ensureGenesis(networkKey)
      const row = yield* sql`
        SELECT b.height::text AS height, b.hash FROM devnet_blocks b
        WHERE b.network_key = ${networkKey} ORDER BY b.height DESC LIMIT 1`.pipe(Effect.flatMap(tipRow))
      return { height: row.height, hash: row.hash }
    })

  const head = (networkKey: string): Effect.Effect<ChainHead> =>
    Effect.map(tip(networkKey), ({ height, hash }) => {
      const depth = finalityDepthBlocks[familyOf(networkKey)]
      return { height, hash, finalizedHeight: height > depth ? height - depth : 0n }
    }).pipe(Effect.orDie)

  const block = (networkKey: string, height: bigint): Effect.Effect<ChainBlock | undefined> =>
    Effect.gen(function*() {
      const row = yield* sql`
        SELECT hash, parent_hash FROM devnet_blocks WHERE network_key = ${networkKey} AND height = ${height.toString()}`
        .pipe(Effect.flatMap(blockRow))
      if (row === undefined) return undefined
      const transfers = yield* sql`
        SELECT tx_hash, output_index, from_address, to_address, asset_id, amount::text AS amount
        FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height = ${height.toString()}
        ORDER BY created_at, tx_hash, output_index`.pipe(Effect.flatMap(transferRows))
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
          amount: transfer.amount
        }))
      }
    }).pipe(Effect.orDie)

  const transactionState = (networkKey: string, txHash: string): Effect.Effect<TransactionState> =>
    Effect.map(
      sql`
        SELECT block_height::text AS block_height FROM devnet_transfers
        WHERE network_key = ${networkKey} AND tx_hash = ${txHash} LIMIT 1`.pipe(Effect.flatMap(inclusionRow)),
      (row) => (row === undefined ? "UNKNOWN" : row.block_height === null ? "PENDING" : "INCLUDED")
    ).pipe(Effect.orDie)

  return { familyOf, randomHash, transactionHash, lockNetwork, now, tip, head, block, transactionState }
})

export type DevnetBlocks = Effect.Success<typeof makeDevnetBlocks>
