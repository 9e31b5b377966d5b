/**
 * One owner per DATA_DIR (src/db/postgres/OwnerLock.ts; README, the files under DATA_DIR): a second start on a directory
 * in use fails, naming it and the owner's pid, and leaves the owner's PostgreSQL serving; a directory whose owner was
 * killed is taken over whatever `owner.pid` says; of two starts at the same instant exactly one wins.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import type { ChildProcess } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import * as Database from "../../src/db/Database.ts"
import * as EmbeddedPostgres from "../../src/db/postgres/EmbeddedPostgres.ts"
import * as OwnerLock from "../../src/db/postgres/OwnerLock.ts"
import { awaitGo, exitOf, go, isAlive, moduleUrl, outputOf, runNode, waitFor } from "../support/NodeProcess.ts"

/** The first start runs initdb, on a busy 2-core machine. */
const startTimeoutMs = 30_000
/** Concurrent starts per round; rounds, since one race proves little. */
const racersPerRound = 2
const raceRounds = 3
const lockRacersPerRound = 4
const lockRaceRounds = 3

const parent = mkdtempSync(join(tmpdir(), "coffer-owner-"))
// mkdtemp makes it 0700; as root PostgreSQL runs as `postgres` and must pass through it.
chmodSync(parent, 0o755)
const dataDir = join(parent, "data")
const pidFile = join(dataDir, OwnerLock.pidFileName)
const children: Array<ChildProcess> = []

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  // Until a child has exited it still owns the directory, and stopLeftover leaves an owner's server alone.
  await Effect.runPromise(Effect.forEach(children, exitOf, { discard: true }))
  await Effect.runPromise(Effect.ignore(EmbeddedPostgres.stopLeftover(dataDir)))
  rmSync(parent, { recursive: true, force: true })
})

interface Starter {
  readonly child: ChildProcess
  readonly output: () => string
}

/**
 * `EmbeddedPostgres.start` in a child process: prints `LOADED` once its modules are loaded, starts when `go` is
 * written to it, then prints `READY <postmaster pid>` and keeps the server until killed, or prints
 * `FAILED <message>` and exits with 2.
 */
const spawnStarter = (): Starter => {
  const child = runNode(`
    import { Effect } from "effect"
    import * as EmbeddedPostgres from ${JSON.stringify(moduleUrl("db/postgres/EmbeddedPostgres.ts"))}
    console.log("LOADED")
    ${awaitGo}
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const server = yield* EmbeddedPostgres.start(${JSON.stringify(dataDir)})
      console.log("READY " + server.pid)
      yield* Effect.never
    })).pipe(Effect.catchTag("EmbeddedPostgresError", (error) => Effect.sync(() => {
      console.log("FAILED " + error.message)
      process.exit(2)
    }))))`)
  children.push(child)
  return { child, output: outputOf(child) }
}

const readyPid = (starter: Starter): number | undefined => {
  const match = /READY (\d+)/.exec(starter.output())
  return match === null ? undefined : Number(match[1])
}

/** Until the starter is ready or has exited; a start that should fail must not be awaited only by its exit. */
const settled = (starters: ReadonlyArray<Starter>) =>
  waitFor(
    "every start to be ready or to have failed",
    () => starters.every((starter) => readyPid(starter) !== undefined || starter.child.exitCode !== null),
    startTimeoutMs
  )

/** Starts one owner in a child and waits until its server is ready; returns it with its postmaster's pid. */
const startOwner = Effect.gen(function*() {
  const owner = spawnStarter()
  go(owner.child)
  yield* settled([owner])
  const postmasterPid = readyPid(owner)
  assert.isDefined(postmasterPid, `the owner did not start; it wrote:\n${owner.output()}`)
  return { owner, postmasterPid: postmasterPid! }
})

/** A node killed with -9: its postmaster survives it, orphaned, and `owner.pid` still names it. */
const killHard = (starter: Starter) =>
  Effect.gen(function*() {
    starter.child.kill("SIGKILL")
    assert.strictEqual(yield* exitOf(starter.child), "SIGKILL")
  })

const inUseMessage = (ownerPid: number) => `DATA_DIR ${dataDir} is in use by another process, pid ${ownerPid}`

/** Answers 1 from the server `pg-conn.json` points at: the one a tool (or the owner) would reach. */
const queryServer = Effect.gen(function*() {
  const url = Redacted.make<string>(JSON.parse(readFileSync(join(dataDir, "pg-conn.json"), "utf8")).url)
  const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ one: number }>`SELECT 1 AS one`)
    .pipe(Effect.provide(PgClient.layer({ url, maxConnections: 1 })))
  return rows[0]?.one
})

describe("one owner per DATA_DIR", () => {
  let current: { owner: Starter; postmasterPid: number } | undefined

  it.live(
    "a second start on a DATA_DIR whose owner runs fails naming the directory and the owner's pid; the owner's PostgreSQL keeps serving",
    () =>
      Effect.gen(function*() {
        current = yield* startOwner
        const { owner, postmasterPid } = current
        assert.strictEqual(readFileSync(pidFile, "utf8"), `${owner.child.pid}\n`, "owner.pid names the owner")
        const postmasterFile = readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8")
        const connectionFile = readFileSync(join(dataDir, "pg-conn.json"), "utf8")

        // Another process, as a second `npm start` would be.
        const second = spawnStarter()
        go(second.child)
        yield* settled([second])
        assert.isUndefined(readyPid(second), "the second start did not start a server")
        assert.strictEqual(yield* exitOf(second.child), 2, second.output())
        assert.include(second.output(), `FAILED ${inUseMessage(owner.child.pid!)}`)

        // This process too, through the storage layer the service builds.
        const direct = yield* Effect.flip(Effect.scoped(EmbeddedPostgres.start(dataDir)))
        assert.include(direct.message, inUseMessage(owner.child.pid!))
        const layered = yield* Effect.flip(Effect.scoped(Layer.build(Database.layerEmbedded(dataDir))))
        assert.strictEqual(layered._tag, "DatabaseStartupError")
        assert.include(layered.message, inUseMessage(owner.child.pid!))
        const cleanup = yield* Effect.flip(EmbeddedPostgres.stopLeftover(dataDir))
        assert.include(cleanup.message, inUseMessage(owner.child.pid!))

        assert.isTrue(isAlive(postmasterPid), "the owner's postmaster was left alone")
        assert.isNull(owner.child.exitCode, "the owner is still running")
        assert.strictEqual(readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8"), postmasterFile)
        assert.strictEqual(readFileSync(join(dataDir, "pg-conn.json"), "utf8"), connectionFile, "port file untouched")
        assert.strictEqual(readFileSync(pidFile, "utf8"), `${owner.child.pid}\n`, "owner.pid untouched")
        assert.strictEqual(yield* queryServer, 1, "the owner's server answers queries")
      }),
    60_000
  )

  it.live("the directory of an owner killed with -9 is taken over: its orphaned server is stopped, the new one serves", () =>
    Effect.gen(function*() {
      const killed = current!
      yield* killHard(killed.owner)
      assert.isTrue(isAlive(killed.postmasterPid), "the postmaster outlives a node killed with -9")
      assert.strictEqual(readFileSync(pidFile, "utf8"), `${killed.owner.child.pid}\n`, "a kill -9 leaves owner.pid")

      current = yield* startOwner
      assert.isFalse(isAlive(killed.postmasterPid), "the orphaned postmaster was stopped")
      assert.strictEqual(readFileSync(pidFile, "utf8"), `${current.owner.child.pid}\n`)
      assert.strictEqual(yield* queryServer, 1)
    }), 60_000)

  it.live("owner.pid naming a live but unrelated process (pid 1, this test runner) does not block a start", () =>
    Effect.gen(function*() {
      for (const unrelated of [1, process.pid]) {
        const killed = current!
        yield* killHard(killed.owner)
        writeFileSync(pidFile, `${unrelated}\n`)
        assert.isTrue(isAlive(unrelated))

        current = yield* startOwner
        assert.isFalse(isAlive(killed.postmasterPid), "the orphaned postmaster was stopped")
        assert.strictEqual(readFileSync(pidFile, "utf8"), `${current.owner.child.pid}\n`)
      }
    }), 60_000)

  it.live("two starts at the same instant on a directory whose owner was killed: exactly one wins, the other names it", () =>
    Effect.gen(function*() {
      for (let round = 1; round <= raceRounds; round++) {
        const killed = current!
        yield* killHard(killed.owner)

        const racers = Array.from({ length: racersPerRound }, spawnStarter)
        // Module loading takes each child a different time: all are let go together once all have loaded.
        yield* waitFor("every racer to load", () => racers.every((racer) => racer.output().includes("LOADED")), 20_000)
        for (const racer of racers) go(racer.child)
        yield* settled(racers)
        const winners = racers.filter((racer) => readyPid(racer) !== undefined)
        const outputs = racers.map((racer) => racer.output()).join("\n---\n")
        assert.strictEqual(winners.length, 1, `round ${round}: one winner; they wrote:\n${outputs}`)
        const winner = winners[0]!
        for (const loser of racers.filter((racer) => racer !== winner)) {
          assert.strictEqual(yield* exitOf(loser.child), 2, loser.output())
          assert.include(loser.output(), `FAILED ${inUseMessage(winner.child.pid!)}`)
        }
        current = { owner: winner, postmasterPid: readyPid(winner)! }
        assert.isFalse(isAlive(killed.postmasterPid), "the orphaned postmaster was stopped")
        assert.isTrue(isAlive(current.postmasterPid))
        assert.strictEqual(readFileSync(pidFile, "utf8"), `${winner.child.pid}\n`)
        assert.strictEqual(yield* queryServer, 1)
      }
    }), 90_000)

  it.live("a graceful stop gives the directory back: owner.pid goes, owner.lock stays, the next start succeeds", () =>
    Effect.gen(function*() {
      yield* killHard(current!.owner)
      const postmasterPid = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* EmbeddedPostgres.start(dataDir)
        assert.strictEqual(readFileSync(pidFile, "utf8"), `${process.pid}\n`)
        return server.pid
      }))
      assert.isFalse(isAlive(postmasterPid), "the server stopped with the scope")
      assert.isFalse(existsSync(pidFile), "owner.pid is removed on a graceful stop")
      assert.isTrue(existsSync(join(dataDir, OwnerLock.lockFileName)), "owner.lock is never removed")
      current = yield* startOwner
    }), 60_000)
})

describe("OwnerLock", () => {
  const lockDirectory = mkdtempSync(join(tmpdir(), "coffer-lock-"))
  afterAll(() => rmSync(lockDirectory, { recursive: true, force: true }))

  it.live("one process: a second attempt finds it taken, naming this process; after release it can be taken", () =>
    Effect.promise(async () => {
      const first = await OwnerLock.tryAcquire(lockDirectory)
      assert.strictEqual(first._tag, "Held")
      const second = await OwnerLock.tryAcquire(lockDirectory)
      assert.deepStrictEqual(second, { _tag: "Taken", ownerPid: process.pid })
      // The failed attempt closed a descriptor of owner.lock; POSIX would drop this process's lock with it, had SQLite
      // not kept that descriptor open. Another process must still find the lock taken.
      const child = runNode(`
        import * as OwnerLock from ${JSON.stringify(moduleUrl("db/postgres/OwnerLock.ts"))}
        const attempt = await OwnerLock.tryAcquire(${JSON.stringify(lockDirectory)})
        console.log(attempt._tag === "Held" ? "HELD" : "TAKEN " + attempt.ownerPid)
        process.exit(0)`)
      const output = outputOf(child)
      await new Promise((resolve) => child.once("exit", resolve))
      assert.strictEqual(output().trim(), `TAKEN ${process.pid}`)
      if (first._tag === "Held") first.release()
      const third = await OwnerLock.tryAcquire(lockDirectory)
      assert.strictEqual(third._tag, "Held")
      if (third._tag === "Held") third.release()
    }))

  it.live("processes asking at the same instant: the kernel grants it to exactly one, the others name it", () =>
    Effect.gen(function*() {
      for (let round = 1; round <= lockRaceRounds; round++) {
        const racers = Array.from({ length: lockRacersPerRound }, () => {
          const child = runNode(`
            import * as OwnerLock from ${JSON.stringify(moduleUrl("db/postgres/OwnerLock.ts"))}
            console.log("LOADED")
            ${awaitGo}
            const attempt = await OwnerLock.tryAcquire(${JSON.stringify(lockDirectory)})
            console.log(attempt._tag === "Held" ? "HELD" : "TAKEN " + attempt.ownerPid)
            if (attempt._tag === "Taken") process.exit(0)
            setInterval(() => {}, 1_000)`)
          children.push(child)
          return { child, output: outputOf(child) }
        })
        yield* waitFor("every racer to load", () => racers.every((racer) => racer.output().includes("LOADED")), 20_000)
        for (const racer of racers) go(racer.child)
        yield* waitFor(
          "every racer to answer",
          () => racers.every((racer) => /HELD|TAKEN/.test(racer.output())),
          20_000
        )
        const holders = racers.filter((racer) => racer.output().includes("HELD"))
        assert.strictEqual(holders.length, 1, racers.map((racer) => racer.output()).join("\n---\n"))
        const holder = holders[0]!
        for (const other of racers.filter((racer) => racer !== holder)) {
          assert.include(other.output(), `TAKEN ${holder.child.pid}`)
        }
        // Killed, it gives the lock back at once: no stale lock to detect.
        holder.child.kill("SIGKILL")
        yield* exitOf(holder.child)
        const after = yield* Effect.promise(() => OwnerLock.tryAcquire(lockDirectory))
        assert.strictEqual(after._tag, "Held")
        if (after._tag === "Held") after.release()
      }
    }), 60_000)
})
