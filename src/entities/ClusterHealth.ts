/**
 * What `/ops/health` says about the cluster (issue 32): the runners that are members now (a heartbeat younger than
 * the lock expiration), whether each is healthy, the shards the hash ring assigns to each (the assignment every
 * runner computes from the same members, Sharding's own rule), the shards this process actually holds, and the age
 * of the oldest persisted message that is due and not processed (a stalled entity or shard shows here first).
 */
import { Clock, Context, Effect, HashRing, Layer, Schema } from "effect"
import { RunnerStorage, Sharding, ShardingConfig, Snowflake } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { decodeRows, Nullable, Text } from "../db/RowSchemas.ts"
import { heldShards } from "./ClusterDuties.ts"

export interface RunnerReport {
  readonly address: string
  readonly healthy: boolean
  /** This process. */
  readonly self: boolean
  /** The shards the ring assigns to it, as ranges ("1-12,30"). */
  readonly shards: string
}

export interface ClusterReport {
  readonly runners: ReadonlyArray<RunnerReport>
  /** The shards this process holds the lock of now, as ranges. */
  readonly heldHere: string
  /** Seconds since the oldest due, unprocessed persisted message was sent; null when there is none. */
  readonly oldestUnprocessedMessageSeconds: number | null
}

/** 1,2,3,7 -> "1-3,7". */
export const shardRanges = (shards: Iterable<number>): string => {
  const sorted = [...shards].sort((a, b) => a - b)
  const parts: Array<string> = []
  for (let index = 0; index < sorted.length;) {
    let end = index
    while (end + 1 < sorted.length && sorted[end + 1] === sorted[end]! + 1) end++
    parts.push(end === index ? `${sorted[index]}` : `${sorted[index]}-${sorted[end]}`)
    index = end + 1
  }
  return parts.join(",")
}

const oldestRow = decodeRows(Schema.Struct({ id: Nullable(Text) }), "ClusterHealth.oldestUnprocessed")

export class ClusterHealth extends Context.Service<ClusterHealth, {
  readonly report: Effect.Effect<ClusterReport>
}>()("coffer/ClusterHealth") {
  static readonly layer = Layer.effect(
    ClusterHealth,
    Effect.gen(function*() {
      const storage = yield* RunnerStorage.RunnerStorage
      const config = yield* ShardingConfig.ShardingConfig
      const sharding = yield* Sharding.Sharding
      const sql = yield* SqlClient.SqlClient
      const selfAddress = config.runnerAddress
      const report = Effect.gen(function*() {
        const members = yield* storage.getRunners
        const ring = HashRing.make<(typeof members)[number][0]["address"]>()
        for (const [runner, healthy] of members) {
          if (healthy && runner.groups.includes("default")) HashRing.add(ring, runner.address, { weight: runner.weight })
        }
        const assigned = HashRing.getShards(ring, config.shardsPerGroup) ?? []
        const byRunner = new Map<string, Array<number>>()
        assigned.forEach((address, index) => {
          const key = `${address.host}:${address.port}`
          byRunner.set(key, [...(byRunner.get(key) ?? []), index + 1])
        })
        const now = yield* Clock.currentTimeMillis
        const [oldest] = yield* sql`
          SELECT min(id)::text AS id FROM cluster_messages
          WHERE NOT processed AND (deliver_at IS NULL OR deliver_at <= ${now})`.pipe(Effect.flatMap(oldestRow))
        const oldestMillis = oldest?.id === null || oldest === undefined
          ? undefined
          : Snowflake.timestamp(Snowflake.Snowflake(oldest.id))
        return {
          runners: members.map(([runner, healthy]) => {
            const key = `${runner.address.host}:${runner.address.port}`
            return {
              address: key,
              healthy,
              self: selfAddress._tag === "Some" && `${selfAddress.value.host}:${selfAddress.value.port}` === key,
              shards: shardRanges(byRunner.get(key) ?? [])
            }
          }).sort((a, b) => a.address.localeCompare(b.address)),
          heldHere: shardRanges(yield* heldShards.pipe(Effect.provideService(Sharding.Sharding, sharding), Effect.provideService(ShardingConfig.ShardingConfig, config))),
          oldestUnprocessedMessageSeconds: oldestMillis === undefined ? null : Math.max(0, Math.round((now - oldestMillis) / 100) / 10)
        }
      }).pipe(Effect.withSpan("ClusterHealth.report"), Effect.orDie)
      return ClusterHealth.of({ report })
    })
  )
}
