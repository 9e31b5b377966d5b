/**
 * What waits for an operator (GET /ops/approvals, operator-interface.md "Listing, audit and documents"): withdrawals
 * and internal transfers in PENDING_AUTHORIZATION (approve or reject them) and deposits held for manual handling
 * (COMPLETED / MANUAL_REVIEW: credit them), of every tenant, oldest first.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { decodeRows } from "../db/RowSchemas.ts"
import {
  type Transaction,
  transactionFromRow,
  type TransactionKind,
  TransactionRow,
  transactionSelect
} from "../transactions/Transaction.ts"

export interface ApprovalsQuery {
  readonly tenantId?: string | undefined
  /** The transaction's kind: DEPOSIT for held deposits, WITHDRAWAL or INTERNAL_TRANSFER for pending decisions. */
  readonly kind?: TransactionKind | undefined
  readonly limit: number
  /** The previous page's `nextCursor`: the id of its last transaction. */
  readonly cursor?: string | undefined
}

// Compiled once (db/RowSchemas.ts): rows decoded at this edge, a mismatch a defect naming the query.
const listedRows = decodeRows(TransactionRow, "Approvals.list")

export class Approvals extends Context.Service<Approvals, {
  /** Oldest first (by id, a UUID v7); `nextCursor` is set exactly when the page is full, as /v1's lists. */
  readonly list: (
    query: ApprovalsQuery
  ) => Effect.Effect<{ readonly items: ReadonlyArray<Transaction>; readonly nextCursor: string | null }>
}>()("coffer/Approvals") {
  static readonly layer = Layer.effect(
    Approvals,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const select = transactionSelect(sql)

      const list = Effect.fn("Approvals.list")(function*(query: ApprovalsQuery) {
        // The waiting condition is the partial index's (sql/0026_operator_audit.sql), so the planner can use it.
        const rows = yield* sql`
          ${select}
          WHERE (t.status = 'PENDING_AUTHORIZATION' OR (t.kind = 'DEPOSIT' AND t.sub_status = 'MANUAL_REVIEW'))
            ${query.tenantId === undefined ? sql`` : sql`AND t.tenant_id = ${query.tenantId}`}
            ${query.kind === undefined ? sql`` : sql`AND t.kind = ${query.kind}`}
            ${query.cursor === undefined ? sql`` : sql`AND t.id > ${query.cursor}`}
          ORDER BY t.id ASC
          LIMIT ${query.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items = rows.map(transactionFromRow)
        return { items, nextCursor: items.length === query.limit ? items[items.length - 1]!.id : null }
      })

      return Approvals.of({ list })
    })
  )
}
