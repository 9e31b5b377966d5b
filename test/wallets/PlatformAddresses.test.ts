/**
 * GAS wallets of tenants created while the service runs (wallets/PlatformAddresses.ts): a tenant whose index is
 * below one already derived (two tenants created at once commit in either order) is still found, by its address and
 * by its id, and the list keeps tenant order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { PlatformAddresses } from "../../src/wallets/PlatformAddresses.ts"
import { testMnemonic } from "../support/TestApp.ts"

const layer = PlatformAddresses.layer.pipe(
  Layer.provideMerge(Catalog.layer),
  Layer.provideMerge(Signer.layerLocalHd(Redacted.make(testMnemonic))),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest({ serviceEnv: "preproduction" })),
  Layer.orDie
)

const insertTenant = (id: string, seq: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO tenants (id, seq, name, networks, created_at) OVERRIDING SYSTEM VALUE
      VALUES (${id}, ${seq}, ${`gas-${seq}`}, '{}', now())`
  }).pipe(Effect.orDie)

describe("PlatformAddresses: GAS wallets", () => {
  it.effect("a tenant committed after one with a higher index is still derived", () =>
    Effect.gen(function*() {
      const platform = yield* PlatformAddresses
      const later = "01a20190-0000-7000-8000-0000000a0002"
      const earlier = "01a20190-0000-7000-8000-0000000a0001"
      yield* insertTenant(later, 900_002)
      const first = yield* platform.gasWallet(later, "ETH_SEPOLIA")
      assert.isDefined(first)
      assert.strictEqual(first!.tenantIndex, 900_002)
      // Index 900,001 commits only now, after 900,002 was derived.
      yield* insertTenant(earlier, 900_001)
      const signer = yield* Signer
      const expected = yield* signer.platformAddress({ family: "EVM", btcNetwork: undefined, role: "GAS", tenantIndex: 900_001 })
      assert.isTrue(yield* platform.isPlatformAddress("ETH_SEPOLIA", expected.address))
      assert.strictEqual((yield* platform.gasWallet(earlier, "ETH_SEPOLIA"))?.address, expected.address)
      const gas = (yield* platform.list).filter((entry) => entry.role === "GAS" && entry.networkKey === "ETH_SEPOLIA")
      const indexOf = (tenantId: string) => gas.findIndex((entry) => entry.tenantId === tenantId)
      assert.isTrue(indexOf(earlier) >= 0 && indexOf(earlier) < indexOf(later), "tenant order")
    }).pipe(Effect.provide(layer)))
})
