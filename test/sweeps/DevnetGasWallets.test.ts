/**
 * GAS wallets on the simulated chain (docs/sweeps.md "Gas wallets and VAULT_GAS_LOW"): GET /ops/tenants/{id}/gas lists
 * the tenant's GAS wallet on every network the simulated chain serves, with what devnet transfers gave it and the
 * recommended minimum at the devnet's fee, and VAULT_GAS_LOW is recorded there as on a real network, so development
 * can show and test it.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { GasWallets } from "../../src/sweeps/GasWallets.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsClient, opsRequest, provisionTenant } from "../support/TestApp.ts"

const allNetworks = ["ETH_SEPOLIA", "BSC_TESTNET", "TRON_NILE", "BTC_TESTNET", "SOL_DEVNET"]

const gasEvents = (tenantId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ data: any }>`
      SELECT data FROM outbox_events WHERE tenant_id = ${tenantId} AND event_type = 'VAULT_GAS_LOW' ORDER BY id`
    return rows.map((row) => typeof row.data === "string" ? JSON.parse(row.data) : row.data)
  }).pipe(Effect.orDie)

layer(makeTestAppLayer({ autoSweeps: false }), { excludeTestServices: true })("GAS wallets on the simulated chain", (it) => {
  it.effect("GET /ops/tenants/{id}/gas lists the GAS wallet of every simulated network; VAULT_GAS_LOW once below the minimum, none once funded", () =>
    Effect.gen(function*() {
      const ops = yield* opsClient
      const sql = yield* SqlClient.SqlClient
      const gasWallets = yield* GasWallets
      const tenant = yield* provisionTenant()
      const other = yield* provisionTenant({ name: "other" })
      // A simulated EVM fee of 1,000,000 wei per transfer (rounded to whole gas prices by the devnet).
      yield* ops.devnet.configure({ params: { networkKey: "ETH_SEPOLIA" }, payload: { networkFeeRaw: 1_000_000n } })
        .pipe(Effect.orDie)

      const platform = yield* ops.platform.addresses().pipe(Effect.orDie)
      const gasOf = (tenantId: string, networkKey: string) =>
        platform.find((entry) => entry.role === "GAS" && entry.tenantId === tenantId && entry.networkKey === networkKey)!
          .address

      const before = yield* ops.sweeps.gas({ params: { tenantId: tenant.tenantId } }).pipe(Effect.orDie)
      assert.deepStrictEqual(before.map((figure) => figure.networkKey), allNetworks)
      for (const figure of before) {
        assert.strictEqual(figure.address, gasOf(tenant.tenantId, figure.networkKey))
        assert.strictEqual(figure.balanceRaw, "0")
      }
      const eth = before.find((figure) => figure.networkKey === "ETH_SEPOLIA")!
      assert.strictEqual(eth.assetId, "ETH_SEPOLIA_ETH")
      // 20 token sweeps, each its fee plus its top-up's at the devnet's fee: 20 × (2 × 1,000,000 rounded to gas).
      const perSweep = BigInt(eth.recommendedMinRaw) / 20n
      assert.strictEqual(BigInt(eth.recommendedMinRaw), 20n * perSweep)
      assert.isTrue(perSweep >= 2_000_000n, eth.recommendedMinRaw)
      // BTC has no tokens to sweep: nothing is recommended.
      assert.strictEqual(before.find((figure) => figure.networkKey === "BTC_TESTNET")!.recommendedMinRaw, "0")

      // No token deposit yet: the GAS wallet is not in use, no alert.
      yield* gasWallets.checkGas("ETH_SEPOLIA")
      assert.deepStrictEqual(yield* gasEvents(tenant.tenantId), [])

      // A credited USDT deposit puts the tenant's GAS wallet in use on ETH_SEPOLIA.
      const calls = networkCalls("ETH_SEPOLIA")
      const { address } = yield* calls.depositAddress(tenant, "gail")
      yield* ops.devnet.transfer({
        params: { networkKey: "ETH_SEPOLIA" },
        payload: { to: address, assetId: "ETH_SEPOLIA_USDT", amountRaw: 50_000_000n }
      }).pipe(Effect.orDie)
      yield* ops.devnet.mine({ params: { networkKey: "ETH_SEPOLIA" }, payload: { count: 13 } }).pipe(Effect.orDie)
      const [credited] = yield* sql<{ status: string; sub_status: string | null }>`
        SELECT status, sub_status FROM transactions WHERE tenant_id = ${tenant.tenantId} AND kind = 'DEPOSIT'`
      assert.deepStrictEqual([credited!.status, credited!.sub_status], ["COMPLETED", null])

      yield* gasWallets.checkGas("ETH_SEPOLIA")
      yield* gasWallets.checkGas("ETH_SEPOLIA")
      const events = yield* gasEvents(tenant.tenantId)
      assert.deepStrictEqual(events, [{
        networkKey: "ETH_SEPOLIA",
        address: eth.address,
        assetId: "ETH_SEPOLIA_ETH",
        balanceRaw: "0",
        recommendedMinRaw: eth.recommendedMinRaw
      }], "one VAULT_GAS_LOW within 6 hours")
      assert.deepStrictEqual(yield* gasEvents(other.tenantId), [], "the other tenant has no token deposit")

      // Funded on the devnet (a transfer to the GAS address, mined): the figures show it; at or above the minimum no
      // alert once the 6 hours passed.
      yield* ops.devnet.transfer({
        params: { networkKey: "ETH_SEPOLIA" },
        payload: { to: eth.address, assetId: "ETH_SEPOLIA_ETH", amountRaw: BigInt(eth.recommendedMinRaw) }
      }).pipe(Effect.orDie)
      yield* ops.devnet.mine({ params: { networkKey: "ETH_SEPOLIA" }, payload: { count: 1 } }).pipe(Effect.orDie)
      const funded = yield* opsRequest("GET", `/ops/tenants/${tenant.tenantId}/gas`)
      assert.strictEqual(funded.status, 200, funded.text)
      assert.strictEqual(
        funded.json.find((figure: any) => figure.networkKey === "ETH_SEPOLIA").balanceRaw,
        eth.recommendedMinRaw
      )
      assert.strictEqual(funded.json.find((figure: any) => figure.networkKey === "BSC_TESTNET").balanceRaw, "0")
      yield* sql`UPDATE gas_alerts SET sent_at = sent_at - interval '6 hours' WHERE tenant_id = ${tenant.tenantId}`
      yield* gasWallets.checkGas("ETH_SEPOLIA")
      assert.strictEqual((yield* gasEvents(tenant.tenantId)).length, 1)

      // Below it again (the minimum raised by a higher devnet fee): alerted again.
      yield* ops.devnet.configure({ params: { networkKey: "ETH_SEPOLIA" }, payload: { networkFeeRaw: 2_000_000n } })
        .pipe(Effect.orDie)
      yield* gasWallets.checkGas("ETH_SEPOLIA")
      const again = yield* gasEvents(tenant.tenantId)
      assert.strictEqual(again.length, 2)
      assert.strictEqual(again[1].balanceRaw, eth.recommendedMinRaw)
      assert.isTrue(BigInt(again[1].recommendedMinRaw) > BigInt(eth.recommendedMinRaw))

      const unknown = yield* opsRequest("GET", "/ops/tenants/0190a8b2-0000-7000-8000-000000000000/gas")
      assert.strictEqual(unknown.status, 404, unknown.text)
      assert.strictEqual(unknown.json.error.code, "NOT_FOUND")
    }))
})
