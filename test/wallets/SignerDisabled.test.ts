import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { PublicAddress } from "../../src/App.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { makeTestAppLayer, provisionTenant, rawRequest } from "../support/TestApp.ts"

/** Pre-production (spec section 1, rule 6): the signer may be disabled; address allocation then fails. */
layer(makeTestAppLayer({ serviceEnv: "preproduction" }, { signer: Signer.layerDisabled }), { excludeTestServices: true })(
  "signer disabled",
  (it) => {
    it.effect("POST /v1/wallets is 503 SIGNER_UNAVAILABLE (retryable) and keeps the idempotency key", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const request = {
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/wallets",
          body: JSON.stringify({ customerRefId: "u", chainFamily: "EVM" }),
          tenant,
          headers: { "idempotency-key": "k" }
        }
        const first = yield* rawRequest(request)
        assert.strictEqual(first.status, 503)
        assert.deepInclude(first.json.error, { code: "SIGNER_UNAVAILABLE", retryable: true })
        const retry = yield* rawRequest(request)
        assert.strictEqual(retry.status, 409)
        assert.strictEqual(retry.json.error.code, "IDEMPOTENCY_CONFLICT")
      }))

    it.effect("deposit_address is 503 SIGNER_UNAVAILABLE; event_types publishes no key", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const response = yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/users/u/deposit_address",
          body: JSON.stringify({ networkKey: "ETH_SEPOLIA" }),
          tenant
        })
        assert.strictEqual(response.status, 503)
        assert.strictEqual(response.json.error.code, "SIGNER_UNAVAILABLE")
        const info = yield* rawRequest({ baseUrl: yield* PublicAddress, method: "GET", target: "/v1/webhooks/event_types" })
        assert.isNull(info.json.signature.publicKey)
      }))
  }
)
