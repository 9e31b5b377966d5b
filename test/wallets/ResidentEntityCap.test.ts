/**
 * Issue 39: a burst of new wallets larger than the runner's resident-entity cap (effect/cluster `maxResidentEntities`,
 * 10,000 by default, read from MAX_RESIDENT_ENTITIES; here 2) must not make any deposit_address call wait. When each
 * new wallet was provisioned by its entity, the entity stayed resident for a minute after its work; past the cap the
 * in-memory request was refused (MailboxFull), the persisted `Provision` that replaced it waited in storage for a
 * slot, and the call gave up after its 6 s wait with `address: null` (docs/wallets.md, "Provisioning and resident
 * entities").
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

// effect/cluster reads MAX_RESIDENT_ENTITIES from a copy of process.env taken when its ShardingConfig module loads
// (ConfigProvider.fromEnv), so the service's modules are imported after it is set (a forked worker per test file).
const residentCap = 2
process.env.MAX_RESIDENT_ENTITIES = String(residentCap)
const { makeTestAppLayer, provisionTenant, rawRequest } = await import("../support/TestApp.ts")

/** Real time: deposit_address waits for provisioning with real sleeps. */
const AppLayer = makeTestAppLayer()

/**
 * Below the call's own 6 s wait for the address (Wallets.ts depositAddressWaitMillis), which a call past the cap used
 * up; far above one provisioning even on a loaded 2-core machine.
 */
const callMillisMax = 5_000

layer(AppLayer, { excludeTestServices: true })("deposit addresses past the resident-entity cap", (it) => {
  it.effect("every new user's first deposit_address is READY at once, however many wallets the burst makes", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      // The first wallet of the process pays for loading the signer's code; it is not part of the burst.
      yield* rawRequest({
        baseUrl: tenant.baseUrl,
        method: "POST",
        target: "/v1/users/cap-warm/deposit_address",
        body: JSON.stringify({ networkKey: "ETH_SEPOLIA" }),
        tenant
      })
      const calls = residentCap * 4
      const answers = yield* Effect.forEach(Array.from({ length: calls }, (_, index) => index), (index) =>
        Effect.gen(function*() {
          const started = performance.now()
          const response = yield* rawRequest({
            baseUrl: tenant.baseUrl,
            method: "POST",
            target: `/v1/users/cap-${index}/deposit_address`,
            body: JSON.stringify({ networkKey: "ETH_SEPOLIA" }),
            tenant
          })
          return { index, status: response.status, json: response.json, millis: performance.now() - started }
        }), { concurrency: 2 })
      for (const answer of answers) {
        assert.strictEqual(answer.status, 200, `call ${answer.index}`)
        assert.strictEqual(answer.json.status, "READY", `call ${answer.index}: ${JSON.stringify(answer.json)}`)
        assert.match(answer.json.address, /^0x[0-9a-f]{40}$/)
        assert.isBelow(answer.millis, callMillisMax, `call ${answer.index} took ${answer.millis.toFixed(0)} ms`)
      }
      // No request went through the cluster's storage to wait for a slot.
      const sql = yield* SqlClient.SqlClient
      const stored = yield* sql<{ count: number }>`
        SELECT count(*)::int AS count FROM cluster_messages WHERE entity_type = 'Wallet'`
      assert.strictEqual(stored[0]!.count, 0)
    }))
})
