/**
 * The operator's audit trail (operator-interface.md, "Listing, audit and documents"; docs/operations.md, "Audit
 * trail"): every operator request that changed something leaves one entry, written in the database transaction of
 * the change. A change that fails (or rolls back) leaves none, and an entry cannot outlive its change. The table
 * refuses UPDATE, DELETE and TRUNCATE itself (sql/0026_operator_audit.sql).
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeRows, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { type AuditAction, auditActions, type AuditTargetType, auditTargetTypes } from "../domain/AuditActions.ts"
import { Ids } from "../domain/Ids.ts"

/** What the caller of `audited` says about its change once it has made it. */
export interface AuditedChange {
  readonly action: AuditAction
  readonly target: { readonly type: AuditTargetType; readonly id: string | null }
  /** The tenant the change belongs to; null for platform-wide changes. */
  readonly tenantId: string | null
  /** What changed, as JSON; never a secret (a TOTP secret is recorded as `totpEnabled`). */
  readonly change: Readonly<Record<string, unknown>>
}

/** Who asked and under which request id: the operator interface's request, known to the handler. */
export interface AuditOrigin {
  readonly requestId: string
  readonly operator: string
}

export interface AuditEntry extends AuditedChange {
  readonly id: string
  readonly at: Date
  readonly requestId: string
  readonly operator: string
}

export interface AuditQuery {
  /** Inclusive. */
  readonly from?: Date | undefined
  /** Exclusive. */
  readonly to?: Date | undefined
  readonly action?: AuditAction | undefined
  readonly tenantId?: string | undefined
  readonly limit: number
  /** The previous page's `nextCursor`: the id of its last entry. */
  readonly cursor?: string | undefined
}

const Row = Schema.Struct({
  id: Text,
  at: Timestamp,
  action: Schema.Literals(auditActions),
  target_type: Schema.Literals(auditTargetTypes),
  target_id: Nullable(Text),
  tenant_id: Nullable(Text),
  change: Schema.Record(Schema.String, Schema.Unknown),
  request_id: Text,
  operator: Text
})
// Compiled once (db/RowSchemas.ts): rows decoded at this edge, a mismatch a defect naming the query.
const listedRows = decodeRows(Row, "OperatorAudit.list")

export class OperatorAudit extends Context.Service<OperatorAudit, {
  /**
   * Runs `effect` and inserts its entry in one database transaction: the effect's statements join it (a service's
   * own `withTransaction` becomes a savepoint), and a failure of either rolls both back. Work that must follow the
   * commit (cache invalidation, waking another process) belongs after `audited` returns, or in `sql.afterCommit`.
   */
  readonly audited: <A, E, R>(
    origin: AuditOrigin,
    effect: Effect.Effect<A, E, R>,
    describe: (result: A) => AuditedChange
  ) => Effect.Effect<A, E, R>
  /** Newest first; `nextCursor` is set exactly when the page is full (as /v1's lists). */
  readonly list: (
    query: AuditQuery
  ) => Effect.Effect<{ readonly items: ReadonlyArray<AuditEntry>; readonly nextCursor: string | null }>
}>()("coffer/OperatorAudit") {
  static readonly layer = Layer.effect(
    OperatorAudit,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ids = yield* Ids

      const insert = Effect.fn("OperatorAudit.insert")(function*(origin: AuditOrigin, entry: AuditedChange) {
        const id = yield* ids.uuidV7For("operator-audit")
        const at = new Date(yield* Clock.currentTimeMillis)
        yield* sql`
          INSERT INTO operator_audit (id, at, action, target_type, target_id, tenant_id, change, request_id, operator)
          VALUES (${id}, ${at}, ${entry.action}, ${entry.target.type}, ${entry.target.id}, ${entry.tenantId},
            ${JSON.stringify(entry.change)}::jsonb, ${origin.requestId}, ${origin.operator})`
      })

      const audited = <A, E, R>(
        origin: AuditOrigin,
        effect: Effect.Effect<A, E, R>,
        describe: (result: A) => AuditedChange
      ): Effect.Effect<A, E, R> =>
        sql.withTransaction(Effect.tap(effect, (result) => insert(origin, describe(result)))).pipe(
          // A database failure of the entry (or the commit) is a defect: the change is not made, the request is 500.
          Effect.catchTag("SqlError", Effect.die),
          Effect.withSpan("OperatorAudit.audited")
        ) as Effect.Effect<A, E, R>

      const list = Effect.fn("OperatorAudit.list")(function*(query: AuditQuery) {
        const conditions = [
          query.from === undefined ? undefined : sql`at >= ${query.from}`,
          query.to === undefined ? undefined : sql`at < ${query.to}`,
          query.action === undefined ? undefined : sql`action = ${query.action}`,
          query.tenantId === undefined ? undefined : sql`tenant_id = ${query.tenantId}`,
          // An id that names no entry gives an empty page, as /v1's cursors do.
          query.cursor === undefined
            ? undefined
            : sql`seq < (SELECT seq FROM operator_audit WHERE id = ${query.cursor})`
        ].filter((condition) => condition !== undefined)
        const rows = yield* sql`
          SELECT id, at, action, target_type, target_id, tenant_id, change, request_id, operator
          FROM operator_audit
          ${conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`}
          ORDER BY seq DESC
          LIMIT ${query.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items: ReadonlyArray<AuditEntry> = rows.map((row) => ({
          id: row.id,
          at: row.at,
          action: row.action,
          target: { type: row.target_type, id: row.target_id },
          tenantId: row.tenant_id,
          change: row.change,
          requestId: row.request_id,
          operator: row.operator
        }))
        return { items, nextCursor: items.length === query.limit ? items[items.length - 1]!.id : null }
      })

      return OperatorAudit.of({ audited, list })
    })
  )
}
