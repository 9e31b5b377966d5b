/**
 * Pre-production without keys (spec section 1, rule 6): there is no webhook key to publish or sign with. The public
 * key is 503 SIGNER_UNAVAILABLE (retryable); endpoints still work, and deliveries wait unsent without using up
 * attempts, so they go out once a signer is back.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Signer } from "../../src/signer/Signer.ts"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest } from "../support/TestApp.ts"
import { eventually, makeReceiver, realSleep } from "./fixtures/Receiver.ts"

layer(makeTestAppLayer({ serviceEnv: "preproduction" }, { signer: Signer.layerDisabled }), { excludeTestServices: true })(
  "webhooks with the signer disabled",
  (it) => {
    it.effect("public_key is 503 SIGNER_UNAVAILABLE; a test event is registered but not sent, attempt 0", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const call = (method: string, target: string, body?: unknown) =>
          rawRequest({ baseUrl: tenant.baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
        assertError(yield* call("GET", "/v1/webhooks/public_key"), 503, "SIGNER_UNAVAILABLE")
        const receiver = yield* makeReceiver()
        const endpoint = yield* call("POST", "/v1/webhooks", { url: receiver.url })
        assert.strictEqual(endpoint.status, 201)
        const test = yield* call("POST", `/v1/webhooks/${endpoint.json.id}/test`)
        assert.strictEqual(test.status, 202)
        const waiting = yield* eventually(
          "the unsent delivery",
          Effect.map(call("GET", "/v1/webhooks/deliveries"), (response) => {
            const item = response.json.items[0]
            return item?.lastError === null || item === undefined ? undefined : item
          })
        )
        assert.strictEqual(waiting.status, "PENDING")
        assert.strictEqual(waiting.attempt, 0)
        assert.strictEqual(waiting.lastError, "not sent: signer is disabled in this environment")
        yield* realSleep(300)
        assert.strictEqual(receiver.requests.length, 0)
      }))
  }
)
