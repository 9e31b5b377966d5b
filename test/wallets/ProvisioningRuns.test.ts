/**
 * ProvisioningRuns (issue 39): a request's wallet is provisioned in a fiber of the service's scope, one run per wallet
 * at a time, and a run outlives the request that started it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Scope } from "effect"
import { makeProvisioningRuns } from "../../src/wallets/ProvisioningRuns.ts"
import type { ProvisionOutcome, WalletProvisioner } from "../../src/wallets/WalletProvisioner.ts"

/** A provisioner whose runs wait for `gate`, counting them per wallet. */
const gatedProvisioner = (gate: Deferred.Deferred<void>, calls: Map<string, number>, outcome: Effect.Effect<ProvisionOutcome>) =>
  ({
    provision: (walletId: string) =>
      Effect.sync(() => calls.set(walletId, (calls.get(walletId) ?? 0) + 1)).pipe(
        Effect.andThen(Deferred.await(gate)),
        Effect.andThen(outcome)
      ),
    provisionOnce: () => Effect.die("not used")
  }) as WalletProvisioner["Service"]

describe("ProvisioningRuns", () => {
  it.effect("concurrent starts for one wallet share one run; a later start runs again; the run outlives its caller", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const calls = new Map<string, number>()
      const scope = yield* Scope.make()
      const runs = makeProvisioningRuns(gatedProvisioner(gate, calls, Effect.succeed("ACTIVATED")), scope)
      // Each start comes from a request whose own scope ends at once: the run must not end with it.
      yield* Effect.scoped(runs.start("w1"))
      yield* runs.start("w1")
      yield* runs.start("w2")
      yield* Effect.yieldNow
      assert.deepStrictEqual([...calls], [["w1", 1], ["w2", 1]])
      assert.strictEqual(runs.running(), 2)
      yield* Deferred.succeed(gate, undefined)
      for (let step = 0; step < 10 && runs.running() > 0; step++) yield* Effect.yieldNow
      assert.strictEqual(runs.running(), 0)
      yield* runs.start("w1")
      for (let step = 0; step < 10 && runs.running() > 0; step++) yield* Effect.yieldNow
      assert.strictEqual(calls.get("w1"), 2)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("a defect ends the run (the supervisor asks again) and frees the wallet for the next start", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      yield* Deferred.succeed(gate, undefined)
      const calls = new Map<string, number>()
      const scope = yield* Scope.make()
      const runs = makeProvisioningRuns(gatedProvisioner(gate, calls, Effect.die("bug")), scope)
      yield* runs.start("w3")
      for (let step = 0; step < 10 && runs.running() > 0; step++) yield* Effect.yieldNow
      assert.strictEqual(runs.running(), 0)
      yield* runs.start("w3")
      for (let step = 0; step < 10 && runs.running() > 0; step++) yield* Effect.yieldNow
      assert.strictEqual(calls.get("w3"), 2)
      yield* Scope.close(scope, Exit.void)
    }))
})
