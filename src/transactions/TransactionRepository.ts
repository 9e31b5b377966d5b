/**
 * Reading transactions. Every kind is created by NewTransaction.ts; status changes live with the pipelines that
 * make them.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { decodeFirstRow, decodeRows } from "../db/RowSchemas.ts"
import {
  type Transaction,
  transactionFromRow,
  type TransactionKind,
  TransactionRow,
  transactionSelect,
  type TransactionStatus
} from "./Transaction.ts"

export interface TransactionFilter {
  /** Payer or recipient wallet. */
  readonly walletId?: string | undefined
  /** Payer or recipient user. */
  readonly customerRefId?: string | undefined
  readonly kind?: TransactionKind | undefined
  readonly status?: TransactionStatus | undefined
  readonly assetId?: string | undefined
  /** Inclusive. */
  readonly createdFrom?: Date | undefined
  /** Exclusive. */
  readonly createdTo?: Date | undefined
  readonly limit: number
  readonly before?: string | undefined
}

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const foundRow = decodeFirstRow(TransactionRow, "TransactionRepository.find")
const foundRows = decodeRows(TransactionRow, "TransactionRepository.findMany")
const externalRow = decodeFirstRow(TransactionRow, "TransactionRepository.findByExternalTxId")
const listedRows = decodeRows(TransactionRow, "TransactionRepository.list")

export class TransactionRepository extends Context.Service<TransactionRepository, {
  /** This tenant's transaction, or undefined (another tenant's is as missing as none). */
  readonly find: (tenantId: string, id: string) => Effect.Effect<Transaction | undefined>
  /** Several transactions by id, of any tenant, in no particular order (for the services that changed them). */
  readonly findMany: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Transaction>>
  readonly findByExternalTxId: (tenantId: string, externalTxId: string) => Effect.Effect<Transaction | undefined>
  /** Newest first; `nextBefore` is set exactly when the page is full (decisions.md). */
  readonly list: (
    tenantId: string,
    filter: TransactionFilter
  ) => Effect.Effect<{ readonly items: ReadonlyArray<Transaction>; readonly nextBefore: string | null }>
}>()("coffer/TransactionRepository") {
  static readonly layer = Layer.effect(
    TransactionRepository,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const select = transactionSelect(sql)

      const find = Effect.fn("TransactionRepository.find")(function*(tenantId: string, id: string) {
        const row = yield* sql`${select} WHERE t.tenant_id = ${tenantId} AND t.id = ${id}`.pipe(
          Effect.orDie,
          Effect.flatMap(foundRow)
        )
        return row === undefined ? undefined : transactionFromRow(row)
      })

      const findMany = Effect.fn("TransactionRepository.findMany")(function*(ids: ReadonlyArray<string>) {
        if (ids.length === 0) return []
        const rows = yield* sql`
          ${select} WHERE t.id IN (SELECT value::uuid FROM jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`
          .pipe(Effect.orDie, Effect.flatMap(foundRows))
        return rows.map(transactionFromRow)
      })

      const findByExternalTxId = Effect.fn("TransactionRepository.findByExternalTxId")(function*(
        tenantId: string,
        externalTxId: string
      ) {
        const row = yield* sql`
          ${select} WHERE t.tenant_id = ${tenantId} AND t.external_tx_id = ${externalTxId}`.pipe(
          Effect.orDie,
          Effect.flatMap(externalRow)
        )
        return row === undefined ? undefined : transactionFromRow(row)
      })

      const list = Effect.fn("TransactionRepository.list")(function*(tenantId: string, filter: TransactionFilter) {
        const optional = <A>(value: A | undefined, condition: (value: A) => Statement.Fragment): Statement.Fragment =>
          value === undefined ? sql`` : condition(value)
        const rows = yield* sql`
          ${select}
          WHERE t.tenant_id = ${tenantId}
            ${optional(filter.walletId, (id) => sql`AND (t.source_wallet_id = ${id} OR t.destination_wallet_id = ${id})`)}
            ${
          optional(filter.customerRefId, (ref) => sql`AND (su.customer_ref_id = ${ref} OR du.customer_ref_id = ${ref})`)
        }
            ${optional(filter.kind, (kind) => sql`AND t.kind = ${kind}`)}
            ${optional(filter.status, (status) => sql`AND t.status = ${status}`)}
            ${optional(filter.assetId, (assetId) => sql`AND t.asset_id = ${assetId}`)}
            ${optional(filter.createdFrom, (from) => sql`AND t.created_at >= ${from}`)}
            ${optional(filter.createdTo, (to) => sql`AND t.created_at < ${to}`)}
            ${optional(filter.before, (before) => sql`AND t.id < ${before}`)}
          ORDER BY t.id DESC
          LIMIT ${filter.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items = rows.map(transactionFromRow)
        return { items, nextBefore: items.length === filter.limit ? items[items.length - 1]!.id : null }
      })

      return TransactionRepository.of({ find, findMany, findByExternalTxId, list })
    })
  )
}
