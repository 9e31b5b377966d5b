/**
 * How a request reaches an entity whose subject is already committed in our own tables and asked again when a
 * process starts (cluster notes: a request that need not survive a crash, "or be recorded in our own tables first"):
 * in memory when this process holds the entity's shard, else through the cluster's storage.
 *
 * A persisted message costs four more statements (its row, the storage read that delivers it, the reply, the
 * processed mark): about 4 ms of PostgreSQL and 3 ms of service CPU (docs/benchmarks.md, tenth measurement). The
 * in-memory one dies with the process, and the start's ask replaces it. `SingleRunner` has no transport between runners, so the stored
 * message is the only way to another process's entity; it is also sent when the in-memory send fails (the shard moved
 * since the check: EntityNotAssignedToRunner).
 */
import { Effect } from "effect"
import { EntityId, Sharding } from "effect/cluster"

export const sendLocalFirst = <E1, E2>(
  entity: { readonly getShardGroup: (entityId: EntityId.EntityId) => string },
  id: string,
  inMemory: Effect.Effect<void, E1>,
  stored: Effect.Effect<void, E2>
): Effect.Effect<void, E2, Sharding.Sharding> =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const entityId = EntityId.EntityId.make(id)
    const local = sharding.hasShardId(sharding.getShardId(entityId, entity.getShardGroup(entityId)))
    return yield* local ? inMemory.pipe(Effect.catchCause(() => stored)) : stored
  })
