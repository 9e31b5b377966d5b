/**
 * The fault injection of the crash test (docs/wallets.md "Fault injection"): inert unless `COFFER_FAULT` is set,
 * refused in production, and a misspelt step fails the start instead of silently testing nothing. (That a set step
 * really kills the process is what test/e2e/IdempotencyCrash.test.ts relies on.)
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { CrashPoints, crashSteps } from "../../src/idempotency/CrashPoints.ts"

const crashPointsFrom = (env: Record<string, string>) =>
  Effect.scoped(Layer.build(CrashPoints.layer)).pipe(
    Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env)))
  )

describe("COFFER_FAULT", () => {
  it.effect("unset: every step is a no-op", () =>
    Effect.gen(function*() {
      const built = yield* crashPointsFrom({})
      const points = built.mapUnsafe.get(CrashPoints.key) as CrashPoints["Service"]
      for (const step of crashSteps) yield* points.reach(step)
    }))

  it.effect("refused with SERVICE_ENV=production; an unknown step fails the start", () =>
    Effect.gen(function*() {
      const production = yield* Effect.exit(crashPointsFrom({ COFFER_FAULT: "after-commit", SERVICE_ENV: "production" }))
      assert.isTrue(Exit.isFailure(production))
      assert.include(String(production), "refused in production")
      const misspelt = yield* Effect.exit(crashPointsFrom({ COFFER_FAULT: "after-comit" }))
      assert.isTrue(Exit.isFailure(misspelt))
    }))
})
