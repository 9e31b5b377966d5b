/**
 * Every process records its broadcast claim grace beside its liveness, and a process that finds a live one with another
 * grace logs an error naming both (src/sending/ClaimGraceAgreement.ts, docs/operations.md "Broadcast claims"). Each
 * "process" here is its own ServiceInstance (registration, advisory lock, heartbeat) with its own configuration, on
 * the test's database.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Redacted } from "effect"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids } from "../../src/domain/Ids.ts"
import { ServiceInstance } from "../../src/idempotency/ServiceInstance.ts"
import { ClaimGraceAgreement, graceDiffersMessage } from "../../src/sending/ClaimGraceAgreement.ts"

/** A process with `grace` as BROADCAST_CLAIM_GRACE_MS, up for as long as the scope that builds it. */
const processWith = (grace: number) =>
  ClaimGraceAgreement.pipe(
    Layer.provideMerge(ServiceInstance.layer),
    Layer.provide(AppConfig.layerTest({ broadcastClaimGraceMillis: grace }))
  )

describe("the broadcast claim grace, alike in every process", () => {
  it.live("the same grace: nothing logged; another: an error in the process that sees it, naming both; a stopped process does not count", () => {
    const errors: Array<string> = []
    return Effect.gen(function*() {
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(processWith(20_000))
        yield* Effect.scoped(Layer.build(processWith(20_000)))
        assert.deepStrictEqual(errors, [], "two processes with one grace")
        yield* Effect.scoped(Layer.build(processWith(5_000)))
        assert.deepStrictEqual(errors, [graceDiffersMessage(5_000, [20_000])])
        assert.strictEqual(
          errors[0],
          "BROADCAST_CLAIM_GRACE_MS is 5000 here, 20000 in 1 other running process: every process of the cluster " +
            "should use the same grace (docs/operations.md, \"Broadcast claims\")"
        )
      }))
      // Every process above has stopped (its lock released): a new one with yet another grace finds no one to differ from.
      yield* Effect.scoped(Layer.build(processWith(30_000)))
      assert.strictEqual(errors.length, 1)
    }).pipe(
      Effect.provide(Logger.layer([Logger.make((options) => {
        if (options.logLevel === "Error") errors.push(String(Array.isArray(options.message) ? options.message[0] : options.message))
      })])),
      Effect.provide(Layer.mergeAll(Ids.layer.pipe(Layer.provideMerge(Entropy.layer)), Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))))
    )
  }, 60_000)

  it("the message counts the processes of each other grace", () => {
    assert.strictEqual(
      graceDiffersMessage(20_000, [5_000, 30_000, 5_000]),
      "BROADCAST_CLAIM_GRACE_MS is 20000 here, 5000 in 2 other running processes, 30000 in 1 other running process: " +
        "every process of the cluster should use the same grace (docs/operations.md, \"Broadcast claims\")"
    )
  })
})
