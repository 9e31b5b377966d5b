/**
 * GroupCommit.ts: items queued while a write runs go into the next write, every caller gets its own result in
 * order, and a write that dies fails only its own batch's callers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { makeGroupCommit } from "../../src/db/GroupCommit.ts"

describe("group commit", () => {
  it.effect("concurrent callers share writes, each gets its own result; a batch is at most batchMax", () =>
    Effect.gen(function*() {
      const batches: Array<ReadonlyArray<number>> = []
      const gate = yield* Deferred.make<void>()
      const submit = yield* makeGroupCommit<number, number>({
        batchMax: 3,
        write: (batch) =>
          Effect.gen(function*() {
            batches.push(batch)
            // The first write is held open: whatever queues meanwhile waits for the next one.
            if (batches.length === 1) yield* Deferred.await(gate)
            return batch.map((item) => item * 10)
          })
      })
      const callers = yield* Effect.forEach([1, 2, 3, 4, 5, 6, 7], (item) => Effect.forkChild(submit(item)))
      yield* Effect.yieldNow
      yield* Deferred.succeed(gate, undefined)
      const results = yield* Effect.forEach(callers, Fiber.join)
      assert.deepStrictEqual(results, [10, 20, 30, 40, 50, 60, 70])
      // All seven queued before the flusher first ran: three writes for seven callers, none above batchMax.
      assert.deepStrictEqual(batches, [[1, 2, 3], [4, 5, 6], [7]])
    }))

  it.effect("a write that dies fails its own callers only", () =>
    Effect.gen(function*() {
      const submit = yield* makeGroupCommit<string, string>({
        batchMax: 10,
        write: (batch) => batch.includes("bad") ? Effect.die(new Error("storage down")) : Effect.succeed(batch)
      })
      const failed = yield* Effect.exit(submit("bad"))
      assert.isTrue(Exit.hasDies(failed))
      assert.strictEqual(yield* submit("good"), "good")
    }))
})
