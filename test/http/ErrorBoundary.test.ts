/**
 * The router boundary in process (spec sections 7 and 8): the processing-time limit and crashes need routes the
 * service does not have (one that never answers, one that dies), so they are mounted next to the real boundary
 * with `RequestTimeout` overridden to a few milliseconds. Real time: the timeout must really elapse.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { afterAll } from "vitest"
import { Api } from "../../src/api/Api.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids } from "../../src/domain/Ids.ts"
import { errorBoundary, RequestTimeout } from "../../src/http/ErrorBoundary.ts"

const secret = "postgres://coffer:hunter2@db.internal/coffer"

const Routes = Layer.mergeAll(
  errorBoundary(Api),
  HttpRouter.add("GET", "/v1/slow", Effect.never),
  HttpRouter.add("GET", "/v1/quick", Effect.succeed(HttpServerResponse.jsonUnsafe({ ok: true }))),
  HttpRouter.add("GET", "/v1/crash", Effect.die(new Error(`connection to ${secret} lost`))),
  HttpRouter.add("GET", "/v1/throws", Effect.sync(() => {
    throw new TypeError(`cannot read ${secret}`)
  })),
  HttpRouter.add("GET", "/v1/teapot", Effect.succeed(HttpServerResponse.text("short and stout", { status: 418 }))),
  HttpRouter.add("GET", "/v1/unavailable", Effect.succeed(HttpServerResponse.empty({ status: 503 })))
).pipe(
  Layer.provide(Ids.layer.pipe(Layer.provide(Entropy.layer))),
  Layer.provide(Layer.succeed(RequestTimeout)(Duration.millis(50))),
  Layer.provide(HttpServer.layerServices)
)

const { dispose, handler } = HttpRouter.toWebHandler(Routes, { disableLogger: true })
afterAll(() => dispose())

const call = async (path: string, headers: Record<string, string> = {}) => {
  const response = await handler(new Request(`http://coffer.test${path}`, { headers }))
  const text = await response.text()
  return { status: response.status, headers: response.headers, text, json: JSON.parse(text) }
}

const assertEnvelope = (
  response: Awaited<ReturnType<typeof call>>,
  status: number,
  code: string,
  retryable: boolean
) => {
  assert.strictEqual(response.status, status, response.text)
  assert.deepStrictEqual(Object.keys(response.json.error).sort(), ["code", "message", "requestId", "retryable"])
  assert.strictEqual(response.json.error.code, code)
  assert.strictEqual(response.json.error.retryable, retryable)
  assert.strictEqual(response.json.error.requestId, response.headers.get("x-request-id"))
}

describe("error boundary (in process)", () => {
  it("section 8: processing beyond the time limit is 408 PROVIDER_UNAVAILABLE, retryable", async () => {
    const started = Date.now()
    const response = await call("/v1/slow", { "x-request-id": "slow-1" })
    assertEnvelope(response, 408, "PROVIDER_UNAVAILABLE", true)
    assert.strictEqual(response.json.error.requestId, "slow-1")
    assert.isBelow(Date.now() - started, 5_000)
    // A request within the limit is untouched.
    const quick = await call("/v1/quick")
    assert.strictEqual(quick.status, 200)
    assert.deepStrictEqual(quick.json, { ok: true })
  })

  it("section 7: a defect is 500 INTERNAL, retryable, without internals", async () => {
    for (const path of ["/v1/crash", "/v1/throws"]) {
      const response = await call(path)
      assertEnvelope(response, 500, "INTERNAL", true)
      assert.strictEqual(response.json.error.message, "internal error")
      assert.notInclude(response.text, "hunter2")
      assert.notInclude(response.text, "db.internal")
      assert.notInclude(response.text, "Error")
      assert.notInclude(response.text, "at ")
    }
  })

  it("section 7: non-JSON error responses are wrapped in the envelope", async () => {
    assertEnvelope(await call("/v1/unavailable"), 503, "INTERNAL", true)
    const teapot = await call("/v1/teapot")
    assert.strictEqual(teapot.json.error.code, "BAD_REQUEST")
    assert.notInclude(teapot.text, "short and stout")
  })

  it("section 1: an overlong supplied X-Request-Id is replaced by a generated one", async () => {
    const response = await call("/v1/quick", { "x-request-id": "r".repeat(201) })
    assert.match(response.headers.get("x-request-id") ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  })
})
