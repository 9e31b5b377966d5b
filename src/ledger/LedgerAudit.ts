/**
 * The ledger audit (`npm run ledger:check`, docs/ledger.md "Audit"): reads the whole journal in one consistent
 * snapshot and checks what the database does not enforce by itself, or enforces only row by row at write time:
 *
 *   1. every entry sums to zero per asset, has two or more postings, and posts only to its tenant's accounts;
 *   2. every account's balance equals the sum of its postings, and only a deposit reversal left one overdrawn;
 *   3. per tenant and asset, the accounts sum to zero (the books close);
 *   4. no deposit is credited twice, and no on-chain output has two deposit records;
 *   5. every wallet's frozen amount equals the amount + fee of its open withdrawals and transfers awaiting approval;
 *   6. every entry books a transaction of its tenant, and every transaction has exactly the entries its kind and
 *      status call for, each with the postings docs/ledger.md gives (ExpectedEntries.ts);
 *   7. the daily limit's running totals equal the movements they count;
 *   8. every network fee a send paid (what the chain books take from its address) is in the journal once: on the
 *      send (SEND_NETWORK_FEE) or, for a withdrawal's payload, as the withdrawal's NETWORK_FEE of the same amount.
 *
 * A function over `SqlClient`, so the CLI (ledger-check.ts), the tests and the benchmarks call the same code. It
 * only reads: one `REPEATABLE READ, READ ONLY` transaction, safe beside a running service. It must be called
 * outside any transaction of the caller's (a nested call would get a savepoint, not a snapshot: refused).
 *
 * Over 300 lines on purpose: six checks that must run in the one snapshot opened here, each a query and its
 * decoder; split across modules they would have to share the transaction by convention instead of by construction.
 */
import { Data, Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import {
  type BookedTransaction,
  describePosting,
  expectedEntries,
  type ExpectedPosting,
  expectedSendFee
} from "./ExpectedEntries.ts"
import { type AccountKind, type Bucket, EntryKind } from "./Ledger.ts"

export const CheckName = [
  "entriesBalance",
  "balancesMatchJournal",
  "booksClose",
  "depositsCreditedOnce",
  "frozenMatchesOpen",
  "transactionsBooked",
  "dailyLimitTotals",
  "sendFeesBooked"
] as const
export type CheckName = (typeof CheckName)[number]

export interface Discrepancy {
  readonly check: CheckName
  /** What it is about: `entry <id>`, `account <id>`, `transaction <id>`, `tenant <id> asset <id>`, ... */
  readonly subject: string
  readonly message: string
}

export interface CheckResult {
  readonly check: CheckName
  /** What was checked, for the report a person reads. */
  readonly description: string
  /** How many things were looked at, in `unit`. */
  readonly examined: number
  readonly unit: string
  /** At most `discrepanciesPerCheckMax` of them. */
  readonly discrepancies: ReadonlyArray<Discrepancy>
  /** More discrepancies were found than are listed. */
  readonly truncated: boolean
}

export interface LedgerAuditReport {
  readonly ok: boolean
  readonly accounts: number
  readonly entries: number
  readonly postings: number
  readonly transactions: number
  readonly checks: ReadonlyArray<CheckResult>
  /** The first discrepancy of the first check that found one; undefined when `ok`. */
  readonly firstDiscrepancy: Discrepancy | undefined
}

/** The audit could not run (database unreachable, schema missing, called inside a transaction). */
export class LedgerAuditError extends Data.TaggedError("LedgerAuditError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Discrepancies listed per check: a broken ledger has one cause far more often than thousands. */
export const discrepanciesPerCheckMax = 100
/** Transactions compared with their entries per query. */
export const transactionsPerPageMax = 1_000

/** The closing line of the CLI: `ledger ok: N accounts, M entries`, or the first discrepancy. */
export const summaryLine = (report: LedgerAuditReport): string =>
  report.firstDiscrepancy === undefined
    ? `ledger ok: ${report.accounts} accounts, ${report.entries} entries`
    : `ledger discrepancy (${report.firstDiscrepancy.check}): ${report.firstDiscrepancy.message}`

/** Discrepancies printed per check by `reportLines`; the report itself holds up to `discrepanciesPerCheckMax`. */
export const printedPerCheckMax = 20

const checkLines = (check: CheckResult): ReadonlyArray<string> => {
  const found = check.discrepancies.length
  const head = `${found === 0 ? "ok  " : "FAIL"} ${check.check}: ${check.examined} ${check.unit}; ${check.description}`
  if (found === 0) return [head]
  const count = `${found}${check.truncated ? "+" : ""} discrepanc${found === 1 && !check.truncated ? "y" : "ies"}`
  return [
    `${head}: ${count}`,
    ...check.discrepancies.slice(0, printedPerCheckMax).map((discrepancy) => `       ${discrepancy.message}`),
    ...(found > printedPerCheckMax ? [`       ... ${found - printedPerCheckMax} more`] : [])
  ]
}

/** The report as the CLI prints it (and a benchmark may): what was read, each check, then `summaryLine`. */
export const reportLines = (location: string, report: LedgerAuditReport): ReadonlyArray<string> => [
  `ledger audit of ${location}`,
  `one REPEATABLE READ, READ ONLY snapshot: ${report.accounts} accounts, ${report.entries} entries, ` +
  `${report.postings} postings, ${report.transactions} transactions`,
  ...report.checks.flatMap(checkLines),
  summaryLine(report)
]

const openWithdrawalStatuses = ["SUBMITTED", "PENDING_AUTHORIZATION", "QUEUED", "PENDING_SIGNATURE", "CONFIRMING"]

/** The server's own words: a SqlError's message alone says "Query failed". */
const serverMessage = (error: SqlError.SqlError): string => {
  const cause = error.reason.cause as { message?: unknown; code?: unknown } | undefined
  if (typeof cause?.message !== "string") return error.message
  // PostgreSQL's codes are five characters; node's own (ECONNREFUSED, ...) are already in the message.
  return typeof cause.code === "string" && /^[0-9A-Z]{5}$/.test(cause.code)
    ? `${cause.message} (SQLSTATE ${cause.code})`
    : cause.message
}

/** Keeps the first `discrepanciesPerCheckMax` and remembers whether there were more. */
class Findings {
  readonly list: Array<Discrepancy> = []
  truncated = false
  readonly check: CheckName
  constructor(check: CheckName) {
    this.check = check
  }
  add(subject: string, message: string) {
    if (this.list.length < discrepanciesPerCheckMax) this.list.push({ check: this.check, subject, message })
    else this.truncated = true
  }
  result(description: string, examined: number, unit: string): CheckResult {
    return { check: this.check, description, examined, unit, discrepancies: this.list, truncated: this.truncated }
  }
}

// Each query's rows, decoded at this edge (db/RowSchemas.ts) and compiled once: amounts arrive as bigint, and a
// column that changes fails here naming the check's query instead of skewing a comparison.
const accountKinds = ["WALLET", "FEES", "NETWORK_FEES", "CHAIN"] as const satisfies ReadonlyArray<AccountKind>
const buckets = ["AVAILABLE", "FROZEN"] as const satisfies ReadonlyArray<Bucket>

const EntryPostingRow = Schema.Struct({
  entry_id: Text,
  entry_kind: Schema.Literals(EntryKind),
  entry_tenant_id: Text,
  reference_id: Text,
  account_kind: Nullable(Schema.Literals(accountKinds)),
  wallet_id: Nullable(Text),
  asset_id: Nullable(Text),
  bucket: Nullable(Schema.Literals(buckets)),
  amount: Nullable(Numeric)
})
type EntryPostingRow = typeof EntryPostingRow.Type

const TransactionRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  kind: Text,
  status: Text,
  sub_status: Nullable(Text),
  asset_id: Text,
  amount: Numeric,
  fee: Nullable(Numeric),
  network_fee: Nullable(Numeric),
  network_fee_asset_id: Nullable(Text),
  source_wallet_id: Nullable(Text),
  destination_wallet_id: Nullable(Text)
})
type TransactionRow = typeof TransactionRow.Type

const countRow = (query: string) => decodeSingleRow(Schema.Struct({ n: Int4 }), query)
const totalsRow = decodeSingleRow(
  Schema.Struct({ accounts: Int4, entries: Int4, postings: Int4, transactions: Int4 }),
  "LedgerAudit (totals)"
)
const unbalancedRows = decodeRows(
  Schema.Struct({ id: Text, kind: Text, reference_id: Text, asset_id: Text, total: Numeric }),
  "LedgerAudit.entriesBalance (unbalanced)"
)
const thinRows = decodeRows(
  Schema.Struct({ id: Text, kind: Text, reference_id: Text, postings: Int4 }),
  "LedgerAudit.entriesBalance (thin)"
)
const foreignRows = decodeRows(
  Schema.Struct({ id: Text, kind: Text, tenant_id: Text, account_id: Text, account_tenant_id: Text }),
  "LedgerAudit.entriesBalance (foreign)"
)
const driftedRows = decodeRows(
  Schema.Struct({
    id: Text,
    kind: Text,
    wallet_id: Nullable(Text),
    asset_id: Text,
    available: Numeric,
    frozen: Numeric,
    journal_available: Numeric,
    journal_frozen: Numeric
  }),
  "LedgerAudit.balancesMatchJournal (drifted)"
)
const overdrawnRows = decodeRows(
  Schema.Struct({ id: Text, kind: Text, wallet_id: Nullable(Text), asset_id: Text, available: Numeric }),
  "LedgerAudit.balancesMatchJournal (overdrawn)"
)
const pairsRow = countRow("LedgerAudit.booksClose (pairs)")
const openRows = decodeRows(Schema.Struct({ tenant_id: Text, asset_id: Text, total: Numeric }), "LedgerAudit.booksClose")
const creditsRow = countRow("LedgerAudit.depositsCreditedOnce (credits)")
const twiceRows = decodeRows(Schema.Struct({ reference_id: Text, kinds: Text }), "LedgerAudit.depositsCreditedOnce")
const duplicatedRows = decodeRows(
  Schema.Struct({ network_key: Text, tx_hash: Nullable(Text), output_index: Nullable(Int4), ids: Text }),
  "LedgerAudit.depositsCreditedOnce (outputs)"
)
const walletsRow = countRow("LedgerAudit.frozenMatchesOpen (wallets)")
const daysRow = countRow("LedgerAudit.dailyLimitTotals (days)")
const driftedTotalRows = decodeRows(
  Schema.Struct({ user_id: Text, asset_id: Text, day: Text, total: Numeric, counted: Numeric }),
  "LedgerAudit.dailyLimitTotals"
)
const mismatchedRows = decodeRows(
  Schema.Struct({ wallet_id: Text, asset_id: Text, frozen: Numeric, reserved: Numeric, open: Int4 }),
  "LedgerAudit.frozenMatchesOpen"
)
const transactionPage = decodeRows(TransactionRow, "LedgerAudit.transactionsBooked (transactions)")
const entryPostingRows = decodeRows(EntryPostingRow, "LedgerAudit.transactionsBooked (entries)")
const orphanRows = decodeRows(
  Schema.Struct({ id: Text, kind: Text, reference_id: Text }),
  "LedgerAudit.transactionsBooked (orphans)"
)
const sendPage = decodeRows(
  Schema.Struct({
    id: Text,
    purpose: Text,
    state: Text,
    network_fee: Nullable(Numeric),
    account_cost: Nullable(Numeric),
    native_asset_id: Text,
    tenant_id: Nullable(Text),
    withdrawal_status: Nullable(Text),
    withdrawal_network_fee: Nullable(Numeric)
  }),
  "LedgerAudit.sendFeesBooked (sends)"
)
const sendEntryRows = decodeRows(EntryPostingRow, "LedgerAudit.sendFeesBooked (entries)")
const sendOrphanRows = decodeRows(
  Schema.Struct({ id: Text, reference_id: Text }),
  "LedgerAudit.sendFeesBooked (orphans)"
)
const modeRow = decodeFirstRow(Schema.Struct({ isolation: Text, read_only: Text }), "LedgerAudit (transaction mode)")

const bookedTransaction = (row: TransactionRow): BookedTransaction => ({
  id: row.id,
  kind: row.kind,
  status: row.status,
  subStatus: row.sub_status,
  assetId: row.asset_id,
  amount: row.amount,
  fee: row.fee,
  networkFee: row.network_fee,
  networkFeeAssetId: row.network_fee_asset_id,
  sourceWalletId: row.source_wallet_id,
  destinationWalletId: row.destination_wallet_id
})

const sortedPostings = (postings: ReadonlyArray<ExpectedPosting>) => postings.map(describePosting).sort()

/**
 * The differences between what one transaction must have booked and what the journal holds for it. `entries` are
 * the journal's rows for the transaction's id, one per posting (an entry without postings has one row of nulls).
 */
const compareBookings = (
  transactionRow: TransactionRow,
  rows: ReadonlyArray<EntryPostingRow>
): ReadonlyArray<string> => {
  const transaction = bookedTransaction(transactionRow)
  const name = `${transaction.kind} ${transaction.id} (${transaction.status}` +
    `${transaction.subStatus === null ? "" : `/${transaction.subStatus}`})`
  const problems: Array<string> = []
  const booked = new Map<EntryKind, { readonly entryIds: Set<string>; readonly postings: Array<ExpectedPosting> }>()
  for (const row of rows) {
    if (row.entry_tenant_id !== transactionRow.tenant_id) {
      problems.push(`${name}: entry ${row.entry_id} (${row.entry_kind}) is booked for tenant ${row.entry_tenant_id}, ` +
        `the transaction belongs to tenant ${transactionRow.tenant_id}`)
    }
    const entry = booked.get(row.entry_kind) ?? { entryIds: new Set<string>(), postings: [] }
    booked.set(row.entry_kind, entry)
    entry.entryIds.add(row.entry_id)
    if (row.account_kind !== null && row.asset_id !== null && row.bucket !== null && row.amount !== null) {
      entry.postings.push({
        accountKind: row.account_kind,
        walletId: row.wallet_id,
        assetId: row.asset_id,
        bucket: row.bucket,
        amount: row.amount
      })
    }
  }
  const expectation = expectedEntries(transaction, new Set(booked.keys()))
  if (expectation._tag === "NoRule") return [...problems, `${name}: ${expectation.reason}`]
  for (const [kind, postings] of expectation.entries) {
    const found = booked.get(kind)
    if (found === undefined) {
      problems.push(`${name} lacks its ${kind} entry (${sortedPostings(postings).join(", ")})`)
      continue
    }
    if (found.entryIds.size > 1) problems.push(`${name} has ${found.entryIds.size} ${kind} entries, expected one`)
    const want = sortedPostings(postings)
    const have = sortedPostings(found.postings)
    if (want.join("\n") !== have.join("\n")) {
      problems.push(`${name}: ${kind} posts [${have.join(", ")}], expected [${want.join(", ")}]`)
    }
  }
  for (const [kind, found] of booked) {
    if (!expectation.entries.has(kind)) {
      problems.push(`${name} has an unexpected ${kind} entry ${[...found.entryIds].join(", ")} ` +
        `(${sortedPostings(found.postings).join(", ")})`)
    }
  }
  return problems
}

/** The checks, each a few queries; run inside the snapshot transaction. */
const runChecks = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const limit = discrepanciesPerCheckMax + 1
  const checks: Array<CheckResult> = []

  const totals = yield* sql`
    SELECT (SELECT count(*) FROM ledger_accounts)::int AS accounts, (SELECT count(*) FROM ledger_entries)::int AS entries,
      (SELECT count(*) FROM ledger_postings)::int AS postings, (SELECT count(*) FROM transactions)::int AS transactions`
    .pipe(Effect.flatMap(totalsRow))

  // 1. Entries.
  {
    const findings = new Findings("entriesBalance")
    const unbalanced = yield* sql`
      SELECT e.id, e.kind, e.reference_id, a.asset_id, sum(p.amount)::text AS total
      FROM ledger_postings p JOIN ledger_entries e ON e.id = p.entry_id JOIN ledger_accounts a ON a.id = p.account_id
      GROUP BY e.id, e.kind, e.reference_id, a.asset_id
      HAVING sum(p.amount) <> 0
      ORDER BY e.id, a.asset_id LIMIT ${limit}`.pipe(Effect.flatMap(unbalancedRows))
    for (const row of unbalanced) {
      findings.add(`entry ${row.id}`, `entry ${row.id} (${row.kind} of ${row.reference_id}) does not balance: ` +
        `${row.asset_id} sums to ${row.total}`)
    }
    const thin = yield* sql`
      SELECT e.id, e.kind, e.reference_id, count(p.entry_id)::int AS postings
      FROM ledger_entries e LEFT JOIN ledger_postings p ON p.entry_id = e.id
      GROUP BY e.id, e.kind, e.reference_id
      HAVING count(p.entry_id) < 2
      ORDER BY e.id LIMIT ${limit}`.pipe(Effect.flatMap(thinRows))
    for (const row of thin) {
      findings.add(`entry ${row.id}`, `entry ${row.id} (${row.kind} of ${row.reference_id}) has ${row.postings} ` +
        `posting${row.postings === 1 ? "" : "s"}, at least two are needed`)
    }
    const foreign = yield* sql`
      SELECT e.id, e.kind, e.tenant_id, a.id::text AS account_id, a.tenant_id AS account_tenant_id
      FROM ledger_postings p JOIN ledger_entries e ON e.id = p.entry_id JOIN ledger_accounts a ON a.id = p.account_id
      WHERE a.tenant_id <> e.tenant_id
      ORDER BY e.id LIMIT ${limit}`.pipe(Effect.flatMap(foreignRows))
    for (const row of foreign) {
      findings.add(`entry ${row.id}`, `entry ${row.id} (${row.kind}) of tenant ${row.tenant_id} posts to account ` +
        `${row.account_id} of tenant ${row.account_tenant_id}`)
    }
    checks.push(findings.result(
      "every entry sums to zero per asset, has two or more postings, and posts only to its tenant's accounts",
      totals.entries,
      "entries"
    ))
  }

  // 2. Balances, recomputed from the journal.
  {
    const findings = new Findings("balancesMatchJournal")
    const drifted = yield* sql`
      SELECT a.id::text AS id, a.kind, a.wallet_id, a.asset_id, a.available::text AS available, a.frozen::text AS frozen,
        coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'AVAILABLE'), 0)::text AS journal_available,
        coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'FROZEN'), 0)::text AS journal_frozen
      FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.account_id = a.id
      GROUP BY a.id
      HAVING a.available <> coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'AVAILABLE'), 0)
        OR a.frozen <> coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'FROZEN'), 0)
      ORDER BY a.id LIMIT ${limit}`.pipe(Effect.flatMap(driftedRows))
    for (const row of drifted) {
      const owner = row.wallet_id === null ? row.kind : `${row.kind} ${row.wallet_id}`
      findings.add(`account ${row.id}`, `account ${row.id} (${owner}, ${row.asset_id}) holds available ` +
        `${row.available}, frozen ${row.frozen}; its postings sum to available ${row.journal_available}, ` +
        `frozen ${row.journal_frozen}`)
    }
    // sql/0003: a debit may overdraw a wallet or FEES account only as a deposit reversal (decisions.md, Deposits).
    const overdrawn = yield* sql`
      SELECT a.id::text AS id, a.kind, a.wallet_id, a.asset_id, a.available::text AS available
      FROM ledger_accounts a
      WHERE a.kind IN ('WALLET', 'FEES') AND a.available < 0 AND NOT EXISTS (
        SELECT 1 FROM ledger_postings p JOIN ledger_entries e ON e.id = p.entry_id
        WHERE p.account_id = a.id AND e.kind = 'DEPOSIT_REVERSAL')
      ORDER BY a.id LIMIT ${limit}`.pipe(Effect.flatMap(overdrawnRows))
    for (const row of overdrawn) {
      const owner = row.wallet_id === null ? row.kind : `${row.kind} ${row.wallet_id}`
      findings.add(`account ${row.id}`, `account ${row.id} (${owner}, ${row.asset_id}) is overdrawn ` +
        `(available ${row.available}) without a deposit reversal`)
    }
    checks.push(findings.result(
      "every balance equals the sum of its postings; only a deposit reversal leaves a wallet or FEES account negative",
      totals.accounts,
      "accounts"
    ))
  }

  // 3. The books close: what users and fee accounts hold is what the CHAIN account gave out.
  {
    const findings = new Findings("booksClose")
    const pairs = yield* sql`
      SELECT count(*)::int AS n FROM (SELECT DISTINCT tenant_id, asset_id FROM ledger_accounts) pairs`
      .pipe(Effect.flatMap(pairsRow))
    const open = yield* sql`
      SELECT tenant_id, asset_id, sum(available + frozen)::text AS total FROM ledger_accounts
      GROUP BY tenant_id, asset_id
      HAVING sum(available + frozen) <> 0
      ORDER BY tenant_id, asset_id LIMIT ${limit}`.pipe(Effect.flatMap(openRows))
    for (const row of open) {
      findings.add(`tenant ${row.tenant_id} asset ${row.asset_id}`,
        `tenant ${row.tenant_id}: the ${row.asset_id} accounts sum to ${row.total}, not 0`)
    }
    checks.push(findings.result("per tenant and asset, all accounts sum to zero", pairs.n, "tenant assets"))
  }

  // 4. Deposits credited once.
  {
    const findings = new Findings("depositsCreditedOnce")
    const credits = yield* sql`
      SELECT count(*)::int AS n FROM ledger_entries WHERE kind IN ('DEPOSIT_CREDIT', 'MANUAL_DEPOSIT_CREDIT')`
      .pipe(Effect.flatMap(creditsRow))
    const twice = yield* sql`
      SELECT reference_id, string_agg(kind || ' ' || id, ', ' ORDER BY id) AS kinds FROM ledger_entries
      WHERE kind IN ('DEPOSIT_CREDIT', 'MANUAL_DEPOSIT_CREDIT')
      GROUP BY reference_id
      HAVING count(*) > 1
      ORDER BY reference_id LIMIT ${limit}`.pipe(Effect.flatMap(twiceRows))
    for (const row of twice) {
      findings.add(`transaction ${row.reference_id}`, `deposit ${row.reference_id} is credited more than once: ${row.kinds}`)
    }
    // decisions.md: seeing a transfer again never makes a second record (the unique index holds it today).
    const duplicated = yield* sql`
      SELECT network_key, tx_hash, output_index, string_agg(id::text, ', ' ORDER BY id) AS ids FROM transactions
      WHERE kind = 'DEPOSIT'
      GROUP BY network_key, tx_hash, output_index
      HAVING count(*) > 1
      ORDER BY network_key, tx_hash, output_index LIMIT ${limit}`.pipe(Effect.flatMap(duplicatedRows))
    for (const row of duplicated) {
      findings.add(`output ${row.network_key} ${row.tx_hash}:${row.output_index}`,
        `${row.network_key} output ${row.tx_hash}:${row.output_index} has several deposit records: ${row.ids}`)
    }
    checks.push(findings.result(
      "no deposit has two credits (automatic or manual), no on-chain output two deposit records",
      credits.n,
      "credits"
    ))
  }

  // 5. Frozen funds: exactly what open withdrawals and transfers awaiting approval reserved.
  {
    const findings = new Findings("frozenMatchesOpen")
    const wallets = yield* sql`SELECT count(*)::int AS n FROM ledger_accounts WHERE kind = 'WALLET'`.pipe(
      Effect.flatMap(walletsRow)
    )
    const mismatched = yield* sql`
      WITH reserved AS (
        SELECT source_wallet_id AS wallet_id, asset_id, sum(amount + coalesce(fee, 0)) AS amount, count(*)::int AS open
        FROM transactions
        WHERE source_wallet_id IS NOT NULL AND (
          (kind = 'WITHDRAWAL' AND status IN ${sql.in(openWithdrawalStatuses)})
          OR (kind = 'INTERNAL_TRANSFER' AND status = 'PENDING_AUTHORIZATION'))
        GROUP BY source_wallet_id, asset_id
      ), held AS (
        SELECT wallet_id, asset_id, frozen FROM ledger_accounts WHERE kind = 'WALLET' AND frozen <> 0
      )
      SELECT coalesce(h.wallet_id, r.wallet_id) AS wallet_id, coalesce(h.asset_id, r.asset_id) AS asset_id,
        coalesce(h.frozen, 0)::text AS frozen, coalesce(r.amount, 0)::text AS reserved, coalesce(r.open, 0) AS open
      FROM held h FULL JOIN reserved r ON r.wallet_id = h.wallet_id AND r.asset_id = h.asset_id
      WHERE coalesce(h.frozen, 0) <> coalesce(r.amount, 0)
      ORDER BY 1, 2 LIMIT ${limit}`.pipe(Effect.flatMap(mismatchedRows))
    for (const row of mismatched) {
      findings.add(`wallet ${row.wallet_id} asset ${row.asset_id}`, `wallet ${row.wallet_id} has ${row.frozen} ` +
        `${row.asset_id} frozen; its ${row.open} open withdrawal${row.open === 1 ? "" : "s"} and pending ` +
        `transfers reserve ${row.reserved}`)
    }
    checks.push(findings.result(
      "every wallet's frozen amount equals amount + fee of its open withdrawals and transfers awaiting approval",
      wallets.n,
      "wallet accounts"
    ))
  }

  // 6. Each transaction against its entries, a page at a time; then entries that book no transaction.
  {
    const findings = new Findings("transactionsBooked")
    let after = "00000000-0000-0000-0000-000000000000"
    for (;;) {
      const page = yield* sql`
        SELECT id, tenant_id, kind, status, sub_status, asset_id, amount::text AS amount, fee::text AS fee,
          network_fee::text AS network_fee, network_fee_asset_id, source_wallet_id, destination_wallet_id
        FROM transactions WHERE id > ${after} ORDER BY id LIMIT ${transactionsPerPageMax}`.pipe(Effect.flatMap(transactionPage))
      if (page.length === 0) break
      const first = page[0]!.id
      const last = page[page.length - 1]!.id
      // Ids in between that are no transaction (entries booking nothing) are read too, and ignored here.
      const rows = yield* sql`
        SELECT e.id AS entry_id, e.kind AS entry_kind, e.tenant_id AS entry_tenant_id, e.reference_id,
          a.kind AS account_kind, a.wallet_id, a.asset_id, p.bucket, p.amount::text AS amount
        FROM ledger_entries e
        LEFT JOIN ledger_postings p ON p.entry_id = e.id
        LEFT JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.reference_id BETWEEN ${first} AND ${last}`.pipe(Effect.flatMap(entryPostingRows))
      const byReference = new Map<string, Array<EntryPostingRow>>()
      for (const row of rows) {
        const list = byReference.get(row.reference_id) ?? []
        list.push(row)
        byReference.set(row.reference_id, list)
      }
      for (const transaction of page) {
        for (const problem of compareBookings(transaction, byReference.get(transaction.id) ?? [])) {
          findings.add(`transaction ${transaction.id}`, problem)
        }
      }
      after = last
      if (page.length < transactionsPerPageMax) break
    }
    // A send's own fee entry books the send, not a transaction: check 8.
    const orphans = yield* sql`
      SELECT e.id, e.kind, e.reference_id FROM ledger_entries e
      WHERE e.kind <> 'SEND_NETWORK_FEE' AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.id = e.reference_id)
      ORDER BY e.id LIMIT ${limit}`.pipe(Effect.flatMap(orphanRows))
    for (const row of orphans) {
      findings.add(`entry ${row.id}`, `entry ${row.id} (${row.kind}) books ${row.reference_id}, which is no transaction`)
    }
    checks.push(findings.result(
      "every transaction has exactly the entries and postings its kind and status call for; every entry books one",
      totals.transactions,
      "transactions"
    ))
  }

  // 7. The daily limit's running totals (sql/0021_payer_hold_and_daily_totals.sql) against the movements they count.
  {
    const findings = new Findings("dailyLimitTotals")
    const days = yield* sql`SELECT count(*)::int AS n FROM daily_spend`.pipe(Effect.flatMap(daysRow))
    const drifted = yield* sql`
      WITH counted AS (
        SELECT source_user_id AS user_id, asset_id, (created_at AT TIME ZONE 'UTC')::date AS day, sum(amount) AS spent
        FROM transactions
        WHERE kind <> 'DEPOSIT' AND counts_against_daily_limit(kind, status, source_user_id, destination_user_id)
        GROUP BY 1, 2, 3
      )
      SELECT coalesce(d.user_id, c.user_id) AS user_id, coalesce(d.asset_id, c.asset_id) AS asset_id,
        coalesce(d.day, c.day)::text AS day, coalesce(d.spent, 0)::text AS total, coalesce(c.spent, 0)::text AS counted
      FROM daily_spend d FULL JOIN counted c ON c.user_id = d.user_id AND c.asset_id = d.asset_id AND c.day = d.day
      WHERE coalesce(d.spent, 0) <> coalesce(c.spent, 0)
      ORDER BY 1, 2, 3 LIMIT ${limit}`.pipe(Effect.flatMap(driftedTotalRows))
    for (const row of drifted) {
      findings.add(`user ${row.user_id} asset ${row.asset_id} day ${row.day}`, `user ${row.user_id}: the daily ` +
        `limit's ${row.asset_id} total of ${row.day} is ${row.total}; the movements that count sum to ${row.counted}`)
    }
    checks.push(findings.result(
      "every daily limit total equals the withdrawals and cross-user transfers that count on its day",
      days.n,
      "daily totals"
    ))
  }

  // 8. Every fee a send paid (the chain books take it from the sending address) against the journal.
  {
    const findings = new Findings("sendFeesBooked")
    let after = "00000000-0000-0000-0000-000000000000"
    let examined = 0
    for (;;) {
      const page = yield* sql`
        -- A send a reorganization reopened (sql/0036) keeps the entries of the state it had: nothing was booked back.
        SELECT s.id, s.purpose, coalesce(s.reorganized_from_state, s.state) AS state,
          s.network_fee::text AS network_fee, s.account_cost::text AS account_cost,
          n.native_asset_id,
          CASE WHEN s.purpose = 'WITHDRAWAL' THEN t.tenant_id ELSE w.tenant_id END AS tenant_id,
          t.status AS withdrawal_status, t.network_fee::text AS withdrawal_network_fee
        FROM outgoing_sends s JOIN networks n ON n.network_key = s.network_key
        LEFT JOIN transactions t ON s.purpose = 'WITHDRAWAL' AND t.id = s.owner_id
        LEFT JOIN sweeps w ON s.purpose <> 'WITHDRAWAL' AND w.id = s.owner_id
        WHERE s.id > ${after} ORDER BY s.id LIMIT ${transactionsPerPageMax}`.pipe(Effect.flatMap(sendPage))
      if (page.length === 0) break
      examined += page.length
      const rows = yield* sql`
        SELECT e.id AS entry_id, e.kind AS entry_kind, e.tenant_id AS entry_tenant_id, e.reference_id,
          a.kind AS account_kind, a.wallet_id, a.asset_id, p.bucket, p.amount::text AS amount
        FROM ledger_entries e
        LEFT JOIN ledger_postings p ON p.entry_id = e.id
        LEFT JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'SEND_NETWORK_FEE' AND e.reference_id IN ${sql.in(page.map((send) => send.id))}`
        .pipe(Effect.flatMap(sendEntryRows))
      for (const send of page) {
        const name = `${send.purpose.toLowerCase().replace("_", "-")} send ${send.id} (${send.state})`
        const booked = rows.filter((row) => row.reference_id === send.id)
        const want = sortedPostings(expectedSendFee({
          id: send.id,
          purpose: send.purpose,
          state: send.state,
          networkFee: send.network_fee,
          accountCost: send.account_cost,
          nativeAssetId: send.native_asset_id
        }))
        const have = sortedPostings(booked.flatMap((row) =>
          row.account_kind === null || row.asset_id === null || row.bucket === null || row.amount === null ? [] : [{
            accountKind: row.account_kind,
            walletId: row.wallet_id,
            assetId: row.asset_id,
            bucket: row.bucket,
            amount: row.amount
          }]
        ))
        const entryIds = new Set(booked.map((row) => row.entry_id))
        if (want.length > 0 && entryIds.size === 0) {
          findings.add(`send ${send.id}`, `${name} paid a network fee of ${send.network_fee} ${send.native_asset_id} ` +
            `(accounts created: ${send.account_cost ?? 0}) that the journal lacks (SEND_NETWORK_FEE: ${want.join(", ")})`)
        } else if (want.length === 0 && entryIds.size > 0) {
          findings.add(`send ${send.id}`, `${name} has an unexpected SEND_NETWORK_FEE entry ${[...entryIds].join(", ")}`)
        } else if (entryIds.size > 1) {
          findings.add(`send ${send.id}`, `${name} has ${entryIds.size} SEND_NETWORK_FEE entries, expected one`)
        } else if (want.join("\n") !== have.join("\n")) {
          findings.add(`send ${send.id}`, `${name}: SEND_NETWORK_FEE posts [${have.join(", ")}], expected [${want.join(", ")}]`)
        }
        for (const row of booked) {
          if (row.entry_tenant_id !== send.tenant_id) {
            findings.add(`send ${send.id}`, `${name}: entry ${row.entry_id} is booked for tenant ${row.entry_tenant_id}, ` +
              `the send's payer is tenant ${send.tenant_id}`)
            break
          }
        }
        // A withdrawal's payload: the journal's fee is the withdrawal's, and must be the one the books take.
        const included = send.state === "CONFIRMED" || send.state === "REVERTED"
        if (send.purpose === "WITHDRAWAL" && included && send.network_fee !== send.withdrawal_network_fee) {
          findings.add(`send ${send.id}`, `${name} paid a network fee of ${send.network_fee}; its withdrawal ` +
            `(${send.withdrawal_status}) books ${send.withdrawal_network_fee ?? "none"}`)
        }
      }
      after = page[page.length - 1]!.id
      if (page.length < transactionsPerPageMax) break
    }
    const orphans = yield* sql`
      SELECT e.id, e.reference_id FROM ledger_entries e
      WHERE e.kind = 'SEND_NETWORK_FEE' AND NOT EXISTS (SELECT 1 FROM outgoing_sends s WHERE s.id = e.reference_id)
      ORDER BY e.id LIMIT ${limit}`.pipe(Effect.flatMap(sendOrphanRows))
    for (const row of orphans) {
      findings.add(`entry ${row.id}`, `entry ${row.id} (SEND_NETWORK_FEE) books ${row.reference_id}, which is no send`)
    }
    checks.push(findings.result(
      "every network fee a send paid is booked once: on the send, or as its withdrawal's NETWORK_FEE",
      examined,
      "sends"
    ))
  }

  const firstDiscrepancy = checks.find((check) => check.discrepancies.length > 0)?.discrepancies[0]
  return {
    ok: firstDiscrepancy === undefined,
    ...totals,
    checks,
    firstDiscrepancy
  } satisfies LedgerAuditReport
})

/**
 * Audits the ledger the `SqlClient` points at, in one `REPEATABLE READ, READ ONLY` transaction: every query sees the
 * same committed state, however busy the service is, and the audit can change nothing.
 */
export const auditLedger: Effect.Effect<LedgerAuditReport, LedgerAuditError, SqlClient.SqlClient> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      // Inside a caller's transaction withTransaction opens a savepoint and ignores BeginTransaction: the snapshot
      // would then be the caller's, not ours. Asserted rather than assumed.
      const mode = yield* sql`
        SELECT current_setting('transaction_isolation') AS isolation,
          current_setting('transaction_read_only') AS read_only`.pipe(Effect.flatMap(modeRow))
      if (mode?.isolation !== "repeatable read" || mode.read_only !== "on") {
        return yield* new LedgerAuditError({
          message: `the audit needs its own REPEATABLE READ, READ ONLY transaction, got ${mode?.isolation} ` +
            `(read only: ${mode?.read_only}); call it outside any transaction`
        })
      }
      return yield* runChecks
    })).pipe(
      Effect.provideService(SqlClient.BeginTransaction, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
      Effect.catchTag("SqlError", (error) =>
        Effect.fail(new LedgerAuditError({ message: `cannot read the ledger: ${serverMessage(error)}`, cause: error })))
    )
  }
).pipe(Effect.withSpan("LedgerAudit.auditLedger"))
