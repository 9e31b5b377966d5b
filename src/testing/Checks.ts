/**
 * Checks any scenario can run on its database: the ledger audit (ledger/LedgerAudit.ts), the event stream's
 * invariants, balances, and the fingerprint that says two runs were the same.
 */
import { Data, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { auditLedger, reportLines } from "../ledger/LedgerAudit.ts"

export class ScenarioCheckFailed extends Data.TaggedError("ScenarioCheckFailed")<{
  readonly check: string
  readonly message: string
}> {}

/** The ledger audit; a discrepancy is a defect carrying the audit's report. */
export const ledgerAudit = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const report = yield* auditLedger.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
    if (!report.ok) {
      return yield* Effect.die(new ScenarioCheckFailed({
        check: "ledger audit",
        message: reportLines("scenario", report).join("\n")
      }))
    }
  })

/** Statuses after which a transaction never changes again (spec section 3). */
export const terminalStatuses: ReadonlySet<string> = new Set(["FAILED", "REJECTED", "CANCELLED", "REVERSED"])

export interface EventInvariantReport {
  readonly events: number
  readonly transactions: number
}

interface EventRow {
  readonly id: string
  readonly event_type: string
  readonly subject_id: string
  readonly created_at: Date
  readonly data: any
}

/**
 * The outbox's event stream, read in id order:
 * - ids increase with time (no event id is older than an event recorded before it);
 * - each transaction has exactly one TRANSACTION_CREATED, before any of its status events;
 * - each TRANSACTION_STATUS_UPDATED is a transition: its status or sub-status differs from the one before;
 * - nothing follows a terminal status (FAILED, REJECTED, CANCELLED, REVERSED);
 * - every transition has its event: the last event of each transaction shows the status it has now.
 */
export const eventInvariants = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const events = yield* sql<EventRow>`
      SELECT id::text AS id, event_type, subject_id, created_at, data FROM outbox_events ORDER BY id`.pipe(Effect.orDie)
    const fail = (message: string) => Effect.die(new ScenarioCheckFailed({ check: "event invariants", message }))
    const last = new Map<string, { status: string; subStatus: string | null; id: string }>()
    let previous: EventRow | undefined
    for (const event of events) {
      if (previous !== undefined && event.created_at.getTime() < previous.created_at.getTime()) {
        return yield* fail(`event ${event.id} (${event.created_at.toISOString()}) sorts after ${previous.id} (${previous.created_at.toISOString()}) but was recorded before it`)
      }
      previous = event
      if (event.event_type !== "TRANSACTION_CREATED" && event.event_type !== "TRANSACTION_STATUS_UPDATED") continue
      const data = typeof event.data === "string" ? JSON.parse(event.data) : event.data
      const status = String(data.status)
      const subStatus = data.subStatus == null ? null : String(data.subStatus)
      const before = last.get(event.subject_id)
      if (event.event_type === "TRANSACTION_CREATED") {
        if (before !== undefined) return yield* fail(`transaction ${event.subject_id}: a second TRANSACTION_CREATED (${event.id})`)
      } else {
        if (before === undefined) {
          return yield* fail(`transaction ${event.subject_id}: TRANSACTION_STATUS_UPDATED ${event.id} before its TRANSACTION_CREATED`)
        }
        if (terminalStatuses.has(before.status)) {
          return yield* fail(`transaction ${event.subject_id}: event ${event.id} (${status}) after the terminal ${before.status}`)
        }
        if (before.status === status && before.subStatus === subStatus) {
          return yield* fail(`transaction ${event.subject_id}: event ${event.id} repeats ${status}/${subStatus ?? ""}`)
        }
      }
      last.set(event.subject_id, { status, subStatus, id: event.id })
    }
    const transactions = yield* sql<{ id: string; status: string; sub_status: string | null }>`
      SELECT id::text AS id, status, sub_status FROM transactions ORDER BY id`.pipe(Effect.orDie)
    for (const transaction of transactions) {
      const seen = last.get(transaction.id)
      if (seen === undefined) return yield* fail(`transaction ${transaction.id} has no event`)
      if (seen.status !== transaction.status || seen.subStatus !== transaction.sub_status) {
        return yield* fail(
          `transaction ${transaction.id} is ${transaction.status}/${transaction.sub_status ?? ""} but its last event (${seen.id}) says ${seen.status}/${seen.subStatus ?? ""}`
        )
      }
    }
    return { events: events.length, transactions: transactions.length } satisfies EventInvariantReport
  })

export interface Balance {
  readonly walletId: string
  readonly assetId: string
  readonly available: bigint
  readonly frozen: bigint
}

/** A tenant's wallet balances as the ledger holds them, wallets and assets in order. */
export const balances = (sql: SqlClient.SqlClient, tenantId: string) =>
  Effect.map(
    sql<{ wallet_id: string; asset_id: string; available: string; frozen: string }>`
      SELECT wallet_id::text AS wallet_id, asset_id, available::text AS available, frozen::text AS frozen
      FROM ledger_accounts WHERE tenant_id = ${tenantId} AND kind = 'WALLET' ORDER BY wallet_id, asset_id`.pipe(Effect.orDie),
    (rows): ReadonlyArray<Balance> =>
      rows.map((row) => ({
        walletId: row.wallet_id,
        assetId: row.asset_id,
        available: BigInt(row.available),
        frozen: BigInt(row.frozen)
      }))
  )

/**
 * SHA-256 over the outbox events, the transactions and the ledger (entries and postings), each in a fixed order and
 * with every id and time: two runs with one fingerprint made the same ids, events and books.
 */
export const fingerprint = (sql: SqlClient.SqlClient) =>
  Effect.map(fingerprintLines(sql), (lines) => {
    const hash = createHash("sha256")
    for (const line of lines) hash.update(`${line}\n`)
    return hash.digest("hex")
  })

/**
 * What the fingerprint hashes, one line per row under a line naming its table: two runs whose fingerprints differ
 * are told apart by a diff of these (`npm run scenario -- --dump FILE`).
 */
export const fingerprintLines = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const add = (label: string, rows: ReadonlyArray<{ readonly line: string }>) => {
      lines.push(label)
      for (const row of rows) lines.push(row.line)
    }
    add("outbox_events", yield* sql<{ line: string }>`
      SELECT concat_ws('|', id, tenant_id, event_type, subject_id, dedupe_key, data::text,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')) AS line
      FROM outbox_events ORDER BY id`.pipe(Effect.orDie))
    add("transactions", yield* sql<{ line: string }>`
      SELECT concat_ws('|', id, tenant_id, kind, status, coalesce(sub_status, ''),
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')) AS line
      FROM transactions ORDER BY id`.pipe(Effect.orDie))
    add("ledger_entries", yield* sql<{ line: string }>`
      SELECT concat_ws('|', id, tenant_id, kind, reference_id,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')) AS line
      FROM ledger_entries ORDER BY id`.pipe(Effect.orDie))
    add("ledger_postings", yield* sql<{ line: string }>`
      SELECT concat_ws('|', p.entry_id, a.tenant_id, a.kind, coalesce(a.wallet_id::text, ''), a.asset_id, p.bucket,
        p.amount::text) AS line
      FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
      ORDER BY p.entry_id, a.kind, a.wallet_id, a.asset_id, p.bucket`.pipe(Effect.orDie))
    return lines
  })
