/**
 * Malformed input at every endpoint of both listeners never answers 500 and never the wrong error (spec sections 1,
 * 5, 7 and 8). The endpoints come from the API definitions themselves, so a new one without a row here fails:
 *
 * - a path or query that does not decode, or decodes to NUL (PostgreSQL text cannot hold it): 400 `BAD_REQUEST`
 *   before authentication (section 7, "path or query parameter cannot be parsed");
 * - a path or query value that fails its declared type (non-UUID id, a `limit` that is not strictly decimal digits
 *   in range): 400 before authentication (shared decisions);
 * - a `customerRefId` or `externalTxId` path value over 128 chars: 422 with the spec's message (4.2, section 8);
 * - a body string holding NUL or an unpaired surrogate: 422 `BAD_REQUEST` (section 7, field validation);
 * - a body above 1 MiB: 413 `BAD_REQUEST` however it is framed, before authentication (sections 7 and 8).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { HttpApi, type HttpApiGroup } from "effect/http-api"
import { connect } from "node:net"
import { Api } from "../../src/api/Api.ts"
import { OpsAddress, PublicAddress } from "../../src/App.ts"
import { OpsApi } from "../../src/ops/OpsApi.ts"
import { assertError, forgedHeaders } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type RawResponse, testOpsToken } from "../support/TestApp.ts"

interface Route {
  readonly listener: "public" | "ops"
  readonly method: string
  readonly path: string
  readonly params: ReadonlyArray<string>
  readonly query: ReadonlyArray<string>
  readonly hasPayload: boolean
}

const routesOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  listener: Route["listener"]
): Array<Route> => {
  const routes: Array<Route> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      // The query schema is an object schema; its property names are the query's parameter names.
      const query = endpoint.query as
        | { readonly ast: { readonly propertySignatures?: ReadonlyArray<{ readonly name: PropertyKey }> } }
        | undefined
      routes.push({
        listener,
        method: endpoint.method,
        path: endpoint.path,
        params: [...endpoint.path.matchAll(/:([A-Za-z]+)/g)].map((match) => match[1]!),
        query: (query?.ast.propertySignatures ?? []).map((property) => String(property.name)),
        hasPayload: endpoint.payload.size > 0
      })
    }
  })
  return routes
}
const routes = [...routesOf(Api, "public"), ...routesOf(OpsApi, "ops")]
const describeRoute = (route: Route) => `${route.method} ${route.path}`

const someUuid = "0190a8c2-7f4e-7b3a-9c1d-2e3f4a5b6c7d"
/** A value of the declared type for every path parameter name, so only the parameter under test is wrong. */
const validParam: Record<string, string> = {
  customerRefId: "alice",
  id: someUuid,
  eventId: someUuid,
  tenantId: someUuid,
  assetId: "ETH_SEPOLIA_ETH",
  address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
  externalTxId: "ext-1",
  keyId: "ak_000000000000000000000000",
  networkKey: "ETH_SEPOLIA",
  walletId: someUuid
}

const pathWith = (route: Route, overrides: Record<string, string> = {}) =>
  route.path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const value = overrides[name] ?? validParam[name]
    assert.isString(value, `a sample value for path parameter ${name} of ${describeRoute(route)}`)
    return value!
  })

/** Raw requests without any credentials: every answer here must come before authentication. */
const unauthenticated = (route: Route, target: string, body?: string) =>
  Effect.gen(function*() {
    const baseUrl = route.listener === "public" ? yield* PublicAddress : yield* OpsAddress
    return yield* rawRequest({
      baseUrl,
      method: route.method,
      target,
      ...(body === undefined ? {} : { body })
    })
  })

const assertBadParameter = (response: RawResponse, what: string) => {
  assert.strictEqual(response.status, 400, `${what}: ${response.text}`)
  assertError(response, 400, "BAD_REQUEST")
}

/** Path values that cannot be decoded into text PostgreSQL can store; the raw NUL is percent-encoded by fetch. */
const undecodablePathValues = ["%00", "a%00b", "a\u0000b", "%zz", "100%", "%FF", "%E0%A4%A", "%ED%A0%80", "%C0%80"]
const undecodableQueryValues = ["%00", "x%00", "%zz", "%", "%FF", "%ED%A0%80"]

/** Bodies for every endpoint that has one, and the string fields (dotted paths) that reach storage or lookups. */
interface BodyCase {
  readonly body: Record<string, unknown>
  readonly fields: ReadonlyArray<string>
  readonly headers?: Record<string, string>
}
const address = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const bodyCases: Record<string, BodyCase> = {
  "POST /v1/users": {
    body: { customerRefId: "edge-user", email: "edge@example.com", password: "password1234", nickname: "nick" },
    fields: ["customerRefId", "email", "password", "nickname"]
  },
  "PATCH /v1/users/:customerRefId": { body: { email: "edge@example.com", status: "ACTIVE" }, fields: ["email", "status"] },
  "POST /v1/users/:customerRefId/deposit_address": {
    body: { networkKey: "ETH_SEPOLIA", email: "edge@example.com" },
    fields: ["networkKey", "email"]
  },
  "POST /v1/wallets": {
    body: { customerRefId: "edge-user", chainFamily: "EVM", name: "main" },
    fields: ["customerRefId", "chainFamily", "name"],
    headers: { "idempotency-key": "edge-wallet-1" }
  },
  "POST /v1/transactions": {
    body: {
      assetId: "ETH_SEPOLIA_ETH",
      source: { type: "WALLET", id: someUuid },
      destination: { type: "END_USER", customerRefId: "bob", oneTimeAddress: { address } },
      amountRaw: "1",
      externalTxId: "edge-1",
      note: "a note"
    },
    fields: [
      "assetId",
      "source.type",
      "source.id",
      "destination.type",
      "destination.customerRefId",
      "destination.oneTimeAddress.address",
      "externalTxId",
      "note"
    ]
  },
  "POST /v1/transactions/estimate_fee": {
    body: { assetId: "ETH_SEPOLIA_ETH", sourceWalletId: someUuid, amountRaw: "1", destination: address },
    fields: ["assetId", "sourceWalletId", "destination"]
  },
  "POST /v1/webhooks": {
    body: { url: "https://example.com/hook", events: ["WEBHOOK_TEST"], description: "edge" },
    fields: ["url", "events.0", "description"]
  },
  "PATCH /v1/webhooks/:id": {
    body: { url: "https://example.com/hook", events: ["WEBHOOK_TEST"], description: "edge", active: true },
    fields: ["url", "events.0", "description"]
  },
  "POST /ops/tenants": { body: { name: "edge tenant", networks: ["ETH_SEPOLIA"] }, fields: ["name", "networks.0"] },
  "PATCH /ops/tenants/:tenantId": {
    body: {
      subscriptionExpiresAt: "2030-01-01T00:00:00Z",
      networks: ["ETH_SEPOLIA"],
      settings: { hiddenAssets: ["ETH_SEPOLIA_ETH"] }
    },
    fields: ["subscriptionExpiresAt", "networks.0", "settings.hiddenAssets.0", "settings.*"]
  },
  "POST /ops/tenants/:tenantId/api-keys": {
    body: { name: "edge key", publicKey: "00".repeat(32), allowedIps: ["10.0.0.1"] },
    fields: ["name", "publicKey", "allowedIps.0"]
  },
  "PATCH /ops/tenants/:tenantId/users/:customerRefId": {
    body: { cooldownUntil: "2030-01-01T00:00:00Z" },
    fields: ["cooldownUntil"]
  },
  "POST /ops/devnet/:networkKey/transfers": {
    body: { to: address, assetId: "ETH_SEPOLIA_ETH", amountRaw: "1", from: address },
    fields: ["to", "assetId", "from"]
  },
  // No strings in these bodies: nothing to poison, listed so every body is accounted for.
  "POST /ops/devnet/:networkKey/blocks": { body: { count: 1 }, fields: [] },
  "POST /ops/devnet/:networkKey/reorg": { body: { depth: 1 }, fields: [] },
  "PATCH /ops/devnet/:networkKey": { body: { hotWalletBalance: { ETH_SEPOLIA_ETH: "1" } }, fields: ["hotWalletBalance.*"] },
  // Switches: literals and booleans are refused by their schema; the wallet's status is free text until checked.
  "PATCH /ops/networks/:networkKey": { body: { depositEnabled: true }, fields: [] },
  "PATCH /ops/assets/:assetId": { body: { withdrawEnabled: true }, fields: [] },
  "PATCH /ops/tenants/:tenantId/wallets/:walletId": { body: { status: "ACTIVE" }, fields: ["status"] },
  // An opening balance (docs/ledger.md "Opening balances"): the address and asset are stored.
  "POST /ops/networks/:networkKey/opening_balances": {
    body: { address, assetId: "ETH_SEPOLIA_ETH", amountRaw: "1" },
    fields: ["address", "assetId"]
  },
  // Prices: an assetId key and its price string (the key is stored too, as price_changes.asset_id).
  "PUT /ops/prices": { body: { BSC_TESTNET_BNB: "600" }, fields: ["BSC_TESTNET_BNB", "*"] }
}

/**
 * The body with the string at `field` replaced by `bad`; `parent.*` renames the object's first key to `bad` instead
 * (keys of settings and balances are stored too).
 */
const poisoned = (body: Record<string, unknown>, field: string, bad: string): Record<string, unknown> => {
  const copy = structuredClone(body)
  const steps = field.split(".")
  const last = steps.pop()!
  let parent: any = copy
  for (const step of steps) parent = parent[step]
  if (last === "*") {
    const [key] = Object.keys(parent)
    parent[bad] = parent[key!]
    delete parent[key!]
  } else {
    parent[last] = `${parent[last]}${bad}`
  }
  return copy
}

/** Strings JSON can carry that PostgreSQL cannot store: NUL, and unpaired surrogates (JSON.stringify escapes them). */
const unstorable = ["\u0000", "\ud800", "\udfff", "x\udc00y"]


const headers = (bodyCase: BodyCase) => bodyCase.headers === undefined ? {} : { headers: bodyCase.headers }

/** One raw HTTP/1.1 exchange on a fresh socket, for framings fetch will not produce (a lying Content-Length). */
const rawExchange = (baseUrl: string, head: string, body: Uint8Array) =>
  Effect.promise(() =>
    new Promise<{ readonly status: number; readonly text: string }>((resolve, reject) => {
      const url = new URL(baseUrl)
      const socket = connect(Number(url.port), url.hostname)
      let received = ""
      socket.on("data", (chunk) => {
        received += chunk.toString("latin1")
      })
      socket.on("error", (error) => received.length > 0 ? undefined : reject(error))
      socket.on("close", () => {
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0)
        resolve({ status, text: received })
      })
      socket.write(head)
      socket.write(body, () => socket.end())
    })
  )

layer(makeTestAppLayer(), { excludeTestServices: true })("input edges (spec sections 1, 5, 7, 8)", (it) => {
  it.effect("every endpoint with a body has a row here", () =>
    Effect.sync(() => {
      for (const route of routes.filter((candidate) => candidate.hasPayload)) {
        assert.isObject(bodyCases[describeRoute(route)], `a body case for ${describeRoute(route)}`)
      }
      assert.isAtLeast(routes.length, 40)
      assert.includeMembers([...routes.find((route) => route.path === "/v1/transactions" && route.method === "GET")!.query], [
        "customerRefId",
        "assetId",
        "limit"
      ])
    }))

  it.effect("section 7: a path parameter that does not decode, or holds NUL, is 400 before authentication", () =>
    Effect.gen(function*() {
      for (const route of routes.filter((candidate) => candidate.params.length > 0)) {
        for (const param of route.params) {
          for (const value of undecodablePathValues) {
            const response = yield* unauthenticated(route, pathWith(route, { [param]: value }))
            assertBadParameter(response, `${describeRoute(route)} ${param}=${JSON.stringify(value)}`)
          }
        }
      }
    }))

  it.effect("section 7: a query that does not decode, or holds NUL, is 400 before authentication, on every route", () =>
    Effect.gen(function*() {
      for (const route of routes) {
        const names = route.query.length > 0 ? route.query : ["anything"]
        for (const name of names) {
          for (const value of undecodableQueryValues) {
            const target = `${pathWith(route)}?${name}=${value}`
            assertBadParameter(yield* unauthenticated(route, target), `${describeRoute(route)} ${target}`)
          }
        }
        // The name is part of the query too.
        assertBadParameter(yield* unauthenticated(route, `${pathWith(route)}?a%00=1`), `${describeRoute(route)} key`)
      }
      // A route that does not exist: still a request target that cannot be parsed.
      const response = yield* rawRequest({ baseUrl: yield* PublicAddress, method: "GET", target: "/v1/nope/%FF" })
      assertBadParameter(response, "unknown route")
    }))

  it.effect("shared decisions: path values that fail their declared type are 400 before authentication", () =>
    Effect.gen(function*() {
      const wrong: Record<string, ReadonlyArray<string>> = {
        id: ["not-a-uuid", `${someUuid}0`, "%20" + someUuid],
        eventId: ["not-a-uuid"],
        tenantId: ["not-a-uuid", "1"]
      }
      let checked = 0
      for (const route of routes) {
        for (const param of route.params) {
          for (const value of wrong[param] ?? []) {
            const response = yield* unauthenticated(route, pathWith(route, { [param]: value }))
            assertBadParameter(response, `${describeRoute(route)} ${param}=${value}`)
            checked++
          }
        }
      }
      assert.isAtLeast(checked, 30)
    }))

  it.effect("sections 4.2 and 8: a customerRefId or externalTxId path value over 128 chars is 422 with the spec's message, never 404", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const opsUrl = yield* OpsAddress
      // 129 chars; 129 code points of two bytes; 2000 chars (above what the router once accepted).
      const tooLong = ["x".repeat(129), "%C3%A9".repeat(129), "a".repeat(2000)]
      for (const value of tooLong) {
        for (const [method, target, body] of [
          ["GET", `/v1/users/${value}`, undefined],
          ["PATCH", `/v1/users/${value}`, "{}"],
          ["GET", `/v1/users/${value}/balances`, undefined],
          ["POST", `/v1/users/${value}/deposit_address`, JSON.stringify({ networkKey: "ETH_SEPOLIA" })]
        ] as const) {
          const response = yield* rawRequest({
            baseUrl: tenant.baseUrl,
            method,
            target,
            tenant,
            ...(body === undefined ? {} : { body })
          })
          assertError(response, 422, "BAD_REQUEST", "customerRefId must be 1-128 chars")
        }
        for (const [method, suffix] of [["POST", "/totp"], ["DELETE", "/totp"], ["PATCH", ""]] as const) {
          const response = yield* rawRequest({
            baseUrl: opsUrl,
            method,
            target: `/ops/tenants/${tenant.tenantId}/users/${value}${suffix}`,
            headers: { authorization: `Bearer ${testOpsToken}` },
            ...(method === "PATCH" ? { body: "{}" } : {})
          })
          assertError(response, 422, "BAD_REQUEST", "customerRefId must be 1-128 chars")
        }
      }
      for (const value of ["x".repeat(129), encodeURIComponent("😀".repeat(129))]) {
        const response = yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "GET",
          target: `/v1/transactions/external_tx_id/${value}`,
          tenant
        })
        assertError(response, 422, "BAD_REQUEST", "externalTxId must be 1-128 chars")
      }
      // At the limit (128 code points, 256 UTF-16 units for the emoji) the value names nothing yet: 404.
      for (const target of [
        `/v1/users/${"%C3%A9".repeat(128)}`,
        `/v1/transactions/external_tx_id/${encodeURIComponent("😀".repeat(128))}`,
        `/v1/transactions/external_tx_id/${"x".repeat(128)}`
      ]) {
        assertError(yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant }), 404, "NOT_FOUND")
      }
    }))

  it.effect("section 8 / shared decisions: integer query values are decimal digits only, in range; else 400", () =>
    Effect.gen(function*() {
      const malformed = [
        "%205", "+5", "5+", "%2B5", "-1", "1e1", "1E1", "0x10", "0b1", "0o7", "5.0", "5.", ".5", "1_0", "",
        "Infinity", "NaN", "%EF%BC%95", "0", "-0", "9999999999999999999999"
      ]
      const outOfRange: Record<string, ReadonlyArray<string>> = { limit: ["201", "1000"], before: [] }
      const integerParams = routes.flatMap((route) =>
        route.query.filter((name) => name === "limit" || (name === "before" && route.path === "/v1/webhooks/deliveries"))
          .map((name) => [route, name] as const)
      )
      assert.isAtLeast(integerParams.length, 5)
      for (const [route, name] of integerParams) {
        // A repeated parameter is two values where one integer is expected.
        for (const value of [...malformed, ...outOfRange[name]!, `5&${name}=6`]) {
          const target = `${route.path}?${name}=${value}`
          assertBadParameter(yield* unauthenticated(route, target), target)
        }
        // Well-formed values pass the parse: authentication is next.
        for (const value of ["1", "5", "007", "200"]) {
          assertError(yield* unauthenticated(route, `${route.path}?${name}=${value}`), 401, "UNAUTHORIZED")
        }
      }
    }))

  it.effect("section 7: a body string holding NUL or an unpaired surrogate is 422 BAD_REQUEST, on every endpoint", () =>
    Effect.gen(function*() {
      // Over a hundred requests in a burst: the key's rate limit is not what is under test.
      const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
      for (const route of routes.filter((candidate) => candidate.hasPayload)) {
        const bodyCase = bodyCases[describeRoute(route)]!
        const target = pathWith(route, route.listener === "ops" ? { tenantId: tenant.tenantId } : {})
        for (const field of bodyCase.fields) {
          for (const bad of unstorable) {
            const body = JSON.stringify(poisoned(bodyCase.body, field, bad))
            assert.notMatch(body, /[\ud800-\udfff]/, "JSON.stringify escapes lone surrogates")
            const response = route.listener === "public"
              ? yield* rawRequest({ baseUrl: tenant.baseUrl, method: route.method, target, body, tenant, ...headers(bodyCase) })
              : yield* rawRequest({
                baseUrl: yield* OpsAddress,
                method: route.method,
                target,
                body,
                headers: { authorization: `Bearer ${testOpsToken}` }
              })
            assert.notStrictEqual(response.status, 500, `${describeRoute(route)} ${field}: ${response.text}`)
            assertError(response, 422, "BAD_REQUEST")
          }
        }
      }
    }))

  it.effect("section 1: an unknown body field holding NUL is ignored like any unknown field", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const body = JSON.stringify({ customerRefId: "ignores-unknown", extra: "\u0000\ud800", "\u0000": 1 })
      const response = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/users", body, tenant })
      assert.strictEqual(response.status, 200, response.text)
      assert.strictEqual(response.json.customerRefId, "ignores-unknown")
    }))

  it.effect("sections 1 and 7: a body that is not UTF-8 is 422 BAD_REQUEST once authenticated, and creates nothing", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const opsUrl = yield* OpsAddress
      // Latin-1 é and è: a lenient decoder reads both as U+FFFD, which would make two users one.
      const latin1 = (text: string) => Uint8Array.from(Buffer.from(text, "latin1"))
      for (const name of ["Jos\u00e9", "Jos\u00e8"]) {
        const body = latin1(JSON.stringify({ customerRefId: name }))
        const response = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/users", body, tenant })
        assertError(response, 422, "BAD_REQUEST", "invalid request body")
        // Authentication still comes first (spec section 5 before section 7's body errors).
        const unsigned = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/users", body })
        assertError(unsigned, 401, "UNAUTHORIZED")
      }
      // Invalid bytes in a field the service ignores are still not JSON text.
      const ignored = Uint8Array.from([...Buffer.from("{\"customerRefId\":\"utf8-ok\",\"x\":\""), 0xff, ...Buffer.from("\"}")])
      assertError(
        yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/users", body: ignored, tenant }),
        422,
        "BAD_REQUEST"
      )
      const wallet = latin1(JSON.stringify({ customerRefId: "Ren\u00e9", chainFamily: "TRON" }))
      assertError(
        yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/wallets",
          body: wallet,
          tenant,
          headers: { "idempotency-key": "latin1-wallet" }
        }),
        422,
        "BAD_REQUEST"
      )
      const users = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/users", tenant })
      assert.strictEqual(users.status, 200, users.text)
      assert.deepStrictEqual(users.json.items, [], "no user was created")
      // The operator listener: the token first, then the body.
      const tenantBody = latin1(JSON.stringify({ name: "Caf\u00e9" }))
      assertError(yield* rawRequest({ baseUrl: opsUrl, method: "POST", target: "/ops/tenants", body: tenantBody }), 401, "UNAUTHORIZED")
      assertError(
        yield* rawRequest({
          baseUrl: opsUrl,
          method: "POST",
          target: "/ops/tenants",
          body: tenantBody,
          headers: { authorization: `Bearer ${testOpsToken}` }
        }),
        422,
        "BAD_REQUEST",
        "invalid request body"
      )
      // Valid UTF-8 of the same names works.
      const valid = yield* rawRequest({
        baseUrl: tenant.baseUrl,
        method: "POST",
        target: "/v1/users",
        body: JSON.stringify({ customerRefId: "Jos\u00e9" }),
        tenant
      })
      assert.strictEqual(valid.status, 200, valid.text)
      assert.strictEqual(valid.json.customerRefId, "Jos\u00e9")
    }))

  it.effect("section 7: requests Node's HTTP parser refuses get the envelope and an X-Request-Id too", () =>
    Effect.gen(function*() {
      for (const baseUrl of [yield* PublicAddress, yield* OpsAddress]) {
        const host = new URL(baseUrl).host
        const cases: ReadonlyArray<readonly [string, string, number]> = [
          // A raw byte outside ASCII in the request target (not percent-encoded).
          ["raw byte in the target", `GET /v1/users/caf\u00c3\u00a9 HTTP/1.1\r\nhost: ${host}\r\n\r\n`, 400],
          ["headers over 16 KiB", `GET /v1/networks HTTP/1.1\r\nhost: ${host}\r\nx-pad: ${"a".repeat(20_000)}\r\n\r\n`, 431],
          ["an unknown method word", `FOO /v1/networks HTTP/1.1\r\nhost: ${host}\r\n\r\n`, 405],
          ["a malformed Content-Length", `POST /v1/users HTTP/1.1\r\nhost: ${host}\r\ncontent-length: abc\r\n\r\n`, 400],
          ["CONNECT", `CONNECT /v1/networks HTTP/1.1\r\nhost: ${host}\r\n\r\n`, 405]
        ]
        for (const [what, head, status] of cases) {
          const answer = yield* rawExchange(baseUrl, head, new Uint8Array())
          assert.strictEqual(answer.status, status, `${what}: ${answer.text.slice(0, 300)}`)
          const [headText, body] = answer.text.split("\r\n\r\n")
          const headers = new Map(headText!.split("\r\n").slice(1).map((line) => {
            const colon = line.indexOf(":")
            return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const
          }))
          assert.strictEqual(headers.get("content-type"), "application/json; charset=utf-8", what)
          const envelope = JSON.parse(body!)
          assert.strictEqual(envelope.error.code, "BAD_REQUEST", what)
          assert.strictEqual(envelope.error.retryable, false, what)
          assert.isString(envelope.error.message, what)
          assert.strictEqual(envelope.error.requestId, headers.get("x-request-id"), what)
          assert.match(envelope.error.requestId, /^[0-9a-f]{8}-[0-9a-f]{4}-7/, what)
        }
      }
    }))

  it.effect("sections 7 and 8: a body above 1 MiB is 413 BAD_REQUEST before authentication, however it is framed", () =>
    Effect.gen(function*() {
      const publicUrl = yield* PublicAddress
      const opsUrl = yield* OpsAddress
      const big = new Uint8Array(2 * 1024 * 1024).fill(0x20)
      const targets: ReadonlyArray<readonly [string, string, string]> = [
        [publicUrl, "POST", "/v1/users"],
        [publicUrl, "PATCH", "/v1/users/alice"],
        [publicUrl, "POST", "/v1/nope"],
        [publicUrl, "POST", "/app/v1/auth/register"],
        [opsUrl, "POST", "/ops/tenants"]
      ]
      for (const [baseUrl, method, target] of targets) {
        const host = new URL(baseUrl).host
        // Chunked, no Content-Length at all.
        const chunkedHead = `${method} ${target} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\n` +
          "transfer-encoding: chunked\r\n\r\n"
        const chunk = Buffer.concat([Buffer.from(`${big.length.toString(16)}\r\n`), big, Buffer.from("\r\n0\r\n\r\n")])
        const chunked = yield* rawExchange(baseUrl, chunkedHead, chunk)
        assert.strictEqual(chunked.status, 413, `chunked ${method} ${target}: ${chunked.text.slice(0, 300)}`)
        assert.include(chunked.text, "\"BAD_REQUEST\"")
        // A Content-Length above the cap, whatever actually follows.
        for (const sent of [big, new Uint8Array(16).fill(0x20)]) {
          const head = `${method} ${target} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\n` +
            `content-length: ${big.length}\r\n\r\n`
          const declared = yield* rawExchange(baseUrl, head, sent)
          assert.strictEqual(declared.status, 413, `content-length ${method} ${target}: ${declared.text.slice(0, 300)}`)
          assert.include(declared.text, "\"BAD_REQUEST\"")
        }
      }
      // Nor does a route that takes no body at all.
      const viaFetch = yield* rawRequest({
        baseUrl: publicUrl,
        method: "POST",
        target: "/v1/webhooks/event_types",
        body: big
      })
      assertError(viaFetch, 413, "BAD_REQUEST")
    }))

  it.effect("section 5: a signed JWT whose nonce holds NUL is 401, and the nonce store keeps working", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const now = Math.floor(Date.now() / 1000)
      for (const nonce of ["\u0000", "a\u0000b", "\ud800"]) {
        const response = yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "GET",
          target: "/v1/networks",
          headers: forgedHeaders(tenant, { target: "/v1/networks", now }, { claims: { nonce } })
        })
        assertError(response, 401, "UNAUTHORIZED", "authentication required")
      }
      const good = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/networks", tenant })
      assert.strictEqual(good.status, 200, good.text)
    }))
})
