/**
 * One tenant's costly requests do not stall another's (issue 36): tenant A creates users with passwords (a scrypt
 * hash each, about 170 ms of a core) in a burst within its own rate cap, while tenant B's signed GET /v1/networks is
 * timed. Before the fix the hashes ran on libuv's thread pool, where every signature is verified: B's requests
 * waited behind A's whole burst (16.7 s in the report; seconds here). Now they run on a worker thread of their own,
 * A's share of it is bounded (429 RATE_LIMITED beyond it), and B's latency stays that of a request.
 *
 * Real time and a real listener; the bound is generous for a shared 2-core machine (the benchmark line `noisy
 * neighbour p99 ms` gives the figure).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { passwordHashBusyMessage, passwordHashPool } from "../../src/users/PasswordHash.ts"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest } from "../support/TestApp.ts"

/**
 * The other tenant's slowest request may take this long while the first hashes (normally a few ms; 51 ms in a quiet
 * bench run). Generous because the suite shares two cores with other test files: 1,309 ms was seen once at load
 * average 19. Before the fix the hashes' thread made it 16.7 s.
 */
const otherTenantBoundMs = 2_500
const burst = 48

layer(makeTestAppLayer(), { excludeTestServices: true })("noisy neighbour", (it) => {
  it.effect("a burst of password hashes by one tenant leaves another tenant's requests prompt", () =>
    Effect.gen(function*() {
      // The spec's default cap: the burst is within what the tenant may send in a second.
      const noisy = yield* provisionTenant({ name: "noisy", rateLimitPerSecond: 50 })
      const quiet = yield* provisionTenant({ name: "quiet" })
      const networks = () => rawRequest({ baseUrl: quiet.baseUrl, method: "GET", target: "/v1/networks", tenant: quiet })
      for (let warm = 0; warm < 3; warm++) assert.strictEqual((yield* networks()).status, 200)

      const creations = Effect.forEach(
        Array.from({ length: burst }, (_, index) => index),
        (index) =>
          rawRequest({
            baseUrl: noisy.baseUrl,
            method: "POST",
            target: "/v1/users",
            tenant: noisy,
            body: JSON.stringify({ customerRefId: `noisy-${index}`, email: `noisy-${index}@example.com`, password: "correct horse 42" })
          }),
        { concurrency: "unbounded" }
      )
      const timed = Effect.forEach(
        Array.from({ length: 20 }, () => 0),
        () =>
          Effect.gen(function*() {
            const started = performance.now()
            const response = yield* networks()
            assert.strictEqual(response.status, 200, response.text)
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
            return performance.now() - started - 25
          }),
        { concurrency: 1 }
      )
      const [created, latencies] = yield* Effect.all([creations, timed], { concurrency: 2 })

      const slowest = Math.max(...latencies)
      assert.isBelow(slowest, otherTenantBoundMs, `the quiet tenant's slowest request took ${slowest.toFixed(0)} ms`)
      // The noisy tenant's burst: hashed up to its share of the pool, the rest told to retry, never a 500.
      const ok = created.filter((response) => response.status === 200)
      const refused = created.filter((response) => response.status !== 200)
      assert.isAtLeast(ok.length, passwordHashPool.perTenantMax)
      for (const response of refused) assertError(response, 429, "RATE_LIMITED", passwordHashBusyMessage)
      assert.isAbove(refused.length, 0, "a burst beyond the tenant's share is refused")
    }), 60_000)

  it.effect("a taken email is refused before any hash: 409 at once, not after 170 ms of a core", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant({ name: "emails" })
      const create = (customerRefId: string) =>
        rawRequest({
          baseUrl: tenant.baseUrl,
          method: "POST",
          target: "/v1/users",
          tenant,
          body: JSON.stringify({ customerRefId, email: "taken@example.com", password: "correct horse 42" })
        })
      assert.strictEqual((yield* create("first")).status, 200)
      // Tenant's whole share of the pool at once: with a hash per request some would be 429; none is.
      const again = yield* Effect.forEach(
        Array.from({ length: 3 * passwordHashPool.perTenantMax }, (_, index) => `second-${index}`),
        create,
        { concurrency: "unbounded" }
      )
      for (const response of again) assertError(response, 409, "EMAIL_TAKEN", "email is used by another user of the tenant")
    }), 60_000)
})
