/**
 * The daily limit under concurrency (decisions.md "Daily limit", "Which transfers limits apply to"; spec 4.4 and
 * section 8: 422 LIMIT_EXCEEDED): N parallel requests through the HTTP interface, each within the limit alone but
 * together above it, on a real PostgreSQL. Exactly as many pass as fit; the others get LIMIT_EXCEEDED and create
 * nothing. On-chain withdrawals and cross-user internal transfers share one limit per user and asset.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { call, ethWalletOf, expectError, fund, settings, transfersAtOnce } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, type RawResponse } from "../support/TestApp.ts"

const eth = "ETH_SEPOLIA_ETH"
const externalAddress = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"


/** What counts against the limit in the database: the sum the next request would see. */
const countedToday = (walletId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ total: string; n: number }>`
      SELECT coalesce(sum(amount), 0)::text AS total, count(*)::int AS n FROM transactions
      WHERE source_wallet_id = ${walletId} AND status NOT IN ('FAILED', 'REJECTED', 'CANCELLED')`
    return { total: BigInt(row!.total), count: row!.n }
  })

const outcome = (responses: ReadonlyArray<RawResponse>) => {
  const passed = responses.filter((response) => response.status === 202)
  const refused = responses.filter((response) => response.status !== 202)
  for (const response of refused) expectError(response, 422, "LIMIT_EXCEEDED", "daily limit exceeded")
  return { passed: passed.length, refused: refused.length }
}

layer(makeTestAppLayer(), { excludeTestServices: true })("daily limit under concurrency", (it) => {
  describe("N parallel requests that each fit but together exceed the limit", () => {
    it.effect("12 cross-user internal transfers of 10 against a daily limit of 50: exactly 5 pass, 7 are LIMIT_EXCEEDED", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { limits: { [eth]: { single: null, daily: "50" } } })
        const payer = yield* ethWalletOf(tenant, "payer")
        const payee = yield* ethWalletOf(tenant, "payee")
        yield* fund(tenant, payer, eth, 1_000n)
        const responses = yield* transfersAtOnce(tenant, { assetId: eth, payer, payee, amountRaw: "10" }, 12, "transfer")
        assert.deepStrictEqual(outcome(responses), { passed: 5, refused: 7 })
        assert.deepStrictEqual(yield* countedToday(payer), { total: 50n, count: 5 })
        const assets = (yield* call(tenant, "GET", `/v1/wallets/${payee}/assets`)).json as Array<any>
        assert.strictEqual(assets.find((item) => item.assetId === eth)?.available, "50")
        // The limit is spent for today: one more, alone, is refused too.
        expectError(
          yield* call(tenant, "POST", "/v1/transactions", {
            assetId: eth,
            source: { type: "WALLET", id: payer },
            destination: { type: "WALLET", id: payee },
            amountRaw: "1",
            externalTxId: "transfer-after"
          }),
          422,
          "LIMIT_EXCEEDED"
        )
      }))

    it.effect("on-chain withdrawals and internal transfers share the limit: 6 + 6 in parallel, 3 units each of a 10-unit limit, exactly 3 pass", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const unit = 10n ** 16n
        yield* settings(tenant, { limits: { [eth]: { single: null, daily: (10n * unit).toString() } } })
        const payer = yield* ethWalletOf(tenant, "mixed-payer")
        const payee = yield* ethWalletOf(tenant, "mixed-payee")
        yield* fund(tenant, payer, eth, 10n ** 18n)
        const amountRaw = (3n * unit).toString()
        const requests = Array.from({ length: 12 }, (_, index) =>
          call(tenant, "POST", "/v1/transactions", {
            assetId: eth,
            source: { type: "WALLET", id: payer },
            destination: index % 2 === 0
              ? { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: externalAddress } }
              : { type: "WALLET", id: payee },
            amountRaw,
            externalTxId: `mixed-${index}`
          }))
        const responses = yield* Effect.all(requests, { concurrency: "unbounded" })
        assert.deepStrictEqual(outcome(responses), { passed: 3, refused: 9 })
        assert.deepStrictEqual(yield* countedToday(payer), { total: 9n * unit, count: 3 })
      }))
  })
})
