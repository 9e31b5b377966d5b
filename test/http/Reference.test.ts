/**
 * Reference data (spec 4.1, section 2 "Network object", "Asset object", fee rules 1-2): only the tenant's enabled
 * networks, every asset field, hidden assets excluded, fees from the tenant's settings or the catalog floor. The
 * filtering rules the test catalog cannot show (DISABLED assets, disabled networks) are checked on the pure functions.
 */
import { assert, describe, it as plain, layer } from "@effect/vitest"
import { Effect } from "effect"
import { PublicAddress } from "../../src/App.ts"
import { Catalog, type CatalogFile } from "../../src/catalog/Catalog.ts"
import { assetObject, listedAssets, tenantNetworks } from "../../src/catalog/TenantCatalog.ts"
import { decodeStoredSettings } from "../../src/tenants/TenantSettings.ts"
import type { Tenant } from "../../src/tenants/Tenants.ts"
import preproduction from "../../src/catalog/preproduction.json" with { type: "json" }
import { assertError, atRealisticTime, freshTime } from "../support/Signing.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const get = (tenant: TestTenant, target: string) =>
  Effect.flatMap(PublicAddress, (baseUrl) => rawRequest({ baseUrl, method: "GET", target, tenant }))

const ok = (response: { readonly status: number; readonly text: string; readonly json: any }) => {
  assert.strictEqual(response.status, 200, response.text)
  return response.json
}

const setSettings = (tenantId: string, settings: Record<string, unknown>) =>
  Effect.flatMap(opsClient, (ops) => ops.tenants.update({ params: { tenantId }, payload: { settings } })).pipe(
    Effect.orDie
  )

/**
 * Fee rule 3 with no history yet: the simulated network's fee estimate for one transaction (EVM 21,000 gas at 1 gwei,
 * SOL 5,000 lamports) × (1 + feeSafetyFactor 0.2). It raises the native coins' deposit fee above their catalog floor
 * of 0; every other default fee of these networks stays at its catalog floor, which is above its converted cost.
 */
const nativeDepositFloors: Record<string, bigint> = {
  ETH_SEPOLIA_ETH: (21_000n * 10n ** 9n * 12n) / 10n,
  BSC_TESTNET_BNB: (21_000n * 10n ** 9n * 12n) / 10n,
  SOL_DEVNET_SOL: (5_000n * 12n) / 10n
}

const assetKeys = [
  "assetId",
  "chainFamily",
  "contract",
  "dailyLimitCap",
  "decimals",
  "depositFeeFloor",
  "depositFeeRaw",
  "iconUrl",
  "kind",
  "minDeposit",
  "minWithdraw",
  "name",
  "networkDepositEnabled",
  "networkKey",
  "networkWithdrawEnabled",
  "singleLimitCap",
  "status",
  "symbol",
  "tokenProgram",
  "withdrawEnabled",
  "withdrawFeeFloor",
  "withdrawFeeRaw"
]
const rawAmountPattern = /^(0|[1-9][0-9]*)$/
const amountFields = ["minDeposit", "minWithdraw", "withdrawFeeFloor", "depositFeeFloor", "depositFeeRaw", "withdrawFeeRaw"]

const catalogNetwork = (networkKey: string) => preproduction.networks.find((network) => network.networkKey === networkKey)!
const catalogAsset = (assetId: string) => preproduction.assets.find((asset) => asset.assetId === assetId)!

layer(atRealisticTime(makeTestAppLayer()))("reference data (spec 4.1)", (it) => {
  it.effect("GET /v1/networks: only the tenant's enabled networks, as network objects", () =>
    Effect.gen(function*() {
      yield* freshTime
      const subset = yield* provisionTenant({ networks: ["BTC_TESTNET", "ETH_SEPOLIA"] })
      const networks = ok(yield* get(subset, "/v1/networks"))
      // Catalog order, not request order.
      assert.deepStrictEqual(networks, [
        { networkKey: "ETH_SEPOLIA", chainFamily: "EVM", displayName: "Ethereum Sepolia", isTestnet: true, enabled: true },
        { networkKey: "BTC_TESTNET", chainFamily: "BTC", displayName: "Bitcoin Testnet", isTestnet: true, enabled: true }
      ])
      const everything = yield* provisionTenant()
      const all = ok(yield* get(everything, "/v1/networks"))
      assert.deepStrictEqual(all.map((network: any) => network.networkKey), preproduction.networks.map((n) => n.networkKey))
      for (const network of all) {
        const source = catalogNetwork(network.networkKey)
        assert.deepStrictEqual(network, {
          networkKey: source.networkKey,
          chainFamily: source.chainFamily,
          displayName: source.displayName,
          isTestnet: source.isTestnet,
          enabled: true
        })
      }
    }))

  it.effect("GET /v1/networks follows an operator change of the tenant's networks at once", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ networks: ["SOL_DEVNET"] })
      assert.deepStrictEqual(ok(yield* get(tenant, "/v1/networks")).map((n: any) => n.networkKey), ["SOL_DEVNET"])
      const ops = yield* opsClient
      yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { networks: ["TRON_NILE"] } })
      assert.deepStrictEqual(ok(yield* get(tenant, "/v1/networks")).map((n: any) => n.networkKey), ["TRON_NILE"])
      assert.deepStrictEqual(
        ok(yield* get(tenant, "/v1/supported_assets")).map((a: any) => a.assetId),
        ["TRON_NILE_TRX", "TRON_NILE_USDT"]
      )
      yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { networks: [] } })
      assert.deepStrictEqual(ok(yield* get(tenant, "/v1/networks")), [])
      assert.deepStrictEqual(ok(yield* get(tenant, "/v1/supported_assets")), [])
    }))

  it.effect("GET /v1/supported_assets: assets of the tenant's networks only, every field of the asset object", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ networks: ["ETH_SEPOLIA", "SOL_DEVNET"] })
      const assets = ok(yield* get(tenant, "/v1/supported_assets"))
      assert.deepStrictEqual(
        assets.map((asset: any) => asset.assetId),
        ["ETH_SEPOLIA_ETH", "ETH_SEPOLIA_USDT", "SOL_DEVNET_SOL", "SOL_DEVNET_USDC"]
      )
      for (const asset of assets) {
        assert.deepStrictEqual(Object.keys(asset).sort(), assetKeys, asset.assetId)
        const source = catalogAsset(asset.assetId)
        const network = catalogNetwork(source.networkKey)
        assert.deepStrictEqual(asset, {
          assetId: source.assetId,
          networkKey: source.networkKey,
          chainFamily: network.chainFamily,
          kind: source.kind,
          contract: source.contract,
          tokenProgram: source.tokenProgram,
          symbol: source.symbol,
          name: source.name,
          decimals: source.decimals,
          status: source.status,
          withdrawEnabled: source.withdrawEnabled,
          networkWithdrawEnabled: network.withdrawEnabled,
          networkDepositEnabled: network.depositEnabled,
          minDeposit: source.minDeposit,
          minWithdraw: source.minWithdraw,
          withdrawFeeFloor: source.withdrawFeeFloor,
          depositFeeFloor: source.depositFeeFloor,
          singleLimitCap: source.singleLimitCap,
          dailyLimitCap: source.dailyLimitCap,
          iconUrl: source.iconUrl,
          // No tenant fee: the catalog floors, raised to the dynamic floor (fee rule 3) where that is higher.
          depositFeeRaw: (nativeDepositFloors[source.assetId] ?? BigInt(source.depositFeeFloor)).toString(),
          withdrawFeeRaw: source.withdrawFeeFloor
        })
        for (const field of amountFields) assert.match(asset[field], rawAmountPattern, `${asset.assetId}.${field}`)
        for (const field of ["singleLimitCap", "dailyLimitCap"]) {
          if (asset[field] !== null) assert.match(asset[field], rawAmountPattern)
        }
      }
      const usdc = assets.find((asset: any) => asset.assetId === "SOL_DEVNET_USDC")
      assert.strictEqual(usdc.kind, "TOKEN")
      assert.isString(usdc.contract)
      assert.isString(usdc.tokenProgram)
      const eth = assets.find((asset: any) => asset.assetId === "ETH_SEPOLIA_ETH")
      assert.strictEqual(eth.kind, "NATIVE")
      assert.isNull(eth.contract)
      assert.isNull(eth.tokenProgram)
    }))

  it.effect("GET /v1/supported_assets: assets hidden by the tenant are excluded, and return when unhidden", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ networks: ["TRON_NILE", "BTC_TESTNET"] })
      yield* setSettings(tenant.tenantId, { hiddenAssets: ["TRON_NILE_USDT", "ETH_SEPOLIA_ETH"] })
      assert.deepStrictEqual(
        ok(yield* get(tenant, "/v1/supported_assets")).map((asset: any) => asset.assetId),
        ["TRON_NILE_TRX", "BTC_TESTNET_BTC"]
      )
      yield* setSettings(tenant.tenantId, { hiddenAssets: null })
      assert.deepStrictEqual(
        ok(yield* get(tenant, "/v1/supported_assets")).map((asset: any) => asset.assetId),
        ["TRON_NILE_TRX", "TRON_NILE_USDT", "BTC_TESTNET_BTC"]
      )
    }))

  it.effect("fee rules 1-2: the tenant's withdrawal and deposit fees replace the floors, per asset", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ networks: ["ETH_SEPOLIA", "BSC_TESTNET"] })
      yield* setSettings(tenant.tenantId, {
        withdrawFees: { ETH_SEPOLIA_USDT: "7000000", BSC_TESTNET_BNB: "1" },
        depositFees: { ETH_SEPOLIA_USDT: "900000", BSC_TESTNET_USDT: "0" }
      })
      const byId = new Map<string, any>(
        ok(yield* get(tenant, "/v1/supported_assets")).map((asset: any) => [asset.assetId, asset])
      )
      const usdt = byId.get("ETH_SEPOLIA_USDT")
      assert.strictEqual(usdt.withdrawFeeRaw, "7000000")
      assert.strictEqual(usdt.depositFeeRaw, "900000")
      // The floors themselves are still the platform defaults.
      assert.strictEqual(usdt.withdrawFeeFloor, catalogAsset("ETH_SEPOLIA_USDT").withdrawFeeFloor)
      assert.strictEqual(usdt.depositFeeFloor, catalogAsset("ETH_SEPOLIA_USDT").depositFeeFloor)
      // A tenant fee below the catalog floor is the tenant's choice, but never below the dynamic floor (fee rule 3):
      // BNB, the estimate of one transfer × 1.2; the BEP-20 deposit, one token sweep (65,000 gas at the simulated
      // price, rounded up to a whole wei per gas) plus its native top-up, × 1.2, at 600 USD per BNB and 1 per USDT.
      assert.strictEqual(byId.get("BSC_TESTNET_BNB").withdrawFeeRaw, nativeDepositFloors.BSC_TESTNET_BNB!.toString())
      const tokenSweep = 65_000n * ((21_000n * 10n ** 9n + 64_999n) / 65_000n)
      const topUp = 21_000n * 10n ** 9n
      assert.strictEqual(
        byId.get("BSC_TESTNET_USDT").depositFeeRaw,
        (((tokenSweep + topUp) * 12n * 600n + 9n) / 10n).toString()
      )
      // Assets the tenant did not configure use the floors.
      assert.strictEqual(byId.get("ETH_SEPOLIA_ETH").withdrawFeeRaw, catalogAsset("ETH_SEPOLIA_ETH").withdrawFeeFloor)
      assert.strictEqual(byId.get("BSC_TESTNET_USDT").withdrawFeeRaw, catalogAsset("BSC_TESTNET_USDT").withdrawFeeFloor)
      assert.strictEqual(byId.get("BSC_TESTNET_BNB").depositFeeRaw, nativeDepositFloors.BSC_TESTNET_BNB!.toString())
      // Removing the setting returns to the floors.
      yield* setSettings(tenant.tenantId, { withdrawFees: null })
      const after = ok(yield* get(tenant, "/v1/supported_assets"))
        .find((asset: any) => asset.assetId === "ETH_SEPOLIA_USDT")
      assert.strictEqual(after.withdrawFeeRaw, catalogAsset("ETH_SEPOLIA_USDT").withdrawFeeFloor)
      assert.strictEqual(after.depositFeeRaw, "900000")
    }))

  it.effect("raw amounts up to 256 bits stay exact digit strings", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ networks: ["ETH_SEPOLIA"] })
      const max = (2n ** 256n - 1n).toString()
      yield* setSettings(tenant.tenantId, { withdrawFees: { ETH_SEPOLIA_ETH: max } })
      const eth = ok(yield* get(tenant, "/v1/supported_assets")).find((asset: any) => asset.assetId === "ETH_SEPOLIA_ETH")
      assert.strictEqual(eth.withdrawFeeRaw, max)
    }))

  it.effect("reference data is per tenant: another tenant's settings and networks do not leak", () =>
    Effect.gen(function*() {
      yield* freshTime
      const first = yield* provisionTenant({ networks: ["ETH_SEPOLIA"] })
      const second = yield* provisionTenant({ networks: ["ETH_SEPOLIA", "TRON_NILE"] })
      yield* setSettings(first.tenantId, { withdrawFees: { ETH_SEPOLIA_ETH: "42" }, hiddenAssets: ["ETH_SEPOLIA_USDT"] })
      const theirs = ok(yield* get(second, "/v1/supported_assets"))
      assert.strictEqual(theirs.find((asset: any) => asset.assetId === "ETH_SEPOLIA_ETH").withdrawFeeRaw,
        catalogAsset("ETH_SEPOLIA_ETH").withdrawFeeFloor)
      assert.isDefined(theirs.find((asset: any) => asset.assetId === "ETH_SEPOLIA_USDT"))
      assert.deepStrictEqual(ok(yield* get(first, "/v1/networks")).map((n: any) => n.networkKey), ["ETH_SEPOLIA"])
    }))

  it.effect("reference endpoints require a signature", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      for (const target of ["/v1/networks", "/v1/supported_assets"]) {
        assertError(yield* rawRequest({ baseUrl, method: "GET", target }), 401, "UNAUTHORIZED", "authentication required")
      }
    }))
})

describe("tenant catalog rules (spec 4.1 \"Listed assets\")", () => {
  const file: CatalogFile = {
    networks: [
      {
        networkKey: "ON",
        chainFamily: "EVM",
        displayName: "On",
        isTestnet: true,
        enabled: true,
        depositEnabled: false,
        withdrawEnabled: true,
        newWalletsEnabled: true,
        confirmations: { mode: "confirmations", n: 3 },
        btcNetwork: null,
        evmChainId: 31337,
        nativeAssetId: "ON_NATIVE",
        blockTimeMillis: 1000,
        feeRateCap: 1n,
        feeSafetyFactor: 0.2
      },
      {
        networkKey: "OFF",
        chainFamily: "SOL",
        displayName: "Off",
        isTestnet: true,
        enabled: false,
        depositEnabled: true,
        withdrawEnabled: true,
        newWalletsEnabled: true,
        confirmations: { mode: "finalized" },
        btcNetwork: null,
        evmChainId: null,
        nativeAssetId: "OFF_NATIVE",
        blockTimeMillis: 1000,
        feeRateCap: 1n,
        feeSafetyFactor: 0.2
      }
    ],
    assets: [
      asset("ON_NATIVE", "ON", "ENABLED", null),
      asset("ON_PAUSED", "ON", "DEPOSIT_PAUSED", "0xpaused"),
      asset("ON_DISABLED", "ON", "DISABLED", "0xdisabled"),
      asset("ON_HIDDEN", "ON", "ENABLED", "0xhidden"),
      asset("OFF_NATIVE", "OFF", "ENABLED", null)
    ]
  }
  const catalog = Catalog.make(file)
  const tenant: Tenant = {
    id: "01900000-0000-7000-8000-000000000000",
    seq: 1,
    name: "rules",
    status: "ACTIVE",
    subscriptionExpiresAt: null,
    settings: decodeStoredSettings({ hiddenAssets: ["ON_HIDDEN"], depositFees: { ON_PAUSED: "5" } }),
    settingsEncoded: {},
    networks: ["ON", "OFF"],
    createdAt: new Date(0)
  }

  plain("only enabled networks that are also enabled for the tenant", () => {
    assert.deepStrictEqual(tenantNetworks(catalog, tenant).map((network) => network.networkKey), ["ON"])
    assert.deepStrictEqual(tenantNetworks(catalog, { ...tenant, networks: ["OFF"] }), [])
  })

  plain("assets: status ENABLED or DEPOSIT_PAUSED, on listed networks, not hidden", () => {
    assert.deepStrictEqual(listedAssets(catalog, tenant).map((asset) => asset.assetId), ["ON_NATIVE", "ON_PAUSED"])
  })

  plain("asset object: status, network switches and tenant fee", () => {
    const paused = assetObject(catalog, tenant, catalog.asset("ON_PAUSED")!, { withdraw: 0n, deposit: 0n })
    assert.strictEqual(paused.status, "DEPOSIT_PAUSED")
    assert.isFalse(paused.networkDepositEnabled)
    assert.isTrue(paused.networkWithdrawEnabled)
    assert.strictEqual(paused.depositFeeRaw, "5")
    // Rule 1-2: the dynamic floor wins when it is higher.
    const dynamic = assetObject(catalog, tenant, catalog.asset("ON_PAUSED")!, { withdraw: 10n ** 30n, deposit: 6n })
    assert.strictEqual(dynamic.withdrawFeeRaw, (10n ** 30n).toString())
    assert.strictEqual(dynamic.depositFeeRaw, "6")
  })
})

function asset(assetId: string, networkKey: string, status: "ENABLED" | "DEPOSIT_PAUSED" | "DISABLED", contract: string | null) {
  return {
    assetId,
    networkKey,
    kind: contract === null ? "NATIVE" as const : "TOKEN" as const,
    contract,
    tokenProgram: null,
    symbol: assetId,
    name: assetId,
    decimals: 6,
    status,
    withdrawEnabled: true,
    minDeposit: 1n,
    minWithdraw: 1n,
    withdrawFeeFloor: 100n,
    depositFeeFloor: 10n,
    singleLimitCap: null,
    dailyLimitCap: null,
    iconUrl: null,
    priceUsd: null,
    hotTargetRaw: 0n,
    sweepThresholdRaw: null
  }
}
