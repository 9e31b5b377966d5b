/**
 * The background duties of the service, each run once in the cluster rather than once per process (issue 32), and
 * what a process does when it takes shards over from another.
 *
 * - `clusterDuty`: a layer of background loops (the supervisors, the dispatcher, sweeps, retention jobs) becomes an
 *   effect/cluster singleton. The process holding the singleton's shard builds the layer; when the shard moves (its
 *   process died, froze or stopped, or the runners rebalanced) the layer's scope closes there, its loops are
 *   interrupted, and the new holder builds it. Every duty is idempotent and fenced by the database (row locks,
 *   conditional updates), so the moment two processes may both run one (a frozen process that wakes up before it
 *   learns it lost the shard) costs work, not correctness.
 * - `ShardTakeover`: in every process, every second, the shards this process holds are compared with the last look;
 *   for the shards it gained, the open withdrawals and PROVISIONING wallets whose entities live there are asked again.
 *   Their requests in memory (`ProcessNow`, `ProvisionNow`) died with the process that held them, and the periodic
 *   sweeps would only find them 10-60 s later. The first look, at start, counts too: it replaces the start's ask.
 */
import { Effect, Layer, Schedule } from "effect"
import { EntityId, Sharding, ShardId, ShardingConfig, Singleton } from "effect/cluster"
import { askProvisioningWhere } from "../wallets/ProvisioningSupervisor.ts"
import { askOpenWithdrawalsWhere } from "../withdrawals/WithdrawalSupervisor.ts"
import { pollingLoop } from "../domain/Polling.ts"

/** A layer of background loops as a cluster singleton named `coffer/<name>`: built by one process at a time. */
export const clusterDuty = <E, R>(name: string, duty: Layer.Layer<never, E, R>) =>
  Singleton.make(`coffer/${name}`, Effect.asVoid(Layer.build(duty)))

/** How often a process looks at the shards it holds. */
export const takeoverCheckIntervalMillis = 1_000

/** The shards of the default group this process holds now. */
export const heldShards = Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  const config = yield* ShardingConfig.ShardingConfig
  const held = new Set<number>()
  for (let id = 1; id <= config.shardsPerGroup; id++) {
    if (sharding.hasShardId(ShardId.make("default", id))) held.add(id)
  }
  return held
})

export const ShardTakeover = Layer.effectDiscard(Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  let previous = new Set<number>()
  let started = false
  const shardOf = (id: string) => sharding.getShardId(EntityId.EntityId.make(id), "default").id
  const look = Effect.gen(function*() {
    const held = yield* heldShards
    const gained = new Set([...held].filter((id) => !previous.has(id)))
    if (gained.size === 0) {
      previous = held
      started = true
      return
    }
    const keep = (id: string) => gained.has(shardOf(id))
    const withdrawals = yield* askOpenWithdrawalsWhere(keep, "takeover")
    const wallets = yield* askProvisioningWhere(keep, "takeover")
    // Only once they were asked: a failed look is repeated by the next one.
    const first = !started
    previous = held
    started = true
    if (!first || withdrawals + wallets > 0) {
      yield* Effect.logInfo(
        `${first ? "took" : "took over"} shards ${[...gained].sort((a, b) => a - b).join(",")}: ` +
          `asked ${withdrawals} open withdrawals and ${wallets} wallets again`
      )
    }
  })
  yield* look.pipe(
    Effect.catchCause((cause) => Effect.logWarning("asking the entities of shards taken over failed", cause)),
    Effect.repeat(Schedule.spaced(takeoverCheckIntervalMillis)),
    pollingLoop,
    Effect.forkScoped
  )
}))
