/**
 * `TRANSACTION_CREATED` and `TRANSACTION_STATUS_UPDATED` (spec section 6): recorded in the outbox inside the
 * transaction of the change, carrying the transaction object as the change left it. The dedupe key names the
 * change (`created`, or the status and sub-status reached), so a handler that runs twice records one event.
 * A service built once over the repository, the catalog and the outbox; the repository's reads, like the outbox's
 * insert, run on the caller's transaction connection.
 */
import { Context, Effect, Layer } from "effect"
import type { Statement } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { Outbox, type OutboxRow } from "../outbox/Outbox.ts"
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
  /** TRANSACTION_CREATED for a transaction its creator holds as the database has it (NewTransaction.ts). */
  readonly createdAs: (transaction: Transaction) => Effect.Effect<void>
  /**
   * `createdAs` as a statement for the creation's own (Outbox `recordWhen`), inserted `when` it holds: `transaction`
   * as the creation writes it (NewTransaction.ts `transactionAsInserted`).
   */
  readonly createdWhen: (transaction: Transaction, when: Statement.Fragment) => Effect.Effect<Statement.Fragment>
  /** The same event as its row (Outbox `rowOf`), for a statement that inserts many at once (transfers/Movements.ts). */
  readonly createdRow: (transaction: Transaction) => Effect.Effect<OutboxRow>
  /**
   * TRANSACTION_STATUS_UPDATED for a transaction its changer already holds as the database has it after the change (an UPDATE's
   * returned row, `transactionSelectFrom`); the event names the status and sub-status it carries.
   */
  readonly statusUpdatedAs: (transaction: Transaction) => Effect.Effect<void>
  /**
   * `statusUpdatedAs` as a statement for the change's own (Outbox `recordWhen`): the event of `transaction` as the
   * change will leave it, inserted only `when` the change happened.
   */
  readonly statusUpdatedWhen: (transaction: Transaction, when: Statement.Fragment) => Effect.Effect<Statement.Fragment>
  /**
   * The same event as its row (Outbox `rowOf`), for a statement that applies one transition to many transactions
   * and inserts the events of those it changed (withdrawals/WithdrawalProcessor.ts `transitionsTogether`).
   */
  readonly statusUpdatedRow: (transaction: Transaction) => Effect.Effect<OutboxRow>
  /** What the caller of `createdWhen` or `statusUpdatedWhen` runs once its statement has run (Outbox `committed`). */
  readonly committed: Effect.Effect<void>
  readonly statusUpdated: (
    tenantId: string,
    transactionId: string,
    status: TransactionStatus,
    subStatus: SubStatus | null
  ) => Effect.Effect<void>
  /**
   * The events of many changes with one read of the transactions and one insert (a block's deposits), each the same
   * event `createdAs` or `statusUpdated` would record. Call inside the transaction of the changes.
   */
  readonly changes: (changes: ReadonlyArray<TransactionChange>) => Effect.Effect<void>
}>()("coffer/TransactionEvents") {
  static readonly layer = Layer.effect(
    TransactionEvents,
    Effect.gen(function*() {
      const repository = yield* TransactionRepository
      const catalog = yield* Catalog
      const outbox = yield* Outbox

      /** The dedupe key of a status change: the status and sub-status reached. */
      const statusKey = (status: TransactionStatus, subStatus: SubStatus | null) => `${status}/${subStatus ?? ""}`
      /** The outbox record of an event about `transaction`, carrying the transaction object as it is. */
      const eventOf = (
        transaction: Transaction,
        type: "TRANSACTION_CREATED" | "TRANSACTION_STATUS_UPDATED",
        dedupeKey: string
      ) => ({ tenantId: transaction.tenantId, type, subjectId: transaction.id, dedupeKey, data: transactionObject(catalog, transaction) })

      const createdAs = (transaction: Transaction) =>
        Effect.asVoid(outbox.record(eventOf(transaction, "TRANSACTION_CREATED", "created")))
      const createdWhen = (transaction: Transaction, when: Statement.Fragment) =>
        outbox.recordWhen(eventOf(transaction, "TRANSACTION_CREATED", "created"), when)
      const createdRow = (transaction: Transaction) => outbox.rowOf(eventOf(transaction, "TRANSACTION_CREATED", "created"))
      const statusUpdatedAs = (transaction: Transaction) =>
        Effect.asVoid(outbox.record(
          eventOf(transaction, "TRANSACTION_STATUS_UPDATED", statusKey(transaction.status, transaction.subStatus))
        ))
      const statusUpdatedWhen = (transaction: Transaction, when: Statement.Fragment) =>
        outbox.recordWhen(
          eventOf(transaction, "TRANSACTION_STATUS_UPDATED", statusKey(transaction.status, transaction.subStatus)),
          when
        )
      const statusUpdatedRow = (transaction: Transaction) =>
        outbox.rowOf(eventOf(transaction, "TRANSACTION_STATUS_UPDATED", statusKey(transaction.status, transaction.subStatus)))
      /** The changer did not keep the changed row: it is read now, in the change's transaction. */
      const statusUpdated = (tenantId: string, transactionId: string, status: TransactionStatus, subStatus: SubStatus | null) =>
        Effect.gen(function*() {
          const transaction = yield* repository.find(tenantId, transactionId)
          if (transaction === undefined) return yield* Effect.die(new Error(`transaction ${transactionId} not found`))
          yield* outbox.record(eventOf(transaction, "TRANSACTION_STATUS_UPDATED", statusKey(status, subStatus)))
        })

      const changes = (changes: ReadonlyArray<TransactionChange>): Effect.Effect<void> =>
        Effect.gen(function*() {
          if (changes.length === 0) return
          const found = yield* repository.findMany([...new Set(changes.map((change) => change.transactionId))])
          const byId = new Map(found.map((transaction) => [transaction.id, transaction]))
          yield* outbox.recordMany(changes.map((change) => {
            const transaction = byId.get(change.transactionId)
            if (transaction === undefined) throw new Error(`transaction ${change.transactionId} not found`)
            return change.change === "created"
              ? eventOf(transaction, "TRANSACTION_CREATED", "created")
              : eventOf(transaction, "TRANSACTION_STATUS_UPDATED", statusKey(change.status, change.subStatus))
          }))
        })

      return TransactionEvents.of({
        createdAs,
        statusUpdatedAs,
        createdWhen,
        createdRow,
        statusUpdatedWhen,
        statusUpdatedRow,
        committed: outbox.committed,
        statusUpdated,
        changes
      })
    })
  )
}
