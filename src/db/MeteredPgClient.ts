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

/** A pooled session as effect/sql's Connection (PgClient.ts `ConnectionImpl`, without a stream acquirer). */
const connectionOf = (connection: PgConnection.PgConnection): SqlConnection.Connection => {
  const run = (sql: string, params: ReadonlyArray<unknown>, prepare = true) =>
    Effect.map(connection.query(sql, params, prepare), (result) => result.rows)
  return {
    execute: (sql, params, transformRows: RowsTransform) =>
      transformRows ? Effect.map(run(sql, params), transformRows) : run(sql, params),
    executeRaw: (sql, params) => connection.query(sql, params),
    executeValues: (sql, params) => connection.queryValues(sql, params),
    executeValuesUnprepared: (sql, params) => connection.queryValues(sql, params, false),
    executeUnprepared: (sql, params, transformRows: RowsTransform) => {
      const operation = run(sql, params, false)
      return transformRows ? Effect.map(operation, transformRows) : operation
    },
    executeStream: (sql, params, transformRows: RowsTransform) => {
      const stream = connection.stream(sql, params)
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
    const use: PoolUse = { inUse: 0, waiting: 0, max: options.maxConnections ?? 10 }
    const borrower: SqlConnection.Borrower = (f) =>
      Effect.suspend(() => {
        let lent = false
        use.waiting++
        return pool.use((connection) =>
          Effect.suspend(() => {
            lent = true
            use.waiting--
            use.inUse++
            return Effect.ensuring(f(connectionOf(connection)), Effect.sync(() => use.inUse--))
          })
        ).pipe(Effect.onExit(() => Effect.sync(() => lent ? undefined : use.waiting--)))
      })
    const acquirer = Effect.map(countedCheckout(use, pool.get), connectionOf)
    const listenAcquirer = countedCheckout(use, pool.reserve)
    const client = yield* SqlClient.make({
      acquirer,
      borrower,
      // As PgClient.ts: PostgreSQL prepares transaction control like any statement.
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      transactionAcquirer: Effect.map(countedCheckout(use, pool.reserve), connectionOf),
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
