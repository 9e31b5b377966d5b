/**
 * Effective fees (spec section 2, "Fee computation rules" 1-3; decisions.md "Operating wallets, sweeps, gas and fee
 * floors", Dynamic floor): the tenant's fee, or the catalog floor when the tenant set none, raised to the dynamic
 * floor. The dynamic floor is the network's recent cost in its native coin (FeeFloors.ts gathers it) times
 * (1 + the network's `feeSafetyFactor`), converted to the asset by price and rounded up to the asset's smallest unit.
 * This module is the rule; every fee shown or charged (assets, estimate_fee, withdrawals, deposit crediting) goes
 * through it.
 */
import { inverse, multiplyCeil, onePlus, type Ratio, ratioOfNumber } from "../domain/Ratio.ts"
import type { TenantSettings } from "../tenants/TenantSettings.ts"
import type { CatalogAsset, CatalogNetwork } from "./Catalog.ts"

/** The dynamic floors of one asset, in its smallest unit (0: none, the static floors alone apply). */
export interface DynamicFloors {
  readonly withdraw: bigint
  readonly deposit: bigint
}

export const noDynamicFloor: DynamicFloors = { withdraw: 0n, deposit: 0n }

const maxOf = (left: bigint, right: bigint) => (left > right ? left : right)

/** Fee rule 1. */
export const effectiveWithdrawFee = (asset: CatalogAsset, settings: TenantSettings, dynamicFloor: bigint): bigint =>
  maxOf(settings.withdrawFees?.[asset.assetId] ?? asset.withdrawFeeFloor, dynamicFloor)

/** Fee rule 2. */
export const effectiveDepositFee = (asset: CatalogAsset, settings: TenantSettings, dynamicFloor: bigint): bigint =>
  maxOf(settings.depositFees?.[asset.assetId] ?? asset.depositFeeFloor, dynamicFloor)

/**
 * Fee rule 3's conversion: `costNative` (smallest unit of the network's native coin) × (1 + safety factor), in the
 * asset's smallest unit, rounded up. The native coin itself needs no price. A token needs both prices (USD per whole
 * coin and per whole token): without either the answer is undefined, and the static floors alone apply.
 */
export const dynamicFloor = (input: {
  readonly costNative: bigint
  readonly network: CatalogNetwork
  readonly native: CatalogAsset
  readonly asset: CatalogAsset
  readonly nativePriceUsd: Ratio | undefined
  readonly assetPriceUsd: Ratio | undefined
}): bigint | undefined => {
  const margin = onePlus(ratioOfNumber(input.network.feeSafetyFactor))
  if (input.asset.assetId === input.native.assetId) return multiplyCeil(input.costNative, margin)
  const { nativePriceUsd, assetPriceUsd } = input
  if (nativePriceUsd === undefined || assetPriceUsd === undefined) return undefined
  if (nativePriceUsd.numerator <= 0n || assetPriceUsd.numerator <= 0n) return undefined
  // cost / 10^nativeDecimals coins × nativePrice USD / assetPrice USD per token × 10^assetDecimals units per token.
  const units: Ratio = {
    numerator: 10n ** BigInt(input.asset.decimals),
    denominator: 10n ** BigInt(input.native.decimals)
  }
  return multiplyCeil(input.costNative, margin, nativePriceUsd, inverse(assetPriceUsd), units)
}
