/**
 * What the confirmation checks of sends (withdrawals, sweeps) remember between passes: the sends seen in a block,
 * with its height and the hash the deposit watcher scanned there (`chain_blocks`). A check is two reads and two node
 * calls (the receipt, and the block at its height); while the scanned block at that height is unchanged and the head
 * does not yet meet the confirmation rule for it, checking again can only answer "waiting", so the pass skips it.
 * A reorganization the watcher finds replaces or removes that block, and the next pass checks the send at once.
 * A block the watcher has not scanned yet is not remembered (checked again next pass).
 *
 * Measured 2026-11-26: with up to 200 withdrawals waiting, checking every one of them every second took a third of
 * the withdrawal burst's rate (docs/sending.md). Per process: another process checks on its own.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { CatalogNetwork } from "../catalog/Catalog.ts"
import type { ChainHead } from "../chains/ChainClient.ts"
import { decodeRows, Numeric, Text } from "../db/RowSchemas.ts"
import { meetsConfirmationRule } from "../deposits/DepositDecisions.ts"
import type { CheckOutcome } from "./OutgoingSends.ts"

const scannedBlockRows = decodeRows(Schema.Struct({ height: Numeric, hash: Text }), "SeenInclusions.scanned")

interface Seen {
  readonly height: bigint
  readonly hash: string
}

/** One pass over a network's open sends: ask `due` before checking one, tell `checked` its outcome, then `end`. */
export interface InclusionPass {
  readonly due: (ownerId: string) => boolean
  readonly checked: (ownerId: string, outcome: CheckOutcome) => void
  readonly end: Effect.Effect<void>
}

export const makeSeenInclusions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const byNetwork = new Map<string, Map<string, Seen>>()

  /** The hashes of the blocks the deposit watcher scanned at these heights. */
  const scannedHashes = (networkKey: string, heights: ReadonlyArray<bigint>) =>
    heights.length === 0
      ? Effect.succeed(new Map<bigint, string>())
      : sql`SELECT height::text AS height, hash FROM chain_blocks
          WHERE network_key = ${networkKey} AND height = ANY(${[...new Set(heights)].map(String)}::bigint[])`.pipe(
          Effect.orDie,
          Effect.flatMap(scannedBlockRows),
          Effect.map((rows) => new Map(rows.map((row) => [row.height, row.hash])))
        )

  /**
   * Starts a pass over `open`, the owners whose sends wait for confirmation now; `complete` when that is all of them
   * (not a page), so the ones missing from it have left and are forgotten.
   */
  const pass = (
    network: Pick<CatalogNetwork, "networkKey" | "confirmations">,
    head: ChainHead,
    open: ReadonlyArray<string>,
    complete: boolean
  ): Effect.Effect<InclusionPass> =>
    Effect.gen(function*() {
      const seen = byNetwork.get(network.networkKey) ?? new Map<string, Seen>()
      byNetwork.set(network.networkKey, seen)
      if (complete) {
        const still = new Set(open)
        for (const id of seen.keys()) if (!still.has(id)) seen.delete(id)
      }
      const scanned = yield* scannedHashes(network.networkKey, [...seen.values()].map((entry) => entry.height))
      const newly: Array<readonly [string, bigint]> = []
      return {
        due: (ownerId) => {
          const known = seen.get(ownerId)
          if (
            known !== undefined && scanned.get(known.height) === known.hash &&
            !meetsConfirmationRule(network, head, known.height)
          ) return false
          seen.delete(ownerId)
          return true
        },
        checked: (ownerId, outcome) => {
          if (outcome._tag === "Waiting" && outcome.includedAt !== undefined) newly.push([ownerId, outcome.includedAt])
        },
        end: Effect.gen(function*() {
          const scannedNow = yield* scannedHashes(network.networkKey, newly.map(([, height]) => height))
          for (const [id, height] of newly) {
            const hash = scannedNow.get(height)
            if (hash !== undefined) seen.set(id, { height, hash })
          }
        })
      }
    })

  return { pass }
})
