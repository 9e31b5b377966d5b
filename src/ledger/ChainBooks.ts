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
 * - opening balances (`opening_balances`, OpeningBalances.ts) at or below `asOf`: what an operating address held at
 *   the block the watcher started from, +amount;
 * - every send (`outgoing_sends`: withdrawals, sweeps, top-ups, nonce fills) included at or below `asOf`: its fee
 *   payer (the sending address, or a SOL send's separate fee payer) pays the network fee and the rent of accounts
 *   it created (`account_cost`) in the native coin, the sending address a CONFIRMED one's amount; a CONFIRMED sweep
 *   or top-up gives its amount to its destination (HOT/SWEEP, a deposit address). A withdrawal's destination is
 *   outside, or a deposit address whose deposit is counted above.
 *
 * What cannot be known exactly is in flight, with how far it may move the chain's figure: a send still PENDING or
 * FILLING may already be in a block (its address may hold up to amount + the highest fee signed less, its sweep
 * or top-up destination up to amount more); a deposit waiting to be re-mined (CONFIRMING without a block) may hold
 * its amount more. A difference within that window is explained; any other is not.
 *
 * Reads in one REPEATABLE READ, READ ONLY transaction (cursor heights and movements agree), like the ledger audit.
 */
import { base58 } from "@scure/base"
import { Data, Duration, Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { compareOutputs, type NodeOutput, type OutputBooks, readOutputBooks } from "./ChainOutputs.ts"

export type BookRole = "HOT" | "SWEEP" | "GAS" | "DEPOSIT" | "OPERATING"

export interface BookNetwork {
  readonly networkKey: string
  readonly family: string
  readonly nativeAssetId: string
  /** The block the books stand at: the watcher's cursor; undefined when no watcher ever ran (then the node's head). */
  readonly asOf: bigint | undefined
  /** The hash the watcher saw at `asOf`, when it still keeps it (chain_blocks). */
  readonly asOfHash: string | undefined
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
  /** BTC: the outputs the address holds in the books, compared one for one (ChainOutputs.ts). */
  readonly outputs?: OutputBooks | undefined
}

export interface ChainBooksSnapshot {
  readonly networks: ReadonlyArray<BookNetwork>
  readonly lines: ReadonlyArray<BookLine>
}

const NetworkRow = Schema.Struct({
  network_key: Text,
  chain_family: Text,
  native_asset_id: Text,
  as_of: Nullable(Numeric),
  as_of_hash: Nullable(Text),
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
  in_flight: Nullable(Text),
  fee_payer_raw: Nullable(Text)
})
const networkRows = decodeRows(NetworkRow, "ChainBooks (networks)")
const movementRows = decodeRows(MovementRow, "ChainBooks (movements)")

/**
 * The fee payer of signed SOL bytes (base64 wire format): the first account key of the message, after the
 * signatures (a compact-u16 count, 64 bytes each) and, for a versioned message, its version byte and the 3-byte
 * header. Only SOL sends are signed with a fee payer other than their sender.
 */
const solFeePayer = (raw: string) =>
  Effect.try({
    try: () => {
      const bytes = Buffer.from(raw, "base64")
      let offset = 0
      const compactU16 = () => {
        let value = 0
        for (let shift = 0; shift < 21; shift += 7) {
          const byte = bytes[offset++]!
          value |= (byte & 0x7f) << shift
          if ((byte & 0x80) === 0) return value
        }
        throw new Error("malformed length")
      }
      // (Read before adding: `offset += f()` would add to the offset as it was before f moved it.)
      const signatures = compactU16()
      offset += 64 * signatures
      if ((bytes[offset]! & 0x80) !== 0) offset += 1
      offset += 3
      const keys = compactU16()
      if (keys < 1 || offset + 32 > bytes.length) throw new Error("no account keys")
      return base58.encode(bytes.subarray(offset, offset + 32))
    },
    catch: (error) => new ChainAuditError({ message: `a signed SOL version's fee payer cannot be read: ${String(error)}` })
  })

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
      -- BTC is booked by outputs (ChainOutputs.ts): a send's amount is not its sending address's alone.
      WHERE n.network_key IN ${sql.in(networkKeys)} AND n.chain_family <> 'BTC'
    ), own AS (
      SELECT v.network_key, v.tx_hash FROM outgoing_versions v
    ), sends AS (
      SELECT s.*, cut.native_asset_id, cut.as_of,
        CASE s.signing_key->>'_tag' WHEN 'Platform' THEN s.signing_key->>'role' WHEN 'Gas' THEN 'GAS' ELSE 'DEPOSIT' END
          AS from_role,
        (s.included_height IS NOT NULL AND (cut.as_of IS NULL OR s.included_height <= cut.as_of)) AS included,
        (SELECT max(v.network_fee_max) FROM outgoing_versions v WHERE v.send_id = s.id) AS fee_max,
        -- The version that pays: the included one, else the latest (what a block may hold next). When it was signed
        -- with another fee payer, its signed bytes name that payer's address (the audit holds no key) and its
        -- parameters the payer's key, for the role.
        payer.raw AS fee_payer_raw,
        CASE payer.parameters->'feePayer'->>'_tag' WHEN 'Platform' THEN payer.parameters->'feePayer'->>'role'
          WHEN 'Gas' THEN 'GAS' WHEN 'Wallet' THEN 'DEPOSIT' END AS fee_payer_role,
        replace(lower(s.purpose), '_', '-') || ' ' || s.owner_id AS owner_name
      FROM outgoing_sends s JOIN cut ON cut.network_key = s.network_key
      LEFT JOIN LATERAL (
        SELECT v.raw, v.parameters FROM outgoing_versions v
        WHERE v.send_id = s.id AND v.parameters ? 'feePayer'
          AND (s.included_tx_hash IS NULL OR v.tx_hash = s.included_tx_hash)
        ORDER BY v.version DESC LIMIT 1
      ) payer ON true
    )
    -- Deposits on the chain at the cut: in a block the watcher processed and not dropped or reversed.
    SELECT t.network_key, t.destination_address AS address, t.asset_id, 'DEPOSIT' AS role,
      CASE WHEN t.block_height IS NOT NULL THEN t.amount ELSE 0 END::text AS settled, '0' AS less,
      CASE WHEN t.block_height IS NULL THEN t.amount ELSE 0 END::text AS more,
      CASE WHEN t.block_height IS NULL THEN 'deposit ' || t.id || ' (awaiting a block)' END AS in_flight,
      NULL AS fee_payer_raw
    FROM transactions t JOIN cut ON cut.network_key = t.network_key
    WHERE t.kind = 'DEPOSIT' AND t.status IN ('CONFIRMING', 'COMPLETED')
      AND (t.block_height IS NULL OR cut.as_of IS NULL OR t.block_height <= cut.as_of)
    UNION ALL
    -- Money put on operating addresses from outside (the service's own sweeps are counted as sends below).
    SELECT r.network_key, r.to_address, r.asset_id, r.role, r.amount::text, '0', '0', NULL, NULL
    FROM platform_receipts r JOIN cut ON cut.network_key = r.network_key
    WHERE (cut.as_of IS NULL OR r.block_height <= cut.as_of)
      AND NOT EXISTS (SELECT 1 FROM own WHERE own.network_key = r.network_key AND own.tx_hash = r.tx_hash)
    UNION ALL
    -- What an operating address held at the block the watcher started from (OpeningBalances.ts, sql/0036).
    SELECT o.network_key, o.address, o.asset_id, o.role, o.amount::text, '0', '0', NULL, NULL
    FROM opening_balances o JOIN cut ON cut.network_key = o.network_key
    WHERE o.txid IS NULL AND (cut.as_of IS NULL OR o.height <= cut.as_of)
    UNION ALL
    -- Operating receipts the service sent itself still name the address's role (a SWEEP address never sends).
    SELECT r.network_key, r.to_address, r.asset_id, r.role, '0', '0', '0', NULL, NULL
    FROM platform_receipts r JOIN cut ON cut.network_key = r.network_key
    WHERE EXISTS (SELECT 1 FROM own WHERE own.network_key = r.network_key AND own.tx_hash = r.tx_hash)
    UNION ALL
    -- What a send took from its address: the amount when it succeeded, in its asset.
    SELECT network_key, from_address, asset_id, from_role,
      CASE WHEN included AND state = 'CONFIRMED' THEN -amount ELSE 0 END::text,
      CASE WHEN state = 'PENDING' THEN amount ELSE 0 END::text, '0',
      CASE WHEN state = 'PENDING' THEN owner_name || ' (send PENDING)' END, NULL
    FROM sends WHERE amount > 0
    UNION ALL
    -- ... and its costs, in the native coin, whatever the outcome once included: the network fee and what it paid
    -- into accounts it created (account_cost: SOL rent of a new token account, which meta.fee leaves out), both
    -- recorded by OutgoingSends.markFinal and both paid by the fee payer: the sending address, or the payer the
    -- included version was signed with (a SOL token sweep's GAS wallet; fee_payer_raw, below). One rule with
    -- createdTokenAccountsRent (SolWithdrawals.ts), which counts rent only the fee payer can have paid. In flight,
    -- fee_max covers both: a SOL version's signed networkFee includes the rent of the account it would create.
    SELECT network_key, from_address, native_asset_id, coalesce(fee_payer_role, from_role),
      CASE WHEN included THEN -(coalesce(network_fee, 0) + coalesce(account_cost, 0)) ELSE 0 END::text,
      CASE WHEN state IN ('PENDING', 'FILLING') THEN coalesce(fee_max, 0) ELSE 0 END::text, '0',
      CASE WHEN state IN ('PENDING', 'FILLING') THEN owner_name || ' (send ' || state || ')' END,
      fee_payer_raw
    FROM sends
    UNION ALL
    -- What a sweep or top-up gave its destination.
    SELECT network_key, to_address, asset_id, CASE WHEN purpose = 'TOP_UP' THEN 'DEPOSIT' ELSE 'OPERATING' END,
      CASE WHEN included AND state = 'CONFIRMED' THEN amount ELSE 0 END::text, '0',
      CASE WHEN state = 'PENDING' THEN amount ELSE 0 END::text,
      CASE WHEN state = 'PENDING' THEN owner_name || ' (send PENDING, incoming)' END, NULL
    FROM sends WHERE purpose IN ('SWEEP', 'TOP_UP')`.pipe(Effect.flatMap(movementRows))

/** The books of `networkKeys` (see the module comment), in one REPEATABLE READ, READ ONLY snapshot. */
export const readChainBooks = (networkKeys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (networkKeys.length === 0) return { networks: [], lines: [] } satisfies ChainBooksSnapshot
    return yield* sql.withTransaction(Effect.gen(function*() {
      const assetRows = yield* sql`
        SELECT n.network_key, n.chain_family, n.native_asset_id, c.height::text AS as_of, b.hash AS as_of_hash,
          a.asset_id, a.contract
        FROM networks n
        JOIN assets a ON a.network_key = n.network_key
        LEFT JOIN chain_cursors c ON c.network_key = n.network_key
        LEFT JOIN chain_blocks b ON b.network_key = c.network_key AND b.height = c.height
        WHERE n.network_key IN ${sql.in(networkKeys)}
        ORDER BY n.network_key, a.asset_id`.pipe(Effect.flatMap(networkRows))
      const networks = new Map<string, BookNetwork & { assets: Map<string, { contract: string | undefined }> }>()
      for (const row of assetRows) {
        const network = networks.get(row.network_key) ?? {
          networkKey: row.network_key,
          family: row.chain_family,
          nativeAssetId: row.native_asset_id,
          asOf: row.as_of ?? undefined,
          asOfHash: row.as_of_hash ?? undefined,
          assets: new Map()
        }
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
        outputs?: OutputBooks
      }>()
      for (const books of yield* readOutputBooks(sql, networkKeys)) {
        const { held, mayAppear } = books.outputs
        lines.set(`${books.networkKey}\u0000${books.address}\u0000${books.assetId}`, {
          networkKey: books.networkKey,
          assetId: books.assetId,
          address: books.address,
          roles: new Set([books.role]),
          expected: held.reduce((sum, output) => sum + output.value, 0n),
          mayHoldLess: held.reduce((sum, output) => sum + (output.spending === undefined ? 0n : output.value), 0n),
          mayHoldMore: [...mayAppear.values()].reduce((sum, output) => sum + output.value, 0n),
          inFlight: [...new Set([
            ...held.flatMap((output) => output.spending === undefined ? [] : [output.spending]),
            ...[...mayAppear.values()].map((output) => output.name)
          ])],
          outputs: books.outputs
        })
      }
      for (const movement of yield* movements(sql, networkKeys)) {
        const row = movement.fee_payer_raw === null
          ? movement
          : { ...movement, address: yield* solFeePayer(movement.fee_payer_raw) }
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
          inFlight: line.inFlight.toSorted(),
          ...(line.outputs === undefined ? {} : { outputs: line.outputs })
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
  /** BTC: the outputs that are not explained, by outpoint and value (ChainOutputs.ts). */
  readonly unmatched?: { readonly missing: ReadonlyArray<string>; readonly unexpected: ReadonlyArray<string> } | undefined
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

/**
 * A BTC line's verdict, output by output: every output the books hold is on the node and every output of the
 * address on the node is in the books, apart from those a movement in flight explains (named); a sum that happens
 * to agree over different outputs is unexplained all the same.
 */
export const compareLineOutputs = (line: BookLine, node: ReadonlyArray<NodeOutput>): ComparedLine => {
  const found = compareOutputs(line.outputs ?? { held: [], mayAppear: new Map(), pendingTransactions: new Map() }, node)
  const unexplained = found.missing.length > 0 || found.unexpected.length > 0
  return {
    ...line,
    inFlight: found.explained,
    onChain: found.onChain,
    difference: found.onChain - line.expected,
    verdict: unexplained ? "UNEXPLAINED" : found.explained.length > 0 ? "in flight" : "ok",
    unmatched: unexplained ? { missing: found.missing, unexpected: found.unexpected } : undefined
  }
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
    line.verdict === "in flight"
      ? `in flight (explained: ${line.inFlight.join(", ")})`
      : line.verdict === "UNEXPLAINED" && line.unmatched !== undefined
      ? `UNEXPLAINED (${[
        ...(line.unmatched.missing.length > 0 ? [`outputs not on the node: ${line.unmatched.missing.join(", ")}`] : []),
        ...(line.unmatched.unexpected.length > 0 ? [`outputs not in the books: ${line.unmatched.unexpected.join(", ")}`] : [])
      ].join("; ")})`
      : line.verdict
  ].join("  ")

/** How a network's node was compared: balances at the books' block (EVM), or at a quiet head (balances or outputs). */
export type ComparedAt = "block" | "head" | "outputs"

export interface ChainAuditReport {
  /** Per network: the block compared at, how, and how many lines. */
  readonly networks: ReadonlyArray<{
    readonly networkKey: string
    readonly block: bigint
    readonly at: ComparedAt
    readonly lines: number
  }>
  readonly lines: ReadonlyArray<ComparedLine>
  readonly ok: boolean
}

type Failure = { readonly message: string }

/** A node's head, with its hash where the reader knows it. */
export interface HeadBlock {
  readonly height: bigint
  readonly hash: string | undefined
}

/**
 * What a network's node can say about the books' addresses (ChainBalances.ts, HeadBalances.ts; anything in a test):
 *
 * - `block` (EVM): balances at any recent block, so the books' own block is asked;
 * - `head` (TRON, SOL): balances now only, so the comparison waits for a quiet head (see `auditChain`);
 * - `outputs` (BTC): the unspent outputs of a set of addresses now (`scantxoutset`), compared one for one.
 */
export type BalanceReader =
  | {
    readonly at: "block"
    readonly head: Effect.Effect<bigint, Failure>
    readonly balance: (address: string, contract: string | undefined, block: bigint) => Effect.Effect<bigint, Failure>
  }
  | {
    readonly at: "head"
    readonly head: Effect.Effect<HeadBlock, Failure>
    readonly balance: (address: string, assetId: string) => Effect.Effect<bigint, Failure>
  }
  | {
    readonly at: "outputs"
    readonly head: Effect.Effect<HeadBlock, Failure>
    /** The unspent outputs of `addresses` per address, and the block the node's UTXO set stood at. */
    readonly unspent: (addresses: ReadonlyArray<string>) => Effect.Effect<{
      readonly block: HeadBlock
      readonly outputs: ReadonlyMap<string, ReadonlyArray<NodeOutput>>
    }, Failure>
  }

/** The chain audit could not run: a node that cannot answer, or stands below the books' block. */
export class ChainAuditError extends Data.TaggedError("ChainAuditError")<{ readonly message: string }> {}

/** Nodes asked at once per network: enough to be quick over many addresses, few enough for a provider's limits. */
const balanceCallsConcurrent = 8

export interface QuietHeadOptions {
  /** Comparisons tried at a head-only node before giving up (exit 2). */
  readonly attempts: number
  /** Pause between two attempts: the watcher catches up, a block in the making is sealed. */
  readonly spacing: Duration.Input
}

/** About half a minute: a watcher scanning every few seconds reaches the head, a 2-3 s block time leaves gaps. */
export const quietHeadDefaults: QuietHeadOptions = { attempts: 15, spacing: "2 seconds" }

const belowBooks = (networkKey: string, head: bigint, asOf: bigint) =>
  new ChainAuditError({
    message: `${networkKey}: the node's head ${head} is below block ${asOf} the books stand at ` +
      "(a node behind the one the watcher follows, or another chain)"
  })

/**
 * Compares the books of each network in `readers` with its node.
 *
 * An EVM node is asked at the block the books stand at (the watcher's cursor: every deposit and receipt up to it is
 * recorded; a network never watched: the node's head). TRON, SOL and BTC nodes answer for their head only, so there
 * the books and the node must stand at the same block: the head is read, then the books (their cursor must be that
 * head, with the hash the node names), then the balances or outputs, then the head again; if the watcher was behind
 * or a block came meanwhile, the whole comparison is made again a little later, up to `quiet.attempts` times (then it
 * cannot run: exit 2, saying why). What moves between blocks (a send in the mempool) does not move a head's
 * balances; a send in a block the books know of but not yet final is in flight, named, as on EVM.
 */
export const auditChain = (readers: ReadonlyMap<string, BalanceReader>, quiet: QuietHeadOptions = quietHeadDefaults) =>
  Effect.gen(function*() {
    const networks: Array<ChainAuditReport["networks"][number]> = []
    const compared: Array<ComparedLine> = []
    for (const networkKey of [...readers.keys()].sort()) {
      const reader = readers.get(networkKey)!
      const fail = (error: Failure) => new ChainAuditError({ message: `${networkKey}: ${error.message}` })
      if (reader.at === "block") {
        const books = yield* readChainBooks([networkKey])
        const network = books.networks[0]
        if (network === undefined) continue
        const head = yield* Effect.mapError(reader.head, fail)
        if (network.asOf !== undefined && network.asOf > head) return yield* belowBooks(networkKey, head, network.asOf)
        const block = network.asOf ?? head
        const found = yield* Effect.forEach(books.lines, (line) => {
          const asset = network.assets.get(line.assetId)
          return reader.balance(line.address, asset?.contract, block).pipe(
            Effect.mapError(fail),
            Effect.map((onChain) => compareLine(line, onChain))
          )
        }, { concurrency: balanceCallsConcurrent })
        compared.push(...found)
        networks.push({ networkKey, block, at: "block", lines: found.length })
        continue
      }
      let notQuiet = ""
      let done = false
      for (let attempt = 1; attempt <= quiet.attempts && !done; attempt++) {
        if (attempt > 1) yield* Effect.sleep(quiet.spacing)
        const before = yield* Effect.mapError(reader.head, fail)
        const books = yield* readChainBooks([networkKey])
        const network = books.networks[0]
        if (network === undefined) {
          done = true
          break
        }
        if (network.asOf !== undefined && network.asOf > before.height) {
          return yield* belowBooks(networkKey, before.height, network.asOf)
        }
        if (network.asOf !== undefined && network.asOf < before.height) {
          notQuiet = `the watcher's cursor is at block ${network.asOf}, the node's head at ${before.height}`
          continue
        }
        if (network.asOfHash !== undefined && before.hash !== undefined && network.asOfHash !== before.hash) {
          notQuiet = `block ${before.height} is ${before.hash} on the node and ${network.asOfHash} in the books ` +
            "(a reorganization the watcher has not followed yet)"
          continue
        }
        let found: ReadonlyArray<ComparedLine>
        if (reader.at === "head") {
          found = yield* Effect.forEach(books.lines, (line) =>
            reader.balance(line.address, line.assetId).pipe(
              Effect.mapError(fail),
              Effect.map((onChain) => compareLine(line, onChain))
            ), { concurrency: balanceCallsConcurrent })
        } else {
          const addresses = [...new Set(books.lines.map((line) => line.address))]
          const unspent = yield* Effect.mapError(reader.unspent(addresses), fail)
          if (unspent.block.height !== before.height || unspent.block.hash !== before.hash) {
            notQuiet = `the node's outputs stood at block ${unspent.block.height}, its head at ${before.height}`
            continue
          }
          found = books.lines.map((line) => compareLineOutputs(line, unspent.outputs.get(line.address) ?? []))
        }
        const after = yield* Effect.mapError(reader.head, fail)
        if (after.height !== before.height || after.hash !== before.hash) {
          notQuiet = `the head moved from block ${before.height} to ${after.height} while the balances were read`
          continue
        }
        compared.push(...found)
        networks.push({ networkKey, block: before.height, at: reader.at, lines: found.length })
        done = true
      }
      if (!done) {
        return yield* new ChainAuditError({
          message: `${networkKey}: its node answers for the head only, and the head was not quiet in ` +
            `${quiet.attempts} attempts (${notQuiet}); is the watcher running?`
        })
      }
    }
    return {
      networks,
      lines: compared,
      ok: compared.every((line) => line.verdict !== "UNEXPLAINED")
    } satisfies ChainAuditReport
  })

const comparedHow: Record<ComparedAt, string> = {
  block: "",
  head: " (the node's head, balances now)",
  outputs: " (the node's head, unspent outputs one for one)"
}

/** The report as the CLI prints it: a head per network, every line, then a closing line. */
export const chainReportLines = (report: ChainAuditReport): ReadonlyArray<string> => {
  const unexplained = report.lines.filter((line) => line.verdict === "UNEXPLAINED")
  const inFlight = report.lines.filter((line) => line.verdict === "in flight").length
  return [
    ...report.networks.flatMap((network) => [
      `chain books of ${network.networkKey} at block ${network.block}${comparedHow[network.at]}: ${network.lines} address/asset lines`,
      ...report.lines.filter((line) => line.networkKey === network.networkKey).map(describeComparedLine)
    ]),
    unexplained.length === 0
      ? `chain ok: ${report.lines.length} lines, ${inFlight} in flight`
      : `chain discrepancy: ${unexplained.length} unexplained difference${unexplained.length === 1 ? "" : "s"}, ` +
        `first ${describeComparedLine(unexplained[0]!)}`
  ]
}
