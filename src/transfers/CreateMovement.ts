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
 */
import { Effect } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { Forbidden, type InsufficientBalance, LimitExceeded, NotFound, WalletNotActive } from "../domain/ApiError.ts"
import { Ledger, type PostResult, type PreparedEntries, sqlStateOf } from "../ledger/Ledger.ts"
import type { StoreInStatement } from "../idempotency/Idempotency.ts"
import { insertTransactionStatement, type NewTransaction } from "../transactions/NewTransaction.ts"
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
}

/** A movement to create (`createMovement`). */
export interface NewMovement<A> {
  /** Its transaction row: the payer (source wallet and user), asset, amount and time are what the hold checks. */
  readonly transaction: NewTransaction
  /** Its other rows (its event, a withdrawal's own row): data-modifying queries, each answering a row it wrote. */
  readonly rows: ReadonlyArray<Statement.Fragment>
  /** Its one ledger entry (`Ledger.prepare`, read before the statement). */
  readonly entry: PreparedEntries
  /** The daily limit it counts against, if any (TransferQuotes.ts). */
  readonly dailyLimit: bigint | undefined
  /** The answer to store with it (the idempotency receipt, Idempotency.ts `StoreInStatement`), if any. */
  readonly receipt?: { readonly answer: A; readonly store: StoreInStatement<A> } | undefined
}

/**
 * Creates the movement in one statement (module comment): its transaction row, its other rows and its receipt, the
 * payer's hold, its entry. Fails with the hold's refusals or INSUFFICIENT_BALANCE, having written nothing.
 */
export const createMovement = <A>(
  movement: NewMovement<A>
): Effect.Effect<PostResult, HoldRefusal | InsufficientBalance, SqlClient.SqlClient | Ledger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { transaction } = movement
    const { walletId, userId } = transaction.source
    if (walletId === undefined || walletId === null || userId === undefined || userId === null) {
      return yield* Effect.die(new Error(`movement ${transaction.id} has no paying wallet and user`))
    }
    const write = (receiptRow?: Statement.Fragment) =>
      holdPayerAndCreate({
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
          ...movement.rows,
          ...(receiptRow === undefined ? [] : [receiptRow])
        ],
        entry: movement.entry
      })
    const receipt = movement.receipt
    return yield* receipt === undefined ? write() : receipt.store(receipt.answer, write)
  })

/** The hold's refusals by SQLSTATE (sql/0021_payer_hold_and_daily_totals.sql). */
const refusals: Record<string, () => HoldRefusal> = {
  CF010: () => new LimitExceeded({ message: dailyLimitExceededMessage }),
  CF011: () => new Forbidden({ message: userFrozenMessage }),
  CF012: () => new WalletNotActive({ message: payerNotActiveMessage }),
  CF013: () => new NotFound({ message: "wallet not found" })
}

const refusalOf = (error: SqlError.SqlError): Effect.Effect<never, HoldRefusal> => {
  const refusal = refusals[String(sqlStateOf(error))]
  return refusal === undefined ? Effect.die(error) : Effect.fail(refusal())
}

/** The statement: the rows, then the hold, then the entry; answers the entry's result. */
const holdPayerAndCreate = (
  movement: Movement
): Effect.Effect<PostResult, HoldRefusal | InsufficientBalance, SqlClient.SqlClient | Ledger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const { hold, rows } = movement
    const names = rows.map((_, index) => sql.literal(`movement_${index}`))
    const written = names.length === 0 ? sql`true` : sql.and(names.map((name) => sql`EXISTS (SELECT FROM ${name})`))
    const limit = hold.dailyLimit
    const first = sql`first AS MATERIALIZED (
      SELECT hold_payer_or_refuse(${hold.walletId}, ${limit === undefined ? null : dailyLimitLockKey(hold)},
        ${limit === undefined ? null : limit.toString()}::numeric, ${hold.amount.toString()}::numeric,
        ${hold.userId}, ${hold.assetId}, ${utcDay(hold.nowMillis)}::date, ${hold.movementId}, ${written}) AS held)`
    const before = sql.join(",", false)([...rows.map((row, index) => sql`${names[index]!} AS (${row})`), first])
    const { result } = yield* ledger.postPreparedAfter(movement.entry, before).pipe(
      Effect.catchTag("SqlError", refusalOf)
    )
    if (result === undefined) return yield* Effect.die(new Error("the payer's hold answered no row"))
    return result
  })
