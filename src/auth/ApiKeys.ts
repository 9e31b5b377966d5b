/**
 * API keys with their tenant, as the signature check needs them: the public key parsed once into a KeyObject, the
 * allow-list compiled once. Entries are cached so a signed request costs no key query; every change made through
 * the operator interface invalidates the cache at once, in this process and through ConfigChanges in every other
 * (a revoked key is rejected on the next request); entries also expire after `apiKeyCacheTtlMillis`.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { KeyObject } from "node:crypto"
import { decodeFirstRow, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { ConfigChanges } from "./ConfigChanges.ts"
import { publicKeyFromHex } from "./Ed25519.ts"
import { type IpMatcher, makeIpMatcher } from "./IpAllowList.ts"

export const apiKeyCacheTtlMillis = 5_000
export const apiKeyCacheEntriesMax = 100_000

export interface ApiKeyEntry {
  readonly keyId: string
  readonly tenantId: string
  readonly status: "ACTIVE" | "REVOKED"
  readonly publicKey: KeyObject
  readonly allowedIps: ReadonlyArray<string>
  readonly isAllowedIp: IpMatcher
  readonly rateLimitPerSecond: number
  readonly tenantStatus: "ACTIVE" | "SUSPENDED"
  readonly subscriptionExpiresAtMillis: number | undefined
}

// The key and its tenant's standing, decoded at this edge (db/RowSchemas.ts); compiled once, here.
const keyRow = decodeFirstRow(
  Schema.Struct({
    key_id: Text,
    tenant_id: Text,
    status: Schema.Literals(["ACTIVE", "REVOKED"]),
    public_key: Text,
    allowed_ips: Schema.Array(Text),
    rate_limit_per_second: Int4,
    tenant_status: Schema.Literals(["ACTIVE", "SUSPENDED"]),
    subscription_expires_at: Nullable(Timestamp)
  }),
  "ApiKeys.lookup"
)

export class ApiKeys extends Context.Service<ApiKeys, {
  /** The key, or undefined when no such key exists. */
  readonly lookup: (keyId: string) => Effect.Effect<ApiKeyEntry | undefined>
  /** The same, at a time the caller already read from the Clock. */
  readonly lookupAt: (keyId: string, nowMillis: number) => Effect.Effect<ApiKeyEntry | undefined>
  /** Forget cached entries after a change to keys or tenants. */
  readonly invalidate: Effect.Effect<void>
}>()("coffer/ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const cache = new Map<string, { readonly entry: ApiKeyEntry | undefined; readonly loadedAtMillis: number }>()

      const load = (keyId: string) =>
        sql`
          SELECT k.key_id, k.tenant_id, k.status, k.public_key, k.allowed_ips, k.rate_limit_per_second,
                 t.status AS tenant_status, t.subscription_expires_at
          FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
          WHERE k.key_id = ${keyId}`.pipe(
          Effect.orDie,
          Effect.flatMap(keyRow),
          Effect.map((row): ApiKeyEntry | undefined => {
            if (row === undefined) return undefined
            return {
              keyId: row.key_id,
              tenantId: row.tenant_id,
              status: row.status,
              publicKey: publicKeyFromHex(row.public_key),
              allowedIps: row.allowed_ips,
              isAllowedIp: makeIpMatcher(row.allowed_ips),
              rateLimitPerSecond: row.rate_limit_per_second,
              tenantStatus: row.tenant_status,
              subscriptionExpiresAtMillis: row.subscription_expires_at?.getTime()
            }
          })
        )

      // On the path of every signed request: a cache hit must cost no more than a map lookup (no span, no query).
      const lookupAt = (keyId: string, nowMillis: number): Effect.Effect<ApiKeyEntry | undefined> => {
        const cached = cache.get(keyId)
        if (cached !== undefined && nowMillis - cached.loadedAtMillis < apiKeyCacheTtlMillis) {
          return Effect.succeed(cached.entry)
        }
        return Effect.map(load(keyId), (entry) => {
          // Bounded: a flood of unknown key ids must not grow memory without limit.
          if (cache.size >= apiKeyCacheEntriesMax) cache.clear()
          cache.set(keyId, { entry, loadedAtMillis: nowMillis })
          return entry
        })
      }
      const lookup = (keyId: string) => Effect.flatMap(Clock.currentTimeMillis, (now) => lookupAt(keyId, now))

      const invalidate = Effect.sync(() => cache.clear())
      yield* (yield* ConfigChanges).onChange(invalidate)
      return ApiKeys.of({ lookup, lookupAt, invalidate })
    })
  )
}
