/**
 * The chain books (docs/ledger.md "Chain books"; decisions.md "Operating wallets, sweeps, gas and fee floors",
 * Books): per network, asset and address, what the chain should hold after every movement the service knows of,
 * computed from what the database records already, and compared with a node by `npm run ledger:check -- --chain`.
 *
 * An address's movements, each counted once, at the block the deposit watcher has processed (its cursor, `asOf`):
 *
 * - deposits (`transactions` kind DEPOSIT) in a block at or below `asOf` whose status is CONFIRMING or COMPLETED
 *   (credited or held: MANUAL_REVIEW and BELOW_MIN_DEPOSIT coins sit on the address all the same): +amount. FAILED
 *   and REVERSED deposits are no longer on the chain;
 * - operating receipts (`platform_receipts`, PlatformReceipts.ts) at or below `asOf` that are none of the service's
 *   own signed versions: +amount (money put on HOT, SWEEP or a GAS wallet from outside);
 * - every send (`outgoing_sends`: withdrawals, sweeps, top-ups, nonce fills) included at or below `asOf`: the sending
 *   address pays the network fee in the native coin, and a CONFIRMED one its amount; a CONFIRMED sweep or top-up
 *   gives its amount to its destination (HOT/SWEEP, a deposit address). A withdrawal's destination is outside, or a
 *   deposit address whose deposit is counted above.
 *
 * What cannot be known exactly is in flight, with how far it may move the chain's figure: a send still PENDING or
 * FILLING may already be in a block (its address may hold up to amount + the highest fee signed less, its sweep
 * or top-up destination up to amount more); a deposit waiting to be re-mined (CONFIRMING without a block) may hold
 * its amount more. A difference within that window is explained; any other is not.
 *
 * Reads in one REPEATABLE READ, READ ONLY transaction (cursor heights and movements agree), like the ledger audit.
 */
import { Data, Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"

export type BookRole = "HOT" | "SWEEP" | "GAS" | "DEPOSIT" | "OPERATING"

export interface BookNetwork {
  readonly networkKey: string
  readonly nativeAssetId: string
  /** The block the books stand at: the watcher's cursor; undefined when no watcher ever ran (then the node's head). */
  readonly asOf: bigint | undefined
  /** The network's catalog assets: undefined contract for the native coin. */
  readonly assets: ReadonlyMap<string, { readonly contract: string | undefined }>
}

export interface BookLine {
  readonly networkKey: string
  readonly assetId: string
  readonly address: string
  readonly role: BookRole
  readonly expected: bigint
  /** In flight: the chain may hold up to this much less (sends that may be in a block already). */
  readonly mayHoldLess: bigint
  /** In flight: the chain may hold up to this much more (incoming sweeps, top-ups, deposits awaiting a block). */
  readonly mayHoldMore: bigint
  /** What is in flight, for the reader: `withdrawal <id> (send PENDING)`, `deposit <id> (awaiting a block)`. */
  readonly inFlight: ReadonlyArray<string>
}

export interface ChainBooksSnapshot {
  readonly networks: ReadonlyArray<BookNetwork>
  readonly lines: ReadonlyArray<BookLine>
}

const NetworkRow = Schema.Struct({
  network_key: Text,
  native_asset_id: Text,
  as_of: Nullable(Numeric),
  asset_id: Text,
  contract: Nullable(Text)
})
const MovementRow = Schema.Struct({
  network_key: Text,
  address: Text,
  asset_id: Text,
  role: Nullable(Text),
  settled: Numeric,
  less: Numeric,
  more: Numeric,
  in_flight: Nullable(Text)
})
const networkRows = decodeRows(NetworkRow, "ChainBooks (networks)")
const movementRows = decodeRows(MovementRow, "ChainBooks (movements)")

const rolePreference: ReadonlyArray<BookRole> = ["DEPOSIT", "HOT", "SWEEP", "GAS", "OPERATING"]

/**
 * Every movement as (network, address, asset, role, settled, less, more, in flight), one row per movement; the
 * sums per address and asset are made in TypeScript, where the roles of an address's rows are merged.
 */
const movements = (sql: SqlClient.SqlClient, networkKeys: ReadonlyArray<string>) =>
  sql`
    WITH cut AS (
      SELECT n.network_key, n.native_asset_id, c.height AS as_of
      FROM networks n LEFT JOIN chain_cursors c ON c.network_key = n.network_key
      WHERE n.network_key IN ${sql.in(networkKeys)}
    ), own AS (
      SELECT v.network_key, v.tx_hash FROM outgoing_versions v
    ), sends AS (
      SELECT s.*, cut.native_asset_id, cut.as_of,
        CASE s.signing_key->>'_tag' WHEN 'Platform' THEN s.signing_key->>'role' WHEN 'Gas' THEN 'GAS' ELSE 'DEPOSIT' END
          AS from_role,
        (s.included_height IS NOT NULL AND (cut.as_of IS NULL OR s.included_height <= cut.as_of)) AS included,
        (SELECT max(v.network_fee_max) FROM outgoing_versions v WHERE v.send_id = s.id) AS fee_max,
        replace(lower(s.purpose), '_', '-') || ' ' || s.owner_id AS owner_name
      FROM outgoing_sends s JOIN cut ON cut.network_key = s.network_key
    )
    -- Deposits on the chain at the cut: in a block the watcher processed and not dropped or reversed.
    SELECT t.network_key, t.destination_address AS address, t.asset_id, 'DEPOSIT' AS role,
      CASE WHEN t.block_height IS NOT NULL THEN t.amount ELSE 0 END::text AS settled, '0' AS less,
      CASE WHEN t.block_height IS NULL THEN t.amount ELSE 0 END::text AS more,
      CASE WHEN t.block_height IS NULL THEN 'deposit ' || t.id || ' (awaiting a block)' END AS in_flight
    FROM transactions t JOIN cut ON cut.network_key = t.network_key
    WHERE t.kind = 'DEPOSIT' AND t.status IN ('CONFIRMING', 'COMPLETED')
      AND (t.block_height IS NULL OR cut.as_of IS NULL OR t.block_height <= cut.as_of)
    UNION ALL
    -- Money put on operating addresses from outside (the service's own sweeps are counted as sends below).
    SELECT r.network_key, r.to_address, r.asset_id, r.role, r.amount::text, '0', '0', NULL
    FROM platform_receipts r JOIN cut ON cut.network_key = r.network_key
    WHERE (cut.as_of IS NULL OR r.block_height <= cut.as_of)
      AND NOT EXISTS (SELECT 1 FROM own WHERE own.network_key = r.network_key AND own.tx_hash = r.tx_hash)
    UNION ALL
    -- Operating receipts the service sent itself still name the address's role (a SWEEP address never sends).
    SELECT r.network_key, r.to_address, r.asset_id, r.role, '0', '0', '0', NULL
    FROM platform_receipts r JOIN cut ON cut.network_key = r.network_key
    WHERE EXISTS (SELECT 1 FROM own WHERE own.network_key = r.network_key AND own.tx_hash = r.tx_hash)
    UNION ALL
    -- What a send took from its address: the amount when it succeeded, in its asset.
    SELECT network_key, from_address, asset_id, from_role,
      CASE WHEN included AND state = 'CONFIRMED' THEN -amount ELSE 0 END::text,
      CASE WHEN state = 'PENDING' THEN amount ELSE 0 END::text, '0',
      CASE WHEN state = 'PENDING' THEN owner_name || ' (send PENDING)' END
    FROM sends WHERE amount > 0
    UNION ALL
    -- ... and its network fee, in the native coin, whatever the outcome once included.
    SELECT network_key, from_address, native_asset_id, from_role,
      CASE WHEN included THEN -coalesce(network_fee, 0) ELSE 0 END::text,
      CASE WHEN state IN ('PENDING', 'FILLING') THEN coalesce(fee_max, 0) ELSE 0 END::text, '0',
      CASE WHEN state IN ('PENDING', 'FILLING') THEN owner_name || ' (send ' || state || ')' END
    FROM sends
    UNION ALL
    -- What a sweep or top-up gave its destination.
    SELECT network_key, to_address, asset_id, CASE WHEN purpose = 'TOP_UP' THEN 'DEPOSIT' ELSE 'OPERATING' END,
      CASE WHEN included AND state = 'CONFIRMED' THEN amount ELSE 0 END::text, '0',
      CASE WHEN state = 'PENDING' THEN amount ELSE 0 END::text,
      CASE WHEN state = 'PENDING' THEN owner_name || ' (send PENDING, incoming)' END
    FROM sends WHERE purpose IN ('SWEEP', 'TOP_UP')`.pipe(Effect.flatMap(movementRows))

/** The books of `networkKeys` (see the module comment), in one REPEATABLE READ, READ ONLY snapshot. */
export const readChainBooks = (networkKeys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (networkKeys.length === 0) return { networks: [], lines: [] } satisfies ChainBooksSnapshot
    return yield* sql.withTransaction(Effect.gen(function*() {
      const assetRows = yield* sql`
        SELECT n.network_key, n.native_asset_id, c.height::text AS as_of, a.asset_id, a.contract
        FROM networks n
        JOIN assets a ON a.network_key = n.network_key
        LEFT JOIN chain_cursors c ON c.network_key = n.network_key
        WHERE n.network_key IN ${sql.in(networkKeys)}
        ORDER BY n.network_key, a.asset_id`.pipe(Effect.flatMap(networkRows))
      const networks = new Map<string, BookNetwork & { assets: Map<string, { contract: string | undefined }> }>()
      for (const row of assetRows) {
        const network = networks.get(row.network_key) ??
          { networkKey: row.network_key, nativeAssetId: row.native_asset_id, asOf: row.as_of ?? undefined, assets: new Map() }
        network.assets.set(row.asset_id, { contract: row.contract ?? undefined })
        networks.set(row.network_key, network)
      }
      const lines = new Map<string, {
        networkKey: string
        assetId: string
        address: string
        roles: Set<string>
        expected: bigint
        mayHoldLess: bigint
        mayHoldMore: bigint
        inFlight: Array<string>
      }>()
      for (const row of yield* movements(sql, networkKeys)) {
        const key = `${row.network_key}\u0000${row.address}\u0000${row.asset_id}`
        const line = lines.get(key) ?? {
          networkKey: row.network_key,
          assetId: row.asset_id,
          address: row.address,
          roles: new Set<string>(),
          expected: 0n,
          mayHoldLess: 0n,
          mayHoldMore: 0n,
          inFlight: []
        }
        if (row.role !== null) line.roles.add(row.role)
        line.expected += row.settled
        line.mayHoldLess += row.less
        line.mayHoldMore += row.more
        // A send's amount and its fee are two rows of one thing in flight.
        if (row.in_flight !== null && !line.inFlight.includes(row.in_flight)) line.inFlight.push(row.in_flight)
        lines.set(key, line)
      }
      // An address's role is the same on all its assets: merged over them.
      const rolesOfAddress = new Map<string, Set<string>>()
      for (const line of lines.values()) {
        const key = `${line.networkKey}\u0000${line.address}`
        const roles = rolesOfAddress.get(key) ?? new Set<string>()
        for (const role of line.roles) roles.add(role)
        rolesOfAddress.set(key, roles)
      }
      const result: Array<BookLine> = [...lines.values()].map((line) => {
        const roles = rolesOfAddress.get(`${line.networkKey}\u0000${line.address}`)!
        return {
          networkKey: line.networkKey,
          assetId: line.assetId,
          address: line.address,
          role: rolePreference.find((role) => roles.has(role)) ?? "OPERATING",
          expected: line.expected,
          mayHoldLess: line.mayHoldLess,
          mayHoldMore: line.mayHoldMore,
          inFlight: line.inFlight.toSorted()
        }
      }).sort((a, b) =>
        a.networkKey.localeCompare(b.networkKey) || rolePreference.indexOf(a.role) - rolePreference.indexOf(b.role) ||
        a.address.localeCompare(b.address) || a.assetId.localeCompare(b.assetId)
      )
      return { networks: [...networks.values()], lines: result } satisfies ChainBooksSnapshot
    })).pipe(Effect.provideService(SqlClient.BeginTransaction, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))
  }).pipe(Effect.withSpan("ChainBooks.readChainBooks"))

export type Verdict = "ok" | "in flight" | "UNEXPLAINED"

export interface ComparedLine extends BookLine {
  readonly onChain: bigint
  /** onChain − expected. */
  readonly difference: bigint
  readonly verdict: Verdict
}

/** A line's verdict: equal, within the in-flight window (explained), or not explained. */
export const compareLine = (line: BookLine, onChain: bigint): ComparedLine => {
  const difference = onChain - line.expected
  const verdict: Verdict = difference === 0n
    ? "ok"
    : difference >= -line.mayHoldLess && difference <= line.mayHoldMore
    ? "in flight"
    : "UNEXPLAINED"
  return { ...line, onChain, difference, verdict }
}

/** One printed line: network, asset, address, role, expected, on chain, difference, verdict (and what is in flight). */
export const describeComparedLine = (line: ComparedLine): string =>
  [
    line.networkKey,
    line.assetId,
    line.address,
    line.role,
    `expected ${line.expected}`,
    `on chain ${line.onChain}`,
    `difference ${line.difference > 0n ? "+" : ""}${line.difference}`,
    line.verdict === "in flight" ? `in flight (explained: ${line.inFlight.join(", ")})` : line.verdict
  ].join("  ")

export interface ChainAuditReport {
  /** Per network: the block compared at, and how many lines. */
  readonly networks: ReadonlyArray<{ readonly networkKey: string; readonly block: bigint; readonly lines: number }>
  readonly lines: ReadonlyArray<ComparedLine>
  readonly ok: boolean
}

/** Balances of a network's node at a block (ChainBalances.ts on a real node; anything else in a test). */
export interface BalanceReader {
  readonly head: Effect.Effect<bigint, { readonly message: string }>
  readonly balance: (
    address: string,
    contract: string | undefined,
    block: bigint
  ) => Effect.Effect<bigint, { readonly message: string }>
}

/** The chain audit could not run: a node that cannot answer, or stands below the books' block. */
export class ChainAuditError extends Data.TaggedError("ChainAuditError")<{ readonly message: string }> {}

/** Nodes asked at once per network: enough to be quick over many addresses, few enough for a provider's limits. */
const balanceCallsConcurrent = 8

/**
 * Compares the books of each network in `readers` with its node, at the block the books stand at (the watcher's
 * cursor: every deposit and receipt up to it is recorded; a network never watched: the node's head).
 */
export const auditChain = (readers: ReadonlyMap<string, BalanceReader>) =>
  Effect.gen(function*() {
    const books = yield* readChainBooks([...readers.keys()].sort())
    const networks: Array<ChainAuditReport["networks"][number]> = []
    const compared: Array<ComparedLine> = []
    for (const network of books.networks) {
      const reader = readers.get(network.networkKey)!
      const fail = (error: { readonly message: string }) =>
        new ChainAuditError({ message: `${network.networkKey}: ${error.message}` })
      const head = yield* Effect.mapError(reader.head, fail)
      if (network.asOf !== undefined && network.asOf > head) {
        return yield* new ChainAuditError({
          message: `${network.networkKey}: the node's head ${head} is below block ${network.asOf} the books stand at ` +
            "(a node behind the one the watcher follows, or another chain)"
        })
      }
      const block = network.asOf ?? head
      const lines = books.lines.filter((line) => line.networkKey === network.networkKey)
      const found = yield* Effect.forEach(lines, (line) => {
        const asset = network.assets.get(line.assetId)
        return reader.balance(line.address, asset?.contract, block).pipe(
          Effect.mapError(fail),
          Effect.map((onChain) => compareLine(line, onChain))
        )
      }, { concurrency: balanceCallsConcurrent })
      compared.push(...found)
      networks.push({ networkKey: network.networkKey, block, lines: lines.length })
    }
    return {
      networks,
      lines: compared,
      ok: compared.every((line) => line.verdict !== "UNEXPLAINED")
    } satisfies ChainAuditReport
  })

/** The report as the CLI prints it: a head per network, every line, then a closing line. */
export const chainReportLines = (report: ChainAuditReport): ReadonlyArray<string> => {
  const unexplained = report.lines.filter((line) => line.verdict === "UNEXPLAINED")
  const inFlight = report.lines.filter((line) => line.verdict === "in flight").length
  return [
    ...report.networks.flatMap((network) => [
      `chain books of ${network.networkKey} at block ${network.block}: ${network.lines} address/asset lines`,
      ...report.lines.filter((line) => line.networkKey === network.networkKey).map(describeComparedLine)
    ]),
    unexplained.length === 0
      ? `chain ok: ${report.lines.length} lines, ${inFlight} in flight`
      : `chain discrepancy: ${unexplained.length} unexplained difference${unexplained.length === 1 ? "" : "s"}, ` +
        `first ${describeComparedLine(unexplained[0]!)}`
  ]
}
