/** Transactions, read side (spec 4.4: GET by id, by externalTxId, and the list; section 2 "Transaction object"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  AssetDisabledWire,
  AssetMismatchWire,
  AssetNotSupportedWire,
  BadRequestWire,
  BelowMinWithdrawalWire,
  BlockedByPolicyWire,
  CooldownActiveWire,
  ForbiddenWire,
  IdempotencyConflictWire,
  InsufficientBalanceWire,
  InternalDestinationNotAllowedWire,
  InvalidAddressWire,
  InvalidStateWire,
  LimitExceededWire,
  NetworkDisabledWire,
  NotFoundWire,
  ProviderUnavailableWire,
  RateLimitedWire,
  RecipientNoWalletWire,
  RecipientNotFoundWire,
  SameUserUseWalletTransferWire,
  SameWalletTransferWire,
  TwoFactorInvalidWire,
  TwoFactorRequiredWire,
  WalletNotActiveWire
} from "../domain/ApiError.ts"
import { RawAmount } from "../domain/RawAmount.ts"
import { Uuid } from "../domain/Ids.ts"
import { TransactionKind, TransactionStatus } from "../transactions/Transaction.ts"
import { storable } from "../domain/StorableText.ts"
import { ExternalTxIdParam, PageLimit } from "./Common.ts"

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

export const EstimateFeeBody = storable(Schema.Struct({
  assetId: Schema.String,
  sourceWalletId: Uuid,
  amountRaw: RawAmount,
  destination: Schema.String
}))

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

/** Field types only: the rules (`source.type`, destination forms, lengths) have their own 422 messages. */
export const SubmitTransactionBody = storable(Schema.Struct({
  assetId: Schema.String,
  source: Schema.Struct({ type: Schema.String, id: Schema.String }),
  destination: Schema.Struct({
    type: Schema.String,
    id: Schema.optional(Schema.String),
    uid: Schema.optional(Schema.String),
    customerRefId: Schema.optional(Schema.String),
    oneTimeAddress: Schema.optional(Schema.Struct({ address: Schema.String }))
  }),
  amountRaw: RawAmount,
  externalTxId: Schema.optional(Schema.String),
  note: Schema.optional(Schema.NullOr(Schema.String))
}))

/** Spec section 2, "Internal transfer receipt". */
export const InternalTransferReceipt = Schema.Struct({
  settlement: Schema.Literal("OFF_CHAIN"),
  transferId: Schema.String,
  transactionId: Schema.String,
  status: Schema.Literals(["COMPLETED", "PENDING_AUTHORIZATION"]),
  fromWalletId: Schema.String,
  toWalletId: Schema.String,
  assetId: Schema.String,
  amount: Schema.String,
  fee: Schema.String
}).annotate({ identifier: "InternalTransferReceipt" })

/** Spec section 2, "On-chain withdrawal receipt"; with status CANCELLED also the "Cancel response". */
export const OnChainWithdrawalReceipt = Schema.Struct({
  settlement: Schema.Literal("ON_CHAIN"),
  withdrawalId: Schema.String,
  transactionId: Schema.String,
  status: Schema.String,
  subStatus: Schema.NullOr(Schema.String),
  state: Schema.String,
  assetId: Schema.String,
  amountRaw: Schema.String,
  feeRaw: Schema.String,
  reservedRaw: Schema.String,
  destination: Schema.String
}).annotate({ identifier: "OnChainWithdrawalReceipt" })

export class TransactionsApi extends HttpApiGroup.make("transactions")
  .add(
    HttpApiEndpoint.post("submit", "/v1/transactions", {
      headers: {
        "idempotency-key": Schema.optional(Schema.String),
        "x-user-2fa-code": Schema.optional(Schema.String)
      },
      payload: SubmitTransactionBody,
      success: Schema.Union([InternalTransferReceipt, OnChainWithdrawalReceipt]).pipe(HttpApiSchema.status(202)),
      error: [
        BadRequestWire,
        ForbiddenWire,
        TwoFactorRequiredWire,
        TwoFactorInvalidWire,
        CooldownActiveWire,
        BlockedByPolicyWire,
        NotFoundWire,
        RecipientNotFoundWire,
        IdempotencyConflictWire,
        InsufficientBalanceWire,
        InvalidAddressWire,
        InternalDestinationNotAllowedWire,
        SameWalletTransferWire,
        SameUserUseWalletTransferWire,
        RecipientNoWalletWire,
        AssetNotSupportedWire,
        AssetMismatchWire,
        AssetDisabledWire,
        NetworkDisabledWire,
        WalletNotActiveWire,
        BelowMinWithdrawalWire,
        LimitExceededWire,
        RateLimitedWire,
        ProviderUnavailableWire
      ]
    }).annotate(
      OpenApi.Description,
      "Internal transfers (recipients inside the tenant) settle off-chain; an external recipient gets an on-chain " +
        "withdrawal, created SUBMITTED with amount + fee frozen and followed through GET /v1/transactions/{id}."
    ),
    HttpApiEndpoint.post("cancel", "/v1/transactions/:id/cancel", {
      params: { id: Uuid },
      success: OnChainWithdrawalReceipt,
      error: [NotFoundWire, InvalidStateWire]
    }),
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
        LimitExceededWire,
        // A SOL node that cannot tell whether the destination is a wallet (spec 4.1; decisions.md).
        ProviderUnavailableWire
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
      params: { externalTxId: ExternalTxIdParam },
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
