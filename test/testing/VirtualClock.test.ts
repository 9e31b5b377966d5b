/**
 * The kit's virtual clock alone (src/testing/VirtualClock.ts), over a fake service: a polling sweeper that delivers
 * what the "database" says is due (as the webhook sweeper does for a passivated delivery entity) and an exact timer.
 * However time is moved (strides of any size, a long pollStride, a call's own short waits), everything due runs at its
 * instant, in order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber } from "effect"
import { pollingLoop } from "../../src/domain/Polling.ts"
import { makeVirtualClock } from "../../src/testing/VirtualClock.ts"

const start = 1_000_000

const fakeService = (dues: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const pending: Array<number> = dues.map((offset) => start + offset)
    const attempts: Array<number> = []
    let changes = 0
    // Settle: let every fiber the last wake resumed run to its next sleep.
    const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeat({ times: 3 }))
    const clock = makeVirtualClock({
      startMillis: start,
      settle: Effect.asVoid(settle),
      changes: Effect.sync(() => String(changes)),
      nextDue: Effect.sync(() => pending.length === 0 ? undefined : Math.min(...pending))
    })
    // The sweeper: every 5 s, delivers what is due.
    const sweeper = Effect.gen(function*() {
      for (;;) {
        yield* Effect.sleep("5 seconds")
        const now = yield* Clock.currentTimeMillis
        for (let index = pending.length - 1; index >= 0; index--) {
          if (pending[index]! <= now) {
            attempts.push(now - start)
            pending.splice(index, 1)
            changes++
          }
        }
      }
    }).pipe(pollingLoop, Effect.provideService(Clock.Clock, clock.clock))
    const fiber = yield* Effect.forkDetach(sweeper)
    yield* clock.settle
    const offset = () => clock.nowMillis() - start
    return { attempts, clock, fiber, offset, pending }
  })

describe("the virtual clock", () => {
  it.live("strides that end before, on and after each due instant run each at its instant", () =>
    Effect.gen(function*() {
      // 66.5 s: 1.5 s after the sweeper's quiet tick at 65 s, before its next at 70 s.
      const dues = [60_000, 66_500, 360_000, 2_160_000]
      const { attempts, clock, fiber, offset } = yield* fakeService(dues)
      for (const seconds of [20, 30, 9, 2, 298, 1, 1799, 2, 3600]) {
        yield* clock.advance(`${seconds} seconds`)
        assert.deepStrictEqual(attempts, dues.filter((due) => due <= offset()), `at ${offset()}`)
      }
      yield* Fiber.interrupt(fiber)
    }))

  it.live("a long pollStride keeps every due instant", () =>
    Effect.gen(function*() {
      const dues = [60_000, 360_000, 2_160_000, 9_360_000, 52_560_000]
      const { attempts, clock, fiber } = yield* fakeService(dues)
      yield* clock.advance("1 day", { pollStride: "1 day" })
      assert.deepStrictEqual(attempts, dues)
      yield* Fiber.interrupt(fiber)
    }))

  it.live("a due instant passed by a call's own short waits is run then, not left for a later stride", () =>
    Effect.gen(function*() {
      const { attempts, clock, fiber, offset } = yield* fakeService([100_000])
      yield* clock.advance("99 seconds")
      assert.deepStrictEqual(attempts, [])
      // A call waits on the service in short steps (a deposit address polls for its wallet every 100 ms).
      let done = false
      const seq = clock.nextSeq()
      yield* Effect.forkDetach(
        Effect.provideService(Effect.sleep("100 millis"), Clock.Clock, clock.clock).pipe(
          Effect.repeat({ times: 14 }),
          Effect.ensuring(Effect.sync(() => {
            done = true
          }))
        )
      )
      yield* clock.settle
      while (!done) assert.isTrue(yield* clock.wakeNext(seq))
      assert.strictEqual(offset(), 100_500)
      assert.deepStrictEqual(attempts, [100_000], "the sweeper ran at the due instant during the call")
      yield* clock.advance("10 seconds")
      assert.deepStrictEqual(attempts, [100_000])
      yield* Fiber.interrupt(fiber)
    }))

  it.live("a due instant already passed when an advance begins runs first, at the advance's start", () =>
    Effect.gen(function*() {
      const { attempts, clock, fiber, offset, pending } = yield* fakeService([])
      // The loops go quiet and sleep past the end of the jump.
      yield* clock.advance("99 seconds")
      assert.deepStrictEqual(attempts, [])
      // Work became due a second ago without a loop looking (recorded due at once, or a call carried time past it).
      pending.push(start + offset() - 1_000)
      yield* clock.advance("1 hour")
      assert.deepStrictEqual(attempts, [99_000], "taken when the advance began, not at its end")
      yield* Fiber.interrupt(fiber)
    }))
})
