/**
 * The same scenario with the same seed twice gives the same ids, event stream and ledger (one fingerprint); another
 * seed gives another fingerprint.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { Scenario, scenarioLayer } from "../../src/testing/index.ts"
import { depositReorgScenario } from "./DepositReorgScenario.ts"

const server = { adminUrl: inject("pgAdminUrl"), template: inject("pgTemplate") }

const run = (seed: string) =>
  Effect.gen(function*() {
    const { depositId, tenant, walletId } = yield* depositReorgScenario
    const scenario = yield* Scenario
    return { depositId, tenantId: tenant.tenantId, walletId, fingerprint: yield* scenario.checks.fingerprint }
  }).pipe(Effect.provide(scenarioLayer({ server, seed })))

describe("determinism", () => {
  it.live("one seed, one fingerprint; another seed, another", () =>
    Effect.gen(function*() {
      const first = yield* run("seed-a")
      const second = yield* run("seed-a")
      const other = yield* run("seed-b")
      assert.match(first.fingerprint, /^[0-9a-f]{64}$/)
      assert.deepStrictEqual(second, first)
      assert.notStrictEqual(other.fingerprint, first.fingerprint)
      assert.notStrictEqual(other.tenantId, first.tenantId)
    }), 120_000)
})
