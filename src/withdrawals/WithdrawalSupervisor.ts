/**
 * Background work of the withdrawal pipeline:
 *
 * - at start, every withdrawal in a status it can leave by itself (SUBMITTED, QUEUED, PENDING_SIGNATURE) is asked
 *   again: a request in memory (entities/WithdrawalEntity.ts `ProcessNow`) is lost with the process that held it,
 *   and the withdrawal's row is what survives;
 * - the sweep re-asks the entity of every withdrawal that has waited a while in such a status: its request was lost
 *   with another process, its entity gave up on a defect, the hot wallet was short
 *   (QUEUED/INSUFFICIENT_FUNDS_PLATFORM), or the network was unreachable. A re-request carries a new attempt key per
 *   sweep window, so it is not answered from an earlier stored reply;
 * - the confirmation check completes CONFIRMING withdrawals after each network's confirmation rule.
 */
import { Clock, Effect, Layer, Schedule, Schema } from "effect"
import { Sharding } from "effect/cluster"
import { SqlClient, Statement } from "effect/sql"
import { ChainClients } from "../chains/ChainClient.ts"
import { forEachIdPage } from "../db/IdPages.ts"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { requestProcessing } from "../entities/WithdrawalEntity.ts"
import { WithdrawalProcessor } from "./WithdrawalProcessor.ts"
import { pollingLoop } from "../domain/Polling.ts"

export const withdrawalSweepIntervalMillis = 10_000
/** Withdrawals whose last change is younger than this are left to the request in flight. */
export const withdrawalStuckAfterMillis = 10_000
export const withdrawalSweepBatchMax = 500
/** How often each network's CONFIRMING withdrawals are checked (as often as the deposit scan). */
export const withdrawalConfirmIntervalMillis = 1_000

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const stuckRows = decodeRows(Schema.Struct({ id: Text }), "WithdrawalSupervisor.sweepStuckWithdrawals")
const queuedRows = decodeRows(Schema.Struct({ id: Text }), "WithdrawalSupervisor.retryQueuedWithdrawals")

/** Withdrawals in a status they can leave by themselves: what both the start's ask and the sweep look for. */
const openWithdrawal = Statement.literal("kind = 'WITHDRAWAL' AND status IN ('SUBMITTED', 'QUEUED', 'PENDING_SIGNATURE')")

const ask = (ids: ReadonlyArray<{ id: string }>, attempt: string) =>
  Effect.forEach(ids, ({ id }) => requestProcessing(id, attempt), { discard: true })

export const sweepStuckWithdrawals = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const stuck = yield* sql`
    SELECT id FROM transactions
    WHERE ${openWithdrawal} AND updated_at < ${new Date(now - withdrawalStuckAfterMillis)}
    ORDER BY updated_at LIMIT ${withdrawalSweepBatchMax}`.pipe(Effect.flatMap(stuckRows))
  yield* ask(stuck, `supervisor:${Math.floor(now / withdrawalSweepIntervalMillis)}`)
  return stuck.length
})

/**
 * Asks every withdrawal in a status it can leave by itself, however recent, in pages of `withdrawalSweepBatchMax`
 * (keyset by id, so each is asked once); run when the process starts. Returns how many were asked.
 */
export const askOpenWithdrawals = Effect.suspend(() => askOpenWithdrawalsWhere(() => true, "start"))

/**
 * As `askOpenWithdrawals`, only those `keep` selects (entities/ClusterDuties.ts: those of the shards this process
 * just took over); the attempt key starts with `reason`. Returns how many were asked.
 */
export const askOpenWithdrawalsWhere = (keep: (id: string) => boolean, reason: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    let asked = 0
    yield* forEachIdPage(
      withdrawalSweepBatchMax,
      (afterCursor) =>
        sql`
          SELECT id FROM transactions WHERE ${openWithdrawal} ${afterCursor}
          ORDER BY id LIMIT ${withdrawalSweepBatchMax}`.pipe(Effect.flatMap(stuckRows)),
      (page) => {
        const kept = page.filter(({ id }) => keep(id))
        asked += kept.length
        return ask(kept, `${reason}:${now}`)
      }
    )
    return asked
  })

/** Which QUEUED withdrawals to re-ask: a network's (its hot wallet or switch changed) or a wallet's (unfrozen). */
export type QueuedScope = { readonly networkKey: string } | { readonly walletId: string }

/** Re-asks the QUEUED withdrawals of `scope` at once (the hot wallet was topped up, a switch went back on). */
export const retryQueuedWithdrawals = (scope: QueuedScope) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const queued = yield* sql`
      SELECT id FROM transactions
      WHERE kind = 'WITHDRAWAL' AND status = 'QUEUED'
        AND ${"networkKey" in scope ? sql`network_key = ${scope.networkKey}` : sql`source_wallet_id = ${scope.walletId}`}
      ORDER BY id LIMIT ${withdrawalSweepBatchMax}`.pipe(Effect.flatMap(queuedRows))
    yield* ask(queued, `released:${now}`)
    return queued.length
  })

/**
 * For a handler whose change lets QUEUED withdrawals go on (a hot wallet topped up, withdrawals switched on, a wallet
 * unfrozen): re-asks them now. Never fails: the change is already stored, so a failure here is logged and the
 * supervisor's sweep asks them again within 20 s.
 */
export const queuedWithdrawalsRelease = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sharding = yield* Sharding.Sharding
  return (scope: QueuedScope): Effect.Effect<void> =>
    retryQueuedWithdrawals(scope).pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.provideService(Sharding.Sharding, sharding),
      Effect.catchCause((cause) =>
        Effect.logWarning(`could not re-ask the QUEUED withdrawals of ${JSON.stringify(scope)}; the sweep will`, cause)
      ),
      Effect.asVoid
    )
})

export const WithdrawalSupervisor = Layer.effectDiscard(Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  const clients = yield* ChainClients
  const sweep = sweepStuckWithdrawals.pipe(
    Effect.catchCause((cause) => Effect.logWarning("withdrawal sweep failed", cause).pipe(Effect.as(0)))
  )
  yield* askOpenWithdrawals.pipe(
    Effect.catchCause((cause) =>
      Effect.logWarning("asking the open withdrawals at start failed; the sweep will", cause)
    ),
    Effect.andThen(Effect.sleep(withdrawalSweepIntervalMillis)),
    Effect.andThen(sweep.pipe(Effect.repeat(Schedule.spaced(withdrawalSweepIntervalMillis)))),
    pollingLoop,
    Effect.forkScoped
  )
  const confirmAll = Effect.forEach(clients.networkKeys, (networkKey) =>
    processor.confirm(networkKey).pipe(
      Effect.catchCause((cause) => Effect.logWarning(`withdrawal confirmation of ${networkKey} failed`, cause))
    ), { discard: true })
  yield* confirmAll.pipe(Effect.repeat(Schedule.spaced(withdrawalConfirmIntervalMillis)), pollingLoop, Effect.forkScoped)
}))
