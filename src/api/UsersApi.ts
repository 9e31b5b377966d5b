/** Users (spec 4.2, section 2 "User object", "User list item", "User balance item"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import {
  EmailTakenWire,
  ForbiddenWire,
  InvalidStateWire,
  LimitExceededWire,
  NetworkDisabledWire,
  NotFoundWire,
  RateLimitedWire,
  SignerUnavailableWire,
  WalletLimitReachedWire
} from "../domain/ApiError.ts"
import { Uuid } from "../domain/Ids.ts"
import { storable } from "../domain/StorableText.ts"
import { CustomerRefIdParam, PageLimit, UserStatus } from "./Common.ts"

export const UserObject = Schema.Struct({
  id: Schema.String,
  tenantId: Schema.String,
  uid: Schema.String,
  email: Schema.NullOr(Schema.String),
  nickname: Schema.NullOr(Schema.String),
  totpEnabled: Schema.Boolean,
  source: Schema.Literals(["B_API", "C_DIRECT"]),
  customerRefId: Schema.NullOr(Schema.String),
  status: UserStatus,
  cooldownUntil: Schema.NullOr(Schema.String)
}).annotate({ identifier: "User" })
export type UserObject = typeof UserObject.Type

export const UserListItem = Schema.Struct({
  uid: Schema.String,
  customerRefId: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  status: UserStatus,
  createdAt: Schema.String
}).annotate({ identifier: "UserListItem" })

export const WalletObject = Schema.Struct({
  id: Schema.String,
  tenantId: Schema.String,
  userId: Schema.String,
  chainFamily: Schema.Literals(["EVM", "TRON", "BTC", "SOL"]),
  name: Schema.String,
  seq: Schema.Number,
  isDefault: Schema.Boolean,
  status: Schema.Literals(["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"]),
  address: Schema.NullOr(Schema.String),
  createdAt: Schema.String
}).annotate({ identifier: "Wallet" })
export type WalletObject = typeof WalletObject.Type

export const UserBalances = Schema.Struct({
  customerRefId: Schema.String,
  items: Schema.Array(Schema.Struct({
    assetId: Schema.String,
    availableRaw: Schema.String,
    frozenRaw: Schema.String,
    /** An added field, only while a deposit reversal left a wallet below 0: the debt (docs/ledger.md "Choices"). */
    overdrawnRaw: Schema.optionalKey(Schema.String)
  }))
}).annotate({ identifier: "UserBalances" })

/** Field types only: the business rules (lengths, email form, password strength) answer with their own messages. */
export const CreateUserBody = storable(Schema.Struct({
  customerRefId: Schema.String,
  email: Schema.optional(Schema.NullOr(Schema.String)),
  password: Schema.optional(Schema.NullOr(Schema.String)),
  nickname: Schema.optional(Schema.NullOr(Schema.String))
}))
export const PatchUserBody = storable(Schema.Struct({
  email: Schema.optional(Schema.NullOr(Schema.String)),
  status: Schema.optional(Schema.NullOr(Schema.String))
}))
export const DepositAddressBody = storable(Schema.Struct({
  networkKey: Schema.String,
  email: Schema.optional(Schema.NullOr(Schema.String))
}))

export const DepositAddressResponse = Schema.Struct({
  customerRefId: Schema.String,
  uid: Schema.String,
  walletId: Schema.String,
  networkKey: Schema.String,
  chainFamily: Schema.Literals(["EVM", "TRON", "BTC", "SOL"]),
  address: Schema.NullOr(Schema.String),
  status: Schema.Literals(["READY", "PROVISIONING"])
}).annotate({ identifier: "DepositAddress" })

const customerRefIdParam = { customerRefId: CustomerRefIdParam }

export class UsersApi extends HttpApiGroup.make("users")
  .add(
    HttpApiEndpoint.post("create", "/v1/users", {
      payload: CreateUserBody,
      success: UserObject,
      // 429 when the tenant's share of the password-hash pool is full (users/PasswordHash.ts); 422 LIMIT_EXCEEDED
      // when the tenant's user quota is reached (docs/operations.md, "Per-tenant quotas").
      error: [EmailTakenWire, LimitExceededWire, RateLimitedWire]
    }),
    HttpApiEndpoint.get("list", "/v1/users", {
      query: {
        limit: Schema.optional(PageLimit),
        cursor: Schema.optional(Uuid),
        status: Schema.optional(UserStatus)
      },
      success: Schema.Struct({ items: Schema.Array(UserListItem), nextCursor: Schema.NullOr(Schema.String) })
    }),
    HttpApiEndpoint.get("get", "/v1/users/:customerRefId", {
      params: customerRefIdParam,
      success: Schema.Struct({ user: UserObject, wallets: Schema.Array(WalletObject) }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.patch("update", "/v1/users/:customerRefId", {
      params: customerRefIdParam,
      payload: PatchUserBody,
      success: UserObject,
      error: [NotFoundWire, EmailTakenWire, InvalidStateWire]
    }),
    HttpApiEndpoint.get("balances", "/v1/users/:customerRefId/balances", {
      params: customerRefIdParam,
      success: UserBalances,
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.post("depositAddress", "/v1/users/:customerRefId/deposit_address", {
      params: customerRefIdParam,
      payload: DepositAddressBody,
      success: DepositAddressResponse,
      error: [
        ForbiddenWire,
        EmailTakenWire,
        LimitExceededWire,
        NetworkDisabledWire,
        RateLimitedWire,
        WalletLimitReachedWire,
        SignerUnavailableWire
      ]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Users", description: "End users of the tenant (spec 4.2)" }))
{}
