/**
 * What a webhook delivery of a `TRANSACTION_*` event carries: the transaction as it is at delivery time (spec
 * section 6), so a delayed or retried event may show a newer status than it announced. Every other event type
 * carries the data stored with it. Rendered on every attempt (webhooks/EventData.ts).
 */
import { Effect, Layer } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { transactionObject } from "./TransactionView.ts"
import { EventDataRenderer } from "../webhooks/EventData.ts"
import { TransactionRepository } from "./TransactionRepository.ts"

export const latestTransactionEventData = Layer.effect(
  EventDataRenderer,
  Effect.gen(function*() {
    const transactions = yield* TransactionRepository
    const catalog = yield* Catalog
    return EventDataRenderer.of({
      render: (event) =>
        event.type === "TRANSACTION_CREATED" || event.type === "TRANSACTION_STATUS_UPDATED"
          ? Effect.map(transactions.find(event.tenantId, event.subjectId), (transaction) =>
            // A transaction is never deleted; the stored object is the fallback all the same.
            transaction === undefined ? event.data : transactionObject(catalog, transaction))
          : Effect.succeed(event.data)
    })
  })
)
