/**
 * The operator interface (operator-interface.md): bearer token, tenants, settings merge, API keys, the portal
 * stand-in for users (TOTP, cooldown, status) and health, over the real operator listener, with the effects checked
 * on the /v1 listener where the spec ties them together (revocation at once, totpEnabled, cooldownUntil).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { OpsAddress, PublicAddress } from "../../src/App.ts"
import { rawPublicKeyHex } from "../../src/auth/Ed25519.ts"
import { assertError, atRealisticTime, authenticationRequired, freshTime } from "../support/Signing.ts"
import {
  makeTestAppLayer,
  opsRequest,
  provisionTenant,
  rawRequest,
  type RawResponse,
  testOpsToken,
  type TestTenant
} from "../support/TestApp.ts"

const ops = opsRequest

const v1 = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  Effect.flatMap(PublicAddress, (baseUrl) =>
    rawRequest({ baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }))

const status = (response: RawResponse, expected: number) => {
  assert.strictEqual(response.status, expected, response.text)
  return response.json
}

const publicKeyHex = () => rawPublicKeyHex(generateKeyPairSync("ed25519").publicKey)

const rfc3339Pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/
const allNetworks = ["ETH_SEPOLIA", "BSC_TESTNET", "TRON_NILE", "BTC_TESTNET", "SOL_DEVNET"]

layer(atRealisticTime(makeTestAppLayer()))("operator interface", (it) => {
  it.effect("transport: a wrong or missing bearer token is 401 UNAUTHORIZED in the envelope", () =>
    Effect.gen(function*() {
      const baseUrl = yield* OpsAddress
      const cases: ReadonlyArray<Record<string, string>> = [
        {},
        { authorization: "Bearer wrong-token" },
        { authorization: `bearer ${testOpsToken}` },
        { authorization: testOpsToken },
        { authorization: `Bearer ${testOpsToken}x` },
        { authorization: `Bearer ${testOpsToken.slice(0, -1)}` }
      ]
      for (const headers of cases) {
        assertError(yield* rawRequest({ baseUrl, method: "GET", target: "/ops/health", headers }), 401, "UNAUTHORIZED")
        assertError(
          yield* rawRequest({ baseUrl, method: "POST", target: "/ops/tenants", body: "{\"name\":\"x\"}", headers }),
          401,
          "UNAUTHORIZED"
        )
      }
      const withId = yield* rawRequest({
        baseUrl,
        method: "GET",
        target: "/ops/health",
        headers: { "x-request-id": "ops-trace" }
      })
      assert.strictEqual(withId.json.error.requestId, "ops-trace")
    }))

  it.effect("transport: unknown route 404, wrong method 405, X-Request-Id, and the ops listener is not /v1", () =>
    Effect.gen(function*() {
      assertError(yield* ops("GET", "/ops/nothing"), 404, "NOT_FOUND")
      const wrongMethod = yield* ops("PUT", "/ops/tenants")
      assertError(wrongMethod, 405, "BAD_REQUEST")
      assert.strictEqual(wrongMethod.headers.get("allow"), "GET, POST")
      const health = yield* ops("GET", "/ops/health", undefined, { "x-request-id": "ops-ok" })
      assert.strictEqual(health.headers.get("x-request-id"), "ops-ok")
      // The tenant interface is not served on the operator listener, nor the operator interface on the public one.
      assertError(yield* ops("GET", "/v1/networks"), 404, "NOT_FOUND")
      const baseUrl = yield* PublicAddress
      assertError(
        yield* rawRequest({
          baseUrl,
          method: "GET",
          target: "/ops/health",
          headers: { authorization: `Bearer ${testOpsToken}` }
        }),
        404,
        "NOT_FOUND"
      )
    }))

  it.effect("GET /ops/health: 200 with the database ok", () =>
    Effect.gen(function*() {
      const health = status(yield* ops("GET", "/ops/health"), 200)
      assert.strictEqual(health.status, "ok")
      assert.strictEqual(health.database, "ok")
      assert.isObject(health.chains)
      assert.include(["ACTIVE", "DISABLED"], health.signer)
    }))

  it.effect("POST /ops/tenants: 201 tenant object, networks default to all, name 1-100", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "  Acme Exchange  " }), 201)
      assert.deepStrictEqual(
        Object.keys(tenant).sort(),
        ["createdAt", "id", "name", "networks", "settings", "status", "subscriptionExpiresAt"]
      )
      assert.match(tenant.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      assert.strictEqual(tenant.name, "Acme Exchange")
      assert.strictEqual(tenant.status, "ACTIVE")
      assert.isNull(tenant.subscriptionExpiresAt)
      assert.deepStrictEqual(tenant.settings, {})
      assert.deepStrictEqual(tenant.networks, allNetworks)
      assert.match(tenant.createdAt, rfc3339Pattern)
      const subset = status(yield* ops("POST", "/ops/tenants", { name: "n", networks: ["TRON_NILE", "TRON_NILE"] }), 201)
      assert.deepStrictEqual(subset.networks, ["TRON_NILE"])
      const none = status(yield* ops("POST", "/ops/tenants", { name: "n", networks: [] }), 201)
      assert.deepStrictEqual(none.networks, [])
      assert.strictEqual(status(yield* ops("POST", "/ops/tenants", { name: "x".repeat(100) }), 201).name, "x".repeat(100))
      for (const body of [{ name: "" }, { name: "   " }, { name: "x".repeat(101) }, { name: "n", networks: ["NOPE"] }]) {
        assertError(yield* ops("POST", "/ops/tenants", body), 422, "BAD_REQUEST")
      }
      for (const body of [{}, { name: 5 }, { name: "n", networks: "ETH_SEPOLIA" }, "{"]) {
        assertError(yield* ops("POST", "/ops/tenants", body), 422, "BAD_REQUEST")
      }
    }))

  it.effect("GET /ops/tenants/{id}: 200; 404 for an unknown id; 400 for one that is not a UUID", () =>
    Effect.gen(function*() {
      const created = status(yield* ops("POST", "/ops/tenants", { name: "fetch me" }), 201)
      assert.deepStrictEqual(status(yield* ops("GET", `/ops/tenants/${created.id}`), 200), created)
      assertError(yield* ops("GET", "/ops/tenants/01900000-0000-7000-8000-000000000000"), 404, "NOT_FOUND")
      for (const id of ["not-a-uuid", "1", "01900000-0000-7000-8000-00000000000g"]) {
        assertError(yield* ops("GET", `/ops/tenants/${id}`), 400, "BAD_REQUEST")
        assertError(yield* ops("PATCH", `/ops/tenants/${id}`, { status: "ACTIVE" }), 400, "BAD_REQUEST")
        assertError(yield* ops("POST", `/ops/tenants/${id}/api-keys`, { name: "k", publicKey: publicKeyHex() }), 400, "BAD_REQUEST")
        assertError(yield* ops("DELETE", `/ops/tenants/${id}/api-keys/ak_000000000000000000000000`), 400, "BAD_REQUEST")
        assertError(yield* ops("POST", `/ops/tenants/${id}/users/someone/totp`), 400, "BAD_REQUEST")
        assertError(yield* ops("PATCH", `/ops/tenants/${id}/users/someone`, { status: "FROZEN" }), 400, "BAD_REQUEST")
      }
    }))

  it.effect("PATCH /ops/tenants/{id}: status, subscriptionExpiresAt, networks", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "patch me" }), 201)
      const path = `/ops/tenants/${tenant.id}`
      assert.strictEqual(status(yield* ops("PATCH", path, { status: "SUSPENDED" }), 200).status, "SUSPENDED")
      const expiring = status(yield* ops("PATCH", path, { subscriptionExpiresAt: "2027-01-31T12:00:00+02:00" }), 200)
      assert.strictEqual(expiring.subscriptionExpiresAt, "2027-01-31T10:00:00.000Z")
      assert.strictEqual(expiring.status, "SUSPENDED", "a partial patch keeps the other fields")
      const networks = status(yield* ops("PATCH", path, { networks: ["SOL_DEVNET", "ETH_SEPOLIA"], status: "ACTIVE" }), 200)
      assert.deepStrictEqual(networks.networks, ["SOL_DEVNET", "ETH_SEPOLIA"])
      assert.strictEqual(networks.status, "ACTIVE")
      assert.strictEqual(networks.subscriptionExpiresAt, "2027-01-31T10:00:00.000Z")
      assert.isNull(status(yield* ops("PATCH", path, { subscriptionExpiresAt: null }), 200).subscriptionExpiresAt)
      const unchanged = status(yield* ops("PATCH", path, {}), 200)
      assert.deepStrictEqual(unchanged, status(yield* ops("GET", path), 200))
      const invalid: ReadonlyArray<unknown> = [
        { status: "DELETED" },
        { status: "suspended" },
        { subscriptionExpiresAt: "tomorrow" },
        { subscriptionExpiresAt: "2027-01-31" },
        { subscriptionExpiresAt: 1767225600 },
        { networks: ["NOPE"] },
        { settings: "nope" },
        { settings: ["a"] }
      ]
      for (const body of invalid) assertError(yield* ops("PATCH", path, body), 422, "BAD_REQUEST")
      assert.deepStrictEqual(status(yield* ops("GET", path), 200), unchanged)
      assertError(yield* ops("PATCH", "/ops/tenants/01900000-0000-7000-8000-000000000000", { status: "ACTIVE" }), 404, "NOT_FOUND")
    }))

  it.effect("PATCH settings: partial merge, null removes a key, the whole is validated", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "settings" }), 201)
      const path = `/ops/tenants/${tenant.id}`
      const first = status(yield* ops("PATCH", path, {
        settings: { withdrawFees: { ETH_SEPOLIA_ETH: "5" }, walletsPerFamily: 3 }
      }), 200)
      assert.deepStrictEqual(first.settings, { withdrawFees: { ETH_SEPOLIA_ETH: "5" }, walletsPerFamily: 3 })
      const second = status(yield* ops("PATCH", path, {
        settings: {
          apiRequireUser2fa: true,
          limits: { ETH_SEPOLIA_ETH: { single: "100", daily: null } },
          blockedAddresses: ["0x0000000000000000000000000000000000000001"]
        }
      }), 200)
      assert.deepStrictEqual(second.settings, {
        withdrawFees: { ETH_SEPOLIA_ETH: "5" },
        walletsPerFamily: 3,
        apiRequireUser2fa: true,
        limits: { ETH_SEPOLIA_ETH: { single: "100", daily: null } },
        blockedAddresses: ["0x0000000000000000000000000000000000000001"]
      })
      // A top-level key is replaced as a whole, null removes it.
      const third = status(yield* ops("PATCH", path, {
        settings: { withdrawFees: { TRON_NILE_TRX: "7" }, walletsPerFamily: null, limits: null }
      }), 200)
      assert.deepStrictEqual(third.settings, {
        withdrawFees: { TRON_NILE_TRX: "7" },
        apiRequireUser2fa: true,
        blockedAddresses: ["0x0000000000000000000000000000000000000001"]
      })
      assert.deepStrictEqual(status(yield* ops("GET", path), 200).settings, third.settings)
    }))

  it.effect("PATCH settings: invalid values are 422 and change nothing (amounts must be raw digit strings)", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "strict settings" }), 201)
      const path = `/ops/tenants/${tenant.id}`
      status(yield* ops("PATCH", path, { settings: { depositFees: { ETH_SEPOLIA_ETH: "1" } } }), 200)
      const invalid: ReadonlyArray<Record<string, unknown>> = [
        { withdrawFees: { ETH_SEPOLIA_ETH: 5 } },
        { withdrawFees: { ETH_SEPOLIA_ETH: "5.0" } },
        { withdrawFees: { ETH_SEPOLIA_ETH: "-1" } },
        { withdrawFees: { ETH_SEPOLIA_ETH: "1e3" } },
        { withdrawFees: { ETH_SEPOLIA_ETH: "01" } },
        { withdrawFees: { ETH_SEPOLIA_ETH: "" } },
        { withdrawFees: { ETH_SEPOLIA_ETH: (2n ** 256n).toString() } },
        { withdrawFees: "5" },
        { apiRequireUser2fa: "yes" },
        { walletsPerFamily: 0 },
        { walletsPerFamily: 11 },
        { walletsPerFamily: 2.5 },
        { walletCreationsPer24h: 0 },
        { limits: { ETH_SEPOLIA_ETH: { single: 100 } } },
        { limits: { ETH_SEPOLIA_ETH: { single: "100" } } },
        { hiddenAssets: "ETH_SEPOLIA_ETH" },
        { blockedAddresses: [1] },
        { blockedAddresses: ["not an address"] },
        { depositFees: { ETH_SEPOLIA_ETH: "2" }, walletsPerFamily: 99 }
      ]
      for (const settings of invalid) {
        assertError(yield* ops("PATCH", path, { settings }), 422, "BAD_REQUEST")
      }
      assert.deepStrictEqual(status(yield* ops("GET", path), 200).settings, { depositFees: { ETH_SEPOLIA_ETH: "1" } })
    }))

  it.effect("PATCH settings: unknown setting names are ignored, not stored", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "typo" }), 201)
      const path = `/ops/tenants/${tenant.id}`
      const patched = status(yield* ops("PATCH", path, { settings: { withdrawFee: { ETH_SEPOLIA_ETH: "5" }, walletsPerFamily: 2 } }), 200)
      assert.deepStrictEqual(patched.settings, { walletsPerFamily: 2 })
      assert.deepStrictEqual(status(yield* ops("GET", path), 200).settings, { walletsPerFamily: 2 })
    }))

  it.effect("POST api-keys: 201 with keyId `ak_` + 24 hex, defaults, and no public key echoed", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "keys" }), 201)
      const path = `/ops/tenants/${tenant.id}/api-keys`
      const publicKey = publicKeyHex()
      const key = status(yield* ops("POST", path, { name: " backend ", publicKey }), 201)
      assert.deepStrictEqual(
        Object.keys(key).sort(),
        ["allowedIps", "createdAt", "keyId", "name", "rateLimitPerSecond", "status"]
      )
      assert.match(key.keyId, /^ak_[0-9a-f]{24}$/)
      assert.strictEqual(key.name, "backend")
      assert.deepStrictEqual(key.allowedIps, [])
      assert.strictEqual(key.rateLimitPerSecond, 50)
      assert.strictEqual(key.status, "ACTIVE")
      assert.match(key.createdAt, rfc3339Pattern)
      const ids = new Set([key.keyId])
      for (let index = 0; index < 5; index++) {
        ids.add(status(yield* ops("POST", path, { name: "k", publicKey: publicKeyHex() }), 201).keyId)
      }
      assert.strictEqual(ids.size, 6)
      const full = status(yield* ops("POST", path, {
        name: "n".repeat(100),
        publicKey: publicKeyHex().toUpperCase(),
        allowedIps: ["10.0.0.0/8", "192.168.1.5", "2001:db8::/32", "::1"],
        rateLimitPerSecond: 1000
      }), 201)
      assert.deepStrictEqual(full.allowedIps, ["10.0.0.0/8", "192.168.1.5", "2001:db8::/32", "::1"])
      assert.strictEqual(full.rateLimitPerSecond, 1000)
      assert.strictEqual(status(yield* ops("POST", path, { name: "slow", publicKey: publicKeyHex(), rateLimitPerSecond: 1 }), 201).rateLimitPerSecond, 1)
      assertError(
        yield* ops("POST", `/ops/tenants/01900000-0000-7000-8000-000000000000/api-keys`, { name: "k", publicKey }),
        404,
        "NOT_FOUND"
      )
    }))

  it.effect("POST api-keys: name 1-100, publicKey 64 hex, allowedIps IP or CIDR, rateLimitPerSecond 1-1000", () =>
    Effect.gen(function*() {
      const tenant = status(yield* ops("POST", "/ops/tenants", { name: "key rules" }), 201)
      const path = `/ops/tenants/${tenant.id}/api-keys`
      const good = { name: "k", publicKey: publicKeyHex() }
      const invalid: ReadonlyArray<Record<string, unknown>> = [
        { ...good, name: "" },
        { ...good, name: "n".repeat(101) },
        { ...good, publicKey: good.publicKey.slice(0, 62) },
        { ...good, publicKey: `${good.publicKey}00` },
        { ...good, publicKey: `zz${good.publicKey.slice(2)}` },
        { ...good, publicKey: Buffer.from(good.publicKey, "hex").toString("base64") },
        { ...good, allowedIps: ["300.1.1.1"] },
        { ...good, allowedIps: ["10.0.0.0/33"] },
        { ...good, allowedIps: ["2001:db8::/129"] },
        { ...good, allowedIps: ["example.com"] },
        { ...good, allowedIps: ["10"] },
        { ...good, allowedIps: ["10.0.0.1", "nope"] },
        { ...good, rateLimitPerSecond: 0 },
        { ...good, rateLimitPerSecond: 1001 },
        { ...good, rateLimitPerSecond: 2.5 },
        { ...good, rateLimitPerSecond: -1 },
        { ...good, rateLimitPerSecond: "50" },
        { name: "k" },
        { publicKey: good.publicKey }
      ]
      for (const body of invalid) assertError(yield* ops("POST", path, body), 422, "BAD_REQUEST")
    }))

  it.effect("DELETE api-keys: 204, and the key is rejected by /v1 at once; other keys keep working", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const second = status(yield* ops("POST", `/ops/tenants/${tenant.tenantId}/api-keys`, {
        name: "second",
        publicKey: publicKeyHex()
      }), 201)
      assert.strictEqual((yield* v1(tenant, "GET", "/v1/networks")).status, 200)
      const revoked = yield* ops("DELETE", `/ops/tenants/${tenant.tenantId}/api-keys/${tenant.keyId}`)
      assert.strictEqual(revoked.status, 204)
      assert.strictEqual(revoked.text, "")
      authenticationRequired(yield* v1(tenant, "GET", "/v1/networks"))
      // Unknown key, or a key of another tenant: 404, and the key is untouched.
      assertError(yield* ops("DELETE", `/ops/tenants/${tenant.tenantId}/api-keys/ak_000000000000000000000000`), 404, "NOT_FOUND")
      const other = yield* provisionTenant()
      assertError(yield* ops("DELETE", `/ops/tenants/${tenant.tenantId}/api-keys/${other.keyId}`), 404, "NOT_FOUND")
      assert.strictEqual((yield* v1(other, "GET", "/v1/networks")).status, 200)
      assertError(
        yield* ops("DELETE", `/ops/tenants/01900000-0000-7000-8000-000000000000/api-keys/${second.keyId}`),
        404,
        "NOT_FOUND"
      )
    }))

  it.effect("users: TOTP bind gives a base32 secret and otpauth URL; totpEnabled follows bind and unbind", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      status(yield* v1(tenant, "POST", "/v1/users", { customerRefId: "two/factor" }), 200)
      const path = `/ops/tenants/${tenant.tenantId}/users/${encodeURIComponent("two/factor")}/totp`
      const bound = status(yield* ops("POST", path), 200)
      assert.deepStrictEqual(Object.keys(bound).sort(), ["otpauthUrl", "secret"])
      assert.match(bound.secret, /^[A-Z2-7]{32}$/)
      const url = new URL(bound.otpauthUrl)
      assert.strictEqual(url.protocol, "otpauth:")
      assert.strictEqual(url.host, "totp")
      assert.strictEqual(url.searchParams.get("secret"), bound.secret)
      assert.isTrue(status(yield* v1(tenant, "GET", "/v1/users/two%2Ffactor"), 200).user.totpEnabled)
      // Binding again issues a new secret.
      const rebound = status(yield* ops("POST", path), 200)
      assert.notStrictEqual(rebound.secret, bound.secret)
      const unbound = yield* ops("DELETE", path)
      assert.strictEqual(unbound.status, 204)
      assert.isFalse(status(yield* v1(tenant, "GET", "/v1/users/two%2Ffactor"), 200).user.totpEnabled)
      assertError(yield* ops("POST", `/ops/tenants/${tenant.tenantId}/users/nobody/totp`), 404, "NOT_FOUND")
      assertError(yield* ops("DELETE", `/ops/tenants/${tenant.tenantId}/users/nobody/totp`), 404, "NOT_FOUND")
      assertError(
        yield* ops("POST", `/ops/tenants/01900000-0000-7000-8000-000000000000/users/${encodeURIComponent("two/factor")}/totp`),
        404,
        "NOT_FOUND"
      )
    }))

  it.effect("users: PATCH cooldownUntil and status; the /v1 user object shows them", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = status(yield* v1(tenant, "POST", "/v1/users", { customerRefId: "cool" }), 200)
      const path = `/ops/tenants/${tenant.tenantId}/users/cool`
      const cooled = status(yield* ops("PATCH", path, { cooldownUntil: "2030-01-02T03:04:05Z" }), 200)
      assert.deepStrictEqual(cooled, { ...user, cooldownUntil: "2030-01-02T03:04:05.000Z" })
      assert.strictEqual(status(yield* v1(tenant, "GET", "/v1/users/cool"), 200).user.cooldownUntil, "2030-01-02T03:04:05.000Z")
      const frozen = status(yield* ops("PATCH", path, { status: "FROZEN" }), 200)
      assert.deepStrictEqual(frozen, { ...cooled, status: "FROZEN" })
      const cleared = status(yield* ops("PATCH", path, { cooldownUntil: null, status: "ACTIVE" }), 200)
      assert.deepStrictEqual(cleared, user)
      for (const body of [{ cooldownUntil: "soon" }, { cooldownUntil: 5 }, { status: "DELETED" }, { status: "active" }]) {
        assertError(yield* ops("PATCH", path, body), 422, "BAD_REQUEST")
      }
      assertError(yield* ops("PATCH", `/ops/tenants/${tenant.tenantId}/users/ghost`, { status: "FROZEN" }), 404, "NOT_FOUND")
    }))

  it.effect("users: CLOSED is set by the operator only and cannot be reopened", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      status(yield* v1(tenant, "POST", "/v1/users", { customerRefId: "leaver", email: "leaver@example.com" }), 200)
      const path = `/ops/tenants/${tenant.tenantId}/users/leaver`
      assert.strictEqual(status(yield* ops("PATCH", path, { status: "CLOSED" }), 200).status, "CLOSED")
      for (const reopen of ["ACTIVE", "FROZEN"]) {
        assertError(yield* ops("PATCH", path, { status: reopen }), 409, "INVALID_STATE")
      }
      // Through /v1 neither status nor email of a closed user changes.
      assertError(yield* v1(tenant, "PATCH", "/v1/users/leaver", { status: "ACTIVE" }), 409, "INVALID_STATE")
      assertError(yield* v1(tenant, "PATCH", "/v1/users/leaver", { email: "back@example.com" }), 409, "INVALID_STATE")
      const closed = status(yield* v1(tenant, "GET", "/v1/users/leaver"), 200).user
      assert.strictEqual(closed.status, "CLOSED")
      assert.strictEqual(closed.email, "leaver@example.com")
      // Still closed; a cooldown may still be recorded.
      assert.strictEqual(status(yield* ops("PATCH", path, { status: "CLOSED", cooldownUntil: "2030-01-01T00:00:00Z" }), 200).status, "CLOSED")
      assert.strictEqual(status(yield* v1(tenant, "GET", "/v1/users?status=CLOSED"), 200).items.length, 1)
    }))
})
