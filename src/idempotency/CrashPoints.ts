/**
 * Fault injection for the crash tests (test/e2e/IdempotencyCrash.test.ts, docs/wallets.md "Idempotency"): with
 * `COFFER_FAULT=<step>` in its environment the process kills itself with SIGKILL, as abruptly as `kill -9`, when an
 * idempotent request (`POST /v1/wallets`, `POST /v1/transactions`) or the sending of a transaction reaches that step. Unset, which is the only
 * setting outside those tests, every point is a no-op. Only the environment sets it: nothing a tenant sends can, and
 * a production process refuses to start with it.
 */
import { Config, Context, Data, Effect, Layer, Option } from "effect"
import { ServiceEnv } from "../Config.ts"

/** The steps of the pipeline, in order (Idempotency.ts). */
export const crashSteps = [
  /** The record is IN_PROGRESS under this process; nothing executed yet. */
  "after-claim",
  /**
   * Inside the effect's database transaction, the record already marked COMPLETED, before COMMIT; for an effect
   * written as one statement (Idempotency.ts `inStatement`), just before that statement: nothing written yet.
   */
  "before-commit",
  /** Right after COMMIT of the effect and its record, before anything else (entity messages, the reply). */
  "after-commit",
  /** The record settled, the response about to be written. */
  "before-reply"
] as const
/**
 * The steps of sending a transaction (sending/OutgoingSends.ts; test/e2e/SendingCrash.test.ts), reached in the
 * background work of a withdrawal rather than in a request.
 */
export const sendCrashSteps = [
  /** Inside the signing transaction: nonce taken, bytes signed and stored, before COMMIT. */
  "send-before-commit",
  /** Right after that COMMIT, before the first broadcast. */
  "send-after-commit",
  /** The first broadcast claimed in the database (sql/0029), the node not given the bytes yet. */
  "send-after-claim",
  /** The node accepted the bytes; the withdrawal is not CONFIRMING yet. */
  "send-after-broadcast"
] as const
export type CrashStep = (typeof crashSteps)[number] | (typeof sendCrashSteps)[number]

export class CrashPointsForbidden extends Data.TaggedError("CrashPointsForbidden")<{ readonly message: string }> {}

export class CrashPoints extends Context.Service<CrashPoints, {
  readonly reach: (step: CrashStep) => Effect.Effect<void>
}>()("coffer/CrashPoints") {
  static readonly layer = Layer.effect(
    CrashPoints,
    Effect.gen(function*() {
      const fault = yield* Config.Literals([...crashSteps, ...sendCrashSteps], "COFFER_FAULT").pipe(Config.option)
      if (Option.isNone(fault)) return CrashPoints.of({ reach: () => Effect.void })
      const env = yield* Config.Literals(ServiceEnv, "SERVICE_ENV").pipe(Config.withDefault("development" as const))
      if (env === "production") {
        return yield* new CrashPointsForbidden({ message: "COFFER_FAULT is for tests and is refused in production" })
      }
      yield* Effect.logWarning(`COFFER_FAULT=${fault.value}: this process kills itself when a request gets there`)
      return CrashPoints.of({
        reach: (step) =>
          step !== fault.value ? Effect.void : Effect.andThen(
            Effect.sync(() => process.kill(process.pid, "SIGKILL")),
            // The signal is delivered before `kill` returns to a process signalling itself; never go on regardless.
            Effect.never
          )
      })
    })
  )

  /** For tests that build the engine without the environment. */
  static readonly layerNone = Layer.succeed(CrashPoints)({ reach: () => Effect.void })
}
