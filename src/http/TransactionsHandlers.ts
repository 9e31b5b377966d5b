/** Handlers of the transactions group (spec 4.4). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { SubmitTransactionBody } from "../api/TransactionsApi.ts"
import { externalTxIdKey } from "../idempotency/ExternalTxIdKey.ts"
import { checkIdempotencyKey } from "../idempotency/Idempotency.ts"
import { type InternalTransferReceipt, Transfers } from "../transfers/Transfers.ts"
import { type OnChainReceipt, Withdrawals } from "../withdrawals/Withdrawals.ts"
import { Api } from "../api/Api.ts"
import { pageLimitDefault } from "../api/Common.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { BadRequest, NotFound } from "../domain/ApiError.ts"
import { charCount } from "../domain/StorableText.ts"
import { parseRfc3339, toRfc3339 } from "../domain/Time.ts"
import { TransferQuotes } from "../transfers/TransferQuotes.ts"
import type { Transaction } from "../transactions/Transaction.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"
import { currentTenant } from "./CurrentTenant.ts"
import { transactionObject } from "../transactions/TransactionView.ts"
import { idempotentResponse } from "./IdempotentResponse.ts"

const notFound = new NotFound({ message: "transaction not found" })
/** The idempotency scope's endpoint name of submissions (section 7). */
const submitEndpoint = "POST /v1/transactions"
/** A submission's answer is its receipt as it stands (section 7, rule 3 stores its bytes). */
const receiptBody = (receipt: InternalTransferReceipt | OnChainReceipt) => receipt
const badTime = new BadRequest({ message: "createdFrom/createdTo must be RFC 3339" })
/** Sections 1 and 8: an `externalTxId` is 1-128 chars (code points), in a body or a path alike; else 422. */
const isExternalTxIdLength = (value: string) => charCount(value) >= 1 && charCount(value) <= 128
const badExternalTxId = new BadRequest({ message: "externalTxId must be 1-128 chars" })

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
    const transfers = yield* Transfers
    const withdrawals = yield* Withdrawals
    const found = (transaction: Transaction | undefined) =>
      transaction === undefined ? Effect.fail(notFound) : Effect.succeed(transactionObject(catalog, transaction))
    /** The destination forms of spec 4.4, checked in the request's shape before anything else runs. */
    const destinationOf = (destination: typeof SubmitTransactionBody.Type["destination"]) => {
      switch (destination.type) {
        case "WALLET":
          return destination.id === undefined
            ? Effect.fail(new BadRequest({ message: "destination.id is required for WALLET" }))
            : Effect.succeed({ type: "WALLET" as const, id: destination.id })
        case "END_USER":
          return (destination.uid === undefined) === (destination.customerRefId === undefined)
            ? Effect.fail(new BadRequest({ message: "END_USER needs exactly one of uid / customerRefId" }))
            : Effect.succeed({ type: "END_USER" as const, uid: destination.uid, customerRefId: destination.customerRefId })
        case "ONE_TIME_ADDRESS":
          return destination.oneTimeAddress === undefined
            ? Effect.fail(new BadRequest({ message: "destination.oneTimeAddress.address is required for ONE_TIME_ADDRESS" }))
            : Effect.succeed({ type: "ONE_TIME_ADDRESS" as const, address: destination.oneTimeAddress.address })
        default:
          return Effect.fail(new BadRequest({ message: "destination.type must be WALLET, END_USER or ONE_TIME_ADDRESS" }))
      }
    }

    return handlers
      .handle("submit", ({ headers, payload }) =>
        Effect.gen(function*() {
          if (payload.source.type !== "WALLET") return yield* new BadRequest({ message: "source.type must be WALLET" })
          const externalTxId = payload.externalTxId
          if (externalTxId !== undefined && !isExternalTxIdLength(externalTxId)) return yield* badExternalTxId
          // Spec 4.4: the Idempotency-Key header is needed only without an externalTxId, and ignored with one.
          const key = externalTxId === undefined
            ? yield* checkIdempotencyKey(headers["idempotency-key"])
            : externalTxIdKey(externalTxId)
          const destination = yield* destinationOf(payload.destination)
          if (payload.amountRaw <= 0n) return yield* new BadRequest({ message: "amount must be positive" })
          // The answer is stored in the transaction that moves the funds (Transfers.submit's `recordReceipt`).
          return yield* idempotentResponse(
            {
              endpoint: submitEndpoint,
              key,
              tenantWide: externalTxId !== undefined,
              status: 202,
              body: receiptBody,
              // An internal transfer's record is inserted by its one statement (Transfers.submit claims first where
              // it writes anything else: a two-step code, a withdrawal).
              claimInStatement: true
            },
            (tenant, record) =>
              transfers.submit(tenant, {
                assetId: payload.assetId,
                sourceWalletId: payload.source.id,
                destination,
                amount: payload.amountRaw,
                externalTxId,
                note: payload.note ?? undefined,
                twoFactorCode: headers["x-user-2fa-code"],
                recordReceipt: record.inStatement,
                claimKey: record.claim
              })
          )
        }), { uninterruptible: true })
      .handle("cancel", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return yield* withdrawals.cancel(tenant.id, params.id)
        }))
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
          if (!isExternalTxIdLength(params.externalTxId)) return yield* badExternalTxId
          return yield* found(yield* repository.findByExternalTxId(tenant.id, params.externalTxId))
        }))
  }))
