/**
 * POST /v1/transactions/estimate_fee (spec 4.4, section 2 fee rules, section 8 limits, decisions.md limits): the fee
 * and settlement a withdrawal or transfer would get, and every refusal it would meet, without creating anything.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const evmRecipient = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const evmRecipientChecksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"

const post = (tenant: TestTenant, target: string, body: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant })

const estimate = (tenant: TestTenant, body: Record<string, unknown>) => post(tenant, "/v1/transactions/estimate_fee", body)

const walletOf = (tenant: TestTenant, customerRefId: string, networkKey: string) =>
  Effect.gen(function*() {
    const response = yield* post(tenant, `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.json.status, "READY", response.text)
    return { walletId: response.json.walletId as string, address: response.json.address as string }
  })

const settings = (tenant: TestTenant, value: Record<string, unknown>) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { settings: value } })
  }).pipe(Effect.orDie)

const expectError = (response: { status: number; json: any; text: string }, status: number, code: string) => {
  assert.strictEqual(response.status, status, response.text)
  assert.strictEqual(response.json.error.code, code, response.text)
}

layer(makeTestAppLayer(), { excludeTestServices: true })("estimate_fee (spec 4.4)", (it) => {
  describe("settlement and fee", () => {
    it.effect("an external address: ON_CHAIN with the withdrawal fee (tenant's, else the floor); nothing is created", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "alice", "ETH_SEPOLIA")
        const before = Date.now()
        const response = yield* estimate(tenant, {
          assetId: "ETH_SEPOLIA_USDT",
          sourceWalletId: walletId,
          amountRaw: "25000000",
          destination: evmRecipientChecksummed
        })
        assert.strictEqual(response.status, 200, response.text)
        const { validUntil, ...rest } = response.json
        assert.deepStrictEqual(rest, {
          assetId: "ETH_SEPOLIA_USDT",
          amountRaw: "25000000",
          // The catalog's withdrawFeeFloor, with no tenant fee set.
          feeRaw: "3000000",
          totalRaw: "28000000",
          destination: evmRecipient,
          isInternal: false,
          settlement: "ON_CHAIN",
          networkFeePaidBy: "PLATFORM"
        })
        const validForMillis = Date.parse(validUntil) - before
        assert.isTrue(validForMillis > 110_000 && validForMillis < 130_000, `valid for about 2 minutes: ${validForMillis}`)

        yield* settings(tenant, { withdrawFees: { ETH_SEPOLIA_USDT: "1500000" } })
        const withFee = yield* estimate(tenant, {
          assetId: "ETH_SEPOLIA_USDT",
          sourceWalletId: walletId,
          amountRaw: "25000000",
          destination: evmRecipient
        })
        // The tenant's own fee replaces the floor, even below it (fee rule 1).
        assert.deepStrictEqual([withFee.json.feeRaw, withFee.json.totalRaw], ["1500000", "26500000"])
        const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
        assert.strictEqual(count!.n, 0, "an estimate creates nothing")
      }))

    it.effect("a deposit address of the tenant: OFF_CHAIN; the internal fee across users, free between one user's wallets", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { internalTransferFees: { TRON_NILE_TRX: "100000" } })
        const payer = yield* walletOf(tenant, "bob", "TRON_NILE")
        const other = yield* walletOf(tenant, "carol", "TRON_NILE")
        const crossUser = yield* estimate(tenant, {
          assetId: "TRON_NILE_TRX",
          sourceWalletId: payer.walletId,
          amountRaw: "1",
          destination: other.address
        })
        assert.strictEqual(crossUser.status, 200, crossUser.text)
        assert.deepStrictEqual(
          [crossUser.json.settlement, crossUser.json.isInternal, crossUser.json.feeRaw, crossUser.json.totalRaw],
          ["OFF_CHAIN", true, "100000", "100001"]
        )
        const sameWallet = yield* estimate(tenant, {
          assetId: "TRON_NILE_TRX",
          sourceWalletId: payer.walletId,
          amountRaw: "1",
          destination: payer.address
        })
        expectError(sameWallet, 422, "SAME_WALLET_TRANSFER")
      }))

    it.effect("between one user's own wallets the transfer is free and exempt from limits", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, {
          internalTransferFees: { ETH_SEPOLIA_ETH: "7" },
          limits: { ETH_SEPOLIA_ETH: { single: "10", daily: "10" } }
        })
        const first = yield* walletOf(tenant, "dave", "ETH_SEPOLIA")
        const created = yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/wallets",
          body: JSON.stringify({ customerRefId: "dave", chainFamily: "EVM" }),
          tenant,
          headers: { "idempotency-key": "second-wallet" }
        })
        assert.strictEqual(created.status, 202, created.text)
        let address: string | null = null
        for (let attempt = 0; attempt < 100 && address === null; attempt++) {
          address = (yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: `/v1/wallets/${created.json.id}`, tenant }))
            .json.address
          if (address === null) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
        }
        assert.isNotNull(address, "the second wallet got its address")
        const response = yield* estimate(tenant, {
          assetId: "ETH_SEPOLIA_ETH",
          sourceWalletId: first.walletId,
          amountRaw: "1000",
          destination: address
        })
        assert.strictEqual(response.status, 200, response.text)
        assert.deepStrictEqual([response.json.settlement, response.json.feeRaw], ["OFF_CHAIN", "0"])
      }))
  })

  describe("refusals", () => {
    it.effect("amount, wallet, asset, family, network, address and platform checks, each with its code", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const eth = yield* walletOf(tenant, "erin", "ETH_SEPOLIA")
        const sol = yield* walletOf(tenant, "erin", "SOL_DEVNET")
        const base = { assetId: "ETH_SEPOLIA_ETH", sourceWalletId: eth.walletId, amountRaw: "10000000000000000", destination: evmRecipient }
        const zero = yield* estimate(tenant, { ...base, amountRaw: "0" })
        expectError(zero, 422, "BAD_REQUEST")
        assert.strictEqual(zero.json.error.message, "amount must be positive")
        expectError(yield* estimate(tenant, { ...base, amountRaw: 5 }), 422, "BAD_REQUEST")
        expectError(yield* estimate(tenant, { ...base, sourceWalletId: "not-a-uuid" }), 422, "BAD_REQUEST")
        expectError(yield* estimate(tenant, { ...base, sourceWalletId: yield* uuidV7 }), 404, "NOT_FOUND")
        const other = yield* provisionTenant()
        expectError(yield* estimate(other, base), 404, "NOT_FOUND")
        expectError(yield* estimate(tenant, { ...base, assetId: "DOGE" }), 422, "ASSET_NOT_SUPPORTED")
        expectError(yield* estimate(tenant, { ...base, assetId: "TRON_NILE_TRX" }), 422, "ASSET_MISMATCH")
        expectError(yield* estimate(tenant, { ...base, destination: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD" }), 422, "INVALID_ADDRESS")
        expectError(yield* estimate(tenant, { ...base, destination: "0x0000000000000000000000000000000000000000" }), 422, "INVALID_ADDRESS")
        // An off-curve SOL address (a token account) cannot receive a withdrawal.
        expectError(
          yield* estimate(tenant, {
            assetId: "SOL_DEVNET_SOL",
            sourceWalletId: sol.walletId,
            amountRaw: "100000000",
            destination: "4MD31b2GFAWVDYQT8KG7E5GcZiFyy4MpDUt4BcyEdJRP"
          }),
          422,
          "INVALID_ADDRESS"
        )
        const platform = (yield* ops.platform.addresses().pipe(Effect.orDie)).find((entry) => entry.networkKey === "ETH_SEPOLIA")!
        expectError(yield* estimate(tenant, { ...base, destination: platform.address }), 422, "INTERNAL_DESTINATION_NOT_ALLOWED")
        yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { networks: ["SOL_DEVNET"] } }).pipe(Effect.orDie)
        expectError(yield* estimate(tenant, base), 422, "NETWORK_DISABLED")
      }))

    it.effect("on-chain minimum, single and daily limits (the amount counts, the fee does not; today's withdrawals do)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "frank", "BTC_TESTNET")
        const base = { assetId: "BTC_TESTNET_BTC", sourceWalletId: walletId, destination: "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx" }
        const [asset] = yield* sql<{ min_withdraw: string }>`SELECT min_withdraw::text AS min_withdraw FROM assets WHERE asset_id = 'BTC_TESTNET_BTC'`
        const minimum = BigInt(asset!.min_withdraw)
        expectError(yield* estimate(tenant, { ...base, amountRaw: (minimum - 1n).toString() }), 422, "BELOW_MIN_WITHDRAWAL")
        // A mainnet address on a test network is invalid.
        expectError(
          yield* estimate(tenant, { ...base, amountRaw: minimum.toString(), destination: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4" }),
          422,
          "INVALID_ADDRESS"
        )

        yield* settings(tenant, { withdrawFees: { BTC_TESTNET_BTC: "5000" }, limits: { BTC_TESTNET_BTC: { single: "100000", daily: "150000" } } })
        assert.strictEqual((yield* estimate(tenant, { ...base, amountRaw: "100000" })).status, 200, "at the single limit, fee aside")
        expectError(yield* estimate(tenant, { ...base, amountRaw: "100001" }), 422, "LIMIT_EXCEEDED")

        // Today's withdrawals that did not fail count towards the daily limit; failed ones do not.
        const [user] = yield* sql<{ user_id: string }>`SELECT user_id FROM wallets WHERE id = ${walletId}`
        const withdrawal = (amount: string, status: string) =>
          Effect.gen(function*() {
            const id = yield* uuidV7
            yield* sql`INSERT INTO transactions (id, tenant_id, kind, settlement, status, asset_id, network_key, amount, fee,
                source_wallet_id, source_user_id, destination_address, created_at, updated_at)
              VALUES (${id}, ${tenant.tenantId}, 'WITHDRAWAL', 'ON_CHAIN', ${status}, 'BTC_TESTNET_BTC', 'BTC_TESTNET',
                ${amount}, 5000, ${walletId}, ${user!.user_id}, ${base.destination}, now(), now())`
          })
        yield* withdrawal("60000", "COMPLETED")
        yield* withdrawal("90000", "FAILED")
        assert.strictEqual((yield* estimate(tenant, { ...base, amountRaw: "90000" })).status, 200, "60,000 + 90,000 = the daily limit")
        const over = yield* estimate(tenant, { ...base, amountRaw: "90001" })
        expectError(over, 422, "LIMIT_EXCEEDED")
        assert.strictEqual(over.json.error.message, "daily limit exceeded")

        // Explicit null is unlimited.
        yield* settings(tenant, { limits: { BTC_TESTNET_BTC: { single: null, daily: null } } })
        assert.strictEqual((yield* estimate(tenant, { ...base, amountRaw: (10n ** 20n).toString() })).status, 200)
      }))
  })
})
