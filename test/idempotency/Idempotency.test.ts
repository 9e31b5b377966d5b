import { assert, describe, it, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Database from "../../src/db/Database.ts"
import { BadRequest, Forbidden, SignerUnavailable } from "../../src/domain/ApiError.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import {
  checkIdempotencyKey,
  Idempotency,
  inProgressMessage,
  retryableHoldSeconds,
  reusedMessage,
  usedByAnotherKeyMessage
} from "../../src/idempotency/Idempotency.ts"

const TestLayer = Idempotency.layer.pipe(
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

layer(TestLayer)("idempotency engine", (it) => {
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
    }))

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
})
