/**
 * `npm run ledger:check` without DATABASE_URL (db/ExistingDatabase.ts, README "Ledger audit"): it finds the embedded
 * PostgreSQL under DATA_DIR the way the service does, and never starts a second one over a directory whose owner
 * runs (db/postgres/OwnerLock.ts). This test process plays the running service: it starts the cluster and holds the lock.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Redacted, Scope } from "effect"
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import * as EmbeddedPostgres from "../../src/db/postgres/EmbeddedPostgres.ts"
import { runMigrations } from "../../src/db/Migrations.ts"
import * as OwnerLock from "../../src/db/postgres/OwnerLock.ts"
import { runLedgerCheck } from "./LedgerCheck.ts"

const dataDir = mkdtempSync(join(tmpdir(), "coffer-ledger-check-"))
// As root, PostgreSQL runs as `postgres` and must pass through the directory.
chmodSync(dataDir, 0o755)
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const timeout = { timeout: 180_000 }

describe("ledger:check on DATA_DIR", () => {
  it.live("no cluster under DATA_DIR: exit 2 naming it, and nothing is created (no initdb for an audit)", () =>
    Effect.gen(function*() {
      const run = yield* runLedgerCheck({ DATA_DIR: dataDir })
      assert.strictEqual(run.code, 2, run.stdout + run.stderr)
      assert.include(run.stderr, `no database under ${join(dataDir, "pg")}`)
      assert.isFalse(existsSync(join(dataDir, "pg")))
    }), timeout)

  it.live("while the service owns DATA_DIR: audits its running server through pg-conn.json; the owner's server keeps running alone", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* EmbeddedPostgres.start(dataDir).pipe(Scope.provide(scope))
      yield* runMigrations.pipe(Effect.provide(PgClient.layer({ url: server.url, maxConnections: 1 })))

      const run = yield* runLedgerCheck({ DATA_DIR: dataDir })
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      // Where it connected: the server's Unix socket directory when pg-conn.json names one, else its TCP address.
      const location = new URL(Redacted.value(server.url)).searchParams.get("host") ?? "127.0.0.1"
      assert.include(run.stdout, `the running service's embedded PostgreSQL (${location}:${server.port}/postgres, service pid ${process.pid}`)
      assert.strictEqual(run.lastLine, "ledger ok: 0 accounts, 0 entries")
      // Still the owner's server, untouched: the check neither stopped it nor took the directory.
      assert.doesNotThrow(() => process.kill(server.pid, 0))
      assert.strictEqual((yield* Effect.promise(() => OwnerLock.tryAcquire(dataDir)))._tag, "Taken")

      yield* Scope.close(scope, Exit.void)
    }), timeout)

  it.live("when nobody owns DATA_DIR: starts the cluster for the run, audits it, stops it and gives the directory back", () =>
    Effect.gen(function*() {
      const run = yield* runLedgerCheck({ DATA_DIR: dataDir })
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.include(run.stdout, `the embedded PostgreSQL under ${dataDir}, started for this run`)
      assert.strictEqual(run.lastLine, "ledger ok: 0 accounts, 0 entries")
      // Stopped (a clean shutdown removes postmaster.pid) and the lock released: the service can start again.
      assert.isFalse(existsSync(join(dataDir, "pg", "postmaster.pid")))
      const lock = yield* Effect.promise(() => OwnerLock.tryAcquire(dataDir))
      assert.strictEqual(lock._tag, "Held")
      if (lock._tag === "Held") lock.release()
    }), timeout)
})
