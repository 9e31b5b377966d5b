/**
 * The entity runtime: every process is a runner of one effect/cluster over the shared PostgreSQL (README "Several
 * processes"). Runners reach each other over effect/cluster's socket transport (`SocketRunner`), check each other's
 * health by ping, and share the shards by the hash ring over the runners registered in `cluster_runners`; each shard is
 * held under a PostgreSQL advisory lock. One process alone is a cluster of one: `npm start` needs no setting.
 *
 * The runner's address (Config.ts `runner`): it listens first (port 0 takes a free port), and what it advertises is the
 * configured host and the port actually bound, so processes on one machine need no setting beyond their HTTP ports.
 * The configuration is explicit here, never `ShardingConfig.layerFromEnv`, which reads `HOST` and `PORT`: the tenant
 * listener's variables (issue 32: two machines on 0.0.0.0:8080 registered one runner).
 *
 * Processed messages are kept `clusterMessageRetentionDays` for deduplication and then deleted by the retention job,
 * so the cluster tables stay bounded.
 */
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { Clock, Data, Duration, Effect, Layer, Logger, Option, Schedule, Schema } from "effect"
import {
  MachineId,
  RunnerAddress,
  RunnerHealth,
  Runners,
  ShardingConfig,
  Snowflake,
  SocketRunner,
  SqlMessageStorage,
  SqlRunnerStorage
} from "effect/cluster"
import { RpcSerialization } from "effect/rpc"
import { SocketServer } from "effect/socket"
import { SqlClient } from "effect/sql"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { AppConfig } from "../Config.ts"
import { writeFileAtomically } from "../domain/AtomicFile.ts"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { pollingLoop, PollingLoop } from "../domain/Polling.ts"
import { listenRunner, pskOf, runnerClientProtocol } from "./RunnerTransport.ts"

export const clusterMessageRetentionDays = 7
export const clusterRetentionIntervalMillis = 60 * 60 * 1000
/** Rows removed per statement, so one run never holds long locks. */
export const clusterRetentionBatchRows = 5_000

/** What the cluster logs at every stop of a single-runner service, when its one runner has just deregistered. */
export const noHealthyRunnersMessage = "No healthy runners available"

const isNoHealthyRunners = (message: unknown): boolean =>
  message === noHealthyRunnersMessage || (Array.isArray(message) && message[0] === noHealthyRunnersMessage)

/**
 * The cluster's own loggers: the service's, less `No healthy runners available` once the service is stopping. Every
 * stop printed it (the runner deregisters itself, then the shard sync finds no runner): a warning that meant nothing
 * to the operator reading it. While the service runs it still means something (the runner lost its registration in
 * PostgreSQL) and is still logged.
 */
const quietAtStop = (state: { stopping: boolean }) =>
  Layer.effect(
    Logger.CurrentLoggers,
    Effect.gen(function*() {
      const loggers = yield* Logger.CurrentLoggers
      return new Set([Logger.make((options) => {
        if (state.stopping && isNoHealthyRunners(options.message)) return
        for (const logger of loggers) logger.log(options)
      })])
    })
  )

/**
 * Timings of the cluster, the same in every process (recorded with the shard count: `checkClusterSettings`). Chosen
 * so that the shards of a process that died (kill -9, a host lost) move to the others within 10 s (issue 32):
 * - a runner is a member while its heartbeat (`cluster_runners.last_heartbeat`, written every
 *   `shardLockRefreshInterval`) is younger than `shardLockExpiration`; every runner reads the members every
 *   `refreshAssignmentsInterval` and recomputes the assignment when they change. A dead runner is gone after at most
 *   6 s + 1 s, sooner when the health check (a ping every `runnerHealthCheckInterval`, refused at once by a dead
 *   process) marks it unhealthy first.
 * - a dead process's advisory locks end with its connections (the kernel closes them); a frozen one's lock session
 *   is ended by PostgreSQL after `shardLockExpiration` idle (`idle_session_timeout`, set by SqlRunnerStorage).
 * The price: a process whose event loop stalls over 6 s (a long GC pause on an overloaded host) loses its shards for
 * a while. That costs time, never money: every handler is fenced by the database (docs/operations.md).
 */
export const clusterTimings = {
  shardLockExpiration: Duration.seconds(6),
  shardLockRefreshInterval: Duration.millis(1_500),
  refreshAssignmentsInterval: Duration.seconds(1),
  runnerHealthCheckInterval: Duration.seconds(2),
  // Persisted messages are polled this often; DeliverAt timers are accurate to about this.
  entityMessagePollInterval: Duration.seconds(2)
} as const

/** The settings every process of the cluster must share, by the name an operator sets or reads them by. */
export const clusterSettings = (shards: number): Readonly<Record<string, string>> => ({
  CLUSTER_SHARDS: String(shards),
  shard_groups: "default",
  shard_lock_expiration_ms: String(Duration.toMillis(clusterTimings.shardLockExpiration))
})

/** This process's shard settings differ from those the cluster recorded: it must not join. */
export class ClusterSettingsDiffer extends Data.TaggedError("ClusterSettingsDiffer")<{ readonly message: string }> {}

const recordedSettings = decodeRows(Schema.Struct({ name: Text, value: Text }), "Cluster.checkClusterSettings")

/**
 * Records the settings on the first start and compares them on every other: two processes on different shard counts
 * would map one entity to two shards (two owners at once), so a process with other settings refuses to start, naming
 * each that differs. Changing them means stopping every process first (docs/operations.md).
 */
export const checkClusterSettings = Effect.fn("Cluster.checkClusterSettings")(function*(
  settings: Readonly<Record<string, string>>
) {
  const sql = yield* SqlClient.SqlClient
  const now = new Date(yield* Clock.currentTimeMillis)
  const names = Object.keys(settings)
  yield* sql`
    INSERT INTO cluster_settings (name, value, recorded_at)
    SELECT name, value, ${now} FROM unnest(${`{${names.join(",")}}`}::text[], ${
    `{${names.map((name) => settings[name]).join(",")}}`}::text[]) AS s(name, value)
    ON CONFLICT (name) DO NOTHING`
  const rows = yield* sql`SELECT name, value FROM cluster_settings`.pipe(Effect.flatMap(recordedSettings))
  const differ = rows.filter((row) => row.name in settings && settings[row.name] !== row.value)
  if (differ.length > 0) {
    return yield* new ClusterSettingsDiffer({
      message: "this process's cluster settings differ from the cluster's (table cluster_settings): " +
        differ.map((row) => `${row.name} is ${settings[row.name]} here, ${row.value} in the cluster`).join("; ")
    })
  }
})

const boundPort = (address: SocketServer.SocketServer["Service"]["address"]) =>
  address._tag === "UnixPathAddress" ? 0 : address.port

/**
 * The runner's socket server: bound first, so that port 0 can be advertised as the port it got. Without `RUNNER_PORT`
 * a restarted process asks for the port its predecessor had (`<DATA_DIR>/runner-port`), so it comes back as the same
 * runner: it takes its predecessor's shards at once instead of waiting for the dead runner's heartbeat to expire.
 * Taken meanwhile, any free port does.
 */
const RunnerServerLayer = Layer.effect(SocketServer.SocketServer, Effect.gen(function*() {
  const config = yield* AppConfig
  const host = config.runner.listenHost
  const psk = pskOf(config.runner.secret)
  const listen = (port: number) => listenRunner({ host, port, psk })
  if (config.runner.port !== 0) return yield* listen(config.runner.port)
  const portFile = join(config.dataDir, "runner-port")
  const previous = existsSync(portFile) ? Number(readFileSync(portFile, "utf8").trim()) : 0
  const server = Number.isSafeInteger(previous) && previous > 0 && previous < 65_536
    ? yield* listen(previous).pipe(Effect.catch(() => listen(0)))
    : yield* listen(0)
  const bound = boundPort(server.address)
  if (bound !== previous && existsSync(config.dataDir)) {
    yield* Effect.sync(() => writeFileAtomically(portFile, `${bound}\n`, 0o644)).pipe(
      Effect.catchCause((cause) => Effect.logWarning(`could not record the runner port in ${portFile}`, cause))
    )
  }
  return server
}))

/**
 * Sharding on the socket transport, SQL message and runner storage, ping health checks: what
 * `NodeClusterSocket.layer({ storage: "sql" })` assembles, with the configuration given here instead of read from
 * the environment (above).
 */
const RunnerLayer = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  yield* checkClusterSettings(clusterSettings(config.clusterShards)).pipe(Effect.orDie)
  const server = yield* SocketServer.SocketServer
  const port = boundPort(server.address)
  const shardingConfig = ShardingConfig.layer({
    ...clusterTimings,
    shardsPerGroup: config.clusterShards,
    runnerAddress: Option.some(RunnerAddress.make(config.runner.host, port)),
    runnerListenAddress: Option.some(RunnerAddress.make(config.runner.listenHost, port))
  })
  const psk = pskOf(config.runner.secret)
  yield* Effect.logInfo(`cluster runner on ${config.runner.host}:${port} (listening on ${config.runner.listenHost}, ${
    psk === undefined ? "plain TCP: loopback only" : "TLS with RUNNER_SECRET"})`)
  const clientProtocol = runnerClientProtocol(psk)
  return SocketRunner.layer.pipe(
    Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(clientProtocol))),
    Layer.provideMerge(SqlMessageStorage.layer),
    // Merged: /ops/health lists the runners (ClusterHealth.ts).
    Layer.provideMerge(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(clientProtocol),
    // Merged: ClusterDuties.ts reads the shard count, /ops/health the timings.
    Layer.provideMerge(shardingConfig),
    Layer.provide(RpcSerialization.layerSchemaBinary())
  )
})).pipe(
  Layer.provide(RunnerServerLayer),
  Layer.provide(NodeCrypto.layerDigest)
)

/**
 * The runner, less its `No healthy runners available` warning once the service is stopping (`quietAtStop`). The flag
 * layer is built after the runner, so released before it: the flag is up when the runner starts to stop.
 */
export const ClusterLayer = Layer.unwrap(Effect.sync(() => {
  const state = { stopping: false }
  const stopping = Layer.effectDiscard(Effect.addFinalizer(() => Effect.sync(() => (state.stopping = true))))
  return stopping.pipe(Layer.provideMerge(RunnerLayer.pipe(
    Layer.provide(quietAtStop(state)),
    // The runner's own loops (message polling, heartbeats, shard upkeep) repeat on fixed intervals; entities that
    // wait for an instant mark their timers with `exactTimers` (domain/Polling.ts, the testers' kit).
    Layer.provide(Layer.succeed(PollingLoop)(true))
  )))
}))

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
