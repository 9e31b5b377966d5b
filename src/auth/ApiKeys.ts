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

/**
 * The cache's bounds. Keys that exist and ids that do not are held apart (issue 36): anyone can send unknown ids,
 * and when both shared one map, filling it with random ids cleared it, good keys with it. A full part forgets its
 * oldest entry, never the other part. Only keys that exist enter `keysMax`, so strangers cannot fill it.
 */
export interface ApiKeyCacheBounds {
  readonly keysMax: number
  readonly missesMax: number
}
export const apiKeyCacheBounds: ApiKeyCacheBounds = { keysMax: 100_000, missesMax: 10_000 }

/** The key id's form (spec 5, `ak_` and 24 hex digits, ApiKeyRegistry.ts): anything else is unknown without a query. */
const keyIdPattern = /^ak_[0-9a-f]{24}$/

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
  static readonly layerWith = (bounds: ApiKeyCacheBounds) => Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const keys = new Map<string, { readonly entry: ApiKeyEntry; readonly loadedAtMillis: number }>()
      /** Unknown ids, with when they were found missing. */
      const misses = new Map<string, number>()
      /** Map keeps insertion order: the first entry is the oldest. */
      const remember = <V>(map: Map<string, V>, max: number, keyId: string, value: V) => {
        map.delete(keyId)
        if (map.size >= max) {
          const oldest = map.keys().next()
          if (oldest.done !== true) map.delete(oldest.value)
        }
        map.set(keyId, value)
      }

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
        const cached = keys.get(keyId)
        if (cached !== undefined && nowMillis - cached.loadedAtMillis < apiKeyCacheTtlMillis) {
          return Effect.succeed(cached.entry)
        }
        const missed = misses.get(keyId)
        if (missed !== undefined && nowMillis - missed < apiKeyCacheTtlMillis) return Effect.succeed(undefined)
        if (!keyIdPattern.test(keyId)) return Effect.succeed(undefined)
        return Effect.map(load(keyId), (entry) => {
          if (entry === undefined) {
            keys.delete(keyId)
            remember(misses, bounds.missesMax, keyId, nowMillis)
          } else {
            misses.delete(keyId)
            remember(keys, bounds.keysMax, keyId, { entry, loadedAtMillis: nowMillis })
          }
          return entry
        })
      }
      const lookup = (keyId: string) => Effect.flatMap(Clock.currentTimeMillis, (now) => lookupAt(keyId, now))

      const invalidate = Effect.sync(() => {
        keys.clear()
        misses.clear()
      })
      yield* (yield* ConfigChanges).onChange(invalidate)
      return ApiKeys.of({ lookup, lookupAt, invalidate })
    })
  )

  static readonly layer = ApiKeys.layerWith(apiKeyCacheBounds)
}
