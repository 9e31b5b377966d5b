/**
 * Bounds on how long one database session can hold up another (docs/ledger.md "Locks and timeouts"). A process that
 * freezes inside a transaction (a pause, a debugger, a stuck event loop) keeps its row locks until the server ends
 * its session; without these, a frozen process blocked the other process's requests on the same wallet for as long as
 * it was frozen. Set on every connection of the service's pool as session defaults (startup parameters); migrations
 * run on a connection of their own without them (Database.ts), and `withoutSessionLimits` lifts them for one
 * maintenance transaction.
 *
 * The service never waits on anything outside the database inside a transaction (chain nodes, the signer, HTTP), so
 * a transaction idle for seconds means its process is stuck, and a lock wait of seconds means a stuck holder.
 */
import { Effect } from "effect"
import { SqlClient, SqlError } from "effect/sql"

/**
 * A session idle inside a transaction this long is ended by the server, which rolls the transaction back and frees
 * its locks. Our transactions issue their statements back to back (milliseconds apart, well under a second on a
 * loaded 2-core machine).
 */
export const idleInTransactionTimeoutMillis = 5_000
/**
 * A statement waiting this long for a lock fails (SQLSTATE 55P03), answered 503 PROVIDER_UNAVAILABLE (retryable).
 * Longer than the idle timeout, so a request queued behind a frozen process of this service gets the lock once the
 * server has ended that session, instead of failing; only a holder outside these limits (a psql session) makes it
 * fail. Under ordinary concurrency lock waits are far shorter: the pool lets at most `poolConnectionsMax`
 * transactions queue on one row, each a few milliseconds long.
 */
export const lockTimeoutMillis = 8_000
/**
 * Any one statement (lock waits included) is cancelled after this long (SQLSTATE 57014), also 503. Above the lock
 * timeout, and below the 30 s request limit (spec section 8) so a stuck statement answers before the request times out.
 */
export const statementTimeoutMillis = 15_000

/** Session defaults of the service's pool connections, as PostgreSQL startup parameters (values in milliseconds). */
export const sessionLimitParameters: Readonly<Record<string, string>> = {
  idle_in_transaction_session_timeout: String(idleInTransactionTimeoutMillis),
  lock_timeout: String(lockTimeoutMillis),
  statement_timeout: String(statementTimeoutMillis)
}

/** SQLSTATE with which the server ends a session idle in a transaction past its timeout. */
const idleInTransactionTimeoutSqlState = "25P03"

const isLimitReason = (reason: SqlError.SqlErrorReason): boolean => {
  if (reason instanceof SqlError.LockTimeoutError || reason instanceof SqlError.StatementTimeoutError) return true
  const cause: unknown = reason.cause
  return typeof cause === "object" && cause !== null && "code" in cause && cause.code === idleInTransactionTimeoutSqlState
}

/**
 * Whether a failure (or defect) is one of these limits cutting a statement or a session, looked for down the `cause`
 * chain (repositories wrap SqlErrors in defects). Such a failure is the database being busy, not a bug: the request
 * is answered 503 PROVIDER_UNAVAILABLE, retryable (spec section 7), and changed nothing (its transaction rolled back).
 */
export const isSessionLimitError = (error: unknown): boolean => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    if (SqlError.isSqlError(current) && isLimitReason(current.reason)) return true
    if (SqlError.isSqlErrorReason(current) && isLimitReason(current)) return true
    current = (current as { readonly cause?: unknown }).cause
  }
  return false
}

/**
 * Runs `effect` in one transaction without the session limits, for maintenance that may legitimately run long (a
 * full ledger audit, a large backfill). SET LOCAL ends with the transaction, so the pooled connection keeps its limits.
 */
export const withoutSessionLimits = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError.SqlError, R | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET LOCAL statement_timeout = 0`
      yield* sql`SET LOCAL lock_timeout = 0`
      yield* sql`SET LOCAL idle_in_transaction_session_timeout = 0`
      return yield* effect
    }))
  })
