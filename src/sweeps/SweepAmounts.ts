/**
 * The arithmetic of sweeps (docs/sweeps.md), pure: the threshold below which a deposit address's balance waits, and
 * a native-coin amount in another asset's units by the catalog's USD prices.
 */
import type { CatalogAsset } from "../catalog/Catalog.ts"

/** A balance below this many times the current cost of one sweep waits for more (decisions.md, default). */
export const thresholdSweepCosts = 10n

/** The GAS wallet's recommended minimum covers this many token sweeps at the current fee (decisions.md). */
export const recommendedTokenSweeps = 20n

const priceScale = 18
const scaled = (decimal: string): bigint => {
  const [whole, fraction = ""] = decimal.split(".")
  return BigInt(whole!) * 10n ** BigInt(priceScale) + BigInt((fraction + "0".repeat(priceScale)).slice(0, priceScale))
}

/**
 * `nativeRaw` of the native coin in `asset`'s base units, rounded up, by the catalog's `priceUsd` of both; undefined
 * when either has no price (or the asset's is zero).
 */
export const nativeInAsset = (nativeRaw: bigint, native: CatalogAsset, asset: CatalogAsset): bigint | undefined => {
  if (native.assetId === asset.assetId) return nativeRaw
  if (native.priceUsd === null || asset.priceUsd === null) return undefined
  const assetPrice = scaled(asset.priceUsd)
  if (assetPrice === 0n) return undefined
  const numerator = nativeRaw * scaled(native.priceUsd) * 10n ** BigInt(asset.decimals)
  const denominator = assetPrice * 10n ** BigInt(native.decimals)
  return (numerator + denominator - 1n) / denominator
}

/**
 * The balance below which an address's asset waits: the catalog's `sweepThresholdRaw`, else 10 × the cost of one
 * sweep (for a token: its fee and its top-up's, in the native coin) in the asset's units; a token without prices
 * falls back to its `minDeposit` (a credited deposit is at least that).
 */
export const sweepThreshold = (asset: CatalogAsset, native: CatalogAsset, sweepCostNative: bigint): bigint =>
  asset.sweepThresholdRaw ??
    nativeInAsset(thresholdSweepCosts * sweepCostNative, native, asset) ??
    asset.minDeposit
