/**
 * Spec section 5, check 6 behind a reverse proxy: with TRUSTED_PROXIES naming the peer, the client ip is the first
 * address of X-Forwarded-For. The loopback listener is the "proxy" here, which also lets IPv6 clients be tested.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { PublicAddress } from "../../src/App.ts"
import { addApiKey, assertError, atRealisticTime, freshTime } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const networks = (key: TestTenant, forwardedFor?: string) =>
  Effect.flatMap(PublicAddress, (baseUrl) =>
    rawRequest({
      baseUrl,
      method: "GET",
      target: "/v1/networks",
      tenant: key,
      ...(forwardedFor === undefined ? {} : { headers: { "x-forwarded-for": forwardedFor } })
    }))

const notAllowed = (ip: string) => `ip ${ip} not allowed for this api key`

layer(atRealisticTime(makeTestAppLayer({ trustedProxies: ["127.0.0.1/32"] })))("behind a trusted proxy", (it) => {
  it.effect("check 6: the first X-Forwarded-For address is the client ip (IPv4 and CIDR)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const single = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      assert.strictEqual((yield* networks(single, "203.0.113.7")).status, 200)
      assert.strictEqual((yield* networks(single, "203.0.113.7, 10.0.0.1, 127.0.0.1")).status, 200)
      assert.strictEqual((yield* networks(single, " 203.0.113.7 ,127.0.0.1")).status, 200)
      // Only the first entry counts, even if a later one is allowed.
      assertError(yield* networks(single, "198.51.100.1, 203.0.113.7"), 403, "FORBIDDEN", notAllowed("198.51.100.1"))
      const range = yield* addApiKey(tenant, { allowedIps: ["198.51.100.0/24"] })
      assert.strictEqual((yield* networks(range, "198.51.100.200")).status, 200)
      assertError(yield* networks(range, "198.51.101.1"), 403, "FORBIDDEN", notAllowed("198.51.101.1"))
    }))

  it.effect("check 6: IPv6 client addresses and ranges", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const range = yield* addApiKey(tenant, { allowedIps: ["2001:db8::/32"] })
      assert.strictEqual((yield* networks(range, "2001:db8::5")).status, 200)
      assert.strictEqual((yield* networks(range, "2001:DB8:0:0:0:0:0:ff")).status, 200)
      assertError(yield* networks(range, "2001:db9::1"), 403, "FORBIDDEN", notAllowed("2001:db9::1"))
      const single = yield* addApiKey(tenant, { allowedIps: ["2001:db8::1", "10.0.0.0/8"] })
      // The address is reported in its canonical (compressed, lower-case) form.
      assert.strictEqual((yield* networks(single, "2001:0db8:0000:0000:0000:0000:0000:0001")).status, 200)
      assert.strictEqual((yield* networks(single, "10.1.2.3")).status, 200)
      assertError(yield* networks(single, "2001:0DB8::2"), 403, "FORBIDDEN", notAllowed("2001:db8::2"))
      // An IPv4-mapped IPv6 address counts as its IPv4 address.
      assert.strictEqual((yield* networks(single, "::ffff:10.9.8.7")).status, 200)
      // An IPv4 entry does not admit an IPv6 client and vice versa.
      const v4 = yield* addApiKey(tenant, { allowedIps: ["0.0.0.0/0"] })
      assertError(yield* networks(v4, "2001:db8::1"), 403, "FORBIDDEN", notAllowed("2001:db8::1"))
      const v6 = yield* addApiKey(tenant, { allowedIps: ["::/0"] })
      assertError(yield* networks(v6, "192.0.2.1"), 403, "FORBIDDEN", notAllowed("192.0.2.1"))
    }))

  it.effect("check 6: without X-Forwarded-For the trusted peer itself is the client", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const key = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      assertError(yield* networks(key), 403, "FORBIDDEN", notAllowed("127.0.0.1"))
      const loopback = yield* addApiKey(tenant, { allowedIps: ["127.0.0.1"] })
      assert.strictEqual((yield* networks(loopback)).status, 200)
    }))

  it.effect("check 6: an undeterminable client ip is 403 client ip unknown", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const key = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      for (const forwardedFor of ["not-an-ip", ", 203.0.113.7", "203.0.113.7:443", "unknown"]) {
        assertError(yield* networks(key, forwardedFor), 403, "FORBIDDEN", "client ip unknown")
      }
    }))

  it.effect("check 6: a key without an allow-list ignores X-Forwarded-For", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual((yield* networks(tenant, "not-an-ip")).status, 200)
      assert.strictEqual((yield* networks(tenant, "2001:db8::1")).status, 200)
    }))
})
