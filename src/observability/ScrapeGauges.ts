/**
 * The gauges of what PostgreSQL holds, computed when GET /metrics is scraped (docs/operations.md, "Metrics"), never
 * by a polling loop: a process that nobody scrapes does no work for them, and a scrape sees the database as it is.
 * Every statement reads a partial index or a small table, and the counts that could grow without bound are capped
 * (`countCap`), so a scrape stays cheap however large a backlog gets. The whole refresh has `refreshTimeoutMillis`;
 * past it, or when the database fails, `coffer_metrics_database_up` is 0 and the gauges keep their last values.
 *
 * Ages are computed against the service's Clock from the rows' timestamps (which the service wrote by the same
 * clock), so a TestClock scenario reads consistent ages.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { PgClient } from "@effect/sql-pg"
import { poolConnectionsMax } from "../db/Database.ts"
import { poolUseOf } from "../db/MeteredPgClient.ts"
import { decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { watchLagMillis } from "../deposits/WatchHealth.ts"

/** Counts above this read as this: the backlog is large, how large no longer matters for an alert. */
export const countCap = 100_000
export const refreshTimeoutMillis = 5_000

/** The withdrawal statuses a withdrawal passes through on its own (the partial index transactions_open_withdrawals_idx). */
export const openWithdrawalStatuses = ["SUBMITTED", "QUEUED", "PENDING_SIGNATURE", "CONFIRMING"] as const

const gauge = (name: string, description: string) => Metric.gauge(name, { description })

export const chainLagBlocks = gauge("coffer_chain_lag_blocks",
  "Blocks between the head a network's deposit watcher last saw and the block it last processed")
export const chainLagSeconds = gauge("coffer_chain_lag_seconds",
  "A watcher's estimated lag: blocks behind times the block time, plus its silence beyond one scan interval (deposits/WatchHealth.ts)")
export const chainLagBudgetSeconds = gauge("coffer_chain_lag_budget_seconds",
  "The lag past which a network's watch reports DEGRADED (10 block times)")
export const outboxUndelivered = gauge("coffer_outbox_undelivered",
  `Events recorded but not yet fanned out to webhook deliveries (capped at ${countCap})`)
export const outboxOldestUndeliveredSeconds = gauge("coffer_outbox_oldest_undelivered_seconds",
  "Age of the oldest event not yet fanned out; 0 when none")
export const withdrawalsOpen = gauge("coffer_withdrawals_open",
  "Withdrawals on their way, by network and status (SUBMITTED, QUEUED, PENDING_SIGNATURE, CONFIRMING)")
export const withdrawalsOldestOpenSeconds = gauge("coffer_withdrawals_oldest_open_seconds",
  "Age of the network's oldest withdrawal on its way (statuses as coffer_withdrawals_open); 0 when none")
export const webhookDeliveriesPending = gauge("coffer_webhook_deliveries_pending",
  `Webhook deliveries waiting for an attempt or a retry (capped at ${countCap})`)
export const webhookEndpointsFailing = gauge("coffer_webhook_endpoints_failing",
  "ACTIVE webhook endpoints whose latest finished delivery is DEAD (six failed attempts)")
export const databaseConnections = gauge("coffer_db_connections",
  "Sessions on the service's database by state (pg_stat_activity, every process and client on the database)")
export const databaseConnectionsWaitingOnLocks = gauge("coffer_db_connections_waiting_on_locks",
  "Sessions on the service's database waiting for a lock")
export const databaseConnectionsLimit = gauge("coffer_db_connections_limit",
  "The server's max_connections")
export const databasePoolConnectionsMax = gauge("coffer_db_pool_connections_max",
  "This process's connection pool size (each process opens at most this many sessions)")
export const databasePoolConnectionsInUse = gauge("coffer_db_pool_connections_in_use",
  "This process's pool sessions lent out now: a statement running, a transaction open, a connection reserved or listening")
export const databasePoolCheckoutsWaiting = gauge("coffer_db_pool_checkouts_waiting",
  "Fibers of this process waiting for a pool session (every session lent out)")
export const sendsReorganizedOpen = gauge("coffer_sends_reorganized_open",
  "Sends final once whose block a reorganization removed, by network, broadcast again until final again (sending/ReorganizedSends.ts); 0 when none")
export const metricsDatabaseUp = gauge("coffer_metrics_database_up",
  "1 when this scrape's database statements answered in time, else 0 (the database gauges then keep their last values)")

// Compiled once (db/RowSchemas.ts): each statement's rows decoded at this edge.
const cursorRows = decodeRows(
  Schema.Struct({ network_key: Text, height: Numeric, head_height: Numeric, updated_at: Timestamp }),
  "ScrapeGauges (chain_cursors)"
)
const outboxRow = decodeSingleRow(
  Schema.Struct({ count: Int4, oldest: Nullable(Timestamp) }),
  "ScrapeGauges (outbox_events)"
)
const withdrawalRows = decodeRows(
  Schema.Struct({ network_key: Text, status: Text, count: Int4, oldest: Timestamp }),
  "ScrapeGauges (open withdrawals)"
)
const webhookRow = decodeSingleRow(Schema.Struct({ pending: Int4, failing: Int4 }), "ScrapeGauges (webhooks)")
const sessionRows = decodeRows(
  Schema.Struct({ state: Text, count: Int4, waiting: Int4 }),
  "ScrapeGauges (pg_stat_activity)"
)
const reorganizedRows = decodeRows(Schema.Struct({ network_key: Text, count: Int4 }), "ScrapeGauges (reorganized sends)")
const limitRow = decodeSingleRow(Schema.Struct({ max_connections: Int4 }), "ScrapeGauges (max_connections)")

/** The states pg_stat_activity reports for a client session, listed so a state that empties reads 0. */
const sessionStates = ["active", "idle", "idle in transaction", "idle in transaction (aborted)", "fastpath function call", "disabled"]

const set = (metric: Metric.Metric<number, unknown>, attributes: Record<string, string>, value: number) =>
  Metric.update(Metric.withAttributes(metric, attributes), value)

const ageSeconds = (nowMillis: number, oldest: Date | null) =>
  oldest === null ? 0 : Math.max(0, (nowMillis - oldest.getTime()) / 1000)

export class ScrapeGauges extends Context.Service<ScrapeGauges, {
  /** Recomputes the database gauges; never fails (a failure is `coffer_metrics_database_up 0`, and logged). */
  readonly refresh: Effect.Effect<void>
}>()("coffer/ScrapeGauges") {
  static readonly layer = Layer.effect(
    ScrapeGauges,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      // As WatchHealth counts a watcher's silence from the process's start at the earliest.
      const startedAtMillis = yield* Clock.currentTimeMillis

      const chains = Effect.gen(function*() {
        const rows = yield* sql`
          SELECT network_key, height::text AS height, head_height::text AS head_height, updated_at FROM chain_cursors`
          .pipe(Effect.flatMap(cursorRows))
        const nowMillis = yield* Clock.currentTimeMillis
        const cursors = new Map(rows.map((row) => [row.network_key, row]))
        for (const networkKey of clients.networkKeys) {
          const network = catalog.network(networkKey)
          if (network === undefined) continue
          const row = cursors.get(networkKey)
          const cursor = row === undefined
            ? undefined
            : { height: row.height, headHeight: row.head_height, updatedAtMillis: row.updated_at.getTime() }
          const behind = cursor === undefined || cursor.headHeight <= cursor.height ? 0n : cursor.headHeight - cursor.height
          const lag = watchLagMillis({ cursor, blockTimeMillis: network.blockTimeMillis, startedAtMillis, nowMillis })
          yield* set(chainLagBlocks, { network: networkKey }, Number(behind))
          yield* set(chainLagSeconds, { network: networkKey }, lag / 1000)
          yield* set(chainLagBudgetSeconds, { network: networkKey }, (10 * network.blockTimeMillis) / 1000)
        }
      })

      const outbox = Effect.gen(function*() {
        const row = yield* sql`
          SELECT
            (SELECT count(*)::int FROM (
              SELECT 1 FROM outbox_events WHERE dispatched_at IS NULL LIMIT ${countCap}) capped) AS count,
            (SELECT min(created_at) FROM outbox_events WHERE dispatched_at IS NULL) AS oldest`
          .pipe(Effect.flatMap(outboxRow))
        const nowMillis = yield* Clock.currentTimeMillis
        yield* Metric.update(outboxUndelivered, row.count)
        yield* Metric.update(outboxOldestUndeliveredSeconds, ageSeconds(nowMillis, row.oldest))
      })

      const withdrawals = Effect.gen(function*() {
        const rows = yield* sql`
          SELECT network_key, status, count(*)::int AS count, min(created_at) AS oldest FROM transactions
          WHERE kind = 'WITHDRAWAL' AND status IN ${sql.in(openWithdrawalStatuses)}
          GROUP BY network_key, status`
          .pipe(Effect.flatMap(withdrawalRows))
        const nowMillis = yield* Clock.currentTimeMillis
        const found = new Map(rows.map((row) => [`${row.network_key} ${row.status}`, row]))
        const networkKeys = new Set([...catalog.networks.map((network) => network.networkKey), ...rows.map((row) => row.network_key)])
        for (const networkKey of networkKeys) {
          let oldest: Date | null = null
          for (const status of openWithdrawalStatuses) {
            const row = found.get(`${networkKey} ${status}`)
            yield* set(withdrawalsOpen, { network: networkKey, status }, row?.count ?? 0)
            if (row !== undefined && (oldest === null || row.oldest < oldest)) oldest = row.oldest
          }
          yield* set(withdrawalsOldestOpenSeconds, { network: networkKey }, ageSeconds(nowMillis, oldest))
        }
      })

      const webhooks = Effect.gen(function*() {
        // `failing`: at most 10 ACTIVE endpoints per tenant, each looked up backwards on its (endpoint_id, id) index.
        const row = yield* sql`
          SELECT
            (SELECT count(*)::int FROM (
              SELECT 1 FROM webhook_deliveries WHERE status = 'PENDING' LIMIT ${countCap}) capped) AS pending,
            (SELECT count(*)::int FROM webhook_endpoints e WHERE e.status = 'ACTIVE' AND (
              SELECT d.status FROM webhook_deliveries d
              WHERE d.endpoint_id = e.id AND d.status <> 'PENDING' ORDER BY d.id DESC LIMIT 1) = 'DEAD') AS failing`
          .pipe(Effect.flatMap(webhookRow))
        yield* Metric.update(webhookDeliveriesPending, row.pending)
        yield* Metric.update(webhookEndpointsFailing, row.failing)
      })

      const sessions = Effect.gen(function*() {
        const rows = yield* sql`
          SELECT coalesce(state, 'unknown') AS state, count(*)::int AS count,
            (count(*) FILTER (WHERE wait_event_type = 'Lock'))::int AS waiting
          FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'
          GROUP BY 1`
          .pipe(Effect.flatMap(sessionRows))
        const limit = yield* sql`SELECT current_setting('max_connections')::int AS max_connections`
          .pipe(Effect.flatMap(limitRow))
        const byState = new Map(rows.map((row) => [row.state, row.count]))
        for (const state of new Set([...sessionStates, ...byState.keys()])) {
          yield* set(databaseConnections, { state }, byState.get(state) ?? 0)
        }
        yield* Metric.update(databaseConnectionsWaitingOnLocks, rows.reduce((sum, row) => sum + row.waiting, 0))
        yield* Metric.update(databaseConnectionsLimit, limit.max_connections)
        yield* Metric.update(databasePoolConnectionsMax, poolConnectionsMax)
      })

      // The partial index outgoing_sends_reorganized_idx: almost always empty.
      const reorganized = Effect.gen(function*() {
        const rows = yield* sql`
          SELECT network_key, count(*)::int AS count FROM outgoing_sends
          WHERE reorganized_from_state IS NOT NULL GROUP BY network_key`.pipe(Effect.flatMap(reorganizedRows))
        const found = new Map(rows.map((row) => [row.network_key, row.count]))
        for (const networkKey of new Set([...clients.networkKeys, ...found.keys()])) {
          yield* set(sendsReorganizedOpen, { network: networkKey }, found.get(networkKey) ?? 0)
        }
      })

      // In this process's memory, not read from the database: refreshed first, also when the database does not answer
      // (a pool with every session lent and fibers waiting is then what an operator most needs to see).
      const poolUse = Option.flatMap(yield* Effect.serviceOption(PgClient.PgClient), (client) => Option.fromUndefinedOr(poolUseOf(client)))
      const pool = Effect.gen(function*() {
        if (Option.isNone(poolUse)) return
        yield* Metric.update(databasePoolConnectionsInUse, poolUse.value.inUse)
        yield* Metric.update(databasePoolCheckoutsWaiting, poolUse.value.waiting)
      })

      const refresh = Effect.fn("ScrapeGauges.refresh")(function*() {
        yield* pool
        const answered = yield* Effect.all([chains, outbox, withdrawals, webhooks, sessions, reorganized], { discard: true }).pipe(
          Effect.timeout(Duration.millis(refreshTimeoutMillis)),
          Effect.as(true),
          Effect.catchCause((cause) => Effect.as(Effect.logWarning("metrics: the database gauges were not refreshed", cause), false))
        )
        yield* Metric.update(metricsDatabaseUp, answered ? 1 : 0)
      })

      return ScrapeGauges.of({ refresh: refresh() })
    })
  )
}
