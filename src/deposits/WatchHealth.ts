/**
 * Whether a watcher follows each network now, and how far behind it is (decisions.md, "Sending on real networks": a
 * network with no client that watches is not `ACTIVE`; a watcher more than its network's lag budget, 10 × the
 * catalog's `blockTimeMillis`, behind the head reports `DEGRADED`). Wallet address items and `deposit_address` show
 * a registration through this (wallets/AddressVisibility.ts); docs/deposits.md "Watch status" has the reasoning.
 *
 * The watcher's lag is estimated from its `chain_cursors` row, which every step of a scan rewrites (processed
 * height, the head it saw, when): the blocks it still had to process at its last step, as time, plus how long it
 * has been silent beyond its scan interval (a watcher whose node is down writes nothing, so its last head grows old
 * while the chain moves on). Silence counts from this process's start at the earliest: after a restart the
 * watcher's first scan is due within a scan interval, and the downtime before it is not lag the new watcher had a
 * chance to make up. A watcher whose first scan has not come within the budget since the start reports
 * `DEGRADED`; before that it reports `ACTIVE`. Read on each use (one small query), never cached, like the switches.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { decodeRows, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { scanIntervalMillis } from "./DepositWatcher.ts"

/** `UNWATCHED`: no chain client follows the network (none configured), so nobody would see a deposit there. */
export type NetworkWatchHealth = "UNWATCHED" | "ACTIVE" | "DEGRADED"

/** The lag budget in block times (decisions.md, "Sending on real networks": default 10 × block time). */
export const lagBudgetBlocks = 10

export interface WatchCursor {
  /** The last block the watcher processed. */
  readonly height: bigint
  /** The head the watcher saw at that step. */
  readonly headHeight: bigint
  readonly updatedAtMillis: number
}

/**
 * The estimated lag of a watcher, in milliseconds: blocks behind at its last step times the block time, plus its
 * silence beyond one scan interval, silence counted from `startedAtMillis` at the earliest (module comment). A
 * watcher with no cursor yet (never ran) is behind by nothing known, silent since the start.
 */
export const watchLagMillis = (input: {
  readonly cursor: WatchCursor | undefined
  readonly blockTimeMillis: number
  readonly startedAtMillis: number
  readonly nowMillis: number
}): number => {
  const { blockTimeMillis, cursor, nowMillis, startedAtMillis } = input
  const behindBlocks = cursor === undefined || cursor.headHeight <= cursor.height
    ? 0n
    : cursor.headHeight - cursor.height
  // Far behind is far behind: capped before it becomes a number, so a huge gap cannot lose precision into "small".
  const behindMillis = Number(behindBlocks > 1_000_000n ? 1_000_000n : behindBlocks) * blockTimeMillis
  const heardAtMillis = Math.max(cursor?.updatedAtMillis ?? startedAtMillis, startedAtMillis)
  const silenceMillis = Math.max(0, nowMillis - heardAtMillis - scanIntervalMillis)
  return behindMillis + silenceMillis
}

/** A watched network's health: `DEGRADED` past the lag budget (10 block times), else `ACTIVE`. */
export const watchedHealth = (lagMillis: number, blockTimeMillis: number): "ACTIVE" | "DEGRADED" =>
  lagMillis > lagBudgetBlocks * blockTimeMillis ? "DEGRADED" : "ACTIVE"

const CursorRow = Schema.Struct({ network_key: Text, height: Numeric, head_height: Numeric, updated_at: Timestamp })
const cursorRows = decodeRows(CursorRow, "WatchHealth.view")

/** A watched network's line in `GET /ops/health`: where its watcher is, and its health by the same rule. */
export interface WatchReport {
  readonly networkKey: string
  /** The last block the watcher processed. */
  readonly height: bigint
  /** The head it saw then. */
  readonly headHeight: bigint
  readonly health: "ACTIVE" | "DEGRADED"
}

export class WatchHealth extends Context.Service<WatchHealth, {
  /** Every network's watch health as of now (one query); a network outside the catalog is `UNWATCHED`. */
  readonly view: Effect.Effect<(networkKey: string) => NetworkWatchHealth>
  /** Every network a client watches and whose watcher has run, in catalog order (one query). */
  readonly report: Effect.Effect<ReadonlyArray<WatchReport>>
}>()("coffer/WatchHealth") {
  static readonly layer = Layer.effect(
    WatchHealth,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      // When this process (and its watcher loop, DepositWatcherLoop.ts) started: silence counts from here at most.
      const startedAtMillis = yield* Clock.currentTimeMillis

      const read = Effect.gen(function*() {
        const rows = yield* sql`
          SELECT network_key, height::text AS height, head_height::text AS head_height, updated_at FROM chain_cursors`
          .pipe(Effect.orDie, Effect.flatMap(cursorRows))
        const nowMillis = yield* Clock.currentTimeMillis
        const cursors = new Map(rows.map((row) => [row.network_key, {
          height: row.height,
          headHeight: row.head_height,
          updatedAtMillis: row.updated_at.getTime()
        }]))
        const health = (networkKey: string): NetworkWatchHealth => {
          const network = catalog.network(networkKey)
          if (network === undefined || clients.get(networkKey) === undefined) return "UNWATCHED"
          const lag = watchLagMillis({
            cursor: cursors.get(networkKey),
            blockTimeMillis: network.blockTimeMillis,
            startedAtMillis,
            nowMillis
          })
          return watchedHealth(lag, network.blockTimeMillis)
        }
        return { cursors, health }
      })

      const view = read.pipe(Effect.map(({ health }) => health), Effect.withSpan("WatchHealth.view"))

      const report = read.pipe(
        Effect.map(({ cursors, health }) =>
          clients.networkKeys.flatMap((networkKey): ReadonlyArray<WatchReport> => {
            const cursor = cursors.get(networkKey)
            const state = health(networkKey)
            return cursor === undefined || state === "UNWATCHED"
              ? []
              : [{ networkKey, height: cursor.height, headHeight: cursor.headHeight, health: state }]
          })
        ),
        Effect.withSpan("WatchHealth.report")
      )

      return WatchHealth.of({ view, report })
    })
  )
}
