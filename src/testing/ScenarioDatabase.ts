/**
 * A scenario's database: a fresh copy of a migrated template (`CREATE DATABASE … TEMPLATE`, tens of milliseconds),
 * dropped when the scenario ends; and what the virtual clock asks of it: a number that moves whenever a row of the
 * service's tables changes (`changes`, fed by a row trigger the kit installs on the copy, never on a real database),
 * and when a webhook delivery falls due. Whether the service is still working is counted in the process
 * (Scenario.ts, `settle`).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as Reactivity from "effect/reactivity/Reactivity"
import { runMigrations } from "../db/Migrations.ts"
import * as EmbeddedPostgres from "../db/postgres/EmbeddedPostgres.ts"

export interface ScenarioServer {
  /** A superuser URL of the server (its `postgres` database). */
  readonly adminUrl: string
  /** A migrated database closed to connections, copied for each scenario. */
  readonly template: string
}

/**
 * Tables whose rows change on every repetition of a loop whatever happens (the instance heartbeat, the runner's
 * own bookkeeping): a change there says nothing about work being done.
 */
export const changeCounterIgnoredTables: ReadonlyArray<string> = [
  "service_instances",
  "cluster_runners",
  "cluster_locks",
  "auth_nonces",
  // Every scan writes its cursor's check time; a new block also writes chain_blocks, which is watched.
  "chain_cursors"
]

const identifier = /^[a-z_][a-z0-9_]*$/

const pgClient = (url: string, maxConnections: number) =>
  PgClient.make({ url: Redacted.make(url), maxConnections }).pipe(Effect.provide(Reactivity.layer))

const adminClient = (adminUrl: string) => pgClient(adminUrl, 1)

const withUrlDatabase = (adminUrl: string, database: string) => {
  const url = new URL(adminUrl)
  url.pathname = `/${database}`
  return url.href
}

/**
 * Migrates `template` on the server at `adminUrl` and closes it to connections, once, for the scenarios of a run
 * outside vitest (`npm run scenario`); test/support/global-setup.ts does the same for the test run.
 */
export const prepareTemplate = (adminUrl: string, template: string) =>
  Effect.scoped(Effect.gen(function*() {
    if (!identifier.test(template)) return yield* Effect.die(new Error(`bad template name ${template}`))
    const admin = yield* adminClient(adminUrl)
    yield* admin.unsafe(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`)
    yield* admin.unsafe(`CREATE DATABASE ${template}`)
    yield* Effect.scoped(Effect.flatMap(
      pgClient(withUrlDatabase(adminUrl, template), 1),
      (client) => Effect.provideService(runMigrations, SqlClient.SqlClient, client)
    ))
    yield* admin.unsafe(`ALTER DATABASE ${template} WITH ALLOW_CONNECTIONS false`)
    return { adminUrl, template } satisfies ScenarioServer
  })).pipe(Effect.orDie)

/**
 * For a server the kit started itself and deletes afterwards (never one of the tester's): no fsync, no full-page
 * images, no commit waiting for its WAL. A crash would lose the server, which is thrown away anyway; what a scenario
 * sees (visibility, locks, constraints) is unchanged, and it no longer waits on a disk shared with other work.
 */
export const relaxDurability = (adminUrl: string) =>
  Effect.scoped(Effect.gen(function*() {
    const admin = yield* adminClient(adminUrl)
    yield* admin.unsafe(`ALTER SYSTEM SET fsync = off`)
    yield* admin.unsafe(`ALTER SYSTEM SET full_page_writes = off`)
    yield* admin.unsafe(`ALTER SYSTEM SET synchronous_commit = off`)
    yield* admin.unsafe(`SELECT pg_reload_conf()`)
  })).pipe(Effect.orDie)

/** A throw-away embedded PostgreSQL in `directory` with a migrated template, for the length of the scope. */
export const embeddedServer = (directory: string): Effect.Effect<ScenarioServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* EmbeddedPostgres.start(directory).pipe(Effect.orDie)
    yield* relaxDurability(Redacted.value(server.url))
    return yield* prepareTemplate(Redacted.value(server.url), "coffer_scenario_template")
  })

const countRow = Schema.Struct({ changes: Schema.String })

export interface ScenarioDatabase {
  readonly url: string
  readonly name: string
  /** Moves whenever a row of a watched table changes. */
  readonly changes: Effect.Effect<string>
  /** Puts the change trigger on every table of the service that has none yet (cluster tables appear at start). */
  readonly watchTables: Effect.Effect<void>
  /** The earliest `next_at` of a PENDING webhook delivery (what the dispatcher's sweep acts on), in milliseconds. */
  readonly nextDue: Effect.Effect<number | undefined>
  /** A client on the scenario's database outside the service (checks, fingerprints), on the real clock. */
  readonly sql: SqlClient.SqlClient
}

let databaseCounter = 0
const debug = process.env.COFFER_SCENARIO_DEBUG === "1"

/** A fresh copy of the template, dropped (WITH FORCE) when the scope closes. */
export const cloneDatabase = (server: ScenarioServer): Effect.Effect<ScenarioDatabase, never, Scope.Scope> =>
  Effect.gen(function*() {
    const name = `coffer_scenario_${process.pid}_${databaseCounter++}_${Date.now().toString(36)}`
    yield* Effect.acquireRelease(
      Effect.scoped(Effect.flatMap(adminClient(server.adminUrl), (admin) =>
        Effect.andThen(
          admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${server.template}`),
          // A throw-away copy: a commit need not wait for its WAL to reach the disk (what a crash would lose, nobody
          // keeps). Visibility and locking are unchanged; on a busy disk this was a wait on every commit of a step.
          admin.unsafe(`ALTER DATABASE ${name} SET synchronous_commit = off`)
        ))),
      () =>
        Effect.scoped(Effect.flatMap(adminClient(server.adminUrl), (admin) =>
          admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))).pipe(Effect.ignore)
    ).pipe(Effect.orDie)
    const url = withUrlDatabase(server.adminUrl, name)
    const sql = yield* pgClient(url, 2).pipe(Effect.orDie)
    yield* sql.unsafe(`CREATE SEQUENCE IF NOT EXISTS scenario_changes`).pipe(Effect.orDie)
    if (debug) yield* sql.unsafe(`CREATE UNLOGGED TABLE scenario_change_tables (name text PRIMARY KEY, n bigint)`).pipe(Effect.orDie)
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION scenario_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM nextval('scenario_changes');
      ${debug ? "INSERT INTO scenario_change_tables VALUES (TG_TABLE_NAME || ' ' || TG_OP, 1) ON CONFLICT (name) DO UPDATE SET n = scenario_change_tables.n + 1;" : ""}
      RETURN NULL; END $$`).pipe(Effect.orDie)
    const ignored = changeCounterIgnoredTables.map((table) => `'${table}'`).join(", ")
    const watchTables = sql.unsafe(`
      DO $$ DECLARE t record; BEGIN
        FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT IN (${ignored}, 'scenario_change_tables')
            AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'scenario_changed')
        LOOP
          EXECUTE format('CREATE TRIGGER scenario_changed AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION scenario_changed()', t.relname);
        END LOOP;
      END $$`).pipe(Effect.orDie, Effect.asVoid)
    yield* watchTables
    const sample = sql.unsafe(`SELECT last_value::text || ':' || is_called::text AS changes FROM scenario_changes`).pipe(
      Effect.orDie,
      Effect.map((rows) => Schema.decodeUnknownSync(countRow)(rows[0]))
    )
    return {
      url,
      name,
      changes: Effect.map(sample, (row) => row.changes).pipe(Effect.tap(() =>
        debug
          ? Effect.flatMap(
            sql.unsafe(`DELETE FROM scenario_change_tables RETURNING name, n`).pipe(Effect.orDie),
            (rows) => Effect.sync(() => rows.length > 0 && console.error("changed:", rows.map((row: any) => `${row.name}=${row.n}`).join(" ")))
          )
          : Effect.void
      )),
      watchTables,
      nextDue: sql.unsafe(`
        SELECT (extract(epoch FROM min(GREATEST(next_at, leased_until))) * 1000)::float8 AS due
        FROM webhook_deliveries WHERE status = 'PENDING'`).pipe(
        Effect.orDie,
        Effect.map((rows) => {
          const due = (rows[0] as { due: number | null } | undefined)?.due
          return due == null ? undefined : Math.round(Number(due))
        })
      ),
      sql
    }
  })
