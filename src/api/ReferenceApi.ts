/** Reference data (spec 4.1 and section 2 "Network object", "Asset object"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { AssetNotSupportedWire, InternalDestinationNotAllowedWire } from "../domain/ApiError.ts"
import { ChainFamilyWire } from "./Common.ts"

export const NetworkObject = Schema.Struct({
  networkKey: Schema.String,
  chainFamily: ChainFamilyWire,
  displayName: Schema.String,
  isTestnet: Schema.Boolean,
  enabled: Schema.Boolean
}).annotate({ identifier: "Network" })
export type NetworkObject = typeof NetworkObject.Type

const RawString = Schema.String.annotate({ description: "raw amount (decimal digits)" })

export const AssetObject = Schema.Struct({
  assetId: Schema.String,
  networkKey: Schema.String,
  chainFamily: ChainFamilyWire,
  kind: Schema.Literals(["NATIVE", "TOKEN"]),
  contract: Schema.NullOr(Schema.String),
  tokenProgram: Schema.NullOr(Schema.String),
  symbol: Schema.String,
  name: Schema.String,
  decimals: Schema.Number,
  status: Schema.Literals(["ENABLED", "DEPOSIT_PAUSED"]),
  withdrawEnabled: Schema.Boolean,
  networkWithdrawEnabled: Schema.Boolean,
  networkDepositEnabled: Schema.Boolean,
  minDeposit: RawString,
  minWithdraw: RawString,
  withdrawFeeFloor: RawString,
  depositFeeFloor: RawString,
  singleLimitCap: Schema.NullOr(RawString),
  dailyLimitCap: Schema.NullOr(RawString),
  iconUrl: Schema.NullOr(Schema.String),
  depositFeeRaw: RawString,
  withdrawFeeRaw: RawString
}).annotate({ identifier: "Asset" })
export type AssetObject = typeof AssetObject.Type

export const AddressValidationResult = Schema.Struct({
  isValid: Schema.Boolean,
  normalized: Schema.optional(Schema.String),
  isInternal: Schema.Boolean
}).annotate({ identifier: "AddressValidation" })

export class ReferenceApi extends HttpApiGroup.make("reference")
  .add(
    HttpApiEndpoint.get("networks", "/v1/networks", { success: Schema.Array(NetworkObject) }),
    HttpApiEndpoint.get("supportedAssets", "/v1/supported_assets", { success: Schema.Array(AssetObject) }),
    HttpApiEndpoint.get("validateAddress", "/v1/transactions/validate_address/:assetId/:address", {
      params: { assetId: Schema.String, address: Schema.String },
      success: AddressValidationResult,
      error: [AssetNotSupportedWire, InternalDestinationNotAllowedWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Reference data", description: "Networks and assets (spec 4.1)" }))
{}
