/**
 * Spec 4.1 with a Solana node (the whole service with SOL_DEVNET on the litesvm JSON-RPC front, behind a proxy that
 * can fail): recipients the static check cannot see, a mint and a token account at ordinary on-curve addresses, are
 * refused with 422 `INVALID_ADDRESS` by estimate and withdrawal because the node shows them owned by the Token
 * program (chains/sol/SolWalletAddress.ts `isWalletAccount`); a System-owned wallet and an address with no account
 * pass. A node that cannot answer is 503 `PROVIDER_UNAVAILABLE` (retryable), never a pass (decisions.md); what needs
 * no node (an internal transfer, the static list) still answers.
 */
import { assert, layer } from "@effect/vitest"
import { Keypair } from "@solana/web3.js"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { startRpcProxy } from "../support/RpcProxy.ts"
import { type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { balance, call, expectError, fund, walletOf, withdraw } from "./WithdrawalHelpers.ts"

const port = freePortSync()
let front: SolanaRpcFront
const proxy = startRpcProxy(`http://127.0.0.1:${port}`)
const sol = "SOL_DEVNET_SOL"
const usdc = "SOL_DEVNET_USDC"

beforeAll(async () => {
  front = await startSolanaRpcFront({ port })
})
afterAll(() => front.close())

const estimate = (tenant: TestTenant, walletId: string, assetId: string, destination: string, amountRaw = "100000000") =>
  call(tenant, "POST", "/v1/transactions/estimate_fee", { assetId, sourceWalletId: walletId, amountRaw, destination })

const fundedWallet = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const { walletId } = yield* walletOf(tenant, "sol-payer", "SOL_DEVNET")
    yield* fund(tenant, walletId, sol, 2_000_000_000n)
    yield* fund(tenant, walletId, usdc, 50_000_000n)
    return walletId
  })

const createdCount = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
    return row!.n
  })

layer(
  makeTestAppLayer({ chainRpcUrls: { SOL_DEVNET: Redacted.make(proxy.url) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("SOL recipients must be wallet addresses (spec 4.1), on a node", (it) => {
  it.effect("a mint and a token account at on-curve addresses: 422 INVALID_ADDRESS from estimate and withdrawal, nothing debited; validate_address still valid", () =>
    Effect.gen(function*() {
      front.createMint((yield* Catalog).asset(usdc)!.contract!, 6)
      const tenant = yield* provisionTenant()
      const walletId = yield* fundedWallet(tenant)
      const mint = Keypair.generate().publicKey.toBase58()
      front.createMint(mint, 6)
      const tokenAccount = Keypair.generate().publicKey.toBase58()
      front.createTokenAccount(tokenAccount, Keypair.generate().publicKey.toBase58(), mint)
      const before = [yield* balance(tenant, walletId, sol), yield* balance(tenant, walletId, usdc)]
      for (const address of [mint, tokenAccount]) {
        for (const assetId of [sol, usdc]) {
          expectError(yield* estimate(tenant, walletId, assetId, address, "10000000"), 422, "INVALID_ADDRESS", "invalid address")
          const withdrawal = yield* withdraw(tenant, walletId, assetId, address, 10_000_000n, `to-${address}-${assetId}`)
          expectError(withdrawal, 422, "INVALID_ADDRESS", "invalid address")
        }
        const validated = yield* call(tenant, "GET", `/v1/transactions/validate_address/${sol}/${address}`)
        assert.deepStrictEqual(validated.json, { isValid: true, normalized: address, isInternal: false }, validated.text)
      }
      assert.deepStrictEqual([yield* balance(tenant, walletId, sol), yield* balance(tenant, walletId, usdc)], before)
      assert.strictEqual(yield* createdCount(tenant), 0)
    }))

  it.effect("a System-owned wallet holding SOL and an address with no account: estimate 200, withdrawal 202", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const walletId = yield* fundedWallet(tenant)
      const funded = Keypair.generate().publicKey.toBase58()
      front.paySol(funded, 1_000_000_000n)
      const fresh = Keypair.generate().publicKey.toBase58()
      for (const [index, address] of [funded, fresh].entries()) {
        const quoted = yield* estimate(tenant, walletId, sol, address)
        assert.strictEqual(quoted.status, 200, quoted.text)
        assert.strictEqual(quoted.json.settlement, "ON_CHAIN")
        const created = yield* withdraw(tenant, walletId, sol, address, 100_000_000n, `wallet-${index}`)
        assert.strictEqual(created.status, 202, created.text)
      }
      assert.strictEqual(yield* createdCount(tenant), 2)
    }))

  it.effect("the node failing: 503 PROVIDER_UNAVAILABLE (retryable) from estimate and withdrawal, nothing created; the static list and internal transfers need no node", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const walletId = yield* fundedWallet(tenant)
      const colleague = yield* walletOf(tenant, "colleague", "SOL_DEVNET")
      const to = Keypair.generate().publicKey.toBase58()
      proxy.mode = "error500"
      const quoted = yield* estimate(tenant, walletId, sol, to)
      expectError(quoted, 503, "PROVIDER_UNAVAILABLE")
      assert.isTrue(quoted.json.error.retryable)
      const refused = yield* withdraw(tenant, walletId, sol, to, 100_000_000n, "while-down")
      expectError(refused, 503, "PROVIDER_UNAVAILABLE")
      assert.strictEqual(yield* createdCount(tenant), 0)
      assert.strictEqual((yield* balance(tenant, walletId, sol)).frozen, "0")
      // Known without a node.
      expectError(yield* estimate(tenant, walletId, sol, "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"), 422, "INVALID_ADDRESS")
      const internal = yield* withdraw(tenant, walletId, sol, colleague.address, 1_000n, "internal-while-down")
      assert.strictEqual(internal.status, 202, internal.text)
      assert.strictEqual(internal.json.settlement, "OFF_CHAIN")
      proxy.mode = "pass"
      assert.strictEqual((yield* estimate(tenant, walletId, sol, to)).status, 200)
    }).pipe(Effect.ensuring(Effect.sync(() => {
      proxy.mode = "pass"
    }))))
})
