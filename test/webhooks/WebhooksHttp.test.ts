/**
 * Webhooks over the real listener, in real time, with a local receiver that verifies every delivery as a tenant
 * would (spec 4.5, section 6, decisions "events omitted", "re-enabling at 10", "query values"). Retry timing is held
 * under TestClock in WebhookDelivery.test.ts.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { PublicAddress } from "../../src/App.ts"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, tenantClient, type TestTenant } from "../support/TestApp.ts"
import { eventually, makeReceiver, realSleep, verifyDelivery } from "./fixtures/Receiver.ts"

const AppLayer = makeTestAppLayer()

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({
    baseUrl: tenant.baseUrl,
    method,
    target,
    tenant,
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
const createEndpoint = (tenant: TestTenant, body: unknown) => call(tenant, "POST", "/v1/webhooks", body)
const created = (response: { readonly status: number; readonly text: string; readonly json: any }) => {
  assert.strictEqual(response.status, 201, response.text)
  return response.json
}
const listDeliveries = (tenant: TestTenant, query = "") =>
  Effect.map(call(tenant, "GET", `/v1/webhooks/deliveries${query}`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json.items as Array<any>
  })
const publicKeyOf = (tenant: TestTenant) =>
  Effect.map(call(tenant, "GET", "/v1/webhooks/public_key"), (response) => response.json.publicKey as string)
/** The delivery of `eventId` to `endpointId` once `predicate` holds. */
const deliveryWhen = (tenant: TestTenant, endpointId: string, eventId: string, predicate: (item: any) => boolean) =>
  eventually(
    `delivery of ${eventId}`,
    Effect.map(listDeliveries(tenant, `?endpointId=${endpointId}`), (items) => {
      const item = items.find((candidate) => candidate.eventId === eventId)
      return item !== undefined && predicate(item) ? item : undefined
    })
  )
const createWallet = (tenant: TestTenant, customerRefId: string) =>
  Effect.map(
    rawRequest({
      baseUrl: tenant.baseUrl,
      method: "POST",
      target: "/v1/wallets",
      body: JSON.stringify({ customerRefId, chainFamily: "EVM" }),
      tenant,
      headers: { "idempotency-key": `wallet-${customerRefId}` }
    }),
    (response) => {
      assert.strictEqual(response.status, 202, response.text)
      return response.json.id as string
    }
  )
/** The WALLET_CREATED event of a wallet once it exists and the dispatcher has fanned it out. */
const walletCreatedEvent = (walletId: string) =>
  eventually(
    `WALLET_CREATED of ${walletId} dispatched`,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ id: string }>`
        SELECT id FROM outbox_events
        WHERE event_type = 'WALLET_CREATED' AND subject_id = ${walletId} AND dispatched_at IS NOT NULL`.pipe(Effect.orDie)
      return row?.id
    })
  )

const endpointKeys = ["createdAt", "description", "events", "id", "status", "url"]
const deliveryKeys = [
  "attempt",
  "durationMs",
  "endpointId",
  "eventId",
  "eventType",
  "id",
  "lastAttemptAt",
  "lastError",
  "nextAt",
  "responseStatus",
  "status",
  "url"
]

layer(AppLayer, { excludeTestServices: true })("webhooks over HTTP (spec 4.5)", (it) => {
  describe("endpoints", () => {
    it.effect("POST: 201 endpoint object, ACTIVE; events omitted are stored and returned as []", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const endpoint = created(yield* createEndpoint(tenant, { url: "https://example.com/hook" }))
        assert.deepStrictEqual(Object.keys(endpoint).sort(), endpointKeys)
        assert.match(endpoint.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        assert.strictEqual(endpoint.url, "https://example.com/hook")
        assert.deepStrictEqual(endpoint.events, [])
        assert.isNull(endpoint.description)
        assert.strictEqual(endpoint.status, "ACTIVE")
        assert.match(endpoint.createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
        const described = created(yield* createEndpoint(tenant, {
          url: "http://127.0.0.1:9/local",
          events: ["WALLET_CREATED", "WEBHOOK_TEST", "WALLET_CREATED"],
          description: "ops"
        }))
        assert.deepStrictEqual(described.events, ["WALLET_CREATED", "WEBHOOK_TEST"], "each type once, in order")
        assert.strictEqual(described.description, "ops")
        // Not idempotent: the same body registers another endpoint.
        const again = created(yield* createEndpoint(tenant, { url: "https://example.com/hook" }))
        assert.notStrictEqual(again.id, endpoint.id)
      }))

    it.effect("POST: 422 BAD_REQUEST with the spec's messages for every URL, event and body rule", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const cases: Array<[unknown, string]> = [
          [{ url: "" }, "invalid url"],
          [{ url: "not a url" }, "invalid url"],
          [{ url: "https://exa mple.com/" }, "invalid url"],
          [{ url: " https://example.com/" }, "invalid url"],
          [{ url: "https://example.com/\n" }, "invalid url"],
          [{ url: `https://example.com/${"a".repeat(2048 - 20 + 1)}` }, "invalid url"],
          [{ url: "ftp://example.com/hook" }, "webhook url must start with https://"],
          [{ url: "HTTPS://example.com/hook" }, "webhook url must start with https://"],
          [{ url: "https://user:pass@example.com/hook" }, "webhook url must not contain credentials"],
          [{ url: "https://user@example.com/hook" }, "webhook url must not contain credentials"],
          [{ url: "https://example.com/", events: ["WALLET_CREATED", "NOPE"] }, "unknown event type NOPE"],
          [{ url: "https://example.com/", description: "d".repeat(501) }, "description must be at most 500 chars"],
          [{ events: [] }, "invalid request body: url: required"],
          [{ url: 42 }, "invalid request body: url: expected string"],
          [{ url: "https://example.com/", events: "WALLET_CREATED" }, "invalid request body: events: expected array or null"]
        ]
        for (const [body, message] of cases) {
          assertError(yield* createEndpoint(tenant, body), 422, "BAD_REQUEST", message)
        }
        // Exactly 2048 characters is allowed.
        const longest = `https://example.com/${"a".repeat(2048 - 20)}`
        assert.strictEqual(longest.length, 2048)
        created(yield* createEndpoint(tenant, { url: longest }))
        assertError(
          yield* rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target: "/v1/webhooks", body: "{", tenant }),
          422,
          "BAD_REQUEST"
        )
        const list = yield* call(tenant, "GET", "/v1/webhooks")
        assert.strictEqual(list.json.length, 1, "nothing else was stored")
      }))

    it.effect("GET: every endpoint including disabled ones, newest first", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const ids: Array<string> = []
        for (let index = 0; index < 3; index++) {
          ids.push(created(yield* createEndpoint(tenant, { url: `https://example.com/${index}` })).id)
        }
        assert.strictEqual((yield* call(tenant, "DELETE", `/v1/webhooks/${ids[1]}`)).status, 204)
        const list = yield* call(tenant, "GET", "/v1/webhooks")
        assert.strictEqual(list.status, 200)
        assert.deepStrictEqual(list.json.map((item: any) => item.id), [ids[2], ids[1], ids[0]])
        assert.deepStrictEqual(list.json.map((item: any) => item.status), ["ACTIVE", "DISABLED", "ACTIVE"])
        for (const item of list.json) assert.deepStrictEqual(Object.keys(item).sort(), endpointKeys)
      }))

    it.effect("PATCH: url, events, description, active; the register rules; 404 webhook endpoint not found", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const endpoint = created(yield* createEndpoint(tenant, { url: "https://example.com/a", description: "first" }))
        const path = `/v1/webhooks/${endpoint.id}`
        const changed = yield* call(tenant, "PATCH", path, {
          url: "https://example.com/b",
          events: ["DEPOSIT_REVERSED"]
        })
        assert.strictEqual(changed.status, 200, changed.text)
        assert.deepStrictEqual(Object.keys(changed.json).sort(), endpointKeys)
        assert.strictEqual(changed.json.url, "https://example.com/b")
        assert.deepStrictEqual(changed.json.events, ["DEPOSIT_REVERSED"])
        assert.strictEqual(changed.json.description, "first", "absent fields are kept")
        assert.strictEqual(changed.json.createdAt, endpoint.createdAt)
        const cleared = yield* call(tenant, "PATCH", path, { description: null, events: [] })
        assert.isNull(cleared.json.description)
        assert.deepStrictEqual(cleared.json.events, [])
        const off = yield* call(tenant, "PATCH", path, { active: false })
        assert.strictEqual(off.json.status, "DISABLED")
        const on = yield* call(tenant, "PATCH", path, { active: true })
        assert.strictEqual(on.json.status, "ACTIVE")
        assertError(yield* call(tenant, "PATCH", path, { url: "https://a:b@example.com/" }), 422, "BAD_REQUEST",
          "webhook url must not contain credentials")
        assertError(yield* call(tenant, "PATCH", path, { url: "gopher://example.com/" }), 422, "BAD_REQUEST",
          "webhook url must start with https://")
        assertError(yield* call(tenant, "PATCH", path, { events: ["TRANSACTION_DELETED"] }), 422, "BAD_REQUEST",
          "unknown event type TRANSACTION_DELETED")
        assertError(yield* call(tenant, "PATCH", path, { active: "yes" }), 422, "BAD_REQUEST")
        assert.strictEqual((yield* call(tenant, "GET", "/v1/webhooks")).json[0].url, "https://example.com/b",
          "a refused change changes nothing")
        assertError(
          yield* call(tenant, "PATCH", "/v1/webhooks/01a20190-0000-7000-8000-000000000000", { active: true }),
          404,
          "NOT_FOUND",
          "webhook endpoint not found"
        )
      }))

    it.effect("DELETE: 204, the endpoint becomes DISABLED and is kept; again 204; 404 webhook not found", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const endpoint = created(yield* createEndpoint(tenant, { url: "https://example.com/" }))
        const deleted = yield* call(tenant, "DELETE", `/v1/webhooks/${endpoint.id}`)
        assert.strictEqual(deleted.status, 204)
        assert.strictEqual(deleted.text, "")
        const [kept] = (yield* call(tenant, "GET", "/v1/webhooks")).json
        assert.strictEqual(kept.id, endpoint.id)
        assert.strictEqual(kept.status, "DISABLED")
        assert.strictEqual((yield* call(tenant, "DELETE", `/v1/webhooks/${endpoint.id}`)).status, 204)
        assertError(
          yield* call(tenant, "DELETE", "/v1/webhooks/01a20190-0000-7000-8000-000000000000"),
          404,
          "NOT_FOUND",
          "webhook not found"
        )
      }))

    it.effect("at most 10 ACTIVE: the 11th is 422 LIMIT_EXCEEDED; disabled ones do not count; re-enabling at 10 is refused", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const ids: Array<string> = []
        for (let index = 0; index < 10; index++) {
          ids.push(created(yield* createEndpoint(tenant, { url: `https://example.com/${index}` })).id)
        }
        assertError(yield* createEndpoint(tenant, { url: "https://example.com/11" }), 422, "LIMIT_EXCEEDED",
          "at most 10 active webhook endpoints")
        assert.strictEqual((yield* call(tenant, "DELETE", `/v1/webhooks/${ids[0]}`)).status, 204)
        const eleventh = created(yield* createEndpoint(tenant, { url: "https://example.com/11" }))
        assertError(yield* call(tenant, "PATCH", `/v1/webhooks/${ids[0]}`, { active: true }), 422, "LIMIT_EXCEEDED",
          "at most 10 active webhook endpoints")
        // A refused re-enable leaves the endpoint as it was, other fields included.
        const list = (yield* call(tenant, "GET", "/v1/webhooks")).json
        assert.strictEqual(list.find((item: any) => item.id === ids[0]).status, "DISABLED")
        assert.strictEqual(list.filter((item: any) => item.status === "ACTIVE").length, 10)
        // Changing an already active endpoint is not an activation.
        const patched = yield* call(tenant, "PATCH", `/v1/webhooks/${eleventh.id}`, { active: true, description: "x" })
        assert.strictEqual(patched.status, 200, patched.text)
        // Another tenant has its own 10.
        const other = yield* provisionTenant()
        created(yield* createEndpoint(other, { url: "https://example.com/other" }))
      }))

    it.effect("at most 10 ACTIVE holds under 25 concurrent registrations", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
        const responses = yield* Effect.all(
          Array.from({ length: 25 }, (_, index) => createEndpoint(tenant, { url: `https://example.com/${index}` })),
          { concurrency: "unbounded" }
        )
        const statuses = responses.map((response) => response.status)
        assert.strictEqual(statuses.filter((status) => status === 201).length, 10, JSON.stringify(statuses))
        for (const response of responses.filter((candidate) => candidate.status !== 201)) {
          assertError(response, 422, "LIMIT_EXCEEDED", "at most 10 active webhook endpoints")
        }
        const sql = yield* SqlClient.SqlClient
        const [count] = yield* sql<{ active: number }>`
          SELECT count(*)::int AS active FROM webhook_endpoints WHERE tenant_id = ${tenant.tenantId} AND status = 'ACTIVE'`
        assert.strictEqual(count!.active, 10)
      }))

    it.effect("quota of endpoints active and disabled (default 100): DELETE then POST cannot add rows forever", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const sql = yield* SqlClient.SqlClient
        const [tenantRow] = yield* sql<{ quota: number }>`
          SELECT webhook_endpoints_max AS quota FROM tenants WHERE id = ${tenant.tenantId}`
        assert.strictEqual(tenantRow!.quota, 100)
        // Lowered for the test, as an operator would raise it for one tenant.
        yield* sql`UPDATE tenants SET webhook_endpoints_max = 12 WHERE id = ${tenant.tenantId}`
        for (let index = 0; index < 12; index++) {
          const endpoint = created(yield* createEndpoint(tenant, { url: `https://example.com/${index}` }))
          assert.strictEqual((yield* call(tenant, "DELETE", `/v1/webhooks/${endpoint.id}`)).status, 204)
        }
        // No endpoint is active, yet the 13th row is refused.
        assertError(yield* createEndpoint(tenant, { url: "https://example.com/13" }), 422, "LIMIT_EXCEEDED",
          "webhook endpoint quota reached (active and disabled endpoints count); ask the operator to raise it")
        const [count] = yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM webhook_endpoints WHERE tenant_id = ${tenant.tenantId}`
        assert.strictEqual(count!.total, 12)
        // Re-enabling a kept endpoint adds no row, so the quota does not refuse it.
        const [first] = (yield* call(tenant, "GET", "/v1/webhooks")).json
        assert.strictEqual((yield* call(tenant, "PATCH", `/v1/webhooks/${first.id}`, { active: true })).status, 200)
        // Another tenant has its own quota.
        const other = yield* provisionTenant()
        created(yield* createEndpoint(other, { url: "https://example.com/other" }))
      }))

    it.effect("the endpoint quota holds under 20 concurrent registrations", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE tenants SET webhook_endpoints_max = 4 WHERE id = ${tenant.tenantId}`
        const responses = yield* Effect.all(
          Array.from({ length: 20 }, (_, index) => createEndpoint(tenant, { url: `https://example.com/${index}` })),
          { concurrency: "unbounded" }
        )
        const statuses = responses.map((response) => response.status)
        assert.strictEqual(statuses.filter((status) => status === 201).length, 4, JSON.stringify(statuses))
        for (const response of responses.filter((candidate) => candidate.status !== 201)) {
          assertError(response, 422, "LIMIT_EXCEEDED",
            "webhook endpoint quota reached (active and disabled endpoints count); ask the operator to raise it")
        }
        const [count] = yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM webhook_endpoints WHERE tenant_id = ${tenant.tenantId}`
        assert.strictEqual(count!.total, 4)
      }))

    it.effect("another tenant's endpoint is 404 on PATCH, DELETE and test, and never listed", () =>
      Effect.gen(function*() {
        const owner = yield* provisionTenant()
        const other = yield* provisionTenant()
        const endpoint = created(yield* createEndpoint(owner, { url: "https://example.com/" }))
        assertError(yield* call(other, "PATCH", `/v1/webhooks/${endpoint.id}`, { active: false }), 404, "NOT_FOUND",
          "webhook endpoint not found")
        assertError(yield* call(other, "DELETE", `/v1/webhooks/${endpoint.id}`), 404, "NOT_FOUND", "webhook not found")
        assertError(yield* call(other, "POST", `/v1/webhooks/${endpoint.id}/test`), 404, "NOT_FOUND")
        assert.deepStrictEqual((yield* call(other, "GET", "/v1/webhooks")).json, [])
        assert.strictEqual((yield* call(owner, "GET", "/v1/webhooks")).json[0].status, "ACTIVE", "untouched")
      }))

    it.effect("GET /v1/webhooks/public_key: keyId v1 and the 64-hex key that event_types publishes", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const response = yield* call(tenant, "GET", "/v1/webhooks/public_key")
        assert.strictEqual(response.status, 200)
        assert.deepStrictEqual(Object.keys(response.json).sort(), ["keyId", "publicKey"])
        assert.strictEqual(response.json.keyId, "v1")
        assert.match(response.json.publicKey, /^[0-9a-f]{64}$/)
        const info = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/webhooks/event_types" })
        assert.strictEqual(info.json.signature.publicKey, response.json.publicKey)
        // Signed like every other route.
        const unsigned = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/webhooks/public_key" })
        assertError(unsigned, 401, "UNAUTHORIZED", "authentication required")
      }))
  })

  describe("typed client", () => {
    it.effect("the API definitions serve a typed client: 201, 202, 204, 200 and a typed NotFound", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const client = yield* tenantClient(tenant)
        const endpoint = yield* client.webhooks.create({ payload: { url: "https://example.com/typed", events: ["VAULT_GAS_LOW"] } })
        assert.deepStrictEqual(endpoint.events, ["VAULT_GAS_LOW"])
        const { eventId } = yield* client.webhooks.test({ params: { id: endpoint.id } })
        const resent = yield* client.webhooks.resend({ params: { eventId } })
        assert.strictEqual(resent.eventId, eventId)
        // 0 or 1: the dispatcher may not have fanned the event out yet.
        assert.isAtMost(resent.requeued, 1)
        yield* client.webhooks.disable({ params: { id: endpoint.id } })
        const [listed] = yield* client.webhooks.list()
        assert.strictEqual(listed!.status, "DISABLED")
        const missing = yield* Effect.flip(
          client.webhooks.update({ params: { id: "01a20190-0000-7000-8000-000000000000" }, payload: { active: true } })
        )
        assert.strictEqual(missing._tag, "NotFound")
        const { items } = yield* client.webhooks.deliveries({ query: { endpointId: endpoint.id, limit: 10 } })
        assert.isArray(items)
        const key = yield* client.webhooks.publicKey()
        assert.strictEqual(key.keyId, "v1")
      }))
  })

  describe("parameters that fail their type: 400 before authentication", () => {
    it.effect("deliveries query and path ids", () =>
      Effect.gen(function*() {
        const baseUrl = yield* PublicAddress
        const unsigned = (method: string, target: string) => rawRequest({ baseUrl, method, target })
        for (
          const query of [
            "limit=0",
            "limit=201",
            "limit=abc",
            "limit=1.5",
            "before=abc",
            "before=-1",
            "before=0",
            "before=1.5",
            "before=99999999999999999999",
            "status=SENT",
            "status=pending",
            "endpointId=not-a-uuid"
          ]
        ) {
          assertError(yield* unsigned("GET", `/v1/webhooks/deliveries?${query}`), 400, "BAD_REQUEST")
        }
        assertError(yield* unsigned("PATCH", "/v1/webhooks/not-a-uuid"), 400, "BAD_REQUEST")
        assertError(yield* unsigned("DELETE", "/v1/webhooks/not-a-uuid"), 400, "BAD_REQUEST")
        assertError(yield* unsigned("POST", "/v1/webhooks/not-a-uuid/test"), 400, "BAD_REQUEST")
        assertError(yield* unsigned("POST", "/v1/webhooks/events/not-a-uuid/resend"), 400, "BAD_REQUEST")
        // Well-formed values reach authentication.
        assertError(
          yield* unsigned("GET", "/v1/webhooks/deliveries?limit=200&before=12&status=DEAD"),
          401,
          "UNAUTHORIZED",
          "authentication required"
        )
        assertError(yield* unsigned("GET", "/v1/webhooks"), 401, "UNAUTHORIZED")
      }))

    it.effect("unsupported methods: 405 with Allow; event_types is not taken for an endpoint id", () =>
      Effect.gen(function*() {
        const baseUrl = yield* PublicAddress
        const id = "01a20190-0000-7000-8000-000000000000"
        const cases: ReadonlyArray<readonly [string, string, string]> = [
          ["GET", `/v1/webhooks/${id}`, "PATCH, DELETE"],
          ["PUT", `/v1/webhooks/${id}`, "PATCH, DELETE"],
          ["GET", `/v1/webhooks/${id}/test`, "POST"],
          ["DELETE", "/v1/webhooks", "GET, POST"],
          ["POST", "/v1/webhooks/deliveries", "GET"],
          ["POST", "/v1/webhooks/public_key", "GET"],
          ["GET", `/v1/webhooks/events/${id}/resend`, "POST"],
          ["POST", "/v1/webhooks/event_types", "GET"]
        ]
        for (const [method, target, allow] of cases) {
          const response = yield* rawRequest({ baseUrl, method, target, ...(method === "GET" ? {} : { body: "{}" }) })
          assertError(response, 405, "BAD_REQUEST")
          assert.strictEqual(response.headers.get("allow"), allow, `${method} ${target}`)
        }
      }))
  })

  describe("delivery", () => {
    it.effect("WALLET_CREATED from creating a wallet arrives signed, and verifies with the public key", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const receiver = yield* makeReceiver()
        const endpoint = created(yield* createEndpoint(tenant, { url: receiver.url }))
        const walletId = yield* createWallet(tenant, "hooked")
        const [request] = yield* receiver.waitForRequests(1)
        const publicKey = yield* publicKeyOf(tenant)
        const verified = verifyDelivery(request!, publicKey, Math.floor(Date.now() / 1000))
        assert.isTrue(verified.ok, JSON.stringify(verified))
        if (!verified.ok) return
        assert.strictEqual(request!.method, "POST")
        assert.strictEqual(request!.path, "/hooks")
        assert.strictEqual(request!.headers["content-type"], "application/json")
        assert.strictEqual(request!.headers["x-coffer-event-type"], "WALLET_CREATED")
        const body = verified.body
        assert.deepStrictEqual(Object.keys(body).sort(), ["createdAt", "data", "eventId", "tenantId", "type"])
        assert.strictEqual(request!.headers["x-coffer-event-id"], body.eventId)
        assert.strictEqual(body.type, "WALLET_CREATED")
        assert.strictEqual(body.tenantId, tenant.tenantId)
        assert.match(body.createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
        const wallet = (yield* call(tenant, "GET", `/v1/wallets/${walletId}`)).json
        assert.deepStrictEqual(body.data, { walletId, chainFamily: "EVM", address: wallet.address })
        // A tampered body, or another key, does not verify.
        const tampered = { ...request!, rawBody: Buffer.from(request!.rawBody.toString().replace("EVM", "BTC")) }
        assert.isFalse(verifyDelivery(tampered, publicKey).ok)
        assert.isFalse(verifyDelivery(request!, "11".repeat(32)).ok)
        const record = yield* deliveryWhen(tenant, endpoint.id, body.eventId, (item) => item.status === "DELIVERED")
        assert.deepStrictEqual(Object.keys(record).sort(), deliveryKeys)
        assert.isNumber(record.id)
        assert.strictEqual(record.eventType, "WALLET_CREATED")
        assert.strictEqual(record.endpointId, endpoint.id)
        assert.strictEqual(record.url, receiver.url)
        assert.strictEqual(record.attempt, 1)
        assert.strictEqual(record.responseStatus, 200)
        assert.isNull(record.lastError)
        assert.isNull(record.nextAt)
        assert.isAtLeast(record.durationMs, 0)
        assert.match(record.lastAttemptAt, /^\d{4}-\d{2}-\d{2}T/)
        yield* realSleep(300)
        assert.strictEqual(receiver.requests.length, 1, "delivered once")
      }))

    it.effect("subscriptions: empty events gets every type, a subscribed list only its types", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const all = yield* makeReceiver()
        const testsOnly = yield* makeReceiver()
        created(yield* createEndpoint(tenant, { url: all.url }))
        const filtered = created(yield* createEndpoint(tenant, { url: testsOnly.url, events: ["WEBHOOK_TEST"] }))
        const walletId = yield* createWallet(tenant, "subscriber")
        yield* walletCreatedEvent(walletId)
        yield* all.waitForRequests(1)
        const test = yield* call(tenant, "POST", `/v1/webhooks/${filtered.id}/test`)
        yield* testsOnly.waitForRequests(1)
        yield* realSleep(300)
        assert.deepStrictEqual(all.requests.map((request) => request.headers["x-coffer-event-type"]), ["WALLET_CREATED"])
        assert.deepStrictEqual(testsOnly.requests.map((request) => request.headers["x-coffer-event-id"]), [test.json.eventId])
      }))

    it.effect("POST /v1/webhooks/{id}/test: 202 {eventId}; WEBHOOK_TEST goes to that endpoint only", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const target = yield* makeReceiver()
        const bystander = yield* makeReceiver()
        const endpoint = created(yield* createEndpoint(tenant, { url: target.url }))
        created(yield* createEndpoint(tenant, { url: bystander.url }))
        const response = yield* call(tenant, "POST", `/v1/webhooks/${endpoint.id}/test`)
        assert.strictEqual(response.status, 202, response.text)
        assert.deepStrictEqual(Object.keys(response.json), ["eventId"])
        const [request] = yield* target.waitForRequests(1)
        const verified = verifyDelivery(request!, yield* publicKeyOf(tenant))
        assert.isTrue(verified.ok)
        if (!verified.ok) return
        assert.strictEqual(verified.body.eventId, response.json.eventId)
        assert.strictEqual(verified.body.type, "WEBHOOK_TEST")
        assert.deepStrictEqual(verified.body.data, { message: "This is a test event from Coffer.", endpointId: endpoint.id })
        yield* deliveryWhen(tenant, endpoint.id, response.json.eventId, (item) => item.status === "DELIVERED")
        yield* realSleep(300)
        assert.strictEqual(bystander.requests.length, 0)
        assertError(yield* call(tenant, "POST", "/v1/webhooks/01a20190-0000-7000-8000-000000000000/test"), 404, "NOT_FOUND")
      }))

    it.effect("a disabled endpoint receives nothing; its test event waits and is delivered after re-enabling", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const receiver = yield* makeReceiver()
        const endpoint = created(yield* createEndpoint(tenant, { url: receiver.url }))
        assert.strictEqual((yield* call(tenant, "DELETE", `/v1/webhooks/${endpoint.id}`)).status, 204)
        // An event produced while it is disabled...
        const walletId = yield* createWallet(tenant, "while-disabled")
        yield* walletCreatedEvent(walletId)
        // ...and a test event, which waits for it.
        const test = yield* call(tenant, "POST", `/v1/webhooks/${endpoint.id}/test`)
        assert.strictEqual(test.status, 202)
        const waiting = yield* deliveryWhen(tenant, endpoint.id, test.json.eventId, (item) => item.status === "PENDING")
        assert.strictEqual(waiting.attempt, 0)
        assert.isNull(waiting.lastAttemptAt)
        yield* realSleep(1_000)
        assert.strictEqual(receiver.requests.length, 0, "nothing reaches a disabled endpoint")
        const enabled = yield* call(tenant, "PATCH", `/v1/webhooks/${endpoint.id}`, { active: true })
        assert.strictEqual(enabled.json.status, "ACTIVE")
        const [request] = yield* receiver.waitForRequests(1)
        assert.strictEqual(request!.headers["x-coffer-event-id"], test.json.eventId)
        yield* deliveryWhen(tenant, endpoint.id, test.json.eventId, (item) => item.status === "DELIVERED")
        yield* realSleep(500)
        // The wallet event of the disabled period is not back-filled.
        assert.deepStrictEqual(receiver.requests.map((candidate) => candidate.headers["x-coffer-event-type"]), ["WEBHOOK_TEST"])
        assert.strictEqual((yield* listDeliveries(tenant, `?endpointId=${endpoint.id}`)).length, 1)
      }))

    it.effect("a receiver answering 500 is recorded and retried after 1 minute (the first step of the schedule)", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const receiver = yield* makeReceiver(() => 500)
        const endpoint = created(yield* createEndpoint(tenant, { url: receiver.url }))
        const test = yield* call(tenant, "POST", `/v1/webhooks/${endpoint.id}/test`)
        const record = yield* deliveryWhen(tenant, endpoint.id, test.json.eventId, (item) => item.attempt === 1)
        assert.strictEqual(record.status, "PENDING")
        assert.strictEqual(record.responseStatus, 500)
        assert.strictEqual(record.lastError, "HTTP 500")
        assert.strictEqual(Date.parse(record.nextAt) - Date.parse(record.lastAttemptAt) - record.durationMs, 60_000)
      }))

    it.effect("resend: 200 {eventId, requeued}, counters reset, delivered again at once; 404 event not found", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const receiver = yield* makeReceiver()
        const endpoint = created(yield* createEndpoint(tenant, { url: receiver.url }))
        const test = yield* call(tenant, "POST", `/v1/webhooks/${endpoint.id}/test`)
        const eventId = test.json.eventId
        const first = yield* deliveryWhen(tenant, endpoint.id, eventId, (item) => item.status === "DELIVERED")
        receiver.setResponder(() => "hang")
        const resent = yield* call(tenant, "POST", `/v1/webhooks/events/${eventId}/resend`)
        assert.strictEqual(resent.status, 200, resent.text)
        assert.deepStrictEqual(resent.json, { eventId, requeued: 1 })
        // Counters reset: PENDING with no attempt, until the second request (which hangs) is answered.
        const reset = yield* deliveryWhen(tenant, endpoint.id, eventId, (item) => item.status === "PENDING")
        assert.strictEqual(reset.attempt, 0)
        assert.isNull(reset.responseStatus)
        assert.isNull(reset.lastAttemptAt)
        assert.strictEqual(reset.id, first.id, "the same delivery record")
        const requests = yield* receiver.waitForRequests(2)
        assert.strictEqual(requests[1]!.headers["x-coffer-event-id"], eventId)
        assertError(yield* call(tenant, "POST", "/v1/webhooks/events/01a20190-0000-7000-8000-000000000000/resend"),
          404, "NOT_FOUND", "event not found")
        const other = yield* provisionTenant()
        assertError(yield* call(other, "POST", `/v1/webhooks/events/${eventId}/resend`), 404, "NOT_FOUND",
          "event not found")
      }))

    it.effect("deliveries: newest first, filters by endpoint and status, pages with before; other tenants see none", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const ok = yield* makeReceiver()
        const failing = yield* makeReceiver(() => 503)
        const good = created(yield* createEndpoint(tenant, { url: ok.url }))
        const bad = created(yield* createEndpoint(tenant, { url: failing.url }))
        const eventIds: Array<string> = []
        for (let index = 0; index < 3; index++) {
          eventIds.push((yield* call(tenant, "POST", `/v1/webhooks/${good.id}/test`)).json.eventId)
        }
        const badEvent = (yield* call(tenant, "POST", `/v1/webhooks/${bad.id}/test`)).json.eventId
        for (const eventId of eventIds) {
          yield* deliveryWhen(tenant, good.id, eventId, (item) => item.status === "DELIVERED")
        }
        yield* deliveryWhen(tenant, bad.id, badEvent, (item) => item.attempt === 1)
        const all = yield* listDeliveries(tenant)
        assert.strictEqual(all.length, 4)
        const ids = all.map((item) => item.id)
        assert.deepStrictEqual(ids, [...ids].sort((a, b) => b - a), "newest first")
        const page1 = yield* listDeliveries(tenant, "?limit=2")
        assert.deepStrictEqual(page1.map((item) => item.id), ids.slice(0, 2))
        const page2 = yield* listDeliveries(tenant, `?limit=2&before=${page1[1].id}`)
        assert.deepStrictEqual(page2.map((item) => item.id), ids.slice(2, 4))
        const page3 = yield* listDeliveries(tenant, `?limit=2&before=${page2[1].id}`)
        assert.deepStrictEqual(page3, [])
        const byEndpoint = yield* listDeliveries(tenant, `?endpointId=${good.id}`)
        assert.deepStrictEqual(byEndpoint.map((item) => item.eventId).sort(), [...eventIds].sort())
        const pending = yield* listDeliveries(tenant, "?status=PENDING")
        assert.deepStrictEqual(pending.map((item) => item.eventId), [badEvent])
        assert.strictEqual(pending[0].responseStatus, 503)
        assert.strictEqual((yield* listDeliveries(tenant, "?status=DELIVERED")).length, 3)
        assert.deepStrictEqual(yield* listDeliveries(tenant, "?status=DEAD"), [])
        const other = yield* provisionTenant()
        assert.deepStrictEqual(yield* listDeliveries(other), [])
        assert.deepStrictEqual(yield* listDeliveries(other, `?endpointId=${good.id}`), [])
      }))
  })
})
