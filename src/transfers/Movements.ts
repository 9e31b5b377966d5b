/**
 * The creation of a movement of a payer's funds (an internal transfer, a withdrawal) in one statement, with no
 * transaction around it: the movement's own rows (transaction, event, idempotency receipt, ...), then the payer's
 * hold, then its one ledger entry. One round trip instead of a transaction's six, and no transaction open across
 * turns of the event loop.
 *
 * The hold (`hold_payer_or_refuse`, sql/0021_payer_hold_and_daily_totals.sql) is the binding check of the payer's
 * standing and the daily limit. The handlers check the user and wallet status first (spec 4.4, the ordered checks), but
 * an operator freeze (PATCH /ops/tenants/{id}/wallets/{id}, a user freeze) may commit between that read and the
 * movement. The hold takes the daily limit's lock when the asset has a limit (DailyLimit.ts), then reads the payer's
 * wallet and user rows `FOR SHARE` with the day's total: a freeze's UPDATE and a movement then serialize, so a movement
 * either commits before the freeze or sees it and fails with the same error the early check gives
 * (operator-interface.md, "Switches": a `FROZEN` wallet cannot send).
 *
 * Order, in the lock order of docs/ledger.md: the movement's rows are written first (they lock nothing another
 * creator waits on, and are then not part of the time the lock is held, which is what bounds one payer's movements
 * per second), then the hold, then the entry, whose postings lock the accounts at the statement's end. The hold
 * refuses by raising, in the order of the checks: the limit, then the user, then the wallet; the balance
 * (INSUFFICIENT_BALANCE, the postings' trigger) comes after all of them. Any refusal fails the statement whole.
 *
 * Concurrent movements share statements (`Movements`, a group commit as db/GroupCommit.ts has it): each request
 * still waits for its own movement's commit, but the database sees one statement and one commit per flush, and one
 * payer's movements take the payer's account row once per flush instead of once each. In a shared statement every
 * movement's rows come first, then the holds one after the other, then all the entries, whose postings lock the
 * accounts in id order at the statement's end (the same lock order as alone). Movements are queued by their payer's
 * user, so what is locked per user (the limit's lock, the payer's rows, the day's total) is taken by one queue of a
 * process, and a shared statement takes it in the order of the users, the same in every process. A hold reads the day's total without
 * the statement's own movements (their trigger fires at its end), so a hold is asked for its movement plus those
 * before it in the statement with the same limit (user, asset, day): N movements that each fit but together exceed
 * the limit never all pass, shared or not. A shared statement that fails (a refusal, an overdraft, a lost
 * idempotency claim, a deadlock with another process) is written again one movement at a time, so each request gets
 * its own answer, the same as alone; for internal transfers, only the member a refusal names is written alone and the
 * rest again together (`writeAsData`).
 *
 * Money by the batch (issue 34): movements whose rows are all data (internal transfers: their transaction, events and
 * idempotency receipt) are written by `createTransfers`, one statement whose text is the same for any number of them
 * (JSON arrays; planned once per connection), with every hold in one call (`hold_payers_or_refuse`) and the ledger's
 * statement trigger applying each account's summed change once (sql/0033_ledger_statement_triggers.sql). Their
 * idempotency records are inserted by it too, with no claim committed before (Idempotency.ts `claimInStatement`). There is one
 * queue (`movementQueues`): with a statement that costs little more per member, the largest batches are the cheapest.
 */
import { Context, Effect, Exit, Layer } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { makeGroupCommit, outsideTransaction, stripeOf, togetherOrAlone } from "../db/GroupCommit.ts"
import { Forbidden, type InsufficientBalance, LimitExceeded, NotFound, WalletNotActive } from "../domain/ApiError.ts"
import { Ledger, mergePrepared, type PostResult, type PreparedEntries, sqlStateOf } from "../ledger/Ledger.ts"
import { type ReceiptRow, ReceiptNotStored, type StoreInStatement } from "../idempotency/Idempotency.ts"
import { insertOutboxRows, type OutboxRow } from "../outbox/Outbox.ts"
import {
  insertTransactionsStatement,
  insertTransactionStatement,
  type NewTransaction
} from "../transactions/NewTransaction.ts"
import { userFrozenMessage } from "../users/UserRules.ts"
import { dailyLimitExceededMessage, dailyLimitLockKey, utcDay } from "./DailyLimit.ts"

export const payerNotActiveMessage = "the paying wallet is not active"

export type HoldRefusal = LimitExceeded | Forbidden | NotFound | WalletNotActive

interface HoldRequest {
  readonly walletId: string
  readonly userId: string
  readonly assetId: string
  readonly amount: bigint
  readonly dailyLimit: bigint | undefined
  /** The creation time of the movement: the UTC day it counts in. */
  readonly nowMillis: number
  /** The movement the statement creates (named in the hold's refusals). */
  readonly movementId: string
}

interface Movement {
  readonly hold: HoldRequest
  /**
   * The movement's own rows: data-modifying queries, each answering a row (`RETURNING`) when it wrote. One that
   * answers none (an idempotency claim taken over) fails the statement.
   */
  readonly rows: ReadonlyArray<Statement.Fragment>
  /** The movement's one ledger entry (`Ledger.prepare`, read before the statement). */
  readonly entry: PreparedEntries
  /**
   * The same rows as data, when all of them can be (an internal transfer: its transaction, its events, its receipt):
   * such movements are written by the statement of fixed text (`transfersStatement`), the others by `rows`.
   */
  readonly asData?: {
    readonly transaction: NewTransaction
    readonly events: ReadonlyArray<OutboxRow>
    readonly receipt: ReceiptRow | undefined
    /** An on-chain withdrawal: its `withdrawals` row is inserted too. */
    readonly withdrawal: boolean
  } | undefined
}

/** A movement to create (`Movements.create`). */
export interface NewMovement<A> {
  /** Its transaction row: the payer (source wallet and user), asset, amount and time are what the hold checks. */
  readonly transaction: NewTransaction
  /** Its other rows (its event, a withdrawal's own row): data-modifying queries, each answering a row it wrote. */
  readonly rows: ReadonlyArray<Statement.Fragment>
  /**
   * An on-chain withdrawal: its `withdrawals` row (the transaction's id alone) is inserted with it, as data, so a
   * withdrawal whose other rows are events shares the statement of fixed text with transfers (issue 34).
   */
  readonly withdrawal?: boolean | undefined
  /**
   * Its events as rows (Outbox `rowOf`), inserted with it. A movement whose other rows are all events, given here
   * with `rows` empty, goes through the statement of fixed text (module comment).
   */
  readonly events?: ReadonlyArray<OutboxRow> | undefined
  /** Its one ledger entry (`Ledger.prepare`, read before the statement). */
  readonly entry: PreparedEntries
  /** The daily limit it counts against, if any (TransferQuotes.ts). */
  readonly dailyLimit: bigint | undefined
  /** The answer to store with it (the idempotency receipt, Idempotency.ts `StoreInStatement`), if any. */
  readonly receipt?: { readonly answer: A; readonly store: StoreInStatement<A> } | undefined
}

/**
 * Queues of movements (by the payer's user), each writing its own statements: at most this many at once. One since
 * issue 34 (module comment); four before, when each statement's cost grew with its members' rows and triggers.
 */
const movementQueues = 1
/** Movements per shared statement at most. */
const movementBatchMax = 64

type Written = Exit.Exit<PostResult, HoldRefusal | InsufficientBalance>

/** Movements in one statement at most. */
const movementsPerStatementMax = 32

/**
 * A flush's movements (in lock order) as the statements that write them: of a power of two each, largest first.
 * Each statement's text depends on how many movements it holds, and PostgreSQL plans a prepared statement anew at
 * each of its first executions on a connection: with any size, the rare large ones were planned at every call (4-19
 * ms for 16 movements, in the bench's transfers load). With powers of two there are six shapes, each soon planned
 * once per connection, for at most a few statements per flush.
 */
const statementChunks = (order: ReadonlyArray<number>): ReadonlyArray<ReadonlyArray<number>> => {
  const chunks: Array<ReadonlyArray<number>> = []
  let start = 0
  while (start < order.length) {
    let size = 1
    while (size * 2 <= Math.min(order.length - start, movementsPerStatementMax)) size *= 2
    chunks.push(order.slice(start, start + size))
    start += size
  }
  return chunks
}

export class Movements extends Context.Service<Movements, {
  /**
   * Creates the movement (module comment): its transaction row, its other rows and its receipt, the payer's hold, its
   * entry, committed together, alone or in a statement shared with concurrent movements. Fails with the hold's
   * refusals or INSUFFICIENT_BALANCE, having written nothing.
   */
  readonly create: <A>(movement: NewMovement<A>) => Effect.Effect<PostResult, HoldRefusal | InsufficientBalance>
}>()("coffer/Movements") {
  static readonly layer = Layer.effect(
    Movements,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ledger = yield* Ledger

      /** The movements' statement (alone, the movement's own), its refusals as the spec's errors. */
      const write = (movements: ReadonlyArray<Movement>) =>
        holdPayerAndCreate(movements).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.provideService(Ledger, ledger)
        )

      /**
       * The same, for movements whose rows are all data (`createTransfers`). When the statement fails, the member that
       * failed it is written alone and the rest again together (`failedMember`); when the failure names no member
       * (an overdraft names its account, a receipt not stored names none), the batch is halved until it does. Every
       * member still gets the answer it would have had alone, and a refusal costs a few statements, not one per
       * member.
       */
      const writeAsData = (movements: ReadonlyArray<Movement>): Effect.Effect<ReadonlyArray<Written>> =>
        Effect.gen(function*() {
          let failedId: string | undefined
          const together = yield* Effect.exit(createTransfers(movements, (id) => (failedId = id)).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.provideService(Ledger, ledger)
          ))
          if (Exit.isSuccess(together)) return together.value.map((result) => Exit.succeed(result) as Written)
          if (movements.length === 1) return [Exit.failCause(together.cause) as Written]
          const failed = movements.findIndex((movement) => movement.hold.movementId === failedId)
          if (failed >= 0) {
            const rest = yield* writeAsData(movements.filter((_, index) => index !== failed))
            const [alone] = yield* writeAsData([movements[failed]!])
            return [...rest.slice(0, failed), alone!, ...rest.slice(failed)]
          }
          const half = Math.ceil(movements.length / 2)
          return [...yield* writeAsData(movements.slice(0, half)), ...yield* writeAsData(movements.slice(half))]
        })

      /**
       * A flush: the movements in one statement, or, when that fails whole, each in its own (so each request gets
       * its own answer). In the order of their payers' users, then their daily limits (`lockOrder`): what a
       * statement locks per user (the limit's lock, the payer's rows, the day's total) it then takes in the same
       * order in every process, and the accounts in id order after all of it (docs/ledger.md "Lock order").
       */
      const writeBatch = (batch: ReadonlyArray<Movement>): Effect.Effect<ReadonlyArray<Written>> =>
        Effect.gen(function*() {
          const order = batch.map((_, index) => index).sort((a, b) => {
            const [x, y] = [lockOrder(batch[a]!.hold), lockOrder(batch[b]!.hold)]
            return x < y ? -1 : x > y ? 1 : a - b
          })
          const results: Array<Written> = new Array(batch.length)
          // Movements whose rows are all data: one statement of fixed text, whatever their number.
          const asData = order.filter((index) => batch[index]!.asData !== undefined)
          if (asData.length > 0) {
            const written = yield* writeAsData(asData.map((index) => batch[index]!))
            asData.forEach((index, position) => {
              results[index] = written[position]!
            })
          }
          const others = order.filter((index) => batch[index]!.asData === undefined)
          for (const chunk of statementChunks(others)) {
            const written = yield* togetherOrAlone(chunk.map((index) => batch[index]!), write)
            chunk.forEach((index, position) => {
              results[index] = written[position]!
            })
          }
          return results
        }).pipe(outsideTransaction(sql))

      const queues = yield* Effect.forEach(
        Array.from({ length: movementQueues }),
        () => makeGroupCommit<Movement, Written>({ batchMax: movementBatchMax, write: writeBatch })
      )
      /** The payer's user decides the queue: one user's movements, and its daily limits' locks, share one. */
      const queueOf = (userId: string) => queues[stripeOf(userId, movementQueues)]!

      const create = <A>(movement: NewMovement<A>) =>
        Effect.gen(function*() {
          const { transaction } = movement
          const { walletId, userId } = transaction.source
          if (walletId === undefined || walletId === null || userId === undefined || userId === null) {
            return yield* Effect.die(new Error(`movement ${transaction.id} has no paying wallet and user`))
          }
          const events = movement.events ?? []
          const write = (receiptRow?: Statement.Fragment, receiptData?: ReceiptRow) =>
            Effect.flatten(queueOf(userId)({
              hold: {
                walletId,
                userId,
                assetId: transaction.assetId,
                amount: transaction.amount,
                dailyLimit: movement.dailyLimit,
                nowMillis: transaction.at.getTime(),
                movementId: transaction.id
              },
              rows: [
                insertTransactionStatement(sql, transaction),
                ...(movement.withdrawal === true
                  ? [sql`INSERT INTO withdrawals (transaction_id) VALUES (${transaction.id}) RETURNING transaction_id`]
                  : []),
                ...movement.rows,
                ...(events.length === 0 ? [] : [insertOutboxRows(sql, events)]),
                ...(receiptRow === undefined ? [] : [receiptRow])
              ],
              entry: movement.entry,
              // A receipt given only as a query (a caller's own) cannot travel as data.
              asData: movement.rows.length === 0 && (receiptRow === undefined || receiptData !== undefined)
                ? { transaction, events, receipt: receiptData, withdrawal: movement.withdrawal === true }
                : undefined
            }))
          const receipt = movement.receipt
          return yield* receipt === undefined ? write() : receipt.store(receipt.answer, write)
        })

      return Movements.of({ create })
    })
  )
}

/** The hold's refusals by SQLSTATE (sql/0021_payer_hold_and_daily_totals.sql). */
const refusals: Record<string, () => HoldRefusal> = {
  CF010: () => new LimitExceeded({ message: dailyLimitExceededMessage }),
  CF011: () => new Forbidden({ message: userFrozenMessage }),
  CF012: () => new WalletNotActive({ message: payerNotActiveMessage }),
  CF013: () => new NotFound({ message: "wallet not found" })
}

const refusalOf = (error: SqlError.SqlError): Effect.Effect<never, HoldRefusal> => {
  const state = String(sqlStateOf(error))
  // A receipt's row not written (a claim taken over, a key held): the caller's idempotency run reads the key again.
  if (state === receiptNotWrittenSqlState || isHeldKey(error)) {
    const cause: unknown = error.reason.cause
    const message = typeof cause === "object" && cause !== null && "message" in cause ? String(cause.message) : error.message
    return Effect.die(new ReceiptNotStored(message, { cause: error }))
  }
  const refusal = refusals[state]
  return refusal === undefined ? Effect.die(error) : Effect.fail(refusal())
}

/** sql/0021 and sql/0033: not every row of the movement was written (its receipt's, in practice). */
const receiptNotWrittenSqlState = "CF014"

/**
 * A record inserted by the statement (`movement_records`) whose key is held: a plain INSERT, not `ON CONFLICT DO
 * NOTHING`, whose speculative insertion writes one WAL record more per row (its confirmation); the unique violation
 * fails the statement as a missing row would.
 */
const isHeldKey = (error: SqlError.SqlError): boolean => {
  const cause: unknown = error.reason.cause
  const constraint = typeof cause === "object" && cause !== null && "constraint" in cause ? cause.constraint : undefined
  return sqlStateOf(error) === "23505" && typeof constraint === "string" && constraint.startsWith("idempotency_records_")
}

/** The movement a hold's refusal names (its DETAIL, sql/0033 `hold_payers_or_refuse`), if any. */
const refusedMovementOf = (error: SqlError.SqlError): string | undefined => {
  const cause: unknown = error.reason.cause
  const detail = typeof cause === "object" && cause !== null && "detail" in cause ? cause.detail : undefined
  return typeof detail === "string" && String(sqlStateOf(error)) in refusals ? detail : undefined
}

/** The daily limit a hold counts against (user, asset, UTC day), or "" for a movement with no limit. */
const limitKey = (hold: HoldRequest): string =>
  hold.dailyLimit === undefined ? "" : `${dailyLimitLockKey(hold)}:${utcDay(hold.nowMillis)}`

/** Where a movement goes in a shared statement: by its payer's user, then its limit. */
const lockOrder = (hold: HoldRequest): string => `${hold.userId}/${limitKey(hold)}`

/**
 * The statement: every movement's rows, then their holds one after the other (each hold's arguments wait for the one
 * before, so the limits' locks are taken in the movements' order), then all their entries; answers each entry's
 * result, in the movements' order. A hold is asked for its amount plus that of the movements before it in the
 * statement with the same limit: their totals join the day's only at the statement's end.
 */
const holdPayerAndCreate = (
  movements: ReadonlyArray<Movement>
): Effect.Effect<ReadonlyArray<PostResult>, HoldRefusal | InsufficientBalance, SqlClient.SqlClient | Ledger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const alone = movements.length === 1
    const countedBefore = new Map<string, bigint>()
    const parts: Array<Statement.Fragment> = []
    movements.forEach((movement, index) => {
      const { hold, rows } = movement
      // Alone, the names the statement always had; shared, each movement's own.
      const prefix = alone ? "" : `m${index}_`
      const names = rows.map((_, row) => sql.literal(`${prefix}movement_${row}`))
      const own = names.length === 0 ? sql`true` : sql.and(names.map((name) => sql`EXISTS (SELECT FROM ${name})`))
      const written = index === 0 ? own : sql`${own} AND EXISTS (SELECT FROM ${sql.literal(`m${index - 1}_first`)})`
      const limit = hold.dailyLimit
      const key = limitKey(hold)
      const counted = (countedBefore.get(key) ?? 0n) + hold.amount
      if (limit !== undefined) countedBefore.set(key, counted)
      parts.push(...rows.map((row, position) => sql`${names[position]!} AS (${row})`))
      parts.push(sql`${sql.literal(`${prefix}first`)} AS MATERIALIZED (
        SELECT hold_payer_or_refuse(${hold.walletId}, ${limit === undefined ? null : dailyLimitLockKey(hold)},
          ${limit === undefined ? null : limit.toString()}::numeric, ${counted.toString()}::numeric,
          ${hold.userId}, ${hold.assetId}, ${utcDay(hold.nowMillis)}::date, ${hold.movementId}, ${written}) AS held)`)
    })
    if (!alone) {
      parts.push(sql`first AS MATERIALIZED (SELECT held FROM ${sql.literal(`m${movements.length - 1}_first`)})`)
    }
    const before = sql.join(",", false)(parts)
    const prepared = alone ? movements[0]!.entry : mergePrepared(movements.map((movement) => movement.entry))
    const { first, results } = yield* ledger.postPreparedAfter(prepared, before).pipe(
      Effect.catchTag("SqlError", refusalOf)
    )
    if (first === undefined || results.length !== movements.length) {
      return yield* Effect.die(new Error("the payers' holds answered no row"))
    }
    return results
  })

/**
 * The statement of fixed text (module comment, "Money by the batch"): the movements' transactions, events,
 * withdrawals' rows and receipts each inserted (or, for the receipts, updated under their claims) by one set-based query over a JSON array,
 * then every hold at once (`hold_payers_or_refuse`, sql/0033_ledger_statement_triggers.sql: the limits' locks, the
 * payers' rows, the checks), then all entries and postings (Ledger `postPreparedAfter`), whose statement trigger sums
 * each account's change, applies it once in account id order, refuses an overdraft and checks that every entry
 * balances. The text is the same for one movement and for sixty-four: PostgreSQL plans it once per connection.
 * A row missing (a receipt whose claim was taken over) fails the statement whole (CF014), as in `holdPayerAndCreate`.
 */
const createTransfers = (
  movements: ReadonlyArray<Movement>,
  onRefused: (movementId: string) => void
): Effect.Effect<ReadonlyArray<PostResult>, HoldRefusal | InsufficientBalance, SqlClient.SqlClient | Ledger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const data = movements.map((movement) => movement.asData!)
    const transactions = data.map((movement) => movement.transaction)
    const events = data.flatMap((movement) => movement.events)
    const stored = data.flatMap((movement) => movement.receipt === undefined ? [] : [movement.receipt])
    // Receipts under a claim taken before (an UPDATE of the claimed record), and records the statement inserts
    // (Idempotency.ts `RunOptions.claimInStatement`): one write of the record per transfer instead of two.
    const receipts = stored.filter((receipt) => !receipt.fresh)
    const records = stored.filter((receipt) => receipt.fresh)
    const withdrawals = data.flatMap((movement) => movement.withdrawal ? [movement.transaction.id] : [])
    const members = movements.map(({ hold }, ord) => ({
      ord,
      movement_id: hold.movementId,
      wallet_id: hold.walletId,
      user_id: hold.userId,
      asset_id: hold.assetId,
      amount: hold.amount.toString(),
      lock_key: hold.dailyLimit === undefined ? null : dailyLimitLockKey(hold),
      daily_limit: hold.dailyLimit === undefined ? null : hold.dailyLimit.toString(),
      day: utcDay(hold.nowMillis)
    }))
    const before = sql`
      movement_transactions AS (${insertTransactionsStatement(sql, transactions)}),
      movement_events AS (${insertOutboxRows(sql, events)}),
      movement_withdrawals AS (
        INSERT INTO withdrawals (transaction_id)
        SELECT x.id::uuid FROM jsonb_array_elements_text(${JSON.stringify(withdrawals)}::jsonb) AS x(id)
        RETURNING 1
      ),
      movement_receipts AS (
        UPDATE idempotency_records r SET state = 'COMPLETED', response_status = x.response_status,
          response_body = x.response_body, owner_instance = NULL, claim_id = NULL, updated_at = x.updated_at
        FROM jsonb_to_recordset(${JSON.stringify(receipts)}::jsonb) AS x(tenant_id uuid, key_id text, endpoint text,
          idempotency_key text, claim_id uuid, response_status integer, response_body text, updated_at timestamptz)
        WHERE r.tenant_id = x.tenant_id AND r.key_id = x.key_id AND r.endpoint = x.endpoint
          AND r.idempotency_key = x.idempotency_key AND r.state = 'IN_PROGRESS' AND r.claim_id = x.claim_id
        RETURNING 1
      ),
      movement_records AS (
        INSERT INTO idempotency_records (tenant_id, key_id, endpoint, idempotency_key, request_sha256, state,
          response_status, response_body, locked_until, created_at, updated_at, tenant_wide)
        SELECT x.tenant_id, x.key_id, x.endpoint, x.idempotency_key, x.request_sha256, 'COMPLETED', x.response_status,
          x.response_body, x.updated_at, x.updated_at, x.updated_at, x.tenant_wide
        FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS x(tenant_id uuid, key_id text, endpoint text,
          idempotency_key text, request_sha256 text, response_status integer, response_body text, updated_at timestamptz,
          tenant_wide boolean)
        RETURNING 1
      ),
      first AS MATERIALIZED (
        SELECT hold_payers_or_refuse(${JSON.stringify(members)}::jsonb,
          (SELECT count(*) FROM movement_transactions) = ${transactions.length}
            AND (SELECT count(*) FROM movement_events) = ${events.length}
            AND (SELECT count(*) FROM movement_withdrawals) = ${withdrawals.length}
            AND (SELECT count(*) FROM movement_receipts) = ${receipts.length}
            AND (SELECT count(*) FROM movement_records) = ${records.length}) AS held
      )`
    const { first, results } = yield* ledger.postPreparedAfter(
      mergePrepared(movements.map((movement) => movement.entry)),
      before
    ).pipe(Effect.catchTag("SqlError", (error) => {
      const refused = refusedMovementOf(error)
      if (refused !== undefined) onRefused(refused)
      return refusalOf(error)
    }))
    if (first === undefined || results.length !== movements.length) {
      return yield* Effect.die(new Error("the payers' holds answered no row"))
    }
    return results
  })
