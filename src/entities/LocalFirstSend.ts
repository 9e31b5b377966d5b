/**
 * How a request reaches an entity whose subject is already committed in our own tables and asked again when a
 * process starts (cluster notes: a request that need not survive a crash, "or be recorded in our own tables first"):
 * in memory when this process holds the entity's shard, else through the cluster's storage.
 *
 * A persisted message costs four more statements (its row, the storage read that delivers it, the reply, the
 * processed mark): about 4 ms of PostgreSQL and 3 ms of service CPU (docs/benchmarks.md, tenth measurement). The
 * in-memory one dies with the process, and the process that takes its shard over asks again (ClusterDuties.ts
 * `ShardTakeover`). To another process's entity the persisted message goes over the runner transport (its row first,
 * so it survives that process's death); it is also sent when the in-memory send fails (the shard moved since the
 * check: EntityNotAssignedToRunner).
 */
import { Effect } from "effect"
import { EntityId, Sharding } from "effect/cluster"

/**
 * Hands the request over (it runs in the background) and never fails: the subject is committed, and its supervisor
 * asks again, so a request neither send could hand over is logged as `lost` says and only waits.
 */
export const askLocalFirst = (options: {
  readonly entity: { readonly getShardGroup: (entityId: EntityId.EntityId) => string }
  readonly id: string
  readonly inMemory: Effect.Effect<void, unknown>
  readonly stored: Effect.Effect<void, unknown>
  readonly lost: string
}): Effect.Effect<void, never, Sharding.Sharding> =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const entityId = EntityId.EntityId.make(options.id)
    const local = sharding.hasShardId(sharding.getShardId(entityId, options.entity.getShardGroup(entityId)))
    yield* local ? options.inMemory.pipe(Effect.catchCause(() => options.stored)) : options.stored
  }).pipe(Effect.catchCause((cause) => Effect.logWarning(options.lost, cause)))
