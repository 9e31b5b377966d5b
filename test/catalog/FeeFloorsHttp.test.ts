/**
 * Fee rule 3 and the prices over HTTP (spec section 2 "Fee computation rules", 4.4 `estimate_fee`; decisions.md
 * "Operating wallets, sweeps, gas and fee floors": Dynamic floor, Prices; operator-interface.md `PUT /ops/prices`),
 * on the simulated chain: the withdrawal floor follows the network fees of the last 20 COMPLETED withdrawals, and
 * `/v1/supported_assets`, `estimate_fee` and the withdrawal itself show and charge one value; the operator's prices
 * change a token's fee at once, stored with who set them and when.
 *
 * This file's service recomputes a network's cost on every read (FeeFloorRefreshMillis 0, "a fresh cache"), so a
 * change of the chain shows at once; the 60 s bound itself is held on the TestClock in FeeFloors.test.ts.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { OpsAddress } from "../../src/App.ts"
import { FeeFloorRefreshMillis } from "../../src/catalog/FeeFloors.ts"
import { assetFees } from "../support/Funds.ts"
import {
  makeTestAppLayer,
  opsRequest,
  provisionTenant,
  rawRequest,
  type TestTenant
} from "../support/TestApp.ts"
import { call, devnet, expectError, fund, mine, settings, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"

const gwei = 10n ** 9n
const bnb = "BSC_TESTNET_BNB"
const bnbTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
/** Above BSC_TESTNET_BNB's minWithdraw. */
const bnbAmount = 10n ** 17n
/** BSC_TESTNET credits and completes at 15 confirmations. */
const bscConfirmations = 15

const ceilDiv = (numerator: bigint, denominator: bigint) => (numerator + denominator - 1n) / denominator
/** × (1 + feeSafetyFactor 0.2), rounded up. */
const withMargin = (cost: bigint) => ceilDiv(cost * 12n, 10n)

const estimateFee = (tenant: TestTenant, walletId: string, assetId: string, to: string, amount: bigint) =>
  Effect.map(
    call(tenant, "POST", "/v1/transactions/estimate_fee", {
      assetId,
      sourceWalletId: walletId,
      amountRaw: amount.toString(),
      destination: to
    }),
    (response) => {
      assert.strictEqual(response.status, 200, response.text)
      return BigInt(response.json.feeRaw)
    }
  )

const ops = opsRequest

/** Submits withdrawals of `bnb`, waits until each is broadcast, mines them final, waits until each is COMPLETED. */
const completeWithdrawals = (tenant: TestTenant, walletId: string, count: number, tag: string) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    for (let index = 0; index < count; index++) {
      const response = yield* withdraw(tenant, walletId, bnb, bnbTo, bnbAmount, `${tag}-${index}`)
      assert.strictEqual(response.status, 202, response.text)
      ids.push(response.json.transactionId)
    }
    for (const id of ids) yield* waitFor(tenant, id, "CONFIRMING")
    yield* mine("BSC_TESTNET", bscConfirmations)
    const completed: Array<any> = []
    for (const id of ids) completed.push(yield* waitFor(tenant, id, "COMPLETED"))
    return completed
  })

const appLayer = makeTestAppLayer().pipe(Layer.provide(Layer.succeed(FeeFloorRefreshMillis)(0)))

layer(appLayer, { excludeTestServices: true })("fee rule 3 and prices over HTTP", (it) => {
  describe("the withdrawal floor follows the recent network fees", () => {
    it.effect("highest networkFeeRaw of the last 20 COMPLETED withdrawals × 1.2; estimate_fee, /v1/supported_assets and the charged fee agree", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "ann", "BSC_TESTNET")
        yield* fund(tenant, payer.walletId, bnb, 10n ** 20n)
        const staticFloor = 500_000_000_000_000n // the catalog's withdrawFeeFloor of BSC_TESTNET_BNB
        const cheap = 21_000n * gwei // the simulated network's default fee for one transfer
        const dear = 21_000n * 100n * gwei // 100 gwei per gas: 2.1e15 wei, above the static floor once × 1.2

        // No history: the network's estimate × 1.2 (2.52e13) is below the catalog floor, which holds.
        assert.strictEqual((yield* assetFees(tenant, bnb)).withdraw, staticFloor)

        // Fees rise: with no history yet the estimate itself is the floor.
        yield* devnet("BSC_TESTNET", { networkFeeRaw: dear })
        assert.strictEqual((yield* assetFees(tenant, bnb)).withdraw, withMargin(dear))
        const dearOnes = yield* completeWithdrawals(tenant, payer.walletId, 2, "dear")
        for (const done of dearOnes) {
          assert.deepStrictEqual([done.feeRaw, done.networkFeeRaw], [withMargin(dear).toString(), dear.toString()])
        }

        // Fees fall back, but the last 20 completed withdrawals include the dear ones: the floor stays.
        yield* devnet("BSC_TESTNET", { networkFeeRaw: cheap })
        const floor = withMargin(dear)
        const shown = (yield* assetFees(tenant, bnb)).withdraw
        const quoted = yield* estimateFee(tenant, payer.walletId, bnb, bnbTo, bnbAmount)
        const submitted = yield* withdraw(tenant, payer.walletId, bnb, bnbTo, bnbAmount, "charged")
        assert.strictEqual(submitted.status, 202, submitted.text)
        assert.deepStrictEqual([shown, quoted, BigInt(submitted.json.feeRaw)], [floor, floor, floor])
        assert.strictEqual(submitted.json.reservedRaw, (bnbAmount + floor).toString())

        // 19 cheap completions (the one above among them): one dear withdrawal is still among the last 20.
        yield* waitFor(tenant, submitted.json.transactionId, "CONFIRMING")
        yield* completeWithdrawals(tenant, payer.walletId, 18, "cheap")
        assert.strictEqual((yield* getStatus(tenant, submitted.json.transactionId)), "COMPLETED")
        assert.strictEqual((yield* assetFees(tenant, bnb)).withdraw, floor, "19 cheap + 1 dear: still the dear one")
        // The 20th cheap one pushes the last dear one out: the static floor again (2.52e13 × is below it).
        yield* completeWithdrawals(tenant, payer.walletId, 1, "twentieth")
        assert.strictEqual((yield* assetFees(tenant, bnb)).withdraw, staticFloor)
        assert.strictEqual(yield* estimateFee(tenant, payer.walletId, bnb, bnbTo, bnbAmount), staticFloor)
      }))

    it.effect("a tenant's own fee below the dynamic floor is raised to it (fee rule 1); above it, the tenant's fee holds", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "bea", "TRON_NILE")
        const trx = "TRON_NILE_TRX"
        const to = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"
        const networkFee = BigInt((yield* devnet("TRON_NILE")).networkFeeRaw)
        yield* settings(tenant, { withdrawFees: { [trx]: "1" } })
        assert.strictEqual(yield* estimateFee(tenant, payer.walletId, trx, to, 20_000_000n), withMargin(networkFee))
        yield* settings(tenant, { withdrawFees: { [trx]: "9000000" } })
        assert.strictEqual(yield* estimateFee(tenant, payer.walletId, trx, to, 20_000_000n), 9_000_000n)
      }))
  })

  describe("the deposit floor", () => {
    it.effect("no sweep yet: one sweep's estimate × 1.2; the wallet's addresses and the assets show it, and crediting deducts it", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const trx = "TRON_NILE_TRX"
        const { walletId, address } = yield* walletOf(tenant, "dee", "TRON_NILE")
        const networkFee = 3_000_000n
        yield* devnet("TRON_NILE", { networkFeeRaw: networkFee })
        const floor = withMargin(networkFee)
        assert.strictEqual((yield* assetFees(tenant, trx)).deposit, floor)
        const addresses = yield* call(tenant, "GET", `/v1/wallets/${walletId}/addresses`)
        assert.strictEqual(addresses.status, 200, addresses.text)
        const listed = (addresses.json as Array<any>).find((entry) => entry.networkKey === "TRON_NILE")
        assert.strictEqual(listed.supportedAssets.find((asset: any) => asset.assetId === trx).depositFeeRaw, floor.toString())

        const amount = 10_000_000n
        const sent = yield* ops("POST", "/ops/devnet/TRON_NILE/transfers", { to: address, assetId: trx, amountRaw: amount.toString() })
        assert.strictEqual(sent.status, 200, sent.text)
        // TRON credits once solidified, 19 blocks behind the head.
        yield* mine("TRON_NILE", 20)
        const list = yield* call(tenant, "GET", `/v1/transactions?walletId=${walletId}&kind=DEPOSIT`)
        const [deposit] = list.json.items
        assert.deepStrictEqual(
          [deposit.status, deposit.subStatus, deposit.feeRaw, deposit.netAmountRaw],
          ["COMPLETED", null, floor.toString(), (amount - floor).toString()]
        )
        yield* devnet("TRON_NILE", { networkFeeRaw: 1_100_000n })
      }))
  })

  describe("prices (PUT /ops/prices)", () => {
    it.effect("a token's fee follows the operator's prices at once; GET shows who set them and when; each change audited", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "cy", "ETH_SEPOLIA")
        const usdt = "ETH_SEPOLIA_USDT"
        const to = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
        // 100 gwei per gas: a token transfer (65,000 gas, whole wei per gas) costs about 0.0021 ETH, i.e. above the
        // token's 3 USDT floor once converted at 3000 USD per ETH.
        const fee = 21_000n * 100n * gwei
        yield* devnet("ETH_SEPOLIA", { networkFeeRaw: fee })
        const tokenCost = 65_000n * ceilDiv(fee, 65_000n)
        /** ceil(cost × 1.2 × ethUsd / usdtUsd × 10^6 / 10^18), prices as [numerator, denominator]. */
        const inUsdt = (cost: bigint, [ethNum, ethDen]: [bigint, bigint], [usdtNum, usdtDen]: [bigint, bigint]) =>
          ceilDiv(cost * 12n * ethNum * usdtDen * 10n ** 6n, 10n * ethDen * usdtNum * 10n ** 18n)

        const atCatalog = yield* assetFees(tenant, usdt)
        assert.strictEqual(atCatalog.withdraw, inUsdt(tokenCost, [3000n, 1n], [1n, 1n]))
        assert.strictEqual(atCatalog.deposit, inUsdt(tokenCost + fee, [3000n, 1n], [1n, 1n]), "a sweep plus its top-up")

        const put = yield* ops("PUT", "/ops/prices", { ETH_SEPOLIA_ETH: "4500.5", [usdt]: "0.998" }, { "x-operator": "alice" })
        assert.strictEqual(put.status, 200, put.text)
        assert.deepStrictEqual(
          [put.json.ETH_SEPOLIA_ETH.priceUsd, put.json.ETH_SEPOLIA_ETH.source, put.json.ETH_SEPOLIA_ETH.setBy],
          ["4500.5", "OPERATOR", "alice"]
        )
        assert.match(put.json[usdt].setAt, /^\d{4}-\d{2}-\d{2}T/)
        assert.deepStrictEqual(put.json.BSC_TESTNET_BNB, { priceUsd: "600", source: "CATALOG", setAt: null, setBy: null })
        assert.deepStrictEqual((yield* ops("GET", "/ops/prices")).json, put.json)

        // At once, in every view: the asset, estimate_fee, and the withdrawal itself.
        const priced = inUsdt(tokenCost, [45005n, 10n], [998n, 1000n])
        assert.notStrictEqual(priced, atCatalog.withdraw)
        assert.strictEqual((yield* assetFees(tenant, usdt)).withdraw, priced)
        assert.strictEqual(yield* estimateFee(tenant, payer.walletId, usdt, to, 20_000_000n), priced)
        yield* fund(tenant, payer.walletId, usdt, 10n ** 9n)
        const submitted = yield* withdraw(tenant, payer.walletId, usdt, to, 20_000_000n, "priced")
        assert.strictEqual(submitted.status, 202, submitted.text)
        assert.strictEqual(submitted.json.feeRaw, priced.toString())

        const audit = yield* sql<{ asset_id: string; price_usd: string | null; previous_price_usd: string | null; set_by: string }>`
          SELECT asset_id, price_usd::text AS price_usd, previous_price_usd::text AS previous_price_usd, set_by
          FROM price_changes ORDER BY id`
        assert.deepStrictEqual(audit.map((row) => [row.asset_id, row.price_usd, row.previous_price_usd, row.set_by]), [
          ["ETH_SEPOLIA_ETH", "4500.5", null, "alice"],
          [usdt, "0.998", null, "alice"]
        ])

        // null drops the operator's price: the catalog's again (audited too; no X-Operator: the token holder).
        const reset = yield* ops("PUT", "/ops/prices", { ETH_SEPOLIA_ETH: null, [usdt]: null })
        assert.strictEqual(reset.status, 200, reset.text)
        assert.deepStrictEqual(reset.json.ETH_SEPOLIA_ETH, { priceUsd: "3000", source: "CATALOG", setAt: null, setBy: null })
        assert.strictEqual((yield* assetFees(tenant, usdt)).withdraw, atCatalog.withdraw)
        const [last] = yield* sql<{ price_usd: string | null; previous_price_usd: string; set_by: string }>`
          SELECT price_usd::text AS price_usd, previous_price_usd::text AS previous_price_usd, set_by
          FROM price_changes WHERE asset_id = 'ETH_SEPOLIA_ETH' ORDER BY id DESC LIMIT 1`
        assert.deepStrictEqual(last, { price_usd: null, previous_price_usd: "4500.5", set_by: "ops-token" })
        yield* devnet("ETH_SEPOLIA", { networkFeeRaw: 21_000n * gwei })
      }))

    it.effect("bad prices: 422 with nothing stored (all or nothing); unknown asset 422 ASSET_NOT_SUPPORTED; no token 401", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const before = (yield* ops("GET", "/ops/prices")).json
        const changeCount = Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM price_changes`, ([row]) => row!.n)
        const changesBefore = yield* changeCount
        for (const bad of ["abc", "0", "0.000", "-1", "1e3", "1.0000000000000000001", " 1", ""]) {
          expectError(yield* ops("PUT", "/ops/prices", { BSC_TESTNET_BNB: "700", BSC_TESTNET_USDT: bad }), 422, "BAD_REQUEST")
        }
        expectError(yield* ops("PUT", "/ops/prices", { BSC_TESTNET_BNB: 700 }), 422, "BAD_REQUEST")
        expectError(yield* ops("PUT", "/ops/prices", {}), 422, "BAD_REQUEST")
        expectError(yield* ops("PUT", "/ops/prices", { BSC_TESTNET_BNB: "700", DOGE: "0.1" }), 422, "ASSET_NOT_SUPPORTED")
        const anonymous = yield* Effect.flatMap(OpsAddress, (baseUrl) =>
          rawRequest({ baseUrl, method: "PUT", target: "/ops/prices", body: JSON.stringify({ BSC_TESTNET_BNB: "1" }) }))
        expectError(anonymous, 401, "UNAUTHORIZED")
        assert.deepStrictEqual((yield* ops("GET", "/ops/prices")).json, before)
        assert.strictEqual(yield* changeCount, changesBefore)
      }))
  })
})

const getStatus = (tenant: TestTenant, id: string) =>
  Effect.map(call(tenant, "GET", `/v1/transactions/${id}`), (response) => response.json.status as string)
