/**
 * The service's PostgreSQL client with its pool's use counted (src/db/MeteredPgClient.ts; `GET /metrics`'s
 * `coffer_db_pool_connections_in_use` and `coffer_db_pool_checkouts_waiting`): a session is in use while a statement,
 * a transaction or a listener holds it, a checkout waits while every session is lent, and both fall back to 0 when
 * they end, however they end. It is otherwise PgClient's client: statements, transactions (a failed one rolled back),
 * LISTEN/NOTIFY.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Redacted, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import * as MeteredPgClient from "../../src/db/MeteredPgClient.ts"

/** A client on this file's database with a pool of `maxConnections`. */
const client = (maxConnections: number) =>
  MeteredPgClient.make({ url: Redacted.make(process.env.DATABASE_URL!), maxConnections }).pipe(
    Effect.provide(Reactivity.layer)
  )

/** Until `read` holds, polled (a fiber's checkout is asynchronous). */
const eventually = (what: string, read: () => boolean) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 200; attempt++) {
      if (read()) return
      yield* Effect.sleep("25 millis")
    }
    assert.fail(`not within 5 s: ${what}`)
  })

describe("MeteredPgClient", () => {
  it.live("counts a transaction's session in use, a checkout beyond the pool waiting, and both back to 0", () =>
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* client(1)
      const use = MeteredPgClient.poolUseOf(sql)!
      assert.deepStrictEqual({ ...use }, { inUse: 0, waiting: 0, max: 1, statements: 0, transactions: 0 })

      const inTransaction = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT 1`
        yield* Deferred.succeed(inTransaction, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.forkChild)
      yield* Deferred.await(inTransaction)
      assert.strictEqual(use.inUse, 1)
      assert.strictEqual(use.waiting, 0)
      // Between two statements of a transaction: the transaction is open, no statement is.
      assert.strictEqual(use.transactions, 1)
      assert.strictEqual(use.statements, 0)

      // The only session is in the transaction: a statement waits for it.
      const waiter = yield* sql<{ n: number }>`SELECT 2 AS n`.pipe(Effect.forkChild)
      yield* eventually("one checkout waiting", () => use.waiting === 1)
      assert.strictEqual(use.inUse, 1)

      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      const rows = yield* Fiber.join(waiter)
      assert.strictEqual(rows[0]!.n, 2)
      yield* eventually("nothing in use or waiting", () => use.inUse === 0 && use.waiting === 0)
      assert.strictEqual(use.transactions, 0)
      assert.strictEqual(use.statements, 0)
    })))

  it.live("counts a statement from the moment it is run until it is answered (what the testers' kit waits for)", () =>
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* client(2)
      const use = MeteredPgClient.poolUseOf(sql)!
      const slow = yield* sql`SELECT pg_sleep(0.5)`.pipe(Effect.forkChild)
      yield* eventually("the statement counted", () => use.statements === 1)
      assert.strictEqual(use.transactions, 0)
      yield* Fiber.join(slow)
      assert.strictEqual(use.statements, 0)
      // Interrupted while running: no longer counted.
      const interrupted = yield* sql`SELECT pg_sleep(5)`.pipe(Effect.forkChild)
      yield* eventually("the second statement counted", () => use.statements === 1)
      yield* Fiber.interrupt(interrupted)
      assert.strictEqual(use.statements, 0)
    })))

  it.live("a waiting checkout that is interrupted and a failed transaction leave nothing counted", () =>
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* client(1)
      const use = MeteredPgClient.poolUseOf(sql)!
      yield* sql`CREATE TEMPORARY TABLE IF NOT EXISTS metered_probe (n int)`.pipe(Effect.asVoid)

      const release = yield* Deferred.make<void>()
      const inTransaction = yield* Deferred.make<void>()
      const holder = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT 1`
        yield* Deferred.succeed(inTransaction, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.forkChild)
      yield* Deferred.await(inTransaction)
      const waiter = yield* sql`SELECT 2`.pipe(Effect.forkChild)
      yield* eventually("one checkout waiting", () => use.waiting === 1)
      yield* Fiber.interrupt(waiter)
      assert.strictEqual(use.waiting, 0)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)

      // A transaction that fails after a write: rolled back, its session given back.
      const failed = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO metered_probe (n) VALUES (1)`
        return yield* Effect.fail("abandoned" as const)
      })).pipe(Effect.flip)
      assert.strictEqual(failed, "abandoned")
      const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM metered_probe`
      assert.strictEqual(count!.n, 0)
      yield* eventually("nothing in use or waiting", () => use.inUse === 0 && use.waiting === 0)
    })))

  it.live("LISTEN holds a session while it listens; NOTIFY reaches it", () =>
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* client(2)
      const use = MeteredPgClient.poolUseOf(sql)!
      const received = yield* Deferred.make<string>()
      const listening = yield* Effect.gen(function*() {
        const notifications = yield* sql.listen("metered_probe")
        const first = yield* Stream.runHead(Stream.fromQueue(notifications))
        yield* Deferred.succeed(received, first._tag === "Some" ? first.value.payload : "")
      }).pipe(Effect.scoped, Effect.forkChild)
      yield* eventually("the listener's session in use", () => use.inUse === 1)
      // Until the listener is registered on the server, a NOTIFY is lost: sent until one arrives.
      for (let attempt = 0; attempt < 100 && !(yield* Deferred.isDone(received)); attempt++) {
        yield* sql.notify("metered_probe", "hello")
        yield* Effect.sleep("50 millis")
      }
      assert.strictEqual(yield* Deferred.await(received), "hello")
      yield* Fiber.join(listening)
      yield* eventually("the listener's session given back", () => use.inUse === 0)
      // The same client through its SqlClient face.
      const plain: SqlClient.SqlClient = sql
      assert.strictEqual((yield* plain<{ one: number }>`SELECT 1 AS one`)[0]!.one, 1)
    })))
})
