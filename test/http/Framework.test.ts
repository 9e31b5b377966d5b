/**
 * The framework around the endpoints (spec sections 1 "Common conventions", 4.5 `event_types`, 4.6, 7), over the
 * real public listener: the error envelope and X-Request-Id everywhere, 404/405, body decoding failures, OpenAPI and
 * the reference page, the permanently disabled portal and login paths, and the toolchain itself.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { HttpApi } from "effect/http-api"
import { Api } from "../../src/api/Api.ts"
import { PublicAddress } from "../../src/App.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { assertError, atRealisticTime, authenticationRequired, freshTime } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"
import { operationDocs } from "../../src/api/OperationDocs.ts"

const request = (options: {
  readonly method: string
  readonly target: string
  readonly body?: string
  readonly tenant?: TestTenant
  readonly headers?: Record<string, string>
}) => Effect.flatMap(PublicAddress, (baseUrl) => rawRequest({ baseUrl, ...options }))

const uuidV7Pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

layer(atRealisticTime(makeTestAppLayer()))("framework", (it) => {
  it.effect("toolchain: the tests run on Node 24", () =>
    Effect.sync(() => {
      assert.match(process.versions.node, /^24\./)
    }))

  it.effect("section 1: every response carries X-Request-Id; a generated one is a UUID v7", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const responses = [
        yield* request({ method: "GET", target: "/v1/webhooks/event_types" }),
        yield* request({ method: "GET", target: "/v1/networks", tenant }),
        yield* request({ method: "GET", target: "/v1/networks" }),
        yield* request({ method: "GET", target: "/v1/nope" }),
        yield* request({ method: "DELETE", target: "/v1/networks" }),
        yield* request({ method: "GET", target: "/openapi.json" }),
        yield* request({ method: "POST", target: "/app/v1/auth/register", body: "{}" })
      ]
      const ids = new Set<string>()
      for (const response of responses) {
        const id = response.headers.get("x-request-id")
        assert.isString(id)
        assert.match(id!, uuidV7Pattern)
        ids.add(id!)
        if (response.status >= 400) assert.strictEqual(response.json.error.requestId, id)
        // Section 1: "requests and responses are `application/json; charset=utf-8`" (the reference page is HTML).
        if (!response.headers.get("content-type")?.startsWith("text/html")) {
          assert.strictEqual(response.headers.get("content-type"), "application/json; charset=utf-8", response.text)
        }
      }
      assert.strictEqual(ids.size, responses.length, "each request gets its own id")
    }))

  it.effect("section 1: a supplied X-Request-Id is reused in the header and in the error body", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const headers = { "x-request-id": "tenant-trace-42" }
      const ok = yield* request({ method: "GET", target: "/v1/networks", tenant, headers })
      assert.strictEqual(ok.status, 200)
      assert.strictEqual(ok.headers.get("x-request-id"), "tenant-trace-42")
      const failures = [
        yield* request({ method: "GET", target: "/v1/networks", headers }),
        yield* request({ method: "GET", target: "/v1/users?limit=0", headers }),
        yield* request({ method: "GET", target: "/v1/nothing-here", headers }),
        yield* request({ method: "PUT", target: "/v1/users", headers }),
        yield* request({ method: "GET", target: "/v1/users/nobody", tenant, headers }),
        yield* request({ method: "POST", target: "/v1/users", body: "{", tenant, headers }),
        yield* request({ method: "POST", target: "/tenant-admin/v1/auth/login", headers })
      ]
      for (const failure of failures) {
        assert.strictEqual(failure.headers.get("x-request-id"), "tenant-trace-42")
        assert.strictEqual(failure.json.error.requestId, "tenant-trace-42")
      }
    }))

  it.effect("section 7: an unknown route is 404 NOT_FOUND, signed or not", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const target of ["/", "/v1", "/v1/nope", "/v2/networks", "/v1/users/a/b/c", "/v1/networks/extra"]) {
        assertError(yield* request({ method: "GET", target }), 404, "NOT_FOUND")
      }
      assertError(yield* request({ method: "GET", target: "/v1/nope", tenant }), 404, "NOT_FOUND")
      assertError(yield* request({ method: "POST", target: "/v1/nope", body: "{}", tenant }), 404, "NOT_FOUND")
    }))

  it.effect("section 7: a known path with an unsupported method is 405 BAD_REQUEST with Allow", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, string, string]> = [
        ["DELETE", "/v1/users", "GET, POST"],
        ["PUT", "/v1/users", "GET, POST"],
        ["POST", "/v1/networks", "GET"],
        ["DELETE", "/v1/supported_assets", "GET"],
        ["PUT", "/v1/users/someone", "GET, PATCH"],
        ["POST", "/v1/users/someone/balances", "GET"],
        ["POST", "/v1/webhooks/event_types", "GET"]
      ]
      for (const [method, target, allow] of cases) {
        const response = yield* request({ method, target, body: method === "GET" ? "" : "{}" })
        assertError(response, 405, "BAD_REQUEST")
        assert.strictEqual(response.headers.get("allow"), allow, `${method} ${target}`)
      }
    }))

  it.effect("section 7: malformed JSON or a non-object body is 422 BAD_REQUEST", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const body of ["{", "{\"customerRefId\":}", "not json", "[]", "null", "\"text\"", "42", "{\"customerRefId\":\"a\"} x"]) {
        const response = yield* request({ method: "POST", target: "/v1/users", body, tenant })
        assertError(response, 422, "BAD_REQUEST")
      }
      assertError(
        yield* request({ method: "PATCH", target: "/v1/users/someone", body: "{\"email\":", tenant }),
        422,
        "BAD_REQUEST"
      )
    }))

  it.effect("section 7: missing fields and wrong field types are 422 BAD_REQUEST", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const bodies = [
        {},
        { customerRefId: 5 },
        { customerRefId: null },
        { customerRefId: ["a"] },
        { customerRefId: "typed", email: 5 },
        { customerRefId: "typed", nickname: true },
        { customerRefId: "typed", password: 1234567890 }
      ]
      for (const body of bodies) {
        const response = yield* request({ method: "POST", target: "/v1/users", body: JSON.stringify(body), tenant })
        assertError(response, 422, "BAD_REQUEST")
      }
      // No body at all where one is required.
      assertError(yield* request({ method: "POST", target: "/v1/users", tenant }), 422, "BAD_REQUEST")
    }))

  it.effect("section 7: a body that is not application/json is 422 BAD_REQUEST", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const response = yield* request({
        method: "POST",
        target: "/v1/users",
        body: JSON.stringify({ customerRefId: "plain-text" }),
        tenant,
        headers: { "content-type": "text/plain" }
      })
      assertError(response, 422, "BAD_REQUEST")
    }))

  it.effect("section 1: requests are application/json; charset=utf-8, and that content type is accepted", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const response = yield* request({
        method: "POST",
        target: "/v1/users",
        body: JSON.stringify({ customerRefId: "charset", nickname: "Zoë" }),
        tenant,
        headers: { "content-type": "application/json; charset=utf-8" }
      })
      assert.strictEqual(response.status, 200, response.text)
      assert.strictEqual(response.json.nickname, "Zoë")
      assert.strictEqual(response.headers.get("content-type"), "application/json; charset=utf-8")
    }))

  it.effect("section 1: undefined request-body fields are ignored without error", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const body = JSON.stringify({
        customerRefId: "extra-fields",
        unknownField: 1,
        nested: { deeper: [1, 2, 3] },
        source: "C_DIRECT",
        status: "FROZEN",
        uid: "00000000"
      })
      const response = yield* request({ method: "POST", target: "/v1/users", body, tenant })
      assert.strictEqual(response.status, 200, response.text)
      assert.strictEqual(response.json.customerRefId, "extra-fields")
      assert.strictEqual(response.json.source, "B_API")
      assert.strictEqual(response.json.status, "ACTIVE")
      assert.notStrictEqual(response.json.uid, "00000000")
      assert.notProperty(response.json, "unknownField")
      assert.notProperty(response.json, "nested")
    }))

  it.effect("OpenAPI 3.1 at /openapi.json without authentication lists every /v1 operation", () =>
    Effect.gen(function*() {
      const response = yield* request({ method: "GET", target: "/openapi.json" })
      assert.strictEqual(response.status, 200)
      const spec = response.json
      assert.match(spec.openapi, /^3\.1\./)
      const operations: Array<readonly [string, string]> = []
      HttpApi.reflect(Api, {
        onGroup: () => {},
        onEndpoint: ({ endpoint }) => operations.push([endpoint.method.toLowerCase(), endpoint.path])
      })
      assert.isTrue(operations.length >= 6)
      for (const [method, path] of operations) {
        const openApiPath = path.replace(/:([A-Za-z]+)/g, "{$1}")
        assert.isObject(spec.paths[openApiPath]?.[method], `${method} ${openApiPath} documented`)
      }
      for (const path of Object.keys(spec.paths)) assert.match(path, /^\/v1\//)
      // Unknown request fields are ignored and new response fields may appear (sections 1 and 9).
      assert.notInclude(response.text, "\"additionalProperties\":false")
    }))

  it.effect("OpenAPI: every operation has a summary and a description; the table names no other operation", () =>
    Effect.gen(function*() {
      const spec = (yield* request({ method: "GET", target: "/openapi.json" })).json
      const ids: Array<string> = []
      for (const [path, item] of Object.entries<Record<string, any>>(spec.paths)) {
        for (const [method, operation] of Object.entries<any>(item)) {
          ids.push(operation.operationId)
          assert.isString(operation.summary, `${method} ${path}: summary`)
          assert.isAbove(operation.summary.length, 5, `${method} ${path}: summary`)
          assert.isString(operation.description, `${method} ${path}: description`)
          assert.isAbove(operation.description.length, 20, `${method} ${path}: description`)
        }
      }
      assert.sameMembers(Object.keys(operationDocs), ids)
      // An endpoint's own sentence is kept after the table's.
      assert.include(spec.paths["/v1/wallets"].post.description, "Header `Idempotency-Key` is required")
    }))

  it.effect("OpenAPI: signed-request security schemes on every operation but event_types", () =>
    Effect.gen(function*() {
      const spec = (yield* request({ method: "GET", target: "/openapi.json" })).json
      const schemes = spec.components.securitySchemes
      assert.deepInclude(schemes.apiKey, { type: "apiKey", in: "header", name: "X-API-Key" })
      assert.deepInclude(schemes.signedJwt, { type: "http", scheme: "bearer", bearerFormat: "JWT" })
      for (const [path, item] of Object.entries<Record<string, any>>(spec.paths)) {
        for (const [method, operation] of Object.entries<any>(item)) {
          const expected = path === "/v1/webhooks/event_types" ? [] : [{ apiKey: [], signedJwt: [] }]
          assert.deepStrictEqual(operation.security, expected, `${method} ${path}`)
        }
      }
    }))

  it.effect("OpenAPI: errors are documented as the envelope", () =>
    Effect.gen(function*() {
      const spec = (yield* request({ method: "GET", target: "/openapi.json" })).json
      const envelope = spec.components.schemas.ErrorEnvelope
      assert.deepStrictEqual(envelope.required, ["error"])
      assert.sameMembers(envelope.properties.error.required, ["code", "message", "retryable", "requestId"])
      assert.strictEqual(envelope.properties.error.properties.retryable.type, "boolean")
      const create = spec.paths["/v1/users"].post
      for (const status of ["400", "401", "403", "409", "422", "429"]) {
        // Several errors of one status (422 BAD_REQUEST and LIMIT_EXCEEDED) are an anyOf of the same envelope.
        const schema = create.responses[status]?.content["application/json"].schema
        for (const each of schema?.anyOf ?? [schema]) {
          assert.strictEqual(each?.$ref, "#/components/schemas/ErrorEnvelope", `POST /v1/users ${status}`)
        }
      }
      assert.strictEqual(
        spec.paths["/v1/users/{customerRefId}"].get.responses["404"].content["application/json"].schema.$ref,
        "#/components/schemas/ErrorEnvelope"
      )
    }))

  it.effect("the reference page /docs is HTML without authentication", () =>
    Effect.gen(function*() {
      const response = yield* request({ method: "GET", target: "/docs" })
      assert.strictEqual(response.status, 200)
      assert.match(response.headers.get("content-type") ?? "", /^text\/html/)
      assert.match(response.text, /<html/i)
      // Scalar's bundle inline (loaded at the first request, ReferencePage.ts) and the OpenAPI document it renders.
      assert.isAbove(response.text.length, 1_000_000)
      assert.include(response.text, "createApiReference")
      assert.include(response.text, `"/v1/transactions/estimate_fee"`)
      const again = yield* request({ method: "GET", target: "/docs" })
      assert.strictEqual(again.text, response.text)
    }))

  it.effect("4.6: portal self-registration answers 403 whatever the body", () =>
    Effect.gen(function*() {
      const bodies: ReadonlyArray<string | undefined> = [
        undefined,
        "",
        "{",
        "not json",
        "null",
        JSON.stringify({ email: "user@example.com", password: "secret12345", code: "123456" }),
        JSON.stringify({ pad: "x".repeat(300 * 1024) })
      ]
      for (const target of ["/app/v1/auth/register/code", "/app/v1/auth/register"]) {
        for (const body of bodies) {
          const response = yield* request({ method: "POST", target, ...(body === undefined ? {} : { body }) })
          assertError(response, 403, "FORBIDDEN", "Self registration is disabled; contact your tenant")
        }
        const plain = yield* request({ method: "POST", target, body: "x", headers: { "content-type": "text/plain" } })
        assertError(plain, 403, "FORBIDDEN", "Self registration is disabled; contact your tenant")
      }
    }))

  it.effect("4.6: fixed-password administrator logins answer 403 whatever the body", () =>
    Effect.gen(function*() {
      for (const target of ["/admin/v1/auth/login", "/tenant-admin/v1/auth/login"]) {
        for (const body of [undefined, "", "{", JSON.stringify({ username: "admin", password: "admin" })]) {
          const response = yield* request({ method: "POST", target, ...(body === undefined ? {} : { body }) })
          assertError(response, 403, "FORBIDDEN")
        }
      }
    }))

  it.effect("4.5: GET /v1/webhooks/event_types without authentication has exactly the documented shape", () =>
    Effect.gen(function*() {
      const response = yield* request({ method: "GET", target: "/v1/webhooks/event_types" })
      assert.strictEqual(response.status, 200)
      const body = response.json
      assert.deepStrictEqual(Object.keys(body).sort(), ["eventTypes", "retrySchedule", "signature"])
      assert.deepStrictEqual(body.eventTypes, [
        "TRANSACTION_CREATED",
        "TRANSACTION_STATUS_UPDATED",
        "WALLET_CREATED",
        "DEPOSIT_REVERSED",
        "MANUAL_DEPOSIT_CREDITED",
        "VAULT_GAS_LOW",
        "WEBHOOK_TEST"
      ])
      assert.deepStrictEqual(body.retrySchedule, ["1m", "5m", "30m", "2h", "12h"])
      const signature = body.signature
      assert.deepStrictEqual(
        Object.keys(signature).sort(),
        ["algorithm", "headers", "keyId", "publicKey", "signatureHeaderFormat", "signedMessage"]
      )
      assert.strictEqual(signature.algorithm, "Ed25519")
      assert.strictEqual(signature.keyId, "v1")
      assert.match(signature.publicKey, /^[0-9a-f]{64}$/)
      const signer = yield* Signer
      assert.strictEqual(signature.publicKey, yield* signer.webhookPublicKey())
      // The spec's `X-Service-*` names with the product word in place of `Service`, in the table's order.
      assert.strictEqual(signature.headers.length, 4)
      const suffixes = ["Event-Id", "Event-Type", "Timestamp", "Signature"]
      const product = /^X-([A-Za-z]+)-Event-Id$/.exec(signature.headers[0])?.[1]
      assert.isString(product)
      assert.deepStrictEqual(signature.headers, suffixes.map((suffix) => `X-${product}-${suffix}`))
      assert.include(signature.signedMessage, signature.headers[2])
      assert.include(signature.signedMessage, "period")
      assert.include(signature.signedMessage, "raw body")
      assert.strictEqual(signature.signatureHeaderFormat, "keyId=v1,sig=<hex>")
    }))

  it.effect("4.5: event_types needs no signature, but every other /v1 route does", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* request({ method: "GET", target: "/v1/webhooks/event_types" })).status, 200)
      for (const target of ["/v1/networks", "/v1/supported_assets", "/v1/users", "/v1/users/x", "/v1/users/x/balances"]) {
        authenticationRequired(yield* request({ method: "GET", target }))
      }
      authenticationRequired(yield* request({ method: "POST", target: "/v1/users", body: "{\"customerRefId\":\"x\"}" }))
      authenticationRequired(yield* request({ method: "PATCH", target: "/v1/users/x", body: "{}" }))
    }))
})
