/**
 * The background scan loop (DepositWatcherLoop) runs one fiber per watched network (STYLE.md: a worker per
 * independent thing; docs/deposits.md, "The watcher"): a network whose node hangs stalls only its own scans, and
 * every other network is still scanned, and so its deposits credited, every second. Stubbed watcher and clients, on
 * the TestClock: no database, no chain.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { DepositWatcherLoop, scansConcurrentMax } from "../../src/deposits/DepositWatcherLoop.ts"

describe("deposit scan loop", () => {
  it.effect("a network whose node hangs does not stall the others: they are still scanned every second", () =>
    Effect.gen(function*() {
      const scannedAt = new Map<string, Array<number>>()
      const watcher = Layer.succeed(DepositWatcher)({
        scan: (networkKey) =>
          Effect.gen(function*() {
            const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
            scannedAt.set(networkKey, [...(scannedAt.get(networkKey) ?? []), now])
            // A node that never answers (no timeout of its own): the scan never returns.
            if (networkKey === "HUNG") return yield* Effect.never
            return { networkKey, height: 0n, headHeight: 0n, recorded: 0, settled: 0, rewound: 0 }
          })
      })
      // The hung network first: a loop that scans networks one after another never reaches the others.
      const clients = Layer.succeed(ChainClients)({
        get: () => undefined,
        networkKeys: ["HUNG", "OK_1", "OK_2"],
        isSimulated: () => true
      })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(DepositWatcherLoop.pipe(Layer.provide(Layer.merge(watcher, clients))))
        for (let second = 0; second < 5; second++) yield* TestClock.adjust("1 second")
      }))
      assert.deepStrictEqual(scannedAt.get("HUNG"), [0], "the hung network's scan started once and never returned")
      for (const networkKey of ["OK_1", "OK_2"]) {
        assert.deepStrictEqual(scannedAt.get(networkKey), [0, 1_000, 2_000, 3_000, 4_000, 5_000], networkKey)
      }
    }))

  it.effect(`at most ${scansConcurrentMax} scans run at once, so slow nodes cannot take the whole connection pool`, () =>
    Effect.gen(function*() {
      let running = 0
      let runningMax = 0
      let scans = 0
      const watcher = Layer.succeed(DepositWatcher)({
        scan: (networkKey) =>
          Effect.gen(function*() {
            running++
            scans++
            runningMax = Math.max(runningMax, running)
            // A slow node: each scan takes 3 s.
            yield* Effect.sleep("3 seconds")
            return { networkKey, height: 0n, headHeight: 0n, recorded: 0, settled: 0, rewound: 0 }
          }).pipe(Effect.ensuring(Effect.sync(() => running--)))
      })
      const networkKeys = Array.from({ length: scansConcurrentMax + 3 }, (_, index) => `NET_${index}`)
      const clients = Layer.succeed(ChainClients)({ get: () => undefined, networkKeys, isSimulated: () => true })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(DepositWatcherLoop.pipe(Layer.provide(Layer.merge(watcher, clients))))
        for (let second = 0; second < 20; second++) yield* TestClock.adjust("1 second")
      }))
      assert.strictEqual(runningMax, scansConcurrentMax)
      // Every network got its turns all the same.
      assert.isAtLeast(scans, networkKeys.length * 2)
    }))
})
