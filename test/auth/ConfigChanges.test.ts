import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { generateKeyPairSync } from "node:crypto"
import { ApiKeyRegistry } from "../../src/auth/ApiKeyRegistry.ts"
import { ApiKeys } from "../../src/auth/ApiKeys.ts"
import { ConfigChanges, configChangedChannel } from "../../src/auth/ConfigChanges.ts"
import { Ids } from "../../src/domain/Ids.ts"
import { Tenants } from "../../src/tenants/Tenants.ts"
import { rawPublicKeyHex } from "../../src/auth/Ed25519.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"

const database = () => Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))
const realSleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

describe("configuration changes reach every process", () => {
  it.effect("a key revoked through one process is rejected by another's cache at once (not after its TTL)", () =>
    Effect.gen(function*() {
      // Two "processes": separate pools, caches and listeners on one database. The TestClock never moves, so only
      // the notification can make the second cache forget its entry.
      const processA = yield* Layer.build(
        ApiKeyRegistry.layer.pipe(
          Layer.provideMerge(ApiKeys.layer),
          Layer.provideMerge(ConfigChanges.layer),
          Layer.provideMerge(Entropy.layer),
          Layer.provideMerge(database())
        )
      )
      const processB = yield* Layer.build(
        ApiKeys.layer.pipe(Layer.provideMerge(ConfigChanges.layer), Layer.provideMerge(database()))
      )
      const sql = Context.get(processA, SqlClient.SqlClient)
      const tenantId = "01a20190-0000-7000-8000-00000000d001"
      yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${tenantId}, 'feed', '{}', now())`
      const key = yield* Context.get(processA, ApiKeyRegistry).create(tenantId, {
        name: "k",
        publicKey: rawPublicKeyHex(generateKeyPairSync("ed25519").publicKey)
      })
      const cacheB = Context.get(processB, ApiKeys)
      assert.strictEqual((yield* cacheB.lookup(key.keyId))?.status, "ACTIVE")
      yield* Context.get(processA, ApiKeyRegistry).revoke(tenantId, key.keyId)
      let status: string | undefined = "ACTIVE"
      for (let attempt = 0; attempt < 40 && status === "ACTIVE"; attempt++) {
        yield* realSleep(50)
        status = (yield* cacheB.lookup(key.keyId))?.status
      }
      assert.strictEqual(status, "REVOKED")
    }).pipe(Effect.orDie))

  it.effect("one process listens once, however many caches it has: each listener pins a pooled connection for good", () =>
    Effect.gen(function*() {
      const observer = Context.get(yield* Layer.build(database()), SqlClient.SqlClient)
      const listeners = Effect.map(
        observer<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND query = ${`LISTEN "${configChangedChannel}"`}`,
        ([row]) => row!.n
      )
      const before = yield* listeners
      // A "process" with both caches that listen (API keys and tenants).
      const context = yield* Layer.build(
        Layer.mergeAll(ApiKeys.layer, Tenants.layer).pipe(
          Layer.provideMerge(ConfigChanges.layer),
          Layer.provideMerge(Ids.layer),
          Layer.provideMerge(Entropy.layer),
          Layer.provideMerge(database())
        )
      )
      let count = before
      for (let attempt = 0; attempt < 40 && count === before; attempt++) {
        yield* realSleep(50)
        count = yield* listeners
      }
      // Time for a second listener, if there were one, to connect too.
      yield* realSleep(300)
      assert.strictEqual(yield* listeners, before + 1)
      // Another cache on the same process's ConfigChanges adds none either.
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Context.get(context, ConfigChanges).onChange(Effect.void)
        yield* realSleep(200)
        assert.strictEqual(yield* listeners, before + 1)
      }))
    }).pipe(Effect.orDie))
})
