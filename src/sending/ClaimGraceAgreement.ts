/**
 * Every process of a cluster should use the same broadcast claim grace (`BROADCAST_CLAIM_GRACE_MS`; docs/operations.md,
 * "Broadcast claims"): the grace is how long the others leave a claim to its claimer, so a process with a shorter one
 * takes claims the claimer still counts as its own, and one with a longer one waits longer than the others for a dead
 * claimer. Each process records its grace beside its liveness (`service_instances.broadcast_claim_grace_ms`,
 * sql/0037) and compares it with the live processes' at start and every `graceCheckIntervalMillis`: a difference is
 * logged as an error in every process that sees it, naming both values (once per other process).
 *
 * Logged, not refused: a difference costs no money (a claim is still taken by one conditional UPDATE, re-checked by
 * its claims count before the bytes leave, and the bytes are the same: at worst one redundant call to the node), and a
 * process refusing to start would make a rolling change of the setting impossible: during one, old and new values
 * run side by side by design. The shard settings, which would map one entity to two owners, do refuse
 * (entities/Cluster.ts `checkClusterSettings`).
 */
import { Clock, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../Config.ts"
import { decodeRows, Int4, Text } from "../db/RowSchemas.ts"
import { pollingLoop } from "../domain/Polling.ts"
import { ownerIsLive, ServiceInstance } from "../idempotency/ServiceInstance.ts"

/** How often a running process looks again, so it also notices a process started later with another grace. */
export const graceCheckIntervalMillis = 60_000

const otherGraces = decodeRows(
  Schema.Struct({ id: Text, broadcast_claim_grace_ms: Int4 }),
  "ClaimGraceAgreement.check"
)

/** The message of a difference: this process's grace and the others', each with how many processes use it. */
export const graceDiffersMessage = (own: number, others: ReadonlyArray<number>): string => {
  const counts = new Map<number, number>()
  for (const grace of others) counts.set(grace, (counts.get(grace) ?? 0) + 1)
  const described = [...counts].sort(([a], [b]) => a - b)
    .map(([grace, count]) => `${grace} in ${count} other running process${count === 1 ? "" : "es"}`)
  return `BROADCAST_CLAIM_GRACE_MS is ${own} here, ${described.join(", ")}: every process of the cluster should use ` +
    "the same grace (docs/operations.md, \"Broadcast claims\")"
}

export const ClaimGraceAgreement = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const instance = yield* ServiceInstance
  const { broadcastClaimGraceMillis: own } = yield* AppConfig
  yield* sql`UPDATE service_instances SET broadcast_claim_grace_ms = ${own} WHERE id = ${instance.id}`
  const reported = new Set<string>()
  const check = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const rows = yield* sql`
      SELECT other.id::text AS id, other.broadcast_claim_grace_ms FROM service_instances other
      WHERE other.id <> ${instance.id} AND other.broadcast_claim_grace_ms <> ${own}
        AND ${ownerIsLive(sql, sql.literal("other.id"), now)}`.pipe(Effect.flatMap(otherGraces))
    const fresh = rows.filter((row) => !reported.has(row.id))
    if (fresh.length === 0) return
    for (const row of fresh) reported.add(row.id)
    yield* Effect.logError(graceDiffersMessage(own, fresh.map((row) => row.broadcast_claim_grace_ms)))
  })
  yield* check.pipe(Effect.catchCause((cause) => Effect.logWarning("the broadcast claim grace check failed", cause)))
  yield* check.pipe(
    Effect.catchCause((cause) => Effect.logWarning("the broadcast claim grace check failed", cause)),
    Effect.repeat(Schedule.spaced(graceCheckIntervalMillis)),
    Effect.delay(graceCheckIntervalMillis),
    pollingLoop,
    Effect.forkScoped
  )
}))
