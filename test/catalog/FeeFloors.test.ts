/**
 * Fee rule 3's dynamic floor as decisions.md settles it ("Operating wallets, sweeps, gas and fee floors": Dynamic
 * floor, Prices), on the FeeFloors service over a real database, a stub chain client and the TestClock: the 60 s
 * recompute bound, a node that stops answering, a missing price (static floors only, warned at most hourly), the
 * native coin needing no price, the deposit floor from the last 20 sweeps with their top-ups; and the exact
 * arithmetic (Ratio.ts, Fees.ts). The HTTP side (assets, estimate_fee, withdrawals, PUT /ops/prices) is in
 * test/catalog/FeeFloorsHttp.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { Catalog, type CatalogFile, loadCatalogFile } from "../../src/catalog/Catalog.ts"
import { FeeFloors } from "../../src/catalog/FeeFloors.ts"
import { dynamicFloor, effectiveWithdrawFee } from "../../src/catalog/Fees.ts"
import { PriceFeed } from "../../src/catalog/PriceFeed.ts"
import { type ChainClient, ChainClients, ChainUnavailable } from "../../src/chains/ChainClient.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { multiplyCeil, ratioOfDecimal, ratioOfNumber } from "../../src/domain/Ratio.ts"

const eth = "ETH_SEPOLIA_ETH"
const usdt = "ETH_SEPOLIA_USDT"
const gwei = 10n ** 9n

/** The stub node of ETH_SEPOLIA: a fee estimate per asset the test sets, or down. */
const makeNode = () => {
  const state = { fees: new Map<string, bigint>([[eth, 21_000n * gwei], [usdt, 65_000n * gwei]]), down: false, asked: 0 }
  const unused = Effect.die(new Error("not used by fee floors"))
  const client: ChainClient = {
    networkKey: "ETH_SEPOLIA",
    startFromGenesis: false,
    head: unused,
    block: () => unused,
    transactionState: () => unused,
    withdrawals: {
      hotWalletCovers: () => unused,
      withdrawalParameters: () => unused,
      broadcast: () => unused,
      inclusion: () => unused,
      networkFee: (assetId) =>
        Effect.suspend(() => {
          state.asked++
          return state.down
            ? Effect.fail(new ChainUnavailable({ networkKey: "ETH_SEPOLIA", message: "node down" }))
            : Effect.succeed(state.fees.get(assetId) ?? 0n)
        })
    }
  }
  const layer = Layer.succeed(ChainClients)(ChainClients.of({
    get: (networkKey) => (networkKey === "ETH_SEPOLIA" ? client : undefined),
    networkKeys: ["ETH_SEPOLIA"],
    isSimulated: () => false
  }))
  return { state, layer }
}

const database = () => Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))

/** FeeFloors over this file's database, the catalog file with `edit` applied (prices), and the stub node. */
const floorsLayer = (node: ReturnType<typeof makeNode>, edit: (catalog: CatalogFile) => CatalogFile = (catalog) => catalog) =>
  Layer.unwrap(Effect.map(loadCatalogFile("preproduction"), (file) =>
    FeeFloors.layer.pipe(
      Layer.provideMerge(PriceFeed.layer),
      Layer.provideMerge(Layer.succeed(Catalog)(Catalog.make(edit(file)))),
      Layer.provideMerge(node.layer),
      Layer.provideMerge(database())
    ))).pipe(Layer.orDie)

const withPrice = (assetId: string, priceUsd: string | null) => (catalog: CatalogFile): CatalogFile => ({
  ...catalog,
  assets: catalog.assets.map((asset) => (asset.assetId === assetId ? { ...asset, priceUsd } : asset))
})

const floorOf = (assetId: string) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    return yield* (yield* FeeFloors).floor(catalog.asset(assetId)!)
  })

/** Captures the messages of warnings logged while `effect` runs. */
const warningsDuring = <A, E, R>(effect: Effect.Effect<A, E, R>, into: Array<string>) =>
  effect.pipe(Effect.provide(Logger.layer([Logger.make((options) => {
    if (options.logLevel === "Warn") into.push(String(options.message))
  })])))

describe("fee rule 3: the dynamic floor (decisions.md, Dynamic floor)", () => {
  it.effect("no history: the network's estimate × (1 + 0.2); a token's by the two prices, rounded up; recomputed at most every 60 s (Clock)", () => {
    const node = makeNode()
    return Effect.gen(function*() {
      const first = yield* floorOf(eth)
      // Withdrawal: one transfer's estimate; deposit: one sweep of the coin (the same estimate).
      assert.deepStrictEqual(first, { withdraw: 25_200n * gwei, deposit: 25_200n * gwei })
      // USDT (6 decimals): 65,000 gwei × 1.2 = 78,000 gwei = 0.000078 ETH × 3000 USD / 1 USD = 0.234 USDT; the
      // deposit adds the top-up (one native transfer): (65,000 + 21,000) gwei × 1.2 × 3000 = 0.3096 USDT.
      assert.deepStrictEqual(yield* floorOf(usdt), { withdraw: 234_000n, deposit: 309_600n })

      node.state.fees.set(eth, 210_000n * gwei)
      yield* TestClock.adjust("59 seconds")
      assert.deepStrictEqual(yield* floorOf(eth), first, "the cost of 59 s ago still holds")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* floorOf(eth), { withdraw: 252_000n * gwei, deposit: 252_000n * gwei })
    }).pipe(Effect.provide(floorsLayer(node)))
  })

  it.effect("the node cannot answer: the last known cost stays (never a 0 floor because a node is down)", () => {
    const node = makeNode()
    return Effect.gen(function*() {
      const before = yield* floorOf(eth)
      node.state.down = true
      yield* TestClock.adjust("61 seconds")
      const warnings: Array<string> = []
      assert.deepStrictEqual(yield* warningsDuring(floorOf(eth), warnings), before)
      assert.isTrue(warnings.some((message) => message.includes("fee estimate unavailable")), warnings.join("; "))
    }).pipe(Effect.provide(floorsLayer(node)))
  })

  it.effect("a token without a price keeps its static floors, warned at most hourly; its coin's floor needs no price", () => {
    const node = makeNode()
    return Effect.gen(function*() {
      const warnings: Array<string> = []
      const catalog = yield* Catalog
      const usdtAsset = catalog.asset(usdt)!
      for (let call = 0; call < 3; call++) {
        assert.deepStrictEqual(yield* warningsDuring(floorOf(usdt), warnings), { withdraw: 0n, deposit: 0n })
        yield* TestClock.adjust("10 minutes")
      }
      assert.strictEqual(warnings.filter((message) => message.includes("no price")).length, 1, warnings.join("; "))
      yield* TestClock.adjust("31 minutes")
      yield* warningsDuring(floorOf(usdt), warnings)
      assert.strictEqual(warnings.filter((message) => message.includes("no price")).length, 2, "again after an hour")
      // Fee rule 1 then charges the static floor.
      assert.strictEqual(effectiveWithdrawFee(usdtAsset, {}, (yield* floorOf(usdt)).withdraw), usdtAsset.withdrawFeeFloor)
      // The coin converts nothing: its floor holds with or without its token's price.
      assert.deepStrictEqual(yield* floorOf(eth), { withdraw: 25_200n * gwei, deposit: 25_200n * gwei })
    }).pipe(Effect.provide(floorsLayer(node, withPrice(usdt, null))))
  })

  it.effect("a coin without a price: its own floor still holds, its tokens keep their static floors", () => {
    const node = makeNode()
    return Effect.gen(function*() {
      assert.deepStrictEqual(yield* floorOf(eth), { withdraw: 25_200n * gwei, deposit: 25_200n * gwei })
      assert.deepStrictEqual(yield* floorOf(usdt), { withdraw: 0n, deposit: 0n })
    }).pipe(Effect.provide(floorsLayer(node, withPrice(eth, null))))
  })

  it.effect("deposits: the highest cost of the last 20 COMPLETED sweeps of the asset, a token's with its top-up's fee", () => {
    const node = makeNode()
    // The real catalog layer, so networks and assets rows exist for the sweeps' foreign keys.
    const withRows = Layer.unwrap(Effect.succeed(
      FeeFloors.layer.pipe(
        Layer.provideMerge(PriceFeed.layer),
        Layer.provideMerge(Catalog.layer),
        Layer.provideMerge(AppConfig.layerTest({ serviceEnv: "preproduction" })),
        Layer.provideMerge(node.layer),
        Layer.provideMerge(database())
      )
    )).pipe(Layer.orDie)
    return Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenantId = "01a20190-0000-7000-8000-0000000fee01"
      yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${tenantId}, 'floors', '{}', now())`
      // A SWEEP row names the deposit wallet whose key signs it (sql/0015_sweeps.sql).
      const userId = "01a20190-0000-7000-8000-0000000fee02"
      const walletId = "01a20190-0000-7000-8000-0000000fee03"
      yield* sql`INSERT INTO users (id, tenant_id, seq, uid, customer_ref_id, source, created_at, updated_at)
        VALUES (${userId}, ${tenantId}, 0, '10000099', ${userId}, 'B_API', now(), now())`
      yield* sql`INSERT INTO wallets (id, tenant_id, user_id, chain_family, seq, name, is_default, status, created_at,
          updated_at)
        VALUES (${walletId}, ${tenantId}, ${userId}, 'EVM', 1, 'EVM 1', true, 'PROVISIONING', now(), now())`
      let serial = 0
      const sweep = (assetId: string, fee: bigint, minutesAgo: number, status = "COMPLETED", topUpFee?: bigint) =>
        Effect.gen(function*() {
          serial++
          const id = `01a20190-0000-7000-8000-${serial.toString().padStart(12, "0")}`
          const at = new Date(Date.UTC(2026, 0, 1) - minutesAgo * 60_000)
          // Each from its own address: at most one sweep per address is open at a time.
          yield* sql`INSERT INTO sweeps (id, tenant_id, network_key, asset_id, kind, wallet_id, from_address, to_address,
              amount, status, network_fee, created_at, updated_at)
            VALUES (${id}, ${tenantId}, 'ETH_SEPOLIA', ${assetId}, 'SWEEP', ${walletId}, ${`0xa${serial}`}, '0xb', 1,
              ${status}, ${fee.toString()}, ${at}, ${at})`
          if (topUpFee !== undefined) {
            serial++
            const topUpId = `01a20190-0000-7000-8000-${serial.toString().padStart(12, "0")}`
            yield* sql`INSERT INTO sweeps (id, tenant_id, network_key, asset_id, kind, for_sweep_id, from_address,
                to_address, amount, status, network_fee, created_at, updated_at)
              VALUES (${topUpId}, ${tenantId}, 'ETH_SEPOLIA', ${eth}, 'TOP_UP', ${id}, '0xg', ${`0xa${serial - 1}`}, 1, 'COMPLETED',
                ${topUpFee.toString()}, ${at}, ${at})`
          }
        })
      // The oldest is the most expensive, then 20 cheaper ones: only the last 20 count.
      yield* sweep(eth, 900_000n * gwei, 100)
      for (let index = 0; index < 20; index++) yield* sweep(eth, (30_000n + BigInt(index)) * gwei, 50 - index)
      // A failed sweep is no cost the platform bore.
      yield* sweep(eth, 800_000n * gwei, 1, "FAILED")
      // USDT: a sweep and its top-up together.
      yield* sweep(usdt, 70_000n * gwei, 10, "COMPLETED", 40_000n * gwei)
      yield* sweep(usdt, 100_000n * gwei, 5, "COMPLETED", 1n * gwei)

      const ethFloor = yield* floorOf(eth)
      assert.strictEqual(ethFloor.deposit, multiplyCeil(30_019n * gwei, { numerator: 6n, denominator: 5n }))
      // No completed withdrawals: the withdrawal floor is still the estimate.
      assert.strictEqual(ethFloor.withdraw, 25_200n * gwei)
      // max(70,000 + 40,000; 100,000 + 1) gwei × 1.2 × 3000 USD per ETH, in USDT's 6 decimals.
      assert.strictEqual((yield* floorOf(usdt)).deposit, (110_000n * gwei * 12n * 3000n) / (10n * 10n ** 12n))
    }).pipe(Effect.provide(withRows))
  })
})

describe("exact arithmetic (never a JS number for money)", () => {
  it("a catalog ratio is the decimal its author wrote; prices are exact decimals", () => {
    assert.deepStrictEqual(ratioOfNumber(0.2), { numerator: 2n, denominator: 10n })
    assert.deepStrictEqual(ratioOfNumber(1e-7), { numerator: 1n, denominator: 10n ** 7n })
    assert.deepStrictEqual(ratioOfNumber(3), { numerator: 3n, denominator: 1n })
    assert.deepStrictEqual(ratioOfDecimal("0.000000000000000001"), { numerator: 1n, denominator: 10n ** 18n })
    assert.deepStrictEqual(ratioOfDecimal("4500.25"), { numerator: 450025n, denominator: 100n })
  })

  it("dynamicFloor: cost × (1 + factor) × native price / asset price, adjusted for decimals, rounded up", () =>
    Effect.gen(function*() {
      const file = yield* loadCatalogFile("preproduction")
      const catalog = Catalog.make(file)
      const network = catalog.network("ETH_SEPOLIA")!
      const native = catalog.asset(eth)!
      const asset = catalog.asset(usdt)!
      const convert = (costNative: bigint, nativePrice: string, assetPrice: string) =>
        dynamicFloor({
          costNative,
          network,
          native,
          asset,
          nativePriceUsd: ratioOfDecimal(nativePrice),
          assetPriceUsd: ratioOfDecimal(assetPrice)
        })
      // 1 wei × 1.2 × 3000 = 3.6e-15 USDT: far below one unit, still 1 (rounded up, never down to 0).
      assert.strictEqual(convert(1n, "3000", "1"), 1n)
      // 10^12 wei × 1.2 × 3000 / 1 = 3.6e-3 USDT = 3600 units exactly.
      assert.strictEqual(convert(10n ** 12n, "3000", "1"), 3600n)
      // One unit more of cost rounds up.
      assert.strictEqual(convert(10n ** 12n + 1n, "3000", "1"), 3601n)
      // A token priced at 0.999 USD: 3600 / 0.999 = 3603.6 → 3604.
      assert.strictEqual(convert(10n ** 12n, "3000", "0.999"), 3604n)
      // The coin itself: no price involved, only the margin.
      assert.strictEqual(
        dynamicFloor({ costNative: 5n, network, native, asset: native, nativePriceUsd: undefined, assetPriceUsd: undefined }),
        6n
      )
      // A missing price: no dynamic floor.
      assert.isUndefined(
        dynamicFloor({ costNative: 5n, network, native, asset, nativePriceUsd: ratioOfDecimal("3000"), assetPriceUsd: undefined })
      )
    }))
})
