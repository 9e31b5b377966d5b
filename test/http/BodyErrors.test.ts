/**
 * A body that fails its schema is 422 `BAD_REQUEST` (spec section 7) whose message names the field and what it
 * expects (issue 37): `invalid request body` alone left a tenant's engineer guessing which of ten fields was wrong.
 * The input is never repeated in the message.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { OpsAddress } from "../../src/App.ts"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, testOpsToken } from "../support/TestApp.ts"

layer(makeTestAppLayer(), { excludeTestServices: true })("body errors name the field (spec section 7)", (it) => {
  it.effect("POST /v1/transactions: each wrong field is named with what it expects", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const valid = {
        assetId: "ETH_SEPOLIA_ETH",
        source: { type: "WALLET", id: "00000000-0000-4000-8000-000000000000" },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
        amountRaw: "1000"
      }
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...valid, amountRaw: "1.5" }, "amountRaw: expected a string of decimal digits"],
        [{ ...valid, amountRaw: 1000 }, "amountRaw: expected string"],
        [{ ...valid, source: { type: "WALLET" } }, "source.id: required"],
        [{ ...valid, destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: 7 } } }, "destination.oneTimeAddress.address: expected string"],
        [[valid], "expected object"]
      ]
      for (const [body, expected] of cases) {
        const response = yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/transactions",
          body: JSON.stringify(body),
          tenant
        })
        assertError(response, 422, "BAD_REQUEST")
        const message: string = response.json.error.message
        assert.isTrue(message.startsWith(`invalid request body: ${expected}`), `${JSON.stringify(body)}: ${message}`)
        assert.notInclude(message, "1.5")
      }
    }))

  it.effect("a body that is not JSON says so", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const response = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/users", body: "{\"customerRefId\":", tenant })
      assertError(response, 422, "BAD_REQUEST", "invalid request body: expected a valid JSON body")
    }))

  it.effect("the operator listener names the field too", () =>
    Effect.gen(function*() {
      const opsUrl = yield* OpsAddress
      const response = yield* rawRequest({
        baseUrl: opsUrl,
        method: "POST",
        target: "/ops/tenants",
        body: JSON.stringify({ name: 42 }),
        headers: { authorization: `Bearer ${testOpsToken}` }
      })
      assertError(response, 422, "BAD_REQUEST", "invalid request body: name: expected string")
    }))
})
