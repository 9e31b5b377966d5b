/**
 * The service's database, for a tool that runs beside the service (the ledger audit): found where the service finds
 * it, but never created and never migrated, and never a second PostgreSQL over a data directory in use.
 *
 *   - `DATABASE_URL` set: that database.
 *   - Otherwise the embedded cluster under `DATA_DIR/pg`:
 *     - a process holds `DATA_DIR/owner.lock` (postgres/OwnerLock.ts), so the service runs it: connect to its server at the
 *       URL the service wrote to `DATA_DIR/pg-conn.json` (0600) when it started it;
 *     - nobody holds it: the service is stopped, so start the cluster here (EmbeddedPostgres.start, which takes the
 *       lock; the service cannot start until the tool is done) and stop it when the scope closes;
 *     - no cluster at all: refuse. initdb would only make an empty database to look at.
 *
 * The lock is probed and given back before `start` takes it again (nothing in a process may hold `owner.lock` open
 * twice, postgres/OwnerLock.ts): a service that starts in that instant wins, and `start` then fails saying who owns the
 * directory.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Redacted, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { existsSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { AppConfig } from "../Config.ts"
import { DatabaseStartupError } from "./Database.ts"
import * as EmbeddedPostgres from "./postgres/EmbeddedPostgres.ts"
import * as OwnerLock from "./postgres/OwnerLock.ts"

/** A tool needs one connection; a second leaves room for a stray query without queueing. */
const toolConnectionsMax = 2
const connectTimeoutSeconds = 10

export interface ExistingDatabase {
  readonly client: PgClient.PgClient
  /** Where it connected, without credentials, for the tool's report. */
  readonly location: string
}

/** Where a URL points, without its credentials. */
const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    // `?host=<directory>`: a Unix-domain socket, which libpq and the drivers prefer to the URL's host.
    return `${parsed.searchParams.get("host") ?? parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
  } catch {
    return "an unparseable URL"
  }
}

/** The innermost message (ECONNREFUSED, password authentication failed, ...) says the most. */
const describeCause = (error: unknown): string => {
  let message = String(error)
  for (let cause = error, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    if (cause.message !== "") message = cause.message
  }
  return message
}

const failure = (message: string, cause?: unknown) => new DatabaseStartupError({ message, cause })

const open = (url: Redacted.Redacted<string>, location: string, applicationName: string) =>
  PgClient.make({
    url,
    maxConnections: toolConnectionsMax,
    connectTimeout: `${connectTimeoutSeconds} seconds`,
    applicationName
  }).pipe(
    // Reactivity invalidates caches after writes; a tool that reads needs only the service's plumbing.
    Effect.provide(Reactivity.layer),
    Effect.map((client): ExistingDatabase => ({ client, location })),
    Effect.mapError((error) => failure(`cannot connect to ${location}: ${describeCause(error)}`, error))
  )

/** The URL the running service wrote for its embedded server. */
const runningServiceUrl = (dataDir: string, ownerPid: number | undefined) =>
  Effect.try({
    try: () => {
      const parsed: unknown = JSON.parse(readFileSync(join(dataDir, "pg-conn.json"), "utf8"))
      const url = typeof parsed === "object" && parsed !== null && "url" in parsed ? parsed.url : undefined
      if (typeof url !== "string") throw new Error("it names no url")
      return url
    },
    catch: (cause) =>
      failure(
        `the service (pid ${ownerPid ?? "unknown"}) owns ${dataDir}, but ${join(dataDir, "pg-conn.json")} is not ` +
          `readable (${describeCause(cause)}); is it still starting?`,
        cause
      )
  })

/**
 * Connects to the service's database as described above; `applicationName` shows in `pg_stat_activity`. The pool,
 * and a PostgreSQL started here, close with the scope.
 */
export const connect = (
  applicationName: string
): Effect.Effect<ExistingDatabase, DatabaseStartupError, AppConfig | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      const url = config.databaseUrl.value
      return yield* open(url, `DATABASE_URL (${describeUrl(Redacted.value(url))})`, applicationName)
    }
    const dataDir = resolve(config.dataDir)
    if (!existsSync(join(dataDir, "pg", "PG_VERSION"))) {
      return yield* failure(
        `no database under ${join(dataDir, "pg")}: set DATABASE_URL, or DATA_DIR to the service's data directory`
      )
    }
    const probe = yield* Effect.tryPromise({
      try: () => OwnerLock.tryAcquire(dataDir),
      catch: (cause) => failure(`cannot tell whether the service runs on ${dataDir}: ${describeCause(cause)}`, cause)
    })
    if (probe._tag === "Taken") {
      const url = yield* runningServiceUrl(dataDir, probe.ownerPid)
      return yield* open(
        Redacted.make(url),
        `the running service's embedded PostgreSQL (${describeUrl(url)}, service pid ${probe.ownerPid ?? "unknown"}, ` +
          `${dataDir})`,
        applicationName
      )
    }
    probe.release()
    const server = yield* EmbeddedPostgres.start(dataDir).pipe(
      Effect.mapError((error) => failure(error.message, error))
    )
    return yield* open(
      server.url,
      `the embedded PostgreSQL under ${dataDir}, started for this run (127.0.0.1:${server.port}; the service was ` +
        `not running)`,
      applicationName
    )
  })
