import { assert, describe, it, layer } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Database from "../../src/db/Database.ts"
import { BadRequest, Forbidden, SignerUnavailable } from "../../src/domain/ApiError.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids } from "../../src/domain/Ids.ts"
import {
  checkIdempotencyKey,
  type Commit,
  Idempotency,
  inProgressMessage,
  retryableHoldSeconds,
  reusedMessage,
  type StoredResponse,
  usedByAnotherKeyMessage
} from "../../src/idempotency/Idempotency.ts"
import { heartbeatStaleMillis, instanceLockClassId, ServiceInstance } from "../../src/idempotency/ServiceInstance.ts"

const TestLayer = Idempotency.layer.pipe(
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.orDie
)

const hashA = "a".repeat(64)
const hashB = "b".repeat(64)

describe("Idempotency-Key format (rule 1)", () => {
  it.effect("accepts 1-128 chars of A-Z a-z 0-9 _ - : . and rejects others with 422 BAD_REQUEST", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* checkIdempotencyKey("Ab0_-:."), "Ab0_-:.")
      assert.strictEqual(yield* checkIdempotencyKey("k".repeat(128)), "k".repeat(128))
      for (const bad of [undefined, "", "k".repeat(129), "a b", "a/b", "ключ"]) {
        const error = yield* Effect.flip(checkIdempotencyKey(bad))
        assert.instanceOf(error, BadRequest)
      }
    }))
})

// The layer on the real clock: this process's heartbeat (ServiceInstance.ts) runs in it, and must stay live while a
// test moves its own TestClock (rule 7) far ahead.
layer(TestLayer, { excludeTestServices: true })("idempotency engine", (it) => {
  const tenantId = "00000000-0000-7000-8000-000000000001"
  const seedTenant = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${tenantId}, 'idem', '{}', now())
      ON CONFLICT DO NOTHING`
  })
  const scope = (key: string, keyId = "ak_000000000000000000000001") => ({
    tenantId,
    keyId,
    endpoint: "POST /v1/wallets",
    key
  })

  it.effect("rule 3: a byte-identical replay returns the first status and body without executing", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      let executions = 0
      const execute = Effect.sync(() => ({ status: 202, body: `{"n":${++executions}}` }))
      const first = yield* idempotency.run(scope("rule3"), hashA, execute)
      const second = yield* idempotency.run(scope("rule3"), hashA, execute)
      assert.deepStrictEqual(second, first)
      assert.strictEqual(executions, 1)
    }))

  it.effect("rule 2: records are scoped by API key (another key executes on its own)", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      let executions = 0
      const execute = Effect.sync(() => ({ status: 202, body: `{"n":${++executions}}` }))
      yield* idempotency.run(scope("rule2", "ak_000000000000000000000001"), hashA, execute)
      yield* idempotency.run(scope("rule2", "ak_000000000000000000000002"), hashA, execute)
      assert.strictEqual(executions, 2)
    }))

  it.effect("rule 4: the same key with a different body is 409 IDEMPOTENCY_CONFLICT", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      yield* idempotency.run(scope("rule4"), hashA, Effect.succeed({ status: 202, body: "{}" }))
      const error = yield* Effect.flip(idempotency.run(scope("rule4"), hashB, Effect.succeed({ status: 202, body: "{}" })))
      assert.strictEqual(error._tag, "IdempotencyConflict")
      assert.strictEqual(error.message, reusedMessage)
    }))

  it.effect("rule 5: while the first request runs, a retry is 409 (request already in progress)", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const release = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(idempotency.run(
        scope("rule5"),
        hashA,
        Effect.andThen(Deferred.succeed(started, undefined), Effect.as(Deferred.await(release), { status: 202, body: "{}" }))
      ))
      yield* Deferred.await(started)
      const error = yield* Effect.flip(idempotency.run(scope("rule5"), hashA, Effect.succeed({ status: 202, body: "{}" })))
      assert.strictEqual(error._tag, "IdempotencyConflict")
      assert.strictEqual(error.message, inProgressMessage)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
    }))

  it.effect("rule 6: a non-retryable error releases the key; the body may then change", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const failed = yield* Effect.flip(
        idempotency.run(scope("rule6"), hashA, Effect.fail(new Forbidden({ message: "user is not active" })))
      )
      assert.strictEqual(failed._tag, "Forbidden")
      const ok = yield* idempotency.run(scope("rule6"), hashB, Effect.succeed({ status: 202, body: "{\"ok\":1}" }))
      assert.strictEqual(ok.body, "{\"ok\":1}")
    }))

  it.effect("rule 7: a retryable error keeps the key for 60 s, then the same request re-executes", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      yield* Effect.flip(
        idempotency.run(scope("rule7"), hashA, Effect.fail(new SignerUnavailable({ message: "signer down" })))
      )
      const early = yield* Effect.flip(idempotency.run(scope("rule7"), hashA, Effect.succeed({ status: 202, body: "{}" })))
      assert.strictEqual(early.message, inProgressMessage)
      yield* TestClock.adjust(`${retryableHoldSeconds - 1} seconds`)
      const stillEarly = yield* Effect.flip(
        idempotency.run(scope("rule7"), hashA, Effect.succeed({ status: 202, body: "{}" }))
      )
      assert.strictEqual(stillEarly._tag, "IdempotencyConflict")
      yield* TestClock.adjust("1 second")
      const retried = yield* idempotency.run(scope("rule7"), hashA, Effect.succeed({ status: 202, body: "{\"again\":1}" }))
      assert.strictEqual(retried.body, "{\"again\":1}")
    }).pipe(Effect.provide(TestClock.layer())))

  it.effect("rule 8: a tenant-wide key (externalTxId) used by another API key is 409 externalTxId already used", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const wide = (keyId: string) => ({ ...scope("ext-1", keyId), endpoint: "POST /v1/transactions", tenantWide: true })
      let executions = 0
      const execute = Effect.sync(() => ({ status: 202, body: `{"n":${++executions}}` }))
      const first = yield* idempotency.run(wide("ak_000000000000000000000001"), hashA, execute)
      const other = yield* Effect.flip(idempotency.run(wide("ak_000000000000000000000002"), hashA, execute))
      assert.strictEqual(other._tag, "IdempotencyConflict")
      assert.strictEqual(other.message, usedByAnotherKeyMessage)
      // The key that holds it still replays (rule 3), and the other key's attempt executed nothing.
      assert.deepStrictEqual(yield* idempotency.run(wide("ak_000000000000000000000001"), hashA, execute), first)
      assert.strictEqual(executions, 1)
    }))

  it.effect("rule 8 under concurrency: two API keys racing for one externalTxId execute once", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      let executions = 0
      const execute = Effect.sync(() => ++executions).pipe(
        Effect.andThen(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))),
        Effect.as({ status: 202, body: "{}" })
      )
      const results = yield* Effect.all(
        Array.from({ length: 10 }, (_, index) =>
          Effect.result(idempotency.run(
            {
              ...scope("ext-race", `ak_00000000000000000000000${index % 2}`),
              endpoint: "POST /v1/transactions",
              tenantWide: true
            },
            hashA,
            execute
          ))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(executions, 1)
      assert.isAtLeast(results.filter((result) => result._tag === "Success").length, 1)
    }))

  it.effect("a defect counts as retryable (500 INTERNAL keeps the key)", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      yield* Effect.exit(idempotency.run(scope("defect"), hashA, Effect.die(new Error("boom"))))
      const error = yield* Effect.flip(idempotency.run(scope("defect"), hashA, Effect.succeed({ status: 202, body: "{}" })))
      assert.strictEqual(error.message, inProgressMessage)
    }))

  it.effect("concurrent identical requests execute once (the primary key decides)", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      let executions = 0
      const execute = Effect.sync(() => ++executions).pipe(
        // Real time (not the TestClock): the others must arrive while the first is running.
        Effect.andThen(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))),
        Effect.as({ status: 202, body: "{}" })
      )
      const results = yield* Effect.all(
        Array.from({ length: 20 }, () => Effect.result(idempotency.run(scope("race"), hashA, execute))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(executions, 1)
      const successes = results.filter((result) => result._tag === "Success")
      assert.isAtLeast(successes.length, 1)
      for (const result of results) {
        if (result._tag === "Failure") assert.strictEqual(result.failure._tag, "IdempotencyConflict")
      }
    }))

  it.effect("first claims share one INSERT; a claim the database refuses fails its own request only", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const sql = yield* SqlClient.SqlClient
      let executions = 0
      const execute = Effect.sync(() => ++executions).pipe(Effect.as({ status: 202, body: "{}" }))
      const runId = crypto.randomUUID().slice(0, 8)
      // Started together, so they queue behind one flush: the one of a tenant that does not exist (its foreign key
      // fails the shared INSERT) sits among the others.
      const exits = yield* Effect.all(
        Array.from({ length: 10 }, (_, index) =>
          Effect.exit(idempotency.run(
            index === 4
              ? { ...scope(`batch-${runId}-${index}`), tenantId: "00000000-0000-7000-8000-0000000000ff" }
              : scope(`batch-${runId}-${index}`),
            hashA,
            execute
          ))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(executions, 9)
      exits.forEach((exit, index) => {
        if (index === 4) assert.isTrue(Exit.hasDies(exit))
        else assert.deepStrictEqual(exit, Exit.succeed({ status: 202, body: "{}" }))
      })
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_records
        WHERE idempotency_key LIKE ${`batch-${runId}-%`} AND state = 'COMPLETED'`
      assert.strictEqual(row!.n, 9)
    }).pipe(Effect.catchTag("SqlError", Effect.die)))

  /** A table standing for a business effect, written in the same transaction as the response. */
  const effects = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS idempotency_test_effects (key text PRIMARY KEY)`
    return {
      apply: (key: string) => sql`INSERT INTO idempotency_test_effects (key) VALUES (${key})`,
      count: (key: string) =>
        Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_test_effects WHERE key = ${key}`,
          ([row]) => row!.n)
    }
  })
  const record = (key: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<
        { state: string; response_body: string | null; owner_instance: string | null; claim_id: string | null }
      >`SELECT state, response_body, owner_instance, claim_id FROM idempotency_records
        WHERE tenant_id = ${tenantId} AND idempotency_key = ${key}`
      return row
    }).pipe(Effect.orDie)
  /** Another service process, as its row: `lockKey` to hold its lock from the test, `heartbeatAt` its last sign. */
  const otherInstance = (heartbeatAt: Date) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const id = crypto.randomUUID()
      const [row] = yield* sql<{ lock_key: number }>`INSERT INTO service_instances (id, started_at, heartbeat_at)
        VALUES (${id}, ${heartbeatAt}, ${heartbeatAt}) RETURNING lock_key`
      return { id, lockKey: row!.lock_key }
    })
  /** A request that `owner` claimed and was executing (rule 5's situation), with a lease far from over. */
  const inProgressOf = (key: string, owner: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO idempotency_records (tenant_id, key_id, endpoint, idempotency_key, request_sha256, state,
          locked_until, created_at, updated_at, owner_instance, claim_id)
        VALUES (${tenantId}, ${scope(key).keyId}, ${scope(key).endpoint}, ${key}, ${hashA}, 'IN_PROGRESS',
          ${new Date(Date.UTC(2100, 0, 1))}, now(), now(), ${owner}, ${crypto.randomUUID()})`
    })

  it.effect("rule 3 across a crash: the response committed in the effect's transaction is the answer even when the request fails after the commit", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const sql = yield* SqlClient.SqlClient
      const idempotency = yield* Idempotency
      const effect = yield* effects
      const exit = yield* Effect.exit(idempotency.run(scope("committed"), hashA, (commit) =>
        Effect.gen(function*() {
          yield* sql.withTransaction(Effect.andThen(effect.apply("committed"), commit({ status: 202, body: "{\"a\":1}" })))
          // What follows the commit (an entity message) fails: the effect and its receipt stand.
          return yield* Effect.die(new Error("after the commit"))
        })))
      assert.deepStrictEqual(exit, Exit.succeed({ status: 202, body: "{\"a\":1}" }))
      assert.strictEqual((yield* record("committed"))?.state, "COMPLETED")
      const replay = yield* idempotency.run(scope("committed"), hashA, Effect.die(new Error("must not run again")))
      assert.strictEqual(replay.body, "{\"a\":1}")
      assert.strictEqual(yield* effect.count("committed"), 1)
    }).pipe(Effect.catchTag("SqlError", Effect.die)))

  it.effect("rule 7 across a crash: a transaction that rolls back takes the stored response with it; the key is a retryable failure", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const sql = yield* SqlClient.SqlClient
      const idempotency = yield* Idempotency
      const effect = yield* effects
      yield* Effect.exit(idempotency.run(scope("rolled-back"), hashA, (commit) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* effect.apply("rolled-back")
          yield* commit({ status: 202, body: "{}" })
          return yield* Effect.die(new Error("before COMMIT"))
        }))))
      assert.strictEqual(yield* effect.count("rolled-back"), 0)
      const row = yield* record("rolled-back")
      assert.strictEqual(row?.state, "RETRYABLE_FAILURE")
      assert.isNull(row?.response_body ?? null)
    }).pipe(Effect.catchTag("SqlError", Effect.die)))

  it.effect("a response can be committed only inside a database transaction", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const exit = yield* Effect.exit(idempotency.run(scope("outside"), hashA, (commit) =>
        Effect.as(commit({ status: 202, body: "{}" }), { status: 202, body: "{}" })))
      assert.isTrue(Exit.hasDies(exit))
      assert.strictEqual((yield* record("outside"))?.state, "RETRYABLE_FAILURE")
    }))

  it.effect("rule 5 after a crash: a request whose process is gone (its lock released) holds nothing: the retry executes at once", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      // Its heartbeat is fresh, but no session holds its lock: the process was killed a moment ago.
      const gone = yield* otherInstance(new Date(Date.UTC(2100, 0, 1)))
      yield* inProgressOf("orphan", gone.id)
      const response = yield* idempotency.run(scope("orphan"), hashA, Effect.succeed({ status: 202, body: "{\"re\":1}" }))
      assert.strictEqual(response.body, "{\"re\":1}")
      assert.strictEqual((yield* record("orphan"))?.state, "COMPLETED")
    }))

  it.effect("rule 5 across processes: a live owner keeps its key; once its heartbeat is 20 s stale (host gone) a retry executes", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const sql = yield* SqlClient.SqlClient
      const idempotency = yield* Idempotency
      const live = yield* otherInstance(new Date(yield* Clock.currentTimeMillis))
      // The other process's lock, held the way it holds it: on a session of its own.
      const connection = yield* sql.reserve
      yield* connection.execute("SELECT pg_advisory_lock($1, $2)", [instanceLockClassId, live.lockKey], undefined)
      yield* inProgressOf("live-owner", live.id)
      const busy = yield* Effect.flip(idempotency.run(scope("live-owner"), hashA, Effect.succeed({ status: 202, body: "{}" })))
      assert.strictEqual(busy.message, inProgressMessage)
      yield* TestClock.adjust(heartbeatStaleMillis - 1_000)
      const stillBusy = yield* Effect.flip(
        idempotency.run(scope("live-owner"), hashA, Effect.succeed({ status: 202, body: "{}" }))
      )
      assert.strictEqual(stillBusy.message, inProgressMessage)
      yield* TestClock.adjust(1_001)
      const taken = yield* idempotency.run(scope("live-owner"), hashA, Effect.succeed({ status: 202, body: "{\"b\":2}" }))
      assert.strictEqual(taken.body, "{\"b\":2}")
    }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.provide(TestClock.layer())))

  /**
   * An execution of `key` that another process takes over (this one looked gone: its claim is replaced) after it
   * claimed and before it commits with `commit`: it must die, leave no effect, and leave the new claim alone.
   */
  const takenOverMidway = (
    key: string,
    execute: (commit: Commit) => Effect.Effect<StoredResponse, never, SqlClient.SqlClient>
  ) =>
    Effect.gen(function*() {
      yield* seedTenant
      const sql = yield* SqlClient.SqlClient
      const idempotency = yield* Idempotency
      const effect = yield* effects
      const started = yield* Deferred.make<void>()
      const proceed = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(Effect.exit(idempotency.run(scope(key), hashA, (commit) =>
        Effect.gen(function*() {
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(proceed)
          return yield* execute(commit)
        }))))
      yield* Deferred.await(started)
      const takeover = crypto.randomUUID()
      yield* sql`UPDATE idempotency_records SET claim_id = ${takeover} WHERE tenant_id = ${tenantId}
        AND idempotency_key = ${key}`
      yield* Deferred.succeed(proceed, undefined)
      const exit = yield* Fiber.join(first)
      assert.isTrue(Exit.hasDies(exit))
      assert.strictEqual(yield* effect.count(key), 0)
      const row = yield* record(key)
      assert.strictEqual(row?.state, "IN_PROGRESS")
      assert.strictEqual(row?.claim_id, takeover)
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  it.effect("a taken-over execution is fenced: its commit dies, its effect rolls back, and it leaves the new claim alone", () =>
    takenOverMidway("fenced", (commit) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const effect = yield* effects
        yield* sql.withTransaction(Effect.andThen(effect.apply("fenced"), commit({ status: 202, body: "{\"old\":1}" })))
        return { status: 202, body: "{\"old\":1}" }
      }).pipe(Effect.orDie)))

  /**
   * An effect written as one statement with its response (`commit.inStatement`), as transfers/Movements.ts writes
   * a movement: here the effect's row, and a division that fails the statement when `store` wrote nothing.
   */
  const inOneStatement = (key: string, store: Statement.Fragment) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`WITH stored AS (${store}), applied AS (
          INSERT INTO idempotency_test_effects (key) VALUES (${key}) RETURNING 1)
        SELECT 1 / (SELECT count(*)::int FROM stored) AS written, (SELECT count(*) FROM applied) AS applied`
    }).pipe(Effect.orDie)

  it.effect("an effect written as one statement commits with its response (rule 3), and a replay does not run it again", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const idempotency = yield* Idempotency
      const effect = yield* effects
      const response = { status: 202, body: "{\"one\":1}" }
      const answer = yield* idempotency.run(scope("one-statement"), hashA, (commit) =>
        commit.inStatement(response, (store) => Effect.as(inOneStatement("one-statement", store), response)))
      assert.deepStrictEqual(answer, response)
      const row = yield* record("one-statement")
      assert.strictEqual(row?.state, "COMPLETED")
      assert.strictEqual(row?.response_body, response.body)
      const replay = yield* idempotency.run(scope("one-statement"), hashA, Effect.die(new Error("must not run again")))
      assert.deepStrictEqual(replay, response)
      assert.strictEqual(yield* effect.count("one-statement"), 1)
    }))

  it.effect("a taken-over execution written as one statement is fenced: the statement fails whole and the new claim stays", () =>
    takenOverMidway("fenced-statement", (commit) => {
      const response = { status: 202, body: "{\"old\":1}" }
      return commit.inStatement(response, (store) => Effect.as(inOneStatement("fenced-statement", store), response))
    }))

  it.effect("a starting process releases the IN_PROGRESS keys of processes that are gone, not those of live ones", () =>
    Effect.gen(function*() {
      yield* seedTenant
      const sql = yield* SqlClient.SqlClient
      const gone = yield* otherInstance(new Date(Date.UTC(2100, 0, 1)))
      yield* inProgressOf("released-at-start", gone.id)
      const self = yield* ServiceInstance
      yield* inProgressOf("kept-at-start", self.id)
      // A second process starts on the same database.
      const started = yield* Layer.build(Layer.fresh(ServiceInstance.layer))
      const second = started.mapUnsafe.get(ServiceInstance.key) as ServiceInstance["Service"]
      assert.notStrictEqual(second.id, self.id)
      const released = yield* record("released-at-start")
      assert.strictEqual(released?.state, "RETRYABLE_FAILURE")
      assert.isNull(released?.owner_instance ?? null)
      assert.strictEqual((yield* record("kept-at-start"))?.state, "IN_PROGRESS")
      // Released means free: the same request re-executes now, without waiting for rule 7's 60 s.
      const idempotency = yield* Idempotency
      const again = yield* idempotency.run(scope("released-at-start"), hashA, Effect.succeed({ status: 202, body: "{}" }))
      assert.strictEqual(again.status, 202)
      yield* sql`DELETE FROM idempotency_records WHERE idempotency_key = 'kept-at-start'`
    }).pipe(Effect.catchTag("SqlError", Effect.die)))
})
