/**
 * End users of a tenant (spec 4.2). Creation is idempotent by `customerRefId` and safe under concurrency: the
 * unique keys decide, and a losing concurrent insert returns the winner's row unchanged.
 *
 * Just over 300 lines: one service, the user endpoints of spec 4.2 (create, get, list, patch, balances), each a
 * query with its decoder.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { BadRequest, EmailTaken, InvalidState, LimitExceeded, NotFound, type RateLimited } from "../domain/ApiError.ts"
import { Entropy } from "../domain/Entropy.ts"
import { Ids } from "../domain/Ids.ts"
import { PasswordHasher } from "./PasswordHash.ts"
import {
  customerRefIdMessage,
  invalidEmailMessage,
  isStrongPassword,
  nicknameMessage,
  normalizeCustomerRefId,
  normalizeEmail,
  normalizeNickname,
  passwordRequiresEmailMessage,
  statusMessage,
  weakPasswordMessage
} from "./UserRules.ts"

export const UserStatus = ["ACTIVE", "FROZEN", "CLOSED"] as const
export type UserStatus = (typeof UserStatus)[number]

export interface User {
  readonly id: string
  readonly tenantId: string
  /** Derivation index U, unique per tenant. */
  readonly seq: number
  readonly uid: string
  readonly customerRefId: string
  readonly email: string | null
  readonly nickname: string | null
  readonly source: "B_API" | "C_DIRECT"
  readonly status: UserStatus
  readonly cooldownUntil: Date | null
  readonly totpEnabled: boolean
  readonly createdAt: Date
}

/** The columns of `columns` below, decoded (db/RowSchemas.ts). */
const Row = Schema.Struct({
  id: Text,
  tenant_id: Text,
  seq: Int4,
  uid: Text,
  customer_ref_id: Text,
  email: Nullable(Text),
  nickname: Nullable(Text),
  source: Schema.Literals(["B_API", "C_DIRECT"]),
  status: Schema.Literals(UserStatus),
  cooldown_until: Nullable(Timestamp),
  totp_enabled: Schema.Boolean,
  created_at: Timestamp
})
type Row = typeof Row.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const foundRow = decodeFirstRow(Row, "Users.find")
const userCounter = decodeSingleRow(
  Schema.Struct({ user_seq: Int4, users_max: Int4 }),
  "Users.create (tenant counter)"
)
const userQuota = decodeSingleRow(Schema.Struct({ full: Schema.Boolean }), "Users.create (quota)")
const insertedRow = decodeFirstRow(Row, "Users.create (insert)")
const listedRows = decodeRows(Row, "Users.list")
const updatedRow = decodeFirstRow(Row, "Users.update")
const operatorUpdatedRow = decodeSingleRow(Row, "Users.operatorUpdate")
const totpUpdatedRow = decodeSingleRow(Row, "Users.setTotpSecret")

const fromRow = (row: Row): User => ({
  id: row.id,
  tenantId: row.tenant_id,
  seq: row.seq,
  uid: row.uid,
  customerRefId: row.customer_ref_id,
  email: row.email,
  nickname: row.nickname,
  source: row.source,
  status: row.status,
  cooldownUntil: row.cooldown_until,
  totpEnabled: row.totp_enabled,
  createdAt: row.created_at
})

export interface CreateUserInput {
  readonly customerRefId: string
  readonly email?: string | null | undefined
  readonly password?: string | null | undefined
  readonly nickname?: string | null | undefined
}

/** The tenant's user quota (`tenants.users_max`, default 10,000,000; docs/operations.md "Per-tenant quotas"). */
export const userQuotaMessage = "user quota of the tenant reached; ask the operator to raise it"

/** A lost race for one customerRefId: the counter bump is rolled back with it, so the quota counts users only. */
class LostRace {
  readonly _tag = "LostRace"
}

/** Attempts at a random 8-digit uid before giving up (a tenant would need ~10^7 users to make one retry likely). */
const uidAttemptsMax = 8

export class Users extends Context.Service<Users, {
  /**
   * Returns the existing user unchanged when `customerRefId` is taken (spec 4.2). RateLimited only with a password,
   * when the tenant's share of the password-hash pool is full (PasswordHash.ts). LimitExceeded when the tenant has
   * as many users as its quota (`tenants.users_max`).
   */
  readonly create: (
    tenantId: string,
    input: CreateUserInput
  ) => Effect.Effect<User, BadRequest | EmailTaken | LimitExceeded | RateLimited>
  readonly find: (tenantId: string, customerRefId: string) => Effect.Effect<User | undefined>
  readonly get: (tenantId: string, customerRefId: string) => Effect.Effect<User, NotFound>
  readonly list: (
    tenantId: string,
    options: { readonly limit: number; readonly cursor?: string | undefined; readonly status?: UserStatus | undefined }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<User>; readonly nextCursor: string | null }>
  readonly update: (
    tenantId: string,
    customerRefId: string,
    patch: { readonly email?: string | null | undefined; readonly status?: string | null | undefined }
  ) => Effect.Effect<User, BadRequest | NotFound | EmailTaken | InvalidState>
  /** Operator changes (cooldown, status including CLOSED). */
  readonly operatorUpdate: (
    tenantId: string,
    customerRefId: string,
    patch: { readonly cooldownUntil?: Date | null | undefined; readonly status?: UserStatus | undefined }
  ) => Effect.Effect<User, NotFound | InvalidState>
  readonly setTotpSecret: (tenantId: string, customerRefId: string, secret: string | null) => Effect.Effect<User, NotFound>
}>()("coffer/Users") {
  static readonly layer = Layer.effect(
    Users,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entropy = yield* Entropy
      const ids = yield* Ids
      const hasher = yield* PasswordHasher
      const columns = sql`id, tenant_id, seq, uid, customer_ref_id, email, nickname, source, status, cooldown_until,
        (totp_secret IS NOT NULL) AS totp_enabled, created_at`

      const find = Effect.fn("Users.find")(function*(tenantId: string, customerRefId: string) {
        const row = yield* sql`
          SELECT ${columns} FROM users WHERE tenant_id = ${tenantId} AND customer_ref_id = ${customerRefId}`
          .pipe(Effect.orDie, Effect.flatMap(foundRow))
        return row === undefined ? undefined : fromRow(row)
      })

      const get = Effect.fn("Users.get")(function*(tenantId: string, customerRefId: string) {
        const user = yield* find(tenantId, customerRefId)
        if (user === undefined) return yield* new NotFound({ message: "user not found" })
        return user
      })

      const randomUid = Effect.map(
        entropy.bytes(4, "user-uid"),
        (bytes) => String(10_000_000 + (Buffer.from(bytes).readUInt32BE(0) % 90_000_000))
      )

      const create = Effect.fn("Users.create")(function*(tenantId: string, input: CreateUserInput) {
        const customerRefId = normalizeCustomerRefId(input.customerRefId)
        if (customerRefId === undefined) return yield* new BadRequest({ message: customerRefIdMessage })
        let email: string | null = null
        if (input.email !== undefined && input.email !== null) {
          const normalized = normalizeEmail(input.email)
          if (normalized === undefined) return yield* new BadRequest({ message: invalidEmailMessage })
          email = normalized
        }
        const password = input.password ?? null
        if (password !== null) {
          if (email === null) return yield* new BadRequest({ message: passwordRequiresEmailMessage })
          if (!isStrongPassword(password)) return yield* new BadRequest({ message: weakPasswordMessage })
        }
        let nickname: string | null = null
        if (input.nickname !== undefined && input.nickname !== null) {
          const normalized = normalizeNickname(input.nickname)
          if (normalized === undefined) return yield* new BadRequest({ message: nicknameMessage })
          nickname = normalized
        }

        const existing = yield* find(tenantId, customerRefId)
        if (existing !== undefined) return existing

        if (password !== null) {
          // A hash is about 170 ms of a core: none for a request the email's unique key would refuse anyway (issue
          // 36). The insert below still decides a race between two requests for one email.
          const taken = yield* sql`SELECT 1 AS taken FROM users WHERE tenant_id = ${tenantId} AND email = ${email}`.pipe(
            Effect.orDie
          )
          if (taken.length > 0) return yield* new EmailTaken({ message: "email is used by another user of the tenant" })
        }
        // No hash for a tenant already at its quota; the locked check below decides a race for the last place.
        const quota = yield* sql`SELECT user_seq >= users_max AS full FROM tenants WHERE id = ${tenantId}`.pipe(
          Effect.flatMap(userQuota),
          Effect.orDie
        )
        if (quota.full) {
          // The customerRefId may have been created since `find` above: that one is answered, not the quota.
          const raced = yield* find(tenantId, customerRefId)
          if (raced !== undefined) return raced
          return yield* new LimitExceeded({ message: userQuotaMessage })
        }
        const passwordHash = password === null ? null : yield* hasher.hash(tenantId, password)
        for (let attempt = 0; attempt < uidAttemptsMax; attempt++) {
          const id = yield* ids.uuidV7For("user")
          const uid = yield* randomUid
          const now = new Date(yield* Clock.currentTimeMillis)
          const inserted = yield* sql.withTransaction(Effect.gen(function*() {
            // The tenant row lock serializes user-index allocation within the tenant, and with it the quota: the
            // count and the insert are one transaction, so a burst cannot pass it (issue 36).
            const counter = yield* sql`
              UPDATE tenants SET user_seq = user_seq + 1 WHERE id = ${tenantId} RETURNING user_seq, users_max`.pipe(
              Effect.flatMap(userCounter)
            )
            const row = yield* sql`
              INSERT INTO users (id, tenant_id, seq, uid, customer_ref_id, email, password_hash, nickname, source,
                created_at, updated_at)
              VALUES (${id}, ${tenantId}, ${counter.user_seq - 1}, ${uid}, ${customerRefId}, ${email},
                ${passwordHash}, ${nickname}, 'B_API', ${now}, ${now})
              ON CONFLICT (tenant_id, customer_ref_id) DO NOTHING
              RETURNING ${columns}`.pipe(Effect.flatMap(insertedRow))
            // A lost race is answered with the winner even at the quota; only a new user is refused by it.
            if (row === undefined) return yield* Effect.fail(new LostRace())
            if (counter.user_seq > counter.users_max) return yield* new LimitExceeded({ message: userQuotaMessage })
            return row
          })).pipe(
            Effect.map((row): { readonly _tag: "Done"; readonly row: Row | undefined } => ({ _tag: "Done", row })),
            Effect.catchTag("LostRace", () => Effect.succeed({ _tag: "Done" as const, row: undefined })),
            Effect.catchReason(
              "SqlError",
              "UniqueViolation",
              (violation, error) => {
                if (violation.constraint === "users_tenant_email_key") {
                  return Effect.fail(new EmailTaken({ message: "email is used by another user of the tenant" }))
                }
                if (violation.constraint === "users_tenant_uid_key") return Effect.succeed({ _tag: "Retry" as const })
                return Effect.die(error)
              },
              (_, error) => Effect.die(error)
            )
          )
          if (inserted._tag === "Retry") continue
          if (inserted.row !== undefined) return fromRow(inserted.row)
          // A concurrent request created this customerRefId first: return that user unchanged.
          const winner = yield* find(tenantId, customerRefId)
          if (winner !== undefined) return winner
        }
        return yield* Effect.die(new Error("could not allocate a unique uid"))
      })

      const list = Effect.fn("Users.list")(function*(
        tenantId: string,
        options: { limit: number; cursor?: string | undefined; status?: UserStatus | undefined }
      ) {
        // Newest first by `seq`, allocated under the tenant row lock in creation order. Ids are time-ordered only
        // within one process: users created by two processes in one millisecond would compare by random bits.
        const rows = yield* sql`
          SELECT ${columns} FROM users
          WHERE tenant_id = ${tenantId} AND source = 'B_API'
            ${
          options.cursor === undefined
            ? sql``
            : sql`AND seq < (SELECT seq FROM users WHERE tenant_id = ${tenantId} AND id = ${options.cursor})`
        }
            ${options.status === undefined ? sql`` : sql`AND status = ${options.status}`}
          ORDER BY seq DESC
          LIMIT ${options.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items = rows.map(fromRow)
        return { items, nextCursor: items.length === options.limit ? items[items.length - 1]!.id : null }
      })

      const update = Effect.fn("Users.update")(function*(
        tenantId: string,
        customerRefId: string,
        patch: { email?: string | null | undefined; status?: string | null | undefined }
      ) {
        let email: string | undefined
        if (patch.email !== undefined) {
          // The email can be changed but not cleared.
          const normalized = patch.email === null ? undefined : normalizeEmail(patch.email)
          if (normalized === undefined) return yield* new BadRequest({ message: invalidEmailMessage })
          email = normalized
        }
        let status: "ACTIVE" | "FROZEN" | undefined
        if (patch.status !== undefined) {
          if (patch.status !== "ACTIVE" && patch.status !== "FROZEN") {
            return yield* new BadRequest({ message: statusMessage })
          }
          status = patch.status
        }
        const user = yield* get(tenantId, customerRefId)
        if (status !== undefined && user.status === "CLOSED") {
          return yield* new InvalidState({ message: "user is closed" })
        }
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* sql`
          UPDATE users SET email = ${email ?? user.email}, status = ${status ?? user.status}, updated_at = ${now}
          WHERE id = ${user.id} AND status <> 'CLOSED'
          RETURNING ${columns}`.pipe(
          Effect.catchReason(
            "SqlError",
            "UniqueViolation",
            (violation, error) =>
              violation.constraint === "users_tenant_email_key"
                ? Effect.fail(new EmailTaken({ message: "email is used by another user of the tenant" }))
                : Effect.die(error),
            (_, error) => Effect.die(error)
          ),
          Effect.flatMap(updatedRow)
        )
        if (row === undefined) return yield* new InvalidState({ message: "user is closed" })
        return fromRow(row)
      })

      const operatorUpdate = Effect.fn("Users.operatorUpdate")(function*(
        tenantId: string,
        customerRefId: string,
        patch: { cooldownUntil?: Date | null | undefined; status?: UserStatus | undefined }
      ) {
        const user = yield* get(tenantId, customerRefId)
        // A closed user cannot be reopened (decisions.md, "Users and wallets").
        if (user.status === "CLOSED" && patch.status !== undefined && patch.status !== "CLOSED") {
          return yield* new InvalidState({ message: "a closed user cannot be reopened" })
        }
        const now = new Date(yield* Clock.currentTimeMillis)
        const cooldown = patch.cooldownUntil === undefined ? user.cooldownUntil : patch.cooldownUntil
        const row = yield* sql`
          UPDATE users SET cooldown_until = ${cooldown}, status = ${patch.status ?? user.status}, updated_at = ${now}
          WHERE id = ${user.id}
          RETURNING ${columns}`.pipe(Effect.orDie, Effect.flatMap(operatorUpdatedRow))
        return fromRow(row)
      })

      const setTotpSecret = Effect.fn("Users.setTotpSecret")(function*(
        tenantId: string,
        customerRefId: string,
        secret: string | null
      ) {
        const user = yield* get(tenantId, customerRefId)
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* sql`
          UPDATE users SET totp_secret = ${secret}, totp_last_step = NULL, updated_at = ${now}
          WHERE id = ${user.id}
          RETURNING ${columns}`.pipe(Effect.orDie, Effect.flatMap(totpUpdatedRow))
        return fromRow(row)
      })

      return Users.of({ create, find, get, list, update, operatorUpdate, setTotpSecret })
    })
  )
}
