/**
 * SERVICE_ENV=production (spec 4.5 and section 6 rule 4, operator interface "SERVICE_ENV"): URLs must be https://,
 * and deliveries to names or addresses that are private, loopback or link-local are refused, with the reason in
 * lastError. The receiver here is real and listening: a refused delivery must never reach it.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant, testMnemonic } from "../support/TestApp.ts"
import { eventually, makeReceiver, realSleep } from "./fixtures/Receiver.ts"

const AppLayer = makeTestAppLayer({ serviceEnv: "production", signerMnemonic: Option.some(Redacted.make(testMnemonic)) })

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({
    baseUrl: tenant.baseUrl,
    method,
    target,
    tenant,
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

layer(AppLayer, { excludeTestServices: true })("webhooks in production", (it) => {
  it.effect("https:// only: `must use https` for an http URL, `must start with https://` for anything else", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const cases: Array<[string, string]> = [
        ["http://example.com/hook", "webhook url must use https"],
        ["HTTP://example.com/hook", "webhook url must use https"],
        ["HTTPS://example.com/hook", "webhook url must start with https://"],
        ["https:example.com/hook", "webhook url must start with https://"],
        ["https:/example.com/hook", "webhook url must start with https://"],
        ["ftp://example.com/hook", "webhook url must start with https://"],
        ["wss://example.com/hook", "webhook url must start with https://"],
        ["https://user:secret@example.com/hook", "webhook url must not contain credentials"],
        ["https://", "invalid url"]
      ]
      for (const [url, message] of cases) {
        assertError(yield* call(tenant, "POST", "/v1/webhooks", { url }), 422, "BAD_REQUEST", message)
      }
      const endpoint = yield* call(tenant, "POST", "/v1/webhooks", { url: "https://example.com/hook" })
      assert.strictEqual(endpoint.status, 201, endpoint.text)
      assertError(
        yield* call(tenant, "PATCH", `/v1/webhooks/${endpoint.json.id}`, { url: "http://example.com/hook" }),
        422,
        "BAD_REQUEST",
        "webhook url must use https"
      )
    }))

  it.effect("deliveries to loopback names and addresses are refused, the reason in lastError, nothing sent", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const receiver = yield* makeReceiver()
      const port = new URL(receiver.url).port
      for (const host of ["127.0.0.1", "localhost", "[::1]", "[::127.0.0.1]"]) {
        const endpoint = yield* call(tenant, "POST", "/v1/webhooks", { url: `https://${host}:${port}/hooks` })
        assert.strictEqual(endpoint.status, 201, `registration is accepted: ${endpoint.text}`)
        const test = yield* call(tenant, "POST", `/v1/webhooks/${endpoint.json.id}/test`)
        assert.strictEqual(test.status, 202)
        const record = yield* eventually(
          `refusal for ${host}`,
          Effect.map(call(tenant, "GET", `/v1/webhooks/deliveries?endpointId=${endpoint.json.id}`), (response) => {
            const item = response.json.items[0]
            return item !== undefined && item.attempt === 1 ? item : undefined
          })
        )
        assert.strictEqual(record.status, "PENDING", "a refusal is a failed attempt, retried on the schedule")
        assert.isNull(record.responseStatus)
        assert.match(
          record.lastError,
          /^refused: .*((127\.0\.0\.1|::1) is a loopback|::7f00:1 is an IPv4-compatible) address$/
        )
        yield* call(tenant, "DELETE", `/v1/webhooks/${endpoint.json.id}`)
      }
      yield* realSleep(300)
      assert.strictEqual(receiver.requests.length, 0)
    }))
})
