/**
 * Storage for the whole service: one PostgreSQL pool, migrated before the layer is ready, so nothing above it ever
 * sees an old schema. Its connections carry the session limits of SessionLimits.ts (lock, statement and
 * idle-in-transaction timeouts), so a stuck holder of row locks is cut off in seconds. DATABASE_URL when set (production); otherwise a private PostgreSQL under DATA_DIR
 * (development), whose death stops the service: every query after it would fail anyway, and a clear crash beats a
 * service that answers 500 to everything.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, type Duration, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../Config.ts"
import * as MeteredPgClient from "./MeteredPgClient.ts"
import * as EmbeddedPostgres from "./postgres/EmbeddedPostgres.ts"
import { runMigrations } from "./Migrations.ts"
import { sessionLimitParameters } from "./SessionLimits.ts"

export class DatabaseStartupError extends Data.TaggedError("DatabaseStartupError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Enough for the API and the workers of one process; PostgreSQL allows 100 connections by default. */
export const poolConnectionsMax = 10
/** Exit status when the embedded PostgreSQL dies under the running service (EX_UNAVAILABLE). */
export const serverLostExitCode = 69

/** Every distinct message down the cause chain: the Migrator's "Migration … failed" says nothing by itself. */
const describeCause = (error: unknown): string => {
  const messages: Array<string> = []
  for (let cause = error, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    if (cause.message !== "" && !messages.some((message) => message.includes(cause.message))) {
      messages.push(cause.message)
    }
  }
  return messages.length === 0 ? String(error) : messages.join(": ")
}

/**
 * Called once bringing storage up no longer needs this process's event loop for a while: the embedded postmaster
 * has been spawned (its crash recovery runs on its own), or there is nothing to spawn (DATABASE_URL). main.ts loads
 * the rest of the service's modules then, so that loading and PostgreSQL's start overlap: the two are most of a
 * restart's readiness promise (README).
 */
export const StorageUnderway = Context.Reference<() => void>("coffer/StorageUnderway", { defaultValue: () => () => {} })

/** Where a URL points, without its credentials. */
const describeUrl = (url: Redacted.Redacted<string>): string => {
  try {
    const parsed = new URL(Redacted.value(url))
    // `?host=<directory>`: a Unix-domain socket, which libpq and the drivers prefer to the URL's host.
    return `${parsed.searchParams.get("host") ?? parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
  } catch {
    return "an unparseable URL"
  }
}

/**
 * How long opening one connection may take: the URL's `connect_timeout` when it gives one, else 15 s rather than the
 * driver's 5 s. A PostgreSQL on a loaded machine (a restart's crash recovery, a host at load 20) was seen to take
 * longer than 5 s to fork a backend, and the service then refused to start; a slow connection is better than none.
 */
const defaultConnectTimeoutSeconds = 15
const connectTimeoutOf = (url: Redacted.Redacted<string>): { readonly connectTimeout?: Duration.Input } => {
  try {
    if (new URL(Redacted.value(url)).searchParams.has("connect_timeout")) return {}
  } catch {
    // Not a URL the check can read: the driver reports it when it tries.
  }
  return { connectTimeout: `${defaultConnectTimeoutSeconds} seconds` }
}

/**
 * `checkpointAfterMigrations` (the embedded server, whose superuser we are): a `CHECKPOINT` once migrations were
 * applied. A crash's recovery replays the WAL written since the last checkpoint, and a fresh database's migrations
 * are about 2.3 MB of it with none since initdb: a kill -9 in a new DATA_DIR's first minutes replayed it all. The
 * restart then took 2.59-2.69 s on an idle machine, 2.33-2.36 s with this checkpoint (2026-11-27): one cause of the
 * bench's `--only` runs, whose restarted service is such a new one, going over the 3 s promise (docs/benchmarks.md,
 * tenth).
 */
/**
 * Pool timings for a process whose Clock is virtual (the testers' kit, src/testing): its connect, idle and lifetime
 * timers would otherwise expire during a jump of virtual time while the connection is still being made.
 */
export interface PoolTimings {
  readonly connectTimeout?: Duration.Input
  readonly idleTimeout?: Duration.Input
  readonly connectionTTL?: Duration.Input
}

const connectAndMigrate = (
  url: Redacted.Redacted<string>,
  options: { readonly checkpointAfterMigrations?: boolean; readonly pool?: PoolTimings } = {}
) =>
  Effect.gen(function*() {
    // Migrations on a connection of their own, closed afterwards, without the session limits: a migration may run
    // long, and a second process waits on the first one's migration lock for as long as that takes.
    const applied = yield* Effect.scoped(Effect.gen(function*() {
      const migrator = yield* PgClient.make({ url, maxConnections: 1, ...connectTimeoutOf(url) })
      const applied = yield* runMigrations.pipe(Effect.provideService(SqlClient.SqlClient, migrator))
      if (applied.length > 0 && options.checkpointAfterMigrations === true) yield* migrator`CHECKPOINT`
      return applied
    }))
    if (applied.length > 0) {
      yield* Effect.logInfo(`applied migrations ${applied.map(([id, name]) => `${id}_${name}`).join(", ")}`)
    }
    // PgClient.make's client with its pool's use counted for /metrics (MeteredPgClient.ts).
    return yield* MeteredPgClient.make({
      url,
      maxConnections: poolConnectionsMax,
      startupParameters: sessionLimitParameters,
      ...connectTimeoutOf(url),
      ...options.pool
    })
  }).pipe(
    Effect.mapError((error) =>
      new DatabaseStartupError({
        message: `cannot open the database at ${describeUrl(url)}: ${describeCause(error)}`,
        cause: error
      })
    )
  )

/** A pool on `url`, migrated; for production and for tests (see test/support/db-per-file.ts). */
export const layerFromUrl = (
  url: Redacted.Redacted<string>,
  pool?: PoolTimings
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseStartupError> =>
  PgClient.layerFrom(connectAndMigrate(url, pool === undefined ? {} : { pool }))

/**
 * Starts PostgreSQL under `dataDir`, stops it after the pool has closed, and exits the process if it dies first.
 * Fails, leaving it alone, while another process owns `dataDir` (EmbeddedPostgres.start, OwnerLock.ts).
 */
export const layerEmbedded = (
  dataDir: string
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseStartupError> =>
  PgClient.layerFrom(Effect.gen(function*() {
    const onSpawned = yield* StorageUnderway
    const server = yield* EmbeddedPostgres.start(dataDir, { onSpawned }).pipe(
      Effect.mapError((error) => new DatabaseStartupError({ message: error.message, cause: error }))
    )
    yield* Effect.logInfo(
      `embedded PostgreSQL ready on ${server.socketDirectory === undefined ? "" : `${server.socketDirectory} and `}` +
        `127.0.0.1:${server.port} (pid ${server.pid}, ${dataDir}/pg)`
    )
    // Forked after the server started, so it is interrupted before the server is stopped on shutdown.
    yield* server.exited.pipe(
      Effect.andThen(server.recentLog),
      Effect.flatMap((log) =>
        Effect.logFatal(
          `embedded PostgreSQL (pid ${server.pid}, ${dataDir}/pg) exited while the service was running; ` +
            `exiting with status ${serverLostExitCode}. Its last lines:\n${log.slice(-10).join("\n")}`
        )
      ),
      Effect.andThen(Effect.sync(() => process.exit(serverLostExitCode))),
      Effect.forkScoped
    )
    return yield* connectAndMigrate(server.url, { checkpointAfterMigrations: true })
  }))

/** DATABASE_URL when set, otherwise the embedded PostgreSQL under DATA_DIR. */
export const layer: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseStartupError, AppConfig> = Layer
  .unwrap(Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      // Nothing to spawn: a server elsewhere is already up (or not), whatever this process does meanwhile.
      ;(yield* StorageUnderway)()
      return layerFromUrl(config.databaseUrl.value)
    }
    return layerEmbedded(config.dataDir)
  }))
