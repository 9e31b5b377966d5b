/** Transactions, read side (spec 4.4: GET by id, by externalTxId, and the list; section 2 "Transaction object"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import {
  AssetDisabledWire,
  AssetMismatchWire,
  AssetNotSupportedWire,
  BadRequestWire,
  BelowMinWithdrawalWire,
  InternalDestinationNotAllowedWire,
  InvalidAddressWire,
  LimitExceededWire,
  NetworkDisabledWire,
  NotFoundWire,
  SameWalletTransferWire
} from "../domain/ApiError.ts"
import { RawAmount } from "../domain/RawAmount.ts"
import { Uuid } from "../domain/Ids.ts"
import { TransactionKind, TransactionStatus } from "../transactions/Transaction.ts"
import { PageLimit } from "./Common.ts"

export const TransactionParty = Schema.Struct({
  walletId: Schema.NullOr(Schema.String),
  address: Schema.NullOr(Schema.String),
  customerRefId: Schema.NullOr(Schema.String),
  uid: Schema.NullOr(Schema.String)
}).annotate({ identifier: "TransactionParty" })

export const TransactionObject = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literals(TransactionKind),
  settlement: Schema.Literals(["ON_CHAIN", "OFF_CHAIN"]),
  status: Schema.Literals(TransactionStatus),
  subStatus: Schema.NullOr(Schema.String),
  assetId: Schema.String,
  networkKey: Schema.String,
  decimals: Schema.Number,
  amountRaw: Schema.String,
  feeRaw: Schema.NullOr(Schema.String),
  netAmountRaw: Schema.NullOr(Schema.String),
  networkFeeRaw: Schema.NullOr(Schema.String),
  networkFeeAssetId: Schema.NullOr(Schema.String),
  source: TransactionParty,
  destination: TransactionParty,
  txHash: Schema.NullOr(Schema.String),
  externalTxId: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
}).annotate({ identifier: "TransactionObject" })
export type TransactionObject = typeof TransactionObject.Type

export const EstimateFeeBody = Schema.Struct({
  assetId: Schema.String,
  sourceWalletId: Uuid,
  amountRaw: RawAmount,
  destination: Schema.String
})

export const FeeEstimate = Schema.Struct({
  assetId: Schema.String,
  amountRaw: Schema.String,
  feeRaw: Schema.String,
  totalRaw: Schema.String,
  destination: Schema.String,
  isInternal: Schema.Boolean,
  settlement: Schema.Literals(["ON_CHAIN", "OFF_CHAIN"]),
  networkFeePaidBy: Schema.Literal("PLATFORM"),
  validUntil: Schema.String
}).annotate({ identifier: "FeeEstimate" })

export class TransactionsApi extends HttpApiGroup.make("transactions")
  .add(
    HttpApiEndpoint.post("estimateFee", "/v1/transactions/estimate_fee", {
      payload: EstimateFeeBody,
      success: FeeEstimate,
      error: [
        BadRequestWire,
        NotFoundWire,
        AssetNotSupportedWire,
        AssetMismatchWire,
        AssetDisabledWire,
        NetworkDisabledWire,
        InvalidAddressWire,
        InternalDestinationNotAllowedWire,
        SameWalletTransferWire,
        BelowMinWithdrawalWire,
        LimitExceededWire
      ]
    }).annotate(
      OpenApi.Description,
      "Fee and settlement by the rules of a withdrawal or transfer; freezes nothing, creates nothing."
    ),
    HttpApiEndpoint.get("list", "/v1/transactions", {
      query: {
        walletId: Schema.optional(Uuid),
        customerRefId: Schema.optional(Schema.String),
        kind: Schema.optional(Schema.Literals(TransactionKind)),
        status: Schema.optional(Schema.Literals(TransactionStatus)),
        assetId: Schema.optional(Schema.String),
        // Strings here: a value that is not RFC 3339 is a 422 with the spec's message, not a 400 parse failure.
        createdFrom: Schema.optional(Schema.String),
        createdTo: Schema.optional(Schema.String),
        limit: Schema.optional(PageLimit),
        before: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(TransactionObject), nextBefore: Schema.NullOr(Schema.String) }),
      error: [BadRequestWire]
    }),
    HttpApiEndpoint.get("byExternalTxId", "/v1/transactions/external_tx_id/:externalTxId", {
      params: { externalTxId: Schema.String },
      success: TransactionObject,
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.get("get", "/v1/transactions/:id", {
      params: { id: Uuid },
      success: TransactionObject,
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({
    title: "Transactions",
    description: "Deposits, withdrawals and internal transfers (spec 4.4)"
  }))
{}
