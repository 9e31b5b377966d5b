/**
 * `coffer/client` (package.json `exports`, src/client/index.ts) as a tenant's code imports it, one call per resource
 * as docs/client.md shows them: reference data, users, wallets, transactions, webhooks. Imported by the package's
 * name (a self-reference), not by path, so the export map itself is what is tested.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { makeTenantClient } from "coffer/client"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

layer(makeTestAppLayer(), { excludeTestServices: true })("coffer/client (docs/client.md)", (it) => {
  it.effect("an example per resource, through the exported typed client", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const client = yield* makeTenantClient({ baseUrl: tenant.baseUrl, keyId: tenant.keyId, privateKey: tenant.privateKey })

      // Reference data
      const networks = yield* client.reference.networks()
      assert.isTrue(networks.some((network) => network.networkKey === "ETH_SEPOLIA"))
      const assets = yield* client.reference.supportedAssets()
      const eth = assets.find((asset) => asset.assetId === "ETH_SEPOLIA_ETH")
      assert.isDefined(eth)

      // Users
      const user = yield* client.users.create({ payload: { customerRefId: "alice" } })
      assert.strictEqual(user.customerRefId, "alice")
      const deposit = yield* client.users.depositAddress({
        params: { customerRefId: "alice" },
        payload: { networkKey: "ETH_SEPOLIA" }
      })
      assert.strictEqual(deposit.networkKey, "ETH_SEPOLIA")
      const balances = yield* client.users.balances({ params: { customerRefId: "alice" } })
      assert.strictEqual(balances.customerRefId, "alice")

      // Wallets
      const wallet = yield* client.wallets.create({
        headers: { "idempotency-key": "alice-tron-1" },
        payload: { customerRefId: "alice", chainFamily: "TRON" }
      })
      assert.strictEqual(wallet.chainFamily, "TRON")
      const wallets = yield* client.wallets.list({ query: { customerRefId: "alice" } })
      assert.isTrue(wallets.items.some((item) => item.id === wallet.id))

      // Transactions
      const estimate = yield* client.transactions.estimateFee({
        payload: {
          assetId: "ETH_SEPOLIA_ETH",
          sourceWalletId: deposit.walletId,
          amountRaw: 10_000_000_000_000_000n,
          destination: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
        }
      })
      assert.strictEqual(estimate.settlement, "ON_CHAIN")
      const page = yield* client.transactions.list({ query: { customerRefId: "alice", limit: 10 } })
      assert.deepStrictEqual(page.items, [])

      // Webhooks
      const endpoint = yield* client.webhooks.create({ payload: { url: "https://example.com/coffer-hooks" } })
      const endpoints = yield* client.webhooks.list()
      assert.isTrue(endpoints.some((item) => item.id === endpoint.id))
      const key = yield* client.webhooks.publicKey()
      assert.strictEqual(key.keyId, "v1")
    }))
})
