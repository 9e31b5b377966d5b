/** Handlers of the transactions group, read side (spec 4.4). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { pageLimitDefault } from "../api/Common.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { BadRequest, NotFound } from "../domain/ApiError.ts"
import { parseRfc3339, toRfc3339 } from "../domain/Time.ts"
import { TransferQuotes } from "../transfers/TransferQuotes.ts"
import type { Transaction } from "../transactions/Transaction.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"
import { currentTenant } from "./CurrentTenant.ts"
import { transactionObject } from "./TransactionViews.ts"

const notFound = new NotFound({ message: "transaction not found" })
const badTime = new BadRequest({ message: "createdFrom/createdTo must be RFC 3339" })

/** An optional RFC 3339 query value; the spec gives the message for both bounds. */
const optionalTime = (value: string | undefined) =>
  value === undefined
    ? Effect.succeed(undefined)
    : Effect.fromNullishOr(parseRfc3339(value)).pipe(Effect.mapError(() => badTime))

export const TransactionsHandlers = HttpApiBuilder.group(Api, "transactions", (handlers) =>
  Effect.gen(function*() {
    const repository = yield* TransactionRepository
    const catalog = yield* Catalog
    const quotes = yield* TransferQuotes
    const found = (transaction: Transaction | undefined) =>
      transaction === undefined ? Effect.fail(notFound) : Effect.succeed(transactionObject(catalog, transaction))
    return handlers
      .handle("estimateFee", ({ payload }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const quote = yield* quotes.quote(tenant, {
            assetId: payload.assetId,
            sourceWalletId: payload.sourceWalletId,
            amount: payload.amountRaw,
            destination: payload.destination
          })
          return {
            assetId: quote.asset.assetId,
            amountRaw: quote.amount.toString(),
            feeRaw: quote.fee.toString(),
            totalRaw: (quote.amount + quote.fee).toString(),
            destination: quote.destination,
            isInternal: quote.recipient !== undefined,
            settlement: quote.settlement,
            networkFeePaidBy: "PLATFORM" as const,
            validUntil: toRfc3339(quote.validUntil)
          }
        }))
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const createdFrom = yield* optionalTime(query.createdFrom)
          const createdTo = yield* optionalTime(query.createdTo)
          const page = yield* repository.list(tenant.id, {
            walletId: query.walletId,
            customerRefId: query.customerRefId,
            kind: query.kind,
            status: query.status,
            assetId: query.assetId,
            createdFrom,
            createdTo,
            limit: query.limit ?? pageLimitDefault,
            before: query.before
          })
          return {
            items: page.items.map((transaction) => transactionObject(catalog, transaction)),
            nextBefore: page.nextBefore
          }
        }))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return yield* found(yield* repository.find(tenant.id, params.id))
        }))
      .handle("byExternalTxId", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return yield* found(yield* repository.findByExternalTxId(tenant.id, params.externalTxId))
        }))
  }))
