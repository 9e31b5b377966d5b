/**
 * The durable nonce store behind spec section 5, check 10, on this file's database: once per key, across keys
 * independent, and no request left waiting by the group commit.
 */
import { assert, it, layer } from "@effect/vitest"
import { Deferred, Effect, Layer, Option, Redacted, Scheduler } from "effect"
import { TestClock } from "effect/testing"
import { NoncePurge, type NonceRecord, NonceStore, noncePurgeIntervalMillis } from "../../src/auth/NonceStore.ts"
import * as Database from "../../src/db/Database.ts"

const TestLayer = NonceStore.layer.pipe(
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.orDie
)

/** 2100-01-01: far enough ahead that the purge never removes these rows during the test. */
const expiresAtSeconds = 4_102_444_800

// Real time: the lost-wakeup test needs a timeout that really elapses.
layer(TestLayer, { excludeTestServices: true })("NonceStore", (it) => {
  it.effect("check 10: a nonce is fresh once per key", () =>
    Effect.gen(function*() {
      const store = yield* NonceStore
      const fresh = (keyId: string, nonce: string) => Effect.map(store.record(keyId, nonce, expiresAtSeconds), (r) => r.fresh)
      assert.isTrue(yield* fresh("ak_a", "n-1"))
      assert.isFalse(yield* fresh("ak_a", "n-1"))
      assert.isTrue(yield* fresh("ak_b", "n-1"), "another key has its own nonces")
      assert.isTrue(yield* fresh("ak_a", "n-2"))
    }))

  it.effect("check 10: concurrent uses of one nonce (one group commit or several): exactly one is fresh", () =>
    Effect.gen(function*() {
      const store = yield* NonceStore
      const results = yield* Effect.all(
        Array.from({ length: 50 }, (_, index) =>
          Effect.map(
            store.record("ak_c", index % 2 === 0 ? "same" : `other-${index}`, expiresAtSeconds),
            (recorded) => recorded.fresh
          )),
        { concurrency: "unbounded" }
      )
      const sameResults = results.filter((_, index) => index % 2 === 0)
      assert.strictEqual(sameResults.filter((fresh) => fresh).length, 1)
      assert.isTrue(results.filter((_, index) => index % 2 === 1).every((fresh) => fresh))
    }))

  it.effect("group commit: a nonce queued while the previous flush ends is still flushed (no lost wakeup)", () =>
    Effect.gen(function*() {
      const store = yield* NonceStore
      let stuck = 0
      for (let round = 0; round < 40; round++) {
        const firstDone = yield* Deferred.make<void>()
        const first = store.record("ak_d", `first-${round}`, expiresAtSeconds).pipe(
          Effect.tap(() => Deferred.succeed(firstDone, undefined))
        )
        // The second request arrives right as the first one's flush finishes, a few scheduler steps later each round.
        const second = Effect.gen(function*() {
          yield* Deferred.await(firstDone)
          for (let step = 0; step < round % 8; step++) yield* Effect.yieldNow
          return yield* store.record("ak_d", `second-${round}`, expiresAtSeconds)
        })
        const both = yield* Effect.all([first, second], { concurrency: "unbounded" }).pipe(
          Effect.timeoutOption("1 second")
        )
        if (Option.isNone(both)) stuck++
      }
      assert.strictEqual(stuck, 0, "requests waited for a flush that never came")
    }).pipe(
      // Fine-grained interleaving of fibers, as under load: every few steps a fiber yields to the others.
      Effect.provideService(Scheduler.MaxOpsBeforeYield, 16)
    ))
})

// TestClock: this process's clock an hour ahead of the database's.
it.effect("the purge goes by the database's clock: a process whose clock runs ahead cannot purge a live nonce (issue 36)", () =>
  Effect.gen(function*() {
    const realNowSeconds = Math.floor(Date.now() / 1000)
    yield* TestClock.setTime(Date.now() + 3_600_000)
    const store = yield* Effect.provide(
      Effect.service(NonceStore),
      yield* Layer.build(NoncePurge.pipe(Layer.provideMerge(TestLayer)))
    )
    assert.isTrue((yield* store.record("ak_skew", "n-1", realNowSeconds + 20)).fresh)
    // The next purge, by this process's clock an hour past the token's exp.
    yield* TestClock.adjust(noncePurgeIntervalMillis)
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1_000)))
    assert.isFalse((yield* store.record("ak_skew", "n-1", realNowSeconds + 20)).fresh, "the nonce is still known")
  }).pipe(Effect.scoped), 20_000)

/** The request's place in its key's rate window, or undefined for a replay. */
const windowPosition = (record: NonceRecord) => record.fresh ? record.windowPosition : undefined

// TestClock: every record at a chosen second.
it.effect("check 11's count: one window per key across two store instances (two processes); replays do not count; a clock behind counts into the newer window (issue 32)", () =>
  Effect.gen(function*() {
    const second = 4_000_000_000
    yield* TestClock.setTime(second * 1000)
    const build = Effect.flatMap(Layer.build(TestLayer), (context) => Effect.provide(Effect.service(NonceStore), context))
    const first = yield* build
    const other = yield* build
    const key = `ak_window_${Date.now()}`
    const positions = yield* Effect.all(
      Array.from({ length: 20 }, (_, index) => (index % 2 === 0 ? first : other).record(key, `n-${index}`, expiresAtSeconds)),
      { concurrency: "unbounded" }
    ).pipe(Effect.map((records) => records.map(windowPosition)))
    assert.deepStrictEqual([...positions].sort((a, b) => a! - b!), Array.from({ length: 20 }, (_, index) => index + 1))
    // A replay, through either instance, is not fresh and takes no place.
    assert.isUndefined(windowPosition(yield* other.record(key, "n-0", expiresAtSeconds)))
    assert.strictEqual(windowPosition(yield* first.record(key, "n-20", expiresAtSeconds)), 21)
    // The next second: a new window.
    yield* TestClock.setTime((second + 1) * 1000)
    assert.strictEqual(windowPosition(yield* other.record(key, "n-21", expiresAtSeconds)), 1)
    // A process whose clock is a second behind counts into the newer window, not into a fresh one of its own.
    yield* TestClock.setTime(second * 1000)
    assert.strictEqual(windowPosition(yield* first.record(key, "n-22", expiresAtSeconds)), 2)
    // Another key has its own window.
    assert.strictEqual(windowPosition(yield* first.record(`${key}_b`, "n-0", expiresAtSeconds)), 1)
  }).pipe(Effect.scoped))
