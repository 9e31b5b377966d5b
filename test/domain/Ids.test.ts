import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidPattern, uuidV7 } from "../../src/domain/Ids.ts"

describe("UUID v7 ids (spec section 1: entity ids are time-ordered v7)", () => {
  it.effect("are v7, unique, and sort in creation order even within one millisecond", () =>
    Effect.gen(function*() {
      // TestClock stands still: every id below is made in the same millisecond.
      const ids = yield* Effect.all(Array.from({ length: 5000 }, () => uuidV7))
      for (const id of ids.slice(0, 10)) {
        assert.match(id, uuidPattern)
        assert.strictEqual(id[14], "7")
        assert.include(["8", "9", "a", "b"], id[19])
      }
      assert.strictEqual(new Set(ids).size, ids.length)
      assert.deepStrictEqual([...ids].sort(), ids)
    }).pipe(Effect.provide(Ids.layer.pipe(Layer.provide(Entropy.layer)))))

  it.effect("are reproducible with a seeded Entropy and a fixed clock", () =>
    Effect.gen(function*() {
      const first = yield* uuidV7.pipe(Effect.provide(Ids.layer.pipe(Layer.provide(Entropy.layerSeeded("seed")))))
      assert.match(first, /^00000000-0000-7/)
    }))
})
