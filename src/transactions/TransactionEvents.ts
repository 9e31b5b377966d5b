/**
 * `TRANSACTION_CREATED` and `TRANSACTION_STATUS_UPDATED` (spec section 6): recorded in the outbox inside the
 * transaction of the change, carrying the transaction object as the change left it. The dedupe key names the
 * change (`created`, or the status and sub-status reached), so a handler that runs twice records one event.
 * A service built once over the repository, the catalog and the outbox; the repository's reads, like the outbox's
 * insert, run on the caller's transaction connection.
 */
import { Context, Effect, Layer } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Outbox } from "../outbox/Outbox.ts"
import type { SubStatus, Transaction, TransactionStatus } from "./Transaction.ts"
import { TransactionRepository } from "./TransactionRepository.ts"
import { transactionObject } from "./TransactionView.ts"

/** One change of a transaction to report: its creation, or the status (and sub-status) it reached. */
export type TransactionChange =
  | { readonly transactionId: string; readonly change: "created" }
  | {
    readonly transactionId: string
    readonly change: "status"
    readonly status: TransactionStatus
    readonly subStatus: SubStatus | null
  }

export class TransactionEvents extends Context.Service<TransactionEvents, {
  readonly created: (tenantId: string, transactionId: string) => Effect.Effect<void>
  /** `created` for a transaction its creator already holds as the database has it (NewTransaction.ts). */
  readonly createdAs: (transaction: Transaction) => Effect.Effect<void>
  /**
   * `statusUpdated` for a transaction its changer already holds as the database has it after the change (an UPDATE's
   * returned row, `transactionSelectFrom`); the event names the status and sub-status it carries.
   */
  readonly statusUpdatedAs: (transaction: Transaction) => Effect.Effect<void>
  readonly statusUpdated: (
    tenantId: string,
    transactionId: string,
    status: TransactionStatus,
    subStatus: SubStatus | null
  ) => Effect.Effect<void>
  /**
   * The events of many changes with one read of the transactions and one insert (a block's deposits), each the same
   * event `created` or `statusUpdated` would record. Call inside the transaction of the changes.
   */
  readonly changes: (changes: ReadonlyArray<TransactionChange>) => Effect.Effect<void>
}>()("coffer/TransactionEvents") {
  static readonly layer = Layer.effect(
    TransactionEvents,
    Effect.gen(function*() {
      const repository = yield* TransactionRepository
      const catalog = yield* Catalog
      const outbox = yield* Outbox

      const record = (
        tenantId: string,
        transactionId: string,
        type: "TRANSACTION_CREATED" | "TRANSACTION_STATUS_UPDATED",
        dedupeKey: string
      ): Effect.Effect<void> =>
        Effect.gen(function*() {
          const transaction = yield* repository.find(tenantId, transactionId)
          if (transaction === undefined) return yield* Effect.die(new Error(`transaction ${transactionId} not found`))
          yield* outbox.record({
            tenantId,
            type,
            subjectId: transactionId,
            dedupeKey,
            data: transactionObject(catalog, transaction)
          })
        })

      const recordAs = (
        transaction: Transaction,
        type: "TRANSACTION_CREATED" | "TRANSACTION_STATUS_UPDATED",
        dedupeKey: string
      ): Effect.Effect<void> =>
        Effect.asVoid(outbox.record({
          tenantId: transaction.tenantId,
          type,
          subjectId: transaction.id,
          dedupeKey,
          data: transactionObject(catalog, transaction)
        }))
      const createdAs = (transaction: Transaction) => recordAs(transaction, "TRANSACTION_CREATED", "created")
      const statusUpdatedAs = (transaction: Transaction) =>
        recordAs(transaction, "TRANSACTION_STATUS_UPDATED", `${transaction.status}/${transaction.subStatus ?? ""}`)

      const changes = (changes: ReadonlyArray<TransactionChange>): Effect.Effect<void> =>
        Effect.gen(function*() {
          if (changes.length === 0) return
          const found = yield* repository.findMany([...new Set(changes.map((change) => change.transactionId))])
          const byId = new Map(found.map((transaction) => [transaction.id, transaction]))
          yield* outbox.recordMany(changes.map((change) => {
            const transaction = byId.get(change.transactionId)
            if (transaction === undefined) throw new Error(`transaction ${change.transactionId} not found`)
            return {
              tenantId: transaction.tenantId,
              type: change.change === "created" ? "TRANSACTION_CREATED" : "TRANSACTION_STATUS_UPDATED",
              subjectId: transaction.id,
              dedupeKey: change.change === "created" ? "created" : `${change.status}/${change.subStatus ?? ""}`,
              data: transactionObject(catalog, transaction)
            }
          }))
        })

      return TransactionEvents.of({
        created: (tenantId, transactionId) => record(tenantId, transactionId, "TRANSACTION_CREATED", "created"),
        createdAs,
        statusUpdatedAs,
        statusUpdated: (tenantId, transactionId, status, subStatus) =>
          record(tenantId, transactionId, "TRANSACTION_STATUS_UPDATED", `${status}/${subStatus ?? ""}`),
        changes
      })
    })
  )
}
