/** The sweep threshold and the price conversion it uses (docs/sweeps.md; decisions.md "Operating wallets"). */
import { describe, expect, it } from "vitest"
import type { CatalogAsset } from "../../src/catalog/Catalog.ts"
import { nativeInAsset, sweepThreshold } from "../../src/sweeps/SweepAmounts.ts"

const asset = (fields: Partial<CatalogAsset>): CatalogAsset => ({
  assetId: "X",
  networkKey: "N",
  kind: "NATIVE",
  contract: null,
  tokenProgram: null,
  symbol: "X",
  name: "X",
  decimals: 18,
  status: "ENABLED",
  withdrawEnabled: true,
  minDeposit: 1000n,
  minWithdraw: 1n,
  withdrawFeeFloor: 0n,
  depositFeeFloor: 0n,
  singleLimitCap: null,
  dailyLimitCap: null,
  iconUrl: null,
  priceUsd: null,
  hotTargetRaw: 0n,
  sweepThresholdRaw: null,
  ...fields
})

const eth = asset({ assetId: "ETH", priceUsd: "3000" })
const usdt = asset({ assetId: "USDT", kind: "TOKEN", decimals: 6, priceUsd: "1", minDeposit: 1_000_000n })

describe("sweep amounts", () => {
  it("a native amount in a token's units by the catalog prices, rounded up", () => {
    // 0.001 ETH at 3000 USD = 3 USD = 3 USDT (6 decimals).
    expect(nativeInAsset(10n ** 15n, eth, usdt)).toBe(3_000_000n)
    expect(nativeInAsset(10n ** 15n + 1n, eth, usdt)).toBe(3_000_001n)
    expect(nativeInAsset(5n, eth, eth)).toBe(5n)
    expect(nativeInAsset(10n ** 15n, eth, asset({ assetId: "P", priceUsd: null }))).toBeUndefined()
    expect(nativeInAsset(10n ** 15n, eth, asset({ assetId: "Z", priceUsd: "0" }))).toBeUndefined()
    expect(nativeInAsset(10n ** 15n, eth, asset({ assetId: "F", decimals: 6, priceUsd: "0.25" }))).toBe(12_000_000n)
  })

  it("threshold: the catalog's sweepThresholdRaw, else 10 × the cost of one sweep in the asset, else minDeposit", () => {
    expect(sweepThreshold(asset({ sweepThresholdRaw: 77n }), eth, 10n ** 15n)).toBe(77n)
    expect(sweepThreshold(eth, eth, 21_000n * 10n ** 9n)).toBe(210_000n * 10n ** 9n)
    expect(sweepThreshold(usdt, eth, 10n ** 14n)).toBe(3_000_000n)
    expect(sweepThreshold(asset({ assetId: "Q", kind: "TOKEN", minDeposit: 42n }), eth, 10n ** 14n)).toBe(42n)
  })
})
