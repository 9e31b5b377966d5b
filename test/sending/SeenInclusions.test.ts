/**
 * The confirmation checks' memory (sending/SeenInclusions.ts), on its own: a send seen in a block the deposit
 * watcher scanned is not due again until its confirmations are, unless the scanned block at that height changes;
 * one seen in a block not scanned yet, or not seen in a block, stays due; one that left the open list is forgotten.
 * Withdrawals (WithdrawalEntity.test, "confirmations: ...") and sweeps use it the same way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import type { ChainHead } from "../../src/chains/ChainClient.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { makeSeenInclusions } from "../../src/sending/SeenInclusions.ts"

const layer = Catalog.layer.pipe(
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest({ serviceEnv: "preproduction" })),
  Layer.orDie
)

const headAt = (height: bigint): ChainHead => ({ height, hash: `head-${height}`, finalizedHeight: 0n })

describe("SeenInclusions", () => {
  it.effect("due again only when the confirmations are due, the scanned block changed, or it was never remembered", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const network = catalog.network("ETH_SEPOLIA")!
      assert.strictEqual(network.confirmations.mode, "confirmations")
      const n = BigInt((network.confirmations as { readonly n: number }).n)
      const memory = yield* makeSeenInclusions
      yield* sql`INSERT INTO chain_blocks (network_key, height, hash) VALUES ('ETH_SEPOLIA', 95, 'scanned-95')`
      const open = ["in-scanned-block", "in-unscanned-block", "in-no-block"]
      const dueOf = (head: bigint, ids: ReadonlyArray<string> = open) =>
        Effect.map(memory.pass(network, headAt(head), ids, true), (pass) => ids.map((id) => pass.due(id)))

      const first = yield* memory.pass(network, headAt(100n), open, true)
      assert.deepStrictEqual(open.map((id) => first.due(id)), [true, true, true], "nothing remembered yet")
      first.checked("in-scanned-block", { _tag: "Waiting", includedAt: 95n })
      first.checked("in-unscanned-block", { _tag: "Waiting", includedAt: 99n })
      first.checked("in-no-block", { _tag: "Waiting" })
      yield* first.end
      assert.deepStrictEqual(yield* dueOf(101n), [false, true, true])
      assert.deepStrictEqual(yield* dueOf(95n + n - 2n), [false, true, true], "one block short of its confirmations")
      assert.deepStrictEqual(yield* dueOf(95n + n - 1n), [true, true, true], "its confirmations are due")

      // Seen again, then the watcher finds another block at that height (a reorganization): due at once.
      const again = yield* memory.pass(network, headAt(101n), open, true)
      assert.isTrue(again.due("in-scanned-block"))
      again.checked("in-scanned-block", { _tag: "Waiting", includedAt: 95n })
      yield* again.end
      assert.deepStrictEqual(yield* dueOf(102n, ["in-scanned-block"]), [false])
      yield* sql`UPDATE chain_blocks SET hash = 'reorganized-95' WHERE network_key = 'ETH_SEPOLIA' AND height = 95`
      assert.deepStrictEqual(yield* dueOf(102n, ["in-scanned-block"]), [true])

      // Remembered again on the new block, then gone from the open list: forgotten, so due if it ever comes back.
      const third = yield* memory.pass(network, headAt(102n), ["in-scanned-block"], true)
      assert.isTrue(third.due("in-scanned-block"))
      third.checked("in-scanned-block", { _tag: "Waiting", includedAt: 95n })
      yield* third.end
      assert.deepStrictEqual(yield* dueOf(103n, ["in-scanned-block"]), [false])
      yield* memory.pass(network, headAt(103n), [], true)
      assert.deepStrictEqual(yield* dueOf(103n, ["in-scanned-block"]), [true])
    }).pipe(Effect.provide(layer)))
})
