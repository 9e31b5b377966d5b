/** Wallets (spec 4.3 and section 2 "Wallet object", "Wallet balance item", "Wallet address item"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  ForbiddenWire,
  IdempotencyConflictWire,
  LimitExceededWire,
  NetworkDisabledWire,
  NotFoundWire,
  RateLimitedWire,
  SignerUnavailableWire,
  WalletLimitReachedWire
} from "../domain/ApiError.ts"
import { Uuid } from "../domain/Ids.ts"
import { storable } from "../domain/StorableText.ts"
import { ChainFamilyWire, PageLimit, WalletStatus } from "./Common.ts"
import { WalletObject } from "./UsersApi.ts"

export const WalletListItem = Schema.Struct({
  id: Schema.String,
  userId: Schema.String,
  customerRefId: Schema.String,
  chainFamily: ChainFamilyWire,
  name: Schema.String,
  seq: Schema.Number,
  isDefault: Schema.Boolean,
  status: WalletStatus,
  address: Schema.NullOr(Schema.String),
  createdAt: Schema.String
}).annotate({ identifier: "WalletListItem" })

export const WalletBalanceItem = Schema.Struct({
  assetId: Schema.String,
  available: Schema.String,
  frozen: Schema.String,
  /** An added field, only while a deposit reversal left the balance below 0: the debt (docs/ledger.md "Choices"). */
  overdrawn: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "WalletBalanceItem" })

export const Confirmations = Schema.Union([
  Schema.Struct({ mode: Schema.Literal("confirmations"), n: Schema.Number }),
  Schema.Struct({ mode: Schema.Literal("finalized") }),
  Schema.Struct({ mode: Schema.Literal("solidified") })
])

export const WalletAddressItem = Schema.Struct({
  walletId: Schema.String,
  networkKey: Schema.String,
  networkName: Schema.String,
  address: Schema.NullOr(Schema.String),
  watchStatus: Schema.NullOr(Schema.Literals(["ALLOCATED", "REGISTERING", "ACTIVE", "DEGRADED", "FROZEN"])),
  confirmations: Confirmations,
  supportedAssets: Schema.Array(Schema.Struct({
    assetId: Schema.String,
    symbol: Schema.String,
    name: Schema.String,
    decimals: Schema.Number,
    minDepositRaw: Schema.String,
    depositFeeRaw: Schema.String,
    depositPaused: Schema.Boolean,
    iconUrl: Schema.NullOr(Schema.String)
  }))
}).annotate({ identifier: "WalletAddressItem" })

/** Field types only; `chainFamily` and lengths are business rules with their own messages (422). */
export const CreateWalletBody = storable(Schema.Struct({
  customerRefId: Schema.String,
  chainFamily: Schema.String,
  name: Schema.optional(Schema.NullOr(Schema.String))
}))

const walletParams = { id: Uuid }

export class WalletsApi extends HttpApiGroup.make("wallets")
  .add(
    HttpApiEndpoint.post("create", "/v1/wallets", {
      // Required (422 when missing), checked by the handler so the message can say so.
      headers: { "idempotency-key": Schema.optional(Schema.String) },
      payload: CreateWalletBody,
      success: WalletObject.pipe(HttpApiSchema.status(202)),
      error: [
        ForbiddenWire,
        IdempotencyConflictWire,
        // The user a new customerRefId creates counts against the tenant's user quota.
        LimitExceededWire,
        NetworkDisabledWire,
        WalletLimitReachedWire,
        RateLimitedWire,
        SignerUnavailableWire
      ]
    }).annotate(OpenApi.Description, "Header `Idempotency-Key` is required (spec section 7)."),
    HttpApiEndpoint.get("list", "/v1/wallets", {
      query: {
        customerRefId: Schema.optional(Schema.String),
        limit: Schema.optional(PageLimit),
        before: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(WalletListItem), nextBefore: Schema.NullOr(Schema.String) })
    }),
    HttpApiEndpoint.get("get", "/v1/wallets/:id", { params: walletParams, success: WalletObject, error: [NotFoundWire] }),
    HttpApiEndpoint.get("assets", "/v1/wallets/:id/assets", {
      params: walletParams,
      success: Schema.Array(WalletBalanceItem),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.get("addresses", "/v1/wallets/:id/addresses", {
      params: walletParams,
      success: Schema.Array(WalletAddressItem),
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Wallets", description: "Wallets and their addresses (spec 4.3)" }))
{}
