/**
 * Effective fees (spec section 2, "Fee computation rules" 1-2): the tenant's fee, or the catalog floor when the
 * tenant set none, raised to the dynamic floor (recent on-chain cost). The dynamic floor is a seam the chain
 * watchers fill; until a network has cost history it is 0.
 */
import type { TenantSettings } from "../tenants/TenantSettings.ts"
import type { CatalogAsset } from "./Catalog.ts"

const maxOf = (left: bigint, right: bigint) => (left > right ? left : right)

export const effectiveWithdrawFee = (asset: CatalogAsset, settings: TenantSettings, dynamicFloor: bigint): bigint =>
  maxOf(settings.withdrawFees?.[asset.assetId] ?? asset.withdrawFeeFloor, dynamicFloor)

export const effectiveDepositFee = (asset: CatalogAsset, settings: TenantSettings, dynamicFloor: bigint): bigint =>
  maxOf(settings.depositFees?.[asset.assetId] ?? asset.depositFeeFloor, dynamicFloor)
