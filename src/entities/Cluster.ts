/**
 * The entity runtime: one runner on PostgreSQL message storage by default (`SingleRunner`), swappable for a
 * multi-runner transport. Processed messages are kept `clusterMessageRetentionDays` for deduplication and then
 * deleted by the retention job, so the cluster tables stay bounded.
 */
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { Clock, Effect, Layer, Schedule, Schema } from "effect"
import { MachineId, SingleRunner, Snowflake } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { pollingLoop, PollingLoop } from "../domain/Polling.ts"

export const clusterMessageRetentionDays = 7
export const clusterRetentionIntervalMillis = 60 * 60 * 1000
/** Rows removed per statement, so one run never holds long locks. */
export const clusterRetentionBatchRows = 5_000

export const ClusterLayer = SingleRunner.layer({
  shardingConfig: {
    // Persisted messages are polled this often; DeliverAt timers are accurate to about this.
    entityMessagePollInterval: "2 seconds"
  }
}).pipe(
  Layer.provide(NodeCrypto.layerDigest),
  // The runner's own loops (message polling, shard upkeep) repeat on fixed intervals; entities that wait for an
  // instant mark their timers with `exactTimers` (domain/Polling.ts).
  Layer.provide(Layer.succeed(PollingLoop)(true))
)

/**
 * Deletes processed messages (and their replies) older than the retention period, in bounded batches.
 *
 * This writes to effect/cluster's own tables because the library has no API for it: `MessageStorage` (effect 4.1.0)
 * offers `clearAddress` (every message of an entity, unprocessed ones included, so it would drop pending work) and
 * `clearReplies` (one request's replies, for workflow resumes), but nothing that removes processed messages by age,
 * and `SqlMessageStorage` never deletes them itself. The statements assume the PostgreSQL schema that
 * `SqlMessageStorage.layerMigrations` of effect 4.1.0 creates with the default prefix `cluster` (migrations
 * 0001-0003): `cluster_messages (id bigint, processed boolean, request_id bigint)`, where a request's `request_id` is
 * its own `id` and a Snowflake id starts with its timestamp, and `cluster_replies (request_id bigint)`.
 * test/entities/ClusterSchema.test.ts reads those tables from information_schema after the cluster layer has started
 * and fails when the columns this uses change; re-read SqlMessageStorage.ts when it does.
 */
// Compiled once (db/RowSchemas.ts): the purged messages' request ids, decoded at this edge.
const purgedRequests = decodeRows(Schema.Struct({ request_id: Text }), "Cluster.purgeProcessedMessages")

export const purgeProcessedMessages = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const cutoff = Snowflake.make({
    timestamp: Math.max(Snowflake.constEpochMillis, now - clusterMessageRetentionDays * 24 * 60 * 60 * 1000),
    machineId: MachineId.MachineId.make(0),
    sequence: 0
  }).toString()
  let deleted = 0
  for (;;) {
    const rows = yield* sql`
      DELETE FROM cluster_messages WHERE id IN (
        SELECT id FROM cluster_messages WHERE processed AND id < ${cutoff}::bigint LIMIT ${clusterRetentionBatchRows})
      RETURNING request_id::text`.pipe(Effect.flatMap(purgedRequests))
    if (rows.length === 0) break
    deleted += rows.length
    yield* sql`DELETE FROM cluster_replies WHERE request_id IN (SELECT unnest(${`{${rows.map((row) => row.request_id).join(",")}}`}::bigint[]))`
  }
  return deleted
})

export const ClusterRetention = Layer.effectDiscard(
  purgeProcessedMessages.pipe(
    Effect.catchCause((cause) => Effect.logWarning("cluster message retention failed", cause).pipe(Effect.as(0))),
    Effect.repeat(Schedule.spaced(clusterRetentionIntervalMillis)),
    pollingLoop,
    Effect.forkScoped
  )
)
