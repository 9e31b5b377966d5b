/**
 * decisions.md "Daily limit": per user and asset, the sum of `amountRaw` of on-chain withdrawals and cross-user
 * internal transfers created in the current UTC day that did not end FAILED, REJECTED or CANCELLED, including the new
 * one, kept as a running total per day in the database (sql/0021_payer_hold_and_daily_totals.sql). The quote reads it
 * to refuse early (and for `estimate_fee`); the binding check (the limit's lock, then the total,
 * `hold_payer_or_refuse`) runs inside the statement that creates the movement, so N parallel requests that each fit but
 * together exceed the limit never all pass (docs/transfers.md "Limits under concurrency").
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeSingleRow, Numeric } from "../db/RowSchemas.ts"

export const dailyLimitExceededMessage = "daily limit exceeded"

// Compiled once (db/RowSchemas.ts): the sum decoded at this edge, a mismatch a defect naming the query.
const spentRow = decodeSingleRow(Schema.Struct({ total: Numeric }), "DailyLimit.spentToday")

/** The UTC day `millis` falls in, as PostgreSQL's `date` reads it (`YYYY-MM-DD`): the daily limit's window. */
export const utcDay = (millis: number): string => new Date(millis).toISOString().slice(0, 10)

/**
 * What counts against the user's daily limit of the asset today, as the database has it now: one row of the
 * running totals (`daily_spent`, sql/0021_payer_hold_and_daily_totals.sql, where what counts is defined once and
 * kept up to date by a trigger), which the binding check (`hold_payer_or_refuse`, Movements.ts) reads too.
 */
export const spentToday = (
  userId: string,
  assetId: string,
  nowMillis: number
): Effect.Effect<bigint, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const row = yield* sql`SELECT daily_spent(${userId}, ${assetId}, ${utcDay(nowMillis)}::date)::text AS total`.pipe(
      Effect.flatMap(spentRow)
    )
    return row.total
  })

/**
 * The binding check, inside the statement that inserts the movement, before its funds move there: the daily limit's
 * lock (`dailyLimitLockKey`), then the day's total, compared, in one call (`hold_payer_or_refuse`, Movements.ts).
 * A transaction-scoped advisory lock per (user, asset) serializes the creators of movements that count against the same
 * limit; each reads the total only in a statement that starts once it holds the lock (inside the function), and in READ
 * COMMITTED that statement sees every movement an earlier holder committed. The movement joins the total at the end of
 * its statement and the lock is released at its commit, so the next holder counts it. Releases (FAILED, REJECTED,
 * CANCELLED) need no lock: they only lower the total.
 *
 * An advisory lock rather than a row of its own: it needs no table and no row to create first, and a hash collision
 * between two (user, asset) pairs only serializes them, never lets one pass wrongly (the key is hashed with
 * `hashtextextended(key, 0)`). It is always taken before the ledger's account rows (lock order in docs/ledger.md).
 */
export const dailyLimitLockKey = (request: { readonly userId: string; readonly assetId: string }): string =>
  `coffer-daily-limit:${request.userId}:${request.assetId}`
