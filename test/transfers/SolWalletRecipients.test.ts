/**
 * Spec 4.1 on the simulated chain (no node to ask): "For Solana withdrawals the recipient must be a wallet (owner)
 * address, not a program or token account. The validate endpoint does not check this; estimate and withdrawal return
 * `422 INVALID_ADDRESS`." Program ids, sysvars and mints are ordinary curve points, so the curve test alone let them
 * through (a SOL withdrawal to the Token program reached COMPLETED); chains/sol/SolWalletAddress.ts refuses them by
 * list, with the catalog's own mints. The node's part runs in test/withdrawals/SolWalletRecipientsOnNode.test.ts.
 */
import { assert, layer } from "@effect/vitest"
import { Keypair } from "@solana/web3.js"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { expectError, fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const sol = "SOL_DEVNET_SOL"
const usdc = "SOL_DEVNET_USDC"

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })

const solWallet = (tenant: TestTenant, customerRefId: string) =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey: "SOL_DEVNET" })
    assert.strictEqual(response.json.status, "READY", response.text)
    return response.json.walletId as string
  })

const balances = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) => response.json as Array<unknown>)

layer(makeTestAppLayer(), { excludeTestServices: true })("SOL recipients must be wallet addresses (spec 4.1), simulated chain", (it) => {
  it.effect("the Token program, the System program, a sysvar and the catalog's mint: estimate and withdrawal 422 INVALID_ADDRESS, nothing debited; validate_address still valid", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mint = (yield* Catalog).asset(usdc)!.contract!
      const tenant = yield* provisionTenant()
      const walletId = yield* solWallet(tenant, "sol-payer")
      yield* fund(tenant, walletId, sol, 2_000_000_000n)
      yield* fund(tenant, walletId, usdc, 50_000_000n)
      const before = yield* balances(tenant, walletId)
      const notWallets = [
        ["TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "the SPL Token program"],
        ["11111111111111111111111111111111", "the System program"],
        ["SysvarRent111111111111111111111111111111111", "the Rent sysvar"],
        [mint, "the catalog's USDC mint (the asset's contract)"]
      ] as const
      for (const [address, what] of notWallets) {
        for (const [assetId, amountRaw] of [[sol, "100000000"], [usdc, "10000000"]] as const) {
          const estimate = yield* call(tenant, "POST", "/v1/transactions/estimate_fee", {
            assetId,
            sourceWalletId: walletId,
            amountRaw,
            destination: address
          })
          expectError(estimate, 422, "INVALID_ADDRESS", "invalid address")
          const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
            assetId,
            source: { type: "WALLET", id: walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address } },
            amountRaw,
            externalTxId: `to-${address}-${assetId}`
          })
          expectError(withdrawal, 422, "INVALID_ADDRESS", "invalid address")
          // The validate endpoint does not judge what an address holds (spec 4.1).
          const validated = yield* call(tenant, "GET", `/v1/transactions/validate_address/${assetId}/${encodeURIComponent(address)}`)
          assert.strictEqual(validated.status, 200, `${what}: ${validated.text}`)
          assert.deepStrictEqual(validated.json, { isValid: true, normalized: address, isInternal: false }, what)
        }
      }
      assert.deepStrictEqual(yield* balances(tenant, walletId), before, "nothing debited or frozen")
      const [created] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
      assert.strictEqual(created!.n, 0, "no transaction created")
    }))

  it.effect("an ordinary fresh wallet address: estimate 200 ON_CHAIN, withdrawal 202 with amount + fee frozen", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const walletId = yield* solWallet(tenant, "sol-payer")
      yield* fund(tenant, walletId, sol, 2_000_000_000n)
      const to = Keypair.generate().publicKey.toBase58()
      const estimate = yield* call(tenant, "POST", "/v1/transactions/estimate_fee", {
        assetId: sol,
        sourceWalletId: walletId,
        amountRaw: "100000000",
        destination: to
      })
      assert.strictEqual(estimate.status, 200, estimate.text)
      assert.deepStrictEqual([estimate.json.settlement, estimate.json.destination], ["ON_CHAIN", to])
      const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
        assetId: sol,
        source: { type: "WALLET", id: walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
        amountRaw: "100000000",
        externalTxId: "fresh-wallet"
      })
      assert.strictEqual(withdrawal.status, 202, withdrawal.text)
      assert.strictEqual(withdrawal.json.settlement, "ON_CHAIN")
      const [balance] = (yield* balances(tenant, walletId)) as Array<{ frozen: string }>
      assert.strictEqual(BigInt(balance!.frozen), 100_000_000n + BigInt(estimate.json.feeRaw))
    }))
})
