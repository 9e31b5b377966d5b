/**
 * A watcher that lags (decisions.md, "Sending on real networks": more than its network's lag budget, 10 × block
 * time, behind the head reports `DEGRADED`; spec 2, wallet address item: `DEGRADED` is "still credited, possibly
 * delayed", and its address is still shown). Driven as a tenant sees it: the simulated BTC_TESTNET chain gains a
 * 300 blocks at once, which the watcher works through at 200 blocks a scan (docs/deposits.md, "Watch status").
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call } from "../support/Funds.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"

const btcItem = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/addresses`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return (response.json as Array<any>).find((item) => item.networkKey === "BTC_TESTNET")
  })

/** Polls the BTC_TESTNET address item until it shows `watchStatus`; every item seen on the way is returned. */
const waitFor = (tenant: TestTenant, walletId: string, watchStatus: string) =>
  Effect.gen(function*() {
    const seen: Array<any> = []
    // Generous for a loaded machine: the watcher needs two scans (about a second apart, each a few seconds long) to catch up.
    for (let attempt = 0; attempt < 1_600; attempt++) {
      const item = yield* btcItem(tenant, walletId)
      seen.push(item)
      if (item.watchStatus === watchStatus) return seen
      yield* Effect.sleep("50 millis")
    }
    return assert.fail(`BTC_TESTNET never showed ${watchStatus}; last ${JSON.stringify(seen.at(-1))}`)
  })

layer(makeTestAppLayer(), { excludeTestServices: true, timeout: 180_000 })("watch status follows the watcher's lag", (it) => {
  it.effect("more than 10 blocks behind: DEGRADED with the address still shown and handed out; caught up: ACTIVE again", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const ready = yield* call(tenant, "POST", "/v1/users/lag/deposit_address", { networkKey: "BTC_TESTNET" })
      assert.strictEqual(ready.json.status, "READY", ready.text)
      const { walletId, address } = ready.json
      // Followed and at the head: ACTIVE.
      yield* waitFor(tenant, walletId, "ACTIVE")

      const ops = yield* opsClient
      yield* ops.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 300 } }).pipe(Effect.orDie)
      const degraded = (yield* waitFor(tenant, walletId, "DEGRADED")).at(-1)
      // Still credited, possibly delayed: the address stays visible and deposit_address still hands it out.
      assert.strictEqual(degraded.address, address)
      const during = yield* call(tenant, "POST", "/v1/users/lag/deposit_address", { networkKey: "BTC_TESTNET" })
      assert.deepStrictEqual([during.json.status, during.json.address], ["READY", address])

      const recovered = (yield* waitFor(tenant, walletId, "ACTIVE")).at(-1)
      assert.strictEqual(recovered.address, address)
    }), { timeout: 120_000 })
})
