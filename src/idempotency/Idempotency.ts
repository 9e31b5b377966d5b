/**
 * The idempotency engine of spec section 7 (rules 1-8), one mechanism for `POST /v1/wallets` and
 * `POST /v1/transactions`. The primary key of `idempotency_records` decides who executes: concurrent identical
 * requests race on one INSERT and exactly one wins. Only successful responses are stored and replayed byte for
 * byte; a non-retryable error releases the key, a retryable one keeps it for `retryableHoldSeconds`.
 *
 * Crashes (docs/wallets.md "Idempotency"): an execution whose effect is one database transaction stores its
 * response in that same transaction (`commit`), so no instant exists at which the effect is done and the record is
 * not; a retry after any crash replays the receipt. Each execution holds a claim (a fencing token) under the process
 * that runs it (ServiceInstance.ts): the record of a process that is gone is re-executed at once, and an execution
 * whose claim was taken over can no longer commit.
 */
import { Cause, Clock, Context, Effect, Exit, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { makeGroupCommit, outsideTransaction, togetherOrAlone } from "../db/GroupCommit.ts"
import { decodeFirstRow, decodeRows, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { BadRequest, IdempotencyConflict } from "../domain/ApiError.ts"
import { Ids } from "../domain/Ids.ts"
import { CrashPoints } from "./CrashPoints.ts"
import { ownerIsLive, ServiceInstance } from "./ServiceInstance.ts"

/** Rule 1. */
export const idempotencyKeyPattern = /^[A-Za-z0-9_.:-]{1,128}$/
export const idempotencyKeyMessage = "Idempotency-Key must be 1-128 chars of A-Z a-z 0-9 _ - : ."
export const idempotencyKeyMissingMessage = "Idempotency-Key header is required"
/** Rule 7: after a retryable error the key stays occupied this long, then a retry re-executes. */
export const retryableHoldSeconds = 60
/**
 * A request still IN_PROGRESS after this is taken as abandoned even though its process looks live (or the record
 * predates owner tracking): longer than the 30 s processing limit. A record of a process that is gone is re-executed
 * without waiting for it.
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

/**
 * The `endpoint` a scope's record is stored under. Tenant-wide keys (rule 8, an `externalTxId`) and per-API-key ones
 * (rule 2, an `Idempotency-Key`) share the key's alphabet, so one text can be both; stored under one name, the two
 * requests met on one record, which neither could hold (a 500). Apart, each executes once and replays its own
 * answer (sql/0022_tenant_wide_idempotency.sql moved the records written before).
 */
export const recordEndpoint = (scope: IdempotencyScope): string =>
  scope.tenantWide === true ? `${scope.endpoint} (tenant-wide)` : scope.endpoint

/** Rule 1 for a header value that may be absent. */
export const checkIdempotencyKey = (value: string | undefined): Effect.Effect<string, BadRequest> =>
  value === undefined || value.length === 0
    ? Effect.fail(new BadRequest({ message: idempotencyKeyMissingMessage }))
    : idempotencyKeyPattern.test(value)
    ? Effect.succeed(value)
    : Effect.fail(new BadRequest({ message: idempotencyKeyMessage }))

/** Whether a failure keeps the key (rule 7): the error classes carry the spec's retryable flag. */
const isRetryableCause = (cause: Cause.Cause<unknown>): boolean => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isNone(failure)) return true // a defect (500 INTERNAL) or an interruption: retryable
  const error = failure.value as { readonly constructor?: { readonly retryable?: unknown } } | undefined
  return error?.constructor?.retryable === true
}

/**
 * Stores the response as the record's outcome. Must run inside the database transaction of the effect it answers
 * for, so both commit together or neither does; dies when the claim was taken over (the transaction then rolls back).
 */
export interface Commit {
  (response: StoredResponse): Effect.Effect<void>
  /** The same for an effect written as one statement, with no transaction around it (`StoreInStatement`). */
  readonly inStatement: StoreInStatement<StoredResponse>
  /**
   * Takes the key's claim now if it is not held yet (`RunOptions.claimInStatement`); nothing otherwise. An effect
   * calls it before any write but its one statement's. When the key turns out held (a replay, a conflict) the effect
   * is stopped here and the run answers as for a held key.
   */
  readonly claim: Effect.Effect<void>
}

/**
 * Runs `write`, an effect that is one statement (a data-modifying `WITH`, its own transaction), with `store`: the
 * record's UPDATE, to be placed in that statement as a `WITH` query. `store` answers a row only while this execution's
 * claim holds; `write` must fail the whole statement when it answers none (a take-over), so the effect never commits
 * without its answer nor after another execution took the key.
 */
export type StoreInStatement<A> = <B, E, R>(
  answer: A,
  write: (store: Statement.Fragment, receipt?: ReceiptRow) => Effect.Effect<B, E, R>
) => Effect.Effect<B, E, R>

/**
 * The same UPDATE as `store`, as data: for a statement of fixed text that stores many receipts at once
 * (transfers/Movements.ts, `receiptsStatement` there). It sets the record COMPLETED with this response only where the
 * record still has this claim (`claim_id`), exactly as `store` does.
 */
export interface ReceiptRow {
  readonly tenant_id: string
  readonly key_id: string
  readonly endpoint: string
  readonly idempotency_key: string
  /** The execution's claim; null for a record inserted by the statement itself (`fresh`). */
  readonly claim_id: string | null
  readonly response_status: number
  readonly response_body: string
  readonly updated_at: string
  /**
   * No claim was taken before the statement (`RunOptions.claimInStatement`): the record is INSERTed COMPLETED by the
   * statement, and when the key is held the statement fails whole (a unique violation, or no row answered), the writer
   * raises `ReceiptNotStored` and the request goes the way of a held key (replay, 409, or a claim of its own).
   */
  readonly fresh: boolean
  readonly request_sha256: string
  readonly tenant_wide: boolean
}

/**
 * A statement that should have stored a receipt wrote none (its claim taken over, or, for a `fresh` record, the key
 * held by another request): the statement wrote nothing. Raised as a defect by the writer (transfers/Movements.ts);
 * a run whose claim is taken in the statement reads the key again and answers as a held key does.
 */
export class ReceiptNotStored extends Error {
  override readonly name = "ReceiptNotStored"
}

export interface RunOptions {
  /**
   * Take no claim before `execute`: the effect's one statement inserts the record COMPLETED with its answer
   * (`Commit.inStatement`, a `fresh` receipt), one write and one commit per request instead of a claim's commit
   * before it and the record's update in it. `execute` must call `Commit.claim` before writing anything else (it
   * then goes on as under a claim taken first). A failure of `execute` before the statement is settled by claiming
   * the key then: a held key answers as it would have first (a replay, a 409), else the failure is settled as usual
   * (released, or held for rule 7). Without it, a replay of a finished request would run the effect's reads before
   * the statement refuses it; with it, it still answers the stored bytes.
   */
  readonly claimInStatement?: boolean
}

/** What runs under a key: an effect, or one that stores its response in its own transaction through `commit`. */
export type Execute<E, R> =
  | Effect.Effect<StoredResponse, E, R>
  | ((commit: Commit) => Effect.Effect<StoredResponse, E, R>)

type Claim = { readonly _tag: "Execute"; readonly claimId: string } | {
  readonly _tag: "Replay"
  readonly response: StoredResponse
}

// Compiled once (db/RowSchemas.ts): the held record decoded at this edge, a mismatch a defect naming the query.
const heldRecord = decodeFirstRow(
  Schema.Struct({
    key_id: Text,
    request_sha256: Text,
    state: Schema.Literals(["IN_PROGRESS", "COMPLETED", "RETRYABLE_FAILURE"]),
    response_status: Nullable(Int4),
    response_body: Nullable(Text),
    locked_until: Timestamp,
    owner_gone: Schema.Boolean
  }),
  "Idempotency.claim (held record)"
)

/** Claims per INSERT at most. */
const claimBatchMax = 500

/** A first claim of a key, for the shared INSERT (`claimFresh`). */
interface FreshClaim {
  readonly scope: IdempotencyScope
  readonly requestSha256: string
  readonly now: number
  readonly claimId: string
}

/** The unique keys a claim's record takes: the record's own, and for a tenant-wide key the tenant's. */
const holderKeys = (scope: IdempotencyScope): ReadonlyArray<string> => {
  const own = [scope.tenantId, scope.keyId, recordEndpoint(scope), scope.key].join("\u0000")
  return scope.tenantWide === true
    ? [own, [scope.tenantId, recordEndpoint(scope), scope.key].join("\u0000")]
    : [own]
}

// The claims a shared INSERT wrote, decoded at this edge.
const insertedClaims = decodeRows(Schema.Struct({ claim_id: Text }), "Idempotency.claim (inserted)")

export class Idempotency extends Context.Service<Idempotency, {
  /**
   * Runs `execute` at most once per scope and body: a replay of the same body returns the first response, a
   * different body or a concurrent first request fails with IDEMPOTENCY_CONFLICT.
   */
  readonly run: <E, R>(
    scope: IdempotencyScope,
    requestSha256: string,
    execute: Execute<E, R>,
    options?: RunOptions
  ) => Effect.Effect<StoredResponse, E | IdempotencyConflict, R>
}>()("coffer/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const instance = yield* ServiceInstance
      const crash = yield* CrashPoints
      const newClaimId = (yield* Ids).uuidV7For("idempotency-claim")

      const where = (scope: IdempotencyScope) =>
        sql`tenant_id = ${scope.tenantId} AND key_id = ${scope.keyId} AND endpoint = ${recordEndpoint(scope)}
          AND idempotency_key = ${scope.key}`
      /** The record holding the key: for a tenant-wide key, whichever API key took it. */
      const holder = (scope: IdempotencyScope) =>
        scope.tenantWide === true
          ? sql`tenant_id = ${scope.tenantId} AND endpoint = ${recordEndpoint(scope)} AND idempotency_key = ${scope.key}
              AND tenant_wide`
          : where(scope)
      /** The record as this execution claimed it: a take-over changed the claim and this one may touch nothing. */
      const claimed = (scope: IdempotencyScope, claimId: string) =>
        sql`${where(scope)} AND state = 'IN_PROGRESS' AND claim_id = ${claimId}`

      /**
       * The first claim of a key: its IN_PROGRESS record, inserted unless the key is held (`ON CONFLICT DO NOTHING`
       * covers both the record's key and the tenant-wide one). Concurrent requests share one INSERT (db/GroupCommit.ts),
       * and each waits for its own record's commit before it executes, as with an INSERT of its own; the database
       * sees one statement and one commit per flush instead of one per request. Two claims of one key in a batch:
       * only the first is inserted, the other finds it held and goes the way of any held key (rule 5). A batch that
       * fails (a record a CHECK refuses, a tenant gone) is written again one claim at a time, so it fails only its own
       * request.
       */
      const insertClaims = (batch: ReadonlyArray<FreshClaim>) =>
        sql`
          INSERT INTO idempotency_records (tenant_id, key_id, endpoint, idempotency_key, request_sha256, state,
            locked_until, created_at, updated_at, tenant_wide, owner_instance, claim_id)
          SELECT r.tenant_id, r.key_id, r.endpoint, r.idempotency_key, r.request_sha256, 'IN_PROGRESS', r.locked_until,
            r.at, r.at, r.tenant_wide, ${instance.id}, r.claim_id
          FROM jsonb_to_recordset(${
          JSON.stringify(batch.map(({ claimId, now, requestSha256, scope }) => ({
            tenant_id: scope.tenantId,
            key_id: scope.keyId,
            endpoint: recordEndpoint(scope),
            idempotency_key: scope.key,
            request_sha256: requestSha256,
            locked_until: new Date(now + inProgressLeaseSeconds * 1000).toISOString(),
            at: new Date(now).toISOString(),
            tenant_wide: scope.tenantWide === true,
            claim_id: claimId
          })))
        }::jsonb) AS r(tenant_id uuid, key_id text, endpoint text, idempotency_key text, request_sha256 text,
            locked_until timestamptz, at timestamptz, tenant_wide boolean, claim_id uuid)
          ON CONFLICT DO NOTHING
          RETURNING claim_id`.pipe(Effect.flatMap(insertedClaims))
      /**
       * Per claim, whether its record was inserted: each key's first claim goes into the INSERT, a second claim of the
       * same key is answered false (it finds the key held).
       */
      const claimsInserted = (batch: ReadonlyArray<FreshClaim>) =>
        Effect.gen(function*() {
          const holders = new Set<string>()
          const firsts = batch.filter((claim) => {
            const keys = holderKeys(claim.scope)
            if (keys.some((key) => holders.has(key))) return false
            for (const key of keys) holders.add(key)
            return true
          })
          const fresh = new Set((yield* insertClaims(firsts)).map((row) => row.claim_id))
          return batch.map((claim) => fresh.has(claim.claimId))
        })
      const claimFresh = yield* makeGroupCommit<FreshClaim, Exit.Exit<boolean, SqlError.SqlError>>({
        batchMax: claimBatchMax,
        write: (batch) => togetherOrAlone(batch, claimsInserted).pipe(outsideTransaction(sql))
      })

      const claim = (scope: IdempotencyScope, requestSha256: string) =>
        Effect.gen(function*() {
          for (let attempt = 0; attempt < 3; attempt++) {
            const now = yield* Clock.currentTimeMillis
            const lease = new Date(now + inProgressLeaseSeconds * 1000)
            const claimId = yield* newClaimId
            const inserted = yield* Effect.flatten(claimFresh({ scope, requestSha256, now, claimId }))
            if (inserted) return { _tag: "Execute", claimId } as Claim
            const decided = yield* sql.withTransaction(Effect.gen(function*() {
              const row = yield* sql`SELECT key_id, request_sha256, state, response_status, response_body, locked_until,
                   (owner_instance IS NOT NULL AND owner_instance <> ${instance.id}
                     AND NOT ${ownerIsLive(sql, sql.literal("owner_instance"), now)}) AS owner_gone
                 FROM idempotency_records WHERE ${holder(scope)} FOR UPDATE`.pipe(Effect.flatMap(heldRecord))
              if (row === undefined) return undefined // released meanwhile: claim again
              if (row.key_id !== scope.keyId) return yield* new IdempotencyConflict({ message: usedByAnotherKeyMessage })
              if (row.request_sha256 !== requestSha256) {
                return yield* new IdempotencyConflict({ message: reusedMessage })
              }
              if (row.state === "COMPLETED") {
                return { _tag: "Replay", response: { status: row.response_status!, body: row.response_body! } } as Claim
              }
              // Rule 5, and rule 7's hold; a request whose process is gone holds nothing (this process is never gone
              // to itself, whatever its heartbeat says).
              if (!row.owner_gone && row.locked_until.getTime() > now) {
                return yield* new IdempotencyConflict({ message: inProgressMessage })
              }
              yield* sql`UPDATE idempotency_records SET state = 'IN_PROGRESS', locked_until = ${lease},
                owner_instance = ${instance.id}, claim_id = ${claimId}, updated_at = ${new Date(now)}
                WHERE ${where(scope)}`
              return { _tag: "Execute", claimId } as Claim
            }))
            if (decided !== undefined) return decided
          }
          return yield* Effect.die(new Error("idempotency record kept disappearing"))
        }).pipe(Effect.catchTag("SqlError", Effect.die))

      /** The outcome of an execution that did not commit its response itself; only under its own claim. */
      const settle = (scope: IdempotencyScope, claimId: string, exit: Exit.Exit<StoredResponse, unknown>) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const settled = Exit.isSuccess(exit)
            ? yield* sql`UPDATE idempotency_records SET state = 'COMPLETED', response_status = ${exit.value.status},
                response_body = ${exit.value.body}, owner_instance = NULL, claim_id = NULL,
                updated_at = ${new Date(now)}
                WHERE ${claimed(scope, claimId)} RETURNING 1`
            : isRetryableCause(exit.cause)
            ? yield* sql`UPDATE idempotency_records SET state = 'RETRYABLE_FAILURE',
                locked_until = ${new Date(now + retryableHoldSeconds * 1000)}, owner_instance = NULL, claim_id = NULL,
                updated_at = ${new Date(now)}
                WHERE ${claimed(scope, claimId)} RETURNING 1`
            : yield* sql`DELETE FROM idempotency_records WHERE ${claimed(scope, claimId)} RETURNING 1`
          if (settled.length === 0) {
            // This process looked gone (a stalled event loop, a lost connection) and another re-executed the request.
            yield* Effect.logWarning(`idempotency key ${scope.key} was taken over while it executed here`)
          }
        }).pipe(Effect.orDie)

      /** The record's UPDATE to COMPLETED with `response`, under this execution's claim only. */
      const storeResponse = (scope: IdempotencyScope, claimId: string, response: StoredResponse, now: number) =>
        sql`UPDATE idempotency_records SET state = 'COMPLETED', response_status = ${response.status},
          response_body = ${response.body}, owner_instance = NULL, claim_id = NULL, updated_at = ${new Date(now)}
          WHERE ${claimed(scope, claimId)} RETURNING 1`

      /** The record's INSERT as COMPLETED with `response`, for a run that took no claim first (`freshReceipt`). */
      const insertResponse = (scope: IdempotencyScope, requestSha256: string, response: StoredResponse, now: number) =>
        sql`INSERT INTO idempotency_records (tenant_id, key_id, endpoint, idempotency_key, request_sha256, state,
            response_status, response_body, locked_until, created_at, updated_at, tenant_wide)
          VALUES (${scope.tenantId}, ${scope.keyId}, ${recordEndpoint(scope)}, ${scope.key}, ${requestSha256}, 'COMPLETED',
            ${response.status}, ${response.body}, ${new Date(now)}, ${new Date(now)}, ${new Date(now)},
            ${scope.tenantWide === true})
          ON CONFLICT DO NOTHING
          RETURNING 1`

      /** The receipt as data: under the execution's claim (`claimId`), or inserted by the statement (null). */
      const receiptRow = (
        scope: IdempotencyScope,
        requestSha256: string,
        claimId: string | null,
        response: StoredResponse,
        now: number
      ): ReceiptRow => ({
        tenant_id: scope.tenantId,
        key_id: scope.keyId,
        endpoint: recordEndpoint(scope),
        idempotency_key: scope.key,
        claim_id: claimId,
        response_status: response.status,
        response_body: response.body,
        updated_at: new Date(now).toISOString(),
        fresh: claimId === null,
        request_sha256: requestSha256,
        tenant_wide: scope.tenantWide === true
      })

      const makeCommit = (
        scope: IdempotencyScope,
        requestSha256: string,
        claimId: string,
        onCommitted: (response: StoredResponse) => void
      ): Commit => {
        const inTransaction = (response: StoredResponse) =>
          Effect.gen(function*() {
            if (Option.isNone(yield* Effect.serviceOption(sql.transactionService))) {
              return yield* Effect.die(new Error("an idempotent response must be committed inside its effect's transaction"))
            }
            const stored = yield* storeResponse(scope, claimId, response, yield* Clock.currentTimeMillis)
            if (stored.length === 0) {
              return yield* Effect.die(new Error(`idempotency key ${scope.key} was taken over; its effect is rolled back`))
            }
            yield* crash.reach("before-commit")
            yield* sql.afterCommit(Effect.andThen(Effect.sync(() => onCommitted(response)), crash.reach("after-commit")))
          }).pipe(Effect.orDie)
        const inStatement: StoreInStatement<StoredResponse> = (response, write) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const store = storeResponse(scope, claimId, response, now)
            const receipt = receiptRow(scope, requestSha256, claimId, response, now)
            // The statement is the commit: before it nothing of the effect is written, after it everything is.
            yield* crash.reach("before-commit")
            const written = yield* write(store, receipt)
            onCommitted(response)
            yield* crash.reach("after-commit")
            return written
          })
        return Object.assign(inTransaction, { inStatement, claim: Effect.void })
      }

      /**
       * The answer of a request whose effect committed: the effect and its receipt are durable, so what follows the
       * commit (entity messages, which supervisors repeat) cannot undo them, and the stored bytes are the answer, now
       * and on every replay. An effect that answered other bytes than it stored is a defect.
       */
      const answerCommitted = <E>(scope: IdempotencyScope, stored: StoredResponse, exit: Exit.Exit<StoredResponse, E>) =>
        Effect.gen(function*() {
          if (Exit.isFailure(exit)) {
            yield* Effect.logWarning(`idempotent request ${scope.key} failed after its commit`, exit.cause)
          } else if (exit.value.status !== stored.status || exit.value.body !== stored.body) {
            return yield* Effect.die(new Error(`idempotent request ${scope.key} answered other bytes than it stored`))
          }
          yield* crash.reach("before-reply")
          return stored
        })

      /**
       * `RunOptions.claimInStatement`: `execute` runs with no claim; its statement inserts the record with the answer
       * (a `fresh` receipt), or `Commit.claim` takes the claim on the way. Whatever stops it short of its statement
       * (the key held: a replay, a conflict; or its own failure) is answered as the key's state says, read by a claim
       * taken then: a held key as usual (rule 3 before the failure, as when the claim came first), a free one with the
       * failure, settled as usual.
       */
      const runClaimingInStatement = <E, R>(
        scope: IdempotencyScope,
        requestSha256: string,
        execute: (commit: Commit) => Effect.Effect<StoredResponse, E, R>
      ): Effect.Effect<StoredResponse, E | IdempotencyConflict, R> =>
        Effect.gen(function*() {
          // Nothing of the request is written until its statement: a crash here leaves the key free, as after a claim
          // of a process that is gone.
          yield* crash.reach("after-claim")
          let claimId: string | undefined
          let committed: StoredResponse | undefined
          // The key turned out held: the answer for it (a replay, a conflict), the effect stopped.
          // (A holder object: assigned inside closures, which TypeScript's narrowing does not follow.)
          const key: { held?: Exit.Exit<StoredResponse, IdempotencyConflict> } = {}
          const stopped = new ReceiptNotStored("the idempotency key is held by another request")
          /** Claims the key; held, records the answer and stops the effect. */
          const takeClaim = Effect.flatMap(Effect.exit(claim(scope, requestSha256)), (outcome) => {
            if (Exit.isSuccess(outcome) && outcome.value._tag === "Execute") {
              claimId = outcome.value.claimId
              return Effect.void
            }
            key.held = Exit.isSuccess(outcome) && outcome.value._tag === "Replay"
              ? Exit.succeed(outcome.value.response)
              : outcome as Exit.Exit<never, IdempotencyConflict>
            return Effect.die(stopped)
          })
          const onCommitted = (response: StoredResponse) => (committed = response)
          const inStatement: StoreInStatement<StoredResponse> = (response, write) =>
            Effect.suspend(() => {
              if (claimId !== undefined) return makeCommit(scope, requestSha256, claimId, onCommitted).inStatement(response, write)
              return Effect.gen(function*() {
                const now = yield* Clock.currentTimeMillis
                yield* crash.reach("before-commit")
                const written = yield* write(
                  insertResponse(scope, requestSha256, response, now),
                  receiptRow(scope, requestSha256, null, response, now)
                ).pipe(Effect.catchDefect((defect) =>
                  defect instanceof ReceiptNotStored
                    // The key was held when the statement ran: claimed now, it is either held still (stop) or free
                    // again (its holder failed and released it), and the statement is written under the claim.
                    ? Effect.andThen(
                      takeClaim,
                      Effect.suspend(() => makeCommit(scope, requestSha256, claimId!, onCommitted).inStatement(response, write))
                    )
                    : Effect.die(defect)
                ))
                onCommitted(response)
                yield* crash.reach("after-commit")
                return written
              })
            })
          const inTransaction = (response: StoredResponse) =>
            Effect.suspend(() =>
              claimId === undefined
                ? Effect.die(new Error("a response stored in a transaction needs the key claimed first (Commit.claim)"))
                : makeCommit(scope, requestSha256, claimId, onCommitted)(response)
            )
          const commit: Commit = Object.assign(inTransaction, {
            inStatement,
            claim: Effect.suspend(() => claimId === undefined ? takeClaim : Effect.void)
          })
          const exit = yield* Effect.exit(execute(commit))
          if (committed !== undefined) return yield* answerCommitted(scope, committed, exit)
          const heldNow = key.held
          if (heldNow !== undefined) {
            yield* crash.reach("before-reply")
            return yield* heldNow
          }
          // Stopped short of its statement with no claim: the key's state decides first, as had it been claimed first.
          if (claimId === undefined) yield* takeClaim.pipe(Effect.catchDefect(() => Effect.void))
          const heldAfter = (key as typeof key).held
          if (heldAfter !== undefined) {
            yield* crash.reach("before-reply")
            return yield* heldAfter
          }
          yield* settle(scope, claimId!, exit)
          yield* crash.reach("before-reply")
          return yield* exit
        }).pipe(Effect.uninterruptible)

      const run = <E, R>(scope: IdempotencyScope, requestSha256: string, execute: Execute<E, R>, options?: RunOptions) =>
        options?.claimInStatement === true && !Effect.isEffect(execute)
          ? runClaimingInStatement(scope, requestSha256, execute)
          : runClaimingFirst(scope, requestSha256, execute)

      const runClaimingFirst = <E, R>(scope: IdempotencyScope, requestSha256: string, execute: Execute<E, R>) =>
        Effect.gen(function*() {
          const decided = yield* claim(scope, requestSha256)
          if (decided._tag === "Replay") return decided.response
          yield* crash.reach("after-claim")
          let committed: StoredResponse | undefined
          const effect = Effect.isEffect(execute)
            ? execute
            : execute(makeCommit(scope, requestSha256, decided.claimId, (response) => (committed = response)))
          // Settling must happen whatever the caller does, so the claim and its outcome are one uninterruptible unit.
          const exit = yield* Effect.exit(effect)
          if (committed !== undefined) return yield* answerCommitted(scope, committed, exit)
          yield* settle(scope, decided.claimId, exit)
          yield* crash.reach("before-reply")
          return yield* exit
        }).pipe(Effect.uninterruptible)

      return Idempotency.of({ run })
    })
  ).pipe(Layer.provideMerge(ServiceInstance.layer), Layer.provideMerge(CrashPoints.layer))
}
