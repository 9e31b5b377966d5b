/**
 * Each on-chain withdrawal is a cluster entity (id = the withdrawal's transaction id) that drives it along its life
 * cycle (withdrawals/WithdrawalProcessor.ts). `Process` is persisted: it survives a kill -9 and is delivered again,
 * and the handler is idempotent (the state is read from PostgreSQL, every transition is a conditional UPDATE, the
 * signed bytes are stored once), so running it twice, or on two processes at once, is harmless. Each request names
 * its attempt (submission, approval, supervisor sweep, hot-wallet top-up), deduplicated on its own. A defect fails
 * that message instead of restarting the entity forever (cluster notes, "Supervision"); the supervisor asks again.
 */
import { Effect, Schema } from "effect"
import { ClusterSchema, Entity, type Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { WithdrawalProcessor } from "../withdrawals/WithdrawalProcessor.ts"
import { ProcessReply } from "../withdrawals/WithdrawalTransitions.ts"

export const Process = Rpc.make("Process", {
  payload: { attempt: Schema.String },
  primaryKey: ({ attempt }) => attempt,
  /** The status the withdrawal stands in when the handler is done (or MISSING). */
  success: ProcessReply
}).annotate(ClusterSchema.Persisted, true)

export const WithdrawalEntity = Entity.make("Withdrawal", [Process])

export const WithdrawalEntityLayer = WithdrawalEntity.toLayer(
  Effect.gen(function*() {
    const processor = yield* WithdrawalProcessor
    const { entityId } = yield* Entity.CurrentAddress
    return WithdrawalEntity.of({
      Process: () => processor.process(entityId)
    })
  }),
  { maxIdleTime: "1 minute", disableFatalDefects: true }
)

/** Asks the withdrawal's entity to process it; returns once the message is stored (it runs in the background). */
export const requestProcessing = (
  withdrawalId: string,
  attempt: string
): Effect.Effect<void, never, Sharding.Sharding> =>
  Effect.gen(function*() {
    const clientFor = yield* WithdrawalEntity.client
    yield* clientFor(withdrawalId).Process({ attempt }, { discard: true }).pipe(
      Effect.catchCause((cause) =>
        // The supervisor finds the withdrawal again (it waits in a non-final status), so a lost request only waits.
        Effect.logWarning(`could not ask withdrawal ${withdrawalId} to proceed; the supervisor will`, cause)
      )
    )
  })
