/**
 * This process as the idempotency engine names the owner of an IN_PROGRESS record (sql/0011_idempotency_owners.sql).
 *
 * Liveness has two signs, and a process counts as live only while both hold:
 *   - a PostgreSQL advisory lock held on a connection reserved for it. PostgreSQL drops the lock when the connection
 *     ends, and the kernel closes the connection of a process that dies in any way, kill -9 included: a restarted
 *     process (or any other) learns at once that its predecessor is gone.
 *   - a heartbeat refreshed every `heartbeatIntervalMillis`. A host that vanished without closing its sockets (power
 *     cut, partition) keeps its lock until TCP gives up, which can take hours; its heartbeat is stale after
 *     `heartbeatStaleMillis`, so another process re-executes its requests within about that time.
 * Neither sign is trusted for correctness: a re-execution takes a new claim (a fencing token) and the replaced
 * execution can no longer store a response or commit an effect settled in its transaction (Idempotency.ts).
 */
import { Clock, Context, Deferred, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { decodeSingleRow, Int4 } from "../db/RowSchemas.ts"
import { Ids } from "../domain/Ids.ts"
import { pollingLoop } from "../domain/Polling.ts"

/** The advisory lock's first key ("Coff"): the second is the instance's `lock_key`. */
export const instanceLockClassId = 0x436f6666
export const heartbeatIntervalMillis = 5_000
/** Four missed heartbeats: a loaded machine may delay one or two, never 20 s of them while the process runs. */
export const heartbeatStaleMillis = 20_000
/** Rows of processes gone longer than this are deleted at a start (they own no record by then). */
export const instanceRetentionMillis = 24 * 60 * 60 * 1000
/** A lost lock connection is re-established after this pause. */
const reconnectPauseMillis = 1_000

// Compiled once (db/RowSchemas.ts): each query's row decoded at this edge, a mismatch a defect naming it.
const registeredRow = decodeSingleRow(Schema.Struct({ lock_key: Int4 }), "ServiceInstance (register)")
const releasedRow = decodeSingleRow(Schema.Struct({ count: Int4 }), "ServiceInstance (release stopped owners)")

/** The advisory-lock half of liveness: a session of `owner` holds its lock (sql/0011). */
const lockHeldBy = (sql: SqlClient.SqlClient, owner: Statement.Fragment | string) =>
  sql`SELECT 1 FROM service_instances i
      JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = ${instanceLockClassId}::oid AND l.objid = i.lock_key::oid
    WHERE i.id = ${owner}`

/**
 * A SQL condition: the instance `owner` (a uuid column or value) is live at `nowMillis`. It reads `pg_locks`, which
 * shows every session's locks of every database, hence the database filter (tests run many databases on one server).
 */
export const ownerIsLive = (sql: SqlClient.SqlClient, owner: Statement.Fragment | string, nowMillis: number) =>
  sql`EXISTS (${lockHeldBy(sql, owner)} AND i.heartbeat_at > ${new Date(nowMillis - heartbeatStaleMillis)})`

/**
 * A SQL condition: the instance `owner` still holds its lock, whatever its heartbeat. For holds that end on their own
 * anyway (a webhook endpoint's lease): a process that died in any way, kill -9 included, lost its lock the moment the
 * kernel closed its connection; one whose host vanished keeps it until TCP gives up, and the hold's own end bounds that.
 */
export const ownerHoldsLock = (sql: SqlClient.SqlClient, owner: Statement.Fragment | string) =>
  sql`EXISTS (${lockHeldBy(sql, owner)})`

export class ServiceInstance extends Context.Service<ServiceInstance, {
  /** This process's instance id, for `idempotency_records.owner_instance`. */
  readonly id: string
}>()("coffer/ServiceInstance") {
  /**
   * Registers the process, takes its lock before the layer is ready (so no request is claimed by an owner that does
   * not look live yet), then releases the IN_PROGRESS records of owners that are gone: after a crash the restarted
   * process frees its predecessor's keys at once. The heartbeat and the lock live in a background fiber that
   * reconnects when the lock's connection is lost.
   */
  static readonly layer = Layer.effect(
    ServiceInstance,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const id = yield* Ids.use((ids) => ids.uuidV7For("service-instance"))
      const started = yield* Clock.currentTimeMillis
      const registered = yield* sql`
        INSERT INTO service_instances (id, started_at, heartbeat_at)
        VALUES (${id}, ${new Date(started)}, ${new Date(started)}) RETURNING lock_key`.pipe(
        Effect.flatMap(registeredRow)
      )
      const lockKey = registered.lock_key

      const heartbeat = Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE service_instances SET heartbeat_at = ${new Date(now)} WHERE id = ${id}`)

      const locked = yield* Deferred.make<void>()
      const holdLock = Effect.scoped(Effect.gen(function*() {
        const connection = yield* sql.reserve
        // A reserved connection goes back to the pool when this scope ends, and a session's advisory locks stay with
        // it: without the unlock a pooled connection could keep an instance looking live after it stopped.
        yield* Effect.addFinalizer(() => Effect.ignore(connection.execute("SELECT pg_advisory_unlock_all()", [], undefined)))
        const [row] = yield* connection.execute(
          "SELECT pg_try_advisory_lock($1, $2) AS locked",
          [instanceLockClassId, lockKey],
          undefined
        )
        // Only a session of this process ever takes this key; after a lost connection PostgreSQL may not have ended
        // the old session yet, and the retry below waits for it.
        if (row?.locked !== true) return yield* Effect.fail(new Error(`instance lock ${lockKey} is still held`))
        yield* heartbeat
        yield* Deferred.succeed(locked, undefined)
        for (;;) {
          yield* Effect.sleep(heartbeatIntervalMillis)
          // The lock lives as long as this connection: a failing probe means it may be gone, so start over.
          yield* connection.execute("SELECT 1", [], undefined)
          yield* heartbeat
        }
      }))
      yield* holdLock.pipe(
        Effect.tapCause((cause) => Effect.logWarning("service instance lock lost; reconnecting", cause)),
        Effect.retry(Schedule.spaced(reconnectPauseMillis)),
        pollingLoop,
        Effect.forkScoped
      )
      yield* Deferred.await(locked)

      const now = yield* Clock.currentTimeMillis
      const released = yield* sql`
        WITH released AS (
          UPDATE idempotency_records r SET state = 'RETRYABLE_FAILURE', locked_until = ${new Date(now)},
            owner_instance = NULL, claim_id = NULL, updated_at = ${new Date(now)}
          WHERE state = 'IN_PROGRESS' AND owner_instance IS NOT NULL
            AND NOT ${ownerIsLive(sql, sql.literal("r.owner_instance"), now)}
          RETURNING 1)
        SELECT count(*)::int AS count FROM released`.pipe(Effect.flatMap(releasedRow))
      if (released.count > 0) {
        yield* Effect.logInfo(`released ${released.count} idempotency keys of stopped processes`)
      }
      yield* sql`DELETE FROM service_instances s WHERE heartbeat_at < ${new Date(now - instanceRetentionMillis)}
        AND NOT EXISTS (SELECT 1 FROM idempotency_records r WHERE r.state = 'IN_PROGRESS' AND r.owner_instance = s.id)`
      return ServiceInstance.of({ id })
    }).pipe(Effect.orDie)
  )
}
