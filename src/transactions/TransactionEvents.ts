/**
 * `TRANSACTION_CREATED` and `TRANSACTION_STATUS_UPDATED` (spec section 6): recorded in the outbox inside the
 * transaction of the change, carrying the transaction object as the change left it. The dedupe key names the
 * change (`created`, or the status and sub-status reached), so a handler that runs twice records one event.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import type { Entropy } from "../domain/Entropy.ts"
import { transactionObject } from "./TransactionView.ts"
import { recordEvent, recordEvents } from "../outbox/Outbox.ts"
import type { SubStatus, TransactionStatus } from "./Transaction.ts"
import { TransactionRepository } from "./TransactionRepository.ts"

const record = (
  tenantId: string,
  transactionId: string,
  type: "TRANSACTION_CREATED" | "TRANSACTION_STATUS_UPDATED",
  dedupeKey: string
): Effect.Effect<void, never, TransactionRepository | Catalog | SqlClient.SqlClient | Entropy> =>
  Effect.gen(function*() {
    const repository = yield* TransactionRepository
    const catalog = yield* Catalog
    const transaction = yield* repository.find(tenantId, transactionId)
    if (transaction === undefined) return yield* Effect.die(new Error(`transaction ${transactionId} not found`))
    yield* recordEvent({
      tenantId,
      type,
      subjectId: transactionId,
      dedupeKey,
      data: transactionObject(catalog, transaction)
    })
  })

export const recordTransactionCreated = (tenantId: string, transactionId: string) =>
  record(tenantId, transactionId, "TRANSACTION_CREATED", "created")

export const recordStatusUpdated = (
  tenantId: string,
  transactionId: string,
  status: TransactionStatus,
  subStatus: SubStatus | null
) => record(tenantId, transactionId, "TRANSACTION_STATUS_UPDATED", `${status}/${subStatus ?? ""}`)

/** One change of a transaction to report: its creation, or the status (and sub-status) it reached. */
export type TransactionChange =
  | { readonly transactionId: string; readonly change: "created" }
  | {
    readonly transactionId: string
    readonly change: "status"
    readonly status: TransactionStatus
    readonly subStatus: SubStatus | null
  }

/**
 * The events of many changes with one read of the transactions and one insert (a block's deposits), each the same
 * event `recordTransactionCreated` or `recordStatusUpdated` would record. Call inside the transaction of the changes.
 */
export const recordTransactionChanges = (
  changes: ReadonlyArray<TransactionChange>
): Effect.Effect<void, never, TransactionRepository | Catalog | SqlClient.SqlClient | Entropy> =>
  Effect.gen(function*() {
    if (changes.length === 0) return
    const repository = yield* TransactionRepository
    const catalog = yield* Catalog
    const found = yield* repository.findMany([...new Set(changes.map((change) => change.transactionId))])
    const byId = new Map(found.map((transaction) => [transaction.id, transaction]))
    yield* recordEvents(changes.map((change) => {
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
