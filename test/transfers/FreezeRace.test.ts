/**
 * A freeze that commits between the ordered checks of spec 4.4 and the movement itself (operator-interface.md,
 * "Switches": a `FROZEN` wallet cannot send; src/transfers/Movements.ts). The operator's transaction is played by
 * a raw connection that sets the wallet `FROZEN` and holds its commit, so the request passes the early checks (the
 * freeze is not visible yet) and reaches its moving transaction while the freeze is in flight; the freeze then commits.
 * The movement must see it: 422 WALLET_NOT_ACTIVE and nothing moved. Without the in-transaction check both answered
 * 202. A payer short of funds as well hears of the freeze first: the spec's order (wallet, then balance) holds under
 * the race.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import pg from "pg"
import { call, ethWalletOf, expectError, fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"

const eth = "ETH_SEPOLIA_ETH"

const balance = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) => {
    const item = (response.json as Array<any>).find((entry) => entry.assetId === eth)
    return [item?.available, item?.frozen] as const
  })

/** The operator's freeze, uncommitted until `commit` (its row lock held meanwhile). */
const freezeInFlight = (walletId: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
      client.on("error", () => undefined)
      await client.connect()
      await client.query("BEGIN")
      await client.query("UPDATE wallets SET status = 'FROZEN' WHERE id = $1", [walletId])
      return { commit: Effect.promise(() => client.query("COMMIT")), client }
    }),
    ({ client }) => Effect.promise(() => client.end().catch(() => undefined))
  )

const raceFreeze = (tenant: TestTenant, payer: string, body: unknown) =>
  Effect.scoped(Effect.gen(function*() {
    const freeze = yield* freezeInFlight(payer)
    const request = yield* Effect.forkChild(call(tenant, "POST", "/v1/transactions", body))
    // Long enough for the request to pass its early checks and wait on the wallet row the freeze holds.
    yield* Effect.sleep("1500 millis")
    yield* freeze.commit
    return yield* Fiber.join(request)
  }))

layer(makeTestAppLayer(), { excludeTestServices: true })("a freeze committing during a movement", (it) => {
  it.effect("an internal transfer from the wallet frozen meanwhile: 422 WALLET_NOT_ACTIVE, nothing moved", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const payer = yield* ethWalletOf(tenant, "race-transfer-payer")
      const payee = yield* ethWalletOf(tenant, "race-transfer-payee")
      yield* fund(tenant, payer, eth, 1_000n)
      const response = yield* raceFreeze(tenant, payer, {
        assetId: eth,
        source: { type: "WALLET", id: payer },
        destination: { type: "WALLET", id: payee },
        amountRaw: "10",
        externalTxId: "race-transfer"
      })
      expectError(response, 422, "WALLET_NOT_ACTIVE")
      assert.deepStrictEqual(yield* balance(tenant, payer), ["1000", "0"])
      const lookup = yield* call(tenant, "GET", "/v1/transactions/external_tx_id/race-transfer")
      assert.strictEqual(lookup.status, 404, lookup.text)
    }))

  it.effect("an on-chain withdrawal from the wallet frozen meanwhile: 422 WALLET_NOT_ACTIVE, nothing frozen", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const payer = yield* ethWalletOf(tenant, "race-withdrawal-payer")
      yield* fund(tenant, payer, eth, 10n ** 18n)
      const response = yield* raceFreeze(tenant, payer, {
        assetId: eth,
        source: { type: "WALLET", id: payer },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
        amountRaw: "10000000000000000",
        externalTxId: "race-withdrawal"
      })
      expectError(response, 422, "WALLET_NOT_ACTIVE")
      assert.deepStrictEqual(yield* balance(tenant, payer), [(10n ** 18n).toString(), "0"])
      const lookup = yield* call(tenant, "GET", "/v1/transactions/external_tx_id/race-withdrawal")
      assert.strictEqual(lookup.status, 404, lookup.text)
    }))

  it.effect("frozen meanwhile and short of funds too: 422 WALLET_NOT_ACTIVE, the wallet's check comes before the balance's", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const payer = yield* ethWalletOf(tenant, "race-short-payer")
      const payee = yield* ethWalletOf(tenant, "race-short-payee")
      yield* fund(tenant, payer, eth, 5n)
      const response = yield* raceFreeze(tenant, payer, {
        assetId: eth,
        source: { type: "WALLET", id: payer },
        destination: { type: "WALLET", id: payee },
        amountRaw: "10",
        externalTxId: "race-short"
      })
      // The hold refuses before any posting is written (transfers/Movements.ts); were the overdraft seen first,
      // this would be INSUFFICIENT_BALANCE.
      expectError(response, 422, "WALLET_NOT_ACTIVE")
      assert.deepStrictEqual(yield* balance(tenant, payer), ["5", "0"])
    }))
})
