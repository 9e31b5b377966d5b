/**
 * Tenant settings (operator-interface.md, "Tenant settings"): every field optional, absent = platform default.
 * Stored as JSON in `tenants.settings`; amounts are raw digit strings there as on the wire.
 */
import { Schema } from "effect"
import { RawAmount } from "../domain/RawAmount.ts"

export const walletsPerFamilyDefault = 10
export const walletCreationsPer24hDefault = 5

const AmountByAsset = Schema.Record(Schema.String, RawAmount)

export const AssetLimits = Schema.Struct({
  single: Schema.NullOr(RawAmount),
  daily: Schema.NullOr(RawAmount)
})

export const TenantSettings = Schema.Struct({
  apiRequireUser2fa: Schema.optionalKey(Schema.Boolean),
  withdrawFees: Schema.optionalKey(AmountByAsset),
  depositFees: Schema.optionalKey(AmountByAsset),
  internalTransferFees: Schema.optionalKey(AmountByAsset),
  limits: Schema.optionalKey(Schema.Record(Schema.String, AssetLimits)),
  transferApprovalAbove: Schema.optionalKey(AmountByAsset),
  withdrawalApprovalAbove: Schema.optionalKey(AmountByAsset),
  blockedAddresses: Schema.optionalKey(Schema.Array(Schema.String)),
  walletsPerFamily: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10 }))),
  walletCreationsPer24h: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10_000 }))),
  hiddenAssets: Schema.optionalKey(Schema.Array(Schema.String))
}).annotate({ identifier: "TenantSettings" })
export type TenantSettings = typeof TenantSettings.Type

export const decodeStoredSettings = Schema.decodeUnknownSync(TenantSettings)
export const decodeSettings = Schema.decodeUnknownEffect(TenantSettings)
export const encodeSettings = Schema.encodeSync(TenantSettings)

/**
 * A PATCH of settings is merged into the stored (encoded) settings: top-level keys replace, null removes the key
 * (back to the platform default). The result is decoded as a whole, so a bad value fails the PATCH.
 */
export const mergeEncodedSettings = (
  current: Record<string, unknown>,
  patch: Record<string, unknown>
): Record<string, unknown> => {
  const merged: Record<string, unknown> = { ...current }
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete merged[key]
    else if (value !== undefined) merged[key] = value
  }
  return merged
}
