/**
 * `TRANSACTION_CREATED` and `TRANSACTION_STATUS_UPDATED` (spec section 6): recorded in the outbox inside the
 * transaction of the change, carrying the transaction object as the change left it. The dedupe key names the
 * change (`created`, or the status and sub-status reached), so a handler that runs twice records one event.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import type { Entropy } from "../domain/Entropy.ts"
import { transactionObject } from "../http/TransactionViews.ts"
import { recordEvent } from "../outbox/Outbox.ts"
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
