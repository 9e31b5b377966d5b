/**
 * The background scan loop (DepositWatcherLoop): a network whose scans fail is tried again after 2, 4, 8, ...
 * seconds (at most a minute), not every second, and goes back to one scan a second once a scan works. Stubbed
 * watcher and clients, on the TestClock: no database, no chain.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { DepositWatcherLoop, scanBackoffMaxMillis } from "../../src/deposits/DepositWatcherLoop.ts"

/** A watcher whose scans of `network` fail `failures` times, then work; it records the Clock time of each scan. */
const stubs = (failures: number) => {
  const scannedAt: Array<number> = []
  const watcher = Layer.succeed(DepositWatcher)({
    scan: (networkKey) =>
      Effect.gen(function*() {
        const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        scannedAt.push(now)
        if (scannedAt.length <= failures) return yield* Effect.die(new Error("node down"))
        return { networkKey, height: 0n, headHeight: 0n, recorded: 0, settled: 0, rewound: 0 }
      })
  })
  const clients = Layer.succeed(ChainClients)({
    get: () => undefined,
    networkKeys: ["NET"],
    isSimulated: () => true
  })
  return { scannedAt, layer: DepositWatcherLoop.pipe(Layer.provide(Layer.merge(watcher, clients))) }
}

/** Runs the loop for `seconds` of TestClock time, a second at a time. */
const runFor = (layer: Layer.Layer<never>, seconds: number) =>
  Effect.scoped(Effect.gen(function*() {
    yield* Layer.build(layer)
    for (let second = 0; second < seconds; second++) yield* TestClock.adjust("1 second")
  }))

describe("deposit scan loop", () => {
  it.effect("backs off 2 s, 4 s after failures, then scans every second again", () =>
    Effect.gen(function*() {
      const { scannedAt, layer } = stubs(2)
      yield* runFor(layer, 9)
      assert.deepStrictEqual(scannedAt, [0, 2_000, 6_000, 7_000, 8_000, 9_000])
    }))

  it.effect("the pause never exceeds a minute", () =>
    Effect.gen(function*() {
      const { scannedAt, layer } = stubs(1_000)
      yield* runFor(layer, 200)
      const gaps = scannedAt.slice(1).map((at, index) => at - scannedAt[index]!)
      assert.deepStrictEqual(gaps.slice(0, 5), [2_000, 4_000, 8_000, 16_000, 32_000])
      assert.isTrue(gaps.slice(5).every((gap) => gap === scanBackoffMaxMillis), JSON.stringify(gaps))
    }))
})
