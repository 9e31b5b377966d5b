/**
 * What a webhook delivery of a `TRANSACTION_*` event carries: the transaction as it is at delivery time (spec
 * section 6), so a delayed or retried event may show a newer status than it announced. Every other event type
 * carries the data stored with it. Rendered on every attempt (webhooks/EventData.ts).
 *
 * An event goes to every endpoint of its tenant (up to 10), each endpoint sending up to four at once: the reads of
 * attempts that start together are one query (an Effect request resolver, batching the lookups made before the
 * fiber scheduler yields; no timer, so no added latency and nothing for a TestClock to hold back), and a
 * transaction asked for twice in that query is read once.
 */
import { Effect, Exit, Layer, Request, RequestResolver } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { EventDataRenderer } from "../webhooks/EventData.ts"
import type { Transaction } from "./Transaction.ts"
import { TransactionRepository } from "./TransactionRepository.ts"
import { transactionObject } from "./TransactionView.ts"

/** The latest state of a tenant's transaction; undefined when the tenant has none by that id. */
class LatestTransaction extends Request.Class<
  { readonly tenantId: string; readonly transactionId: string },
  Transaction | undefined,
  never,
  never
> {}

export const latestTransactionEventData = Layer.effect(
  EventDataRenderer,
  Effect.gen(function*() {
    const transactions = yield* TransactionRepository
    const catalog = yield* Catalog
    const resolver = RequestResolver.make<LatestTransaction>((entries) =>
      Effect.map(
        transactions.findMany([...new Set(entries.map((entry) => entry.request.transactionId))]),
        (found) => {
          const byId = new Map(found.map((transaction) => [transaction.id, transaction]))
          for (const entry of entries) {
            const transaction = byId.get(entry.request.transactionId)
            // Another tenant's transaction is as missing as none.
            entry.completeUnsafe(Exit.succeed(transaction?.tenantId === entry.request.tenantId ? transaction : undefined))
          }
        }
      )
    )
    return EventDataRenderer.of({
      render: (event) =>
        event.type === "TRANSACTION_CREATED" || event.type === "TRANSACTION_STATUS_UPDATED"
          ? Effect.map(
            Effect.request(new LatestTransaction({ tenantId: event.tenantId, transactionId: event.subjectId }), resolver),
            // A transaction is never deleted; the stored object is the fallback all the same.
            (transaction) => transaction === undefined ? event.data : transactionObject(catalog, transaction)
          )
          : Effect.succeed(event.data)
    })
  })
)
