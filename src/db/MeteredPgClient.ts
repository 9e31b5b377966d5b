/**
 * The service's PostgreSQL client with its pool's use counted, for `GET /metrics` (docs/operations.md, "Metrics":
 * `coffer_db_pool_connections_in_use`, `coffer_db_pool_checkouts_waiting`).
 *
 * @effect/sql-pg 4.0.5 keeps the pool of `PgClient.make` private (its `PgPool` has no stats, and the effect `Pool`
 * whose `Pool.stats` would answer is a closure inside it). So the client is assembled here from the same public parts
 * `PgClient.make` uses: `PgPool.make` with the same options, effect/sql's `SqlClient.make` with the settings
 * PgClient.ts passes it (transaction controls prepared, COMMIT checked for a rollback, savepoints released), and a
 * `Connection` over each pooled session that does what PgClient.ts's private `ConnectionImpl` does. What is added is
 * only the counting around each checkout: a fiber waiting for a session, and a session lent out (one statement, a
 * transaction, a reserved connection, a LISTEN). Anything else of PgClient (listen, notify, json) behaves as there.
 * When the library exposes its pool's stats, this file goes and Database.ts calls `PgClient.make` again.
 */
import type { PgConnection } from "@effect/sql-pg"
import { PgClient, PgPool } from "@effect/sql-pg"
import { Effect, type Scope, Stream } from "effect"
import type { Reactivity } from "effect/reactivity"
import { SqlClient, SqlError, type SqlConnection, Statement } from "effect/sql"

/** What a scrape reads: this client's pool, now. */
export interface PoolUse {
  /** Sessions lent out: a statement running, a transaction open, a connection reserved or listening. */
  inUse: number
  /** Fibers waiting for a session (every one is lent out and the pool is at its size). */
  waiting: number
  /** The pool's size (maxConnections). */
  readonly max: number
  /**
   * Statements sent and not yet answered, on any session (a reserved one included). Counted here, in the process,
   * from the moment the statement is handed to the driver: the testers' kit waits for none to be left before it
   * moves virtual time (src/testing/Scenario.ts), where the server's own view (`pg_stat_activity`) still shows a
   * statement written to the socket as idle until its backend reads it.
   */
  statements: number
  /** Transactions open (BEGIN answered, COMMIT or ROLLBACK not yet ended). */
  transactions: number
}

/** A PgClient that also answers its pool's use. */
export interface MeteredPgClient extends PgClient.PgClient {
  readonly poolUse: PoolUse
}

/** The pool use of a client made here; undefined for any other client (a test's own, a tool's). */
export const poolUseOf = (client: PgClient.PgClient): PoolUse | undefined =>
  "poolUse" in client ? (client as MeteredPgClient).poolUse : undefined

/** A checkout counted: waiting until it gives a session, in use from then until its scope closes. */
const countedCheckout = <A>(
  use: PoolUse,
  checkout: Effect.Effect<A, SqlError.SqlError, Scope.Scope>
): Effect.Effect<A, SqlError.SqlError, Scope.Scope> =>
  Effect.suspend(() => {
    let lent = false
    use.waiting++
    return checkout.pipe(
      Effect.tap(() =>
        Effect.uninterruptible(Effect.suspend(() => {
          lent = true
          use.waiting--
          use.inUse++
          return Effect.addFinalizer(() => Effect.sync(() => use.inUse--))
        }))
      ),
      Effect.onExit(() => Effect.sync(() => lent ? undefined : use.waiting--))
    )
  })

/** PostgreSQL answers `ROLLBACK` to `COMMIT` when the transaction was aborted (as PgClient.ts's `commit`). */
const commit = (connection: SqlConnection.Connection): Effect.Effect<void, SqlError.SqlError> =>
  Effect.flatMap(
    connection.executeRaw("COMMIT", []) as Effect.Effect<PgConnection.Result, SqlError.SqlError>,
    (result) =>
      result.command === "ROLLBACK"
        ? Effect.fail(
          new SqlError.SqlError({
            reason: new SqlError.UnknownError({
              cause: new Error("COMMIT rolled back an aborted transaction"),
              message: "PgClient: COMMIT rolled back an aborted transaction",
              operation: "commit"
            })
          })
        )
        : Effect.void
  )

type RowsTransform = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

/** Whether a statement opens a transaction (`BEGIN …`) or ends one (`COMMIT`, `ROLLBACK` but not to a savepoint). */
const transactionControl = (sql: string): "begin" | "end" | undefined => {
  const head = sql.trimStart().slice(0, 20).toUpperCase()
  if (head.startsWith("BEGIN") || head.startsWith("START TRANSACTION")) return "begin"
  if (head.startsWith("COMMIT") || head.startsWith("END") || (head.startsWith("ROLLBACK") && !head.startsWith("ROLLBACK TO"))) {
    return "end"
  }
  return undefined
}

/**
 * A pooled session as effect/sql's Connection (PgClient.ts `ConnectionImpl`, without a stream acquirer), its
 * statements counted in `use.statements` from the moment each is run until it is answered, fails or is interrupted,
 * and its transaction in `use.transactions` from an answered BEGIN until COMMIT or ROLLBACK ends, however it ends.
 */
const connectionOf = (use: PoolUse) => (connection: PgConnection.PgConnection): SqlConnection.Connection => {
  let inTransaction = false
  const counted = <A, E>(sql: string, statement: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      use.statements++
      const control = transactionControl(sql)
      return Effect.onExit(statement, (exit) =>
        Effect.sync(() => {
          use.statements--
          if (control === "begin" && exit._tag === "Success" && !inTransaction) {
            inTransaction = true
            use.transactions++
          } else if (control === "end" && inTransaction) {
            inTransaction = false
            use.transactions--
          }
        }))
    })
  const run = (sql: string, params: ReadonlyArray<unknown>, prepare = true) =>
    Effect.map(counted(sql, connection.query(sql, params, prepare)), (result) => result.rows)
  return {
    execute: (sql, params, transformRows: RowsTransform) =>
      transformRows ? Effect.map(run(sql, params), transformRows) : run(sql, params),
    executeRaw: (sql, params) => counted(sql, connection.query(sql, params)),
    executeValues: (sql, params) => counted(sql, connection.queryValues(sql, params)),
    executeValuesUnprepared: (sql, params) => counted(sql, connection.queryValues(sql, params, false)),
    executeUnprepared: (sql, params, transformRows: RowsTransform) => {
      const operation = run(sql, params, false)
      return transformRows ? Effect.map(operation, transformRows) : operation
    },
    executeStream: (sql, params, transformRows: RowsTransform) => {
      const stream = Stream.suspend(() => {
        use.statements++
        return Stream.ensuring(connection.stream(sql, params), Effect.sync(() => use.statements--))
      })
      return transformRows
        ? Stream.mapArray(stream, (rows) => transformRows(rows) as typeof rows)
        : stream
    }
  }
}

/** `PgClient.json`'s fragment: the compiler (PgClient.makeCompiler) knows it by this tag. */
const PgJson = Statement.custom<PgClient.PgCustom>("PgJson")

/** As `PgClient.make(options)`, with the pool's use counted (`poolUseOf`). */
export const make = (
  options: PgClient.PgPoolConfig
): Effect.Effect<MeteredPgClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const pool = yield* PgPool.make(options)
    const use: PoolUse = { inUse: 0, waiting: 0, max: options.maxConnections ?? 10, statements: 0, transactions: 0 }
    const connection = connectionOf(use)
    const borrower: SqlConnection.Borrower = (f) =>
      Effect.suspend(() => {
        let lent = false
        use.waiting++
        return pool.use((session) =>
          Effect.suspend(() => {
            lent = true
            use.waiting--
            use.inUse++
            return Effect.ensuring(f(connection(session)), Effect.sync(() => use.inUse--))
          })
        ).pipe(Effect.onExit(() => Effect.sync(() => lent ? undefined : use.waiting--)))
      })
    const acquirer = Effect.map(countedCheckout(use, pool.get), connection)
    const listenAcquirer = countedCheckout(use, pool.reserve)
    const client = yield* SqlClient.make({
      acquirer,
      borrower,
      // As PgClient.ts: PostgreSQL prepares transaction control like any statement.
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      transactionAcquirer: Effect.map(countedCheckout(use, pool.reserve), connection),
      compiler: PgClient.makeCompiler(options.transformQueryNames, options.transformJson),
      driver: "pg",
      spanAttributes: [
        ...(options.spanAttributes ? Object.entries(options.spanAttributes) : []),
        ["db.system.name", "postgresql"],
        ["db.namespace", options.database ?? options.username ?? "postgres"],
        ["server.address", options.host ?? "localhost"],
        ["server.port", options.port ?? 5432]
      ],
      transformRows: options.transformResultNames
        ? Statement.defaultTransforms(options.transformResultNames, options.transformJson).array
        : undefined
    })
    return Object.assign(client, {
      [PgClient.TypeId]: PgClient.TypeId,
      config: options,
      poolUse: use,
      json: (value: unknown) => Statement.fragment([PgJson(value)]),
      listen: (channel: string) => Effect.flatMap(listenAcquirer, (connection) => connection.listen(channel)),
      notify: (channel: string, payload: string) =>
        Effect.asVoid(Effect.scoped(Effect.flatMap(acquirer, (connection) =>
          connection.executeRaw("SELECT pg_notify($1, $2)", [channel, payload]))))
    }) as MeteredPgClient
  })
