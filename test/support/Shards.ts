/** Cluster tests on `TestRunner` (effect/cluster), whose runner takes its shards a moment after it starts. */
import { Effect } from "effect"
import { EntityId, Sharding } from "effect/cluster"
import { TestClock } from "effect/testing"

const realSleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

/**
 * Waits (moving the TestClock, which drives the runner's shard acquisition) until this process holds the shard of
 * `entity`'s entity `id`, and answers whether it does: an in-memory request only goes to an entity of a held shard.
 */
export const holdShardOf = (entity: { readonly getShardGroup: (entityId: EntityId.EntityId) => string }, id: string) =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const entityId = EntityId.EntityId.make(id)
    const shardId = sharding.getShardId(entityId, entity.getShardGroup(entityId))
    for (let step = 0; step < 100 && !sharding.hasShardId(shardId); step++) {
      yield* TestClock.adjust("250 millis")
      yield* realSleep(10)
    }
    return sharding.hasShardId(shardId)
  })
