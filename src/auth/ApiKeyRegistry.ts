/** Creating and revoking API keys (operator interface). Every write invalidates the signature check's cache. */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "effect/sql"
import { announceConfigChange } from "./ConfigChanges.ts"
import { decodeRows, decodeSingleRow, Int4, Text, Timestamp } from "../db/RowSchemas.ts"
import { BadRequest, NotFound } from "../domain/ApiError.ts"
import { Entropy } from "../domain/Entropy.ts"
import { ApiKeys } from "./ApiKeys.ts"
import { publicKeyHexPattern } from "./Ed25519.ts"
import { isIpOrCidr } from "./IpAllowList.ts"

export const apiKeyNameLengthMax = 100
export const rateLimitPerSecondDefault = 50
export const rateLimitPerSecondMax = 1000

export interface ApiKeyRecord {
  readonly keyId: string
  readonly tenantId: string
  readonly name: string
  readonly allowedIps: ReadonlyArray<string>
  readonly rateLimitPerSecond: number
  readonly status: "ACTIVE" | "REVOKED"
  readonly createdAt: Date
}

/** The columns `create` returns, decoded (db/RowSchemas.ts). */
const Row = Schema.Struct({
  key_id: Text,
  tenant_id: Text,
  name: Text,
  allowed_ips: Schema.Array(Text),
  rate_limit_per_second: Int4,
  status: Schema.Literals(["ACTIVE", "REVOKED"]),
  created_at: Timestamp
})
type Row = typeof Row.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const createdRow = decodeSingleRow(Row, "ApiKeyRegistry.create")
const revokedRows = decodeRows(Schema.Struct({ key_id: Text }), "ApiKeyRegistry.revoke")

const fromRow = (row: Row): ApiKeyRecord => ({
  keyId: row.key_id,
  tenantId: row.tenant_id,
  name: row.name,
  allowedIps: row.allowed_ips,
  rateLimitPerSecond: row.rate_limit_per_second,
  status: row.status,
  createdAt: row.created_at
})

export interface CreateApiKeyInput {
  readonly name: string
  readonly publicKey: string
  readonly allowedIps?: ReadonlyArray<string> | undefined
  readonly rateLimitPerSecond?: number | undefined
}

export class ApiKeyRegistry extends Context.Service<ApiKeyRegistry, {
  readonly create: (tenantId: string, input: CreateApiKeyInput) => Effect.Effect<ApiKeyRecord, BadRequest>
  readonly revoke: (tenantId: string, keyId: string) => Effect.Effect<void, NotFound>
}>()("coffer/ApiKeyRegistry") {
  static readonly layer = Layer.effect(
    ApiKeyRegistry,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entropy = yield* Entropy
      const cache = yield* ApiKeys
      const announce = announceConfigChange.pipe(Effect.provideService(PgClient.PgClient, yield* PgClient.PgClient))

      const create = Effect.fn("ApiKeyRegistry.create")(function*(tenantId: string, input: CreateApiKeyInput) {
        const name = input.name.trim()
        if (name.length < 1 || name.length > apiKeyNameLengthMax) {
          return yield* new BadRequest({ message: "name must be 1-100 chars" })
        }
        const publicKey = input.publicKey.toLowerCase()
        if (!publicKeyHexPattern.test(publicKey)) {
          return yield* new BadRequest({ message: "publicKey must be 64 hex characters (raw Ed25519)" })
        }
        const allowedIps = (input.allowedIps ?? []).map((entry) => entry.trim()).filter((entry) => entry.length > 0)
        const invalid = allowedIps.find((entry) => !isIpOrCidr(entry))
        if (invalid !== undefined) return yield* new BadRequest({ message: `invalid ip or cidr: ${invalid}` })
        const rate = input.rateLimitPerSecond ?? rateLimitPerSecondDefault
        if (!Number.isInteger(rate) || rate < 1 || rate > rateLimitPerSecondMax) {
          return yield* new BadRequest({ message: "rateLimitPerSecond must be 1-1000" })
        }
        const keyId = `ak_${Buffer.from(yield* entropy.bytes(12, "api-key-id")).toString("hex")}`
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* sql`
          INSERT INTO api_keys (key_id, tenant_id, name, public_key, allowed_ips, rate_limit_per_second, created_at)
          VALUES (${keyId}, ${tenantId}, ${name}, ${publicKey},
            (SELECT coalesce(array_agg(value), '{}') FROM jsonb_array_elements_text(${JSON.stringify(allowedIps)}::jsonb)),
            ${rate}, ${now})
          RETURNING key_id, tenant_id, name, allowed_ips, rate_limit_per_second, status, created_at`.pipe(
          Effect.orDie,
          Effect.flatMap(createdRow)
        )
        yield* cache.invalidate
        yield* announce
        return fromRow(row)
      })

      const revoke = Effect.fn("ApiKeyRegistry.revoke")(function*(tenantId: string, keyId: string) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const rows = yield* sql`
          UPDATE api_keys SET status = 'REVOKED', revoked_at = coalesce(revoked_at, ${now})
          WHERE key_id = ${keyId} AND tenant_id = ${tenantId}
          RETURNING key_id`.pipe(Effect.orDie, Effect.flatMap(revokedRows))
        yield* cache.invalidate
        yield* announce
        if (rows.length === 0) return yield* new NotFound({ message: "api key not found" })
      })

      return ApiKeyRegistry.of({ create, revoke })
    })
  )
}
