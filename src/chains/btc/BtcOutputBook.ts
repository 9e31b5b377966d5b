/**
 * Which BTC outputs a withdrawal may spend, kept in PostgreSQL (sql/0018_btc_outputs.sql; docs/btc.md "Coin
 * selection"): the credited deposit outputs (decisions.md: BTC has no sweeps, withdrawals spend deposit outputs
 * directly, each signed with its wallet's own key) and the reservations that keep two withdrawals, in one process or
 * in several, from choosing the same output.
 */
import { Clock, Data, Effect, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { decodeFirstRow, decodeRows, Int4, Numeric, Text } from "../../db/RowSchemas.ts"
import { type SigningKey, walletKey } from "../../signer/TransactionRequest.ts"

/**
 * How long a reservation holds before its owner has a send: the time between choosing the inputs and the commit
 * of the signature (OutgoingSends.sign), which is seconds; a withdrawal that never got signed (cancelled, failed,
 * a crash) lets its outputs go after this.
 */
export const btcReservationGraceMinutes = 10

export interface BtcOutputRef {
  readonly txid: string
  readonly vout: number
}

export interface DepositOutput extends BtcOutputRef {
  /** The deposit address (the service's normalized form), whose script the output must have. */
  readonly address: string
  /** The deposit wallet's key, which signs this input. */
  readonly key: SigningKey
}

export interface BtcOutputBook {
  /** Credited deposit outputs of the network that no live reservation holds, oldest first, at most `limit`. */
  readonly depositOutputs: (networkKey: string, limit: number) => Effect.Effect<ReadonlyArray<DepositOutput>>
  /** Outputs held by live reservations of owners other than `ownerId`, as `txid:vout`. */
  readonly heldByOthers: (networkKey: string, ownerId: string) => Effect.Effect<ReadonlySet<string>>
  /**
   * The open send that reserved `output` (its payment and sender): a replacement by fee starts from a version's
   * parameters, which name its inputs but not what they pay.
   */
  readonly sendOf: (
    networkKey: string,
    output: BtcOutputRef
  ) => Effect.Effect<{ readonly amount: bigint; readonly to: string; readonly from: string } | undefined>
  /**
   * Reserves all of `outputs` for the owner in one database transaction (the owner's own earlier reservations are
   * renewed, not taken); false (and nothing changed) when another owner's live reservation holds any of them.
   */
  readonly reserve: (
    networkKey: string,
    ownerId: string,
    outputs: ReadonlyArray<BtcOutputRef & { readonly value: bigint }>
  ) => Effect.Effect<boolean>
}

export const outputKey = (output: BtcOutputRef) => `${output.txid}:${output.vout}`

const depositRows = decodeRows(
  Schema.Struct({ tx_hash: Text, output_index: Int4, address: Text, tenant_seq: Int4, user_seq: Int4, wallet_seq: Int4 }),
  "BtcOutputBook.depositOutputs"
)
const refRows = decodeRows(Schema.Struct({ txid: Text, vout: Int4 }), "BtcOutputBook.heldByOthers")
const sendRow = decodeFirstRow(Schema.Struct({ amount: Numeric, to_address: Text, from_address: Text }), "BtcOutputBook.sendOf")

class Taken extends Data.TaggedError("Taken")<{}> {}

export const makeBtcOutputBook = (sql: SqlClient.SqlClient): BtcOutputBook => {
  const cutoff = Effect.map(Clock.currentTimeMillis, (now) => new Date(now - btcReservationGraceMinutes * 60_000))

  /**
   * The reservation `r` belongs to its owner's send in one of `states`: a version of it was signed on that output
   * (its stored parameters name it; a version stored without parameters counts as naming all). An output the owner
   * reserved but did not sign on (a choice made again after a signature that did not commit) is not held by it.
   */
  const signedBySend = (states: Statement.Fragment): Statement.Fragment =>
    sql`EXISTS (SELECT 1 FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id
          WHERE s.network_key = r.network_key AND s.owner_id::text = r.owner_id AND s.state IN ${states}
            AND (v.parameters IS NULL
              OR v.parameters -> 'inputs' @> jsonb_build_array(jsonb_build_object('txid', r.txid, 'vout', r.vout))))`

  /** Before its owner has a send: for the grace period. */
  const choosing = (since: Date): Statement.Fragment =>
    sql`(r.reserved_at > ${since} AND NOT EXISTS (SELECT 1 FROM outgoing_sends s
          WHERE s.network_key = r.network_key AND s.owner_id::text = r.owner_id))`

  /** Held: a send not final yet spends it, or a withdrawal is choosing it (see sql/0018_btc_outputs.sql). */
  const live = (since: Date): Statement.Fragment =>
    sql`(${signedBySend(sql`('PENDING', 'FILLING')`)} OR ${choosing(since)})`

  /** Held, or spent by a send that is final: never a candidate again, and kept as the record of who spent it. */
  const kept = (since: Date): Statement.Fragment =>
    sql`(${signedBySend(sql`('PENDING', 'FILLING', 'CONFIRMED', 'REVERTED')`)} OR ${choosing(since)})`

  const depositOutputs = (networkKey: string, limit: number) =>
    Effect.gen(function*() {
      const since = yield* cutoff
      const rows = yield* sql`
        SELECT t.tx_hash, t.output_index, t.destination_address AS address, tn.seq AS tenant_seq, u.seq AS user_seq,
          w.seq AS wallet_seq
        FROM transactions t
          JOIN wallets w ON w.id = t.destination_wallet_id
          JOIN tenants tn ON tn.id = w.tenant_id
          JOIN users u ON u.id = w.user_id
        WHERE t.kind = 'DEPOSIT' AND t.network_key = ${networkKey} AND t.status = 'COMPLETED' AND t.sub_status IS NULL
          AND NOT EXISTS (SELECT 1 FROM btc_output_reservations r
            WHERE r.network_key = t.network_key AND r.txid = t.tx_hash AND r.vout = t.output_index AND ${kept(since)})
        ORDER BY t.created_at, t.id
        LIMIT ${limit}`.pipe(Effect.orDie, Effect.flatMap(depositRows))
      return rows.map((row): DepositOutput => ({
        txid: row.tx_hash,
        vout: row.output_index,
        address: row.address,
        // wallets.seq counts from 1; the derivation index W is seq - 1 (sql/0002_wallets.sql).
        key: walletKey({ tenantIndex: row.tenant_seq, userIndex: row.user_seq, walletIndex: row.wallet_seq - 1 })
      }))
    })

  const heldByOthers = (networkKey: string, ownerId: string) =>
    Effect.gen(function*() {
      const since = yield* cutoff
      const rows = yield* sql`
        SELECT r.txid, r.vout FROM btc_output_reservations r
        WHERE r.network_key = ${networkKey} AND r.owner_id <> ${ownerId} AND ${live(since)}`
        .pipe(Effect.orDie, Effect.flatMap(refRows))
      return new Set(rows.map(outputKey)) as ReadonlySet<string>
    })

  const sendOf: BtcOutputBook["sendOf"] = (networkKey, output) =>
    sql`
      SELECT s.amount::text AS amount, s.to_address, s.from_address
      FROM btc_output_reservations r
        JOIN outgoing_sends s ON s.network_key = r.network_key AND s.owner_id::text = r.owner_id
      WHERE r.network_key = ${networkKey} AND r.txid = ${output.txid} AND r.vout = ${output.vout} AND s.state = 'PENDING'`
      .pipe(
        Effect.orDie,
        Effect.flatMap(sendRow),
        Effect.map((row) => row === undefined ? undefined : { amount: row.amount, to: row.to_address, from: row.from_address })
      )

  const reserve: BtcOutputBook["reserve"] = (networkKey, ownerId, outputs) =>
    Effect.gen(function*() {
      const since = yield* cutoff
      const now = new Date(yield* Clock.currentTimeMillis)
      return yield* sql.withTransaction(Effect.gen(function*() {
        // Reservations that no longer hold anything go (a refused send's, an abandoned choice's). The owner's own
        // earlier choice stays until its send commits: a concurrent run may still be signing on it.
        yield* sql`
          DELETE FROM btc_output_reservations r
          WHERE r.network_key = ${networkKey} AND r.owner_id <> ${ownerId} AND NOT ${kept(since)}`
        for (const output of outputs) {
          const inserted = yield* sql`
            INSERT INTO btc_output_reservations (network_key, txid, vout, owner_id, value, reserved_at)
            VALUES (${networkKey}, ${output.txid}, ${output.vout}, ${ownerId}, ${output.value.toString()}, ${now})
            ON CONFLICT (network_key, txid, vout) DO UPDATE SET reserved_at = EXCLUDED.reserved_at
              WHERE btc_output_reservations.owner_id = EXCLUDED.owner_id
            RETURNING txid`
          if (inserted.length === 0) return yield* new Taken()
        }
        return true
      })).pipe(
        Effect.catchTag("Taken", () => Effect.succeed(false)),
        Effect.orDie
      )
    })

  return { depositOutputs, heldByOthers, sendOf, reserve }
}
