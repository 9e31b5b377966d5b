/**
 * Tenants: the operator provisions them; every /v1 request reads its tenant's settings and networks. Reads are
 * cached like API keys: invalidated at once on operator writes, in every process (ConfigChanges).
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "effect/sql"
import { announceConfigChange, ConfigChanges } from "../auth/ConfigChanges.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { NotFound } from "../domain/ApiError.ts"
import { Ids } from "../domain/Ids.ts"
import { decodeStoredSettings, type TenantSettings } from "./TenantSettings.ts"

export const tenantCacheTtlMillis = 5_000

export interface Tenant {
  readonly id: string
  /** Derivation index T (tenants start at 1). */
  readonly seq: number
  readonly name: string
  readonly status: "ACTIVE" | "SUSPENDED"
  readonly subscriptionExpiresAt: Date | null
  readonly settings: TenantSettings
  /** The stored JSON form of `settings`, merged by PATCH. */
  readonly settingsEncoded: Record<string, unknown>
  readonly networks: ReadonlyArray<string>
  readonly createdAt: Date
}

/** The columns of `columns` below, decoded (db/RowSchemas.ts); `settings` is jsonb, parsed by the driver. */
const Row = Schema.Struct({
  id: Text,
  seq: Int4,
  name: Text,
  status: Schema.Literals(["ACTIVE", "SUSPENDED"]),
  subscription_expires_at: Nullable(Timestamp),
  settings: Schema.Record(Schema.String, Schema.Unknown),
  networks: Schema.Array(Text),
  created_at: Timestamp
})
type Row = typeof Row.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const foundRow = decodeFirstRow(Row, "Tenants.get")
const createdRow = decodeSingleRow(Row, "Tenants.create")
const updatedRow = decodeFirstRow(Row, "Tenants.update")
const listedRows = decodeRows(Row, "Tenants.list")

const fromRow = (row: Row): Tenant => ({
  id: row.id,
  seq: row.seq,
  name: row.name,
  status: row.status,
  subscriptionExpiresAt: row.subscription_expires_at,
  settings: decodeStoredSettings(row.settings),
  settingsEncoded: row.settings,
  networks: row.networks,
  createdAt: row.created_at
})

export interface TenantPatch {
  readonly status?: "ACTIVE" | "SUSPENDED"
  readonly subscriptionExpiresAt?: Date | null
  readonly networks?: ReadonlyArray<string>
  readonly settingsEncoded?: Record<string, unknown>
}

export class Tenants extends Context.Service<Tenants, {
  readonly create: (input: { readonly name: string; readonly networks: ReadonlyArray<string> }) => Effect.Effect<Tenant>
  readonly get: (tenantId: string) => Effect.Effect<Tenant | undefined>
  /** The tenant, or 404 `tenant not found`: a missing tenant is an error, never a default (operator paths). */
  readonly require: (tenantId: string) => Effect.Effect<Tenant, NotFound>
  /** For request paths: may be up to `tenantCacheTtlMillis` old unless invalidated. */
  readonly getCached: (tenantId: string) => Effect.Effect<Tenant | undefined>
  readonly update: (tenantId: string, patch: TenantPatch) => Effect.Effect<Tenant | undefined>
  readonly invalidate: Effect.Effect<void>
  /** Newest first (by `seq`); `nextCursor` is set exactly when the page is full, as /v1's lists (GET /ops/tenants). */
  readonly list: (options: {
    readonly status?: "ACTIVE" | "SUSPENDED" | undefined
    readonly limit: number
    /** The previous page's `nextCursor`: the id of its last tenant. */
    readonly cursor?: string | undefined
  }) => Effect.Effect<{ readonly items: ReadonlyArray<Tenant>; readonly nextCursor: string | null }>
}>()("coffer/Tenants") {
  static readonly layer = Layer.effect(
    Tenants,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const pg = yield* PgClient.PgClient
      const ids = yield* Ids
      const cache = new Map<string, { readonly tenant: Tenant | undefined; readonly loadedAtMillis: number }>()
      const columns = sql`id, seq, name, status, subscription_expires_at, settings, networks, created_at`
      // A text[] parameter passed as JSON, so no array literal is ever built by hand.
      const textArray = (values: ReadonlyArray<string>) =>
        sql`(SELECT coalesce(array_agg(value), '{}') FROM jsonb_array_elements_text(${JSON.stringify(values)}::jsonb))`

      const get = Effect.fn("Tenants.get")(function*(tenantId: string) {
        const row = yield* sql`SELECT ${columns} FROM tenants WHERE id = ${tenantId}`.pipe(
          Effect.orDie,
          Effect.flatMap(foundRow)
        )
        return row === undefined ? undefined : fromRow(row)
      })

      // On the path of every /v1 request: a cache hit is a map lookup, without a span.
      const getCached = (tenantId: string): Effect.Effect<Tenant | undefined> =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const cached = cache.get(tenantId)
          if (cached !== undefined && now - cached.loadedAtMillis < tenantCacheTtlMillis) return Effect.succeed(cached.tenant)
          return Effect.map(get(tenantId), (tenant) => {
            if (cache.size >= 10_000) cache.clear()
            cache.set(tenantId, { tenant, loadedAtMillis: now })
            return tenant
          })
        })

      const create = Effect.fn("Tenants.create")(function*(input: { name: string; networks: ReadonlyArray<string> }) {
        const id = yield* ids.uuidV7For("tenant")
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* sql`
          INSERT INTO tenants (id, name, networks, created_at)
          VALUES (${id}, ${input.name}, ${textArray(input.networks)}, ${now})
          RETURNING ${columns}`.pipe(Effect.orDie, Effect.flatMap(createdRow))
        return fromRow(row)
      })

      const update = Effect.fn("Tenants.update")(function*(tenantId: string, patch: TenantPatch) {
        const current = yield* get(tenantId)
        if (current === undefined) return undefined
        const status = patch.status ?? current.status
        const expires = patch.subscriptionExpiresAt === undefined
          ? current.subscriptionExpiresAt
          : patch.subscriptionExpiresAt
        const networks = patch.networks ?? current.networks
        const settings = patch.settingsEncoded ?? current.settingsEncoded
        const row = yield* sql`
          UPDATE tenants SET status = ${status}, subscription_expires_at = ${expires},
            networks = ${textArray(networks)},
            settings = ${JSON.stringify(settings)}::jsonb
          WHERE id = ${tenantId}
          RETURNING ${columns}`.pipe(Effect.orDie, Effect.flatMap(updatedRow))
        cache.clear()
        yield* announceConfigChange.pipe(Effect.provideService(PgClient.PgClient, pg))
        return row === undefined ? undefined : fromRow(row)
      })

      const list = Effect.fn("Tenants.list")(function*(options: {
        readonly status?: "ACTIVE" | "SUSPENDED" | undefined
        readonly limit: number
        readonly cursor?: string | undefined
      }) {
        // `seq` is allocated in insertion order by the database (ids are time-ordered only within one process).
        // A cursor that names no tenant gives an empty page, as /v1's cursors do.
        const rows = yield* sql`
          SELECT ${columns} FROM tenants
          WHERE TRUE
            ${options.status === undefined ? sql`` : sql`AND status = ${options.status}`}
            ${options.cursor === undefined ? sql`` : sql`AND seq < (SELECT seq FROM tenants WHERE id = ${options.cursor})`}
          ORDER BY seq DESC
          LIMIT ${options.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items = rows.map(fromRow)
        return { items, nextCursor: items.length === options.limit ? items[items.length - 1]!.id : null }
      })

      const invalidate = Effect.sync(() => cache.clear())
      yield* (yield* ConfigChanges).onChange(invalidate)
      const require = (tenantId: string): Effect.Effect<Tenant, NotFound> =>
        Effect.flatMap(get(tenantId), (tenant) =>
          tenant === undefined ? Effect.fail(new NotFound({ message: "tenant not found" })) : Effect.succeed(tenant))

      return Tenants.of({ create, get, require, getCached, update, invalidate, list })
    })
  )
}
