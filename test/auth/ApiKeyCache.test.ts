/**
 * The API key cache under a flood of unknown key ids (issue 36): ids that exist and ids that do not are bounded
 * apart, so unknown ids, which anyone can send, never push a good key out. Observed through what a cached entry
 * shows: the key is revoked in the database behind the cache's back (no announcement), so a good key still served
 * as ACTIVE was served from the cache, and one read again shows REVOKED. A fixed time throughout: within the TTL.
 * This cache hears no announcements, so nothing but its bounds can clear it.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { ApiKeys } from "../../src/auth/ApiKeys.ts"
import { ConfigChanges } from "../../src/auth/ConfigChanges.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

const bounds = { keysMax: 100, missesMax: 20 }
const now = 1_900_000_000_000

layer(makeTestAppLayer(), { excludeTestServices: true })("API key cache", (it) => {
  it.effect("a flood of unknown ids, many times the cache's size, leaves a good key cached", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const sql = yield* SqlClient.SqlClient
      // Announcements (provisioning's own among them) would clear the cache at any moment: none reach this one.
      const silent = Layer.succeed(ConfigChanges, ConfigChanges.of({ onChange: () => Effect.void }))
      const context = yield* Layer.build(ApiKeys.layerWith(bounds).pipe(Layer.provide(silent)))
      const keys = yield* Effect.provideContext(Effect.service(ApiKeys), context)

      assert.strictEqual((yield* keys.lookupAt(tenant.keyId, now))?.status, "ACTIVE")
      yield* sql`UPDATE api_keys SET status = 'REVOKED', revoked_at = now() WHERE key_id = ${tenant.keyId}`
      for (let index = 0; index < 5 * (bounds.keysMax + bounds.missesMax); index++) {
        const unknown = `ak_${index.toString(16).padStart(24, "0")}`
        assert.isUndefined(yield* keys.lookupAt(unknown, now))
      }
      assert.strictEqual(
        (yield* keys.lookupAt(tenant.keyId, now))?.status,
        "ACTIVE",
        "served from the cache: the unknown ids did not evict it"
      )
      // The entry is a cache entry, not a stuck answer: after the TTL it is read again.
      assert.strictEqual((yield* keys.lookupAt(tenant.keyId, now + 60_000))?.status, "REVOKED")
      // Ids not of the key-id form are unknown without a query, and take no place in the cache.
      assert.isUndefined(yield* keys.lookupAt("not-a-key", now))
    }).pipe(Effect.scoped))
})
