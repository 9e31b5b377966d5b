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

describe("seeded streams per purpose (docs/scenarios.md, Determinism)", () => {
  /** Ids of several purposes, all in one millisecond, with `extra` draws of the request purpose between them. */
  const draw = (extra: number) =>
    Effect.gen(function*() {
      const ids = yield* Ids
      const entropy = yield* Entropy
      const out = {
        tenant: [] as Array<string>,
        wallet: [] as Array<string>,
        transaction: [] as Array<string>,
        request: [] as Array<string>,
        salt: [] as Array<string>
      }
      for (let round = 0; round < 3; round++) {
        out.tenant.push(yield* ids.uuidV7For("tenant"))
        for (let index = 0; index < extra; index++) out.request.push(yield* ids.uuidV7For("request"))
        out.wallet.push(yield* ids.uuidV7For("wallet"))
        out.transaction.push(yield* ids.uuidV7For("transaction"))
        out.salt.push(Buffer.from(yield* entropy.bytes(16, "password-salt")).toString("hex"))
      }
      out.request.push(yield* ids.uuidV7For("request"))
      return out
    }).pipe(Effect.provide(Ids.layer.pipe(Layer.provideMerge(Entropy.layerSeeded("seed")))))

  it.effect("an extra draw in one purpose leaves every other purpose's ids and bytes as they were", () =>
    Effect.gen(function*() {
      const plain = yield* draw(0)
      const shifted = yield* draw(2)
      assert.deepStrictEqual(shifted.tenant, plain.tenant)
      assert.deepStrictEqual(shifted.wallet, plain.wallet)
      assert.deepStrictEqual(shifted.transaction, plain.transaction)
      assert.deepStrictEqual(shifted.salt, plain.salt)
      // The purpose drawn more often did move on, and its own ids still sort in creation order.
      assert.notStrictEqual(shifted.request.at(-1), plain.request.at(-1))
      assert.deepStrictEqual([...shifted.request].sort(), shifted.request)
      // Purposes are streams apart: no two purposes share bytes.
      assert.notStrictEqual(plain.tenant[0]!.slice(19), plain.wallet[0]!.slice(19))
      // Another seed, other ids.
      const other = yield* Effect.provide(
        Effect.flatMap(Ids, (ids) => ids.uuidV7For("tenant")),
        Ids.layer.pipe(Layer.provide(Entropy.layerSeeded("another seed")))
      )
      assert.notStrictEqual(other, plain.tenant[0])
    }))
})
