/**
 * Every process of a cluster must share its shard settings (src/entities/Cluster.ts, checkClusterSettings): the first
 * start records them in cluster_settings, and a process started with other ones refuses to start, naming each that
 * differs. And the shard lists of /ops/health as ranges (ClusterHealth.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as Database from "../../src/db/Database.ts"
import { checkClusterSettings, clusterSettings } from "../../src/entities/Cluster.ts"
import { shardRanges } from "../../src/entities/ClusterHealth.ts"

describe("cluster settings", () => {
  it.live("recorded on the first start; the same settings start again; other ones are refused, named", () =>
    Effect.gen(function*() {
      yield* checkClusterSettings(clusterSettings(60))
      yield* checkClusterSettings(clusterSettings(60))
      const refused = yield* Effect.flip(checkClusterSettings(clusterSettings(30)))
      assert.strictEqual(refused._tag, "ClusterSettingsDiffer")
      assert.include(refused.message, "CLUSTER_SHARDS is 30 here, 60 in the cluster")
      const alsoRefused = yield* Effect.flip(checkClusterSettings({ ...clusterSettings(60), shard_lock_expiration_ms: "35000" }))
      assert.include(alsoRefused.message, "shard_lock_expiration_ms is 35000 here, 6000 in the cluster")
      assert.notInclude(alsoRefused.message, "CLUSTER_SHARDS")
    }).pipe(Effect.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))), Effect.orDie))

  it("shard lists as ranges", () => {
    assert.strictEqual(shardRanges([7, 1, 2, 3, 9, 10]), "1-3,7,9-10")
    assert.strictEqual(shardRanges([]), "")
  })
})
