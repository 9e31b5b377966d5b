import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { PublicAddress } from "../../src/App.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, tenantClient } from "../support/TestApp.ts"

layer(makeTestAppLayer())("smoke", (it) => {
  it.effect("a provisioned tenant makes a signed call through the typed client", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const client = yield* tenantClient(tenant)
      const networks = yield* client.reference.networks()
      assert.isTrue(networks.length >= 5)
      const raw = yield* rawRequest({ baseUrl: yield* PublicAddress, method: "GET", target: "/v1/networks", tenant })
      assert.strictEqual(raw.status, 200)
    }))
})
