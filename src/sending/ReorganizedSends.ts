/**
 * Sends a reorganization took off the chain after they were final (issue 35; docs/sending.md "Reorganized after it
 * was final"; sql/0036_reorganized_sends_opening_balances.sql). A withdrawal is COMPLETED, a sweep or top-up CONFIRMED, once its
 * transaction meets the network's confirmation rule; a reorganization deeper than that rule can still remove the
 * block, and the chain then holds neither the payment nor its fee while the books say both left.
 *
 * - `reopenSendsAbove`: the deposit watcher's rewind (deposits/DepositWatcher.ts), in the transaction that forgets a
 *   block, reopens every send final in it: back to PENDING (a nonce fill to FILLING), without an inclusion, with the
 *   state it had and the hash of the version that was on the chain kept beside it. So the chain books (ChainBooks.ts,
 *   ChainOutputs.ts) show it in flight, a BTC send's inputs are held again, and the ledger audit expects the entries
 *   its earlier final state booked (LedgerAudit.ts `sendFeesBooked`). Logged as an error, counted
 *   (`coffer_sends_reorganized_total`), and listed on `GET /ops/health` (`reorganizedSends`) until final again.
 * - `ReorganizedSendsLoop`: every few seconds, each reopened send is looked for on the chain
 *   (`OutgoingSends.recheckReorganized`): a node that does not know the bytes that were included gets the same bytes
 *   again (never a new signature: same nonce, same txid, no second debit); once a version is final again the send's
 *   state is restored with the new inclusion, and nothing is booked again (the journal booked it the first time).
 *
 * Included again with other figures than those booked (another version, outcome, fee or account cost): the send
 * records the chain's figures, so the chain books follow the chain; the journal keeps the first booking and the ledger
 * audit (`sendFeesBooked`) names the difference for the operator. Not booked here: a changed outcome is a payment
 * question for a person, and a fee-only difference would need an adjusting entry kind the journal does not have yet
 * (docs/ledger.md "Chain books", docs/sending.md "Not yet").
 *
 * What the tenant sees: nothing changes (spec section 3: after a terminal state the only further change is a deposit's
 * COMPLETED to REVERSED), the withdrawal stays COMPLETED with its txHash and networkFeeRaw; docs/decisions.md.
 */
import { Effect, Layer, Metric, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChainClients } from "../chains/ChainClient.ts"
import { decodeRows, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { pollingLoop } from "../domain/Polling.ts"
import { OutgoingSends } from "./OutgoingSends.ts"

/** How often reopened sends are looked for on their chains (a rebroadcast waits on a claim's grace at worst). */
export const reorganizedCheckIntervalMillis = 2_000
/** Reopened sends followed per pass; a reorganization that reopens more is followed over several passes. */
export const reorganizedPerPassMax = 200

export const sendsReorganizedTotal = Metric.counter("coffer_sends_reorganized_total", {
  description: "Sends taken off the chain by a reorganization after they were final (withdrawal COMPLETED, sweep or top-up done), by network",
  incremental: true
})
export const sendsReincludedTotal = Metric.counter("coffer_sends_reincluded_total", {
  description: "Reorganized sends final on the chain again, by network and whether the inclusion matched the one booked (same, differs)",
  incremental: true
})

const ReopenedRow = Schema.Struct({
  id: Text,
  purpose: Text,
  owner_id: Text,
  tx_hash: Text,
  included_height: Numeric
})
const reopenedRows = decodeRows(ReopenedRow, "ReorganizedSends.reopenSendsAbove")

const OpenRow = Schema.Struct({
  id: Text,
  purpose: Schema.Literals(["WITHDRAWAL", "SWEEP", "TOP_UP"]),
  owner_id: Text,
  network_key: Text,
  reorganized_tx_hash: Text,
  reorganized_from_state: Schema.Literals(["CONFIRMED", "REVERTED", "REJECTED"]),
  reorganized_at: Timestamp,
  network_fee: Nullable(Numeric),
  account_cost: Nullable(Numeric)
})
const openRows = decodeRows(OpenRow, "ReorganizedSends.open")

const ownerName = (purpose: string, ownerId: string) => `${purpose.toLowerCase().replace("_", "-")} ${ownerId}`

/**
 * Reopens the sends of `networkKey` final in a block above `height`, which the chain no longer has; run inside the
 * watcher's rewind transaction, beside its deposits (module comment). Answers how many.
 */
export const reopenSendsAbove = (sql: SqlClient.SqlClient, networkKey: string, height: bigint, at: Date) =>
  Effect.gen(function*() {
    const reopened = yield* sql`
      WITH final AS (
        SELECT id, included_height FROM outgoing_sends
        WHERE network_key = ${networkKey} AND included_height > ${height.toString()}
          AND state IN ('CONFIRMED', 'REVERTED', 'REJECTED')
        ORDER BY id
        FOR UPDATE
      )
      UPDATE outgoing_sends s SET
        reorganized_from_state = s.state, reorganized_tx_hash = s.included_tx_hash, reorganized_at = ${at},
        reorganizations = s.reorganizations + 1,
        state = CASE WHEN s.state = 'REJECTED' THEN 'FILLING' ELSE 'PENDING' END,
        included_height = NULL, included_tx_hash = NULL
      FROM final WHERE s.id = final.id
      RETURNING s.id, s.purpose, s.owner_id, s.reorganized_tx_hash AS tx_hash, final.included_height::text AS included_height`
      .pipe(Effect.flatMap(reopenedRows))
    for (const send of reopened) {
      yield* Effect.logError(
        `${ownerName(send.purpose, send.owner_id)}: its transaction ${send.tx_hash}, final in ${networkKey} block ` +
          `${send.included_height}, was taken off the chain by a reorganization deeper than the confirmation rule; ` +
          "the same signed bytes will be broadcast until it is included again (GET /ops/health, reorganizedSends)"
      )
    }
    if (reopened.length > 0) {
      yield* Metric.update(Metric.withAttributes(sendsReorganizedTotal, { network: networkKey }), reopened.length)
    }
    return reopened.length
  })

/** A reopened send as `GET /ops/health` lists it. */
export interface ReorganizedSend {
  readonly networkKey: string
  /** `withdrawal`, `sweep` or `top-up`. */
  readonly kind: string
  /** The withdrawal's transaction id, or the sweep's id (GET /ops/sweeps). */
  readonly ownerId: string
  /** The transaction that was final and is broadcast again. */
  readonly txHash: string
  /** When the watcher found its block gone. */
  readonly since: Date
}

const openSends = (sql: SqlClient.SqlClient, limit: number) =>
  sql`
    SELECT id, purpose, owner_id, network_key, reorganized_tx_hash, reorganized_from_state, reorganized_at,
      network_fee::text AS network_fee, account_cost::text AS account_cost
    FROM outgoing_sends WHERE reorganized_from_state IS NOT NULL
    ORDER BY reorganized_at, id LIMIT ${limit}`.pipe(Effect.flatMap(openRows))

/** The sends reopened now, oldest first (at most `reorganizedPerPassMax`): what `GET /ops/health` shows. */
export const reorganizedSendsReport = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<ReorganizedSend>> =>
  openSends(sql, reorganizedPerPassMax).pipe(
    Effect.map((rows) =>
      rows.map((row) => ({
        networkKey: row.network_key,
        kind: row.purpose.toLowerCase().replace("_", "-"),
        ownerId: row.owner_id,
        txHash: row.reorganized_tx_hash,
        since: row.reorganized_at
      }))
    ),
    Effect.orDie
  )

/**
 * One pass: each reopened send looked for on its chain, its bytes given again to a node that does not know them,
 * and restored once final again. Answers how many were restored.
 */
export const followReorganizedSends = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sends = yield* OutgoingSends
  const clients = yield* ChainClients
  const open = yield* openSends(sql, reorganizedPerPassMax).pipe(Effect.orDie)
  let restored = 0
  for (const networkKey of new Set(open.map((row) => row.network_key))) {
    const client = clients.get(networkKey)
    if (client?.withdrawals === undefined) continue
    const head = yield* client.head.pipe(Effect.option)
    if (head._tag === "None") {
      yield* Effect.logWarning(`reorganized sends of ${networkKey}: the node does not answer; will retry`)
      continue
    }
    for (const row of open.filter((each) => each.network_key === networkKey)) {
      const send = yield* sends.forOwner(row.purpose, row.owner_id)
      if (send === undefined) continue
      const outcome = yield* sends.recheckReorganized(send, head.value, row.reorganized_tx_hash).pipe(
        Effect.catchTag("ChainUnavailable", (error) =>
          Effect.as(Effect.logWarning(`${ownerName(row.purpose, row.owner_id)}: ${error.message}; will retry`), undefined))
      )
      if (outcome?._tag !== "Final") continue
      const state = outcome.kind === "FILL" ? "REJECTED" : outcome.succeeded ? "CONFIRMED" : "REVERTED"
      const marked = yield* sql`
        UPDATE outgoing_sends SET state = ${state}, included_tx_hash = ${outcome.txHash},
          included_height = ${outcome.height.toString()}, network_fee = ${outcome.networkFee.toString()},
          account_cost = ${outcome.accountCost.toString()}, reorganized_from_state = NULL, reorganized_tx_hash = NULL
        WHERE id = ${row.id} AND reorganized_from_state IS NOT NULL
        RETURNING id`.pipe(Effect.orDie)
      if (marked.length === 0) continue
      restored++
      const same = state === row.reorganized_from_state && outcome.txHash === row.reorganized_tx_hash &&
        outcome.networkFee === (row.network_fee ?? 0n) && outcome.accountCost === (row.account_cost ?? 0n)
      yield* Metric.update(
        Metric.withAttributes(sendsReincludedTotal, { network: networkKey, inclusion: same ? "same" : "differs" }),
        1
      )
      if (same) {
        yield* Effect.logWarning(`${ownerName(row.purpose, row.owner_id)}: ${outcome.txHash} is final again in ` +
          `${networkKey} block ${outcome.height}, as it was before the reorganization; the books stand`)
      } else {
        // Booked once, at the first inclusion: the journal keeps those figures and the audit names the difference
        // (ledger:check), for the operator to reconcile; nothing is booked here on a guess.
        yield* Effect.logError(`${ownerName(row.purpose, row.owner_id)}: final again in ${networkKey} block ` +
          `${outcome.height} as ${outcome.txHash} (${state}, network fee ${outcome.networkFee}, account cost ` +
          `${outcome.accountCost}), but ${row.reorganized_tx_hash} was booked (${row.reorganized_from_state}, network ` +
          `fee ${row.network_fee ?? 0n}, account cost ${row.account_cost ?? 0n}); npm run ledger:check shows the ` +
          "difference to reconcile")
      }
    }
  }
  return restored
})

/** The background follow-up of reopened sends, once in the cluster (App.ts, a cluster duty). */
export const ReorganizedSendsLoop = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sends = yield* OutgoingSends
  const clients = yield* ChainClients
  yield* followReorganizedSends.pipe(
    Effect.provideService(SqlClient.SqlClient, sql),
    Effect.provideService(OutgoingSends, sends),
    Effect.provideService(ChainClients, clients),
    Effect.catchCause((cause) => Effect.logWarning("following the reorganized sends failed", cause)),
    Effect.repeat(Schedule.spaced(reorganizedCheckIntervalMillis)),
    pollingLoop,
    Effect.forkScoped
  )
}))
