/**
 * Spec section 5: every check of the signed-request authentication, in its place in the order, over real sockets.
 * One service per file; each test makes its own tenant, so tests do not share keys, nonces or rate windows.
 */
import { assert, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { randomUUID, sign } from "node:crypto"
import { PublicAddress } from "../../src/App.ts"
import { sha256Hex } from "../../src/client/RequestSigner.ts"
import {
  addApiKey,
  assertError,
  atRealisticTime,
  authenticationRequired,
  forgedHeaders,
  freshTime,
  goodClaims
} from "../support/Signing.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const kib = 1024

/** A JSON body for POST /v1/users of exactly `size` bytes (an ignored padding field fills it). */
const createUserBodyOfSize = (customerRefId: string, size: number) => {
  const empty = JSON.stringify({ customerRefId, pad: "" })
  return JSON.stringify({ customerRefId, pad: "x".repeat(size - empty.length) })
}

const get = (tenant: TestTenant, target: string, headers?: Record<string, string>) =>
  Effect.flatMap(PublicAddress, (baseUrl) =>
    rawRequest({ baseUrl, method: "GET", target, tenant, ...(headers === undefined ? {} : { headers }) }))

const post = (tenant: TestTenant | undefined, target: string, body: string, headers?: Record<string, string>) =>
  Effect.flatMap(PublicAddress, (baseUrl) =>
    rawRequest({
      baseUrl,
      method: "POST",
      target,
      body,
      ...(tenant === undefined ? {} : { tenant }),
      ...(headers === undefined ? {} : { headers })
    }))

/** GET /v1/networks with the token's claims or header edited. */
const networksWith = (
  tenant: TestTenant,
  now: number,
  edit: { readonly claims?: Record<string, unknown>; readonly header?: Record<string, unknown> }
) => get(tenant, "/v1/networks", forgedHeaders(tenant, { target: "/v1/networks", now }, edit))

const patchTenant = (tenantId: string, payload: {
  readonly status?: "ACTIVE" | "SUSPENDED"
  readonly subscriptionExpiresAt?: string | null
}) => Effect.flatMap(opsClient, (ops) => ops.tenants.update({ params: { tenantId }, payload })).pipe(Effect.orDie)

/** Re-encodes a base64url segment with the standard alphabet and padding. */
const toStandardBase64 = (segment: string) => Buffer.from(segment, "base64url").toString("base64")

layer(atRealisticTime(makeTestAppLayer()))("signed requests (spec section 5)", (it) => {
  it.effect("a correctly signed GET and POST pass every check", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const networks = yield* get(tenant, "/v1/networks")
      assert.strictEqual(networks.status, 200)
      const created = yield* post(tenant, "/v1/users", JSON.stringify({ customerRefId: "signed-post" }))
      assert.strictEqual(created.status, 200)
      assert.strictEqual(created.json.customerRefId, "signed-post")
    }))

  it.effect("check 1: a missing or empty X-API-Key is 401 authentication required", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const headers = forgedHeaders(tenant, { target: "/v1/networks", now })
      const baseUrl = yield* PublicAddress
      const missing = yield* rawRequest({
        baseUrl,
        method: "GET",
        target: "/v1/networks",
        headers: { authorization: headers.authorization! }
      })
      authenticationRequired(missing)
      const empty = yield* get(tenant, "/v1/networks", { ...headers, "x-api-key": "" })
      authenticationRequired(empty)
      const misspelled = yield* rawRequest({
        baseUrl,
        method: "GET",
        target: "/v1/networks",
        headers: { "x-api-keys": tenant.keyId, authorization: headers.authorization! }
      })
      authenticationRequired(misspelled)
    }))

  it.effect("check 2: Authorization must start with the case-sensitive `Bearer `", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const jwt = forgedHeaders(tenant, { target: "/v1/networks", now }).authorization!.slice("Bearer ".length)
      const baseUrl = yield* PublicAddress
      const without = yield* rawRequest({
        baseUrl,
        method: "GET",
        target: "/v1/networks",
        headers: { "x-api-key": tenant.keyId }
      })
      authenticationRequired(without)
      for (const authorization of [`bearer ${jwt}`, `BEARER ${jwt}`, `Bearer${jwt}`, jwt, `Basic ${jwt}`, `Bearer\t${jwt}`]) {
        const response = yield* get(tenant, "/v1/networks", { "x-api-key": tenant.keyId, authorization })
        authenticationRequired(response)
      }
      // The same token with the exact prefix passes.
      const good = yield* get(tenant, "/v1/networks", { "x-api-key": tenant.keyId, authorization: `Bearer ${jwt}` })
      assert.strictEqual(good.status, 200)
    }))

  it.effect("check 3: a body of 256 KiB passes, one byte more is 422 body too large", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const atLimit = createUserBodyOfSize("body-at-limit", 256 * kib)
      assert.strictEqual(Buffer.byteLength(atLimit), 256 * kib)
      const accepted = yield* post(tenant, "/v1/users", atLimit)
      assert.strictEqual(accepted.status, 200, accepted.text)
      assert.strictEqual(accepted.json.customerRefId, "body-at-limit")
      const tooLarge = yield* post(tenant, "/v1/users", createUserBodyOfSize("body-over-limit", 256 * kib + 1))
      assertError(tooLarge, 422, "BAD_REQUEST", "body too large")
    }))

  it.effect("check 3 / section 8: a body above 1 MiB is 413 BAD_REQUEST", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const response = yield* post(tenant, "/v1/users", createUserBodyOfSize("huge", 1024 * kib + 1))
      assertError(response, 413, "BAD_REQUEST")
      const twoMebibytes = yield* post(tenant, "/v1/users", createUserBodyOfSize("huge", 2048 * kib))
      assertError(twoMebibytes, 413, "BAD_REQUEST")
    }))

  it.effect("order: checks 1-2 come before check 3 (a 300 KiB body without key or Bearer is 401)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const body = createUserBodyOfSize("order-1-2", 300 * kib)
      const headers = forgedHeaders(tenant, { target: "/v1/users", body, now })
      authenticationRequired(yield* post(undefined, "/v1/users", body, { authorization: headers.authorization! }))
      authenticationRequired(yield* post(undefined, "/v1/users", body, { "x-api-key": tenant.keyId }))
      authenticationRequired(
        yield* post(undefined, "/v1/users", body, { "x-api-key": tenant.keyId, authorization: "Token abc" })
      )
    }))

  it.effect("order: check 3 comes before check 4 (an unknown key with a 300 KiB body is 422)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const body = createUserBodyOfSize("order-3-4", 300 * kib)
      const headers = forgedHeaders(tenant, { target: "/v1/users", body, now })
      const response = yield* post(undefined, "/v1/users", body, {
        ...headers,
        "x-api-key": "ak_000000000000000000000000"
      })
      assertError(response, 422, "BAD_REQUEST", "body too large")
    }))

  it.effect("check 4: an unknown key is 401", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const unknown = { ...tenant, keyId: "ak_0123456789abcdef01234567" }
      authenticationRequired(yield* networksWith(unknown, now, {}))
      authenticationRequired(yield* get(tenant, "/v1/networks", { "x-api-key": "not-a-key-id" }))
    }))

  it.effect("check 4: a revoked key is rejected with 401 at once", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      const ops = yield* opsClient
      yield* ops.tenants.revokeApiKey({ params: { tenantId: tenant.tenantId, keyId: tenant.keyId } })
      // Same second, no clock movement: the cached key must not survive the revocation.
      authenticationRequired(yield* get(tenant, "/v1/networks"))
      authenticationRequired(yield* post(tenant, "/v1/users", JSON.stringify({ customerRefId: "after-revoke" })))
    }))

  it.effect("checks 4, 5 and 9 hold from the commit, also when another process made the change (no cache notice here)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const sql = yield* SqlClient.SqlClient
      // Each change is written straight to the database, as another process would, so this process's key cache
      // (cleared only when another process's notice arrives, milliseconds later) still holds the key as it was.
      const revoked = yield* provisionTenant()
      assert.strictEqual((yield* get(revoked, "/v1/networks")).status, 200)
      yield* sql`UPDATE api_keys SET status = 'REVOKED', revoked_at = now() WHERE key_id = ${revoked.keyId}`
      authenticationRequired(yield* post(revoked, "/v1/users", JSON.stringify({ customerRefId: "after-revoke" })))

      const suspended = yield* provisionTenant()
      assert.strictEqual((yield* get(suspended, "/v1/networks")).status, 200)
      yield* sql`UPDATE tenants SET status = 'SUSPENDED' WHERE id = ${suspended.tenantId}`
      assertError(yield* get(suspended, "/v1/networks"), 403, "FORBIDDEN", "tenant suspended")

      const expired = yield* provisionTenant()
      assert.strictEqual((yield* get(expired, "/v1/networks")).status, 200)
      yield* sql`UPDATE tenants SET subscription_expires_at = '2000-01-01T00:00:00Z' WHERE id = ${expired.tenantId}`
      assertError(yield* get(expired, "/v1/networks"), 403, "FORBIDDEN", "tenant subscription expired")
      const users = yield* sql<{ n: string }>`
        SELECT count(*)::text AS n FROM users WHERE tenant_id = ${revoked.tenantId}`
      assert.strictEqual(users[0]!.n, "0", "nothing was created with the revoked key")
    }).pipe(Effect.orDie))

  it.effect("check 5: a suspended tenant is 403 tenant suspended; reactivation lets it in again", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      yield* patchTenant(tenant.tenantId, { status: "SUSPENDED" })
      assertError(yield* get(tenant, "/v1/networks"), 403, "FORBIDDEN", "tenant suspended")
      yield* patchTenant(tenant.tenantId, { status: "ACTIVE" })
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
    }))

  it.effect("order: check 4 before 5 (a revoked key of a suspended tenant is 401)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const ops = yield* opsClient
      yield* ops.tenants.revokeApiKey({ params: { tenantId: tenant.tenantId, keyId: tenant.keyId } })
      yield* patchTenant(tenant.tenantId, { status: "SUSPENDED" })
      authenticationRequired(yield* get(tenant, "/v1/networks"))
    }))

  it.effect("order: check 5 before 7 (a suspended tenant with a bad JWT is 403)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      yield* patchTenant(tenant.tenantId, { status: "SUSPENDED" })
      assertError(yield* networksWith(tenant, now, { header: { alg: "HS256" } }), 403, "FORBIDDEN", "tenant suspended")
      assertError(
        yield* get(tenant, "/v1/networks", { "x-api-key": tenant.keyId, authorization: "Bearer garbage" }),
        403,
        "FORBIDDEN",
        "tenant suspended"
      )
    }))

  it.effect("check 6: an IPv4 or CIDR allow-list admits the loopback peer", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const allowedIps of [["127.0.0.1"], ["127.0.0.0/8"], ["10.0.0.0/8", "127.0.0.1/32"], ["::ffff:127.0.0.1"]]) {
        const key = yield* addApiKey(tenant, { allowedIps })
        assert.strictEqual((yield* get(key, "/v1/networks")).status, 200, `allowedIps ${allowedIps.join(",")}`)
      }
    }))

  it.effect("check 6: a peer outside the allow-list is 403 `ip <ip> not allowed for this api key`", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const allowedIps of [["10.0.0.1"], ["10.0.0.0/8"], ["::1"], ["2001:db8::/32"], ["127.0.0.2"]]) {
        const key = yield* addApiKey(tenant, { allowedIps })
        assertError(
          yield* get(key, "/v1/networks"),
          403,
          "FORBIDDEN",
          "ip 127.0.0.1 not allowed for this api key"
        )
      }
    }))

  it.effect("check 6: X-Forwarded-For is ignored unless the peer is a trusted proxy", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const key = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      assertError(
        yield* get(key, "/v1/networks", { "x-forwarded-for": "203.0.113.7" }),
        403,
        "FORBIDDEN",
        "ip 127.0.0.1 not allowed for this api key"
      )
    }))

  it.effect("order: check 5 before 6, and 6 before 7 (bad JWT from a disallowed ip is 403)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const key = yield* addApiKey(tenant, { allowedIps: ["10.0.0.1"] })
      assertError(
        yield* networksWith(key, now, { header: { alg: "none" } }),
        403,
        "FORBIDDEN",
        "ip 127.0.0.1 not allowed for this api key"
      )
      yield* patchTenant(tenant.tenantId, { status: "SUSPENDED" })
      assertError(yield* get(key, "/v1/networks"), 403, "FORBIDDEN", "tenant suspended")
    }))

  it.effect("check 7: the token must have exactly three segments", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const jwt = forgedHeaders(tenant, { target: "/v1/networks", now }).authorization!.slice("Bearer ".length)
      const [header, claims, signature] = jwt.split(".") as [string, string, string]
      for (const token of [`${header}.${claims}`, `${jwt}.${signature}`, `${header}..${signature}`, "", "a.b.c"]) {
        authenticationRequired(
          yield* get(tenant, "/v1/networks", { "x-api-key": tenant.keyId, authorization: `Bearer ${token}` })
        )
      }
    }))

  it.effect("check 7: `=` padding is refused even when the signature covers the padded segments", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      // Find claims whose JSON length is not a multiple of 3, so base64 needs padding.
      let claims = goodClaims(tenant, "/v1/networks", "", now)
      while (JSON.stringify(claims).length % 3 === 0) claims = goodClaims(tenant, "/v1/networks", "", now)
      const header = Buffer.from(JSON.stringify({ alg: "EdDSA", typ: "JWT" })).toString("base64url")
      const padded = Buffer.from(JSON.stringify(claims)).toString("base64")
        .replaceAll("+", "-").replaceAll("/", "_")
      assert.isTrue(padded.endsWith("="))
      const signature = sign(null, Buffer.from(`${header}.${padded}`, "ascii"), tenant.privateKey).toString("base64url")
      authenticationRequired(
        yield* get(tenant, "/v1/networks", {
          "x-api-key": tenant.keyId,
          authorization: `Bearer ${header}.${padded}.${signature}`
        })
      )
    }))

  it.effect("check 7: the standard base64 alphabet is refused even when validly signed", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      // Find claims whose standard base64 has a `+` or `/`, so the alphabets really differ.
      let standard = ""
      for (let attempt = 0; attempt < 1000; attempt++) {
        // `?` and `~` in the JSON make `/` and `+` likely in some alignment.
        const claims = { ...goodClaims(tenant, "/v1/networks", "", now), nonce: `${"?".repeat(attempt % 3)}~?~${attempt}` }
        const candidate = Buffer.from(JSON.stringify(claims)).toString("base64")
          .replaceAll("=", "")
        if (/[+/]/.test(candidate)) {
          standard = candidate
          break
        }
      }
      assert.isTrue(standard.length > 0)
      const header = Buffer.from(JSON.stringify({ alg: "EdDSA", typ: "JWT" })).toString("base64url")
      const signature = sign(null, Buffer.from(`${header}.${standard}`, "ascii"), tenant.privateKey)
        .toString("base64url")
      authenticationRequired(
        yield* get(tenant, "/v1/networks", {
          "x-api-key": tenant.keyId,
          authorization: `Bearer ${header}.${standard}.${signature}`
        })
      )
      // And a good token whose signature segment is re-encoded in standard base64 with padding.
      const jwt = forgedHeaders(tenant, { target: "/v1/networks", now }).authorization!.slice("Bearer ".length)
      const [h, c, s] = jwt.split(".") as [string, string, string]
      authenticationRequired(
        yield* get(tenant, "/v1/networks", {
          "x-api-key": tenant.keyId,
          authorization: `Bearer ${h}.${c}.${toStandardBase64(s)}`
        })
      )
    }))

  it.effect("check 7: alg must be EdDSA; typ is not checked", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      for (const header of [{ alg: "none" }, { alg: "HS256" }, { alg: "ES256" }, { alg: "eddsa" }, { typ: "JWT" }, {}]) {
        authenticationRequired(yield* networksWith(tenant, now, { header }))
      }
      assert.strictEqual((yield* networksWith(tenant, now, { header: { alg: "EdDSA" } })).status, 200)
      assert.strictEqual((yield* networksWith(tenant, now, { header: { alg: "EdDSA", typ: "other" } })).status, 200)
    }))

  it.effect("check 7: a signature by another key, or a tampered token, is 401", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const other = yield* addApiKey(tenant)
      // Signed with the other key's private key, presented under the first key id.
      authenticationRequired(yield* networksWith({ ...tenant, privateKey: other.privateKey }, now, {}))
      // A valid token whose claims were swapped for other (unsigned) claims.
      const jwt = forgedHeaders(tenant, { target: "/v1/networks", now }).authorization!.slice("Bearer ".length)
      const [header, , signature] = jwt.split(".") as [string, string, string]
      const claims = Buffer.from(JSON.stringify({ ...goodClaims(tenant, "/v1/networks", "", now), nonce: "x" }))
        .toString("base64url")
      authenticationRequired(
        yield* get(tenant, "/v1/networks", {
          "x-api-key": tenant.keyId,
          authorization: `Bearer ${header}.${claims}.${signature}`
        })
      )
    }))

  it.effect("check 7: each of the six claims is required", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      for (const claim of ["uri", "nonce", "iat", "exp", "sub", "bodyHash"]) {
        const response = yield* networksWith(tenant, now, { claims: { [claim]: undefined } })
        authenticationRequired(response)
      }
    }))

  it.effect("check 7: claims of the wrong type (string, fractional or null iat/exp; non-string others) are 401", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const wrongTypes: ReadonlyArray<Record<string, unknown>> = [
        { iat: String(now) },
        { exp: String(now + 25) },
        { iat: now + 0.5 },
        { exp: now + 25.5 },
        { iat: null },
        { exp: [now + 25] },
        { uri: ["/v1/networks"] },
        { nonce: 12345 },
        { sub: null },
        { bodyHash: 0 }
      ]
      for (const claims of wrongTypes) {
        authenticationRequired(yield* networksWith(tenant, now, { claims }))
      }
      // Claims that are not a JSON object at all.
      const header = Buffer.from(JSON.stringify({ alg: "EdDSA" })).toString("base64url")
      for (const payload of ["[]", "null", "\"text\"", "not json"]) {
        const claims = Buffer.from(payload).toString("base64url")
          const signature = sign(null, Buffer.from(`${header}.${claims}`), tenant.privateKey).toString("base64url")
        authenticationRequired(
          yield* get(tenant, "/v1/networks", {
            "x-api-key": tenant.keyId,
            authorization: `Bearer ${header}.${claims}.${signature}`
          })
        )
      }
    }))

  it.effect("check 7/8: millisecond iat or exp is 401", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now * 1000, exp: now * 1000 + 25_000 } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now * 1000, exp: now * 1000 + 25 } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { exp: now * 1000 } }))
    }))

  it.effect("check 8: sub must equal the X-API-Key key id", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const other = yield* addApiKey(tenant)
      authenticationRequired(yield* networksWith(tenant, now, { claims: { sub: other.keyId } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { sub: tenant.keyId.toUpperCase() } }))
    }))

  it.effect("check 8: uri must be the exact path and query as sent", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const baseUrl = yield* PublicAddress
      const target = "/v1/users?limit=5&status=ACTIVE"
      const withUri = (uri: string) =>
        get(tenant, target, forgedHeaders(tenant, { target, now }, { claims: { uri } }))
      assert.strictEqual((yield* withUri(target)).status, 200)
      for (
        const uri of [
          "/v1/users", // query missing
          "/v1/users?status=ACTIVE&limit=5", // other order
          `${baseUrl}${target}`, // with scheme and host
          `//${new URL(baseUrl).host}${target}`, // with host
          "/users?limit=5&status=ACTIVE", // without /v1
          `${target}#frag`, // with a fragment
          "/v1/users?limit=5&status=ACTIVE&", // trailing separator
          "/V1/users?limit=5&status=ACTIVE"
        ]
      ) {
        authenticationRequired(yield* withUri(uri))
      }
      // No `?` when there is no query.
      const plain = "/v1/networks"
      authenticationRequired(yield* get(tenant, plain, forgedHeaders(tenant, { target: plain, now }, {
        claims: { uri: "/v1/networks?" }
      })))
    }))

  it.effect("check 8: uri keeps the encoding as sent (a different encoding is 401)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      yield* post(tenant, "/v1/users", JSON.stringify({ customerRefId: "enc/ref" }))
      const target = "/v1/users/enc%2Fref"
      const ok = yield* get(tenant, target, forgedHeaders(tenant, { target, now }))
      assert.strictEqual(ok.status, 200, ok.text)
      for (const uri of ["/v1/users/enc%2fref", "/v1/users/enc/ref"]) {
        authenticationRequired(yield* get(tenant, target, forgedHeaders(tenant, { target, now }, { claims: { uri } })))
      }
    }))

  it.effect("check 8: exp must be later than the server time", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now - 25, exp: now } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now - 26, exp: now - 1 } }))
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { iat: now - 24, exp: now + 1 } })).status, 200)
      // A token signed now and presented 25 s later has expired.
      const target = "/v1/networks"
      const headers = forgedHeaders(tenant, { target, now })
      yield* TestClock.adjust("25 seconds")
      authenticationRequired(yield* get(tenant, target, headers))
    }))

  it.effect("check 8: iat at most 5 s ahead of the server clock", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { iat: now + 5, exp: now + 30 } })).status, 200)
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now + 6, exp: now + 30 } }))
    }))

  it.effect("check 8: exp - iat at most 30 s", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { iat: now - 10, exp: now + 20 } })).status, 200)
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now - 10, exp: now + 21 } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { iat: now, exp: now + 3600 } }))
    }))

  it.effect("check 8: bodyHash must be the SHA-256 of the exact bytes sent (hex, case-insensitive)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const body = JSON.stringify({ customerRefId: "hash-check" })
      const send = (bodyHash: string) =>
        post(tenant, "/v1/users", body, forgedHeaders(tenant, { target: "/v1/users", body, now }, {
          claims: { bodyHash }
        }))
      // Re-serialized JSON with other whitespace is other bytes.
      authenticationRequired(yield* send(sha256Hex(JSON.stringify({ customerRefId: "hash-check" }, null, 2))))
      authenticationRequired(yield* send(sha256Hex("")))
      authenticationRequired(yield* send(Buffer.from(sha256Hex(body), "hex").toString("base64")))
      const upper = yield* send(sha256Hex(body).toUpperCase())
      assert.strictEqual(upper.status, 200, upper.text)
    }))

  it.effect("check 8: no body must be hashed as the empty byte string", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      for (const wrong of ["{}", "null", "\"\"", " "]) {
        authenticationRequired(yield* networksWith(tenant, now, { claims: { bodyHash: sha256Hex(wrong) } }))
      }
      authenticationRequired(yield* networksWith(tenant, now, { claims: { bodyHash: "" } }))
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { bodyHash: sha256Hex("") } })).status, 200)
    }))

  it.effect("check 8: nonce of 1-64 bytes (bytes, not characters)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      authenticationRequired(yield* networksWith(tenant, now, { claims: { nonce: "" } }))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { nonce: "n".repeat(65) } }))
      // 33 two-byte characters: 33 characters but 66 bytes.
      authenticationRequired(yield* networksWith(tenant, now, { claims: { nonce: "é".repeat(33) } }))
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { nonce: "1" } })).status, 200)
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { nonce: "m".repeat(64) } })).status, 200)
      assert.strictEqual((yield* networksWith(tenant, now, { claims: { nonce: "é".repeat(32) } })).status, 200)
    }))

  it.effect("check 9: an expired subscription is 403 tenant subscription expired; renewal lifts it", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const future = new Date(Date.now() + 365 * 86_400_000 * 10).toISOString()
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: future })
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: "2020-01-01T00:00:00Z" })
      // Every /v1 endpoint, GET included.
      assertError(yield* get(tenant, "/v1/networks"), 403, "FORBIDDEN", "tenant subscription expired")
      assertError(yield* get(tenant, "/v1/users"), 403, "FORBIDDEN", "tenant subscription expired")
      assertError(
        yield* post(tenant, "/v1/users", JSON.stringify({ customerRefId: "expired" })),
        403,
        "FORBIDDEN",
        "tenant subscription expired"
      )
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: null })
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
    }))

  it.effect("check 9: the subscription expires at its instant, by the server clock", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: new Date((now + 10) * 1000).toISOString() })
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      yield* TestClock.adjust("10 seconds")
      assertError(yield* get(tenant, "/v1/networks"), 403, "FORBIDDEN", "tenant subscription expired")
    }))

  it.effect("order: checks 7 and 8 before 9 (bad signature or claims with an expired subscription is 401)", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const other = yield* addApiKey(tenant)
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: "2020-01-01T00:00:00Z" })
      authenticationRequired(yield* networksWith({ ...tenant, privateKey: other.privateKey }, now, {}))
      authenticationRequired(yield* networksWith(tenant, now, { claims: { uri: "/v1/users" } }))
    }))

  it.effect("order: check 5 before 9 (suspended and expired is 403 tenant suspended)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      yield* patchTenant(tenant.tenantId, { status: "SUSPENDED", subscriptionExpiresAt: "2020-01-01T00:00:00Z" })
      assertError(yield* get(tenant, "/v1/networks"), 403, "FORBIDDEN", "tenant suspended")
      // Renewal does not lift a suspension.
      yield* patchTenant(tenant.tenantId, { subscriptionExpiresAt: null })
      assertError(yield* get(tenant, "/v1/networks"), 403, "FORBIDDEN", "tenant suspended")
    }))

  it.effect("check 10: a reused nonce is 401 nonce reused, also when the whole token is replayed", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const headers = forgedHeaders(tenant, { target: "/v1/networks", now }, { claims: { nonce: "once" } })
      assert.strictEqual((yield* get(tenant, "/v1/networks", headers)).status, 200)
      assertError(yield* get(tenant, "/v1/networks", headers), 401, "UNAUTHORIZED", "nonce reused")
      // A fresh token with the same nonce, on another route.
      const again = forgedHeaders(tenant, { target: "/v1/supported_assets", now }, { claims: { nonce: "once" } })
      assertError(yield* get(tenant, "/v1/supported_assets", again), 401, "UNAUTHORIZED", "nonce reused")
      // The same nonce under another key of the tenant is fresh.
      const other = yield* addApiKey(tenant)
      const otherHeaders = forgedHeaders(other, { target: "/v1/networks", now }, { claims: { nonce: "once" } })
      assert.strictEqual((yield* get(other, "/v1/networks", otherHeaders)).status, 200)
    }))

  it.effect("check 10: concurrent requests with one nonce: exactly one passes", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const headers = forgedHeaders(tenant, { target: "/v1/networks", now }, { claims: { nonce: randomUUID() } })
      const responses = yield* Effect.all(
        Array.from({ length: 8 }, () => get(tenant, "/v1/networks", headers)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(responses.filter((response) => response.status === 200).length, 1)
      for (const response of responses.filter((response) => response.status !== 200)) {
        assertError(response, 401, "UNAUTHORIZED", "nonce reused")
      }
    }))

  it.effect("check 10: nonces are durable: still rejected after the service is rebuilt on the same database", () =>
    Effect.gen(function*() {
      const now = yield* freshTime
      const tenant = yield* provisionTenant()
      const nonce = randomUUID()
      const headers = forgedHeaders(tenant, { target: "/v1/networks", now }, { claims: { nonce } })
      assert.strictEqual((yield* get(tenant, "/v1/networks", headers)).status, 200)
      // A second, independent service instance (new process state, new caches) on the same database.
      const replayed = yield* Effect.gen(function*() {
        const baseUrl = yield* PublicAddress
        const replay = yield* rawRequest({ baseUrl, method: "GET", target: "/v1/networks", headers })
        const fresh = yield* rawRequest({ baseUrl, method: "GET", target: "/v1/networks", tenant })
        return { replay, fresh }
      }).pipe(Effect.provide(makeTestAppLayer()))
      assertError(replayed.replay, 401, "UNAUTHORIZED", "nonce reused")
      assert.strictEqual(replayed.fresh.status, 200)
    }))

  it.effect("check 11: requests above the key's per-second cap are 429 RATE_LIMITED (retryable)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ rateLimitPerSecond: 2 })
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
      const limited = yield* get(tenant, "/v1/networks")
      assertError(limited, 429, "RATE_LIMITED", "rate limit exceeded")
      assert.isTrue(limited.json.error.retryable)
      // Another key of the same tenant has its own cap.
      const other = yield* addApiKey(tenant, { rateLimitPerSecond: 2 })
      assert.strictEqual((yield* get(other, "/v1/networks")).status, 200)
      // The next second opens a new window.
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* get(tenant, "/v1/networks")).status, 200)
    }))

  it.effect("check 11 across processes: a burst of 100 over two service instances on one database gets the key's cap of 10, no more (issue 32)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant({ rateLimitPerSecond: 10 })
      const firstUrl = yield* PublicAddress
      // A second, independent service instance on the same database, at the same second: built fresh (no layer
      // shared with the first through the memo map), so it has its own memory, as another process would.
      const responses = yield* Effect.gen(function*() {
        const secondUrl = yield* PublicAddress
        assert.notStrictEqual(secondUrl, firstUrl)
        return yield* Effect.all(
          Array.from({ length: 100 }, (_, index) =>
            rawRequest({ baseUrl: index % 2 === 0 ? firstUrl : secondUrl, method: "GET", target: "/v1/networks", tenant })),
          { concurrency: 25 }
        )
      }).pipe(Effect.provide(Layer.fresh(makeTestAppLayer())))
      const accepted = responses.filter((response) => response.status === 200)
      for (const response of responses.filter((response) => response.status !== 200)) {
        assertError(response, 429, "RATE_LIMITED", "rate limit exceeded")
      }
      assert.strictEqual(accepted.length, 10, "the cap holds for the key, not per process")
      // A replayed nonce is refused as such (check 10 comes first) and does not count against the cap.
      yield* TestClock.adjust("1 second")
      const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const headers = forgedHeaders(tenant, { target: "/v1/networks", now }, { claims: { nonce: randomUUID() } })
      assert.strictEqual((yield* get(tenant, "/v1/networks", headers)).status, 200)
      for (let replay = 0; replay < 12; replay++) {
        assertError(yield* get(tenant, "/v1/networks", headers), 401, "UNAUTHORIZED", "nonce reused")
      }
      const counted = yield* Effect.all(Array.from({ length: 9 }, () => get(tenant, "/v1/networks")), { concurrency: 9 })
      assert.deepStrictEqual(counted.map((response) => response.status), Array.from({ length: 9 }, () => 200))
      assertError(yield* get(tenant, "/v1/networks"), 429, "RATE_LIMITED", "rate limit exceeded")
    }))

  it.effect("section 7: path and query parse failures are 400 before authentication", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const baseUrl = yield* PublicAddress
      for (
        const target of [
          "/v1/users?limit=0",
          "/v1/users?limit=201",
          "/v1/users?limit=abc",
          "/v1/users?limit=1.5",
          "/v1/users?limit=",
          "/v1/users?cursor=not-a-uuid",
          "/v1/users?status=DELETED",
          "/v1/users?status=active"
        ]
      ) {
        assertError(yield* rawRequest({ baseUrl, method: "GET", target }), 400, "BAD_REQUEST")
        // The same with a correct signature.
        assertError(yield* get(tenant, target), 400, "BAD_REQUEST")
      }
      // In range: authentication runs (and fails without headers).
      authenticationRequired(yield* rawRequest({ baseUrl, method: "GET", target: "/v1/users?limit=200" }))
      assert.strictEqual((yield* get(tenant, "/v1/users?limit=1")).status, 200)
      assert.strictEqual((yield* get(tenant, "/v1/users?limit=200")).status, 200)
    }))

  it.effect("section 4: a URL-encoded customerRefId is signed as encoded and accepted", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const customerRefId of ["a/b", "a b", "x?y#z", "ü-ref", "100%"]) {
        const created = yield* post(tenant, "/v1/users", JSON.stringify({ customerRefId }))
        assert.strictEqual(created.status, 200, created.text)
        const target = `/v1/users/${encodeURIComponent(customerRefId)}`
        const found = yield* get(tenant, target)
        assert.strictEqual(found.status, 200, `${target}: ${found.text}`)
        assert.strictEqual(found.json.user.customerRefId, customerRefId)
        assert.strictEqual(found.json.user.id, created.json.id)
      }
      // Raw check of the spec's example: `a%2Fb`.
      const response = yield* get(tenant, "/v1/users/a%2Fb/balances")
      assert.strictEqual(response.status, 200, response.text)
      assert.strictEqual(response.json.customerRefId, "a/b")
    }))
})
