/**
 * The idempotency engine of spec section 7 (rules 1-8), one mechanism for `POST /v1/wallets` and, next,
 * `POST /v1/transactions`. The primary key of `idempotency_records` decides who executes: concurrent identical
 * requests race on one INSERT and exactly one wins. Only successful responses are stored and replayed byte for
 * byte; a non-retryable error releases the key, a retryable one keeps it for `retryableHoldSeconds`.
 */
import { Cause, Clock, Context, Effect, Exit, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { BadRequest, IdempotencyConflict } from "../domain/ApiError.ts"

/** Rule 1. */
export const idempotencyKeyPattern = /^[A-Za-z0-9_.:-]{1,128}$/
export const idempotencyKeyMessage = "Idempotency-Key must be 1-128 chars of A-Z a-z 0-9 _ - : ."
export const idempotencyKeyMissingMessage = "Idempotency-Key header is required"
/** Rule 7: after a retryable error the key stays occupied this long, then a retry re-executes. */
export const retryableHoldSeconds = 60
/**
 * A request still IN_PROGRESS after this is taken as abandoned (its process died): longer than the 30 s processing
 * limit, so a live request is never executed twice.
 */
export const inProgressLeaseSeconds = 120

export const reusedMessage = "Idempotency-Key reused with a different request"
export const inProgressMessage = "request already in progress"
/** Rule 8. */
export const usedByAnotherKeyMessage = "externalTxId already used"

export interface IdempotencyScope {
  readonly tenantId: string
  readonly keyId: string
  readonly endpoint: string
  readonly key: string
  /**
   * Rule 8: the key is unique across the whole tenant (an `externalTxId`), so another API key using it conflicts
   * instead of executing on its own.
   */
  readonly tenantWide?: boolean
}

export interface StoredResponse {
  readonly status: number
  /** The exact response body bytes (JSON text) of the first execution. */
  readonly body: string
}

/** Rule 1 for a header value that may be absent. */
export const checkIdempotencyKey = (value: string | undefined): Effect.Effect<string, BadRequest> =>
  value === undefined || value.length === 0
    ? Effect.fail(new BadRequest({ message: idempotencyKeyMissingMessage }))
    : idempotencyKeyPattern.test(value)
    ? Effect.succeed(value)
    : Effect.fail(new BadRequest({ message: idempotencyKeyMessage }))

/** Whether a failure keeps the key (rule 7): the error classes carry the spec's retryable flag. */
const isRetryableCause = (cause: Cause.Cause<unknown>): boolean => {
  const failure = cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure === undefined) return true // a defect (500 INTERNAL) or an interruption: retryable
  const error = failure.error as { readonly constructor?: { readonly retryable?: unknown } } | undefined
  return error?.constructor?.retryable === true
}

type Claim = { readonly _tag: "Execute" } | { readonly _tag: "Replay"; readonly response: StoredResponse }

export class Idempotency extends Context.Service<Idempotency, {
  /**
   * Runs `execute` at most once per scope and body: a replay of the same body returns the first response, a
   * different body or a concurrent first request fails with IDEMPOTENCY_CONFLICT.
   */
  readonly run: <E, R>(
    scope: IdempotencyScope,
    requestSha256: string,
    execute: Effect.Effect<StoredResponse, E, R>
  ) => Effect.Effect<StoredResponse, E | IdempotencyConflict, R>
}>()("coffer/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const where = (scope: IdempotencyScope) =>
        sql`tenant_id = ${scope.tenantId} AND key_id = ${scope.keyId} AND endpoint = ${scope.endpoint}
          AND idempotency_key = ${scope.key}`
      /** The record holding the key: for a tenant-wide key, whichever API key took it. */
      const holder = (scope: IdempotencyScope) =>
        scope.tenantWide === true
          ? sql`tenant_id = ${scope.tenantId} AND endpoint = ${scope.endpoint} AND idempotency_key = ${scope.key}
              AND tenant_wide`
          : where(scope)

      const claim = (scope: IdempotencyScope, requestSha256: string) =>
        Effect.gen(function*() {
          for (let attempt = 0; attempt < 3; attempt++) {
            const now = yield* Clock.currentTimeMillis
            const lease = new Date(now + inProgressLeaseSeconds * 1000)
            const inserted = yield* sql`
              INSERT INTO idempotency_records (tenant_id, key_id, endpoint, idempotency_key, request_sha256, state,
                locked_until, created_at, updated_at, tenant_wide)
              VALUES (${scope.tenantId}, ${scope.keyId}, ${scope.endpoint}, ${scope.key}, ${requestSha256},
                'IN_PROGRESS', ${lease}, ${new Date(now)}, ${new Date(now)}, ${scope.tenantWide === true})
              ON CONFLICT DO NOTHING
              RETURNING 1 AS inserted`
            if (inserted.length > 0) return { _tag: "Execute" } as Claim
            const decided = yield* sql.withTransaction(Effect.gen(function*() {
              const rows = yield* sql<{
                key_id: string
                request_sha256: string
                state: "IN_PROGRESS" | "COMPLETED" | "RETRYABLE_FAILURE"
                response_status: number | null
                response_body: string | null
                locked_until: Date
              }>`SELECT key_id, request_sha256, state, response_status, response_body, locked_until
                 FROM idempotency_records WHERE ${holder(scope)} FOR UPDATE`
              const row = rows[0]
              if (row === undefined) return undefined // released meanwhile: claim again
              if (row.key_id !== scope.keyId) return yield* new IdempotencyConflict({ message: usedByAnotherKeyMessage })
              if (row.request_sha256 !== requestSha256) {
                return yield* new IdempotencyConflict({ message: reusedMessage })
              }
              if (row.state === "COMPLETED") {
                return { _tag: "Replay", response: { status: row.response_status!, body: row.response_body! } } as Claim
              }
              if (row.locked_until.getTime() > now) return yield* new IdempotencyConflict({ message: inProgressMessage })
              yield* sql`UPDATE idempotency_records SET state = 'IN_PROGRESS', locked_until = ${lease},
                updated_at = ${new Date(now)} WHERE ${where(scope)}`
              return { _tag: "Execute" } as Claim
            }))
            if (decided !== undefined) return decided
          }
          return yield* Effect.die(new Error("idempotency record kept disappearing"))
        }).pipe(Effect.catchTag("SqlError", Effect.die))

      const settle = (scope: IdempotencyScope, exit: Exit.Exit<StoredResponse, unknown>) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          if (Exit.isSuccess(exit)) {
            yield* sql`UPDATE idempotency_records SET state = 'COMPLETED', response_status = ${exit.value.status},
              response_body = ${exit.value.body}, updated_at = ${new Date(now)} WHERE ${where(scope)}`
          } else if (isRetryableCause(exit.cause)) {
            yield* sql`UPDATE idempotency_records SET state = 'RETRYABLE_FAILURE',
              locked_until = ${new Date(now + retryableHoldSeconds * 1000)}, updated_at = ${new Date(now)}
              WHERE ${where(scope)}`
          } else {
            yield* sql`DELETE FROM idempotency_records WHERE ${where(scope)}`
          }
        }).pipe(Effect.orDie)

      const run = <E, R>(scope: IdempotencyScope, requestSha256: string, execute: Effect.Effect<StoredResponse, E, R>) =>
        Effect.gen(function*() {
          const decided = yield* claim(scope, requestSha256)
          if (decided._tag === "Replay") return decided.response
          // Settling must happen whatever the caller does, so the claim and its outcome are one uninterruptible unit.
          const exit = yield* Effect.exit(execute)
          yield* settle(scope, exit)
          return yield* exit
        }).pipe(Effect.uninterruptible)

      return Idempotency.of({ run })
    })
  )
}
