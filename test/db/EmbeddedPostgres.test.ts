import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import net from "node:net"
import { join, resolve } from "node:path"
import { afterAll } from "vitest"
import * as Database from "../../src/db/Database.ts"
import * as EmbeddedPostgres from "../../src/db/postgres/EmbeddedPostgres.ts"
import { exitOf, isAlive, moduleUrl, outputOf, runNode, waitFor } from "../support/NodeProcess.ts"

const inDatabase = (url: Redacted.Redacted<string>) => <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.provide(effect, PgClient.layer({ url, maxConnections: 1 }))

describe("EmbeddedPostgres", () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "coffer-embedded-")), "data")
  // mkdtemp makes the parent 0700; as root PostgreSQL runs as `postgres` and must pass through it.
  chmodSync(join(dataDir, ".."), 0o755)
  const children: Array<ChildProcess> = []
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL")
    // Until a child has exited it still owns the directory, and stopLeftover leaves an owner's server alone.
    await Effect.runPromise(Effect.forEach(children, exitOf, { discard: true }))
    await Effect.runPromise(Effect.ignore(EmbeddedPostgres.stopLeftover(dataDir)))
    rmSync(join(dataDir, ".."), { recursive: true, force: true })
  })
  let firstPort = 0

  it.live("starts on a fresh directory: UTF8, 127.0.0.1 and a socket in DATA_DIR (none in /tmp), the service's URL on the socket, a checkpoint every 32 MB of WAL or 30 s, syncfs before a recovery, secrets 0600", () =>
    Effect.gen(function*() {
      const pid = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* EmbeddedPostgres.start(dataDir)
        firstPort = server.port
        const [settings] = yield* inDatabase(server.url)(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE kept (v text NOT NULL)`
          yield* sql`INSERT INTO kept VALUES ('written before a restart')`
          return yield* sql<
            {
              encoding: string
              ctype: string
              listen: string
              sockets: string
              overSocket: boolean
              walMax: string
              checkpointEvery: string
              recoverySync: string
            }
          >`
            SELECT current_setting('server_encoding') AS encoding,
                   (SELECT datctype FROM pg_database WHERE datname = current_database()) AS ctype,
                   current_setting('listen_addresses') AS listen, current_setting('unix_socket_directories') AS sockets,
                   inet_server_addr() IS NULL AS "overSocket",
                   current_setting('max_wal_size') AS "walMax", current_setting('checkpoint_timeout') AS "checkpointEvery",
                   current_setting('recovery_init_sync_method') AS "recoverySync"`
        }))
        // max_wal_size and checkpoint_timeout bound the WAL a crash recovery replays, syncfs the time it takes to make
        // sure the data directory is on disk first (Postmaster.ts: the restart promise).
        assert.deepStrictEqual(settings, {
          encoding: "UTF8",
          ctype: "C.UTF-8",
          listen: "127.0.0.1",
          // The URL the service gets reaches the server through its Unix-domain socket (no server address then).
          sockets: join(resolve(dataDir), "pg-socket"),
          overSocket: true,
          walMax: "32MB",
          checkpointEvery: "30s",
          recoverySync: "syncfs"
        })
        assert.strictEqual(server.socketDirectory, join(resolve(dataDir), "pg-socket"))
        assert.strictEqual(statSync(server.socketDirectory!).mode & 0o777, 0o700)
        // Tools that use the port still reach it over TCP.
        const overTcp = new URL(Redacted.value(server.url))
        overTcp.search = ""
        const [tcp] = yield* inDatabase(Redacted.make(overTcp.href))(
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ address: string }>`SELECT host(inet_server_addr()) AS address`)
        )
        assert.strictEqual(tcp?.address, "127.0.0.1")
        for (const file of ["pg-password", "pg-conn.json"]) {
          assert.strictEqual(statSync(join(dataDir, file)).mode & 0o777, 0o600, file)
        }
        const connection = JSON.parse(readFileSync(join(dataDir, "pg-conn.json"), "utf8"))
        assert.deepStrictEqual(connection, { port: server.port, url: Redacted.value(server.url) })
        assert.isTrue(isAlive(server.pid))
        return server.pid
      }))
      assert.isFalse(isAlive(pid), "the server stops when the scope closes")
    }))

  it("keeps to TCP when the socket's path would not fit a socket address, or would need quoting in the setting", () => {
    assert.strictEqual(EmbeddedPostgres.socketDirectoryFor("/tmp/coffer-data"), "/tmp/coffer-data/pg-socket")
    // 92 bytes of directory and `/.s.PGSQL.65535` fill sun_path's 107.
    assert.isDefined(EmbeddedPostgres.socketDirectoryFor(`/${"d".repeat(81)}`))
    assert.isUndefined(EmbeddedPostgres.socketDirectoryFor(`/${"d".repeat(82)}`))
    assert.isUndefined(EmbeddedPostgres.socketDirectoryFor("/tmp/coffer data"))
    assert.isUndefined(EmbeddedPostgres.socketDirectoryFor("/tmp/coffer,data"))
  })

  it.live("restarts on the same directory with its data and its port", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* EmbeddedPostgres.start(dataDir)
      assert.strictEqual(server.port, firstPort)
      const rows = yield* inDatabase(server.url)(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT v FROM kept`))
      assert.deepStrictEqual(rows, [{ v: "written before a restart" }])
    })))

  it.live("moves off a last port that is now taken, and reports a taken explicit port", () =>
    Effect.gen(function*() {
      const squatter = net.createServer()
      yield* Effect.promise(() => new Promise<void>((resolve) => squatter.listen(firstPort, "127.0.0.1", resolve)))
      try {
        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* EmbeddedPostgres.start(dataDir)
          assert.notStrictEqual(server.port, firstPort)
        }))
        const error = yield* Effect.flip(Effect.scoped(EmbeddedPostgres.start(dataDir, { port: firstPort })))
        assert.include(error.message, "before it was ready")
        assert.include(error.message, "could not bind")
      } finally {
        yield* Effect.promise(() => new Promise((resolve) => squatter.close(resolve)))
      }
    }))

  it.live("restarts within 3 s after the node process that owned it was killed with -9", () =>
    Effect.gen(function*() {
      const child = runNode(`
        import { Effect } from "effect"
        import { PgClient } from "@effect/sql-pg"
        import { SqlClient } from "effect/sql"
        import * as EmbeddedPostgres from ${JSON.stringify(moduleUrl("db/postgres/EmbeddedPostgres.ts"))}
        await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
          const server = yield* EmbeddedPostgres.start(${JSON.stringify(dataDir)})
          yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql\`INSERT INTO kept VALUES ('written by the killed process')\`)
            .pipe(Effect.provide(PgClient.layer({ url: server.url, maxConnections: 1 })))
          console.log("READY " + server.pid)
          yield* Effect.never
        })))`)
      children.push(child)
      const output = outputOf(child)
      yield* waitFor(`the child to start PostgreSQL; it wrote:\n${output()}`, () => /READY \d+/.test(output()), 20_000)
      const orphanPid = Number(/READY (\d+)/.exec(output())![1])
      child.kill("SIGKILL")
      assert.strictEqual(yield* exitOf(child), "SIGKILL")
      assert.isTrue(isAlive(orphanPid), "the postmaster outlives a node killed with -9")

      const startedAt = Date.now()
      yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* EmbeddedPostgres.start(dataDir)
        const elapsedMs = Date.now() - startedAt
        assert.isBelow(elapsedMs, 3_000, `restart took ${elapsedMs} ms`)
        assert.isFalse(isAlive(orphanPid), "the orphaned postmaster was stopped")
        const rows = yield* inDatabase(server.url)(
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT v FROM kept ORDER BY v`)
        )
        assert.deepStrictEqual(rows, [{ v: "written before a restart" }, { v: "written by the killed process" }])
      }))
    }))

  it.live("the service exits loudly when PostgreSQL dies under it", () =>
    Effect.gen(function*() {
      const child = runNode(`
        import { Effect, Layer } from "effect"
        import { AppConfig } from ${JSON.stringify(moduleUrl("Config.ts"))}
        import * as Database from ${JSON.stringify(moduleUrl("db/Database.ts"))}
        await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
          yield* Layer.build(Database.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir: ${
        JSON.stringify(dataDir)
      } }))))
          console.log("READY")
          yield* Effect.never
        })))`)
      children.push(child)
      const output = outputOf(child)
      yield* waitFor(`the service to start; it wrote:\n${output()}`, () => output().includes("READY"), 20_000)
      const postmasterPid = Number(readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
      process.kill(postmasterPid, "SIGKILL")
      const killedAt = Date.now()
      assert.strictEqual(yield* exitOf(child), Database.serverLostExitCode)
      assert.isBelow(Date.now() - killedAt, 3_000)
      assert.include(output(), "exited while the service was running")
    }))

  it.live("as root, a 0700 directory above DATA_DIR fails the start with the chmod that fixes it", () =>
    Effect.gen(function*() {
      const account = yield* EmbeddedPostgres.serverAccount
      if (process.getuid?.() !== 0) {
        // PostgreSQL then runs as this user, which owns what it creates: there is nothing to check.
        assert.isTrue(Option.isNone(account))
        return
      }
      assert.isTrue(Option.isSome(account))
      // One `id postgres`, parsed: the same ids as `id -u` and `id -g` (the primary group).
      const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim())
      assert.deepStrictEqual(Option.getOrThrow(account), { name: "postgres", uid: id("-u"), gid: id("-g") })
      const parent = mkdtempSync(join(tmpdir(), "coffer-private-"))
      try {
        assert.strictEqual(statSync(parent).mode & 0o777, 0o700)
        const blockedDataDir = join(parent, "data")
        const error = yield* Effect.flip(Effect.scoped(EmbeddedPostgres.start(blockedDataDir)))
        assert.include(error.message, `cannot enter ${parent} (mode 0700`)
        assert.include(error.message, `Run: chmod o+x ${parent}`)
        assert.isFalse(existsSync(join(blockedDataDir, "pg")), "nothing was initialised")
        assert.strictEqual(statSync(parent).mode & 0o777, 0o700, "nothing outside DATA_DIR was changed")
        const checked = yield* Effect.flip(EmbeddedPostgres.checkServerAccess(blockedDataDir))
        assert.strictEqual(checked.message, error.message)
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }))
})

describe("Database.layerEmbedded", () => {
  it.live("a new data directory's migrations are followed by a checkpoint: a crash right after replays next to nothing", () =>
    Effect.gen(function*() {
      const parent = mkdtempSync(join(tmpdir(), "coffer-checkpoint-"))
      chmodSync(parent, 0o755)
      try {
        const behind = yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const [row] = yield* sql<{ behind: string; migrated: number }>`
            SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::bigint::text AS behind,
              (SELECT count(*)::int FROM schema_migrations) AS migrated
            FROM pg_control_checkpoint()`
          assert.isAbove(row!.migrated, 20)
          return Number(row!.behind)
        }).pipe(Effect.provide(Database.layerEmbedded(join(parent, "data"))), Effect.scoped)
        // The migrations alone write several MB of WAL; what follows the checkpoint is the pool's sessions.
        assert.isBelow(behind, 256 * 1024)
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }), 60_000)

  it.live("fails with the EmbeddedPostgres message when the start fails", () =>
    Effect.gen(function*() {
      const parent = mkdtempSync(join(tmpdir(), "coffer-not-a-directory-"))
      const file = join(parent, "file")
      writeFileSync(file, "")
      try {
        const error = yield* Effect.flip(Layer.build(Database.layerEmbedded(join(file, "data"))).pipe(Effect.scoped))
        assert.strictEqual(error._tag, "DatabaseStartupError")
        assert.include(error.message, `cannot prepare the data directory ${join(file, "data")}: ENOTDIR`)
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }))
})
