/**
 * decisions.md "Daily limit": per user and asset, the sum of `amountRaw` of on-chain withdrawals and cross-user
 * internal transfers created in the current UTC day that did not end FAILED, REJECTED or CANCELLED, including the new
 * one. The quote reads the sum to refuse early (and for `estimate_fee`); the binding check (`lockDailyLimit`, then the
 * sum) runs inside the database transaction that creates the movement, so N parallel requests that each fit but
 * together exceed the limit never all pass (docs/transfers.md "Limits under concurrency").
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeSingleRow, Numeric } from "../db/RowSchemas.ts"
import { LimitExceeded } from "../domain/ApiError.ts"

export const dailyLimitExceededMessage = "daily limit exceeded"

// Compiled once (db/RowSchemas.ts): the sum decoded at this edge, a mismatch a defect naming the query.
const spentRow = decodeSingleRow(Schema.Struct({ total: Numeric }), "DailyLimit.spentToday")

/** Midnight UTC of the day `millis` falls in: the daily limit's window starts there. */
export const startOfUtcDay = (millis: number): Date => {
  const date = new Date(millis)
  return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))
}

export interface DailyLimitRequest {
  readonly tenantId: string
  readonly userId: string
  readonly assetId: string
  /** The amount of the new movement (the fee does not count, decisions.md "Single limit"). */
  readonly amount: bigint
  readonly limit: bigint
  /** The creation time of the new movement: the UTC day it counts in. */
  readonly nowMillis: number
}

/**
 * The statement that sums what counts against the user's daily limit of the asset today (a scalar subquery where
 * another statement needs it, PayerHold.ts).
 */
export const spentTodayQuery = (
  sql: SqlClient.SqlClient,
  request: {
    readonly tenantId: string
    readonly userId: string
    readonly assetId: string
    readonly nowMillis: number
    /** The new movement's own row, when its transaction has inserted it already: counted as `amount`, not here. */
    readonly excludingId?: string | undefined
  }
) =>
  sql`
    SELECT coalesce(sum(amount), 0)::text FROM transactions
    WHERE tenant_id = ${request.tenantId} AND source_user_id = ${request.userId} AND asset_id = ${request.assetId}
      AND created_at >= ${startOfUtcDay(request.nowMillis)}
      AND status NOT IN ('FAILED', 'REJECTED', 'CANCELLED')${
    request.excludingId === undefined ? sql`` : sql` AND id <> ${request.excludingId}`
  }
      AND (kind = 'WITHDRAWAL'
        OR (kind = 'INTERNAL_TRANSFER' AND destination_user_id IS DISTINCT FROM source_user_id))`

/** What counts against the user's daily limit of the asset today, as the database has it now. */
export const spentToday = (
  tenantId: string,
  userId: string,
  assetId: string,
  nowMillis: number
): Effect.Effect<bigint, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const row = yield* sql`SELECT (${spentTodayQuery(sql, { tenantId, userId, assetId, nowMillis })}) AS total`.pipe(
      Effect.flatMap(spentRow)
    )
    return row.total
  })

/** Whether the new amount fits beside what was spent today. */
export const fitsDailyLimit = (request: DailyLimitRequest) =>
  Effect.map(
    spentToday(request.tenantId, request.userId, request.assetId, request.nowMillis),
    (spent) => spent + request.amount <= request.limit
  )

/**
 * The binding check, in two steps inside the transaction that inserts the movement, before its funds move there:
 * `lockDailyLimit`, then the sum of the other movements (`spentTodayQuery` without the new row, read in a later
 * statement, PayerHold.ts) compared by `exceedsDailyLimit`. A transaction-scoped advisory lock per (user, asset)
 * serializes the creators of movements that count against the same limit; each reads the sum only in a statement
 * that starts once it holds the lock, and in READ COMMITTED that statement sees every movement an earlier holder
 * committed. The lock is released at commit or rollback, so the movement's row (inserted before the lock or after,
 * in the same transaction) is counted by the next holder. Releases (FAILED, REJECTED, CANCELLED) need no lock: they
 * only lower the sum.
 *
 * An advisory lock rather than a row of its own: it needs no table and no row to create first, and a hash collision
 * between two (user, asset) pairs only serializes them, never lets one pass wrongly. It is always taken before the
 * ledger's account rows (lock order in docs/ledger.md).
 */
export const lockDailyLimit = (
  request: { readonly userId: string; readonly assetId: string }
): Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`SELECT pg_advisory_xact_lock(hashtextextended(${`coffer-daily-limit:${request.userId}:${request.assetId}`}, 0))`
  })

/** The binding comparison, on a sum read after `lockDailyLimit`. */
export const exceedsDailyLimit = (request: DailyLimitRequest, spent: bigint): Effect.Effect<void, LimitExceeded> =>
  spent + request.amount <= request.limit
    ? Effect.void
    : Effect.fail(new LimitExceeded({ message: dailyLimitExceededMessage }))
