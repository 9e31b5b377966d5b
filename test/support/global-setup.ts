/**
 * One PostgreSQL for the whole test run, and a migrated template database that test/support/db-per-file.ts copies
 * for each test file. TEST_DATABASE_URL, else DATABASE_URL (a superuser URL), points at an existing server
 * instead; otherwise a throw-away embedded cluster is started in a temporary directory and deleted afterwards.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Redacted, Scope } from "effect"
import { existsSync } from "node:fs"
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import type { TestProject } from "vitest/node"
import * as EmbeddedPostgres from "../../src/db/postgres/EmbeddedPostgres.ts"
import { runMigrations } from "../../src/db/Migrations.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** Superuser URL of the test server's `postgres` database. */
    readonly pgAdminUrl: string
    /** A migrated database, closed to connections, that each test file's database is copied from. */
    readonly pgTemplate: string
  }
}

const runDirectoryPrefix = "coffer-test-"
const ownerFile = "owner-pid"

const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * A run killed with -9 leaves its server running and its directory behind; no hook of that run could clean up.
 * Directories whose owning vitest process is gone are stopped and deleted here. Other runs' are left alone.
 */
const cleanUpAbandonedRuns = async (): Promise<void> => {
  const entries = (await readdir(tmpdir())).filter((name) => name.startsWith(runDirectoryPrefix))
  for (const name of entries) {
    const directory = join(tmpdir(), name)
    const owner = Number(await readFile(join(directory, ownerFile), "utf8").catch(() => "NaN"))
    if (!Number.isSafeInteger(owner) || isRunning(owner)) continue
    await Effect.runPromise(Effect.ignore(EmbeddedPostgres.stopLeftover(directory)))
    await rm(directory, { recursive: true, force: true })
  }
}

const withAdmin = async <A>(url: string, use: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

interface TestServer {
  readonly admin: string
  readonly template: string
  readonly close: () => Promise<void>
}

/**
 * Several projects name this file (vitest.config.ts: the shared-worker and the isolated files); they share one server
 * and one template. Kept on globalThis, since each project may load this module on its own.
 */
interface Shared {
  server: Promise<TestServer> | undefined
  users: number
}
const sharedKey = Symbol.for("coffer.test.server")
const shared: Shared = ((globalThis as Record<symbol, Shared | undefined>)[sharedKey] ??= { server: undefined, users: 0 })

export default async function setup(project: TestProject) {
  shared.users += 1
  const server = await (shared.server ??= startServer())
  project.provide("pgAdminUrl", server.admin)
  project.provide("pgTemplate", server.template)
  return async () => {
    shared.users -= 1
    if (shared.users > 0) return
    shared.server = undefined
    await server.close()
  }
}

const startServer = async (): Promise<TestServer> => {
  const scope = await Effect.runPromise(Scope.make())
  let directory: string | undefined
  // A server the tests may create databases on: TEST_DATABASE_URL, else DATABASE_URL (both superuser URLs).
  let adminUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL
  if (adminUrl === undefined || adminUrl === "") {
    await cleanUpAbandonedRuns()
    directory = await mkdtemp(join(tmpdir(), runDirectoryPrefix))
    // mkdtemp makes it 0700; as root, PostgreSQL runs as `postgres` and must pass through it.
    await chmod(directory, 0o755)
    await writeFile(join(directory, ownerFile), String(process.pid))
    const server = await Effect.runPromise(EmbeddedPostgres.start(directory).pipe(Scope.provide(scope)))
    adminUrl = Redacted.value(server.url)
  }
  const admin = adminUrl

  const template = `coffer_template_${process.pid}`
  await withAdmin(admin, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${template}`)
    await client.query(`CREATE DATABASE ${template}`)
  })
  const templateUrl = new URL(admin)
  templateUrl.pathname = `/${template}`
  // The pool is closed when runPromise returns: a template must have no open connection while it is copied.
  await Effect.runPromise(
    runMigrations.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(templateUrl.href), maxConnections: 1 })))
  )
  await withAdmin(admin, (client) => client.query(`ALTER DATABASE ${template} WITH ALLOW_CONNECTIONS false`))

  return {
    admin,
    template,
    close: async () => {
      await withAdmin(admin, (client) => client.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`))
        .catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
      if (directory !== undefined && existsSync(directory)) await rm(directory, { recursive: true, force: true })
    }
  }
}
