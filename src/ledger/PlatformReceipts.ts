/**
 * What the platform's operating addresses (HOT, SWEEP, GAS) received on chain, recorded by the deposit watcher in
 * the same step that records a block's deposits (docs/ledger.md "Chain books"; sql/0016_books.sql). Money an
 * operator puts on HOT or a GAS wallet from outside is otherwise unknown to the service; the watcher sees every
 * transfer of a block already, so it is the cheapest witness (no operator entry to forget). The chain books
 * (ChainBooks.ts) add these receipts to what an operating address should hold.
 *
 * Both functions run inside the watcher's step transaction (they take its cursor lock's protection): a block's
 * receipts commit with its cursor move, and a rewind forgets the receipts of the blocks it removes.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { ChainTransfer } from "../chains/ChainClient.ts"
import type { PlatformAddress } from "../wallets/PlatformAddresses.ts"

export interface ReceiptBlock {
  readonly networkKey: string
  readonly height: bigint
  readonly hash: string
  readonly transfers: ReadonlyArray<ChainTransfer>
}

/**
 * Records the block's transfers to `operating` addresses of its network (assets of that network only). Returns how
 * many were new. `assetNetwork` says which network an asset belongs to (the catalog), undefined outside it.
 */
export const recordPlatformReceipts = (
  sql: SqlClient.SqlClient,
  block: ReceiptBlock,
  operating: ReadonlyArray<PlatformAddress>,
  assetNetwork: (assetId: string) => string | undefined,
  at: Date
) =>
  Effect.gen(function*() {
    const roleOf = new Map<string, string>()
    for (const entry of operating) if (entry.networkKey === block.networkKey) roleOf.set(entry.address, entry.role)
    const rows = block.transfers.flatMap((transfer) => {
      const role = roleOf.get(transfer.to)
      if (role === undefined || assetNetwork(transfer.assetId) !== block.networkKey) return []
      return [{
        tx_hash: transfer.txHash,
        output_index: transfer.outputIndex,
        from_address: transfer.from,
        to_address: transfer.to,
        role,
        asset_id: transfer.assetId,
        amount: transfer.amount.toString()
      }]
    })
    if (rows.length === 0) return 0
    const inserted = yield* sql`
      INSERT INTO platform_receipts (network_key, tx_hash, output_index, from_address, to_address, role, asset_id,
        amount, block_height, block_hash, recorded_at)
      SELECT ${block.networkKey}, r.tx_hash, r.output_index, r.from_address, r.to_address, r.role, r.asset_id,
        r.amount::numeric, ${block.height.toString()}, ${block.hash}, ${at}
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(tx_hash text, output_index int, from_address text,
        to_address text, role text, asset_id text, amount text)
      ON CONFLICT (network_key, tx_hash, output_index) DO UPDATE
        SET block_height = EXCLUDED.block_height, block_hash = EXCLUDED.block_hash
      RETURNING (xmax = 0) AS inserted`
    return inserted.filter((row) => row.inserted === true).length
  })

/** A rewind to `height`: the receipts of the blocks above it are gone with them (recorded again when re-mined). */
export const forgetPlatformReceiptsAbove = (sql: SqlClient.SqlClient, networkKey: string, height: bigint) =>
  Effect.asVoid(
    sql`DELETE FROM platform_receipts WHERE network_key = ${networkKey} AND block_height > ${height.toString()}`
  )
