/**
 * Spec section 5, check 6 behind a reverse proxy: with TRUSTED_PROXIES naming the peer, the client ip is the first
 * address of X-Forwarded-For. The loopback listener is the "proxy" here, which also lets IPv6 clients be tested.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
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

/**
 * A reverse proxy on [::1] in front of the service (which trusts 127.0.0.1, the address the proxy connects from). It
 * sets X-Forwarded-For to the client it received the connection from: overwriting what the client sent (as
 * docs/operations.md requires) or appending to it (nginx's `$proxy_add_x_forwarded_for`). The client reaches it over
 * IPv6, so the client's real address (::1) differs from the proxy's own (127.0.0.1).
 */
const reverseProxy = (mode: "overwrite" | "append") =>
  Effect.flatMap(PublicAddress, (upstream) =>
    Effect.acquireRelease(
      Effect.promise(() =>
        new Promise<{ readonly url: string; readonly close: () => void }>((resolve) => {
          const server = http.createServer((request, response) => {
            const client = request.socket.remoteAddress ?? ""
            const sent = request.headers["x-forwarded-for"]
            const headers = { ...request.headers }
            delete headers.connection
            headers["x-forwarded-for"] = mode === "overwrite" || sent === undefined
              ? client
              : `${Array.isArray(sent) ? sent.join(", ") : sent}, ${client}`
            const forwarded = http.request(`${upstream}${request.url}`, { method: request.method, headers }, (answer) => {
              response.writeHead(answer.statusCode ?? 502, answer.headers)
              answer.pipe(response)
            })
            forwarded.on("error", () => response.writeHead(502).end())
            request.pipe(forwarded)
          })
          server.listen(0, "::1", () => {
            const { port } = server.address() as AddressInfo
            resolve({
              url: `http://[::1]:${port}`,
              close: () => {
                server.closeAllConnections()
                server.close()
              }
            })
          })
        })
      ),
      (proxy) => Effect.sync(proxy.close)
    ))

const throughProxy = (proxyUrl: string, key: TestTenant, forwardedFor?: string) =>
  rawRequest({
    baseUrl: proxyUrl,
    method: "GET",
    target: "/v1/networks",
    tenant: key,
    ...(forwardedFor === undefined ? {} : { headers: { "x-forwarded-for": forwardedFor } })
  })

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

  it.effect("check 6 through a proxy that overwrites X-Forwarded-For: a client-sent value is not believed", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const proxy = yield* reverseProxy("overwrite")
      // The key admits only 203.0.113.7; the client (really ::1) claims that address. The proxy replaces the claim
      // with the address it received the connection from, and the service takes that.
      const key = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      assertError(yield* throughProxy(proxy.url, key, "203.0.113.7"), 403, "FORBIDDEN", notAllowed("::1"))
      assertError(yield* throughProxy(proxy.url, key, "203.0.113.7, ::1"), 403, "FORBIDDEN", notAllowed("::1"))
      assertError(yield* throughProxy(proxy.url, key), 403, "FORBIDDEN", notAllowed("::1"))
      // The client's real address is believed, whatever it claimed; not the proxy's own address.
      const real = yield* addApiKey(tenant, { allowedIps: ["::1"] })
      assert.strictEqual((yield* throughProxy(proxy.url, real, "203.0.113.7")).status, 200)
      assert.strictEqual((yield* throughProxy(proxy.url, real)).status, 200)
      const proxyOwn = yield* addApiKey(tenant, { allowedIps: ["127.0.0.1"] })
      assertError(yield* throughProxy(proxy.url, proxyOwn), 403, "FORBIDDEN", notAllowed("::1"))
    })))

  it.effect("check 6 through a proxy that appends (misconfigured): the client chooses its address", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const proxy = yield* reverseProxy("append")
      // Why docs/operations.md requires overwriting: the spec takes the FIRST address, which an appending proxy
      // leaves to the client ("203.0.113.7, ::1" arrives), so the allow-list sees whatever the client sent.
      const key = yield* addApiKey(tenant, { allowedIps: ["203.0.113.7"] })
      assert.strictEqual((yield* throughProxy(proxy.url, key, "203.0.113.7")).status, 200)
      // Without a claim the appended entry is the only one, and it is the real client.
      assertError(yield* throughProxy(proxy.url, key), 403, "FORBIDDEN", notAllowed("::1"))
    })))
})
