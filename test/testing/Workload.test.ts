/**
 * The seeded workload (`npm run scenario`, src/testing/Workload.ts): a short run holds and gives one fingerprint on
 * two runs; a bug planted through the test-only LedgerFaults (every WITHDRAWAL_RELEASE dropped, as a release
 * forgotten in code would be) is found by the checks after a step, shrunk to the shortest failing prefix, and that
 * seed and prefix fail again; without the planted bug the same seed and prefix hold.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { findFailure, isShrunkFailure, runWorkload } from "../../src/testing/Workload.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

/** A seed whose workload submits a withdrawal that fails on broadcast (a release) within its first steps. */
const plantedSeed = "a6"
const dropRelease = { dropEntryKinds: ["WITHDRAWAL_RELEASE"] }

describe("the seeded workload", () => {
  it.live("a short run holds, with one fingerprint on two runs of a seed", () =>
    Effect.gen(function*() {
      const first = yield* runWorkload({ server, seed: "workload-holds", steps: 12 })
      assert.isUndefined(first.failure, first.failure?.detail)
      assert.match(first.fingerprint ?? "", /^[0-9a-f]{64}$/)
      assert.strictEqual(first.log.length, 12)
      const second = yield* runWorkload({ server, seed: "workload-holds", steps: 12 })
      assert.deepStrictEqual(second.log, first.log)
      assert.strictEqual(second.fingerprint, first.fingerprint)
    }), 240_000)

  it.live("a planted dropped release is found, shrunk to a failing prefix, and fails again by its seed", () =>
    Effect.gen(function*() {
      const found = yield* findFailure({ server, seed: plantedSeed, steps: 30, faults: dropRelease })
      assert.isTrue(isShrunkFailure(found), "the planted bug was not found")
      if (!isShrunkFailure(found)) return
      assert.match(found.first.failure!.message, /^ledger audit: .*WITHDRAWAL_RELEASE|^ledger audit: .*frozen/)
      assert.isAtMost(found.prefix, found.first.failure!.step)
      assert.isTrue(found.reproduced)
      assert.isDefined(found.shrunk.failure)
      // The prefix's last step is the one that set the bug off: a withdrawal was submitted in it.
      assert.match(found.shrunk.log[found.prefix - 1]!, /withdraw .*: 202/)

      // The printed seed and prefix, run again: the same steps, the same failure.
      assert.strictEqual(found.again.steps, found.prefix)
      assert.deepStrictEqual(found.again.failure, found.shrunk.failure)
      assert.deepStrictEqual(found.again.log, found.shrunk.log)

      // Without the planted bug the same seed and prefix hold: the failure is the bug's.
      const clean = yield* runWorkload({ server, seed: plantedSeed, steps: found.prefix })
      assert.isUndefined(clean.failure, clean.failure?.detail)
    }), 600_000)
})
