/**
 * The calls the deposit and sweep tests (per family, and on the simulated chain) make against the test app
 * (TestApp.ts): a signed GET/POST as a tenant and the tenant's deposits; and per network, a scan of the network now, a
 * sweep pass, a READY deposit address, the wallet's balances, the network's sweeps (GET /ops/sweeps), an operating
 * address, and what the tenant sees (which sweeps must not change).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { Sweeps } from "../../src/sweeps/Sweeps.ts"
import { opsClient, rawRequest, type TestTenant } from "./TestApp.ts"

export const get = (tenant: TestTenant, target: string) => rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })
export const post = (tenant: TestTenant, target: string, body: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant })

/** The tenant's deposits on every network, as GET /v1/transactions?kind=DEPOSIT lists them: newest first. */
export const deposits = (tenant: TestTenant) =>
  Effect.map(get(tenant, "/v1/transactions?kind=DEPOSIT"), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json.items as Array<any>
  })

/**
 * Every deposit credited (decisions.md, Deposits): COMPLETED without a sub-status, the net amount the amount less the
 * fee, and the wallet's available balances exactly the net amounts (`balances` as `networkCalls(...).balances` gives
 * them: sorted [assetId, available] pairs; one deposit per asset).
 */
export const assertCredited = (credited: ReadonlyArray<any>, balances: ReadonlyArray<ReadonlyArray<string>>) => {
  assert.deepStrictEqual(credited.map((deposit) => [deposit.status, deposit.subStatus]), credited.map(() => ["COMPLETED", null]))
  for (const deposit of credited) {
    assert.strictEqual(BigInt(deposit.netAmountRaw), BigInt(deposit.amountRaw) - BigInt(deposit.feeRaw))
  }
  assert.deepStrictEqual(balances, credited.map((deposit) => [deposit.assetId, deposit.netAmountRaw]).toSorted())
}

export const networkCalls = (networkKey: string) => ({
  /** Scans now rather than waiting for the background loop (which may scan too: scans of a network never overlap). */
  scan: Effect.gen(function*() {
    const watcher = yield* DepositWatcher
    return yield* watcher.scan(networkKey)
  }),
  pass: Effect.gen(function*() {
    const sweeps = yield* Sweeps
    yield* sweeps.pass(networkKey)
  }),
  depositAddress: (tenant: TestTenant, user: string) =>
    Effect.map(post(tenant, `/v1/users/${user}/deposit_address`, { networkKey }), (response) => {
      assert.strictEqual(response.json.status, "READY", response.text)
      return { walletId: response.json.walletId as string, address: response.json.address as string }
    }),
  /** The wallet's available balances, as sorted [assetId, available] pairs. */
  balances: (tenant: TestTenant, walletId: string) =>
    Effect.map(get(tenant, `/v1/wallets/${walletId}/assets`), (response) =>
      (response.json as Array<any>).map((balance) => [balance.assetId, balance.available]).toSorted()),
  /** The network's sweeps and top-ups from or to the address (GET /ops/sweeps). */
  sweepsOf: (address: string) =>
    Effect.gen(function*() {
      const ops = yield* opsClient
      const page = yield* ops.sweeps.list({ query: { networkKey, limit: 200 } }).pipe(Effect.orDie)
      return page.items.filter((item) => item.from === address || item.to === address)
    }),
  /** The network's HOT or SWEEP address, or a tenant's GAS wallet there. */
  operating: (role: "HOT" | "SWEEP" | "GAS", tenantId?: string) =>
    Effect.gen(function*() {
      const ops = yield* opsClient
      const all = yield* ops.platform.addresses().pipe(Effect.orDie)
      return all.find((entry) =>
        entry.networkKey === networkKey && entry.role === role && (tenantId === undefined || entry.tenantId === tenantId)
      )!.address
    }),
  /** What the tenant sees: its transactions and the wallet's balances; sweeps must change neither. */
  tenantView: (tenant: TestTenant, walletId: string) =>
    Effect.gen(function*() {
      const transactions = yield* get(tenant, "/v1/transactions")
      const balances = yield* get(tenant, `/v1/wallets/${walletId}/assets`)
      return {
        transactions: (transactions.json.items as Array<any>).map((item) => [item.id, item.kind, item.status, item.amountRaw]),
        balances: (balances.json as Array<any>).map((balance) => [balance.assetId, balance.available, balance.frozen])
      }
    })
})
