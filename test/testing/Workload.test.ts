/**
 * The seeded workload (`npm run scenario`, src/testing/Workload.ts). A bug planted through the test-only LedgerFaults
 * (every DEPOSIT_CREDIT dropped, as a credit forgotten in code would be) is found by the checks after a step, shrunk to
 * the shortest failing prefix, and that seed and prefix fail again; without the planted bug the same seed holds, twice,
 * with the same steps, answers and fingerprint.
 *
 * Kept short for the suite: seed `d5` credits its first deposit at step 6 (user, address, deposit at step 5, 15
 * blocks at step 6), so the first run is 6 steps and the bisection three more runs of at most 5.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { findFailure, isShrunkFailure, runWorkload } from "../../src/testing/Workload.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

const plantedSeed = "d5"
const plantedSteps = 6
const dropCredit = { dropEntryKinds: ["DEPOSIT_CREDIT"] }

describe("the seeded workload", () => {
  it.live("a planted dropped credit is found, shrunk, fails again by its seed; without it the seed holds with one fingerprint", () =>
    Effect.gen(function*() {
      const found = yield* findFailure({ server, seed: plantedSeed, steps: plantedSteps, faults: dropCredit })
      assert.isTrue(isShrunkFailure(found), "the planted bug was not found")
      if (!isShrunkFailure(found)) return
      assert.match(found.first.failure!.message, /^ledger audit: .*transactionsBooked.*DEPOSIT/)
      assert.isAtMost(found.prefix, found.first.failure!.step)
      assert.isBelow(found.prefix, plantedSteps, "the prefix was shrunk")
      assert.isTrue(found.reproduced)
      assert.isDefined(found.shrunk.failure)
      // The prefix's last step set the bug off: the deposit, credited (and its credit dropped) in the closing phase.
      assert.match(found.shrunk.log[found.prefix - 1]!, /deposit \d+ \w+ to w\d+$/)
      assert.strictEqual(found.shrunk.failure!.step, found.prefix + 1, "found in the closing phase")

      // The printed seed and prefix, run again: the same steps, the same failure.
      assert.strictEqual(found.again.steps, found.prefix)
      assert.deepStrictEqual(found.again.failure, found.shrunk.failure)
      assert.deepStrictEqual(found.again.log, found.shrunk.log)

      // Without the planted bug the same seed holds (the failure is the bug's), and twice gives one fingerprint.
      const clean = yield* runWorkload({ server, seed: plantedSeed, steps: plantedSteps })
      assert.isUndefined(clean.failure, clean.failure?.detail)
      assert.match(clean.fingerprint ?? "", /^[0-9a-f]{64}$/)
      assert.strictEqual(clean.log.length, plantedSteps)
      const again = yield* runWorkload({ server, seed: plantedSeed, steps: plantedSteps })
      assert.deepStrictEqual(again.log, clean.log)
      assert.strictEqual(again.fingerprint, clean.fingerprint)
    }), 600_000)
})
