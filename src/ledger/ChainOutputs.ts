/**
 * The chain books of a BTC network, output by output (docs/ledger.md "Chain books", "BTC by outputs"): which
 * unspent outputs each address of the service should hold, and how the node's UTXO set is compared with them.
 *
 * An amount per address is the wrong unit for BTC: a withdrawal spends outputs of several addresses at once (credited
 * deposit outputs, each signed with its wallet's key, and HOT's) and returns the change to HOT, so charging the send
 * to its sending address (as ChainBooks.ts does for the account families) gets the network's sum right and the split
 * per address wrong. Here every output is an item of its own:
 *
 * - an output is known from the record of whoever saw it made: a deposit (`transactions` kind DEPOSIT, CONFIRMING or
 *   COMPLETED, in a block at or below the books' block: `tx_hash`, `output_index`, `destination_address`) or an
 *   output paid to an operating address (`platform_receipts`, the service's own change to HOT included);
 * - it is spent, in the books, by the version of a send included at or below the books' block: that version's
 *   signed parameters (`outgoing_versions.parameters.inputs`) name every input it spent, whoever's key signed it;
 * - in flight: an output that an input of a still PENDING send names may be spent already (`withdrawal <id> (send
 *   PENDING)`), an output made by a version of such a send may be there (`... (send PENDING, output)`), and the output
 *   of a deposit waiting to be mined again may be there (`deposit <id> (awaiting a block)`).
 *
 * The node's unspent outputs of those addresses must then equal the held outputs one for one (same outpoint, same
 * value), apart from those explained in flight; an output the node has and the books do not (a payment the watcher
 * never saw, an output made by a transaction signed outside the service) or one the books hold and the node no
 * longer has (spent behind the service's back) is unexplained, named by its outpoint.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { decodeRows, Int4, Nullable, Numeric, Text } from "../db/RowSchemas.ts"

export interface BookOutput {
  readonly txid: string
  readonly vout: number
  readonly value: bigint
  /** The PENDING send whose input names it (it may be spent already), if any. */
  readonly spending: string | undefined
}

/** The outputs side of a BTC book line. */
export interface OutputBooks {
  /** Unspent in the books at their block. */
  readonly held: ReadonlyArray<BookOutput>
  /** Outputs that may be on the chain besides: by outpoint (a deposit awaiting a block). */
  readonly mayAppear: ReadonlyMap<string, { readonly value: bigint; readonly name: string }>
  /** ... and by transaction (every version of a PENDING send of the network): txid → what it is. */
  readonly pendingTransactions: ReadonlyMap<string, string>
}

export interface AddressOutputs {
  readonly networkKey: string
  readonly assetId: string
  readonly address: string
  readonly role: string
  readonly outputs: OutputBooks
}

/** One unspent output as the node has it. */
export interface NodeOutput {
  readonly txid: string
  readonly vout: number
  readonly value: bigint
}

const OutputRow = Schema.Struct({
  network_key: Text,
  native_asset_id: Text,
  address: Text,
  role: Text,
  txid: Text,
  vout: Int4,
  value: Numeric,
  awaiting: Schema.Boolean,
  name: Nullable(Text),
  spent: Schema.Boolean,
  spending: Nullable(Text)
})
const PendingRow = Schema.Struct({ network_key: Text, txid: Text, name: Text })
const outputRows = decodeRows(OutputRow, "ChainOutputs (outputs)")
const pendingRows = decodeRows(PendingRow, "ChainOutputs (pending versions)")

export const outpoint = (output: { readonly txid: string; readonly vout: number }) => `${output.txid}:${output.vout}`

/**
 * The output books of the BTC networks among `networkKeys`, per address, inside the caller's snapshot (ChainBooks.ts
 * reads them in its REPEATABLE READ transaction with the cursors).
 */
export const readOutputBooks = (sql: SqlClient.SqlClient, networkKeys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const rows = yield* sql`
      WITH cut AS (
        SELECT n.network_key, n.native_asset_id, c.height AS as_of
        FROM networks n LEFT JOIN chain_cursors c ON c.network_key = n.network_key
        WHERE n.network_key IN ${sql.in(networkKeys)} AND n.chain_family = 'BTC'
      ), known AS (
        SELECT t.network_key, t.destination_address AS address, 'DEPOSIT' AS role, t.tx_hash AS txid,
          t.output_index AS vout, t.amount AS value, t.block_height IS NULL AS awaiting, 'deposit ' || t.id AS name
        FROM transactions t JOIN cut ON cut.network_key = t.network_key
        WHERE t.kind = 'DEPOSIT' AND t.status IN ('CONFIRMING', 'COMPLETED') AND t.tx_hash IS NOT NULL
          AND (t.block_height IS NULL OR cut.as_of IS NULL OR t.block_height <= cut.as_of)
        UNION ALL
        SELECT r.network_key, r.to_address, r.role, r.tx_hash, r.output_index, r.amount, false, NULL
        FROM platform_receipts r JOIN cut ON cut.network_key = r.network_key
        WHERE cut.as_of IS NULL OR r.block_height <= cut.as_of
        UNION ALL
        -- An operating address's unspent outputs at the block the watcher started from (OpeningBalances.ts).
        SELECT o.network_key, o.address, o.role, o.txid, o.vout, o.amount, false, NULL
        FROM opening_balances o JOIN cut ON cut.network_key = o.network_key
        WHERE o.txid IS NOT NULL AND (cut.as_of IS NULL OR o.height <= cut.as_of)
      ), inputs AS (
        SELECT s.network_key, s.state, i.value->>'txid' AS txid, (i.value->>'vout')::int AS vout,
          (s.included_tx_hash = v.tx_hash AND s.included_height IS NOT NULL
            AND (cut.as_of IS NULL OR s.included_height <= cut.as_of)) AS spent_in_books,
          replace(lower(s.purpose), '_', '-') || ' ' || s.owner_id AS owner_name
        FROM outgoing_sends s
          JOIN cut ON cut.network_key = s.network_key
          JOIN outgoing_versions v ON v.send_id = s.id
          CROSS JOIN LATERAL jsonb_array_elements(coalesce(v.parameters->'inputs', '[]'::jsonb)) i
      )
      SELECT k.network_key, cut.native_asset_id, k.address, k.role, k.txid, k.vout, k.value::text AS value, k.awaiting,
        k.name,
        EXISTS (SELECT 1 FROM inputs i WHERE i.network_key = k.network_key AND i.txid = k.txid AND i.vout = k.vout
          AND i.spent_in_books) AS spent,
        (SELECT string_agg(DISTINCT i.owner_name, ', ') FROM inputs i
          WHERE i.network_key = k.network_key AND i.txid = k.txid AND i.vout = k.vout AND i.state = 'PENDING') AS spending
      FROM known k JOIN cut ON cut.network_key = k.network_key
      ORDER BY k.network_key, k.address, k.txid, k.vout`.pipe(Effect.flatMap(outputRows))
    const pending = yield* sql`
      SELECT s.network_key, v.tx_hash AS txid,
        replace(lower(s.purpose), '_', '-') || ' ' || s.owner_id || ' (send PENDING, output)' AS name
      FROM outgoing_sends s
        JOIN networks n ON n.network_key = s.network_key
        JOIN outgoing_versions v ON v.send_id = s.id
      WHERE s.network_key IN ${sql.in(networkKeys)} AND n.chain_family = 'BTC' AND s.state = 'PENDING'`
      .pipe(Effect.flatMap(pendingRows))

    const pendingOf = new Map<string, Map<string, string>>()
    for (const row of pending) {
      const byTx = pendingOf.get(row.network_key) ?? new Map<string, string>()
      byTx.set(row.txid, row.name)
      pendingOf.set(row.network_key, byTx)
    }
    const lines = new Map<string, {
      networkKey: string
      assetId: string
      address: string
      roles: Set<string>
      held: Array<BookOutput>
      mayAppear: Map<string, { value: bigint; name: string }>
    }>()
    for (const row of rows) {
      const key = `${row.network_key}\u0000${row.address}`
      const line = lines.get(key) ?? {
        networkKey: row.network_key,
        assetId: row.native_asset_id,
        address: row.address,
        roles: new Set<string>(),
        held: new Array<BookOutput>(),
        mayAppear: new Map<string, { value: bigint; name: string }>()
      }
      line.roles.add(row.role)
      if (row.awaiting) line.mayAppear.set(outpoint(row), { value: row.value, name: `${row.name} (awaiting a block)` })
      else if (!row.spent) {
        line.held.push({
          txid: row.txid,
          vout: row.vout,
          value: row.value,
          spending: row.spending === null ? undefined : `${row.spending} (send PENDING)`
        })
      }
      lines.set(key, line)
    }
    const rolePreference = ["DEPOSIT", "HOT", "SWEEP", "GAS"]
    return [...lines.values()].map((line): AddressOutputs => ({
      networkKey: line.networkKey,
      assetId: line.assetId,
      address: line.address,
      role: rolePreference.find((role) => line.roles.has(role)) ?? "OPERATING",
      outputs: {
        held: line.held,
        mayAppear: line.mayAppear,
        pendingTransactions: pendingOf.get(line.networkKey) ?? new Map()
      }
    }))
  })

export interface OutputComparison {
  readonly onChain: bigint
  /** What is in flight and explains a difference, named. */
  readonly explained: ReadonlyArray<string>
  /** Held in the books, not on the node, not explained: `txid:vout value`. */
  readonly missing: ReadonlyArray<string>
  /** On the node, not in the books, not explained. */
  readonly unexpected: ReadonlyArray<string>
}

/** The node's unspent outputs of an address against its output books, one for one. */
export const compareOutputs = (books: OutputBooks, node: ReadonlyArray<NodeOutput>): OutputComparison => {
  const onNode = new Map(node.map((output) => [outpoint(output), output]))
  const explained = new Set<string>()
  const missing: Array<string> = []
  const unexpected: Array<string> = []
  const matched = new Set<string>()
  for (const held of books.held) {
    const key = outpoint(held)
    const found = onNode.get(key)
    if (found !== undefined && found.value === held.value) {
      matched.add(key)
      continue
    }
    if (found === undefined && held.spending !== undefined) {
      explained.add(held.spending)
      continue
    }
    missing.push(`${key} ${held.value}`)
    // An outpoint of another value is both: the books' output is missing and the node's unexpected.
  }
  for (const output of node) {
    const key = outpoint(output)
    if (matched.has(key)) continue
    const awaited = books.mayAppear.get(key)
    if (awaited !== undefined && awaited.value === output.value) {
      explained.add(awaited.name)
      continue
    }
    const pending = books.pendingTransactions.get(output.txid)
    if (pending !== undefined) {
      explained.add(pending)
      continue
    }
    unexpected.push(`${key} ${output.value}`)
  }
  return {
    onChain: node.reduce((sum, output) => sum + output.value, 0n),
    explained: [...explained].sort(),
    missing,
    unexpected
  }
}
