/**
 * Each on-chain withdrawal is a cluster entity (id = the withdrawal's transaction id) that drives it along its life
 * cycle (withdrawals/WithdrawalProcessor.ts). The handler is idempotent (the state is read from PostgreSQL, every
 * transition is a conditional UPDATE, the signed bytes are stored once), so running it twice, or on two processes at
 * once, is harmless. A defect fails that message instead of restarting the entity forever (cluster notes,
 * "Supervision"); the supervisor asks again.
 *
 * Two messages ask the same thing. The withdrawal is committed in its own tables before it is asked about, so a
 * request need not survive a crash: WithdrawalSupervisor asks every open withdrawal again when a process starts, and
 * every one that waits too long afterwards.
 * - `ProcessNow`, volatile, when this process holds the entity's shard: delivered in memory (LocalFirstSend.ts).
 * - `Process`, persisted, when another process holds the shard, or when the volatile send fails. Each names its
 *   attempt (submission, approval, supervisor sweep, hot-wallet top-up), deduplicated on its own.
 */
import { Effect, Schema } from "effect"
import { ClusterSchema, Entity, type Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { WithdrawalProcessor } from "../withdrawals/WithdrawalProcessor.ts"
import { ProcessReply } from "../withdrawals/WithdrawalTransitions.ts"
import { askLocalFirst } from "./LocalFirstSend.ts"

export const Process = Rpc.make("Process", {
  payload: { attempt: Schema.String },
  primaryKey: ({ attempt }) => attempt,
  /** The status the withdrawal stands in when the handler is done (or MISSING). */
  success: ProcessReply
}).annotate(ClusterSchema.Persisted, true)

/** `Process` delivered in memory to an entity of this process (above): lost with the process, which is fine here. */
export const ProcessNow = Rpc.make("ProcessNow", {
  payload: { attempt: Schema.String },
  success: ProcessReply
})

export const WithdrawalEntity = Entity.make("Withdrawal", [Process, ProcessNow])

export const WithdrawalEntityLayer = WithdrawalEntity.toLayer(
  Effect.gen(function*() {
    const processor = yield* WithdrawalProcessor
    const { entityId } = yield* Entity.CurrentAddress
    return WithdrawalEntity.of({
      Process: () => processor.process(entityId),
      ProcessNow: () => processor.process(entityId)
    })
  }),
  { maxIdleTime: "1 minute", disableFatalDefects: true }
)

/**
 * Asks the withdrawal's entity to process it (LocalFirstSend.ts); never fails: the supervisor finds the withdrawal
 * again (it waits in a non-final status), so a lost request only waits.
 */
export const requestProcessing = (
  withdrawalId: string,
  attempt: string
): Effect.Effect<void, never, Sharding.Sharding> =>
  Effect.flatMap(WithdrawalEntity.client, (clientFor) => {
    const client = clientFor(withdrawalId)
    return askLocalFirst({
      entity: WithdrawalEntity,
      id: withdrawalId,
      inMemory: client.ProcessNow({ attempt }, { discard: true }),
      stored: client.Process({ attempt }, { discard: true }),
      lost: `could not ask withdrawal ${withdrawalId} to proceed; the supervisor will`
    })
  })
